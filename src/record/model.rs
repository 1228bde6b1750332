//! The results model: a run, its levels and trials, and what a trial carries (client
//! headroom, open-loop schedule, prompt checks), with the small rules that read them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::request::{ErrorClass, TokenSource};
use super::trial_flags::TrialFlag;
use super::{analysis, blocks, telemetry};
use crate::profile::Profile;
use crate::stats::decision::Drift;
use crate::stats::{Percentiles, Spread};

/// One benchmark run: a sweep of concurrency levels, several trials each.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RunResult {
    pub schema_version: u32,
    /// The tool and version that measured it, e.g. "throughline 0.1.0".
    pub tool: String,
    pub profile_name: String,
    pub profile_hash: String,
    /// The profile as run (it names the API key variable, never the key).
    pub profile: Profile,
    pub environment: Environment,
    /// RFC 3339 UTC timestamps.
    pub started_at: String,
    pub finished_at: String,
    /// False when the run was interrupted or stopped early: the levels hold what was measured.
    pub complete: bool,
    pub levels: Vec<LevelResult>,
    #[serde(default)]
    pub warnings: Vec<String>,
    /// Relative (A/B) runs: the base arm (`levels` above are the head's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<BaseArm>,
    /// Interleaved runs: the trend of tok/s across the rounds (`flagged`: the server drifted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift: Option<Drift>,
    /// What the reader should know about how the workload was made (input lengths in words,
    /// output lengths estimated): facts about the run, not doubts about a trial.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Servers throughline started itself (`--server-command`): the commands, the slots and
    /// each block's server pair. Absent when the servers were started by someone else.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub servers: Option<blocks::ServerSetup>,
    /// Peak, knee and the planner's scaling fit, computed once by [`RunResult::analyse`] and
    /// read by every report; absent from files written before it existed (recomputed on load).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub analysis: Option<analysis::Analysis>,
    /// The id of the run that wrote this file (`run_id.rs`): the verdict and the comment
    /// derived from it carry the same id. Absent from files of older builds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
}

/// Where the numbers were measured: the fingerprint a baseline is compared on.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct Environment {
    pub gpu_model: Option<String>,
    pub gpu_count: Option<u32>,
    pub driver: Option<String>,
    /// Inference engine (vllm, sglang, llama.cpp, tgi, throughline-sim), given or detected.
    pub engine: Option<String>,
    pub engine_version: Option<String>,
    /// The model id the requests named (after resolving "auto").
    pub model: Option<String>,
    pub precision: Option<String>,
    /// The CI runner label or host this ran on.
    pub runner: Option<String>,
    /// How many endpoints (replicas) received requests.
    pub endpoints: usize,
    /// Speculative decoding (MTP, draft model) was on, so more than one token per decode step
    /// is possible.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speculative: Option<bool>,
    /// Typed values (flags, THROUGHLINE_ variables) that differ from what was detected
    /// (nvidia-smi, the engine's version endpoint): the typed value was kept, and the gate
    /// says so in its verdict.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overridden: Vec<Override>,
}

/// A fingerprint field whose typed value differs from the detected one.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Override {
    pub field: String,
    pub typed: String,
    pub detected: String,
}

impl Environment {
    /// One sentence per override, for warnings and the verdict.
    pub fn override_lines(&self) -> Vec<String> {
        self.overridden
            .iter()
            .map(|o| {
                format!(
                    "{}: typed {:?} but detected {:?}; the typed value was recorded",
                    o.field, o.typed, o.detected
                )
            })
            .collect()
    }
}

/// All trials at one concurrency level.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LevelResult {
    /// Closed loop: the number of concurrent streams. Open loop: the `max_concurrency` cap,
    /// 0 when uncapped (the level is keyed by `rate`).
    pub concurrency: u32,
    /// Open loop: the target request rate (requests/s); `None` for closed-loop levels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
    pub trials: Vec<TrialResult>,
}

impl LevelResult {
    /// A level with no trial yet.
    pub fn empty(concurrency: u32, rate: Option<f64>) -> LevelResult {
        LevelResult {
            concurrency,
            rate,
            trials: Vec::new(),
        }
    }

    /// How reports name the level: "C=16" (closed loop) or "rate=50/s" (open loop).
    pub fn label(&self) -> String {
        match self.rate {
            Some(r) => format!("rate={r}/s"),
            None => format!("C={}", self.concurrency),
        }
    }

    /// A per-trial figure of each trial that measured something (at least one success) and
    /// has it: what the gate compares.
    pub fn values(&self, metric: TrialMetric) -> Vec<f64> {
        self.trials
            .iter()
            .filter(|t| t.measured())
            .filter_map(|t| metric.of(t))
            .collect()
    }

    /// Output tok/s of each trial that measured something (at least one success).
    pub fn throughputs(&self) -> Vec<f64> {
        self.trials
            .iter()
            .filter(|t| t.measured())
            .map(|t| t.output_tok_per_s)
            .collect()
    }

    /// The mean of a per-trial figure over the trials that measured something (at least one
    /// success), finite values only; `None` when there are none. The one definition of every
    /// report's "mean over trials" column.
    pub fn trial_mean(&self, figure: impl Fn(&TrialResult) -> Option<f64>) -> Option<f64> {
        let values: Vec<f64> = self
            .trials
            .iter()
            .filter(|t| t.measured())
            .filter_map(figure)
            .collect();
        Spread::of(&values).map(|s| s.mean)
    }

    /// Requests sent and failed over all trials.
    pub fn error_rate(&self) -> f64 {
        // Saturating: a loaded file's counts are checked per trial, not their sum.
        let sent = (self.trials.iter()).fold(0u64, |a, t| a.saturating_add(t.requests_sent));
        let failed = (self.trials.iter()).fold(0u64, |a, t| a.saturating_add(t.failed_total()));
        if sent == 0 {
            0.0
        } else {
            failed as f64 / sent as f64
        }
    }
}

/// A per-trial figure the gate can compare: throughput (higher is better) or a latency
/// percentile (higher is worse).
#[derive(
    Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Hash, PartialOrd, Ord, Default,
)]
#[serde(rename_all = "snake_case")]
pub enum TrialMetric {
    #[default]
    OutputTokPerS,
    TtftP99,
    ItlP99,
    E2eP99,
}

impl TrialMetric {
    /// The trial's value, when it has one.
    pub fn of(self, t: &TrialResult) -> Option<f64> {
        match self {
            TrialMetric::OutputTokPerS => Some(t.output_tok_per_s),
            TrialMetric::TtftP99 => t.ttft_ms.as_ref().map(|p| p.p99),
            TrialMetric::ItlP99 => t.itl_ms.as_ref().map(|p| p.p99),
            TrialMetric::E2eP99 => t.e2e_ms.as_ref().map(|p| p.p99),
        }
    }

    /// Whether a larger value is worse (latency) rather than better (throughput).
    pub fn higher_is_worse(self) -> bool {
        self != TrialMetric::OutputTokPerS
    }

    /// How reports name it.
    pub fn label(self) -> &'static str {
        match self {
            TrialMetric::OutputTokPerS => "tok/s",
            TrialMetric::TtftP99 => "TTFT p99",
            TrialMetric::ItlP99 => "ITL p99",
            TrialMetric::E2eP99 => "E2E p99",
        }
    }

    pub fn is_throughput(&self) -> bool {
        *self == TrialMetric::OutputTokPerS
    }
}

/// One independent replicate at one level.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TrialResult {
    /// 1-based trial number.
    pub trial: u32,
    pub requests_sent: u64,
    pub succeeded: u64,
    /// Failed requests by class; absent classes are zero.
    pub failed: BTreeMap<ErrorClass, u64>,
    /// The first error message seen for each failure class, so a report can say *why*.
    #[serde(default)]
    pub error_examples: BTreeMap<ErrorClass, String>,
    /// Output tokens of successful requests (the only ones throughput counts).
    pub output_tokens: u64,
    /// Output tokens received in failed requests, reported apart and never in throughput.
    pub failed_output_tokens: u64,
    pub input_tokens: u64,
    /// Seconds from the first dispatch to the last completion of the trial.
    pub window_s: f64,
    /// output_tokens / window_s.
    pub output_tok_per_s: f64,
    /// succeeded / window_s.
    pub requests_per_s: f64,
    /// failed / sent.
    pub error_rate: f64,
    /// Mean over successful requests of output tokens / end-to-end seconds: the speed one
    /// user sees.
    pub per_request_tok_per_s: Option<f64>,
    pub ttft_ms: Option<Percentiles>,
    /// Per token: a chunk carrying k tokens contributes k gaps of gap/k.
    pub itl_ms: Option<Percentiles>,
    pub tpot_ms: Option<Percentiles>,
    pub e2e_ms: Option<Percentiles>,
    /// Where the output token counts of successful requests came from.
    pub token_sources: BTreeMap<TokenSource, u64>,
    /// Anything that makes this trial's figures less trustworthy: a kind and a sentence.
    #[serde(default)]
    pub flags: Vec<TrialFlag>,
    /// Successful requests that did not generate the requested length although the profile
    /// asked for fixed lengths (`ignore_eos`). Written only when non-zero.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub length_misses: u64,
    /// The server's `/metrics` during the trial, when its engine is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub telemetry: Option<telemetry::TrialTelemetry>,
    /// The load generator's own headroom during the trial (scheduler lag, CPU use, read
    /// and send delays).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<ClientHeadroom>,
    /// Open-loop trials: target and achieved rate, send lag, latency from the schedule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_loop: Option<OpenLoopStats>,
    /// Requests sent in the trial's warmup and cooldown windows (`sweep.warmup`,
    /// `sweep.cooldown`): recorded in requests.jsonl, not counted in these figures.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub excluded_requests: u64,
    /// The round (1-based) the trial ran in: its place in the run's time order (round r
    /// runs trial r of every level, and of both arms in a relative run). Absent in files of
    /// runs that did not record it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub round: Option<u32>,
    /// Relative runs in blocks: the block (1-based) the trial ran in (both servers started
    /// fresh for it) and the slot (0-based, `--slots`) its arm's server ran on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slot: Option<u32>,
    /// The prompt tokens the server counted against those the requests asked for, where the
    /// run asked for a length (synthetic prompts, traces).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_check: Option<InputCheck>,
    /// How much of the prompts the server's prefix cache served, where it reported it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix_cache: Option<PrefixCacheUse>,
}

/// A trial's prompt tokens served from the server's prefix cache, over the successful
/// requests whose server reported both `usage.prompt_tokens` and
/// `prompt_tokens_details.cached_tokens`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PrefixCacheUse {
    pub requests: u64,
    pub prompt_tokens: u64,
    pub cached_tokens: u64,
    /// `cached_tokens / prompt_tokens` (0 when no prompt tokens).
    pub share: f64,
}

/// A trial's prompt lengths: asked for and achieved (`usage.prompt_tokens`), means over the
/// successful requests whose server reported prompt tokens.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct InputCheck {
    pub requests: u64,
    pub requested_mean: f64,
    pub achieved_mean: f64,
    /// Requested lengths are tokens of the model's tokenizer (else words: an estimate).
    pub exact: bool,
}

/// The largest figure (tok/s, requests/s, seconds) a file may hold: far above any
/// measurement, far below where sums and means of a few overflow to infinity (1e308 is
/// finite, two of it are not).
pub const FIGURE_MAX: f64 = 1e12;

impl TrialResult {
    /// The first figure that no measurement can give (negative, not finite, or past
    /// [`FIGURE_MAX`]), with its field name: a file edited or written by something else,
    /// refused on load.
    pub fn bad_figure(&self) -> Option<(&'static str, f64)> {
        [
            ("window_s", Some(self.window_s)),
            ("output_tok_per_s", Some(self.output_tok_per_s)),
            ("requests_per_s", Some(self.requests_per_s)),
            ("error_rate", Some(self.error_rate)),
            ("per_request_tok_per_s", self.per_request_tok_per_s),
            (
                "prefix_cache.share",
                self.prefix_cache.as_ref().map(|c| c.share),
            ),
        ]
        .into_iter()
        .find_map(|(name, v)| {
            v.filter(|v| !(v.is_finite() && *v >= 0.0 && *v <= FIGURE_MAX))
                .map(|v| (name, v))
        })
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// (concurrency, tok/s of each trial that measured something) of each level: what the charts
/// draw beside a run as its baseline.
pub fn per_request_by_level(levels: &[LevelResult]) -> Vec<(u32, Vec<f64>)> {
    levels
        .iter()
        .map(|l| {
            let values = l
                .trials
                .iter()
                .filter_map(|t| t.per_request_tok_per_s)
                .collect();
            (l.concurrency, values)
        })
        .collect()
}

/// Each level's trials' output tok/s, for plots.
pub fn trials_by_level(levels: &[LevelResult]) -> Vec<(u32, Vec<f64>)> {
    levels
        .iter()
        .map(|l| (l.concurrency, l.throughputs()))
        .collect()
}

/// How much the client itself lagged during a trial. When the client is the bottleneck the
/// figures describe the client, not the server, and the trial is flagged "client-bound".
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct ClientHeadroom {
    /// How late a task that sleeps 10 ms in a loop woke up (the runtime's scheduling delay).
    pub lag_p50_ms: f64,
    pub lag_p99_ms: f64,
    pub lag_max_ms: f64,
    /// Process CPU time / (wall time x runtime worker threads) over the trial.
    pub cpu_fraction: f64,
    /// How long response data waited in the socket before the client read it (the kernel's
    /// receive time to the read; log buckets, upper bounds). Absent without kernel stamps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_delay_p50_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_delay_p99_ms: Option<f64>,
    /// Half the trial's median inter-token gap, at least 1 ms: a read delay past it lets a
    /// chunk queue behind the next one, which then share one arrival time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_delay_limit_ms: Option<f64>,
    /// Kernel-stamped reads of the trial, and how many of them waited past the limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reads: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub late_reads: Option<u64>,
    /// Content chunks of the trial's streams, and how many came in one read with the chunk
    /// before them from a read that waited over 1 ms: chunks the client may have timed
    /// late (the kernel keeps one arrival time for data read together).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunks: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub late_merged_chunks: Option<u64>,
    /// How long requests waited in the client before their first bytes left (requests on
    /// connections already open only: a new connection's handshakes are the network's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send_delay_p50_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send_delay_p99_ms: Option<f64>,
    /// The time requests were held by the client (closed loop: from the worker's previous
    /// response's end to the first byte out; else the send delay) as a share of their whole
    /// time (held + E2E): how far short of the asked concurrency the server's load fell
    /// because of the client.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_share: Option<f64>,
    /// Requests held over 1 ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub late_sends: Option<u64>,
    /// The client could not keep up at all (a backlog in its runtime, or its threads' CPU
    /// used up): what it did to the figures cannot be bounded from what it measured. Absent
    /// in results of older builds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub saturated: Option<bool>,
    pub client_bound: bool,
    /// Present when the lag or send-delay percentiles above were read from an HDR histogram
    /// (a trial of over 65,536 probe wakes, about 11 minutes, or as many requests): each is
    /// then the value at its nearest rank within this relative error. Absent: exact.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relative_error: Option<f64>,
}

/// The schedule of an open-loop trial and how well the client kept it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct OpenLoopStats {
    /// The profile's rate (requests/s).
    pub target_rate: f64,
    /// (sends - 1) / (last send - first send), from the actual send times.
    pub achieved_rate: Option<f64>,
    /// "constant", "poisson" or "gamma".
    pub arrival: String,
    /// How late requests were sent behind their scheduled time (a cap on concurrency or a
    /// busy client delays them).
    pub send_lag_ms: Option<Percentiles>,
    /// Latency from the scheduled send time (not the actual one): what a user arriving on
    /// schedule waits, free of coordinated omission.
    pub ttft_from_schedule_ms: Option<Percentiles>,
    pub e2e_from_schedule_ms: Option<Percentiles>,
}

impl TrialResult {
    /// Trial number `trial` with nothing counted yet: every count and figure zero, every
    /// optional part absent. The one place the whole struct is spelled out; a trial's
    /// builders set what they know on top of it (`TrialResult { succeeded, ..new(n) }`).
    pub fn new(trial: u32) -> TrialResult {
        TrialResult {
            trial,
            requests_sent: 0,
            succeeded: 0,
            failed: BTreeMap::new(),
            error_examples: BTreeMap::new(),
            output_tokens: 0,
            failed_output_tokens: 0,
            input_tokens: 0,
            window_s: 0.0,
            output_tok_per_s: 0.0,
            requests_per_s: 0.0,
            error_rate: 0.0,
            per_request_tok_per_s: None,
            ttft_ms: None,
            itl_ms: None,
            tpot_ms: None,
            e2e_ms: None,
            token_sources: BTreeMap::new(),
            flags: Vec::new(),
            length_misses: 0,
            telemetry: None,
            client: None,
            open_loop: None,
            excluded_requests: 0,
            round: None,
            block: None,
            slot: None,
            input_check: None,
            prefix_cache: None,
        }
    }

    /// Whether the trial measured something: at least one request succeeded. A trial with
    /// no success has no throughput or latency (its zeros are not measurements), so every
    /// figure over trials (means, the gate's samples, the fit's points, the charts) leaves
    /// it out, and reports count it as a level that measured nothing.
    pub fn measured(&self) -> bool {
        self.succeeded > 0
    }

    /// Saturating: counts from a file may be anything ([`TrialResult::is_accounted`] checks).
    pub fn failed_total(&self) -> u64 {
        self.failed.values().fold(0, |a, n| a.saturating_add(*n))
    }

    /// The accounting invariant: every request sent either succeeded or failed in a class.
    /// Checked arithmetic: counts that wrap (2^63 + 2^63 = 0) do not balance.
    pub fn is_accounted(&self) -> bool {
        (self.failed.values()).try_fold(self.succeeded, |a, n| a.checked_add(*n))
            == Some(self.requests_sent)
    }
}

/// The base arm of a relative (A/B) run: the target branch's server, measured in the same
/// job as the head (the run's own levels), trials interleaved with the head's.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BaseArm {
    /// How many endpoints (replicas) the base arm's requests went to.
    pub endpoints: usize,
    /// The model the base server reported (after resolving "auto").
    pub model: Option<String>,
    /// The engine and its version as the base server reported them: in relative mode each
    /// arm speaks for itself (an engine upgrade is what such a run gates), and the verdict
    /// says when the two differ. Absent in older results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine_version: Option<String>,
    pub levels: Vec<LevelResult>,
}
