//! The gate's two-sample test: Welch's t-test on the logarithm of throughput, Holm's
//! correction across levels, the decision rule, and the minimum detectable drop.
//!
//! Throughput is compared on the log scale because noise on tokens/s is multiplicative
//! (a CV, not an absolute sd) and because a difference of mean logs is the log of a
//! ratio of geometric means, which is what the report shows ("candidate is 0.96x baseline").

use statrs::distribution::{ContinuousCDF, StudentsT};

use super::StatsError;

/// Result of comparing candidate trials against baseline trials at one level.
#[derive(Debug, Clone, PartialEq)]
pub struct LogRatioComparison {
    /// Geometric mean of candidate / geometric mean of baseline (`exp` of the difference of
    /// mean logs). Below 1 means the candidate is slower.
    pub ratio: f64,
    /// Lower end of the two-sided `ci_level` confidence interval of `ratio`.
    pub ci_low: f64,
    /// Upper end of the two-sided `ci_level` confidence interval of `ratio`.
    pub ci_high: f64,
    /// Welch's t statistic, (mean ln c - mean ln b) / se. Infinite when both samples are
    /// constant and differ (see [`compare_log_ratio`]).
    pub t: f64,
    /// Welch–Satterthwaite degrees of freedom.
    pub df: f64,
    /// One-sided p-value for H1: candidate mean log < baseline mean log (slower).
    pub p_slower: f64,
    /// One-sided p-value for H1: candidate mean log > baseline mean log (faster).
    pub p_faster: f64,
    pub n_baseline: usize,
    pub n_candidate: usize,
}

fn logs_of(values: &[f64], what: &'static str) -> Result<Vec<f64>, StatsError> {
    values
        .iter()
        .enumerate()
        .map(|(index, &value)| {
            if value.is_finite() && value > 0.0 {
                Ok(value.ln())
            } else {
                Err(StatsError::NonPositiveValue { what, index, value })
            }
        })
        .collect()
}

/// Mean and sample variance (divisor n-1). A constant sample has variance exactly 0
/// (checked explicitly so that rounding in the mean cannot make it 1e-34 instead).
fn mean_var(x: &[f64]) -> (f64, f64) {
    let n = x.len() as f64;
    if x.iter().all(|&v| v == x[0]) {
        return (x[0], 0.0);
    }
    let mean = x.iter().sum::<f64>() / n;
    let var = x.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, var)
}

/// Welch's two-sample t-test on `ln(values)`, candidate against baseline.
///
/// * `ci_level`: confidence level of the two-sided interval for the ratio, in (0, 1), e.g. 0.95.
/// * `extra_baseline_var_of_mean`: a variance (log scale, >= 0) added to the variance of the
///   baseline's mean log, for a variance component the baseline's trials do not show by
///   themselves, typically the between-session component (see
///   [`super::session_extra_variance`]). Pass 0 for the plain Welch test.
///
/// Degrees of freedom: Welch–Satterthwaite, `(vb + vc)^2 / (vb^2/(nb-1) + vc^2/(nc-1))`,
/// where `vb = s_b^2/nb + extra` and `vc = s_c^2/nc`. The extra component is credited with
/// the baseline's `nb - 1` degrees of freedom. That is a simplification: an estimate of a
/// between-session variance from k sessions has about k-1 degrees of freedom, so this df is
/// generous when the extra term dominates; the extra term itself is estimated
/// conservatively (it is truncated at 0 and inflated for the candidate's own session).
///
/// Degenerate case: when both samples are constant (and `extra` is 0) the standard error is
/// 0. The exact sampling distribution of the difference under H0 is then a point mass at 0,
/// and we report the limits it implies, without NaN: identical constants give `t = 0`,
/// `p_slower = p_faster = 1` (no evidence either way); different constants give
/// `t = -inf, p_slower = 0, p_faster = 1` when the candidate is lower (and the mirror image
/// when higher). `df` is then `nb + nc - 2` and the interval collapses to the ratio.
///
/// Errors: fewer than 2 values on either side, any value not positive and finite,
/// `ci_level` outside (0, 1), `extra_baseline_var_of_mean` negative or not finite.
pub fn compare_log_ratio(
    baseline: &[f64],
    candidate: &[f64],
    ci_level: f64,
    extra_baseline_var_of_mean: f64,
) -> Result<LogRatioComparison, StatsError> {
    if !(ci_level > 0.0 && ci_level < 1.0) {
        return Err(StatsError::InvalidParameter {
            name: "ci_level",
            value: ci_level,
            why: "must be strictly between 0 and 1",
        });
    }
    if !(extra_baseline_var_of_mean.is_finite() && extra_baseline_var_of_mean >= 0.0) {
        return Err(StatsError::InvalidParameter {
            name: "extra_baseline_var_of_mean",
            value: extra_baseline_var_of_mean,
            why: "must be a finite variance >= 0",
        });
    }
    for (side, v) in [("baseline", baseline), ("candidate", candidate)] {
        if v.len() < 2 {
            return Err(StatsError::TooFewValues {
                side,
                got: v.len(),
                need: 2,
            });
        }
    }
    let lb = logs_of(baseline, "baseline throughput")?;
    let lc = logs_of(candidate, "candidate throughput")?;
    let (nb, nc) = (lb.len(), lc.len());
    let (mb, sb2) = mean_var(&lb);
    let (mc, sc2) = mean_var(&lc);
    let vb = sb2 / nb as f64 + extra_baseline_var_of_mean;
    let vc = sc2 / nc as f64;
    let se2 = vb + vc;
    let d = mc - mb;
    let ratio = d.exp();

    if se2 == 0.0 {
        let (t, p_slower, p_faster) = if d == 0.0 {
            (0.0, 1.0, 1.0)
        } else if d < 0.0 {
            (f64::NEG_INFINITY, 0.0, 1.0)
        } else {
            (f64::INFINITY, 1.0, 0.0)
        };
        return Ok(LogRatioComparison {
            ratio,
            ci_low: ratio,
            ci_high: ratio,
            t,
            df: (nb + nc - 2) as f64,
            p_slower,
            p_faster,
            n_baseline: nb,
            n_candidate: nc,
        });
    }

    let df = se2 * se2 / (vb * vb / (nb - 1) as f64 + vc * vc / (nc - 1) as f64);
    let se = se2.sqrt();
    let t = d / se;
    let dist = StudentsT::new(0.0, 1.0, df).map_err(|_| StatsError::InvalidParameter {
        name: "df",
        value: df,
        why: "Welch degrees of freedom must be positive and finite",
    })?;
    let q = dist.inverse_cdf(1.0 - (1.0 - ci_level) / 2.0);
    Ok(LogRatioComparison {
        ratio,
        ci_low: (d - q * se).exp(),
        ci_high: (d + q * se).exp(),
        t,
        df,
        p_slower: dist.cdf(t),
        p_faster: dist.sf(t),
        n_baseline: nb,
        n_candidate: nc,
    })
}

/// Holm–Bonferroni adjusted p-values, returned in the input order.
///
/// Sorted ascending, the i-th smallest (0-based) gets `(m - i) * p`, made monotone
/// non-decreasing by a running maximum and capped at 1. A level fails at family-wise level
/// alpha exactly when its adjusted p-value is below alpha. NaN p-values are treated as 1.
pub fn holm(p_values: &[f64]) -> Vec<f64> {
    let m = p_values.len();
    let p: Vec<f64> = p_values
        .iter()
        .map(|&x| if x.is_nan() { 1.0 } else { x.clamp(0.0, 1.0) })
        .collect();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&a, &b| p[a].total_cmp(&p[b]));
    let mut out = vec![1.0; m];
    let mut running = 0.0_f64;
    for (rank, &idx) in order.iter().enumerate() {
        let adj = ((m - rank) as f64 * p[idx]).min(1.0);
        running = running.max(adj);
        out[idx] = running;
    }
    out
}

/// The gate's decision rule for one level: FAIL only when the Holm-adjusted p-value is below
/// `alpha`, the estimated drop `1 - ratio` is at least `min_effect` (e.g. 0.03), and both
/// sides have at least `min_trials` trials. NaN inputs never fail a level.
pub fn level_fails(
    adjusted_p: f64,
    ratio: f64,
    alpha: f64,
    min_effect: f64,
    n_b: usize,
    n_c: usize,
    min_trials: usize,
) -> bool {
    adjusted_p < alpha && (1.0 - ratio) >= min_effect && n_b >= min_trials && n_c >= min_trials
}

/// The smallest relative drop (0.04 = 4%) that a one-sided Welch test at level `alpha`
/// detects with probability `power`, given the per-trial CVs and trial counts.
///
/// Approximation, on the log scale: `sd_log = sqrt(ln(1 + cv^2))` (exact for lognormal
/// noise); `se = sqrt(sd_b^2/nb + sd_c^2/nc)`; Welch–Satterthwaite df from the same terms;
/// the shift in mean log is `delta = (t_{1-alpha, df} + t_{power, df}) * se` (the usual
/// shifted-central-t approximation of the noncentral t power), and the drop is
/// `1 - exp(-delta)`. Pass the per-level alpha the gate will actually apply (for Holm over m
/// levels, the worst case is `alpha / m`).
///
/// The approximation is optimistic at small trial counts, because the real test estimates
/// its df (and variances) from the data: with 5 vs 5 trials, CV 2% and alpha 0.002 it gives
/// 5.99% at power 0.8, but a 6% drop is detected 69% of the time in simulation
/// (`calibration.rs`); with 6 vs 6, CV 3%, alpha 0.01 it gives 6.11%, detected 77% of the
/// time. Treat the figure as a lower bound on what the gate can promise.
///
/// Returns `f64::INFINITY` when no drop is detectable: fewer than 2 trials on a side,
/// `alpha` or `power` outside (0, 1), or a CV negative or not finite. Returns 0 when both
/// CVs are 0.
pub fn min_detectable_drop(
    cv_baseline: f64,
    cv_candidate: f64,
    n_baseline: usize,
    n_candidate: usize,
    alpha: f64,
    power: f64,
) -> f64 {
    let valid_cv = |c: f64| c.is_finite() && c >= 0.0;
    if n_baseline < 2
        || n_candidate < 2
        || !(alpha > 0.0 && alpha < 1.0)
        || !(power > 0.0 && power < 1.0)
        || !valid_cv(cv_baseline)
        || !valid_cv(cv_candidate)
    {
        return f64::INFINITY;
    }
    let var_log = |cv: f64| (1.0 + cv * cv).ln();
    let vb = var_log(cv_baseline) / n_baseline as f64;
    let vc = var_log(cv_candidate) / n_candidate as f64;
    let se2 = vb + vc;
    if se2 == 0.0 {
        return 0.0;
    }
    let df = se2 * se2 / (vb * vb / (n_baseline - 1) as f64 + vc * vc / (n_candidate - 1) as f64);
    let dist = match StudentsT::new(0.0, 1.0, df) {
        Ok(d) => d,
        Err(_) => return f64::INFINITY,
    };
    let delta = (dist.inverse_cdf(1.0 - alpha) + dist.inverse_cdf(power)) * se2.sqrt();
    1.0 - (-delta).exp()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn close(a: f64, b: f64, rel: f64) -> bool {
        (a - b).abs() <= rel * b.abs()
    }

    // Reference values from src/stats/reference/welch_ref.py (SciPy 1.17, statsmodels).
    const B: [f64; 5] = [1510.2, 1498.7, 1523.9, 1505.1, 1489.4];
    const C: [f64; 6] = [1461.0, 1470.3, 1449.8, 1480.2, 1455.5, 1466.1];
    // scipy.stats.ttest_ind(log(c), log(b), equal_var=False, alternative='less')
    const REF_T: f64 = -5.745697031641359;
    const REF_DF: f64 = 8.043232643762432;
    const REF_P_SLOWER: f64 = 0.00021130833090524605;
    // same with alternative='greater'
    const REF_P_FASTER: f64 = 0.9997886916690948;
    // exp of ttest_ind(..., alternative='two-sided').confidence_interval(0.95)
    const REF_CI: (f64, f64) = (0.9614718637506623, 0.9833406030439695);
    // scipy.stats.gmean(c) / scipy.stats.gmean(b)
    const REF_RATIO: f64 = 0.9723447548634102;
    // by hand: vb = var(log b, ddof=1)/nb + 1.5e-5; Welch df; scipy.stats.t.cdf(t, df),
    // scipy.stats.t.ppf(0.975, df)
    const REF_X_T: f64 = -4.500918126952742;
    const REF_X_DF: f64 = 6.36391593143335;
    const REF_X_P_SLOWER: f64 = 0.0017720299651460703;
    const REF_X_CI: (f64, f64) = (0.9578323751717175, 0.9870770155799831);
    // statsmodels.stats.multitest.multipletests([0.01, 0.04, 0.03, 0.005, 0.5], method='holm')[1]
    const REF_HOLM: [f64; 5] = [0.04, 0.09, 0.09, 0.025, 0.5];
    // statsmodels.stats.multitest.multipletests([0.2, 0.2, 0.001, 0.9], method='holm')[1]
    const REF_HOLM2: [f64; 4] = [0.6000000000000001, 0.6000000000000001, 0.004, 0.9];
    // (cv_b, cv_c, n_b, n_c, alpha, power, drop):
    // 1 - exp(-(scipy.stats.t.ppf(1-alpha, df) + scipy.stats.t.ppf(power, df)) * se),
    // se and Welch df from var_log = log1p(cv^2)
    #[allow(clippy::type_complexity)]
    const REF_MDD: [(f64, f64, usize, usize, f64, f64, f64); 3] = [
        (0.02, 0.02, 5, 5, 0.002, 0.8, 0.05985340494781921),
        (0.05, 0.03, 8, 4, 0.01, 0.9, 0.09226111944458293),
        (0.01, 0.015, 3, 10, 0.05, 0.5, 0.014882477210939604),
    ];

    #[test]
    fn welch_matches_scipy() {
        let r = compare_log_ratio(&B, &C, 0.95, 0.0).unwrap();
        assert!(close(r.t, REF_T, 1e-10), "{r:?}");
        assert!(close(r.df, REF_DF, 1e-10), "{r:?}");
        assert!(close(r.p_slower, REF_P_SLOWER, 1e-6), "{r:?}");
        assert!(close(r.p_faster, REF_P_FASTER, 1e-9), "{r:?}");
        assert!(close(r.ratio, REF_RATIO, 1e-12), "{r:?}");
        assert!(close(r.ci_low, REF_CI.0, 1e-9), "{r:?}");
        assert!(close(r.ci_high, REF_CI.1, 1e-9), "{r:?}");
        assert_eq!((r.n_baseline, r.n_candidate), (5, 6));
        // Swapping sides mirrors everything.
        let s = compare_log_ratio(&C, &B, 0.95, 0.0).unwrap();
        assert!(close(s.t, -REF_T, 1e-10));
        assert!(close(s.p_faster, REF_P_SLOWER, 1e-6));
        assert!(close(s.ratio, 1.0 / REF_RATIO, 1e-12));
    }

    #[test]
    fn welch_with_extra_baseline_variance_matches_hand_computation() {
        let r = compare_log_ratio(&B, &C, 0.95, 1.5e-5).unwrap();
        assert!(close(r.t, REF_X_T, 1e-10), "{r:?}");
        assert!(close(r.df, REF_X_DF, 1e-10), "{r:?}");
        assert!(close(r.p_slower, REF_X_P_SLOWER, 1e-6), "{r:?}");
        assert!(close(r.ci_low, REF_X_CI.0, 1e-9), "{r:?}");
        assert!(close(r.ci_high, REF_X_CI.1, 1e-9), "{r:?}");
        // The extra variance makes the test strictly less confident.
        let plain = compare_log_ratio(&B, &C, 0.95, 0.0).unwrap();
        assert!(r.p_slower > plain.p_slower && r.ci_low < plain.ci_low);
    }

    #[test]
    fn welch_rejects_bad_input() {
        assert!(matches!(
            compare_log_ratio(&[1.0], &C, 0.95, 0.0),
            Err(StatsError::TooFewValues {
                side: "baseline",
                got: 1,
                need: 2
            })
        ));
        assert!(matches!(
            compare_log_ratio(&B, &[], 0.95, 0.0),
            Err(StatsError::TooFewValues {
                side: "candidate",
                got: 0,
                ..
            })
        ));
        for bad in [0.0, -3.0, f64::NAN, f64::INFINITY] {
            let e = compare_log_ratio(&B, &[1.0, bad, 2.0], 0.95, 0.0).unwrap_err();
            assert!(
                matches!(e, StatsError::NonPositiveValue { index: 1, .. }),
                "{e}"
            );
        }
        assert!(compare_log_ratio(&B, &C, 1.0, 0.0).is_err());
        assert!(compare_log_ratio(&B, &C, 0.0, 0.0).is_err());
        assert!(compare_log_ratio(&B, &C, 0.95, -1e-9).is_err());
        assert!(compare_log_ratio(&B, &C, 0.95, f64::NAN).is_err());
        let msg = compare_log_ratio(&[5.0], &C, 0.95, 0.0)
            .unwrap_err()
            .to_string();
        assert!(msg.contains("baseline has 1 trial"), "{msg}");
    }

    #[test]
    fn welch_constant_samples_are_handled_without_nan() {
        let same = compare_log_ratio(&[100.0; 3], &[100.0; 4], 0.95, 0.0).unwrap();
        assert_eq!((same.t, same.p_slower, same.p_faster), (0.0, 1.0, 1.0));
        assert_eq!(
            (same.ratio, same.ci_low, same.ci_high, same.df),
            (1.0, 1.0, 1.0, 5.0)
        );
        let lower = compare_log_ratio(&[0.1; 5], &[0.09; 5], 0.95, 0.0).unwrap();
        assert_eq!(
            (lower.t, lower.p_slower, lower.p_faster),
            (f64::NEG_INFINITY, 0.0, 1.0)
        );
        assert!(close(lower.ratio, 0.9, 1e-12) && lower.ci_low == lower.ratio);
        let higher = compare_log_ratio(&[0.1; 5], &[0.11; 5], 0.95, 0.0).unwrap();
        assert_eq!(
            (higher.t, higher.p_slower, higher.p_faster),
            (f64::INFINITY, 1.0, 0.0)
        );
        // With an extra variance the degenerate case does not arise: a finite test.
        let x = compare_log_ratio(&[0.1; 5], &[0.09; 5], 0.95, 1e-4).unwrap();
        assert!(
            x.t.is_finite() && x.p_slower > 0.0 && x.p_slower < 0.05,
            "{x:?}"
        );
        assert!(close(x.df, 4.0, 1e-12), "{x:?}");
        // One constant side only: Welch's df reduces to the other side's n-1.
        let one = compare_log_ratio(&[100.0; 4], &[90.0, 91.0, 92.0], 0.95, 0.0).unwrap();
        assert!(close(one.df, 2.0, 1e-12) && one.t.is_finite(), "{one:?}");
    }

    #[test]
    fn holm_matches_statsmodels() {
        let a = holm(&[0.01, 0.04, 0.03, 0.005, 0.5]);
        for (g, w) in a.iter().zip(REF_HOLM) {
            assert!(close(*g, w, 1e-12), "{a:?}");
        }
        let a = holm(&[0.2, 0.2, 0.001, 0.9]);
        for (g, w) in a.iter().zip(REF_HOLM2) {
            assert!(close(*g, w, 1e-12), "{a:?}");
        }
        assert!(holm(&[]).is_empty());
        assert_eq!(holm(&[0.3]), vec![0.3]);
        assert_eq!(holm(&[0.6, 0.7, f64::NAN]), vec![1.0, 1.0, 1.0]);
    }

    #[test]
    fn holm_is_monotone_and_capped() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        for _ in 0..200 {
            let m = rng.gen_range(1..12);
            let p: Vec<f64> = (0..m).map(|_| rng.gen::<f64>().powi(3)).collect();
            let a = holm(&p);
            for i in 0..m {
                assert!(a[i] >= p[i] && a[i] <= 1.0);
                for j in 0..m {
                    if p[i] < p[j] {
                        assert!(a[i] <= a[j], "{p:?} -> {a:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn level_fails_needs_all_three_conditions() {
        assert!(level_fails(0.001, 0.95, 0.01, 0.03, 5, 5, 3));
        assert!(level_fails(0.001, 0.97, 0.01, 0.03, 5, 5, 5)); // drop exactly 3%
        assert!(!level_fails(0.01, 0.95, 0.01, 0.03, 5, 5, 3)); // p not below alpha
        assert!(!level_fails(0.001, 0.975, 0.01, 0.03, 5, 5, 3)); // drop too small
        assert!(!level_fails(0.001, 0.95, 0.01, 0.03, 2, 5, 3)); // too few baseline trials
        assert!(!level_fails(0.001, 0.95, 0.01, 0.03, 5, 2, 3)); // too few candidate trials
        assert!(!level_fails(f64::NAN, 0.95, 0.01, 0.03, 5, 5, 3));
        assert!(!level_fails(0.001, f64::NAN, 0.01, 0.03, 5, 5, 3));
    }

    #[test]
    fn min_detectable_drop_matches_scipy_formula() {
        for (cvb, cvc, nb, nc, alpha, power, want) in REF_MDD {
            let got = min_detectable_drop(cvb, cvc, nb, nc, alpha, power);
            assert!(
                close(got, want, 1e-7),
                "{cvb} {cvc} {nb} {nc}: {got} vs {want}"
            );
        }
        assert_eq!(min_detectable_drop(0.0, 0.0, 5, 5, 0.01, 0.8), 0.0);
        assert_eq!(
            min_detectable_drop(0.02, 0.02, 1, 5, 0.01, 0.8),
            f64::INFINITY
        );
        assert_eq!(
            min_detectable_drop(0.02, 0.02, 5, 5, 0.0, 0.8),
            f64::INFINITY
        );
        assert_eq!(
            min_detectable_drop(0.02, 0.02, 5, 5, 0.01, 1.0),
            f64::INFINITY
        );
        assert_eq!(
            min_detectable_drop(-0.1, 0.02, 5, 5, 0.01, 0.8),
            f64::INFINITY
        );
        // More trials, smaller detectable drop; more noise, larger.
        let base = min_detectable_drop(0.02, 0.02, 5, 5, 0.01, 0.8);
        assert!(min_detectable_drop(0.02, 0.02, 10, 10, 0.01, 0.8) < base);
        assert!(min_detectable_drop(0.04, 0.02, 5, 5, 0.01, 0.8) > base);
    }

    /// Standard normal by Box–Muller (keeps the test free of extra dependencies).
    pub(crate) fn std_normal(rng: &mut ChaCha8Rng) -> f64 {
        let u1: f64 = 1.0 - rng.gen::<f64>(); // (0, 1]
        let u2: f64 = rng.gen();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }

    #[test]
    fn min_detectable_drop_has_the_promised_power_in_simulation() {
        // Simulate one-sided Welch tests at exactly the computed drop: the rejection rate
        // must be close to the requested power (the formula is an approximation).
        let (cv, n, alpha, power) = (0.03, 6, 0.01, 0.8);
        let drop = min_detectable_drop(cv, cv, n, n, alpha, power);
        let sd = (1.0 + cv * cv).ln().sqrt();
        let mut rng = ChaCha8Rng::seed_from_u64(42);
        let sims = 3000;
        let mut hits = 0;
        for _ in 0..sims {
            let b: Vec<f64> = (0..n).map(|_| (sd * std_normal(&mut rng)).exp()).collect();
            let c: Vec<f64> = (0..n)
                .map(|_| (1.0 - drop) * (sd * std_normal(&mut rng)).exp())
                .collect();
            if compare_log_ratio(&b, &c, 0.95, 0.0).unwrap().p_slower < alpha {
                hits += 1;
            }
        }
        let rate = hits as f64 / sims as f64;
        eprintln!("min_detectable_drop({cv}, n={n}, alpha={alpha}) = {drop:.4}; simulated power {rate:.3}");
        assert!(
            (rate - power).abs() < 0.06,
            "simulated power {rate} vs {power}"
        );
    }
}
