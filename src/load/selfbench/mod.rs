//! The load generator measuring itself (`throughline selfbench`): how many streams and
//! chunks a second one client core sustains, what a stream costs in memory, and how far its
//! token timestamps are from the simulator's send times. Each case runs in a child process
//! of its own against a `serve-sim` child (process.rs), the two pinned to cores apart where
//! there are enough (process::pin): the throughput cases (cases.rs), the timing case
//! (timing.rs) and peak memory per trial length (memory.rs).

mod cases;
pub mod memory;
mod process;
mod timing;

pub use cases::{
    quiet_setup, run_case_here, run_timing_here, spawn_case, CaseFigures, SelfbenchReport,
};
pub use process::{run_on_client_runtime, spawn_child, SimProcess};
pub use timing::TimingFigures;
