//! The job to plan: a token budget, and the limits it must meet (deadline, latency).

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};

use crate::profile::LengthDist;

/// The token budget of the job.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Workload {
    /// Output tokens to generate, in all.
    pub output_tokens: f64,
    /// Completions (requests), when known.
    pub completions: Option<f64>,
    /// Average output tokens per completion, when known.
    pub avg_output_tokens: Option<f64>,
    /// Average input (prompt) tokens per completion, when known.
    pub avg_input_tokens: Option<f64>,
    /// The output lengths as a distribution (`--output-length`, `--lengths-from`): its mean
    /// is `avg_output_tokens`; its spread sets the time-weighted context and the tail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_length: Option<LengthDist>,
    /// The prompt lengths as a distribution; its mean is `avg_input_tokens`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_length: Option<LengthDist>,
}

/// Which of the workload's flags were given (the length distributions must not contradict them).
#[derive(Debug, Clone, Copy, Default)]
pub struct Given {
    pub avg_output: bool,
    pub avg_input: bool,
    pub total: bool,
}

/// Parses a number written as `902087`, `902,087`, `1_640_000_000`, `1.64e9` or `0.5`.
///
/// A comma must separate thousands (groups of three digits, before any decimal point and
/// without an exponent): `1,64e9` or `1,5` could mean 1.64e9 and 1.5 (a decimal comma) or
/// 164e9 and 15, so they are refused instead of guessed.
pub fn parse_number(flag: &str, text: &str) -> Result<f64> {
    let t = text.trim();
    let bad = || anyhow::anyhow!("{flag}: {text:?} is not a number (write e.g. 902087 or 1.64e9)");
    if t.contains(',') {
        let ambiguous = || {
            anyhow::anyhow!(
                "{flag}: {text:?} is ambiguous: a comma may separate thousands (902,087) or \
                 decimals (1,64); write it without commas, e.g. 1.64e9 or 1640000000"
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

/// A positive number (see [`parse_number`] for the forms accepted).
pub fn parse_count(flag: &str, text: &str) -> Result<f64> {
    let value = parse_number(flag, text)?;
    if value <= 0.0 {
        bail!("{flag}: must be a positive number, got {text}");
    }
    Ok(value)
}

/// A whole number of at least one, e.g. completions (requests): `0.5` is not a count.
/// Above it a count is rounded to a neighbour when read (1e23 is 99999999999999991611392).
pub const WHOLE_MAX: f64 = 9_007_199_254_740_992.0; // 2^53

pub fn parse_whole(flag: &str, text: &str) -> Result<f64> {
    let value = parse_count(flag, text)?;
    if value.fract() != 0.0 {
        bail!("{flag}: {text} is not a whole number; it counts requests");
    }
    if value > WHOLE_MAX {
        bail!(
            "{flag}: {text} is past 2^53 = 9007199254740992, the largest count held exactly \
             (it would be rounded silently)"
        );
    }
    Ok(value)
}

impl Workload {
    /// Builds the workload from the flags: `--output-tokens TOTAL`, or `--completions N` with
    /// `--avg-output-tokens T` (both forms together must agree within 1%).
    pub fn from_flags(
        completions: Option<&str>,
        avg_output_tokens: Option<&str>,
        output_tokens: Option<&str>,
        avg_input_tokens: Option<&str>,
    ) -> Result<Workload> {
        let completions = completions
            .map(|t| parse_whole("--completions", t))
            .transpose()?;
        let avg_out = avg_output_tokens
            .map(|t| parse_count("--avg-output-tokens", t))
            .transpose()?;
        let total = output_tokens
            .map(|t| parse_count("--output-tokens", t))
            .transpose()?;
        let avg_in = match avg_input_tokens {
            None => None,
            Some(t) => match parse_number("--avg-input-tokens", t)? {
                v if v >= 0.0 => Some(v),
                _ => bail!("--avg-input-tokens: must be zero or a positive number, got {t}"),
            },
        };
        let (output_tokens, avg_out) = match (completions, avg_out, total) {
            (_, _, Some(total)) => {
                let derived = completions.map(|n| total / n);
                if let (Some(given), Some(derived)) = (avg_out, derived) {
                    if (given - derived).abs() > 0.01 * derived {
                        bail!(
                            "--output-tokens {total} / --completions {} = {derived:.0} tokens per \
                             completion, but --avg-output-tokens says {given}; give two of the three",
                            completions.unwrap_or(0.0)
                        );
                    }
                }
                (total, avg_out.or(derived))
            }
            (Some(n), Some(avg), None) => (n * avg, Some(avg)),
            (Some(_), None, None) => {
                bail!("--completions needs --avg-output-tokens (or give --output-tokens)")
            }
            (None, Some(_), None) => {
                bail!("--avg-output-tokens needs --completions (or give --output-tokens)")
            }
            (None, None, None) => bail!(
                "no workload: give --output-tokens TOTAL, or --completions N with \
                 --avg-output-tokens T"
            ),
        };
        Ok(Workload {
            output_tokens,
            completions,
            avg_output_tokens: avg_out,
            avg_input_tokens: avg_in,
            output_length: None,
            input_length: None,
        })
    }

    /// Adds the length distributions: the output distribution's mean becomes the average
    /// output tokens (and, with `--completions`, the token total); the input distribution's
    /// mean the average input tokens. `avg_output_tokens` and `avg_input_tokens` are the
    /// flags' values, which must not say otherwise.
    pub fn with_lengths(
        mut self,
        output: Option<LengthDist>,
        input: Option<LengthDist>,
        given: Given,
    ) -> Result<Workload> {
        if let Some(d) = output {
            let (mean, _) = d.moments();
            if given.avg_output {
                bail!(
                    "--avg-output-tokens and an output length distribution (--output-length or \
                     --lengths-from, mean {mean:.1}) both give the average: give one"
                );
            }
            match self.completions {
                Some(n) if given.total => {
                    // --output-tokens and --completions: the total is given; the mean must agree.
                    let derived = self.output_tokens / n;
                    if (derived - mean).abs() > 0.01 * mean {
                        bail!(
                            "--output-tokens / --completions = {derived:.1} tokens per completion, \
                             but the output length distribution's mean is {mean:.1}: give two of \
                             the three"
                        );
                    }
                }
                Some(n) => self.output_tokens = n * mean,
                None => self.completions = Some((self.output_tokens / mean).round().max(1.0)),
            }
            self.avg_output_tokens = Some(mean);
            self.output_length = Some(d);
        }
        if let Some(d) = input {
            if given.avg_input {
                bail!(
                    "--avg-input-tokens and an input length distribution (--input-length or \
                     --lengths-from) both give the prompt length: give one"
                );
            }
            self.avg_input_tokens = Some(d.moments().0);
            self.input_length = Some(d);
        }
        Ok(self)
    }
}

/// Parses a duration such as `2d`, `36h`, `90m`, `45s`, `1.5d` or `1d12h` into seconds.
pub fn parse_duration(flag: &str, text: &str) -> Result<f64> {
    let t = text.trim().to_ascii_lowercase();
    let help = || {
        anyhow::anyhow!(
            "{flag}: cannot read {text:?} as a duration; write e.g. 2d, 36h, 90m, 45s or 1d12h"
        )
    };
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
        let unit = &rest[..unit_len];
        let scale = match unit {
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
        bail!("{flag}: {text:?} must be longer than zero");
    }
    Ok(total)
}

/// Formats seconds as the largest sensible unit: "11.9 days", "15.4 hours", "42 min".
pub fn human_duration(seconds: f64) -> String {
    if !seconds.is_finite() {
        return "never".to_string();
    }
    if seconds >= 2.0 * 86_400.0 {
        format!("{:.1} days", seconds / 86_400.0)
    } else if seconds >= 86_400.0 {
        format!("{:.2} days", seconds / 86_400.0)
    } else if seconds >= 3600.0 {
        format!("{:.1} hours", seconds / 3600.0)
    } else if seconds >= 60.0 {
        format!("{:.0} min", seconds / 60.0)
    } else {
        format!("{seconds:.1} s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("--deadline", "2d").unwrap(), 172_800.0);
        assert_eq!(parse_duration("--deadline", "36h").unwrap(), 129_600.0);
        assert_eq!(parse_duration("--deadline", "90m").unwrap(), 5_400.0);
        assert_eq!(parse_duration("--deadline", "1d12h").unwrap(), 129_600.0);
        assert_eq!(parse_duration("--deadline", "1.5d").unwrap(), 129_600.0);
        assert_eq!(parse_duration("--max-latency", "60s").unwrap(), 60.0);
        assert_eq!(parse_duration("--max-itl-p99", "50ms").unwrap(), 0.05);
        for bad in ["", "soon", "2x", "d", "0h", "-3d"] {
            let err = format!("{:#}", parse_duration("--deadline", bad).unwrap_err());
            assert!(err.contains("--deadline"), "{bad}: {err}");
        }
    }

    #[test]
    fn workload_forms() {
        let w = Workload::from_flags(Some("902087"), Some("1818"), None, None).unwrap();
        assert!((w.output_tokens - 1.64e9).abs() < 0.001e9);
        let w = Workload::from_flags(None, None, Some("1.64e9"), Some("500")).unwrap();
        assert_eq!(w.output_tokens, 1.64e9);
        assert_eq!(w.avg_output_tokens, None);
        assert_eq!(w.avg_input_tokens, Some(500.0));
        let w = Workload::from_flags(Some("902,087"), None, Some("1.64e9"), None).unwrap();
        assert!((w.avg_output_tokens.unwrap() - 1818.0).abs() < 1.0);
    }

    #[test]
    fn separators_are_thousands_or_refused() {
        assert_eq!(parse_count("--x", "902,087").unwrap(), 902_087.0);
        assert_eq!(parse_count("--x", "1,640,000,000").unwrap(), 1.64e9);
        assert_eq!(parse_count("--x", "1,234.5").unwrap(), 1234.5);
        assert_eq!(parse_count("--x", "1_640_000_000").unwrap(), 1.64e9);
        for bad in [
            "1,64e9", "1,5", "1,64", "12,3456", ",123", "1.5,000", "1,000e3",
        ] {
            let err = format!("{:#}", parse_count("--x", bad).unwrap_err());
            assert!(
                err.contains("--x") && err.contains("ambiguous"),
                "{bad}: {err}"
            );
        }
        let err = format!("{:#}", parse_whole("--completions", "0.5").unwrap_err());
        assert!(err.contains("whole number"), "{err}");
        assert_eq!(parse_whole("--completions", "902087").unwrap(), 902_087.0);
    }

    #[test]
    fn bad_workloads_name_the_flag() {
        let cases = [
            (Some("0"), Some("100"), None, "--completions"),
            (Some("10"), Some("-5"), None, "--avg-output-tokens"),
            (None, None, Some("0"), "--output-tokens"),
            (None, None, Some("lots"), "--output-tokens"),
            (Some("10"), None, None, "--avg-output-tokens"),
            (None, None, None, "--output-tokens"),
        ];
        for (c, a, t, flag) in cases {
            let err = format!("{:#}", Workload::from_flags(c, a, t, None).unwrap_err());
            assert!(err.contains(flag), "{flag}: {err}");
        }
    }

    #[test]
    fn human_durations() {
        assert_eq!(human_duration(11.86 * 86_400.0), "11.9 days");
        assert_eq!(human_duration(1.265 * 86_400.0), "1.26 days");
        assert_eq!(human_duration(15.39 * 3600.0), "15.4 hours");
    }
}

#[cfg(test)]
#[path = "workload_props.rs"]
mod props;
