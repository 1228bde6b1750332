//! The tests that measure time (`common::timing_lock`): they take turns, one at a time,
//! while the other tests' processes run beside them in Linux's idle scheduling class, on CPU
//! time the timed test leaves. libtest starts tests in the order of their names: with these
//! under one name that comes first, each waits for its turn on a test thread of its own from
//! the start, and the turns follow one another from the first. A timed test elsewhere would
//! start only when libtest reached its name and take its turn after the others;
//! tests/it/layout.rs keeps `timing_lock` here. A few tests here share the machine: they run
//! as soon as they start, like the rest.

mod action_recipe;
mod bench_cli;
mod bisect_cli;
mod blocks_verdicts;
mod ci_cli;
mod example_profiles;
mod explain_cli;
mod fingerprint_cli;
mod gate_cli;
mod honest_gate;
mod lengths_cli;
mod newcomer_cli;
mod openloop_cli;
mod prefix_cache_cli;
mod progress_cli;
mod promises;
mod selfbench_memory;
mod untrusted_gate_outputs;
mod workloads_cli;
