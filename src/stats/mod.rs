//! Statistics: summaries, the gate's two-sample test, session variance, the new decision
//! rules, the USL fit.
//!
//! Decisions (the gate, the plan) are made across *trials* (independent replicates), never
//! across requests; [`Percentiles`] is the one summary meant for per-request values
//! (latencies within a level), for reporting.
//!
//! * Gate: [`compare_log_ratio`] per level (with [`session_extra_variance`] when the baseline
//!   pools several sessions), [`holm`] across levels, [`level_fails`] for the verdict,
//!   [`min_detectable_drop`] for the power warning.
//! * Gate, new rules (issue 14; the gate switches to them from the above): [`decision`] --
//!   [`relative_level`] (base and head in one job, restarts as sessions), [`history_level`]
//!   (a candidate against k sessions of main, with sigma_b and its k-1 df), [`decide`] (Holm,
//!   the guard, three outcomes: regression / no regression / inconclusive), [`drift_check`].
//!   Ported from `reference/reference.py`, tested against `reference/vectors.json`, calibrated
//!   by `benches/gate_calibration.rs`.
//! * Plan: [`fit_usl`] and [`bootstrap_throughput_at`].
//! * Reports: [`Percentiles`], [`Spread`], [`mean_ci95`] (the interval drawn on the charts).
//!
//! Reference values for the tests were computed with SciPy/NumPy/statsmodels; the scripts
//! that produced them live in `src/stats/reference/`.

#[cfg(test)]
mod calibration;
pub mod decision;
mod error;
pub mod sessions;
pub mod summary;
pub mod usl;
pub mod welch;

pub use decision::{
    decide, drift_check, history_level, relative_level, DecisionSettings, Design, Drift,
    LevelOutcome, LevelTest,
};
pub use error::StatsError;
pub use sessions::{
    between_session_variance, pooled_log_mean_variance, session_components, session_extra_variance,
    SessionComponents,
};
pub use summary::{mean_ci95, percentile, MeanCi, Percentiles, Spread};
pub use usl::{bootstrap_throughput_at, fit_usl, UslFit};
pub use welch::{compare_log_ratio, holm, level_fails, min_detectable_drop, LogRatioComparison};
