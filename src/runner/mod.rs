//! The machinery around a measurement, below the commands: a run against servers that are
//! up (`measure`), a relative run in blocks whose servers throughline starts, swaps and
//! stops (`blocks`), an earlier run's files kept (`earlier`) and the record of the process
//! groups a run started (`processes`, read by `cleanup`). Commands build its typed setup
//! from their flags once, call it, and print.

mod block;
pub mod blocks;
mod cost;
pub mod earlier;
mod looks;
pub mod measure;
pub mod processes;
mod setup;

pub use blocks::{run_in_blocks, BlocksSetup, Decide};
pub use measure::{check_base_endpoints, conclude, measure, write_plots, wrote_line};
