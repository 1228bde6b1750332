//! The benchmark profile: what to measure and how, read from TOML.
//!
//! A profile is strict: unknown keys and out-of-range values are errors that name the file,
//! the line and the field, because a typo that silently falls back to a default would change
//! what is measured without anyone noticing. The canonical hash identifies the measurement
//! procedure (workload and sweep), so that a baseline and a candidate run are only compared
//! when they measured the same thing.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Engine names `target.engine` accepts (besides "auto"), as the probe names them.
pub const ENGINES: [&str; 6] = [
    "vllm",
    "sglang",
    "llama.cpp",
    "tgi",
    "throughline-sim",
    "openai",
];

/// The bounds validation puts on profile numbers: each one sizes memory, a timer or the
/// sockets a run opens, and a value past it would overflow a clock, exhaust memory or run out
/// of file descriptors instead of measuring. The README's "Limits on inputs" lists them.
pub mod limits {
    use std::time::Duration;

    /// The largest profile file read (bytes): a profile is a few hundred bytes of TOML.
    pub const PROFILE_FILE_BYTES: u64 = 1024 * 1024;
    /// The largest workload file (prompts, dataset, trace, tokenizer) the profile hash reads:
    /// above the largest any reader takes (a 2 GiB trace), a bound on the hash's work.
    pub const WORKLOAD_FILE_BYTES: u64 = 4 * 1024 * 1024 * 1024;
    /// `sweep.request_timeout` and `sweep.stall_timeout`: at most a day.
    pub const TIMEOUT: Duration = Duration::from_secs(24 * 3600);
    /// `sweep.duration + warmup + cooldown`: at most a week.
    pub const TRIAL_SPAN: Duration = Duration::from_secs(7 * 24 * 3600);
    /// `sweep.rates`, requests/s.
    pub const RATE_MIN: f64 = 1e-3;
    pub const RATE_MAX: f64 = 1e6;
    /// Requests one open-loop duration trial schedules (rate x span): every request of a
    /// trial is held in memory until the trial ends.
    pub const OPEN_LOOP_REQUESTS: f64 = 1_000_000.0;
    /// `sweep.gamma_shape`: below 0.01 a schedule collapses into one burst.
    pub const GAMMA_SHAPE_MIN: f64 = 0.01;
    pub const GAMMA_SHAPE_MAX: f64 = 100.0;
    /// `workload.input_tokens` (words of a synthetic prompt, built for every request).
    pub const INPUT_TOKENS: u32 = 10_000_000;
    /// `workload.prefix_groups`: distinct shared prefixes, each built once and held.
    pub const PREFIX_GROUPS: u32 = 100_000;
    /// `workload.max_tokens` (and so `min_tokens`, `degenerate_below`).
    pub const MAX_TOKENS: u32 = 10_000_000;
    /// `sweep.concurrency` levels and `sweep.max_concurrency`: each a socket and a task.
    pub const CONCURRENCY: u32 = 65_536;
    /// `sweep.requests_per_level` and `sweep.warmup_requests` (held in memory, as above).
    pub const REQUESTS: u32 = 1_000_000;
    /// `sweep.trials`.
    pub const TRIALS: u32 = 1000;
    /// `workload.dataset.turns`: user turns sent per conversation (each carries the ones
    /// before it, so a conversation's last prompt holds all of them).
    pub const TURNS: u32 = 256;
}

/// The whole profile file.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// A short name, shown in reports and used to name baselines.
    pub name: String,
    #[serde(default)]
    pub description: String,
    pub target: Target,
    pub workload: Workload,
    pub sweep: Sweep,
    #[serde(default)]
    pub gate: GateSettings,
}

/// Which server(s) to measure.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Target {
    /// Base URLs (without `/v1`); requests are spread over all of them in turn.
    pub endpoints: Vec<String>,
    /// The model id to request, or "auto" to ask the server's `/v1/models`.
    #[serde(default = "default_model")]
    pub model: String,
    #[serde(default)]
    pub api: Api,
    /// The *name* of the environment variable that holds the API key (never the key itself).
    /// An unset variable means "no key" (a server without `--api-key` needs none), unless
    /// `api_key_required` says the key must be there.
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// Stop before measuring when `api_key_env`'s variable is not set (a server that needs
    /// the key would otherwise answer every request 401). Left out of the saved profile when
    /// false, so existing profile files and hashes do not change.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub api_key_required: bool,
    /// The engine behind the endpoints: "auto" (recognised from `/metrics`) or one of vllm,
    /// sglang, llama.cpp, tgi, throughline-sim, openai. It decides the request fields that fix
    /// output lengths and how `/metrics` is read. Left out of the saved profile when "auto".
    #[serde(default = "default_model", skip_serializing_if = "is_auto")]
    pub engine: String,
}

fn default_model() -> String {
    "auto".to_string()
}

fn is_auto(s: &str) -> bool {
    s == "auto"
}

/// The OpenAI endpoint to use.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum Api {
    #[default]
    Chat,
    Completions,
}

/// What each request asks for.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    /// Length of synthetic prompts, in words (a word is about one token for most tokenizers).
    #[serde(default = "default_input_tokens")]
    pub input_tokens: u32,
    /// A JSONL file of prompts (`{"prompt": "..."}` or `{"messages": [...]}` per line), relative
    /// to the profile file. Replaces synthetic prompts when set.
    #[serde(default)]
    pub prompts_file: Option<PathBuf>,
    pub max_tokens: u32,
    /// Ask the server to ignore end-of-sequence so every request generates `max_tokens`.
    #[serde(default)]
    pub ignore_eos: bool,
    #[serde(default)]
    pub min_tokens: Option<u32>,
    #[serde(default)]
    pub temperature: Option<f64>,
    #[serde(default)]
    pub top_p: Option<f64>,
    /// Stream responses (needed for TTFT and ITL).
    #[serde(default = "default_true")]
    pub stream: bool,
    /// A successful response with fewer output tokens than this is counted as a failure of
    /// class `degenerate` (a 6-token "OK" is not a completion).
    #[serde(default = "default_degenerate_below")]
    pub degenerate_below: u32,
    /// Fail a response without `usage` as `missing_usage`. When false (the default), its
    /// output tokens are counted one per content chunk and the trial is flagged. Left out of
    /// the serialized profile when false, so existing profile hashes do not change.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub require_usage: bool,
    /// Seed of the length draws (`output_length`, `input_length`; default 0): every run of
    /// the profile draws the same lengths for the same request numbers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Output lengths drawn per request (seeded by `seed`): each request asks for its
    /// drawn length as `max_tokens` (and, with `ignore_eos`, as the engine's minimum), capped
    /// at `max_tokens`. Absent: every request asks for `max_tokens`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_length: Option<LengthDist>,
    /// Synthetic prompt lengths (words) drawn per request, instead of `input_tokens` for all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_length: Option<LengthDist>,
    /// The served model's `tokenizer.json` (or a folder holding one), relative to the
    /// profile file, or a model id (`Qwen/Qwen3-8B`) found in the local Hugging Face cache
    /// when no such path exists: synthetic prompts (and drawn or traced input lengths) are then exactly
    /// that many tokens instead of words, and dataset answers are counted exactly. Hashed by
    /// content.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokenizer: Option<PathBuf>,
    /// Real requests from a dataset file, sent round-robin, each with its own output length.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dataset: Option<DatasetSpec>,
    /// A system prompt of this many tokens (words without `tokenizer`) opens every synthetic
    /// prompt, shared by the requests of a group (request n is in group n mod
    /// `prefix_groups`): a workload a server's prefix cache can serve, on purpose.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared_prefix_tokens: Option<u32>,
    /// With `shared_prefix_tokens`: how many different system prompts (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix_groups: Option<u32>,
}

/// `workload.dataset`: a ShareGPT JSON or JSONL file of requests (see load/dataset.rs).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DatasetSpec {
    /// The file, relative to the profile file; hashed by content (SHA-256), not by path.
    pub path: PathBuf,
    pub format: DatasetFormat,
    /// Keep the first `rows` usable rows only (default: all, up to `limits::DATASET_ROWS`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows: Option<u32>,
    /// ShareGPT only: send up to this many user turns of each conversation, one after the
    /// answer to the one before, each carrying the conversation so far (default 1: the first
    /// turn alone). Multi-turn runs are closed loop: a turn waits for its predecessor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turns: Option<u32>,
    /// With `turns` above 1: which answers a later turn carries (default `server`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<History>,
}

/// The assistant turns a multi-turn conversation carries forward.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum History {
    /// The server's own answers, as a chat client sends them back (a server that caches
    /// what it generated serves the history from its prefix cache, as in real chats).
    #[default]
    Server,
    /// The dataset's reference answers: the same prompts every run, whatever the server said.
    Dataset,
}

/// Which format a dataset file is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DatasetFormat {
    /// ShareGPT JSON: the first human turn is the prompt, the answer after it sets the length.
    Sharegpt,
    /// One request a line: `prompt` or `messages`, optional `max_tokens` or `output`.
    Jsonl,
}

/// `sweep.trace`: an open-loop replay of a timestamped trace (see load/trace.rs).
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

/// A distribution of lengths (tokens or words), drawn per request and rounded to a whole
/// number of at least 1.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "distribution", rename_all = "lowercase", deny_unknown_fields)]
pub enum LengthDist {
    /// Always `value`.
    Fixed { value: u32 },
    /// Whole numbers uniform on [mean (1 - range_ratio), mean (1 + range_ratio)], as vLLM's
    /// random dataset draws them.
    Uniform { mean: f64, range_ratio: f64 },
    /// Normal with this mean and standard deviation.
    Normal { mean: f64, sd: f64 },
    /// Lognormal with this mean and standard deviation (of the lengths, not of their log).
    Lognormal { mean: f64, sd: f64 },
    /// An empirical histogram: `[low, high, weight]` rows, a bin drawn by weight, then a
    /// whole number uniform in [low, high).
    Histogram { bins: Vec<[f64; 3]> },
}

impl LengthDist {
    /// The mean and standard deviation of the lengths the distribution describes (before
    /// rounding and the caps).
    pub fn moments(&self) -> (f64, f64) {
        match self {
            LengthDist::Fixed { value } => (f64::from(*value), 0.0),
            LengthDist::Uniform { mean, .. } => {
                let (lo, hi) = self.uniform_bounds().unwrap_or((*mean, *mean));
                let n = hi - lo + 1.0;
                ((lo + hi) / 2.0, ((n * n - 1.0) / 12.0).sqrt())
            }
            LengthDist::Normal { mean, sd } | LengthDist::Lognormal { mean, sd } => (*mean, *sd),
            LengthDist::Histogram { bins } => {
                let total: f64 = bins.iter().map(|b| b[2]).sum();
                let (mut m1, mut m2) = (0.0, 0.0);
                for [lo, hi, w] in bins {
                    // Whole numbers uniform on [lo, hi): mean (lo + hi - 1) / 2.
                    let (a, b) = (lo.ceil(), (hi.ceil() - 1.0).max(lo.ceil()));
                    let n = b - a + 1.0;
                    let mean = (a + b) / 2.0;
                    let var = (n * n - 1.0) / 12.0;
                    m1 += w / total * mean;
                    m2 += w / total * (var + mean * mean);
                }
                (m1, (m2 - m1 * m1).max(0.0).sqrt())
            }
        }
    }

    /// The whole-number bounds of a uniform distribution.
    pub fn uniform_bounds(&self) -> Option<(f64, f64)> {
        match self {
            LengthDist::Uniform { mean, range_ratio } => Some((
                (mean * (1.0 - range_ratio)).floor().max(1.0),
                (mean * (1.0 + range_ratio)).ceil().max(1.0),
            )),
            _ => None,
        }
    }

    /// Checks the parameters; `field` names the key in messages, `cap` is the largest length.
    fn validate(&self, field: &str, cap: u32) -> Result<()> {
        let cap = f64::from(cap);
        let bad = |what: String| Err(anyhow::anyhow!("field `{field}`: {what}"));
        match self {
            LengthDist::Fixed { value } if *value == 0 || f64::from(*value) > cap => {
                return bad(format!("value {value} is outside [1, {cap}]"));
            }
            LengthDist::Uniform { mean, range_ratio } => {
                if !(*range_ratio >= 0.0 && *range_ratio < 1.0) {
                    return bad(format!("range_ratio {range_ratio} is outside [0, 1)"));
                }
                if !(*mean >= 1.0 && mean * (1.0 + range_ratio) <= cap) {
                    return bad(format!(
                        "mean {mean} x (1 + range_ratio) must be in [1, {cap}] (the cap)"
                    ));
                }
            }
            LengthDist::Normal { mean, sd } | LengthDist::Lognormal { mean, sd } => {
                if !(*mean >= 1.0 && *mean <= cap) {
                    return bad(format!("mean {mean} is outside [1, {cap}] (the cap)"));
                }
                if !(sd.is_finite() && *sd >= 0.0) {
                    return bad(format!("sd {sd} must be a finite number >= 0"));
                }
            }
            LengthDist::Histogram { bins } => {
                if bins.is_empty() {
                    return bad("bins is empty; give [low, high, weight] rows".into());
                }
                for (i, [lo, hi, w]) in bins.iter().enumerate() {
                    if !(*lo >= 1.0 && lo < hi && *hi <= cap + 1.0) {
                        return bad(format!(
                            "bins[{i}] = [{lo}, {hi}, {w}]: needs 1 <= low < high <= {}",
                            cap + 1.0
                        ));
                    }
                    if !(w.is_finite() && *w >= 0.0) {
                        return bad(format!("bins[{i}]: weight {w} must be >= 0"));
                    }
                }
                let total = bins.iter().map(|b| b[2]).sum::<f64>();
                if total <= 0.0 {
                    return bad("bins: the weights sum to 0".into());
                }
                if !total.is_finite() {
                    return bad(format!(
                        "bins: the weights sum to {total}, past the largest number; only their \
                         ratios matter, so scale them down (e.g. to counts or shares)"
                    ));
                }
            }
            _ => {}
        }
        Ok(())
    }
}

fn default_input_tokens() -> u32 {
    128
}
fn default_true() -> bool {
    true
}
fn default_degenerate_below() -> u32 {
    8
}

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
}

/// Settings of the regression gate (they do not change what is measured, so they are not
/// part of the profile hash).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct GateSettings {
    /// Family-wise significance level, Holm-corrected across gated levels.
    #[serde(default = "default_alpha")]
    pub alpha: f64,
    /// The smallest relative drop in throughput that may fail the gate (0.03 = 3%).
    #[serde(default = "default_min_effect")]
    pub min_effect: f64,
    /// Trials needed on each side before a level may fail.
    #[serde(default = "default_min_trials")]
    pub min_trials: u32,
    /// "Pass" rules out, at every level, a drop larger than `tolerance` with this one-sided
    /// confidence (0.95; no multiplicity correction: every level must pass on its own).
    #[serde(default = "default_pass_confidence")]
    pub pass_confidence: f64,
    /// The drop a pass rules out (0.05 = 5%). `min_effect` stays the fail threshold.
    #[serde(default = "default_tolerance")]
    pub tolerance: f64,
    /// A drop beyond this (0.25 = 25%) fails even when the data cannot estimate the
    /// between-session variation (a baseline of one or two sessions): no plausible restart
    /// or neighbour moves a server that far.
    #[serde(default = "default_guard")]
    pub guard: f64,
    /// Fail (exit 3) when the data cannot tell whether the change regressed, instead of
    /// passing loudly (exit 0).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fail_on_inconclusive: bool,
    /// `baseline bless --append` keeps the newest this many sessions (a rolling window of
    /// main's history).
    #[serde(default = "default_max_sessions")]
    pub max_sessions: u32,
    /// Latency gates, off unless set: the relative rise of a per-trial p99 that may fail,
    /// e.g. `ttft_p99 = 0.10` (10%). Same test as throughput, "higher is worse".
    #[serde(default, skip_serializing_if = "LatencyGates::is_empty")]
    pub latency: LatencyGates,
}

/// Latency gates (see `GateSettings::latency`): each the smallest rise that may fail.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LatencyGates {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_p99: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub itl_p99: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub e2e_p99: Option<f64>,
}

impl LatencyGates {
    pub fn is_empty(&self) -> bool {
        self.ttft_p99.is_none() && self.itl_p99.is_none() && self.e2e_p99.is_none()
    }
}

impl GateSettings {
    /// These settings with any value given on the command line put in its place, checked
    /// like the profile's (errors name the flag).
    pub fn overridden(
        &self,
        alpha: Option<f64>,
        min_effect: Option<f64>,
        min_trials: Option<u32>,
        tolerance: Option<f64>,
    ) -> Result<GateSettings> {
        if let Some(a) = alpha.filter(|a| !(*a > 0.0 && *a < 0.5)) {
            bail!("--alpha: {a} is outside (0, 0.5)");
        }
        if let Some(e) = min_effect.filter(|e| !(0.0..1.0).contains(e)) {
            bail!("--min-effect: {e} is outside [0, 1) (0.03 means 3%)");
        }
        if let Some(n) = min_trials.filter(|n| *n < 2) {
            bail!("--min-trials: {n} is below 2 (a variance needs two trials)");
        }
        if let Some(t) = tolerance.filter(|t| !(*t > 0.0 && *t < 1.0)) {
            bail!("--tolerance: {t} is outside (0, 1) (0.05 means 5%)");
        }
        let settings = GateSettings {
            alpha: alpha.unwrap_or(self.alpha),
            min_effect: min_effect.unwrap_or(self.min_effect),
            min_trials: min_trials.unwrap_or(self.min_trials),
            tolerance: tolerance.unwrap_or(self.tolerance),
            ..self.clone()
        };
        settings.validate()?;
        Ok(settings)
    }

    /// Checks every setting; errors name the field (`gate.alpha`) and the allowed range. A
    /// NaN alpha or a min_effect of 2 would make the gate pass anything.
    pub fn validate(&self) -> Result<()> {
        let within = |name: &str, v: f64, lo: f64, hi: f64, lo_open: bool| -> Result<()> {
            let ok = v.is_finite() && (if lo_open { v > lo } else { v >= lo }) && v < hi;
            if !ok {
                let open = if lo_open { "(" } else { "[" };
                bail!("field `gate.{name}`: {v} is outside {open}{lo}, {hi})");
            }
            Ok(())
        };
        within("alpha", self.alpha, 0.0, 0.5, true)?;
        within("min_effect", self.min_effect, 0.0, 1.0, false)?;
        within("guard", self.guard, self.min_effect, 1.0, true)?;
        within("pass_confidence", self.pass_confidence, 0.5, 1.0, false)?;
        within("tolerance", self.tolerance, 0.0, 1.0, true)?;
        if self.min_trials < 2 {
            bail!("field `gate.min_trials`: must be at least 2 (a variance needs two trials)");
        }
        if self.max_sessions < 1 {
            bail!("field `gate.max_sessions`: 0 keeps no session");
        }
        for (name, v) in [
            ("latency.ttft_p99", self.latency.ttft_p99),
            ("latency.itl_p99", self.latency.itl_p99),
            ("latency.e2e_p99", self.latency.e2e_p99),
        ] {
            if let Some(v) = v {
                within(name, v, 0.0, 10.0, true)?;
            }
        }
        Ok(())
    }
}

impl Default for GateSettings {
    fn default() -> Self {
        GateSettings {
            alpha: default_alpha(),
            min_effect: default_min_effect(),
            min_trials: default_min_trials(),
            pass_confidence: default_pass_confidence(),
            tolerance: default_tolerance(),
            guard: default_guard(),
            fail_on_inconclusive: false,
            max_sessions: default_max_sessions(),
            latency: LatencyGates::default(),
        }
    }
}

fn default_guard() -> f64 {
    0.25
}
fn default_max_sessions() -> u32 {
    20
}

fn default_alpha() -> f64 {
    0.01
}
fn default_min_effect() -> f64 {
    0.03
}
fn default_pass_confidence() -> f64 {
    0.95
}
fn default_tolerance() -> f64 {
    0.05
}
fn default_min_trials() -> u32 {
    5
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

impl Profile {
    /// Reads and validates a profile file. Errors name the file and, for syntax and schema
    /// errors, the line and field (from the TOML parser).
    pub fn load(path: &Path) -> Result<Profile> {
        let text = crate::fsutil::read_bounded(path, limits::PROFILE_FILE_BYTES)
            .with_context(|| format!("cannot read profile {}", path.display()))?;
        let mut profile =
            Profile::parse(&text).with_context(|| format!("invalid profile {}", path.display()))?;
        profile.resolve_files(path)?;
        Ok(profile)
    }

    /// Takes the workload's files (prompts, tokenizer, dataset, trace) relative to the
    /// profile file at `path` (where the profile is read from a git ref too: `ci`), as every
    /// command that reads a profile does.
    pub fn resolve_files(&mut self, path: &Path) -> Result<()> {
        let dir = path.parent().unwrap_or_else(|| Path::new("."));
        let resolve = |p: &mut PathBuf| {
            if p.is_relative() {
                *p = dir.join(&*p);
            }
        };
        let w = &mut self.workload;
        if let Some(p) = w.prompts_file.as_mut() {
            resolve(p);
        }
        if let Some(t) = w.tokenizer.as_mut() {
            *t = crate::tokenize::resolve(dir, t).with_context(|| {
                format!(
                    "invalid profile {}: field `workload.tokenizer`",
                    path.display()
                )
            })?;
        }
        if let Some(d) = w.dataset.as_mut() {
            resolve(&mut d.path);
        }
        if let Some(t) = self.sweep.trace.as_mut() {
            resolve(&mut t.path);
        }
        Ok(())
    }

    /// Checks `workload.dataset.turns` and `history`: multi-turn conversations come from
    /// ShareGPT files and run closed loop (a turn is sent when the answer before it is in).
    fn validate_turns(&self, d: &DatasetSpec) -> Result<()> {
        let turns = d.turns.unwrap_or(1);
        if !(1..=limits::TURNS).contains(&turns) {
            bail!(
                "field `workload.dataset.turns`: {turns} is outside [1, {}]",
                limits::TURNS
            );
        }
        if turns == 1 {
            if d.history.is_some() {
                bail!("field `workload.dataset.history`: needs `turns` above 1 (one turn carries no history)");
            }
            return Ok(());
        }
        if d.format != DatasetFormat::Sharegpt {
            bail!(
                "field `workload.dataset.turns`: multi-turn conversations come from ShareGPT \
                 files (a JSONL row's `messages` is sent as one request, its history included)"
            );
        }
        if self.target.api != Api::Chat {
            bail!(
                "field `workload.dataset.turns`: multi-turn conversations need the chat API \
                 (target.api = \"chat\"): a completions prompt has no turns to carry"
            );
        }
        if self.sweep.is_open_loop() {
            bail!(
                "field `workload.dataset.turns`: multi-turn conversations run closed loop (a \
                 turn is sent when the answer to the one before it has come back); use \
                 `sweep.concurrency`, not `sweep.rates` or `sweep.trace`"
            );
        }
        Ok(())
    }

    /// Parses and validates profile text.
    pub fn parse(text: &str) -> Result<Profile> {
        let profile: Profile = toml::from_str(text).map_err(|e| anyhow::anyhow!("{e}"))?;
        profile
            .validate()
            .map_err(|e| match field_line(text, &e.to_string()) {
                Some(line) => anyhow::anyhow!("line {line}: {e}"),
                None => e,
            })?;
        Ok(profile)
    }

    pub fn validate(&self) -> Result<()> {
        if self.name.trim().is_empty() {
            bail!("field `name`: must not be empty");
        }
        if self.target.endpoints.is_empty() {
            bail!("field `target.endpoints`: needs at least one base URL");
        }
        for (i, url) in self.target.endpoints.iter().enumerate() {
            let parsed = reqwest::Url::parse(url).map_err(|e| {
                anyhow::anyhow!("field `target.endpoints[{i}]`: {url:?} is not a URL ({e})")
            })?;
            if !matches!(parsed.scheme(), "http" | "https") {
                bail!("field `target.endpoints[{i}]`: {url:?} must start with http:// or https://");
            }
        }
        if self.target.api_key_required && self.target.api_key_env.is_none() {
            bail!("field `target.api_key_required`: needs `target.api_key_env`, the name of the variable that holds the key");
        }
        let engine = self.target.engine.as_str();
        if engine != "auto" && !ENGINES.contains(&engine) {
            bail!(
                "field `target.engine`: {engine:?} is not one of \"auto\", {}",
                ENGINES.map(|e| format!("{e:?}")).join(", ")
            );
        }
        if self.target.model.trim().is_empty() {
            bail!("field `target.model`: must not be empty (use \"auto\" to ask the server)");
        }
        let w = &self.workload;
        if !(1..=limits::MAX_TOKENS).contains(&w.max_tokens) {
            bail!(
                "field `workload.max_tokens`: {} is outside [1, {}]",
                w.max_tokens,
                limits::MAX_TOKENS
            );
        }
        if w.input_tokens == 0 && w.prompts_file.is_none() {
            bail!("field `workload.input_tokens`: must be at least 1");
        }
        if w.input_tokens > limits::INPUT_TOKENS {
            bail!(
                "field `workload.input_tokens`: {} is outside [1, {}]",
                w.input_tokens,
                limits::INPUT_TOKENS
            );
        }
        if let Some(min) = w.min_tokens {
            if min > w.max_tokens {
                bail!(
                    "field `workload.min_tokens`: {min} is larger than max_tokens {}",
                    w.max_tokens
                );
            }
        }
        if w.degenerate_below > w.max_tokens {
            bail!(
                "field `workload.degenerate_below`: {} is larger than max_tokens {}; every \
                 response would count as degenerate",
                w.degenerate_below,
                w.max_tokens
            );
        }
        if let Some(d) = &w.output_length {
            d.validate("workload.output_length", w.max_tokens)?;
        }
        if let Some(d) = &w.input_length {
            if w.prompts_file.is_some() {
                bail!(
                    "field `workload.input_length`: draws synthetic prompt lengths, but \
                     workload.prompts_file gives the prompts; remove one"
                );
            }
            d.validate("workload.input_length", limits::INPUT_TOKENS)?;
        }
        if let Some(d) = &w.dataset {
            for (key, set) in [
                ("prompts_file", w.prompts_file.is_some()),
                ("input_length", w.input_length.is_some()),
            ] {
                if set {
                    bail!("field `workload.{key}`: workload.dataset gives the prompts; remove one");
                }
            }
            if let Some(r) = d.rows {
                if !(1..=limits::REQUESTS).contains(&r) {
                    bail!(
                        "field `workload.dataset`: rows {r} is outside [1, {}]",
                        limits::REQUESTS
                    );
                }
            }
            self.validate_turns(d)?;
        }
        if w.prefix_groups.is_some() && w.shared_prefix_tokens.is_none() {
            bail!("field `workload.prefix_groups`: needs `workload.shared_prefix_tokens`");
        }
        if let Some(n) = w.shared_prefix_tokens {
            if !(1..=limits::INPUT_TOKENS).contains(&n) {
                bail!(
                    "field `workload.shared_prefix_tokens`: {n} is outside [1, {}]",
                    limits::INPUT_TOKENS
                );
            }
            let groups = w.prefix_groups.unwrap_or(1);
            if !(1..=limits::PREFIX_GROUPS).contains(&groups) {
                bail!(
                    "field `workload.prefix_groups`: {groups} is outside [1, {}]",
                    limits::PREFIX_GROUPS
                );
            }
            if u64::from(n) * u64::from(groups) > u64::from(limits::INPUT_TOKENS) {
                bail!(
                    "field `workload.prefix_groups`: {groups} prefixes of {n} tokens are more \
                     than {} tokens in all (every prefix is held in memory)",
                    limits::INPUT_TOKENS
                );
            }
            for (key, set) in [
                ("prompts_file", w.prompts_file.is_some()),
                ("dataset", w.dataset.is_some()),
                ("shared_prefix_tokens", self.sweep.trace.is_some()),
            ] {
                if set {
                    bail!("field `workload.{key}`: a shared prefix opens synthetic prompts only (not with prompts_file, dataset or sweep.trace)");
                }
            }
        }
        if self.sweep.trace.is_some() {
            for (key, set) in [
                ("prompts_file", w.prompts_file.is_some()),
                ("dataset", w.dataset.is_some()),
                ("input_length", w.input_length.is_some()),
                ("output_length", w.output_length.is_some()),
            ] {
                if set {
                    bail!("field `workload.{key}`: sweep.trace gives every request's input and output length; remove one");
                }
            }
        }
        if let Some(t) = w.temperature {
            if !(0.0..=2.0).contains(&t) {
                bail!("field `workload.temperature`: {t} is outside 0..=2");
            }
        }
        if let Some(p) = w.top_p {
            if !(p > 0.0 && p <= 1.0) {
                bail!("field `workload.top_p`: {p} is outside (0, 1]");
            }
        }
        let s = &self.sweep;
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
        self.gate.validate()
    }

    /// SHA-256 over the parts of the profile that decide what is measured: the API, the model,
    /// the workload and the sweep. Endpoints, the key variable, the description and the gate
    /// settings are left out: moving a server to another port or tightening the gate does not
    /// change the measurement. Files (prompts, dataset, tokenizer, trace) are hashed by
    /// content, not by path: the same file moved is the same measurement, an edited one is not.
    pub fn canonical_hash(&self) -> Result<String> {
        let w = &self.workload;
        let mut workload = serde_json::to_value(w)?;
        workload["prompts_file"] = match &w.prompts_file {
            Some(path) => serde_json::json!(file_digest(path, "workload.prompts_file")?),
            None => serde_json::Value::Null,
        };
        if let Some(path) = &w.tokenizer {
            let file = if path.is_dir() {
                path.join("tokenizer.json")
            } else {
                path.clone()
            };
            workload["tokenizer"] = serde_json::json!(file_digest(&file, "workload.tokenizer")?);
        }
        if let Some(d) = &w.dataset {
            workload["dataset"]["path"] =
                serde_json::json!(file_digest(&d.path, "workload.dataset.path")?);
        }
        let mut sweep = serde_json::to_value(&self.sweep)?;
        if let Some(t) = &self.sweep.trace {
            sweep["trace"]["path"] = serde_json::json!(file_digest(&t.path, "sweep.trace.path")?);
        }
        let canonical = serde_json::json!({
            "api": self.target.api,
            "model": self.target.model,
            "workload": workload,
            "sweep": sweep,
        });
        // serde_json's Map is ordered by key (no preserve_order feature), so this text is
        // canonical: the same profile always gives the same bytes.
        let text = serde_json::to_string(&canonical)?;
        Ok(format!("sha256:{}", hex(&Sha256::digest(text.as_bytes()))))
    }
}

/// The SHA-256 of a file's bytes, read in pieces (a dataset can be large). A special file
/// (a FIFO, `/dev/zero`) is refused before it is read, and a file past
/// [`limits::WORKLOAD_FILE_BYTES`] while it is read: hashing must not hang or run forever.
fn file_digest(path: &Path, field: &str) -> Result<String> {
    let mut hasher = Sha256::new();
    crate::fsutil::stream_bounded(path, limits::WORKLOAD_FILE_BYTES, &mut hasher)
        .with_context(|| format!("field `{field}`"))?;
    Ok(hex(&hasher.finalize()))
}

/// What `bench --endpoint URL` (without a profile file) and `init` build a profile from: the
/// flags given, sensible defaults for the rest. The profile is made as commented TOML text and
/// parsed like any profile file, so what runs is exactly what `--save-profile` writes, and
/// keys added to the schema later take their defaults here too.
#[derive(Debug, Clone, PartialEq)]
pub struct QuickStart {
    pub endpoints: Vec<String>,
    /// The model id, or "auto" (asked of `/v1/models` at every run).
    pub model: String,
    pub concurrency: Vec<u32>,
    pub max_tokens: u32,
    pub trials: u32,
    /// The name of the variable holding an API key, if any (commented out when None).
    pub api_key_env: Option<String>,
    /// What the probe found (engine, max context, ...), written as comments at the top.
    pub notes: Vec<String>,
}

impl QuickStart {
    /// Three levels that show single-stream speed, moderate batching and a loaded server.
    pub const CONCURRENCY: [u32; 3] = [1, 8, 32];
    /// Output tokens per request: long enough for steady decode, short enough for a quick run.
    pub const MAX_TOKENS: u32 = 256;
    /// Prompt words (about one token each).
    pub const INPUT_TOKENS: u32 = 256;
    /// Trials per level: the fewest the gate (and `baseline bless`) accepts, so the profile
    /// can become a baseline as it is.
    pub const TRIALS: u32 = 5;
    /// Requests before each level's first trial, not counted.
    pub const WARMUP_REQUESTS: u32 = 4;

    /// The defaults for one endpoint.
    pub fn new(endpoint: &str) -> QuickStart {
        QuickStart {
            endpoints: vec![endpoint.to_string()],
            model: "auto".to_string(),
            concurrency: Self::CONCURRENCY.to_vec(),
            max_tokens: Self::MAX_TOKENS,
            trials: Self::TRIALS,
            api_key_env: None,
            notes: Vec::new(),
        }
    }

    /// The profile as commented TOML (what `init` and `--save-profile` write).
    pub fn toml(&self) -> String {
        // A string with a control character (a model id from a server) as one basic string
        // with escapes, not a multi-line string: JSON's escapes are TOML's.
        let quote = |s: &str| match s.chars().any(char::is_control) {
            true => serde_json::to_string(s).unwrap_or_default(),
            false => toml::Value::String(s.to_string()).to_string(),
        };
        // A key line with its comment in a column, as people write them.
        let line = |key: &str, comment: &str| format!("{key:<40}# {comment}\n");
        let mut out = String::from(
            "# A throughline benchmark profile. Run it with:\n\
             #   throughline bench --profile THIS_FILE\n\
             # Every key is described in the README (\"The profile\"); unknown keys are errors.\n",
        );
        // A note may quote a server (init's model ids): one comment line each, control
        // characters escaped, so no note becomes a key.
        for note in &self.notes {
            out.push_str(&format!("# {}\n", crate::untrusted::for_terminal(note)));
        }
        out.push('\n');
        out.push_str(&line("name = \"quick\"", "names reports and baselines"));
        out.push_str("\n[target]\n# Base URLs without /v1; several are data-parallel replicas, used in turn.\n");
        let endpoints: Vec<String> = self.endpoints.iter().map(|e| quote(e)).collect();
        out.push_str(&format!("endpoints = [{}]\n", endpoints.join(", ")));
        out.push_str(&line(
            &format!("model = {}", quote(&self.model)),
            "the id to request; \"auto\" asks /v1/models at every run",
        ));
        out.push_str(&line("api = \"chat\"", "or \"completions\""));
        match &self.api_key_env {
            Some(var) => out.push_str(&line(
                &format!("api_key_env = {}", quote(var)),
                "the *name* of the variable; unset = no key",
            )),
            None => {
                out.push_str(&line(
                    "# api_key_env = \"OPENAI_API_KEY\"",
                    "the *name* of a variable holding a key; unset = no key",
                ));
                out.push_str(&line(
                    "# api_key_required = true",
                    "make an unset variable an error",
                ));
            }
        }
        out.push_str(&line(
            "# engine = \"auto\"",
            "or vllm, sglang, llama.cpp, tgi, openai; auto: from /metrics",
        ));
        out.push_str("\n[workload]\n");
        out.push_str(&line(
            &format!("input_tokens = {}", Self::INPUT_TOKENS),
            "synthetic prompts of this many words (~1 token each)",
        ));
        out.push_str(&line(
            &format!("max_tokens = {}", self.max_tokens),
            "output tokens asked of every request",
        ));
        out.push_str(&line(
            "ignore_eos = true",
            "every request generates all max_tokens",
        ));
        out.push_str("\n[sweep]\n");
        let levels: Vec<String> = self.concurrency.iter().map(u32::to_string).collect();
        out.push_str(&line(
            &format!("concurrency = [{}]", levels.join(", ")),
            "closed-loop levels: requests in flight",
        ));
        out.push_str(&line(
            &format!("trials = {}", self.trials),
            "independent trials per level (the gate wants 5 a side)",
        ));
        out.push_str(&line(
            "requests_per_level = 0",
            "per trial; 0 = 4 x concurrency (at least 8)",
        ));
        out.push_str(&line(
            &format!("warmup_requests = {}", Self::WARMUP_REQUESTS),
            "before each level, not counted",
        ));
        out.push_str(&line(
            "request_timeout = \"5m\"",
            "one request's time limit",
        ));
        out.push_str(&line(
            "stall_timeout = \"60s\"",
            "longest silence within a response",
        ));
        out.push_str(&line(
            "max_error_rate = 0.01",
            "a level with more failed requests did not measure",
        ));
        out
    }

    /// The profile itself, validated like a profile file (errors name the field).
    pub fn profile(&self) -> Result<Profile> {
        Profile::parse(&self.toml())
    }
}

/// The line of the field a validation message names (`field \`table.key\``), if the text
/// has it: validation runs on parsed values, which no longer know their lines.
fn field_line(text: &str, message: &str) -> Option<usize> {
    let start = message.find("field `")? + "field `".len();
    let path = &message[start..start + message[start..].find('`')?];
    let path = path.split('[').next()?;
    let (table, key) = match path.rsplit_once('.') {
        Some((t, k)) => (Some(t), k),
        None => (None, path),
    };
    let mut in_table = table.is_none();
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim();
        if trimmed.starts_with('[') {
            in_table =
                table.is_some_and(|t| trimmed.trim_matches(|c| c == '[' || c == ']').trim() == t);
            continue;
        }
        if in_table {
            if let Some((k, _)) = trimmed.split_once('=') {
                if k.trim() == key {
                    return Some(i + 1);
                }
            }
        }
    }
    None
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
name = "seed-122b"
[target]
endpoints = ["http://127.0.0.1:30000"]
[workload]
input_tokens = 1000
max_tokens = 1000
ignore_eos = true
[sweep]
concurrency = [1, 4, 16, 32, 64]
trials = 5
request_timeout = "2m"
"#;

    /// Dataset, tokenizer and trace files are read relative to the profile and hashed by
    /// content: the same bytes elsewhere are the same measurement, other bytes are not.
    #[test]
    fn workload_files_are_relative_and_hashed_by_content() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, body: &str| std::fs::write(dir.path().join(name), body).unwrap();
        write("d.jsonl", "{\"prompt\": \"a\", \"max_tokens\": 3}\n");
        write("t.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n");
        write("tokenizer.json", "{}");
        // A dataset profile, or (dataset "") a trace profile; both with the tokenizer.
        let profile = |dataset: &str, trace: &str| {
            let mut text = GOOD.replace("ignore_eos = true", "tokenizer = \".\"");
            if dataset.is_empty() {
                text = text.replace(
                    "concurrency = [1, 4, 16, 32, 64]",
                    &format!("trace = {{ path = \"{trace}\" }}"),
                );
            } else {
                text = text.replace(
                    "tokenizer = \".\"",
                    &format!("tokenizer = \".\"\ndataset = {{ path = \"{dataset}\", format = \"jsonl\" }}"),
                );
            }
            let path = dir.path().join("p.toml");
            std::fs::write(&path, text).unwrap();
            Profile::load(&path).unwrap()
        };
        let p = profile("d.jsonl", "");
        assert_eq!(
            p.workload.dataset.as_ref().unwrap().path,
            dir.path().join("d.jsonl")
        );
        assert_eq!(
            p.workload.tokenizer.as_ref().unwrap(),
            &dir.path().join(".")
        );
        let h = p.canonical_hash().unwrap();
        write("copy.jsonl", "{\"prompt\": \"a\", \"max_tokens\": 3}\n");
        assert_eq!(profile("copy.jsonl", "").canonical_hash().unwrap(), h);
        write("copy.jsonl", "{\"prompt\": \"b\", \"max_tokens\": 3}\n");
        assert_ne!(profile("copy.jsonl", "").canonical_hash().unwrap(), h);
        let t = profile("", "t.csv");
        assert_eq!(t.sweep.trace.as_ref().unwrap().speedup, 1.0);
        let th = t.canonical_hash().unwrap();
        write("t2.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n");
        assert_eq!(profile("", "t2.csv").canonical_hash().unwrap(), th);
        write("t2.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n1,2,3\n");
        assert_ne!(profile("", "t2.csv").canonical_hash().unwrap(), th);
        write("tokenizer.json", "{ }");
        assert_ne!(profile("d.jsonl", "").canonical_hash().unwrap(), h);
    }

    #[test]
    fn dataset_and_trace_conflicts_name_the_field() {
        let err = |from: &str, to: &str| {
            format!("{:#}", Profile::parse(&GOOD.replace(from, to)).unwrap_err())
        };
        let e = err(
            "ignore_eos = true",
            "prompts_file = \"p.jsonl\"\ndataset = { path = \"d\", format = \"sharegpt\" }",
        );
        assert!(
            e.contains("workload.prompts_file") && e.contains("line 8"),
            "{e}"
        );
        let e = err(
            "ignore_eos = true",
            "dataset = { path = \"d\", format = \"csv\" }",
        );
        assert!(e.contains("csv"), "{e}");
        let e = err("trials = 5", "trials = 5\ntrace = { path = \"t.csv\" }");
        assert!(
            e.contains("sweep.trace") && e.contains("remove `concurrency`"),
            "{e}"
        );
        let trace = |extra: &str| {
            GOOD.replace(
                "concurrency = [1, 4, 16, 32, 64]",
                &format!("trace = {{ path = \"t.csv\"{extra} }}"),
            )
        };
        let e = format!("{:#}", Profile::parse(&trace(", speedup = 0")).unwrap_err());
        assert!(e.contains("speedup 0"), "{e}");
        let e = format!(
            "{:#}",
            Profile::parse(&trace("").replace("trials = 5", "trials = 5\nrequests_per_level = 9"))
                .unwrap_err()
        );
        assert!(e.contains("sweep.requests_per_level"), "{e}");
        let e = format!(
            "{:#}",
            Profile::parse(&trace("").replace(
                "ignore_eos = true",
                "[workload.output_length]\ndistribution = \"fixed\"\nvalue = 5"
            ))
            .unwrap_err()
        );
        assert!(e.contains("workload.output_length"), "{e}");
        let p = Profile::parse(&trace(", speedup = 4.0, rows = 10")).unwrap();
        assert!(p.sweep.is_open_loop());
    }

    /// Multi-turn conversations: ShareGPT only, closed loop only, a bounded number of turns;
    /// `history` only with more than one turn. Unset keys leave the profile hash as it was.
    #[test]
    fn multi_turn_settings_are_checked() {
        let with = |dataset: &str, sweep: &str| {
            let text = GOOD
                .replace("ignore_eos = true", &format!("dataset = {{ {dataset} }}"))
                .replace("concurrency = [1, 4, 16, 32, 64]", sweep);
            Profile::parse(&text).map_err(|e| format!("{e:#}"))
        };
        let closed = "concurrency = [1, 4]";
        let sharegpt = "path = \"d.json\", format = \"sharegpt\"";
        let p = with(
            &format!("{sharegpt}, turns = 4, history = \"dataset\""),
            closed,
        )
        .unwrap();
        let d = p.workload.dataset.as_ref().unwrap();
        assert_eq!((d.turns, d.history), (Some(4), Some(History::Dataset)));
        for (dataset, sweep, expect) in [
            (
                format!("{sharegpt}, turns = 0"),
                closed,
                "turns`: 0 is outside",
            ),
            (
                format!("{sharegpt}, turns = 257"),
                closed,
                "turns`: 257 is outside",
            ),
            (
                format!("{sharegpt}, history = \"server\""),
                closed,
                "needs `turns` above 1",
            ),
            (
                "path = \"d.jsonl\", format = \"jsonl\", turns = 2".to_string(),
                closed,
                "come from ShareGPT",
            ),
            (
                format!("{sharegpt}, turns = 2"),
                "rates = [1.0]",
                "run closed loop",
            ),
            (format!("{sharegpt}, history = \"mine\""), closed, "mine"),
        ] {
            let e = with(&dataset, sweep).unwrap_err();
            assert!(e.contains(expect), "{dataset} / {sweep}: {e}");
        }
        let completions = GOOD
            .replace("[target]\n", "[target]\napi = \"completions\"\n")
            .replace(
                "ignore_eos = true",
                &format!("dataset = {{ {sharegpt}, turns = 2 }}"),
            );
        let e = format!("{:#}", Profile::parse(&completions).unwrap_err());
        assert!(e.contains("need the chat API"), "{e}");
        let one = with(sharegpt, closed).unwrap();
        let json = serde_json::to_string(one.workload.dataset.as_ref().unwrap()).unwrap();
        assert!(
            !json.contains("turns") && !json.contains("history"),
            "{json}"
        );
    }

    #[test]
    fn parses_with_defaults() {
        let p = Profile::parse(GOOD).unwrap();
        assert_eq!(p.target.model, "auto");
        assert_eq!(p.target.api, Api::Chat);
        assert_eq!(p.sweep.request_timeout, Duration::from_secs(120));
        assert_eq!(p.sweep.requests_at(16), 64);
        assert_eq!(p.sweep.requests_at(1), 8);
        assert_eq!(p.gate.min_trials, 5);
        assert!(p.workload.stream);
    }

    #[test]
    fn unknown_key_names_line_and_field() {
        let text = GOOD.replace("trials = 5", "trails = 5");
        let err = format!("{:#}", Profile::parse(&text).unwrap_err());
        assert!(err.contains("line 11"), "{err}");
        assert!(err.contains("trails"), "{err}");
    }

    #[test]
    fn bad_value_names_field() {
        let text = GOOD.replace("concurrency = [1, 4, 16, 32, 64]", "concurrency = [1, 0]");
        let err = format!("{:#}", Profile::parse(&text).unwrap_err());
        assert!(
            err.contains("sweep.concurrency") && err.contains("line 10"),
            "{err}"
        );
        let text = GOOD.replace("request_timeout = \"2m\"", "request_timeout = \"soon\"");
        let err = format!("{:#}", Profile::parse(&text).unwrap_err());
        assert!(err.contains("line 12") && err.contains("soon"), "{err}");
    }

    #[test]
    fn hash_ignores_endpoints_but_not_workload() {
        let a = Profile::parse(GOOD).unwrap().canonical_hash().unwrap();
        let moved = GOOD.replace("127.0.0.1:30000", "127.0.0.1:31000");
        let b = Profile::parse(&moved).unwrap().canonical_hash().unwrap();
        assert_eq!(a, b);
        let longer = GOOD.replace("max_tokens = 1000", "max_tokens = 1024");
        let c = Profile::parse(&longer).unwrap().canonical_hash().unwrap();
        assert_ne!(a, c);
        assert!(a.starts_with("sha256:") && a.len() == 7 + 64);
    }

    #[test]
    fn open_loop_keys_parse_validate_and_change_the_hash() {
        let closed = Profile::parse(GOOD).unwrap();
        // Closed-loop profiles hash as before: the new keys are absent, not null.
        let sweep = serde_json::to_value(&closed.sweep).unwrap();
        for key in [
            "rates",
            "arrival",
            "duration",
            "warmup",
            "seed",
            "max_concurrency",
        ] {
            assert!(sweep.get(key).is_none(), "{key} in {sweep}");
        }
        let open_text = GOOD.replace(
            "concurrency = [1, 4, 16, 32, 64]",
            "rates = [10.0, 50.0]\nmax_concurrency = 64\narrival = \"gamma\"\ngamma_shape = 0.5\nseed = 3\nduration = \"30s\"\nwarmup = \"5s\"\ncooldown = \"5s\"",
        );
        let open = Profile::parse(&open_text).unwrap();
        assert!(open.sweep.is_open_loop());
        assert_eq!(open.sweep.trial_span(), Some(Duration::from_secs(40)));
        let h = open.canonical_hash().unwrap();
        assert_ne!(h, closed.canonical_hash().unwrap());
        let other_seed = Profile::parse(&open_text.replace("seed = 3", "seed = 4")).unwrap();
        assert_ne!(h, other_seed.canonical_hash().unwrap());
        // Round trip through JSON (results files carry the profile).
        let back: Profile = serde_json::from_value(serde_json::to_value(&open).unwrap()).unwrap();
        assert_eq!(back, open);

        for (bad, field) in [
            ("rates = [10.0]\nconcurrency = [2]", "sweep.rates"),
            ("rates = [0.0]\nrequests_per_level = 5", "sweep.rates"),
            ("rates = [5.0]", "sweep.rates"),
            ("concurrency = [2]\narrival = \"poisson\"", "sweep.arrival"),
            (
                "rates = [5.0]\nrequests_per_level = 5\narrival = \"gamma\"",
                "sweep.arrival",
            ),
            ("concurrency = [2]\nwarmup = \"5s\"", "sweep.warmup"),
        ] {
            let text = GOOD.replace("concurrency = [1, 4, 16, 32, 64]", bad);
            let err = format!("{:#}", Profile::parse(&text).unwrap_err());
            assert!(err.contains(field), "{bad}: {err}");
        }
    }

    /// Values that once panicked, aborted, exhausted memory or ran out of sockets: each is
    /// refused by validation with its field named and the allowed range.
    #[test]
    fn values_past_the_limits_are_refused_with_the_field() {
        let sweep_line = "concurrency = [1, 4, 16, 32, 64]";
        let open = |extra: &str| format!("rates = [5.0]\nrequests_per_level = 20\n{extra}");
        let cases: Vec<(String, String, &str, &str)> = vec![
            (
                "request_timeout = \"2m\"".into(),
                "request_timeout = \"1000000h\"".into(),
                "sweep.request_timeout",
                "1day",
            ),
            (
                sweep_line.into(),
                format!("{sweep_line}\nstall_timeout = \"25h\""),
                "sweep.stall_timeout",
                "1day",
            ),
            (
                sweep_line.into(),
                "concurrency = [2]\nduration = \"18446744073709551615s\"\nwarmup = \"10s\"".into(),
                "sweep.duration",
                "7days",
            ),
            (
                sweep_line.into(),
                "concurrency = [2]\nduration = \"6days\"\nwarmup = \"2days\"".into(),
                "sweep.duration",
                "7days",
            ),
            (
                sweep_line.into(),
                open("").replace("5.0", "1e-20"),
                "sweep.rates",
                "[0.001, 1000000]",
            ),
            (
                sweep_line.into(),
                open("").replace("5.0", "1e300"),
                "sweep.rates",
                "[0.001, 1000000]",
            ),
            (
                sweep_line.into(),
                "rates = [100000.0]\nduration = \"7days\"".into(),
                "sweep.rates",
                "at most",
            ),
            (
                sweep_line.into(),
                open("arrival = \"gamma\"\ngamma_shape = 1e-300"),
                "sweep.gamma_shape",
                "[0.01, 100]",
            ),
            (
                sweep_line.into(),
                open("arrival = \"gamma\"\ngamma_shape = 1000.0"),
                "sweep.gamma_shape",
                "[0.01, 100]",
            ),
            (
                sweep_line.into(),
                open("max_concurrency = 1000000"),
                "sweep.max_concurrency",
                "[1, 65536]",
            ),
            (
                sweep_line.into(),
                "concurrency = [1000000]".into(),
                "sweep.concurrency",
                "[1, 65536]",
            ),
            (
                sweep_line.into(),
                format!("{sweep_line}\nrequests_per_level = 4000000000"),
                "sweep.requests_per_level",
                "1000000",
            ),
            (
                sweep_line.into(),
                format!("{sweep_line}\nwarmup_requests = 4000000000"),
                "sweep.warmup_requests",
                "1000000",
            ),
            (
                "trials = 5".into(),
                "trials = 100000".into(),
                "sweep.trials",
                "[1, 1000]",
            ),
            (
                "input_tokens = 1000".into(),
                "input_tokens = 4000000000".into(),
                "workload.input_tokens",
                "[1, 10000000]",
            ),
            (
                "max_tokens = 1000".into(),
                "max_tokens = 4000000000".into(),
                "workload.max_tokens",
                "[1, 10000000]",
            ),
        ];
        for (from, to, field, range) in cases {
            let text = GOOD.replace(&from, &to);
            assert_ne!(text, GOOD, "{from} not in the profile");
            let err = format!("{:#}", Profile::parse(&text).unwrap_err());
            assert!(err.contains(field) && err.contains(range), "{to}: {err}");
        }
        // The edges themselves are allowed.
        for (from, to) in [
            (sweep_line, "concurrency = [65536]"),
            ("request_timeout = \"2m\"", "request_timeout = \"24h\""),
            (
                sweep_line,
                "rates = [0.001, 1000000.0]\nrequests_per_level = 20",
            ),
            (
                sweep_line,
                "concurrency = [2]\nduration = \"6days\"\nwarmup = \"1day\"",
            ),
            ("trials = 5", "trials = 1000"),
        ] {
            Profile::parse(&GOOD.replace(from, to)).unwrap_or_else(|e| panic!("{to}: {e:#}"));
        }
    }

    #[test]
    fn profile_files_are_read_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("big.toml");
        let mut text = GOOD.to_string();
        text.push_str(&"# padding\n".repeat(120_000));
        std::fs::write(&big, text).unwrap();
        for (path, says) in [
            (big.as_path(), "over the limit"),
            (Path::new("/dev/zero"), "not a regular file"),
        ] {
            let err = format!("{:#}", Profile::load(path).unwrap_err());
            assert!(
                err.contains(says) && err.contains(&*path.to_string_lossy()),
                "{err}"
            );
        }
    }
}

#[cfg(test)]
#[path = "profile_props.rs"]
mod props;
