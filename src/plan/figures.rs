//! The planner's small value types and the one home of its time arithmetic: how a figure was
//! obtained ([`Basis`]), three quantiles of one ([`Quantiles`]), and days from tokens and
//! throughput ([`days_for`]) and back ([`tok_s_for`]).

use serde::Serialize;

/// Seconds in a day.
pub const SECONDS_PER_DAY: f64 = 86_400.0;

/// How a throughput figure was obtained.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Basis {
    /// Measured at this configuration.
    Measured,
    /// From the USL fitted to a measured curve.
    Fitted,
    /// Scaled from another GPU's measurement by memory bandwidth.
    Scaled,
    /// Claimed on a spec sheet or in an estimate: not a measurement.
    Stated,
}

impl Basis {
    pub fn name(self) -> &'static str {
        match self {
            Basis::Measured => "measured",
            Basis::Fitted => "fitted",
            Basis::Scaled => "scaled",
            Basis::Stated => "stated",
        }
    }

    /// Measured or fitted: a figure from a measurement of this configuration, not a claim or
    /// a scaling.
    pub fn is_measured(self) -> bool {
        matches!(self, Basis::Measured | Basis::Fitted)
    }
}

/// What a row's P10-P90 interval is, or that it is unknown: a figure without a measured
/// spread (one trial, a catalog figure, a scaling, a claim) must not look precise.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Interval {
    /// False: P10 and P90 carry no information (they equal P50, or bound a claim's range).
    pub known: bool,
    /// What the interval is made of, or why it is unknown, in words.
    pub how: String,
    /// Made from one session's trials: day-to-day (between-session) spread is not in it, and
    /// the figure says so where it is shown, not only in a note.
    pub one_session: bool,
}

impl Interval {
    pub fn known(how: impl Into<String>) -> Interval {
        Interval {
            known: true,
            how: how.into(),
            one_session: false,
        }
    }
    /// A known interval from one session's trials (one results file).
    pub fn one_session(how: impl Into<String>) -> Interval {
        Interval {
            one_session: true,
            ..Interval::known(how)
        }
    }
    pub fn unknown(why: impl Into<String>) -> Interval {
        Interval {
            known: false,
            how: why.into(),
            one_session: false,
        }
    }
}

/// Three quantiles. For throughput, p10 is the low (pessimistic) end; for days and cost, p10
/// is the short (optimistic) end.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct Quantiles {
    pub p10: f64,
    pub p50: f64,
    pub p90: f64,
}

impl Quantiles {
    pub fn single(x: f64) -> Quantiles {
        Quantiles {
            p10: x,
            p50: x,
            p90: x,
        }
    }
    pub fn scale(self, k: f64) -> Quantiles {
        Quantiles {
            p10: self.p10 * k,
            p50: self.p50 * k,
            p90: self.p90 * k,
        }
    }
    /// "11.0-12.7", or "2.9 (±0.1%)" when P10 and P90 would print alike: three significant
    /// digits of P50 at most, never more digits than the spread supports (one session's
    /// trials make a narrow interval, not a precise one).
    pub fn range_text(self) -> String {
        let decimals = |x: f64| -> usize {
            match x.abs() {
                x if x >= 100.0 => 0,
                x if x >= 10.0 => 1,
                x if x >= 1.0 => 2,
                _ => 3,
            }
        };
        let d = decimals(self.p50);
        let (lo, hi) = (format!("{:.d$}", self.p10), format!("{:.d$}", self.p90));
        if lo != hi {
            return format!("{lo}-{hi}");
        }
        let half = (self.p90 - self.p10).abs() / 2.0 / self.p50.abs().max(f64::MIN_POSITIVE);
        // Two significant digits of P50 beside a spread this small.
        let d2 = d.saturating_sub(1);
        format!("{:.d2$} (±{:.1}%)", self.p50, (half * 100.0).max(0.1))
    }

    /// Days to generate `tokens` at each quantile of this throughput, swapping the ends (the
    /// low throughput gives the long time).
    pub fn days_for(self, tokens: f64) -> Quantiles {
        Quantiles {
            p10: days_for(tokens, self.p90),
            p50: days_for(tokens, self.p50),
            p90: days_for(tokens, self.p10),
        }
    }
}

/// Days to generate `tokens` at `tok_s`: every day figure of the plan comes from here.
pub fn days_for(tokens: f64, tok_s: f64) -> f64 {
    tokens / SECONDS_PER_DAY / tok_s
}

/// The throughput that generates `tokens` in `days`: the inverse of [`days_for`].
pub fn tok_s_for(tokens: f64, days: f64) -> f64 {
    tokens / (days * SECONDS_PER_DAY)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_arithmetic() {
        // 1.64e9 tokens at 1,600 tok/s: 11.9 days; the seeds' 16.5 days implies ~1,150 tok/s.
        assert!((days_for(1.64e9, 1600.0) - 11.86).abs() < 0.01);
        assert!((tok_s_for(1.64e9, 16.5) - 1150.4).abs() < 0.1);
        // 523 million tokens at 9,440 tok/s: 15.4 hours.
        assert!((days_for(523e6, 9440.0) * 24.0 - 15.39).abs() < 0.01);
        // 1.64e9 at 15,000 tok/s: 1.27 days.
        assert!((days_for(1.64e9, 15_000.0) - 1.265).abs() < 0.001);
    }

    #[test]
    fn ranges_print_no_more_digits_than_the_spread_supports() {
        let q = |p10, p50, p90| Quantiles { p10, p50, p90 };
        assert_eq!(q(10.98, 11.8, 12.68).range_text(), "11.0-12.7");
        assert_eq!(q(2.5, 2.9, 3.3).range_text(), "2.50-3.30");
        // P10 and P90 within a rounding of each other: P50 to two digits and the spread.
        assert_eq!(q(2.888, 2.89, 2.892).range_text(), "2.9 (±0.1%)");
        assert_eq!(q(140.2, 140.3, 140.4).range_text(), "140 (±0.1%)");
        assert!(!q(2.888, 2.89, 2.892).range_text().contains("2.89-2.89"));
    }

    #[test]
    fn days_spread_swaps_the_ends() {
        let days = Quantiles {
            p10: 1000.0,
            p50: 1600.0,
            p90: 2000.0,
        }
        .days_for(1.64e9);
        assert_eq!(days.p10, days_for(1.64e9, 2000.0));
        assert_eq!(days.p50, days_for(1.64e9, 1600.0));
        assert_eq!(days.p90, days_for(1.64e9, 1000.0));
        assert!((tok_s_for(1.64e9, days.p50) - 1600.0).abs() < 1e-9);
    }
}
