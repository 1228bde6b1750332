//! The load generator: probe the server(s), run the sweep, account for every request.
//! The rooms follow a request's path: workload/ (what to ask) -> run/ (when, how many) ->
//! stream/ (one request and its answer) -> wire/ (body, connections, clock). Here stays what
//! looks at the server(s) around the requests rather than carrying one: probe, telemetry,
//! dialect (per-engine request fields and their check), gpu, servers/ (started by us).

mod bench_setup;
pub mod dialect;
pub mod discover;
pub mod gpu;
pub mod probe;
pub mod run;
pub mod selfbench;
pub mod servers;
pub mod stream;
pub mod telemetry;
#[cfg(test)]
mod test_server;
pub mod wire;
pub mod workload;

pub use bench_setup::{now_rfc3339, write_results, BenchOutcome, BenchSetup};
pub use run::run_bench;
