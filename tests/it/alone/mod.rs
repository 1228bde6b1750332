//! The tests that measure time (`common::timing_lock`): each runs with no other test's
//! processes beside it, two at a time (one with the machine to itself, `timing_lock_alone`;
//! common/machine.rs). libtest starts tests in the order of their names: with these under one
//! name that comes first, they all run at the start, and every other test runs after them,
//! several at a time (`TEST_THREADS`, main.rs). A timed test elsewhere would start among those, and
//! every test thread would wait while it waited for them to end; tests/it/layout.rs keeps
//! `timing_lock` here. A few tests here share the machine: they wait out the timed ones.

mod action_recipe;
mod bench_cli;
mod bisect_cli;
mod blocks_verdicts;
mod ci_cli;
mod example_profiles;
mod explain_blocks;
mod explain_cli;
mod fingerprint_cli;
mod gate_cli;
mod honest_gate;
mod lengths_cli;
mod newcomer_cli;
mod openloop_cli;
pub(crate) mod pairs_cli;
mod plan_vs_reality;
mod prefix_cache_cli;
mod progress_cli;
mod promises;
mod reviewer_view;
mod selfbench_memory;
mod untrusted_gate_outputs;
mod workloads_cli;
