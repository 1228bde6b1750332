//! The job's lengths as distributions: the mean sets the token total, E[L^2] / 2E[L] the
//! time-weighted context, and the spread the end-of-job tail.
//!
//! Why not the mean alone: a sequence's KV cache grows while it decodes, so the context a
//! decode step reads, averaged over time, is the prompt plus E[L^2] / 2E[L] (long requests
//! hold their slot longer); for lengths all equal to L that is L/2, with a spread it is more.
//! The tail: in a closed loop with `n` slots, the job's wall-clock is the work W over the slot
//! rate plus the time the slots wait on the longest request still running when the queue
//! empties. At that moment each slot holds a request's remaining length R, whose
//! distribution (a renewal process's residual) has density P(L > r) / E[L] and mean
//! E[L^2] / 2E[L]; the job ends E[max of n R] - E[R] token-times after W / (n rate). For
//! lengths all equal to L that is L (n/(n+1) - 1/2) (a conservative bound: equal requests
//! started together finish together); with one slot it is zero.

use anyhow::{anyhow, bail, Result};
use statrs::distribution::{ContinuousCDF, LogNormal, Normal};

use super::field::Field;
use crate::profile::{LengthDist, Profile};

/// The syntax a length distribution is written in, for messages and help.
pub const SYNTAX: &str = "fixed:value=N, uniform:mean=M,range_ratio=R, normal:mean=M,sd=S or \
                          lognormal:mean=M,sd=S";

/// Parses `lognormal:mean=1818,sd=1200` (see [`SYNTAX`]) into a distribution.
pub fn parse_length(text: &str) -> Result<LengthDist> {
    let help = || anyhow!("cannot read {text:?}; write one of {SYNTAX}");
    let (kind, params) = text.trim().split_once(':').ok_or_else(help)?;
    let mut table = toml::Table::new();
    table.insert(
        "distribution".into(),
        toml::Value::String(kind.trim().to_ascii_lowercase()),
    );
    for pair in params.split(',') {
        let (k, v) = pair.split_once('=').ok_or_else(help)?;
        let v: f64 = v
            .trim()
            .parse()
            .map_err(|_| anyhow!("{:?} is not a number in {text:?}", v.trim()))?;
        let k = k.trim().to_string();
        let value = if k == "value" && v.fract() == 0.0 && v >= 0.0 && v <= f64::from(u32::MAX) {
            toml::Value::Integer(v as i64)
        } else {
            toml::Value::Float(v)
        };
        table.insert(k, value);
    }
    let dist: LengthDist = toml::Value::Table(table)
        .try_into()
        .map_err(|e| anyhow!("{text:?}: {e}; write one of {SYNTAX}"))?;
    check(&dist)?;
    Ok(dist)
}

/// Refuses parameters no length distribution has.
fn check(d: &LengthDist) -> Result<()> {
    let ok = match d {
        LengthDist::Fixed { value } => *value >= 1,
        LengthDist::Uniform { mean, range_ratio } => {
            *mean >= 1.0 && mean.is_finite() && (0.0..1.0).contains(range_ratio)
        }
        LengthDist::Normal { mean, sd } | LengthDist::Lognormal { mean, sd } => {
            *mean >= 1.0 && mean.is_finite() && sd.is_finite() && *sd >= 0.0
        }
        LengthDist::Histogram { bins } => {
            !bins.is_empty()
                && bins
                    .iter()
                    .all(|[lo, hi, w]| *lo >= 0.0 && lo < hi && *w >= 0.0)
                && bins.iter().map(|b| b[2]).sum::<f64>() > 0.0
        }
    };
    if !ok {
        bail!(
            "{d:?} is not a length distribution: the mean (or value) must be at least 1, \
             sd at least 0, range_ratio in [0, 1)"
        );
    }
    Ok(())
}

/// The output and input length distributions of a benchmark profile
/// (`workload.output_length`, `workload.input_length`).
pub fn from_profile(path: &std::path::Path) -> Result<(LengthDist, Option<LengthDist>)> {
    let profile = Profile::load(path)
        .map_err(|e| Field::LengthsFrom.wrap("the profile the lengths are read from", e))?;
    let output = profile.workload.output_length.clone().ok_or_else(|| {
        Field::LengthsFrom.error(format!(
            "{}: the profile has no workload.output_length (a distribution of output lengths); \
             give --output-length instead",
            path.display()
        ))
    })?;
    check(&output).map_err(|e| Field::LengthsFrom.wrap(path.display(), e))?;
    Ok((output, profile.workload.input_length.clone()))
}

/// E[L] and E[L^2] of the distribution (from its moments).
pub fn raw_moments(d: &LengthDist) -> (f64, f64) {
    let (m, sd) = d.moments();
    (m, m * m + sd * sd)
}

/// The time-weighted extra context of a decoding sequence: E[L^2] / 2E[L] (L/2 for equal
/// lengths).
pub fn time_weighted_context(d: &LengthDist) -> f64 {
    let (m1, m2) = raw_moments(d);
    m2 / (2.0 * m1)
}

/// The length-biased mean E[L^2] / E[L]: what a sequence in flight at a random moment will
/// reach (L for equal lengths), for the memory a slot must be able to hold.
pub fn length_biased_mean(d: &LengthDist) -> f64 {
    let (m1, m2) = raw_moments(d);
    m2 / m1
}

/// P(L > x) of the distribution, continuous (rounding to whole tokens left out).
fn survival(d: &LengthDist) -> Box<dyn Fn(f64) -> f64> {
    match d.clone() {
        LengthDist::Fixed { value } => {
            let v = f64::from(value);
            Box::new(move |x| if x < v { 1.0 } else { 0.0 })
        }
        LengthDist::Uniform { .. } => {
            let (lo, hi) = d.uniform_bounds().unwrap_or((1.0, 1.0));
            Box::new(move |x| {
                if hi <= lo {
                    if x < lo {
                        1.0
                    } else {
                        0.0
                    }
                } else {
                    ((hi - x) / (hi - lo)).clamp(0.0, 1.0)
                }
            })
        }
        LengthDist::Normal { mean, sd } => match Normal::new(mean, sd) {
            Ok(n) if sd > 0.0 => Box::new(move |x| 1.0 - n.cdf(x)),
            _ => Box::new(move |x| if x < mean { 1.0 } else { 0.0 }),
        },
        LengthDist::Lognormal { mean, sd } => {
            let s2 = (1.0 + (sd / mean).powi(2)).ln();
            match LogNormal::new(mean.ln() - s2 / 2.0, s2.sqrt()) {
                Ok(l) if sd > 0.0 => Box::new(move |x| if x <= 0.0 { 1.0 } else { l.sf(x) }),
                _ => Box::new(move |x| if x < mean { 1.0 } else { 0.0 }),
            }
        }
        LengthDist::Histogram { bins } => {
            let total: f64 = bins.iter().map(|b| b[2]).sum();
            Box::new(move |x| {
                bins.iter()
                    .map(|[lo, hi, w]| w / total * ((hi - x) / (hi - lo)).clamp(0.0, 1.0))
                    .sum()
            })
        }
    }
}

/// A length past which the distribution holds (almost) nothing: where the integrals stop.
fn upper(d: &LengthDist) -> f64 {
    match d {
        LengthDist::Fixed { value } => f64::from(*value),
        LengthDist::Uniform { .. } => d.uniform_bounds().map_or(1.0, |b| b.1),
        LengthDist::Normal { mean, sd } => mean + 7.0 * sd,
        LengthDist::Lognormal { mean, sd } => {
            let s2 = (1.0 + (sd / mean).powi(2)).ln();
            (mean.ln() - s2 / 2.0 + 7.0 * s2.sqrt()).exp()
        }
        LengthDist::Histogram { bins } => bins.iter().map(|b| b[1]).fold(1.0, f64::max),
    }
}

/// Steps of the trapezoid rule over [0, upper].
const STEPS: usize = 20_000;

/// The end-of-job tail in tokens: E[max of `slots` residual lengths] - E[residual length]
/// (see the module's notes). Times the per-slot time per token, it is what the job takes
/// beyond its work divided by the slot rate.
pub fn tail_excess_tokens(d: &LengthDist, slots: u32) -> f64 {
    let slots = slots.max(1);
    let s = survival(d);
    let top = upper(d).max(1.0);
    let h = top / STEPS as f64;
    // F_R(r) = (1/E[L]) * integral of S from 0 to r, accumulated on the grid.
    let values: Vec<f64> = (0..=STEPS).map(|i| s(i as f64 * h)).collect();
    let mut cumulative = Vec::with_capacity(values.len());
    let mut acc = 0.0;
    cumulative.push(0.0);
    for w in values.windows(2) {
        acc += (w[0] + w[1]) / 2.0 * h;
        cumulative.push(acc);
    }
    let mean = acc.max(f64::MIN_POSITIVE);
    let (mut max_r, mut mean_r) = (0.0, 0.0);
    let f = |c: f64| (c / mean).min(1.0);
    for c in cumulative.windows(2) {
        let (f0, f1) = (f(c[0]), f(c[1]));
        max_r += ((1.0 - f0.powi(slots as i32)) + (1.0 - f1.powi(slots as i32))) / 2.0 * h;
        mean_r += ((1.0 - f0) + (1.0 - f1)) / 2.0 * h;
    }
    (max_r - mean_r).max(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_syntax_reads_each_distribution_and_refuses_the_rest() {
        assert_eq!(
            parse_length("lognormal:mean=1818,sd=1200").unwrap(),
            LengthDist::Lognormal {
                mean: 1818.0,
                sd: 1200.0
            }
        );
        assert_eq!(
            parse_length("fixed:value=64").unwrap(),
            LengthDist::Fixed { value: 64 }
        );
        assert_eq!(
            parse_length("Uniform: mean=100, range_ratio=0.5").unwrap(),
            LengthDist::Uniform {
                mean: 100.0,
                range_ratio: 0.5
            }
        );
        for bad in [
            "lognormal",
            "lognormal:mean=1818",
            "lognormal:mean=x,sd=1",
            "gamma:mean=1,sd=1",
            "normal:mean=0,sd=1",
            "normal:mean=10,sd=-1",
            "fixed:value=0",
            "fixed:value=2.5",
            "uniform:mean=10,range_ratio=1",
            "normal:mean=10,sd=1,extra=2",
        ] {
            let err = format!("{:#}", parse_length(bad).unwrap_err());
            assert!(
                err.contains("length distribution") || err.contains(bad),
                "{bad}: {err}"
            );
        }
    }

    /// Hand-computed: lognormal with mean 1818 and sd 1200: E[L^2] = 1818^2 + 1200^2 =
    /// 4,745,124, so the time-weighted context is 4,745,124 / 3,636 = 1,305.04 tokens (not
    /// 909, half the mean) and the length-biased mean 2,610.08.
    #[test]
    fn the_time_weighted_context_counts_the_spread() {
        let d = LengthDist::Lognormal {
            mean: 1818.0,
            sd: 1200.0,
        };
        assert!((time_weighted_context(&d) - 1305.04).abs() < 0.01);
        assert!((length_biased_mean(&d) - 2610.08).abs() < 0.01);
        let fixed = LengthDist::Fixed { value: 64 };
        assert_eq!(time_weighted_context(&fixed), 32.0);
        assert_eq!(length_biased_mean(&fixed), 64.0);
    }

    /// Equal lengths L with n slots: residuals uniform on [0, L], E[max] = L n/(n+1), so the
    /// tail is L (n/(n+1) - 1/2): 64 (16/17 - 1/2) = 28.235 tokens; one slot: none.
    #[test]
    fn the_tail_of_equal_lengths_is_known_in_closed_form() {
        let d = LengthDist::Fixed { value: 64 };
        assert!((tail_excess_tokens(&d, 16) - 64.0 * (16.0 / 17.0 - 0.5)).abs() < 0.01);
        assert!(tail_excess_tokens(&d, 1).abs() < 1e-9);
        let u = LengthDist::Uniform {
            mean: 100.0,
            range_ratio: 0.5,
        };
        assert!(tail_excess_tokens(&u, 1).abs() < 1e-9);
    }

    /// A spread makes the tail longer, and more slots wait on a longer maximum. Lognormal
    /// mean 64, sd 40 at 16 slots: a direct simulation of residuals (numpy, 4e6 length-biased
    /// draws L*, R = U L*: E[R] 44.52, E[max of 16] 141.99) gives 97.47 tokens.
    #[test]
    fn a_spread_lengthens_the_tail() {
        let d = LengthDist::Lognormal {
            mean: 64.0,
            sd: 40.0,
        };
        let t16 = tail_excess_tokens(&d, 16);
        assert!((t16 - 97.47).abs() < 0.01 * 97.47, "{t16}");
        let t64 = tail_excess_tokens(&d, 64);
        let fixed = tail_excess_tokens(&LengthDist::Fixed { value: 64 }, 16);
        assert!(t16 > fixed && t64 > t16, "{t16} {t64} {fixed}");
    }
}
