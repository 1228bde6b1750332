//! The machinery around a measurement, below the commands, entered one way (`run`): a run
//! against servers that are up (`measure`), or a relative run in blocks whose servers
//! throughline starts, swaps and stops (`blocks`); the servers waited for before a check
//! (`ready`), an earlier run's files kept (`earlier`) and the record of the process groups
//! a run started (`processes`, read by `cleanup`). Commands build its typed setup from their
//! flags once, call it, and print.

mod block;
pub mod budget;
mod cost;
mod earlier;
mod fit;
mod in_blocks;
mod looks;
mod measure;
pub mod processes;
pub mod ready;
mod run;
mod setup;

pub use fit::refuse_unfit;
pub use measure::{check_base_endpoints, conclude, signal_received, write_plots, wrote_line};
pub use run::{run, take_output, RunSetup};
pub use setup::{BlocksSetup, Decide};
