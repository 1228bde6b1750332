//! Axes: a logarithmic coordinate with ticks chosen here (powers of two for concurrency,
//! 1-2-5 steps for latency and days), range helpers that keep zero, NaN and infinities away
//! from log axes, and tick label formatting.

use std::ops::Range;

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, Ranged};

use crate::stats::is_positive;

/// Which ticks a log axis gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LogTicks {
    /// Powers of two (concurrency, node counts).
    Base2,
    /// 1, 2, 5 times powers of ten, with light lines at every integer multiple.
    Decades,
}

/// A logarithmic axis over `lo..hi` (both finite and > 0, `lo < hi`).
#[derive(Debug, Clone)]
pub(crate) struct LogAxis {
    lo: f64,
    hi: f64,
    ticks: LogTicks,
}

impl LogAxis {
    /// An axis around the positive finite values given, padded by `pad` (a factor) on each
    /// side; values that are not positive and finite are ignored.
    pub fn around(values: impl IntoIterator<Item = f64>, pad: f64, ticks: LogTicks) -> LogAxis {
        let (lo, hi) = positive_bounds(values).unwrap_or((1.0, 8.0));
        let pad = pad.max(1.01);
        let (mut lo, mut hi) = (lo / pad, hi * pad);
        // Span at least a factor of 4, so that there are always two ticks.
        let span = hi / lo;
        if span < 4.0 {
            let grow = (4.0 / span).sqrt();
            lo /= grow;
            hi *= grow;
        }
        LogAxis { lo, hi, ticks }
    }

    #[cfg(test)]
    pub fn lo(&self) -> f64 {
        self.lo
    }

    #[cfg(test)]
    pub fn hi(&self) -> f64 {
        self.hi
    }

    /// `n` points spread evenly on the log scale from `lo` to `hi`.
    pub fn sample(&self, n: usize) -> Vec<f64> {
        let (a, b) = (self.lo.ln(), self.hi.ln());
        let n = n.max(2);
        (0..n)
            .map(|i| (a + (b - a) * i as f64 / (n - 1) as f64).exp())
            .collect()
    }

    /// Whether `v` can be drawn on this axis without leaving the plotting area.
    pub fn contains(&self, v: f64) -> bool {
        v.is_finite() && v >= self.lo && v <= self.hi
    }

    fn powers_of_two(&self, max: usize, light: bool) -> Vec<f64> {
        let k0 = (self.lo.log2() - 1e-9).ceil() as i32;
        let k1 = (self.hi.log2() + 1e-9).floor() as i32;
        if k1 < k0 {
            return vec![];
        }
        let n = (k1 - k0 + 1) as usize;
        let mut step = 1usize;
        if !light {
            while n.div_ceil(step) > max.max(2) {
                step *= 2;
            }
        }
        (k0..=k1)
            .filter(|k| ((k - k0) as usize) % step == 0)
            .map(|k| 2f64.powi(k))
            .collect()
    }

    fn decades(&self, max: usize, light: bool) -> Vec<f64> {
        let d0 = self.lo.log10().floor() as i32;
        let d1 = self.hi.log10().ceil() as i32;
        let within = |mults: &[f64]| -> Vec<f64> {
            let mut out = vec![];
            for d in d0..=d1 {
                for m in mults {
                    let v = m * 10f64.powi(d);
                    if v >= self.lo * (1.0 - 1e-9) && v <= self.hi * (1.0 + 1e-9) {
                        out.push(v);
                    }
                }
            }
            out
        };
        let all = within(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]);
        if light {
            return all;
        }
        let max = max.max(2);
        for mults in [&[1.0, 2.0, 5.0][..], &[1.0, 3.0][..]] {
            let t = within(mults);
            if t.len() >= 2 && t.len() <= max {
                return t;
            }
        }
        let ones = within(&[1.0]);
        if ones.len() < 2 {
            return all.into_iter().take(max).collect();
        }
        let mut step = 1;
        while ones.len().div_ceil(step) > max {
            step += 1;
        }
        ones.into_iter().step_by(step).collect()
    }
}

impl Ranged for LogAxis {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        // Nothing that is not positive and finite reaches the logarithm.
        let v = if is_positive(*value) { *value } else { self.lo };
        let t = (v.ln() - self.lo.ln()) / (self.hi.ln() - self.lo.ln());
        let px = limit.0 as f64 + t * (limit.1 - limit.0) as f64;
        px.round().clamp(-1.0e6, 1.0e6) as i32
    }

    fn key_points<H: KeyPointHint>(&self, hint: H) -> Vec<f64> {
        let light = hint.weight().allow_light_points();
        let max = hint.max_num_points();
        match self.ticks {
            LogTicks::Base2 => self.powers_of_two(max, light),
            LogTicks::Decades => self.decades(max, light),
        }
    }

    fn range(&self) -> Range<f64> {
        self.lo..self.hi
    }
}

/// A linear axis with the ticks given (whole node counts, for example).
#[derive(Debug, Clone)]
pub(crate) struct TickedAxis {
    lo: f64,
    hi: f64,
    ticks: Vec<f64>,
}

impl TickedAxis {
    /// `0..top` (top at least 2) with ticks at whole numbers 1, 2 or 5 (times ten) apart.
    pub fn whole_numbers(values: impl IntoIterator<Item = f64>) -> TickedAxis {
        let hi = linear_top(values).max(2.0);
        let step = [1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0]
            .into_iter()
            .find(|s| hi / s <= 12.0)
            .unwrap_or((hi / 10.0).ceil());
        let ticks = (0..=(hi / step) as usize)
            .map(|i| i as f64 * step)
            .collect();
        TickedAxis { lo: 0.0, hi, ticks }
    }
}

impl Ranged for TickedAxis {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        let v = if value.is_finite() { *value } else { self.lo };
        let t = (v - self.lo) / (self.hi - self.lo);
        let px = limit.0 as f64 + t * (limit.1 - limit.0) as f64;
        px.round().clamp(-1.0e6, 1.0e6) as i32
    }

    fn key_points<H: KeyPointHint>(&self, _hint: H) -> Vec<f64> {
        self.ticks.clone()
    }

    fn range(&self) -> Range<f64> {
        self.lo..self.hi
    }
}

/// The smallest and largest positive finite values, if any.
pub(crate) fn positive_bounds(values: impl IntoIterator<Item = f64>) -> Option<(f64, f64)> {
    let mut bounds: Option<(f64, f64)> = None;
    for v in values {
        if is_positive(v) {
            bounds = Some(match bounds {
                None => (v, v),
                Some((lo, hi)) => (lo.min(v), hi.max(v)),
            });
        }
    }
    bounds
}

/// The top of a linear axis that starts at zero: a little above the largest finite value.
pub(crate) fn linear_top(values: impl IntoIterator<Item = f64>) -> f64 {
    let max = values
        .into_iter()
        .filter(|v| v.is_finite())
        .fold(0.0f64, f64::max);
    if max > 0.0 {
        max * 1.08
    } else {
        1.0
    }
}

/// Whether values spread wide enough to want a log axis.
pub(crate) fn wants_log(values: impl IntoIterator<Item = f64>, ratio: f64) -> bool {
    matches!(positive_bounds(values), Some((lo, hi)) if hi / lo > ratio)
}

/// A short tick label: "0.25", "12", "1500", "250k", "1.5M".
pub(crate) fn fmt_num(v: f64) -> String {
    if !v.is_finite() {
        return String::new();
    }
    let a = v.abs();
    let trim = |s: String| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s
        }
    };
    if a == 0.0 {
        "0".to_string()
    } else if a >= 1e9 {
        format!("{}G", trim(format!("{:.2}", v / 1e9)))
    } else if a >= 1e6 {
        format!("{}M", trim(format!("{:.2}", v / 1e6)))
    } else if a >= 1e5 {
        format!("{}k", trim(format!("{:.1}", v / 1e3)))
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        trim(format!("{v:.1}"))
    } else if a >= 1.0 {
        trim(format!("{v:.2}"))
    } else if a >= 0.001 {
        trim(format!("{v:.4}"))
    } else {
        format!("{v:.0e}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base2_ticks_are_powers_of_two_and_thinned() {
        let axis = LogAxis::around([1.0, 1024.0], 1.4, LogTicks::Base2);
        let ticks = axis.key_points(plotters::coord::ranged1d::BoldPoints(6));
        assert!(ticks.len() <= 6 && ticks.len() >= 2, "{ticks:?}");
        assert!(ticks.iter().all(|t| t.log2().fract() == 0.0), "{ticks:?}");
        let one = LogAxis::around([48.0], 1.4, LogTicks::Base2);
        assert!(!one.key_points(10usize).is_empty());
    }

    #[test]
    fn decade_ticks_and_bad_values_never_reach_the_log() {
        let axis = LogAxis::around([0.0, f64::NAN, 3.0, 900.0, -5.0], 1.2, LogTicks::Decades);
        assert!(axis.lo() > 0.0 && axis.hi().is_finite());
        let ticks = axis.key_points(10usize);
        assert!(ticks.len() >= 2, "{ticks:?}");
        assert_eq!(axis.map(&0.0, (0, 100)), 0);
        assert_eq!(axis.map(&f64::NAN, (0, 100)), 0);
        let empty = LogAxis::around([f64::NAN], 1.2, LogTicks::Decades);
        assert!(empty.lo() > 0.0 && empty.lo() < empty.hi());
    }

    #[test]
    fn numbers_are_short() {
        assert_eq!(fmt_num(0.0), "0");
        assert_eq!(fmt_num(2500.0), "2500");
        assert_eq!(fmt_num(250000.0), "250k");
        assert_eq!(fmt_num(1.5e6), "1.5M");
        assert_eq!(fmt_num(0.25), "0.25");
        assert_eq!(fmt_num(12.0), "12");
        assert_eq!(fmt_num(f64::NAN), "");
    }
}
