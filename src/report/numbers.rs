//! The two ways every report writes a figure: a level's mean with its interval across
//! trials, and a change in percent with its sign.

/// A level's figure across its trials, as every chart and export shows it: the mean, the
/// two-sided 95% Student-t interval across trials (none for a single trial, or where it is
/// not finite) and how many trials it is from. Trials are the replicates, never requests.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LevelInterval {
    pub mean: f64,
    pub ci: Option<(f64, f64)>,
    /// The finite values the mean is of.
    pub n: usize,
}

/// See [`LevelInterval`]: `values` holds one value per trial that measured (non-finite ones
/// are left out); None when none is finite.
pub fn level_interval(values: &[f64]) -> Option<LevelInterval> {
    let m = crate::stats::mean_ci95(values)?;
    Some(LevelInterval {
        mean: m.mean,
        ci: m.ci.filter(|(lo, hi)| lo.is_finite() && hi.is_finite()),
        n: values.iter().filter(|v| v.is_finite()).count(),
    })
}

/// A change in percent with its sign, one decimal: "+3.2%", "-9.1%"; "0.0%" where it rounds
/// to nothing (never "-0.0%"); "not finite" for a NaN or an infinity (a hand-edited file).
pub fn signed_percent(change_pct: f64) -> String {
    if !change_pct.is_finite() {
        return "not finite".to_string();
    }
    let shown = format!("{change_pct:+.1}");
    match shown.as_str() {
        "+0.0" | "-0.0" => "0.0%".to_string(),
        _ => format!("{shown}%"),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_level_interval_is_of_finite_values_and_finite_itself() {
        use super::level_interval;
        let one = level_interval(&[5.0, f64::NAN]).unwrap();
        assert_eq!((one.mean, one.ci, one.n), (5.0, None, 1));
        let two = level_interval(&[1.0, 3.0]).unwrap();
        assert_eq!((two.mean, two.n), (2.0, 2));
        assert!(
            two.ci.is_some_and(|(lo, hi)| lo < 1.0 && hi > 3.0),
            "{two:?}"
        );
        assert_eq!(level_interval(&[f64::NAN]), None);
        // Finite values whose spread is not: a mean, no interval.
        let wide = level_interval(&[1e300, -1e300]).unwrap();
        assert_eq!((wide.ci, wide.n), (None, 2));
    }

    #[test]
    fn a_change_that_rounds_to_nothing_has_no_sign() {
        use super::signed_percent as p;
        assert_eq!(p(-0.04), "0.0%");
        assert_eq!(p(0.04), "0.0%");
        assert_eq!(p(-9.06), "-9.1%");
        assert_eq!(p(3.2), "+3.2%");
        assert_eq!(p(f64::INFINITY), "not finite");
    }
}
