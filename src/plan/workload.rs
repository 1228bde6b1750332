//! The job to plan: a token budget, and the limits it must meet (deadline, latency).

use anyhow::{anyhow, bail, Result};
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
    /// The output lengths as a distribution (given, or read from a profile): its mean
    /// is `avg_output_tokens`; its spread sets the time-weighted context and the tail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_length: Option<LengthDist>,
    /// The prompt lengths as a distribution; its mean is `avg_input_tokens`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_length: Option<LengthDist>,
}

/// How the job's size is given: the output tokens in all, or completions times the output
/// tokens per completion. Which of them a person must give is the command line's to say.
#[derive(Debug, Clone, PartialEq)]
pub enum TokenBudget {
    /// The output tokens in all, with the completions and the average per completion where
    /// known (given together, the three must agree within 1%).
    Total {
        output_tokens: f64,
        completions: Option<f64>,
        avg_output_tokens: Option<f64>,
    },
    /// Completions times the average output tokens per completion; `None`: the mean of the
    /// output length distribution.
    PerCompletion {
        completions: f64,
        avg_output_tokens: Option<f64>,
    },
}

/// Which parts of the workload were given (the length distributions must not contradict them).
#[derive(Debug, Clone, Copy)]
struct Given {
    avg_output: bool,
    avg_input: bool,
    total: bool,
}

impl Workload {
    /// The workload from its token budget, the prompts' average length, and the length
    /// distributions (see [`Workload::with_lengths`]).
    pub fn new(
        budget: &TokenBudget,
        avg_input_tokens: Option<f64>,
        output: Option<LengthDist>,
        input: Option<LengthDist>,
    ) -> Result<Workload> {
        let (output_tokens, completions, avg_out, avg_given) = match *budget {
            TokenBudget::Total {
                output_tokens,
                completions,
                avg_output_tokens,
            } => {
                let derived = completions.map(|n| output_tokens / n);
                if let (Some(given), Some(derived)) = (avg_output_tokens, derived) {
                    if (given - derived).abs() > 0.01 * derived {
                        bail!(
                            "the output tokens in all ({output_tokens}) / the completions ({}) = \
                             {derived:.0} tokens per completion, but the average output tokens \
                             per completion is {given}; give two of the three",
                            completions.unwrap_or(0.0)
                        );
                    }
                }
                let avg = avg_output_tokens.or(derived);
                (output_tokens, completions, avg, avg_output_tokens.is_some())
            }
            TokenBudget::PerCompletion {
                completions,
                avg_output_tokens,
            } => {
                let avg = avg_output_tokens
                    .or(output.as_ref().map(|d| d.moments().0))
                    .ok_or_else(|| {
                        anyhow!(
                            "the completions need the average output tokens per completion or \
                             an output length distribution"
                        )
                    })?;
                let total = completions * avg;
                (
                    total,
                    Some(completions),
                    Some(avg),
                    avg_output_tokens.is_some(),
                )
            }
        };
        let given = Given {
            avg_output: avg_given,
            avg_input: avg_input_tokens.is_some(),
            total: matches!(budget, TokenBudget::Total { .. }),
        };
        Workload {
            output_tokens,
            completions,
            avg_output_tokens: avg_out,
            avg_input_tokens,
            output_length: None,
            input_length: None,
        }
        .with_lengths(output, input, given)
    }

    /// Adds the length distributions: the output distribution's mean becomes the average
    /// output tokens (and, with the completions, the token total); the input distribution's
    /// mean the average input tokens. The averages given must not say otherwise.
    fn with_lengths(
        mut self,
        output: Option<LengthDist>,
        input: Option<LengthDist>,
        given: Given,
    ) -> Result<Workload> {
        if let Some(d) = output {
            let (mean, _) = d.moments();
            if given.avg_output {
                bail!(
                    "the average output tokens per completion and an output length \
                     distribution (mean {mean:.1}) both give the average: give one"
                );
            }
            match self.completions {
                Some(n) if given.total => {
                    // The total and the completions are given: the mean must agree.
                    let derived = self.output_tokens / n;
                    if (derived - mean).abs() > 0.01 * mean {
                        bail!(
                            "the output tokens in all / the completions = {derived:.1} tokens per \
                             completion, \
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
                    "the average input tokens and an input length distribution both give the \
                     prompt length: give one"
                );
            }
            self.avg_input_tokens = Some(d.moments().0);
            self.input_length = Some(d);
        }
        Ok(self)
    }
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

    fn total(t: f64, n: Option<f64>, avg: Option<f64>) -> TokenBudget {
        TokenBudget::Total {
            output_tokens: t,
            completions: n,
            avg_output_tokens: avg,
        }
    }

    #[test]
    fn workload_forms() {
        let each = TokenBudget::PerCompletion {
            completions: 902_087.0,
            avg_output_tokens: Some(1818.0),
        };
        let w = Workload::new(&each, None, None, None).unwrap();
        assert!((w.output_tokens - 1.64e9).abs() < 0.001e9);
        let w = Workload::new(&total(1.64e9, None, None), Some(500.0), None, None).unwrap();
        assert_eq!(w.output_tokens, 1.64e9);
        assert_eq!(w.avg_output_tokens, None);
        assert_eq!(w.avg_input_tokens, Some(500.0));
        let w = Workload::new(&total(1.64e9, Some(902_087.0), None), None, None, None).unwrap();
        assert!((w.avg_output_tokens.unwrap() - 1818.0).abs() < 1.0);
    }

    #[test]
    fn contradictions_are_refused_in_words() {
        let err = Workload::new(&total(1e9, Some(10.0), Some(5.0)), None, None, None).unwrap_err();
        assert!(err.to_string().contains("give two of the three"), "{err}");
        let fixed = LengthDist::Fixed { value: 100 };
        let err = Workload::new(&total(1e9, None, Some(200.0)), None, Some(fixed), None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("give one") && !err.contains("--"), "{err}");
        let bare = TokenBudget::PerCompletion {
            completions: 10.0,
            avg_output_tokens: None,
        };
        let err = Workload::new(&bare, None, None, None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("output length distribution"), "{err}");
        let w = Workload::new(&bare, None, Some(LengthDist::Fixed { value: 64 }), None).unwrap();
        assert_eq!(w.output_tokens, 640.0);
    }

    #[test]
    fn human_durations() {
        assert_eq!(human_duration(11.86 * 86_400.0), "11.9 days");
        assert_eq!(human_duration(1.265 * 86_400.0), "1.26 days");
        assert_eq!(human_duration(15.39 * 3600.0), "15.4 hours");
    }
}
