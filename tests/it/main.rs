//! The end-to-end tests: the real binary, real simulator processes, real git repositories,
//! all on 127.0.0.1. One test binary (one link of the dependency tree, not one per file);
//! each module is one behaviour. Tests that measure time take turns through
//! `common::timing_lock` so that the rest can run in parallel beside them.
//!
//! `cargo test --test it NAME` runs the tests whose path holds NAME (e.g. `bisect_cli`).

mod common;

mod action_recipe;
mod bench_cli;
mod bisect_cli;
mod ci_cli;
mod crossover_cli;
mod demo_cli;
mod dialects;
mod docs_from_demo;
mod example_profiles;
mod explain_cli;
mod faults_cli;
mod fingerprint_cli;
mod gate_cli;
mod gate_server_script;
mod headroom;
mod help_examples;
mod honest_gate;
mod hostile;
mod hostile_files;
mod https_cli;
mod init_gate;
mod layout;
mod lengths_cli;
mod llama_cpp;
mod managed_servers;
mod newcomer_cli;
mod openloop_cli;
mod plan_cli;
mod plan_lengths_mix;
mod plan_vs_reality;
mod plan_wrong_answers;
mod plot_cli;
mod prefix_cache_cli;
mod progress_cli;
mod promises;
mod readme_plan;
mod request_stream;
mod secrets_cli;
mod selfbench_cli;
mod selfbench_memory;
mod sim_session;
mod telemetry_cli;
mod trend_cli;
mod untrusted_files;
mod untrusted_text;
mod workflow_docs;
mod workloads_cli;
