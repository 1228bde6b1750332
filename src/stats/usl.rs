//! The Universal Scalability Law (Gunther):
//! `X(N) = lambda N / (1 + sigma (N - 1) + kappa N (N - 1))`,
//! fitted by weighted least squares on relative errors, and a bootstrap of the fitted
//! throughput for the planner's P10/P50/P90.
//!
//! The fit: every point (one trial at concurrency N) contributes `((X_fit - X) / X)^2`
//! (weight 1/X^2), so a 3% miss costs the same at N = 1 as at N = 64; with the same number
//! of trials at every level, every level counts equally. For fixed (sigma, kappa) the best
//! lambda has a closed form (`lambda = sum g / sum g^2` with `g = f(N) / X`), so the search
//! is over (sigma, kappa) only: a log-spaced grid (including the bounds sigma = 0 and
//! kappa = 0), then Nelder–Mead from the best grid point with the parameters projected onto
//! the constraints (0 <= sigma < 1, kappa >= 0), restarted until it stops improving. No
//! randomness: the same points always give the same fit.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use super::StatsError;

/// A fitted USL curve. Note: `peak_concurrency` and `peak_throughput` can be infinite,
/// which JSON cannot represent (serde_json writes `null`); report them as text when so.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct UslFit {
    /// Throughput of one client without contention (tokens/s at N = 1 on the curve).
    pub lambda: f64,
    /// Contention (serial fraction), 0 <= sigma < 1.
    pub sigma: f64,
    /// Coherency (crosstalk), kappa >= 0; > 0 means throughput falls past a peak.
    pub kappa: f64,
    /// Every input point in input order: (N, measured, fitted).
    pub residuals: Vec<(f64, f64, f64)>,
    /// Root mean square of the relative residuals (fitted - measured) / measured.
    pub rmse_rel: f64,
    /// Coefficient of determination on the measured throughput (unweighted):
    /// 1 - SS_res / SS_tot.
    pub r_squared: f64,
    /// `sqrt((1 - sigma) / kappa)` when kappa > 0, else infinity.
    pub peak_concurrency: f64,
    /// Throughput at `peak_concurrency`; with kappa = 0 the asymptote `lambda / sigma`
    /// (infinity when sigma = 0 too).
    pub peak_throughput: f64,
}

fn usl(lambda: f64, sigma: f64, kappa: f64, n: f64) -> f64 {
    lambda * n / (1.0 + sigma * (n - 1.0) + kappa * n * (n - 1.0))
}

impl UslFit {
    /// Fitted throughput at concurrency `n`.
    pub fn throughput(&self, n: f64) -> f64 {
        usl(self.lambda, self.sigma, self.kappa, n)
    }

    /// The curve with these parameters, described against `points` (residuals, R^2, peak)
    /// as [`fit_usl`] describes its own: a fit computed and stored before (a run's analysis),
    /// read back without fitting again.
    pub fn with_parameters(points: &[(f64, f64)], lambda: f64, sigma: f64, kappa: f64) -> UslFit {
        summarise(points, lambda, sigma, kappa)
    }
}

const SIGMA_MAX: f64 = 1.0 - 1e-9;

/// Relative SSE with lambda profiled out, and that lambda.
fn profile(points: &[(f64, f64)], sigma: f64, kappa: f64) -> (f64, f64) {
    let (mut sg, mut sg2) = (0.0, 0.0);
    for &(n, x) in points {
        let g = usl(1.0, sigma, kappa, n) / x;
        sg += g;
        sg2 += g * g;
    }
    let lambda = sg / sg2;
    let sse: f64 = points
        .iter()
        .map(|&(n, x)| (lambda * usl(1.0, sigma, kappa, n) / x - 1.0).powi(2))
        .sum();
    (sse, lambda)
}

fn project(sigma: f64, kappa: f64) -> (f64, f64) {
    (sigma.clamp(0.0, SIGMA_MAX), kappa.max(0.0))
}

/// Nelder–Mead in two dimensions (standard coefficients 1, 2, 0.5, 0.5).
fn nelder_mead(f: &dyn Fn([f64; 2]) -> f64, x0: [f64; 2], step: f64) -> ([f64; 2], f64) {
    let mut s = [x0, [x0[0] + step, x0[1]], [x0[0], x0[1] + step]];
    let mut fs = [f(s[0]), f(s[1]), f(s[2])];
    for _ in 0..4000 {
        let mut idx = [0usize, 1, 2];
        idx.sort_by(|&a, &b| fs[a].total_cmp(&fs[b]));
        s = [s[idx[0]], s[idx[1]], s[idx[2]]];
        fs = [fs[idx[0]], fs[idx[1]], fs[idx[2]]];
        let size = (1..3)
            .map(|i| (s[i][0] - s[0][0]).abs().max((s[i][1] - s[0][1]).abs()))
            .fold(0.0, f64::max);
        if size < 1e-11 || (fs[2] - fs[0]).abs() <= 1e-16 * fs[0].abs() + 1e-300 {
            break;
        }
        let c = [(s[0][0] + s[1][0]) / 2.0, (s[0][1] + s[1][1]) / 2.0];
        let at = |t: f64| [c[0] + t * (s[2][0] - c[0]), c[1] + t * (s[2][1] - c[1])];
        let xr = at(-1.0);
        let fr = f(xr);
        if fr < fs[0] {
            let xe = at(-2.0);
            let fe = f(xe);
            if fe < fr {
                (s[2], fs[2]) = (xe, fe);
            } else {
                (s[2], fs[2]) = (xr, fr);
            }
        } else if fr < fs[1] {
            (s[2], fs[2]) = (xr, fr);
        } else {
            let (xc, fc) = if fr < fs[2] {
                let xc = at(-0.5);
                (xc, f(xc))
            } else {
                let xc = at(0.5);
                (xc, f(xc))
            };
            if fc < fs[2].min(fr) {
                (s[2], fs[2]) = (xc, fc);
            } else {
                for i in 1..3 {
                    s[i] = [(s[0][0] + s[i][0]) / 2.0, (s[0][1] + s[i][1]) / 2.0];
                    fs[i] = f(s[i]);
                }
            }
        }
    }
    let best = (0..3).min_by(|&a, &b| fs[a].total_cmp(&fs[b])).unwrap_or(0);
    (s[best], fs[best])
}

fn validate(points: &[(f64, f64)]) -> Result<(), StatsError> {
    for (index, &(n, x)) in points.iter().enumerate() {
        if !(n.is_finite() && n > 0.0) {
            return Err(StatsError::NonPositiveValue {
                what: "concurrency",
                index,
                value: n,
            });
        }
        if !(x.is_finite() && x > 0.0) {
            return Err(StatsError::NonPositiveValue {
                what: "throughput",
                index,
                value: x,
            });
        }
    }
    let mut ns: Vec<f64> = points.iter().map(|p| p.0).collect();
    ns.sort_by(f64::total_cmp);
    ns.dedup();
    if ns.len() < 3 {
        return Err(StatsError::TooFewLevels { got: ns.len() });
    }
    Ok(())
}

fn log_grid(lo_exp: f64, hi: f64, count: usize) -> Vec<f64> {
    let hi_exp = hi.log10();
    let mut g = vec![0.0];
    g.extend(
        (0..count).map(|i| 10f64.powf(lo_exp + (hi_exp - lo_exp) * i as f64 / (count - 1) as f64)),
    );
    g
}

/// Fit the USL to `(N, throughput)` points, one point per trial (several per N allowed).
///
/// Errors: a concurrency or throughput that is not positive and finite; fewer than 3
/// distinct concurrency levels (three parameters need three levels).
pub fn fit_usl(points: &[(f64, f64)]) -> Result<UslFit, StatsError> {
    validate(points)?;
    let sse = |sigma: f64, kappa: f64| {
        let (s, k) = project(sigma, kappa);
        profile(points, s, k).0
    };

    // 1. Grid, bounds included.
    let (mut best_s, mut best_k, mut best_f) = (0.0, 0.0, f64::INFINITY);
    for &s in &log_grid(-6.0, SIGMA_MAX, 40) {
        for &k in &log_grid(-10.0, 10.0, 50) {
            let f = sse(s, k);
            if f < best_f {
                (best_s, best_k, best_f) = (s, k, f);
            }
        }
    }

    // 2. Nelder–Mead in coordinates scaled by the grid optimum, restarted until no gain.
    let scale_s = best_s.max(1e-6);
    let scale_k = best_k.max(1e-10);
    let obj = |p: [f64; 2]| sse(p[0] * scale_s, p[1] * scale_k);
    let mut x = [best_s / scale_s, best_k / scale_k];
    for _ in 0..8 {
        let (nx, nf) = nelder_mead(&obj, x, 0.25);
        let gain = best_f - nf;
        if nf < best_f {
            (x, best_f) = (nx, nf);
        }
        if gain <= 1e-15 * best_f.max(1e-300) {
            break;
        }
    }
    let (sigma, kappa) = project(x[0] * scale_s, x[1] * scale_k);
    let (_, lambda) = profile(points, sigma, kappa);
    if !(lambda.is_finite() && lambda > 0.0) {
        return Err(StatsError::FitFailed(format!(
            "lambda came out as {lambda} (sigma {sigma}, kappa {kappa})"
        )));
    }
    Ok(summarise(points, lambda, sigma, kappa))
}

fn summarise(points: &[(f64, f64)], lambda: f64, sigma: f64, kappa: f64) -> UslFit {
    let residuals: Vec<(f64, f64, f64)> = points
        .iter()
        .map(|&(n, x)| (n, x, usl(lambda, sigma, kappa, n)))
        .collect();
    let m = points.len() as f64;
    let rmse_rel = (residuals
        .iter()
        .map(|&(_, x, f)| ((f - x) / x).powi(2))
        .sum::<f64>()
        / m)
        .sqrt();
    let mean_x = super::mean(&points.iter().map(|p| p.1).collect::<Vec<_>>());
    let ss_tot: f64 = points.iter().map(|p| (p.1 - mean_x).powi(2)).sum();
    let ss_res: f64 = residuals.iter().map(|&(_, x, f)| (x - f).powi(2)).sum();
    let r_squared = if ss_tot > 0.0 {
        1.0 - ss_res / ss_tot
    } else if ss_res == 0.0 {
        1.0
    } else {
        0.0
    };
    let (peak_concurrency, peak_throughput) = if kappa > 0.0 {
        let n = ((1.0 - sigma) / kappa).sqrt();
        (n, usl(lambda, sigma, kappa, n))
    } else if sigma > 0.0 {
        (f64::INFINITY, lambda / sigma)
    } else {
        (f64::INFINITY, f64::INFINITY)
    };
    UslFit {
        lambda,
        sigma,
        kappa,
        residuals,
        rmse_rel,
        r_squared,
        peak_concurrency,
        peak_throughput,
    }
}

/// Bootstrap the fitted throughput at concurrency `n`: `resamples` refits on resampled
/// data, seeded (ChaCha8 from `seed`) and therefore reproducible. Returns the refitted
/// throughputs in resample order (sort them for percentiles).
///
/// * When every level has at least 2 trials: the trials are resampled with replacement
///   within each level (the levels themselves are fixed by the benchmark design).
/// * Otherwise (some level has a single trial, which would contribute no spread): a
///   residual bootstrap on the log scale. The original fit's log residuals, centred and
///   inflated by `sqrt(m / (m - 3))` for the three fitted parameters, are resampled onto
///   the fitted curve. With exactly 3 points the fit is exact and the spread is 0.
///
/// Errors: as [`fit_usl`]; `resamples == 0`; `n` not positive and finite.
pub fn bootstrap_throughput_at(
    points: &[(f64, f64)],
    n: f64,
    resamples: usize,
    seed: u64,
) -> Result<Vec<f64>, StatsError> {
    if !(n.is_finite() && n > 0.0) {
        return Err(StatsError::InvalidParameter {
            name: "n",
            value: n,
            why: "concurrency must be positive and finite",
        });
    }
    if resamples == 0 {
        return Err(StatsError::InvalidParameter {
            name: "resamples",
            value: 0.0,
            why: "at least one resample is needed",
        });
    }
    let base = fit_usl(points)?;
    let mut levels: Vec<(f64, Vec<f64>)> = Vec::new();
    for &(ln, x) in points {
        match levels.iter_mut().find(|(l, _)| *l == ln) {
            Some((_, v)) => v.push(x),
            None => levels.push((ln, vec![x])),
        }
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut out = Vec::with_capacity(resamples);
    let mut sample = Vec::with_capacity(points.len());
    if levels.iter().all(|(_, v)| v.len() >= 2) {
        for _ in 0..resamples {
            sample.clear();
            for (ln, v) in &levels {
                for _ in 0..v.len() {
                    sample.push((*ln, v[rng.gen_range(0..v.len())]));
                }
            }
            out.push(fit_usl(&sample)?.throughput(n));
        }
    } else {
        let m = points.len();
        let logres: Vec<f64> = base.residuals.iter().map(|r| (r.1 / r.2).ln()).collect();
        let mean = super::mean(&logres);
        let inflate = if m > 3 {
            (m as f64 / (m - 3) as f64).sqrt()
        } else {
            0.0
        };
        let centred: Vec<f64> = logres.iter().map(|e| (e - mean) * inflate).collect();
        for _ in 0..resamples {
            sample.clear();
            for r in &base.residuals {
                let e = centred[rng.gen_range(0..m)];
                sample.push((r.0, r.2 * e.exp()));
            }
            out.push(fit_usl(&sample)?.throughput(n));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, rel: f64) -> bool {
        (a - b).abs() <= rel * b.abs()
    }

    // Reference values from src/stats/reference/usl_ref.py (SciPy 1.17).
    // SEED: scipy.optimize.curve_fit(usl, N, X, sigma=X, bounds=([0,0,0],[inf,1,inf]), method='trf'), best of 16 starts
    const SEED_LAMBDA: f64 = 116.60088863849106;
    const SEED_SIGMA: f64 = 0.03317176982741497;
    const SEED_KAPPA: f64 = 0.00040468001272669354;
    const SEED_SSE_REL: f64 = 0.0065535920227590945;
    const SEED_RMSE_REL: f64 = 0.03620384516252133;
    const SEED_R2: f64 = 0.9983726562960442;
    const SEED_PEAK_N: f64 = 48.878602894445095;
    const SEED_PEAK_X: f64 = 1612.124372613877;
    const TRIALS: [(f64, f64); 24] = [
        (1.0, 93.3782262551298),
        (1.0, 96.15474845227065),
        (1.0, 95.7691008912374),
        (2.0, 189.8507263713035),
        (2.0, 176.3638822080798),
        (2.0, 172.25273382867948),
        (4.0, 325.7901340860163),
        (4.0, 330.7811753434507),
        (4.0, 329.65801860966724),
        (8.0, 551.258901329708),
        (8.0, 547.3132108650311),
        (8.0, 591.4215993954799),
        (16.0, 849.1729005807571),
        (16.0, 819.9272170839488),
        (16.0, 827.4284698237101),
        (32.0, 1106.639544503324),
        (32.0, 1164.7668441412027),
        (32.0, 1063.0162744197582),
        (64.0, 1255.4928413031366),
        (64.0, 1251.0037172518112),
        (64.0, 1195.553214530433),
        (128.0, 1153.9497096850744),
        (128.0, 1132.9522278417523),
        (128.0, 1145.9786335848628),
    ];
    // TRIALS: scipy.optimize.curve_fit(usl, N, X, sigma=X, bounds=([0,0,0],[inf,1,inf]), method='trf'), best of 16 starts
    const TRIALS_LAMBDA: f64 = 94.58641917503914;
    const TRIALS_SIGMA: f64 = 0.04976882049306832;
    const TRIALS_KAPPA: f64 = 0.00019886878054507903;
    const TRIALS_SSE_REL: f64 = 0.016971967606783614;
    const TRIALS_RMSE_REL: f64 = 0.026592580110800026;
    const TRIALS_R2: f64 = 0.997636671717118;
    const TRIALS_PEAK_N: f64 = 69.12439336699933;
    const TRIALS_PEAK_X: f64 = 1227.3857391879112;
    // NOKAPPA: scipy.optimize.curve_fit(usl, N, X, sigma=X, bounds=([0,0,0],[inf,1,inf]), method='trf'), best of 16 starts
    const NOKAPPA_LAMBDA: f64 = 97.32109853306686;
    const NOKAPPA_SIGMA: f64 = 0.030273892821070524;
    const NOKAPPA_KAPPA: f64 = 7.082208326827379e-28;
    const NOKAPPA_SSE_REL: f64 = 0.0031459320342788156;
    const NOKAPPA_RMSE_REL: f64 = 0.02508358839671396;
    const NOKAPPA_R2: f64 = 0.9978306930303658;
    const NOKAPPA_PEAK_X: f64 = 3214.6872920539386;

    // src/stats/reference/usl_bootstrap_ref.py: 1000 resamples of TRIALS within levels,
    // numpy default_rng(1), refits with scipy.optimize.curve_fit; throughput at N = 48.
    const BOOT_MEAN: f64 = 1198.6958617131431;
    const BOOT_SD: f64 = 11.525562798282678;

    const SEED: [(f64, f64); 5] = [
        (1.0, 121.6),
        (4.0, 399.1),
        (16.0, 1213.5),
        (32.0, 1515.1),
        (64.0, 1582.5),
    ];

    fn sse_rel(points: &[(f64, f64)], f: &UslFit) -> f64 {
        points
            .iter()
            .map(|&(n, x)| ((f.throughput(n) - x) / x).powi(2))
            .sum()
    }

    #[test]
    fn seed_curve_matches_the_documented_figures() {
        let f = fit_usl(&SEED).unwrap();
        eprintln!(
            "seed curve: lambda {:.2}, sigma {:.5}, kappa {:.3e}, peak N {:.1} at {:.0} tok/s, rmse_rel {:.4}, R2 {:.5}",
            f.lambda, f.sigma, f.kappa, f.peak_concurrency, f.peak_throughput, f.rmse_rel, f.r_squared
        );
        assert!(close(f.sigma, 0.034, 0.10), "{f:?}");
        assert!(close(f.kappa, 4.2e-4, 0.10), "{f:?}");
        assert!(close(f.lambda, 119.0, 0.10), "{f:?}");
        assert!(close(f.peak_concurrency, 48.0, 0.10), "{f:?}");
        assert!(close(f.peak_throughput, 1610.0, 0.10), "{f:?}");
    }

    fn check_against_scipy(points: &[(f64, f64)], want: [f64; 8]) -> UslFit {
        let [lambda, sigma, kappa, sse, rmse, r2, peak_n, peak_x] = want;
        let f = fit_usl(points).unwrap();
        // Our optimum is at least as good as SciPy's (tiny slack for rounding)...
        assert!(sse_rel(points, &f) <= sse * (1.0 + 1e-9), "{f:?}");
        // ...and it is the same optimum.
        assert!(close(f.lambda, lambda, 1e-5), "lambda {f:?}");
        assert!(close(f.sigma, sigma, 1e-4), "sigma {f:?}");
        assert!(close(f.kappa, kappa, 1e-4), "kappa {f:?}");
        assert!(close(f.rmse_rel, rmse, 1e-6), "{f:?}");
        assert!(close(f.r_squared, r2, 1e-9), "{f:?}");
        assert!(close(f.peak_concurrency, peak_n, 1e-4), "{f:?}");
        assert!(close(f.peak_throughput, peak_x, 1e-6), "{f:?}");
        assert_eq!(f.residuals.len(), points.len());
        for (r, p) in f.residuals.iter().zip(points) {
            assert_eq!((r.0, r.1), *p);
            assert!(close(r.2, f.throughput(p.0), 1e-15));
        }
        f
    }

    #[test]
    fn seed_curve_matches_scipy_curve_fit() {
        check_against_scipy(
            &SEED,
            [
                SEED_LAMBDA,
                SEED_SIGMA,
                SEED_KAPPA,
                SEED_SSE_REL,
                SEED_RMSE_REL,
                SEED_R2,
                SEED_PEAK_N,
                SEED_PEAK_X,
            ],
        );
    }

    #[test]
    fn several_trials_per_level_match_scipy_curve_fit() {
        check_against_scipy(
            &TRIALS,
            [
                TRIALS_LAMBDA,
                TRIALS_SIGMA,
                TRIALS_KAPPA,
                TRIALS_SSE_REL,
                TRIALS_RMSE_REL,
                TRIALS_R2,
                TRIALS_PEAK_N,
                TRIALS_PEAK_X,
            ],
        );
    }

    #[test]
    fn kappa_at_its_bound_matches_scipy() {
        let pts: Vec<(f64, f64)> = [1.0, 2.0, 4.0, 8.0, 16.0]
            .into_iter()
            .zip([100.0, 190.0, 350.0, 620.0, 1100.0])
            .collect();
        let f = fit_usl(&pts).unwrap();
        // SciPy stops at kappa = NOKAPPA_KAPPA ~ 7e-28, i.e. the bound; ours is exactly 0.
        assert_eq!(f.kappa, 0.0, "{f:?}");
        assert!((f.kappa - NOKAPPA_KAPPA).abs() < 1e-20);
        assert!(close(f.lambda, NOKAPPA_LAMBDA, 1e-6), "{f:?}");
        assert!(close(f.sigma, NOKAPPA_SIGMA, 1e-5), "{f:?}");
        assert!(close(f.rmse_rel, NOKAPPA_RMSE_REL, 1e-6), "{f:?}");
        assert!(close(f.r_squared, NOKAPPA_R2, 1e-9), "{f:?}");
        assert!(sse_rel(&pts, &f) <= NOKAPPA_SSE_REL * (1.0 + 1e-9));
        assert_eq!(f.peak_concurrency, f64::INFINITY);
        assert!(close(f.peak_throughput, f.lambda / f.sigma, 1e-15));
        // SciPy's peak at kappa ~ 7e-28 is (to 1e-5) the asymptote lambda / sigma.
        assert!(close(f.peak_throughput, NOKAPPA_PEAK_X, 1e-5), "{f:?}");
    }

    #[test]
    fn recovers_known_parameters_from_a_synthetic_curve() {
        for (lambda, sigma, kappa, ns) in [
            (
                95.0,
                0.05,
                2e-4,
                vec![1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0],
            ),
            (40.0, 0.2, 0.01, vec![1.0, 2.0, 3.0, 5.0, 8.0, 13.0]),
            (1000.0, 0.001, 1e-6, vec![4.0, 16.0, 64.0, 256.0, 1024.0]),
            (50.0, 0.0, 0.0, vec![1.0, 2.0, 4.0]),
        ] {
            let pts: Vec<(f64, f64)> = ns
                .iter()
                .map(|&n| (n, usl(lambda, sigma, kappa, n)))
                .collect();
            let f = fit_usl(&pts).unwrap();
            assert!(close(f.lambda, lambda, 0.01), "{f:?}");
            assert!((f.sigma - sigma).abs() <= 0.01 * sigma + 1e-9, "{f:?}");
            assert!((f.kappa - kappa).abs() <= 0.01 * kappa + 1e-12, "{f:?}");
            assert!(f.rmse_rel < 1e-6 && f.r_squared > 1.0 - 1e-9, "{f:?}");
        }
    }

    #[test]
    fn fit_is_deterministic() {
        assert_eq!(fit_usl(&TRIALS).unwrap(), fit_usl(&TRIALS).unwrap());
    }

    #[test]
    fn fit_rejects_bad_input() {
        let e = fit_usl(&[(1.0, 10.0), (2.0, 19.0), (2.0, 18.0), (1.0, 11.0)]).unwrap_err();
        assert_eq!(e, StatsError::TooFewLevels { got: 2 });
        assert!(e
            .to_string()
            .contains("at least 3 distinct concurrency levels"));
        assert!(matches!(
            fit_usl(&[]),
            Err(StatsError::TooFewLevels { got: 0 })
        ));
        let e = fit_usl(&[(1.0, 10.0), (2.0, 0.0), (4.0, 30.0)]).unwrap_err();
        assert!(matches!(
            e,
            StatsError::NonPositiveValue {
                what: "throughput",
                index: 1,
                ..
            }
        ));
        let e = fit_usl(&[(1.0, 10.0), (f64::NAN, 5.0), (4.0, 30.0)]).unwrap_err();
        assert!(matches!(
            e,
            StatsError::NonPositiveValue {
                what: "concurrency",
                ..
            }
        ));
        assert!(fit_usl(&[(0.0, 10.0), (2.0, 5.0), (4.0, 30.0)]).is_err());
    }

    fn sd(v: &[f64]) -> f64 {
        let m = v.iter().sum::<f64>() / v.len() as f64;
        (v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (v.len() - 1) as f64).sqrt()
    }

    #[test]
    fn bootstrap_agrees_with_an_independent_scipy_bootstrap() {
        let b = bootstrap_throughput_at(&TRIALS, 48.0, 400, 7).unwrap();
        assert_eq!(b.len(), 400);
        let mean = b.iter().sum::<f64>() / b.len() as f64;
        let s = sd(&b);
        eprintln!(
            "bootstrap at N=48: mean {mean:.1} sd {s:.2} (SciPy: {BOOT_MEAN:.1}, {BOOT_SD:.2})"
        );
        // Monte Carlo error of two bootstrap sd estimates from 400 and 1000 draws: a few %.
        assert!(close(s, BOOT_SD, 0.15), "sd {s} vs {BOOT_SD}");
        assert!(close(mean, BOOT_MEAN, 0.003), "mean {mean} vs {BOOT_MEAN}");
        // Reproducible with the seed, different with another seed.
        assert_eq!(
            b[..20],
            bootstrap_throughput_at(&TRIALS, 48.0, 20, 7).unwrap()[..]
        );
        assert_ne!(
            b[..20],
            bootstrap_throughput_at(&TRIALS, 48.0, 20, 8).unwrap()[..]
        );
    }

    #[test]
    fn bootstrap_with_single_trials_uses_residuals() {
        let b = bootstrap_throughput_at(&SEED, 48.0, 200, 1).unwrap();
        let fit = fit_usl(&SEED).unwrap().throughput(48.0);
        let mut sorted = b.clone();
        sorted.sort_by(f64::total_cmp);
        let (p10, p90) = (sorted[20], sorted[180]);
        // A real spread around the fit, of the order of the 3.6% residual rmse.
        assert!(p10 < fit && fit < p90, "{p10} {fit} {p90}");
        assert!(
            (p90 - p10) / fit > 0.005 && (p90 - p10) / fit < 0.2,
            "{p10} {p90}"
        );
        // Exactly 3 points: the fit is exact, no spread to resample.
        let three = [(1.0, 100.0), (2.0, 180.0), (4.0, 300.0)];
        let b3 = bootstrap_throughput_at(&three, 3.0, 5, 1).unwrap();
        assert!(b3.iter().all(|&x| close(x, b3[0], 1e-9)));
        assert!(bootstrap_throughput_at(&SEED, 48.0, 0, 1).is_err());
        assert!(bootstrap_throughput_at(&SEED, -1.0, 10, 1).is_err());
    }
}
