//! When and how many: one run of a profile (bench.rs), its closed-loop sweep or open-loop
//! schedule, each trial's figures, and what watches the run (progress, interrupts, the
//! client's own headroom). Each request goes out through stream/ and the wire.

mod bench;
pub mod headroom;
pub mod interrupt;
pub mod openloop;
pub mod progress;
pub mod schedule_check;
mod slots;
pub mod sweep;
pub mod trial;

pub use bench::run_bench;
