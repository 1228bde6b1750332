//! The choice of concurrency and the throughput there, from the run's points and the fit:
//! a measured level's figure (mean and prediction interval), or the fit's between levels.

use anyhow::Result;
use statrs::distribution::{ContinuousCDF, StudentsT};

use super::types::{little_latency_s, ConcurrencyLimits, CurveEstimate, FitReport};
use crate::plan::field::Field;
use crate::plan::figures::{Basis, Interval, Quantiles};
use crate::stats::{bootstrap_throughput_at, mean, percentile, variance, UslFit};

/// z for P10/P90 of a normal distribution (the lack-of-fit term of a fitted row's interval).
const Z90: f64 = 1.281_551_565_5;

/// P10/P90 of a sample (sorted here) around `p50`.
fn spread_of(mut values: Vec<f64>, p50: f64) -> Quantiles {
    values.retain(|v| v.is_finite());
    values.sort_by(f64::total_cmp);
    let p10 = percentile(&values, 10.0).unwrap_or(p50).min(p50);
    let p90 = percentile(&values, 90.0).unwrap_or(p50).max(p50);
    Quantiles { p10, p50, p90 }
}

/// The mean of the trials at one level, and a prediction interval for one more run there:
/// mean +- t(0.90, n-1) x sd x sqrt(1 + 1/n) (unknown with one trial).
fn measured_at(points: &[(f64, f64)], level: f64) -> (Quantiles, Interval, usize) {
    let values: Vec<f64> = points
        .iter()
        .filter(|p| p.0 == level)
        .map(|p| p.1)
        .collect();
    let n = values.len();
    let mean = if n == 0 { 0.0 } else { mean(&values) };
    if n < 2 {
        return (
            Quantiles::single(mean),
            Interval::unknown(
                "one trial at this level: the trial-to-trial spread is not measured (run \
                 several trials)",
            ),
            n,
        );
    }
    let var = variance(&values);
    let t = StudentsT::new(0.0, 1.0, (n - 1) as f64)
        .map(|d| d.inverse_cdf(0.9))
        .unwrap_or(Z90);
    let half = t * var.sqrt() * (1.0 + 1.0 / n as f64).sqrt();
    (
        Quantiles {
            p10: (mean - half).max(0.0),
            p50: mean,
            p90: mean + half,
        },
        Interval::one_session(format!(
            "prediction interval for one more run at this level from {n} trials (mean +- \
             t x sd x sqrt(1 + 1/n)); one session: day-to-day (between-session) variation is \
             not in it"
        )),
        n,
    )
}

/// What the choice is made from: the run's points per replica, its distinct levels, the caps
/// and limits, and its batch-1 figure.
pub(super) struct Frame<'a> {
    pub origin: &'a str,
    pub points: Vec<(f64, f64)>,
    pub levels: Vec<f64>,
    pub caps: Vec<(u32, String)>,
    pub limits: &'a ConcurrencyLimits,
    pub batch1_tok_s: Option<f64>,
}

impl Frame<'_> {
    fn mean_at(&self, level: f64) -> f64 {
        measured_at(&self.points, level).0.p50
    }

    /// The lowest cap, if any.
    fn cap(&self) -> Option<u32> {
        self.caps.iter().map(|c| c.0).min()
    }

    /// Whether `n` requests in flight at `x` tok/s keep each request within --max-latency
    /// (Little's law); true where it cannot be told.
    fn latency_ok(&self, n: f64, x: f64) -> bool {
        match (self.limits.max_latency_s, self.limits.avg_output_tokens) {
            (Some(max), Some(tokens)) => little_latency_s(n, tokens, x) <= max,
            _ => true,
        }
    }

    fn max_measured(&self) -> u32 {
        self.levels.last().copied().unwrap_or(1.0).floor().max(1.0) as u32
    }

    /// The measured levels within the limits.
    fn feasible(&self) -> Vec<f64> {
        let cap = self.cap();
        self.levels
            .iter()
            .copied()
            .filter(|l| cap.is_none_or(|c| *l <= c as f64))
            .filter(|l| self.latency_ok(*l, self.mean_at(*l)))
            .collect()
    }

    /// The estimate at the best measured level within the limits.
    pub fn measured(
        &self,
        fit: Option<FitReport>,
        notes: Vec<String>,
        warnings: Vec<String>,
    ) -> CurveEstimate {
        let feasible = self.feasible();
        let best_measured = feasible
            .iter()
            .copied()
            .max_by(|a, b| self.mean_at(*a).total_cmp(&self.mean_at(*b)));
        measured_estimate(
            &self.points,
            &self.levels,
            best_measured,
            feasible.len() == self.levels.len(),
            self.origin,
            fit,
            self.batch1_tok_s,
            notes,
            warnings,
            &self.caps,
        )
    }

    /// With a fit: the fitted throughput where the best concurrency within the limits was
    /// not measured and the fit promises more than every measured level there; else the
    /// measured estimate, with the fit shown.
    pub fn with_fit(
        &self,
        fit: &UslFit,
        resamples: usize,
        seed: u64,
        mut notes: Vec<String>,
        warnings: Vec<String>,
    ) -> Result<CurveEstimate> {
        let max_measured = self.max_measured();
        // Search whole concurrencies up to the largest level measured: the fit is not
        // trusted beyond the data.
        let upper = self
            .cap()
            .map_or(max_measured, |c| c.min(max_measured))
            .max(1);
        let best_free = (1..=max_measured)
            .max_by(|a, b| {
                fit.throughput(*a as f64)
                    .total_cmp(&fit.throughput(*b as f64))
            })
            .unwrap_or(1);
        let chosen = (1..=upper)
            .filter(|n| self.latency_ok(*n as f64, fit.throughput(*n as f64)))
            .max_by(|a, b| {
                fit.throughput(*a as f64)
                    .total_cmp(&fit.throughput(*b as f64))
            });
        let report = FitReport {
            lambda: fit.lambda,
            sigma: fit.sigma,
            kappa: fit.kappa,
            peak_concurrency: fit
                .peak_concurrency
                .is_finite()
                .then_some(fit.peak_concurrency),
            peak_throughput: fit
                .peak_throughput
                .is_finite()
                .then_some(fit.peak_throughput),
            rmse_rel: fit.rmse_rel,
            r_squared: fit.r_squared,
            points: self.points.len(),
            levels: self.levels.len(),
            residuals: fit.residuals.clone(),
        };
        if best_free == max_measured
            && !(fit.peak_concurrency.is_finite() && fit.peak_concurrency <= max_measured as f64)
        {
            notes.push(format!(
                "throughput still rises at the largest level measured ({max_measured}); \
                 the fit's peak is {}: measure higher concurrency before trusting more",
                if fit.peak_concurrency.is_finite() {
                    format!("at {:.0}", fit.peak_concurrency)
                } else {
                    "beyond any concurrency (kappa = 0)".to_string()
                }
            ));
        }
        match chosen {
            None => notes.push(
                "even one request at a time exceeds --max-latency: planned at the lowest level"
                    .to_string(),
            ),
            Some(n) => {
                let measured_there = self.levels.contains(&(n as f64));
                let x = fit.throughput(n as f64);
                let best_measured = self
                    .feasible()
                    .into_iter()
                    .max_by(|a, b| self.mean_at(*a).total_cmp(&self.mean_at(*b)));
                let beats_measured = best_measured.is_none_or(|l| x > self.mean_at(l));
                if !measured_there && beats_measured {
                    return fitted_at(
                        fit,
                        report,
                        &self.points,
                        n,
                        self.why(fit, n, best_free, max_measured),
                        self.origin,
                        resamples,
                        seed,
                        self.batch1_tok_s,
                        notes,
                        warnings,
                    );
                }
            }
        }
        Ok(self.measured(Some(report), notes, warnings))
    }

    /// What limited the concurrency to `n`, in words: the fit's peak (or the largest level
    /// measured) where nothing did, else the caps and --max-latency that did.
    fn why(&self, fit: &UslFit, n: u32, best_free: u32, max_measured: u32) -> String {
        if n == best_free {
            if fit.peak_concurrency.is_finite() && fit.peak_concurrency <= max_measured as f64 {
                format!("the fitted peak (N* = {:.1})", fit.peak_concurrency)
            } else {
                "the largest level measured".to_string()
            }
        } else {
            let mut why: Vec<String> = (self.caps.iter())
                .filter(|c| c.0 == n || (c.0 < best_free && c.0 <= n))
                .map(|c| c.1.clone())
                .collect();
            if why.is_empty() || !self.latency_ok((n + 1) as f64, fit.throughput((n + 1) as f64)) {
                if let Some(max) = self.limits.max_latency_s {
                    why.push(format!("--max-latency {max:.0}s (Little's law)"));
                }
            }
            why.join(", ")
        }
    }
}

/// The fitted throughput at an unmeasured concurrency `n`: P50 from the fit, P10/P90 from the
/// bootstrap refits widened by the points' scatter about the curve (the fit's lack of fit and
/// the trial-to-trial noise); unknown when the fit has no residual degrees of freedom.
#[allow(clippy::too_many_arguments)]
fn fitted_at(
    fit: &UslFit,
    report: FitReport,
    points: &[(f64, f64)],
    n: u32,
    limited_by: String,
    origin: &str,
    resamples: usize,
    seed: u64,
    batch1_tok_s: Option<f64>,
    notes: Vec<String>,
    warnings: Vec<String>,
) -> Result<CurveEstimate> {
    let x = fit.throughput(n as f64);
    let boot = bootstrap_throughput_at(points, n as f64, resamples.max(1), seed)
        .map_err(|e| Field::Results.error(format!("the run {origin}: bootstrap failed: {e}")))?;
    let b = spread_of(boot, x);
    let scatter = Z90 * fit.rmse_rel * x;
    let (tok_s, interval) = if points.len() <= 3 {
        (
            Quantiles::single(x),
            Interval::unknown(format!(
                "the USL has 3 parameters and {} point(s): the curve passes through them, so \
                 no spread can be measured (run several trials per level)",
                points.len()
            )),
        )
    } else {
        (
            Quantiles {
                p10: (x - ((x - b.p10).powi(2) + scatter.powi(2)).sqrt()).max(0.0),
                p50: x,
                p90: x + ((b.p90 - x).powi(2) + scatter.powi(2)).sqrt(),
            },
            Interval::one_session(format!(
                "{resamples} seeded bootstrap refits of the USL, widened by the points' scatter \
                 about the curve (relative RMSE {:.1}%: trial noise and lack of fit); one \
                 session: day-to-day (between-session) variation is not in it",
                fit.rmse_rel * 100.0
            )),
        )
    };
    let levels = report.levels;
    let trials_per_level = points.len() as f64 / levels as f64;
    let how = format!(
        "USL fit to {} trial(s) at {} levels of {origin}, at concurrency {n} per replica (not \
         measured there: the fit interpolates between levels){}",
        points.len(),
        levels,
        if trials_per_level >= 2.0 {
            ""
        } else {
            "; one trial per level: trial-to-trial variation unknown"
        }
    );
    Ok(CurveEstimate {
        basis: Basis::Fitted,
        concurrency: n,
        tok_s,
        interval,
        how,
        limited_by,
        fit: Some(report),
        batch1_tok_s,
        notes,
        warnings,
    })
}

/// The best measured level within the limits (or the lowest, when none meets them).
#[allow(clippy::too_many_arguments)]
fn measured_estimate(
    points: &[(f64, f64)],
    levels: &[f64],
    best: Option<f64>,
    all_feasible: bool,
    origin: &str,
    fit: Option<FitReport>,
    batch1_tok_s: Option<f64>,
    mut notes: Vec<String>,
    warnings: Vec<String>,
    caps: &[(u32, String)],
) -> CurveEstimate {
    let (level, limited_by) = match best {
        Some(l) if all_feasible => (l, "the best level measured".to_string()),
        Some(l) => {
            let by: Vec<String> = caps
                .iter()
                .filter(|c| levels.iter().any(|x| *x > c.0 as f64))
                .map(|c| c.1.clone())
                .collect();
            (
                l,
                if by.is_empty() {
                    "the limits given (higher levels measured exceed them)".to_string()
                } else {
                    format!("{} (the best measured level within it)", by.join(", "))
                },
            )
        }
        None => {
            let l = levels[0];
            notes.push(format!(
                "no measured level meets the limits; planned at the lowest, {l}"
            ));
            (l, "no level meets the limits".to_string())
        }
    };
    let (tok_s, interval, n) = measured_at(points, level);
    let how = format!(
        "measured in {origin} at concurrency {level} per replica (mean of {n} trial(s){})",
        if fit.is_some() {
            "; the USL fit is shown but a measured level is planned from its measurement"
        } else {
            ""
        }
    );
    CurveEstimate {
        basis: Basis::Measured,
        concurrency: level.round().max(1.0) as u32,
        tok_s,
        interval,
        how,
        limited_by,
        fit,
        batch1_tok_s,
        notes,
        warnings,
    }
}
