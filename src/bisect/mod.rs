//! `throughline bisect`'s machinery: which commit made the server slower. Each commit the
//! search picks (gate/bisect.rs) is checked out in its own worktree, built, and its server
//! measured against the good commit's server in a relative run in blocks (runner/in_blocks.rs:
//! both started fresh in each block, slots swapped), so that a step calls a commit bad only
//! on the gate's regression verdict, with the same statistics as the pull-request check (and
//! the slots' A/A calibration of `--baseline`, where given). A commit the gate cannot tell
//! after its extra blocks is measured once more with twice the blocks; one that still
//! cannot be told, does not build or whose server does not start is skipped. Every step is
//! logged as it ends (journal.rs), so a killed bisect continues where it stopped.
//!
//! The rooms: the git walk and each commit's checkout and build (checkout.rs), the log of
//! steps (journal.rs, its hash chain in chain.rs), what the steps share (setup.rs), one
//! step measured and judged (measure.rs), the search and `--step` (search.rs). The command
//! (commands/bisect/) parses its flags, calls [`search`] or [`one_step`] and exits.

pub mod chain;
pub mod checkout;
pub mod journal;
mod measure;
mod search;
pub mod setup;

pub use search::{one_step, search};
pub use setup::{prepare_output, Bisect, BlocksFor, Settings};
