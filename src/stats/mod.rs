//! Statistics: summaries, the gate's decision rules, the USL fit.
//!
//! Decisions (the gate, the plan) are made across *trials* (independent replicates), never
//! across requests; [`Percentiles`] is the one summary meant for per-request values
//! (latencies within a level), for reporting.
//!
//! * Gate: [`decision`] --
//!   [`relative_level`] (base and head in one job, restarts as sessions), [`history_level`]
//!   (a candidate against k sessions of main, with sigma_b and its k-1 df), [`decide`] ([`holm`] across levels,
//!   the guard, three outcomes: regression / no regression / inconclusive), [`drift_check`].
//!   Ported from `reference/reference.py`, tested against `reference/vectors.json`, calibrated
//!   by `benches/gate_calibration.rs`.
//! * Trend: [`changepoint`] (E-divisive means with a permutation test over main's sessions).
//! * Plan: [`fit_usl`] and [`bootstrap_throughput_at`].
//! * Everywhere: [`mean`], [`variance`], [`median`] and [`is_positive`] (a figure usable as a
//!   throughput or a divisor), written once.
//! * Reports: [`Percentiles`], [`Spread`], [`mean_ci95`] (the interval drawn on the charts);
//!   [`LatencySketch`] gives a trial's percentiles in bounded memory (exact while small, an
//!   HDR histogram at 3 significant digits when large).
//!
//! Reference values for the tests were computed with SciPy/NumPy/statsmodels; the scripts
//! that produced them live in `src/stats/reference/`.

pub mod basic;
pub mod changepoint;
pub mod decision;
mod error;
pub mod holm;
pub mod sketch;
pub mod summary;
pub mod usl;

pub use basic::{is_positive, mean, median, variance};
pub use decision::{
    decide, drift_check, history_level, relative_level, DecisionSettings, Design, Drift,
    LevelOutcome, LevelTest,
};
pub use error::StatsError;
pub use holm::holm;
pub use sketch::LatencySketch;
pub use summary::{mean_ci95, percentile, MeanCi, Percentiles, Spread};
pub use usl::{bootstrap_throughput_at, fit_usl, UslFit};
