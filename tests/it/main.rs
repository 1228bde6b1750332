//! The end-to-end tests: the real binary, real simulator processes, real git repositories,
//! all on 127.0.0.1. One test binary (one link of the dependency tree, not one per file);
//! each module is one behaviour. Tests that measure time are under `alone`: they run first,
//! two at a time and without other tests' processes, and the rest after them (alone/mod.rs).
//!
//! `cargo test --test it NAME` runs the tests whose path holds NAME (e.g. `bisect_cli`).

/// This binary's test threads, where neither `RUST_TEST_THREADS` nor `--test-threads` says.
/// The timed tests (under `alone`, which libtest starts first) run two at a time while the
/// other threads wait; then the rest run 6 at a time: they mostly wait on simulated servers,
/// and on 2 cores 6 at a time took 82 s, one at a time 277 s. The library's unit tests keep
/// libtest's default: a few of them time sockets and threads.
pub(crate) const TEST_THREADS: usize = 6;

/// Sets [`TEST_THREADS`] before libtest's `main` reads the variable: a function in the
/// binary's initialisers, which the loader runs before `main`, while one thread exists.
#[used]
#[link_section = ".init_array"]
static SET_TEST_THREADS: extern "C" fn() = {
    extern "C" fn set() {
        if std::env::var_os("RUST_TEST_THREADS").is_none() {
            std::env::set_var("RUST_TEST_THREADS", TEST_THREADS.to_string());
        }
    }
    set
};

mod common;

mod alone;
mod bench_tables;
mod bisect_folder;
mod calibration_pooling;
mod closed_stdout;
mod crossover_cli;
mod cut_results;
mod demo_cli;
mod dialects;
mod docs_from_demo;
mod faults_cli;
mod gate_server_script;
mod headroom;
mod help_examples;
mod hostile;
mod hostile_files;
mod hostile_integrity_a;
mod hostile_servers;
mod https_cli;
mod init_gate;
mod layout;
mod llama_cpp;
mod managed_servers;
mod pairs_failure;
mod plan_boundary;
mod plan_cli;
mod plan_lengths_mix;
mod plan_own_hardware;
mod plan_wrong_answers;
mod plot_cli;
mod pooled_gaps;
mod pooled_legs;
mod readme_plan;
mod recipes_fit;
mod request_stream;
mod secrets_cli;
mod selfbench_cli;
mod sim_session;
mod telemetry_cli;
mod trend_cli;
mod untrusted_files;
mod untrusted_text;
mod verdict_integrity;
mod wave_legs;
mod workflow_docs;
