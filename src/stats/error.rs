//! The error type of the statistics module.

use thiserror::Error;

/// Why a statistical computation could not be done. The messages are meant to be shown to
/// the user as they are.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum StatsError {
    /// A two-sample comparison needs at least two trials on each side to estimate variance.
    #[error(
        "{side} has {got} trial(s); at least {need} are needed to estimate trial-to-trial variance"
    )]
    TooFewValues {
        side: &'static str,
        got: usize,
        need: usize,
    },
    /// A value that must be a positive finite number (throughput, concurrency) is not.
    #[error("{what} must be positive and finite, got {value} (index {index})")]
    NonPositiveValue {
        what: &'static str,
        index: usize,
        value: f64,
    },
    /// A parameter is out of its valid range.
    #[error("invalid parameter {name} = {value}: {why}")]
    InvalidParameter {
        name: &'static str,
        value: f64,
        why: &'static str,
    },
    /// The USL has three parameters; fitting it needs at least three distinct concurrency levels.
    #[error("the USL fit needs at least 3 distinct concurrency levels, got {got}")]
    TooFewLevels { got: usize },
    /// The fit did not produce a usable result.
    #[error("the USL fit failed: {0}")]
    FitFailed(String),
}
