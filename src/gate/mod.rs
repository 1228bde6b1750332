//! The regression gate: did the change make the server slower, beyond what runs differ by?
//!
//! Two designs (`stats::decision`). **Relative**: the run measured the target branch's server
//! (base) and the pull request's (head) in one job, trials interleaved, so whatever shifts a
//! whole session shifts both arms and cancels; Welch on ln(tok/s) per level after a stated
//! outlier rule. **History**: the run against a baseline of main's past sessions, with the
//! between-session variance estimated from the session means (k - 1 degrees of freedom), so a
//! restarted server is not mistaken for a regression. Holm across the gated levels, then three
//! outcomes per level and overall: regression (significant and at least the minimum effect,
//! or beyond the gross-regression guard), no regression (the one-sided bound lies above
//! 1 - min_effect), inconclusive (the data cannot tell; the smallest detectable drop says
//! what they could have seen). Runs that measured something else are refused (exit 3).

pub mod baseline;
pub mod bisect;
mod block_groups;
pub mod check;
pub mod client_bound;
mod compare;
pub mod explain;
pub mod gitref;
pub mod history_need;
pub mod legs;
pub mod merge;
mod pairs;
pub mod pool;
pub mod sequential;
mod stopped_early;
pub mod trend;
pub mod verdict;

pub use check::{Against, Check};
pub use compare::{evaluate, evaluate_relative, throughput_decision};
pub use history_need::HistoryNeed;
pub use sequential::{undecided_levels, BlockPlan};
pub use verdict::{
    ArmEngines, LevelStatus, LevelVerdict, Outcome, SettingOverride, Verdict, ALLOW_REGRESSION,
};
