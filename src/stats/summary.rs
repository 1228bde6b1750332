//! Descriptive summaries: percentiles of per-request latencies, spread of per-trial figures.

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, StudentsT};

use super::basic::{mean, variance};

/// The `q`-th percentile (`q` in `[0, 100]`) of an ascending-sorted slice, with linear
/// interpolation between the closest ranks: the same definition as NumPy's default
/// (`numpy.percentile(x, q, method="linear")`), i.e. position `(n - 1) * q / 100`.
///
/// Returns `None` for an empty slice or for `q` outside `[0, 100]` (or NaN). The caller must
/// sort the slice and remove NaN first; [`Percentiles::from_values`] does both.
pub fn percentile<T: Sample>(sorted: &[T], q: f64) -> Option<f64> {
    if sorted.is_empty() || !(0.0..=100.0).contains(&q) {
        return None;
    }
    let h = (sorted.len() - 1) as f64 * q / 100.0;
    let lo = h.floor() as usize;
    let hi = (lo + 1).min(sorted.len() - 1);
    let frac = h - lo as f64;
    let (a, b): (f64, f64) = (sorted[lo].into(), sorted[hi].into());
    if frac == 0.0 || a == b {
        return Some(a);
    }
    Some(a + frac * (b - a))
}

/// A value that can be summarised: f64, or f32 where millions are held at once (the
/// per-token gaps of a trial: 4 bytes a token instead of 8, and f32 keeps seven significant
/// digits, far finer than any clock we read).
pub trait Sample: Copy + Into<f64> {
    fn is_nan(self) -> bool;
    fn total_cmp(&self, other: &Self) -> std::cmp::Ordering;
}

impl Sample for f64 {
    fn is_nan(self) -> bool {
        f64::is_nan(self)
    }
    fn total_cmp(&self, other: &Self) -> std::cmp::Ordering {
        f64::total_cmp(self, other)
    }
}

impl Sample for f32 {
    fn is_nan(self) -> bool {
        f32::is_nan(self)
    }
    fn total_cmp(&self, other: &Self) -> std::cmp::Ordering {
        f32::total_cmp(self, other)
    }
}

/// Percentile summary of a set of values (typically per-request latencies within a level).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Percentiles {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub mean: f64,
    pub min: f64,
    pub max: f64,
    /// Number of values summarised (NaN values are not counted).
    pub count: u64,
    /// Absent: p50, p90 and p99 are exact (interpolated between the closest ranks, as
    /// [`percentile`]). Present: they were read from an HDR histogram (more values than
    /// `sketch::EXACT_LIMIT`), each the value at its nearest rank within this relative
    /// error; count, mean, min and max stay exact.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relative_error: Option<f64>,
}

impl Percentiles {
    /// Summarise `values`. NaN values are removed (the vector is filtered and sorted in
    /// place, so the caller can reuse the sorted values). Returns `None` when no value is left.
    pub fn from_values<T: Sample>(values: &mut Vec<T>) -> Option<Percentiles> {
        values.retain(|v| !v.is_nan());
        if values.is_empty() {
            return None;
        }
        values.sort_by(T::total_cmp);
        let mean = values.iter().map(|&v| v.into()).sum::<f64>() / values.len() as f64;
        Some(Percentiles {
            p50: percentile(values, 50.0)?,
            p90: percentile(values, 90.0)?,
            p99: percentile(values, 99.0)?,
            mean,
            min: values[0].into(),
            max: values[values.len() - 1].into(),
            count: values.len() as u64,
            relative_error: None,
        })
    }
}

/// Spread of a handful of per-trial figures (e.g. tokens/s of the trials at one level).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Spread {
    /// Number of finite values summarised.
    pub n: usize,
    pub mean: f64,
    /// Sample standard deviation (divisor `n - 1`); 0 when `n == 1` (look at `n`).
    pub sd: f64,
    /// Coefficient of variation `sd / mean`; 0 when the mean is 0.
    pub cv: f64,
    pub min: f64,
    pub max: f64,
    /// Geometric mean `exp(mean(ln x))`; 0 if any value is 0, NaN if any value is negative.
    pub geo_mean: f64,
}

impl Spread {
    /// Summarise the finite values of `values` (NaN and infinities are ignored).
    /// Returns `None` when no finite value is present.
    pub fn of(values: &[f64]) -> Option<Spread> {
        let v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        let n = v.len();
        let mean = mean(&v);
        let sd = if n > 1 { variance(&v).sqrt() } else { 0.0 };
        let cv = if mean != 0.0 { sd / mean.abs() } else { 0.0 };
        let min = v.iter().copied().fold(f64::INFINITY, f64::min);
        let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let geo_mean = if min < 0.0 {
            f64::NAN
        } else if min == 0.0 {
            0.0
        } else {
            (v.iter().map(|x| x.ln()).sum::<f64>() / n as f64).exp()
        };
        Some(Spread {
            n,
            mean,
            sd,
            cv,
            min,
            max,
            geo_mean,
        })
    }
}

/// The mean and its 95% t-interval across trials (no interval for a single trial).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MeanCi {
    pub mean: f64,
    pub ci: Option<(f64, f64)>,
}

/// Mean and two-sided 95% Student-t interval of the finite values given.
pub fn mean_ci95(values: &[f64]) -> Option<MeanCi> {
    let v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    let n = v.len();
    if n == 0 {
        return None;
    }
    let mean = mean(&v);
    if n < 2 {
        return Some(MeanCi { mean, ci: None });
    }
    let var = variance(&v);
    let ci = StudentsT::new(0.0, 1.0, (n - 1) as f64).ok().map(|t| {
        let half = t.inverse_cdf(0.975) * var.sqrt() / (n as f64).sqrt();
        (mean - half, mean + half)
    });
    Some(MeanCi { mean, ci })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, rel: f64) -> bool {
        (a - b).abs() <= rel * b.abs().max(1e-300)
    }

    // Reference values from src/stats/reference/summary_ref.py (NumPy 2.4, SciPy 1.17):
    // x = [3.1, 0.4, 7.7, 2.2, 9.05, 5.5, 1.0]
    const X: [f64; 7] = [3.1, 0.4, 7.7, 2.2, 9.05, 5.5, 1.0];
    const QS: [f64; 8] = [0.0, 12.5, 25.0, 50.0, 73.0, 90.0, 99.0, 100.0];
    // numpy.percentile(x, q) for q in QS (default method="linear")
    const NP_PCT: [f64; 8] = [0.4, 0.85, 1.6, 3.1, 6.336, 8.24, 8.969, 9.05];
    const REF_P50: f64 = 3.1;
    const REF_P90: f64 = 8.24;
    const REF_P99: f64 = 8.969;
    // numpy.mean(x)
    const REF_MEAN: f64 = 4.135714285714285;
    // numpy.std(x, ddof=1)
    const REF_SD: f64 = 3.349715695114324;
    // numpy.std(x, ddof=1) / numpy.mean(x)
    const REF_CV: f64 = 0.8099485273160716;
    // scipy.stats.gmean(x)
    const REF_GMEAN: f64 = 2.69982238739096;

    #[test]
    fn percentile_matches_numpy_linear() {
        let mut s = X.to_vec();
        s.sort_by(f64::total_cmp);
        for (q, want) in QS.iter().zip(NP_PCT) {
            let got = percentile(&s, *q).unwrap();
            assert!(close(got, want, 1e-12), "q={q}: got {got}, numpy {want}");
        }
    }

    #[test]
    fn percentile_edge_cases() {
        assert_eq!(percentile::<f64>(&[], 50.0), None);
        assert_eq!(percentile(&[1.0], 101.0), None);
        assert_eq!(percentile(&[1.0], -0.1), None);
        assert_eq!(percentile(&[1.0], f64::NAN), None);
        assert_eq!(percentile(&[4.0], 37.0), Some(4.0));
        assert_eq!(percentile(&[1.0, 2.0], 50.0), Some(1.5));
    }

    #[test]
    fn percentiles_ignore_nan_and_match_numpy() {
        let mut v = X.to_vec();
        v.insert(2, f64::NAN);
        v.push(f64::NAN);
        let p = Percentiles::from_values(&mut v).unwrap();
        assert_eq!(p.count, 7);
        assert!(close(p.p50, REF_P50, 1e-12), "{p:?}");
        assert!(close(p.p90, REF_P90, 1e-12), "{p:?}");
        assert!(close(p.p99, REF_P99, 1e-12), "{p:?}");
        assert!(close(p.mean, REF_MEAN, 1e-12), "{p:?}");
        assert_eq!(p.min, 0.4);
        assert_eq!(p.max, 9.05);
        assert!(Percentiles::from_values(&mut vec![f64::NAN]).is_none());
        assert!(Percentiles::from_values::<f64>(&mut vec![]).is_none());
    }

    /// The f32 path (per-token gaps) gives the same figures to f32 precision.
    #[test]
    fn f32_values_summarise_like_f64() {
        let mut v: Vec<f32> = X.iter().map(|&x| x as f32).collect();
        v.push(f32::NAN);
        let p = Percentiles::from_values(&mut v).unwrap();
        assert_eq!(p.count, 7);
        assert!(close(p.p50, REF_P50, 1e-6), "{p:?}");
        assert!(close(p.p99, REF_P99, 1e-6), "{p:?}");
        assert!(close(p.mean, REF_MEAN, 1e-6), "{p:?}");
    }

    #[test]
    fn spread_matches_numpy() {
        let s = Spread::of(&X).unwrap();
        assert_eq!(s.n, 7);
        assert!(close(s.mean, REF_MEAN, 1e-12));
        assert!(close(s.sd, REF_SD, 1e-12), "{s:?}");
        assert!(close(s.cv, REF_CV, 1e-12), "{s:?}");
        assert!(close(s.geo_mean, REF_GMEAN, 1e-12), "{s:?}");
        assert_eq!((s.min, s.max), (0.4, 9.05));
    }

    #[test]
    fn spread_edge_cases() {
        assert!(Spread::of(&[]).is_none());
        assert!(Spread::of(&[f64::NAN, f64::INFINITY]).is_none());
        let one = Spread::of(&[5.0, f64::NAN]).unwrap();
        assert_eq!((one.n, one.mean, one.sd, one.cv), (1, 5.0, 0.0, 0.0));
        assert!(close(one.geo_mean, 5.0, 1e-15));
        assert_eq!(Spread::of(&[0.0, 4.0]).unwrap().geo_mean, 0.0);
        assert!(Spread::of(&[-1.0, 4.0]).unwrap().geo_mean.is_nan());
        let json = serde_json::to_string(&Spread::of(&X).unwrap()).unwrap();
        let back: Spread = serde_json::from_str(&json).unwrap();
        assert_eq!(back, Spread::of(&X).unwrap());
    }

    proptest::proptest! {
        #[test]
        fn percentile_is_bounded_and_monotone(
            mut v in proptest::collection::vec(-1e6f64..1e6, 1..40),
            q1 in 0.0f64..=100.0,
            q2 in 0.0f64..=100.0,
        ) {
            v.sort_by(f64::total_cmp);
            let (lo, hi) = if q1 <= q2 { (q1, q2) } else { (q2, q1) };
            let a = percentile(&v, lo).unwrap();
            let b = percentile(&v, hi).unwrap();
            proptest::prop_assert!(v[0] <= a && a <= b && b <= v[v.len() - 1]);
            let p = Percentiles::from_values(&mut v.clone()).unwrap();
            proptest::prop_assert!(p.min <= p.p50 && p.p50 <= p.p90 && p.p90 <= p.p99 && p.p99 <= p.max);
        }
    }

    #[test]
    fn t_interval_matches_tables() {
        let m = mean_ci95(&[10.0, 12.0, 14.0]).unwrap();
        assert_eq!(m.mean, 12.0);
        let (lo, hi) = m.ci.unwrap();
        // t(0.975, 2) = 4.303, sd = 2, n = 3.
        assert!((hi - 12.0 - 4.303 * 2.0 / 3f64.sqrt()).abs() < 1e-2, "{hi}");
        assert!((12.0 - lo - (hi - 12.0)).abs() < 1e-9);
        assert_eq!(mean_ci95(&[5.0]).unwrap().ci, None);
        assert!(mean_ci95(&[]).is_none());
        assert!(mean_ci95(&[f64::NAN]).is_none());
    }
}
