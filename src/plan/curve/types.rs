//! What the curve takes and gives: the limits on concurrency, the fitted curve as reported,
//! the estimate per replica; and Little's law, which both the choice and the limits use.

use serde::Serialize;

use crate::plan::figures::{Basis, Interval, Quantiles};

/// The limits the concurrency must meet.
#[derive(Debug, Clone, Default)]
pub struct ConcurrencyLimits {
    /// `--max-concurrency`, per replica.
    pub max_concurrency: Option<u32>,
    /// Sequences that fit in a replica's memory (KV cache), when the facts are known.
    pub memory: Option<u32>,
    /// `--max-latency` per request, seconds (with the average output tokens).
    pub max_latency_s: Option<f64>,
    /// Average output tokens per request, for Little's law.
    pub avg_output_tokens: Option<f64>,
    /// Most concurrency per replica the SLOs allow, and why.
    pub slo: Option<(u32, String)>,
}

/// The fitted curve, as reported.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct FitReport {
    pub lambda: f64,
    pub sigma: f64,
    pub kappa: f64,
    /// None when the curve has no peak (kappa = 0).
    pub peak_concurrency: Option<f64>,
    pub peak_throughput: Option<f64>,
    pub rmse_rel: f64,
    pub r_squared: f64,
    /// Points fitted (one per trial) and distinct levels, per replica.
    pub points: usize,
    pub levels: usize,
    /// (concurrency, measured, fitted) per point, per replica.
    pub residuals: Vec<(f64, f64, f64)>,
}

/// The throughput a run supports, per replica.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct CurveEstimate {
    pub basis: Basis,
    /// Concurrent requests per replica.
    pub concurrency: u32,
    /// Throughput per replica: P10 (low), P50, P90 (high).
    pub tok_s: Quantiles,
    /// What P10-P90 is made of, or that it is unknown.
    pub interval: Interval,
    /// How it was obtained, in words.
    pub how: String,
    /// What limited the concurrency, in words.
    pub limited_by: String,
    pub fit: Option<FitReport>,
    /// Measured throughput at concurrency 1 per replica, when the run has that level.
    pub batch1_tok_s: Option<f64>,
    pub notes: Vec<String>,
    /// What the plan must say loudly: levels left out, a fit not used.
    pub warnings: Vec<String>,
}

/// Little's law: with `n` requests in flight at `x` tok/s, each request of `tokens` output
/// tokens takes n x tokens / x seconds.
pub fn little_latency_s(n: f64, tokens: f64, x: f64) -> f64 {
    n * tokens / x
}
