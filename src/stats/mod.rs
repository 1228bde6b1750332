//! Statistics across trials: summaries, the two-sample test, the USL fit.
//!
//! Every function here works on *trials* (independent replicates), never on individual
//! requests. The gate uses [`compare_log_ratio`], [`holm`], [`level_fails`] and
//! [`min_detectable_drop`]; the planner uses [`fit_usl`] and [`bootstrap_throughput_at`];
//! reports use [`Percentiles`] and [`Spread`].
//!
//! Reference values for the tests were computed with SciPy/NumPy; the scripts that produced
//! them live in `src/stats/reference/`.

#[cfg(test)]
mod calibration;
mod error;
pub mod sessions;
pub mod summary;
pub mod usl;
pub mod welch;

pub use error::StatsError;

pub use sessions::{
    between_session_variance, pooled_log_mean_variance, session_components, session_extra_variance,
    SessionComponents,
};
pub use summary::{percentile, Percentiles, Spread};

pub use usl::{bootstrap_throughput_at, fit_usl, UslFit};
pub use welch::{compare_log_ratio, holm, level_fails, min_detectable_drop, LogRatioComparison};
