//! The plain summaries every other file used to write out again: mean, sample variance,
//! median, and the check that a figure is a usable positive number.

/// Mean; NaN for an empty slice (callers check sizes first).
pub fn mean(x: &[f64]) -> f64 {
    x.iter().sum::<f64>() / x.len() as f64
}

/// Sample variance (divisor n - 1); NaN for fewer than two values.
pub fn variance(x: &[f64]) -> f64 {
    let m = mean(x);
    x.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / (x.len() as f64 - 1.0)
}

/// Median (mean of the two middle values for an even count); NaN for an empty slice.
pub fn median(x: &[f64]) -> f64 {
    let mut s = x.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => s[n / 2],
        _ => 0.5 * (s[n / 2 - 1] + s[n / 2]),
    }
}

/// A throughput, a rate or a duration that can be divided by, logged and drawn: finite and
/// above zero (NaN, infinities, zero and negatives are not).
pub fn is_positive(v: f64) -> bool {
    v.is_finite() && v > 0.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summaries_of_small_samples() {
        assert_eq!(mean(&[1.0, 2.0, 6.0]), 3.0);
        assert_eq!(variance(&[1.0, 2.0, 6.0]), 7.0);
        assert!(variance(&[1.0]).is_nan());
        assert_eq!(median(&[5.0, 1.0, 3.0]), 3.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert!(median(&[]).is_nan());
        assert!(mean(&[]).is_nan());
    }

    #[test]
    fn only_finite_numbers_above_zero_are_positive() {
        assert!(is_positive(1e-300));
        for v in [0.0, -1.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            assert!(!is_positive(v), "{v}");
        }
    }
}
