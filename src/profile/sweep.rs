//! `[sweep]`: the levels (concurrencies, rates or a trace), trials, windows and timeouts.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};

use super::limits;

/// The concurrency sweep.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Sweep {
    /// Closed-loop concurrency levels, each run as its own set of trials.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub concurrency: Vec<u32>,
    /// Open-loop request rates (requests/s), instead of `concurrency`: requests are sent on
    /// a schedule computed in advance, whether or not earlier ones have finished.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rates: Vec<f64>,
    /// Open loop: the most requests in flight at once (a send waits for a free slot, and the
    /// wait shows as send lag). None: no cap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrency: Option<u32>,
    /// Open loop: how inter-arrival gaps are drawn (default poisson).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arrival: Option<Arrival>,
    /// Open loop, `arrival = "gamma"`: the shape k (1 = Poisson, < 1 burstier, > 1 smoother).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gamma_shape: Option<f64>,
    /// Seed of the open-loop arrival schedule and of the interleaved level order (default 0),
    /// so every run sends on the same schedule in the same order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Measured window of each trial, e.g. "30s", instead of a request count.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "opt_duration_text"
    )]
    pub duration: Option<Duration>,
    /// With `duration`: a window before the measured one whose requests are sent and recorded
    /// but not counted (the server reaches steady state first).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "opt_duration_text"
    )]
    pub warmup: Option<Duration>,
    /// With `duration`: a window after the measured one, load kept on so the last measured
    /// requests do not finish on an emptying server; recorded, not counted.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "opt_duration_text"
    )]
    pub cooldown: Option<Duration>,
    /// Requests per trial at each level. Zero means "4 x concurrency" (at least 8).
    #[serde(default)]
    pub requests_per_level: u32,
    /// Requests sent before a level's first trial and not counted.
    #[serde(default)]
    pub warmup_requests: u32,
    /// Replay a timestamped trace open loop (one level), instead of `concurrency` or `rates`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<TraceSpec>,
    /// Independent replicates per level; the gate needs at least its `min_trials`.
    #[serde(default = "default_trials")]
    pub trials: u32,
    /// Per-request time limit, e.g. "120s" or "5m".
    #[serde(default = "default_request_timeout", with = "duration_text")]
    pub request_timeout: Duration,
    /// Longest wait for the next piece of a started response (a stalled stream fails as
    /// `stall` instead of hanging until the request timeout).
    #[serde(default = "default_stall_timeout", with = "duration_text")]
    pub stall_timeout: Duration,
    /// The largest error rate (failed / sent) a level may have and still count as measured.
    #[serde(default = "default_max_error_rate")]
    pub max_error_rate: f64,
    /// The order trials run in: "interleaved" (default: round r runs trial r of every level,
    /// levels in a seeded order, so a server that drifts during the run does not pile its
    /// drift onto one level) or "sequential" (every trial of a level, then the next level).
    #[serde(default, skip_serializing_if = "TrialOrder::is_interleaved")]
    pub order: TrialOrder,
}

/// The order trials run in (see `Sweep::order`).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum TrialOrder {
    #[default]
    Interleaved,
    Sequential,
}

impl TrialOrder {
    fn is_interleaved(&self) -> bool {
        *self == TrialOrder::Interleaved
    }
}

fn default_trials() -> u32 {
    5
}
fn default_request_timeout() -> Duration {
    Duration::from_secs(300)
}
fn default_stall_timeout() -> Duration {
    Duration::from_secs(60)
}
fn default_max_error_rate() -> f64 {
    0.01
}

/// Open-loop inter-arrival distributions.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Arrival {
    /// Evenly spaced sends.
    Constant,
    /// Exponential gaps: independent arrivals, like many users.
    Poisson,
    /// Gamma gaps with shape `gamma_shape`: burstier or smoother than Poisson.
    Gamma,
}

impl Arrival {
    pub fn name(self) -> &'static str {
        match self {
            Arrival::Constant => "constant",
            Arrival::Poisson => "poisson",
            Arrival::Gamma => "gamma",
        }
    }
}

impl Sweep {
    /// The number of levels: concurrencies, rates, or the one of a trace.
    pub fn level_count(&self) -> usize {
        self.concurrency.len() + self.rates.len() + usize::from(self.trace.is_some())
    }

    /// True when the sweep is open loop (levels are request rates, or a trace's replay).
    pub fn is_open_loop(&self) -> bool {
        !self.rates.is_empty() || self.trace.is_some()
    }

    /// The levels as (concurrency, rate): closed loop, one per concurrency (no rate); open
    /// loop, one per rate at the `max_concurrency` cap (0: uncapped). A trace's one level is
    /// not listed: its rate comes from the trace file, read when the run starts.
    pub fn levels(&self) -> Vec<(u32, Option<f64>)> {
        if self.is_open_loop() {
            let cap = self.max_concurrency.unwrap_or(0);
            self.rates.iter().map(|&r| (cap, Some(r))).collect()
        } else {
            self.concurrency.iter().map(|&c| (c, None)).collect()
        }
    }

    /// Checks `sweep.trace`: it is the sweep's one level, replayed on its own schedule.
    fn validate_trace(&self) -> Result<()> {
        let Some(t) = &self.trace else {
            return Ok(());
        };
        if !self.concurrency.is_empty() || !self.rates.is_empty() {
            bail!("field `sweep.trace`: a trace is the sweep's one level; remove `concurrency` and `rates`");
        }
        for (key, set) in [
            ("duration", self.duration.is_some()),
            ("requests_per_level", self.requests_per_level > 0),
            ("arrival", self.arrival.is_some()),
            ("gamma_shape", self.gamma_shape.is_some()),
            ("seed", self.seed.is_some()),
        ] {
            if set {
                bail!("field `sweep.{key}`: not used with `sweep.trace` (the trace sets when and how many requests are sent)");
            }
        }
        if !(t.speedup.is_finite() && (1e-3..=1e4).contains(&t.speedup)) {
            bail!(
                "field `sweep.trace`: speedup {} is outside [0.001, 10000]",
                t.speedup
            );
        }
        if let Some(r) = t.rows {
            if !(1..=limits::REQUESTS).contains(&r) {
                bail!(
                    "field `sweep.trace`: rows {r} is outside [1, {}]",
                    limits::REQUESTS
                );
            }
        }
        if let Some(c) = self.max_concurrency {
            if !(1..=limits::CONCURRENCY).contains(&c) {
                bail!(
                    "field `sweep.max_concurrency`: {c} is outside [1, {}]",
                    limits::CONCURRENCY
                );
            }
        }
        Ok(())
    }

    /// The whole of a duration trial: warmup + duration + cooldown.
    pub fn trial_span(&self) -> Option<Duration> {
        self.duration.map(|d| {
            d.saturating_add(self.warmup.unwrap_or_default())
                .saturating_add(self.cooldown.unwrap_or_default())
        })
    }

    /// Checks the open-loop and duration keys (they are alternatives to `concurrency` and
    /// `requests_per_level`, and some only mean something together).
    fn validate_open_loop(&self) -> Result<()> {
        if !self.rates.is_empty() && !self.concurrency.is_empty() {
            bail!("field `sweep.rates`: set either `concurrency` (closed loop) or `rates` (open loop), not both");
        }
        for r in &self.rates {
            if !(r.is_finite() && (limits::RATE_MIN..=limits::RATE_MAX).contains(r)) {
                bail!(
                    "field `sweep.rates`: rate {r} is outside [{}, {}] requests/s",
                    limits::RATE_MIN,
                    limits::RATE_MAX
                );
            }
        }
        for (i, a) in self.rates.iter().enumerate() {
            if self.rates[..i].contains(a) {
                bail!("field `sweep.rates`: levels must not repeat");
            }
        }
        let open = !self.rates.is_empty();
        if self.trace.is_some() {
            return self.validate_trace();
        }
        for (key, set) in [
            ("max_concurrency", self.max_concurrency.is_some()),
            ("arrival", self.arrival.is_some()),
            ("gamma_shape", self.gamma_shape.is_some()),
            ("seed", self.seed.is_some()),
        ] {
            if set && !open {
                bail!("field `sweep.{key}`: only means something with `sweep.rates` (open loop)");
            }
        }
        if let Some(c) = self.max_concurrency {
            if !(1..=limits::CONCURRENCY).contains(&c) {
                bail!(
                    "field `sweep.max_concurrency`: {c} is outside [1, {}]",
                    limits::CONCURRENCY
                );
            }
        }
        match (self.arrival, self.gamma_shape) {
            (Some(Arrival::Gamma), None) => {
                bail!("field `sweep.arrival`: \"gamma\" needs `gamma_shape`")
            }
            (Some(Arrival::Gamma), Some(k))
                if !(k.is_finite()
                    && (limits::GAMMA_SHAPE_MIN..=limits::GAMMA_SHAPE_MAX).contains(&k)) =>
            {
                bail!(
                    "field `sweep.gamma_shape`: {k} is outside [{}, {}] (a smaller shape \
                     collapses the schedule into one burst)",
                    limits::GAMMA_SHAPE_MIN,
                    limits::GAMMA_SHAPE_MAX
                )
            }
            (a, Some(_)) if a != Some(Arrival::Gamma) => {
                bail!("field `sweep.gamma_shape`: only used with arrival = \"gamma\"")
            }
            _ => {}
        }
        match self.duration {
            Some(d) => {
                if d.is_zero() {
                    bail!("field `sweep.duration`: must be longer than zero");
                }
                if self.requests_per_level > 0 {
                    bail!("field `sweep.duration`: set either `duration` or `requests_per_level`, not both");
                }
                let span = d
                    .checked_add(self.warmup.unwrap_or_default())
                    .and_then(|s| s.checked_add(self.cooldown.unwrap_or_default()))
                    .filter(|s| *s <= limits::TRIAL_SPAN);
                let Some(span) = span else {
                    bail!(
                        "field `sweep.duration`: duration + warmup + cooldown must be at most {}",
                        humantime::format_duration(limits::TRIAL_SPAN)
                    );
                };
                for r in &self.rates {
                    let n = r * span.as_secs_f64();
                    if n > limits::OPEN_LOOP_REQUESTS {
                        bail!(
                            "field `sweep.rates`: rate {r} over {} schedules {n:.0} requests a \
                             trial; at most {} are allowed (shorten `duration` or lower the rate)",
                            humantime::format_duration(span),
                            limits::OPEN_LOOP_REQUESTS
                        );
                    }
                }
            }
            None => {
                if self.warmup.is_some() || self.cooldown.is_some() {
                    bail!("field `sweep.warmup`: `warmup` and `cooldown` windows need `sweep.duration`");
                }
                if open && self.requests_per_level == 0 {
                    bail!("field `sweep.rates`: an open-loop sweep needs `duration` or `requests_per_level`");
                }
            }
        }
        Ok(())
    }

    /// Requests per trial at `concurrency`, applying the "zero means automatic" rule.
    pub fn requests_at(&self, concurrency: u32) -> u32 {
        if self.requests_per_level > 0 {
            self.requests_per_level
        } else {
            (concurrency.saturating_mul(4)).max(8)
        }
    }

    /// Checks `[sweep]`: the open-loop and duration keys, then the levels, counts, trials,
    /// timeouts and error limit.
    pub fn validate(&self) -> Result<()> {
        let s = self;
        s.validate_open_loop()?;
        if s.concurrency.is_empty() && s.rates.is_empty() && s.trace.is_none() {
            bail!("field `sweep.concurrency`: needs at least one level (or set `sweep.rates`)");
        }
        if let Some(bad) = (s.concurrency.iter()).find(|c| !(1..=limits::CONCURRENCY).contains(*c))
        {
            bail!(
                "field `sweep.concurrency`: level {bad} is outside [1, {}]",
                limits::CONCURRENCY
            );
        }
        for (key, n) in [
            ("requests_per_level", s.requests_per_level),
            ("warmup_requests", s.warmup_requests),
        ] {
            if n > limits::REQUESTS {
                bail!(
                    "field `sweep.{key}`: {n} is outside [0, {}]",
                    limits::REQUESTS
                );
            }
        }
        let mut sorted = s.concurrency.clone();
        sorted.sort_unstable();
        sorted.dedup();
        if sorted.len() != s.concurrency.len() {
            bail!("field `sweep.concurrency`: levels must not repeat");
        }
        if !(1..=limits::TRIALS).contains(&s.trials) {
            bail!(
                "field `sweep.trials`: {} is outside [1, {}]",
                s.trials,
                limits::TRIALS
            );
        }
        for (key, t) in [
            ("request_timeout", s.request_timeout),
            ("stall_timeout", s.stall_timeout),
        ] {
            if t.is_zero() || t > limits::TIMEOUT {
                bail!(
                    "field `sweep.{key}`: {} is outside (0s, {}]",
                    humantime::format_duration(t),
                    humantime::format_duration(limits::TIMEOUT)
                );
            }
        }
        if !(0.0..=1.0).contains(&s.max_error_rate) {
            bail!(
                "field `sweep.max_error_rate`: {} is outside 0..=1",
                s.max_error_rate
            );
        }
        Ok(())
    }
}

/// `sweep.trace`: an open-loop replay of a timestamped trace (see load/workload/trace.rs).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TraceSpec {
    /// An Azure LLM inference trace (`.csv`) or timestamped JSONL, relative to the profile
    /// file; hashed by content (SHA-256), not by path.
    pub path: PathBuf,
    /// Send times are the trace's divided by this (2.0 replays twice as fast).
    #[serde(default = "default_speedup")]
    pub speedup: f64,
    /// Replay the first `rows` requests only (default: all, up to `limits::REQUESTS`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows: Option<u32>,
}

fn default_speedup() -> f64 {
    1.0
}

/// Optional durations written as text.
mod opt_duration_text {
    use serde::{Deserializer, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => super::duration_text::serialize(d, s),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        super::duration_text::deserialize(d).map(Some)
    }
}

/// Reads durations written as text ("90s", "2m", "1h 30m").
mod duration_text {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&humantime::format_duration(*d).to_string())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let text = String::deserialize(d)?;
        humantime::parse_duration(&text).map_err(|e| {
            serde::de::Error::custom(format!(
                "invalid duration {text:?} ({e}); expected e.g. \"120s\" or \"5m\""
            ))
        })
    }
}
