//! The planner's values as a person writes them: counts (`902,087`, `1.64e9`), durations
//! (`2d`, `1d12h`, `50ms`), money (`$5000`) and the numbers that must be positive or in a
//! range. Each parser reads one value and says what is wrong with it, naming no flag:
//! `commands/plan.rs` hands them to clap, which puts the flag's name in front of a refusal,
//! so a bad value stops before the planner runs and the planner takes typed values only.

use std::num::{NonZeroU32, NonZeroU64, NonZeroUsize};
use std::time::Duration;

use anyhow::{anyhow, bail, Result};

use super::catalog::MAX_GPUS_PER_NODE;

/// Parses a number written as `902087`, `902,087`, `1_640_000_000`, `1.64e9` or `0.5`.
///
/// A comma must separate thousands (groups of three digits, before any decimal point and
/// without an exponent): `1,64e9` or `1,5` could mean 1.64e9 and 1.5 (a decimal comma) or
/// 164e9 and 15, so they are refused instead of guessed.
pub fn parse_number(text: &str) -> Result<f64> {
    let t = text.trim();
    let bad = || anyhow!("{text:?} is not a number (write e.g. 902087 or 1.64e9)");
    if t.contains(',') {
        let ambiguous = || {
            anyhow!(
                "{text:?} is ambiguous: a comma may separate thousands (902,087) or decimals \
                 (1,64); write it without commas, e.g. 1.64e9 or 1640000000"
            )
        };
        let int_part = t.split(['.', 'e', 'E']).next().unwrap_or("");
        if t.contains(['e', 'E']) || t[int_part.len()..].contains(',') {
            return Err(ambiguous());
        }
        let groups: Vec<&str> = int_part.trim_start_matches(['+', '-']).split(',').collect();
        let first_ok = (1..=3).contains(&groups[0].len());
        let rest_ok = groups[1..].iter().all(|g| g.len() == 3);
        let digits = groups.iter().all(|g| g.chars().all(|c| c.is_ascii_digit()));
        if !(first_ok && rest_ok && digits) {
            return Err(ambiguous());
        }
    }
    let cleaned: String = t.chars().filter(|c| *c != ',' && *c != '_').collect();
    let value: f64 = cleaned.parse().map_err(|_| bad())?;
    if !value.is_finite() {
        return Err(bad());
    }
    Ok(value)
}

/// A positive number (see [`parse_number`] for the forms accepted): tokens in all, tokens
/// per completion.
pub fn parse_count(text: &str) -> Result<f64> {
    let value = parse_number(text)?;
    if value <= 0.0 {
        bail!("must be a positive number, got {text}");
    }
    Ok(value)
}

/// Zero or a positive number: a prompt may be empty.
pub fn parse_count_or_zero(text: &str) -> Result<f64> {
    match parse_number(text)? {
        v if v >= 0.0 => Ok(v),
        _ => bail!("must be zero or a positive number, got {text}"),
    }
}

/// A whole number of at least one, e.g. completions (requests): `0.5` is not a count.
/// Above it a count is rounded to a neighbour when read (1e23 is 99999999999999991611392).
pub const WHOLE_MAX: f64 = 9_007_199_254_740_992.0; // 2^53

/// A count of requests: whole, at least one, at most 2^53 (held exactly).
pub fn parse_whole(text: &str) -> Result<f64> {
    let value = parse_count(text)?;
    if value.fract() != 0.0 {
        bail!("{text} is not a whole number; it counts requests");
    }
    if value > WHOLE_MAX {
        bail!(
            "{text} is past 2^53 = 9007199254740992, the largest count held exactly (it would \
             be rounded silently)"
        );
    }
    Ok(value)
}

/// Money in dollars, more than zero: `5000`, `$5,000`, `2.5e4`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Usd(pub f64);

/// Parses a sum of dollars (a leading `$` is allowed).
pub fn parse_usd(text: &str) -> Result<Usd> {
    parse_count(text.trim_start_matches('$')).map(Usd)
}

/// Parses a duration such as `2d`, `36h`, `90m`, `45s`, `50ms`, `1.5d` or `1d12h`.
pub fn parse_duration(text: &str) -> Result<Duration> {
    let t = text.trim().to_ascii_lowercase();
    let help =
        || anyhow!("cannot read {text:?} as a duration; write e.g. 2d, 36h, 90m, 45s or 1d12h");
    if t.is_empty() {
        return Err(help());
    }
    let mut total = 0.0;
    let mut rest = t.as_str();
    while !rest.is_empty() {
        rest = rest.trim_start();
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if num_len == 0 {
            return Err(help());
        }
        let value: f64 = rest[..num_len].parse().map_err(|_| help())?;
        rest = rest[num_len..].trim_start();
        let unit_len = rest
            .find(|c: char| !c.is_ascii_alphabetic())
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "ms" | "msec" | "msecs" => 0.001,
            "s" | "sec" | "secs" | "second" | "seconds" => 1.0,
            "m" | "min" | "mins" | "minute" | "minutes" => 60.0,
            "h" | "hr" | "hrs" | "hour" | "hours" => 3600.0,
            "d" | "day" | "days" => 86_400.0,
            "w" | "week" | "weeks" => 604_800.0,
            _ => return Err(help()),
        };
        total += value * scale;
        rest = &rest[unit_len..];
    }
    if !(total.is_finite() && total > 0.0) {
        bail!("{text:?} must be longer than zero");
    }
    // Past Duration's range (about 584 billion years) nothing could be planned anyway.
    Duration::try_from_secs_f64(total)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| {
            anyhow!("{text:?} is not a duration a plan can use (0 < it < 500 billion years)")
        })
}

/// A plain decimal number above zero (model parameters in billions, an estimate in days).
pub fn parse_positive(text: &str) -> Result<f64> {
    let x = plain(text)?;
    if !crate::stats::is_positive(x) {
        bail!("must be a positive number, got {x}");
    }
    Ok(x)
}

/// A price per hour: zero (a node you own) or more.
pub fn parse_price(text: &str) -> Result<f64> {
    let p = plain(text)?;
    if !(p.is_finite() && p >= 0.0) {
        bail!("must be zero or more, got {p}");
    }
    Ok(p)
}

/// The share of a benchmark's rate a long run sustains: in (0, 1].
pub fn parse_share(text: &str) -> Result<f64> {
    let s = plain(text)?;
    if !(s > 0.0 && s <= 1.0) {
        bail!("must be in (0, 1], got {s}");
    }
    Ok(s)
}

/// GPUs or replicas in one node: 1 to [`MAX_GPUS_PER_NODE`].
pub fn parse_per_node(text: &str) -> Result<NonZeroU32> {
    let n = at_least_one(text)?;
    if u64::from(MAX_GPUS_PER_NODE) < n.get() {
        bail!(
            "{n} is more than a node holds (at most {MAX_GPUS_PER_NODE}); a plan's node is one \
             machine, the plan gives how many of them"
        );
    }
    Ok(NonZeroU32::try_from(n)?)
}

/// A concurrency: a whole number of at least one.
pub fn parse_concurrency(text: &str) -> Result<NonZeroU32> {
    let n = at_least_one(text)?;
    NonZeroU32::try_from(n).map_err(|_| anyhow!("{n} is past {}", u32::MAX))
}

/// Bootstrap resamples: a whole number of at least one.
pub fn parse_resamples(text: &str) -> Result<NonZeroUsize> {
    let n = at_least_one(text)?;
    NonZeroUsize::try_from(n).map_err(|_| anyhow!("{n} is past {}", usize::MAX))
}

fn at_least_one(text: &str) -> Result<NonZeroU64> {
    let n: u64 = text
        .trim()
        .parse()
        .map_err(|_| anyhow!("{text:?} is not a whole number"))?;
    NonZeroU64::new(n).ok_or_else(|| anyhow!("must be at least 1"))
}

/// A decimal number as Rust reads it (`0.75`, `1e3`, `-2`), finite or not: the callers
/// say which are allowed.
fn plain(text: &str) -> Result<f64> {
    text.trim()
        .parse()
        .map_err(|_| anyhow!("{text:?} is not a number"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        let secs = |t: &str| parse_duration(t).unwrap().as_secs_f64();
        assert_eq!(secs("2d"), 172_800.0);
        assert_eq!(secs("36h"), 129_600.0);
        assert_eq!(secs("90m"), 5_400.0);
        assert_eq!(secs("1d12h"), 129_600.0);
        assert_eq!(secs("1.5d"), 129_600.0);
        assert_eq!(secs("60s"), 60.0);
        assert_eq!(secs("50ms"), 0.05);
        for bad in [
            "",
            "soon",
            "2x",
            "d",
            "0h",
            "-3d",
            "99999999999999999999999w",
        ] {
            let err = format!("{:#}", parse_duration(bad).unwrap_err());
            assert!(err.contains(&format!("{bad:?}")), "{bad}: {err}");
        }
    }

    #[test]
    fn separators_are_thousands_or_refused() {
        assert_eq!(parse_count("902,087").unwrap(), 902_087.0);
        assert_eq!(parse_count("1,640,000,000").unwrap(), 1.64e9);
        assert_eq!(parse_count("1,234.5").unwrap(), 1234.5);
        assert_eq!(parse_count("1_640_000_000").unwrap(), 1.64e9);
        for bad in [
            "1,64e9", "1,5", "1,64", "12,3456", ",123", "1.5,000", "1,000e3",
        ] {
            let err = format!("{:#}", parse_count(bad).unwrap_err());
            assert!(err.contains("ambiguous"), "{bad}: {err}");
        }
        let err = format!("{:#}", parse_whole("0.5").unwrap_err());
        assert!(err.contains("whole number"), "{err}");
        assert_eq!(parse_whole("902087").unwrap(), 902_087.0);
        assert!(parse_count_or_zero("0").is_ok() && parse_count_or_zero("-1").is_err());
    }

    #[test]
    fn money_ranges_and_counts() {
        assert_eq!(parse_usd("$5,000").unwrap(), Usd(5000.0));
        assert!(parse_usd("$0").is_err() && parse_usd("cheap").is_err());
        assert_eq!(parse_share("0.75").unwrap(), 0.75);
        for bad in ["0", "1.01", "NaN", "x"] {
            assert!(parse_share(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_price("0").unwrap(), 0.0);
        assert!(parse_price("-1").is_err() && parse_price("inf").is_err());
        assert!(parse_positive("0").is_err() && parse_positive("NaN").is_err());
        assert_eq!(parse_per_node("8").unwrap().get(), 8);
        let err = format!("{:#}", parse_per_node("2000").unwrap_err());
        assert!(err.contains("more than a node holds"), "{err}");
        assert!(format!("{:#}", parse_concurrency("0").unwrap_err()).contains("at least 1"));
        assert_eq!(parse_resamples("200").unwrap().get(), 200);
    }
}

#[cfg(test)]
#[path = "values_props.rs"]
mod props;
