//! The built-in OpenAI-compatible simulated inference server: a continuous-batching
//! engine model (USL step times, prefill, MTP, FIFO admission) behind real HTTP, so the
//! load generator, the gate and the planner can be tested end to end without a GPU.
//!
//! Layout: `config` (knobs), `presets` (calibrated configurations), `sched` (the engine's
//! clock-free logic), `engine` (the real-time task), `replay` (virtual-time calibration),
//! `api` (OpenAI shapes), `http` (axum handlers, SSE), `metrics` (Prometheus), `cluster`
//! (replicas and the `serve-sim` command).

mod api;
mod cluster;
mod config;
mod engine;
mod http;
mod metrics;
mod presets;
mod replay;
mod sched;
#[cfg(test)]
mod tests;

pub use cluster::{run_cli, ServeSimArgs, SimCluster};
pub use config::SimConfig;
pub use replay::simulated_closed_loop_throughput;
pub use sched::FinishReason;
