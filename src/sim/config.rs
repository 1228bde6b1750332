//! The simulator's configuration and its validation.

use anyhow::{bail, Result};

use super::draw::session_factor;

/// Everything that shapes one simulated engine. Rates are in tokens per second of real
/// (wall-clock) time: there is deliberately no time-scale knob, so a figure the simulator
/// produces is the figure a client measures.
#[derive(Debug, Clone, PartialEq)]
pub struct SimConfig {
    /// Preset this configuration came from (reported in `/metrics` `throughline_sim_info`).
    pub preset: String,
    /// Model id served by `/v1/models` and echoed in responses.
    pub model: String,
    /// Most requests decoded at once; the rest wait FIFO.
    pub max_running: usize,
    /// USL lambda: decode tokens/s of one request running alone.
    pub lambda: f64,
    /// USL contention coefficient.
    pub sigma: f64,
    /// USL coherency coefficient.
    pub kappa: f64,
    /// Mean tokens a request gains per decode step (above 1 only with MTP).
    pub tokens_per_step_mean: f64,
    /// Most tokens a request gains per step (speculative decoding); 1 disables MTP.
    pub mtp_max: u32,
    /// Seconds each prompt token adds to the step in which its request is admitted.
    pub prefill_s_per_token: f64,
    /// Fixed cadence: every step lasts exactly this long whatever the batch, prefill ignored
    /// (0 = no delay at all, for benchmarking the client).
    pub token_delay_ms: Option<f64>,
    /// Mean natural output length (lognormal) of requests that do not set `ignore_eos`.
    pub natural_len_mean: f64,
    /// Shape (sigma of the underlying normal) of the natural-length lognormal.
    pub natural_len_sigma: f64,
    /// `max_tokens` used when a request sets none.
    pub default_max_tokens: u32,
    /// Multiplies every step's duration: 1.10 makes the server 10% slower (fakes a regression).
    pub slowdown: f64,
    /// Session-to-session variation: each start of a [`SimCluster`](super::SimCluster) draws
    /// one speed factor `exp(session_jitter * z)`, `z ~ N(0, 1)` from `seed`, and multiplies
    /// every step of all its replicas by it, like `slowdown` (a restarted server shifts every
    /// trial it serves). 0 = no jitter, the factor is exactly 1.
    pub session_jitter: f64,
    /// Seed of all random draws; each replica derives its own from it.
    pub seed: u64,
    /// Keep the time each streamed content chunk was handed to the connection, per request
    /// that names a `user`, and serve them at `GET /sim/send-times`: `selfbench` pairs them
    /// with the client's arrival times to separate the client's timing error from the
    /// simulator's own lateness.
    pub record_send_times: bool,
    /// Count prompt tokens with this tokenizer (as a real server does) instead of one per
    /// whitespace-separated word.
    pub tokenizer: Option<crate::tokenize::SharedTokenizer>,
    /// Cache chat prompts at message boundaries (see `prefix_cache.rs`): a request whose
    /// messages before its last were prefilled (or generated) before prefills only the rest.
    pub prefix_cache: bool,
    /// Tokens a chat template adds to every prompt (counted in usage.prompt_tokens and
    /// prefilled): a longer template, as a changed chat template makes it.
    pub template_tokens: u32,
    /// KV cache capacity in tokens (None: unbounded). Running requests hold their prompt and
    /// generated tokens; a request is admitted only while it fits, and when growth overflows
    /// the cache the request admitted last is preempted (back to the queue's front, its
    /// tokens prefilled again on readmission), as vLLM's recompute preemption does.
    pub kv_cache_tokens: Option<u64>,
    /// The version `GET /version` and `/metrics` report (None: this build's), so that a test
    /// can stand up two "engine versions" side by side.
    pub engine_version: Option<String>,
}

impl SimConfig {
    /// USL denominator `1 + sigma (b-1) + kappa b (b-1)` for a running batch of `b`.
    pub fn usl_denominator(&self, b: usize) -> f64 {
        let b = b as f64;
        1.0 + self.sigma * (b - 1.0) + self.kappa * b * (b - 1.0)
    }

    /// Steady-state aggregate decode tokens/s at batch `b` (prefill excluded): the USL curve.
    pub fn usl_throughput(&self, b: usize) -> f64 {
        self.lambda * b as f64 / self.usl_denominator(b)
    }

    /// The speed factor of a session (process start) under this configuration: exactly 1
    /// without jitter, else lognormal with sd `session_jitter` on the log scale, drawn from
    /// `seed` (the same seed, the same factor).
    /// The version the server reports: the one given, else this build's.
    pub fn version(&self) -> String {
        (self.engine_version.clone()).unwrap_or_else(|| env!("CARGO_PKG_VERSION").to_string())
    }

    pub fn session_factor(&self) -> f64 {
        session_factor(self.seed, self.session_jitter)
    }

    /// The configuration one session runs: `slowdown` multiplied by the session factor, the
    /// jitter spent (so applying it twice changes nothing).
    pub fn session(&self) -> SimConfig {
        SimConfig {
            slowdown: self.slowdown * self.session_factor(),
            session_jitter: 0.0,
            ..self.clone()
        }
    }

    /// Rejects configurations that would divide by zero, loop forever, overflow a duration or
    /// panic later. Every numeric knob has a range (the `L_*` limits below); the error names
    /// the `serve-sim` flag where there is one, and the range.
    pub fn validate(&self) -> Result<()> {
        check(&L_MAX_RUNNING, self.max_running as f64)?;
        check(&L_SLOWDOWN, self.slowdown)?;
        check(&L_SESSION_JITTER, self.session_jitter)?;
        check(&L_MTP_MAX, f64::from(self.mtp_max))?;
        let tpsm = Limit {
            hi: f64::from(self.mtp_max),
            ..L_TOKENS_PER_STEP_MEAN
        };
        check(&tpsm, self.tokens_per_step_mean)?;
        check(&L_PREFILL, self.prefill_s_per_token)?;
        check(&L_NATURAL_LEN_MEAN, self.natural_len_mean)?;
        check(&L_NATURAL_LEN_SIGMA, self.natural_len_sigma)?;
        check(&L_DEFAULT_MAX_TOKENS, f64::from(self.default_max_tokens))?;
        check(&L_TEMPLATE_TOKENS, f64::from(self.template_tokens))?;
        if let Some(kv) = self.kv_cache_tokens {
            check(&L_KV_CACHE_TOKENS, kv as f64)?;
        }
        match self.token_delay_ms {
            Some(d) => check(&L_TOKEN_DELAY_MS, d)?,
            None => {
                check(&L_LAMBDA, self.lambda)?;
                check(&L_SIGMA, self.sigma)?;
                check(&L_KAPPA, self.kappa)?;
                if let Some(b) = (1..=self.max_running).find(|&b| self.usl_denominator(b) <= 0.0) {
                    bail!("USL denominator is not positive at batch {b}: check sigma/kappa");
                }
            }
        }
        // Each knob in range can still multiply into an absurd step (slow lambda, huge batch,
        // large slowdown): the slowest decode step must stay a sensible duration. The USL
        // denominator is convex in the batch (kappa >= 0), so the slowest step is at one end.
        let slowest = step_seconds(self, 1, 0).max(step_seconds(self, self.max_running, 0));
        if !(0.0..=MAX_STEP_S).contains(&slowest) {
            let inputs = match self.token_delay_ms {
                Some(_) => "--token-delay-ms",
                None => "lambda, sigma, kappa or --max-running",
            };
            bail!(
                "the slowest decode step would last {slowest:e} s (at most {MAX_STEP_S} s \
                 allowed): lower --slowdown ({}) or change {inputs}",
                self.slowdown
            );
        }
        Ok(())
    }
}

/// Seconds one step lasts with `batch` requests running, `admitted_prompt_tokens` of which
/// were admitted (prefilled) in this step.
pub fn step_seconds(cfg: &SimConfig, batch: usize, admitted_prompt_tokens: u64) -> f64 {
    let base = match cfg.token_delay_ms {
        Some(ms) => ms / 1000.0,
        None => {
            cfg.tokens_per_step_mean / cfg.lambda * cfg.usl_denominator(batch)
                + cfg.prefill_s_per_token * admitted_prompt_tokens as f64
        }
    };
    base * cfg.slowdown
}

/// The longest a decode step may last (without prefill) in a valid configuration.
pub const MAX_STEP_S: f64 = 3600.0;

/// The range a numeric knob must lie in. `lo_open`: the lower bound itself is excluded.
#[derive(Debug, Clone, Copy)]
struct Limit {
    /// The `SimConfig` field (and sim config key).
    field: &'static str,
    /// The `serve-sim` flag that sets it, if any.
    flag: Option<&'static str>,
    lo: f64,
    lo_open: bool,
    hi: f64,
}

impl Limit {
    fn contains(&self, v: f64) -> bool {
        // NaN fails both comparisons, so it is out of every range.
        let above = if self.lo_open {
            v > self.lo
        } else {
            v >= self.lo
        };
        above && v <= self.hi
    }

    fn range(&self) -> String {
        let open = if self.lo_open { '(' } else { '[' };
        format!("{open}{}, {}]", show(self.lo), show(self.hi))
    }
}

const fn limit(field: &'static str, flag: Option<&'static str>, lo: f64, hi: f64) -> Limit {
    Limit {
        field,
        flag,
        lo,
        lo_open: false,
        hi,
    }
}

const fn open_limit(field: &'static str, flag: Option<&'static str>, lo: f64, hi: f64) -> Limit {
    Limit {
        field,
        flag,
        lo,
        lo_open: true,
        hi,
    }
}

// Bounds generous for any real server, tight enough that no duration, allocation or loop
// built from them overflows.
const L_MAX_RUNNING: Limit = limit("max_running", Some("--max-running"), 1.0, 1_000_000.0);
const L_SLOWDOWN: Limit = open_limit("slowdown", Some("--slowdown"), 0.0, 1000.0);
const L_SESSION_JITTER: Limit = limit("session_jitter", Some("--session-jitter"), 0.0, 1.0);
const L_TOKEN_DELAY_MS: Limit = limit("token_delay_ms", Some("--token-delay-ms"), 0.0, 60_000.0);
const L_MTP_MAX: Limit = limit("mtp_max", None, 1.0, 64.0);
/// The upper bound is `mtp_max`, filled in by `validate`.
const L_TOKENS_PER_STEP_MEAN: Limit = limit("tokens_per_step_mean", None, 1.0, 64.0);
const L_PREFILL: Limit = limit("prefill_s_per_token", None, 0.0, 1.0);
const L_NATURAL_LEN_MEAN: Limit = open_limit("natural_len_mean", None, 0.0, 1e7);
const L_NATURAL_LEN_SIGMA: Limit = limit("natural_len_sigma", None, 0.0, 10.0);
const L_DEFAULT_MAX_TOKENS: Limit = limit("default_max_tokens", None, 1.0, 10_000_000.0);
const L_TEMPLATE_TOKENS: Limit = limit("template_tokens", Some("--template-tokens"), 0.0, 1e6);
const L_KV_CACHE_TOKENS: Limit = limit("kv_cache_tokens", Some("--kv-cache-tokens"), 1.0, 1e12);
const L_LAMBDA: Limit = limit("lambda", None, 1e-3, 1e9);
const L_SIGMA: Limit = limit("sigma", None, -1.0, 1.0);
const L_KAPPA: Limit = limit("kappa", None, 0.0, 1.0);

fn check(l: &Limit, v: f64) -> Result<()> {
    if l.contains(v) {
        return Ok(());
    }
    let (range, v) = (l.range(), show(v));
    match l.flag {
        Some(flag) => bail!("{flag} ({}) must lie in {range}, got {v}", l.field),
        None => bail!("{} must lie in {range}, got {v}", l.field),
    }
}

/// A number as a person would write it: 1e300 rather than 301 digits.
fn show(v: f64) -> String {
    if v.is_finite() && v != 0.0 && !(1e-4..1e9).contains(&v.abs()) {
        format!("{v:e}")
    } else {
        format!("{v}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every knob's range, for the table-driven tests.
    const LIMITS: &[Limit] = &[
        L_MAX_RUNNING,
        L_SLOWDOWN,
        L_SESSION_JITTER,
        L_TOKEN_DELAY_MS,
        L_MTP_MAX,
        L_TOKENS_PER_STEP_MEAN,
        L_PREFILL,
        L_NATURAL_LEN_MEAN,
        L_NATURAL_LEN_SIGMA,
        L_DEFAULT_MAX_TOKENS,
        L_LAMBDA,
        L_SIGMA,
        L_KAPPA,
    ];

    /// A configuration in which every other knob is harmless for the knob under test.
    fn base_for(field: &str) -> SimConfig {
        match field {
            "max_running" => SimConfig::preset("instant").unwrap(),
            "token_delay_ms" => SimConfig::preset("fixed").unwrap(),
            _ => SimConfig {
                max_running: 1,
                mtp_max: 64,
                ..SimConfig::preset("fast").unwrap()
            },
        }
    }

    /// Sets `field` to `v`; false where the field cannot hold `v` (integers).
    fn set(cfg: &mut SimConfig, field: &str, v: f64) -> bool {
        let int = v.is_finite() && v >= 0.0 && v.fract() == 0.0;
        match field {
            "max_running" if int => cfg.max_running = v as usize,
            "mtp_max" if int && v <= f64::from(u32::MAX) => cfg.mtp_max = v as u32,
            "default_max_tokens" if int && v <= f64::from(u32::MAX) => {
                cfg.default_max_tokens = v as u32
            }
            "max_running" | "mtp_max" | "default_max_tokens" => return false,
            "slowdown" => cfg.slowdown = v,
            "session_jitter" => cfg.session_jitter = v,
            "token_delay_ms" => cfg.token_delay_ms = Some(v),
            "tokens_per_step_mean" => cfg.tokens_per_step_mean = v,
            "prefill_s_per_token" => cfg.prefill_s_per_token = v,
            "natural_len_mean" => cfg.natural_len_mean = v,
            "natural_len_sigma" => cfg.natural_len_sigma = v,
            "lambda" => cfg.lambda = v,
            "sigma" => cfg.sigma = v,
            "kappa" => cfg.kappa = v,
            other => panic!("no setter for {other}"),
        }
        true
    }

    /// Just outside a bound: the next representable step for floats, 1 for integers.
    fn outside(v: f64, up: bool) -> [f64; 2] {
        let step = if up { 1.0 } else { -1.0 };
        let ulp = (v.abs() * 1e-12).max(1e-300);
        [v + step * ulp, v + step]
    }

    #[test]
    fn every_bound_holds_and_the_error_names_flag_and_range() {
        for l in LIMITS {
            let mut accepted = vec![l.hi];
            if !l.lo_open {
                accepted.push(l.lo);
            }
            let mut rejected = vec![f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 1e300, -1e300];
            rejected.extend(outside(l.hi, true));
            rejected.extend(outside(l.lo, false));
            if l.lo_open {
                rejected.push(l.lo);
            }
            for v in accepted {
                let mut cfg = base_for(l.field);
                assert!(set(&mut cfg, l.field, v), "{} = {v}", l.field);
                if let Err(e) = cfg.validate() {
                    panic!("{} = {v} is in range but rejected: {e}", l.field);
                }
            }
            for v in rejected {
                let mut cfg = base_for(l.field);
                if !set(&mut cfg, l.field, v) {
                    continue;
                }
                let e = match cfg.validate() {
                    Ok(()) => panic!("{} = {v} is out of range but accepted", l.field),
                    Err(e) => e.to_string(),
                };
                assert!(e.contains(l.field), "{e}");
                assert!(e.contains(&l.range()), "{e}");
                if let Some(flag) = l.flag {
                    assert!(e.contains(flag), "{e}");
                }
            }
        }
    }

    #[test]
    fn ranges_read_as_intervals() {
        assert_eq!(L_SLOWDOWN.range(), "(0, 1000]");
        assert_eq!(L_TOKEN_DELAY_MS.range(), "[0, 60000]");
        assert_eq!(L_SESSION_JITTER.range(), "[0, 1]");
        let e = SimConfig {
            slowdown: 1e300,
            ..SimConfig::preset("fast").unwrap()
        }
        .validate()
        .unwrap_err()
        .to_string();
        assert_eq!(e, "--slowdown (slowdown) must lie in (0, 1000], got 1e300");
    }

    #[test]
    fn knobs_in_range_that_multiply_into_an_absurd_step_are_refused() {
        let cfg = SimConfig {
            lambda: 1e-3,
            slowdown: 1000.0,
            ..SimConfig::preset("fast").unwrap()
        };
        let e = cfg.validate().unwrap_err().to_string();
        assert!(
            e.contains("slowest decode step") && e.contains("--slowdown"),
            "{e}"
        );
        let cfg = SimConfig {
            token_delay_ms: Some(60_000.0),
            slowdown: 1000.0,
            ..SimConfig::preset("fixed").unwrap()
        };
        let e = cfg.validate().unwrap_err().to_string();
        assert!(e.contains("--token-delay-ms"), "{e}");
    }

    /// Before validation bounded them, `--slowdown 1e300` and `--token-delay-ms 1e300`
    /// passed and the engine panicked turning the first step into a `Duration`.
    #[test]
    fn values_that_used_to_panic_the_engine_are_refused() {
        let huge_slowdown = SimConfig {
            slowdown: 1e300,
            ..SimConfig::preset("fast").unwrap()
        };
        let huge_delay = SimConfig {
            token_delay_ms: Some(1e300),
            ..SimConfig::preset("fixed").unwrap()
        };
        for (cfg, flag) in [
            (huge_slowdown, "--slowdown"),
            (huge_delay, "--token-delay-ms"),
        ] {
            let secs = step_seconds(&cfg, 1, 0);
            let old = std::panic::catch_unwind(|| std::time::Duration::from_secs_f64(secs));
            assert!(old.is_err(), "the old conversion of {secs} s should panic");
            let e = cfg.validate().unwrap_err().to_string();
            assert!(e.contains(flag), "{e}");
        }
    }
}
