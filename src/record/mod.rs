//! The result data model and its files: the run result (JSON), one line per request (JSONL)
//! and a CSV summary.
//!
//! Every request sent is accounted for: `requests_sent == succeeded + sum(failed)` in every
//! trial, and throughput counts successful requests only. The JSON carries a schema version
//! so that readers refuse files they do not understand instead of misreading them.
//! What the figures say (peak, knee, drift, the scaling fit) is [`analysis`], computed once
//! per record and read by every report.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

pub mod analysis;
pub mod blocks;
pub mod checks;
pub mod files;
pub mod fingerprint;
pub mod flags;
pub mod redact;
pub mod telemetry;

use crate::fsutil::write_atomic;
use crate::profile::Profile;
use crate::stats::decision::{drift_check, Drift};
use crate::stats::{Percentiles, Spread};
use flags::TrialFlag;

/// The largest results file read (bytes): per-trial figures, not per-request ones.
pub const RESULTS_FILE_BYTES: u64 = 256 * 1024 * 1024;

/// Version of the result JSON schema written by this build.
pub const SCHEMA_VERSION: u32 = 2;
/// The oldest schema this build still reads (version 1 stored trial flags as bare sentences).
pub const OLDEST_SCHEMA_VERSION: u32 = 1;

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
            .filter(|t| t.succeeded > 0)
            .filter_map(|t| metric.of(t))
            .collect()
    }

    /// Output tok/s of each trial that measured something (at least one success).
    pub fn throughputs(&self) -> Vec<f64> {
        self.trials
            .iter()
            .filter(|t| t.succeeded > 0)
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
            .filter(|t| t.succeeded > 0)
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

/// A figure for a message: 1e308 as `1e308`, not 309 digits.
pub fn figure_text(v: f64) -> String {
    if v.is_finite() && v.abs() >= 1e9 {
        format!("{v:e}")
    } else {
        format!("{v}")
    }
}

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

/// What a flagged drift says, in results and verdicts alike.
pub fn drift_warning(d: &Drift) -> String {
    format!(
        "server drifted: tok/s moved {:+.1}% from the first round to the last, every level and \
         arm alike (trend p = {:.4}); trials interleaved across levels spread it evenly, but the \
         figures depend on when they were taken",
        (d.size.exp() - 1.0) * 100.0,
        d.p
    )
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

/// Every trial flag of `kind` (all kinds when `None`) in `levels`, as "C=8 trial 2: message".
pub fn flag_lines(levels: &[LevelResult], kind: Option<flags::FlagKind>) -> Vec<String> {
    let mut lines = Vec::new();
    for level in levels {
        for t in &level.trials {
            for flag in t.flags.iter().filter(|f| kind.is_none_or(|k| f.kind == k)) {
                lines.push(format!("{} trial {}: {flag}", level.label(), t.trial));
            }
        }
    }
    lines
}

/// The flags of `levels`' trials, one line per kind of flag (of `kind` only, when given): a
/// single flagged trial as [`flag_lines`] says it, else how many of the trials, which, and the
/// worst one's sentence (client-bound: the largest share of late reads or merged chunks;
/// other kinds: the first). Every trial keeps its own flag in results.json. Twelve lines of
/// 300 characters for one kind of doubt buried the rest of a run's output.
pub fn flag_summary(levels: &[LevelResult], kind: Option<flags::FlagKind>) -> Vec<String> {
    let total: usize = levels.iter().map(|l| l.trials.len()).sum();
    let flagged: Vec<(&LevelResult, &TrialResult, &flags::TrialFlag)> = (levels.iter())
        .flat_map(|l| l.trials.iter().map(move |t| (l, t)))
        .flat_map(|(l, t)| t.flags.iter().map(move |f| (l, t, f)))
        .filter(|(_, _, f)| kind.is_none_or(|k| f.kind == k))
        .collect();
    let mut kinds: Vec<flags::FlagKind> = Vec::new();
    for (_, _, f) in &flagged {
        if !kinds.contains(&f.kind) {
            kinds.push(f.kind);
        }
    }
    let severity = |t: &TrialResult| -> f64 {
        let Some(c) = &t.client else { return 0.0 };
        let share = |part: Option<u64>, whole: Option<u64>| match (part, whole) {
            (Some(p), Some(w)) if w > 0 => p as f64 / w as f64,
            _ => 0.0,
        };
        share(c.late_reads, c.reads).max(share(c.late_merged_chunks, c.chunks))
    };
    kinds
        .into_iter()
        .map(|k| {
            let mine: Vec<_> = flagged.iter().filter(|(_, _, f)| f.kind == k).collect();
            let (l, t, f) = if k == flags::FlagKind::ClientBound {
                // The first of the most severe.
                (mine.iter().copied())
                    .reduce(|best, x| {
                        if severity(x.1) > severity(best.1) {
                            x
                        } else {
                            best
                        }
                    })
                    .copied()
                    .expect("a kind has a flagged trial")
            } else {
                *mine[0]
            };
            // In a run in blocks each block numbers its trials from 1: name the block too.
            let trial = |t: &TrialResult| match t.block {
                Some(b) => format!("{} (block {b})", t.trial),
                None => t.trial.to_string(),
            };
            if mine.len() == 1 {
                return format!("{} trial {}: {f}", l.label(), trial(t));
            }
            let mut which: Vec<String> = Vec::new();
            for level in levels {
                let trials: Vec<String> = (mine.iter())
                    .filter(|(ml, _, _)| std::ptr::eq(*ml, level))
                    .map(|(_, mt, _)| trial(mt))
                    .collect();
                match trials.len() {
                    0 => {}
                    1 => which.push(format!("{} trial {}", level.label(), trials[0])),
                    _ => which.push(format!("{} trials {}", level.label(), trials.join(", "))),
                }
            }
            format!(
                "{} of {total} trials {} ({}); the {}, {} trial {}: {f}",
                mine.len(),
                k.word(),
                which.join("; "),
                if k == flags::FlagKind::ClientBound {
                    "worst"
                } else {
                    "first"
                },
                l.label(),
                trial(t)
            )
        })
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

/// Why a request did not count as a success.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "snake_case")]
pub enum ErrorClass {
    /// The TCP/TLS connection could not be made.
    Connect,
    /// The request exceeded the profile's request timeout.
    Timeout,
    /// No token arrived for longer than the stall timeout.
    Stall,
    /// The server answered with a non-2xx HTTP status.
    Http,
    /// The connection broke while the response was streaming.
    Reset,
    /// The response broke the protocol: malformed SSE or JSON, no `[DONE]`, an error object.
    Protocol,
    /// A response with fewer output tokens than the profile's `degenerate_below`.
    Degenerate,
    /// The server gave no token counts where the profile requires them.
    MissingUsage,
    /// In flight when the run was interrupted (SIGINT/SIGTERM) and abandoned after the grace
    /// period: sent, never finished, so counted here to keep sent == succeeded + failed.
    Cancelled,
}

impl ErrorClass {
    pub const ALL: [ErrorClass; 9] = [
        ErrorClass::Connect,
        ErrorClass::Timeout,
        ErrorClass::Stall,
        ErrorClass::Http,
        ErrorClass::Reset,
        ErrorClass::Protocol,
        ErrorClass::Degenerate,
        ErrorClass::MissingUsage,
        ErrorClass::Cancelled,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ErrorClass::Connect => "connect",
            ErrorClass::Timeout => "timeout",
            ErrorClass::Stall => "stall",
            ErrorClass::Http => "http",
            ErrorClass::Reset => "reset",
            ErrorClass::Protocol => "protocol",
            ErrorClass::Degenerate => "degenerate",
            ErrorClass::MissingUsage => "missing_usage",
            ErrorClass::Cancelled => "cancelled",
        }
    }
}

impl fmt::Display for ErrorClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Where a request's output token count came from.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "snake_case")]
pub enum TokenSource {
    /// The server's final `usage` object.
    Usage,
    /// No usage from the server: one token counted per content chunk (an estimate, flagged).
    ChunkCount,
}

/// One request, as written to `requests.jsonl` when it finishes.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RequestRecord {
    pub concurrency: u32,
    /// 1-based trial number; 0 for warmup requests.
    pub trial: u32,
    pub index: u32,
    pub warmup: bool,
    /// Index into the profile's endpoints.
    pub endpoint: usize,
    /// When the request's first bytes were handed to the kernel, in seconds since the run
    /// started; TTFT and E2E count from here.
    pub sent_s: f64,
    /// How long the client took from starting the request to its first bytes leaving (its
    /// own queueing, and the connect on a new connection); absent when unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send_delay_ms: Option<f64>,
    /// The request opened its connection: its send delay includes the TCP (and TLS)
    /// handshakes, network time rather than the client's.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub new_connection: bool,
    /// Closed loop: how long the request's worker had nothing in flight before it, from the
    /// end of its previous response to this request's first byte out (the send delay
    /// included); absent for a worker's first request and in open loop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_before_ms: Option<f64>,
    pub first_byte_s: Option<f64>,
    /// The first chunk of any kind (a role-only chunk counts here, not for TTFT).
    pub first_chunk_s: Option<f64>,
    pub first_token_s: Option<f64>,
    pub end_s: f64,
    pub ttft_ms: Option<f64>,
    pub e2e_ms: f64,
    pub tpot_ms: Option<f64>,
    pub output_tokens: u64,
    pub input_tokens: Option<u64>,
    /// Of the input tokens, those the server's prefix cache served
    /// (`usage.prompt_tokens_details.cached_tokens`); absent where the server reported none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_tokens: Option<u64>,
    pub token_source: TokenSource,
    /// Content chunks received.
    pub chunks: u32,
    pub finish_reason: Option<String>,
    pub http_status: Option<u16>,
    /// None when the request succeeded.
    pub error: Option<ErrorClass>,
    pub error_message: Option<String>,
    /// Open loop: the target rate of the request's level (requests/s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
    /// Open loop: when the schedule said to send it (seconds since the run started).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduled_s: Option<f64>,
    /// Duration sweeps: the window the request was sent in; only `measure` counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<Window>,
    /// Relative (A/B) runs: which server the request went to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arm: Option<Arm>,
}

/// Which server a relative (A/B) run measured: the pull request's (head) or the target
/// branch's (base), both in the same job.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum Arm {
    Head,
    Base,
}

impl Arm {
    pub fn name(self) -> &'static str {
        match self {
            Arm::Head => "head",
            Arm::Base => "base",
        }
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

/// The part of a duration-based trial a request was sent in.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Window {
    Warmup,
    Measure,
    Cooldown,
}

impl RunResult {
    /// The trend of ln tok/s across the interleaved rounds, over every level and both arms
    /// (each trial centred on its level and arm, `stats::decision::drift_check`). None when
    /// the trials carry no round (a sequential or older run) or there are too few rounds.
    pub fn drift(&self) -> Option<Drift> {
        let base = self
            .base
            .as_ref()
            .map(|b| b.levels.as_slice())
            .unwrap_or(&[]);
        let (mut cells, mut values, mut rounds) = (Vec::new(), Vec::new(), Vec::new());
        // A run in blocks: each block is its own session (its servers started fresh).
        let mut sessions = Vec::new();
        for (arm, levels) in [&self.levels[..], base].into_iter().enumerate() {
            for (i, level) in levels.iter().enumerate() {
                for t in level.trials.iter().filter(|t| t.succeeded > 0) {
                    if !crate::stats::is_positive(t.output_tok_per_s) {
                        continue;
                    }
                    cells.push((arm * 100_000 + i) as u32);
                    values.push(t.output_tok_per_s.ln());
                    rounds.push(t.round?);
                    sessions.push(t.block.unwrap_or(0));
                }
            }
        }
        drift_check(&cells, &values, &rounds, &sessions)
    }

    /// Every trial flag of `kind` (all kinds when `None`), as "C=8 trial 2: message": the
    /// form the run's warnings and the gate's report use.
    pub fn flag_lines(&self, kind: Option<flags::FlagKind>) -> Vec<String> {
        flag_lines(&self.levels, kind)
    }

    /// Reads a result file, refusing schema versions this build does not know.
    pub fn load(path: &Path) -> Result<RunResult> {
        let text = crate::fsutil::read_bounded(path, RESULTS_FILE_BYTES)
            .with_context(|| format!("cannot read results {}", path.display()))?;
        let value: serde_json::Value = serde_json::from_str(&text)
            .with_context(|| format!("results {} is not valid JSON", path.display()))?;
        match value.get("schema_version").and_then(|v| v.as_u64()) {
            Some(v) if (OLDEST_SCHEMA_VERSION as u64..=SCHEMA_VERSION as u64).contains(&v) => {}
            Some(v) => bail!(
                "results {}: field `schema_version` is {v}, this build reads versions \
                 {OLDEST_SCHEMA_VERSION} to {SCHEMA_VERSION}; use a matching throughline version",
                path.display()
            ),
            None => bail!(
                "results {}: field `schema_version` is missing; is this a throughline results file?",
                path.display()
            ),
        }
        let mut de = serde_json::Deserializer::from_str(&text);
        let mut result: RunResult = serde_path_to_error::deserialize(&mut de).map_err(|e| {
            anyhow::anyhow!(
                "results {}: field `{}`: {}",
                path.display(),
                e.path(),
                e.inner()
            )
        })?;
        let base_levels = result.base.iter().flat_map(|b| &b.levels);
        for (arm, level) in
            (result.levels.iter().map(|l| ("", l))).chain(base_levels.map(|l| ("base arm ", l)))
        {
            for t in &level.trials {
                if let Some((field, v)) = t.bad_figure() {
                    bail!(
                        "results {}: {arm}level {} trial {}: field `{field}` is {}, not a \
                         number from 0 to {FIGURE_MAX:e}",
                        path.display(),
                        level.label(),
                        t.trial,
                        figure_text(v)
                    );
                }
            }
        }
        for level in &result.levels {
            for t in &level.trials {
                if !t.is_accounted() {
                    bail!(
                        "results {}: level {} trial {}: {} sent but {} succeeded + {} failed",
                        path.display(),
                        level.label(),
                        t.trial,
                        t.requests_sent,
                        t.succeeded,
                        t.failed_total()
                    );
                }
            }
        }
        // Read into this version's types: saved again, it is a file of this version.
        result.schema_version = SCHEMA_VERSION;
        // Derived from the levels: never trusted over them (a file may be old or edited).
        result.analyse();
        Ok(result)
    }

    /// Writes the result JSON atomically (temporary file, then rename).
    /// Endpoints are stored with their credentials masked (redact.rs).
    pub fn save(&self, path: &Path) -> Result<()> {
        let endpoints = &self.profile.target.endpoints;
        let masked: Vec<String> = endpoints.iter().map(|e| redact::redact_url(e)).collect();
        let text = if masked == *endpoints {
            serde_json::to_string_pretty(self)?
        } else {
            let mut copy = self.clone();
            copy.profile.target.endpoints = masked;
            serde_json::to_string_pretty(&copy)?
        };
        write_atomic(path, text.as_bytes())
    }

    /// Writes `summary_csv` atomically.
    pub fn save_csv(&self, path: &Path) -> Result<()> {
        write_atomic(path, &self.summary_csv()?)
    }

    /// One CSV row per trial (report/export/csv.rs lists the format).
    pub fn summary_csv(&self) -> Result<Vec<u8>> {
        let mut w = csv::Writer::from_writer(Vec::new());
        w.write_record([
            "concurrency",
            "rate",
            "trial",
            "requests_sent",
            "succeeded",
            "failed",
            "error_rate",
            "output_tokens",
            "window_s",
            "output_tok_per_s",
            "requests_per_s",
            "per_request_tok_per_s",
            "ttft_p50_ms",
            "ttft_p99_ms",
            "itl_p50_ms",
            "itl_p99_ms",
            "tpot_p50_ms",
            "e2e_p50_ms",
            "e2e_p99_ms",
        ])?;
        let opt = |v: Option<f64>| v.map(|x| format!("{x:.3}")).unwrap_or_default();
        for level in &self.levels {
            for t in &level.trials {
                w.write_record([
                    level.concurrency.to_string(),
                    level.rate.map(|r| format!("{r}")).unwrap_or_default(),
                    t.trial.to_string(),
                    t.requests_sent.to_string(),
                    t.succeeded.to_string(),
                    t.failed_total().to_string(),
                    format!("{:.4}", t.error_rate),
                    t.output_tokens.to_string(),
                    format!("{:.3}", t.window_s),
                    format!("{:.3}", t.output_tok_per_s),
                    format!("{:.4}", t.requests_per_s),
                    opt(t.per_request_tok_per_s),
                    opt(t.ttft_ms.as_ref().map(|p| p.p50)),
                    opt(t.ttft_ms.as_ref().map(|p| p.p99)),
                    opt(t.itl_ms.as_ref().map(|p| p.p50)),
                    opt(t.itl_ms.as_ref().map(|p| p.p99)),
                    opt(t.tpot_ms.as_ref().map(|p| p.p50)),
                    opt(t.e2e_ms.as_ref().map(|p| p.p50)),
                    opt(t.e2e_ms.as_ref().map(|p| p.p99)),
                ])?;
            }
        }
        w.into_inner().map_err(|e| anyhow::anyhow!("{e}"))
    }
}

/// Results built from trial throughputs alone, for tests of what reads results.
#[cfg(test)]
pub mod fake {
    use super::*;

    pub fn trial(n: u32, tok_per_s: f64) -> TrialResult {
        TrialResult {
            trial: n,
            requests_sent: 10,
            succeeded: 10,
            failed: Default::default(),
            error_examples: Default::default(),
            output_tokens: (tok_per_s * 10.0) as u64,
            failed_output_tokens: 0,
            input_tokens: 0,
            window_s: 10.0,
            output_tok_per_s: tok_per_s,
            requests_per_s: 1.0,
            error_rate: 0.0,
            per_request_tok_per_s: Some(tok_per_s / 4.0),
            ttft_ms: None,
            itl_ms: None,
            tpot_ms: None,
            e2e_ms: None,
            token_sources: Default::default(),
            flags: vec![],
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

    pub fn run(levels: &[(u32, &[f64])]) -> RunResult {
        let profile = Profile::parse(
            "name = \"fake\"\n[target]\nendpoints = [\"http://127.0.0.1:1\"]\n[workload]\nmax_tokens = 64\n[sweep]\nconcurrency = [1]\n",
        )
        .unwrap();
        let mut run = RunResult {
            schema_version: SCHEMA_VERSION,
            tool: "throughline test".into(),
            profile_name: "fake".into(),
            profile_hash: "sha256:fake".into(),
            profile,
            environment: Environment {
                gpu_model: Some("TestGPU".into()),
                endpoints: 1,
                ..Default::default()
            },
            started_at: "2026-11-29T00:00:00Z".into(),
            finished_at: "2026-11-29T00:01:00Z".into(),
            complete: true,
            levels: levels
                .iter()
                .map(|(c, tps)| LevelResult {
                    concurrency: *c,
                    rate: None,
                    trials: tps
                        .iter()
                        .enumerate()
                        .map(|(i, t)| trial(i as u32 + 1, *t))
                        .collect(),
                })
                .collect(),
            warnings: vec![],
            base: None,
            drift: None,
            notes: Vec::new(),
            servers: None,
            analysis: None,
        };
        run.analyse();
        run
    }
}

#[cfg(test)]
#[path = "props.rs"]
mod props;

#[cfg(test)]
mod flag_summary_tests {
    use super::flags::{FlagKind, TrialFlag};
    use super::*;

    #[test]
    fn one_line_per_kind_names_the_trials_and_the_worst() {
        let level = |c: u32, flagged: &[(u32, u64)]| LevelResult {
            concurrency: c,
            rate: None,
            trials: (1..=4)
                .map(|n| {
                    let mut t = fake::trial(n, 100.0);
                    if let Some((_, late)) = flagged.iter().find(|(k, _)| *k == n) {
                        t.flags.push(TrialFlag::new(
                            FlagKind::ClientBound,
                            format!("client-bound: {late} of 1000 reads late"),
                        ));
                        t.client = Some(ClientHeadroom {
                            reads: Some(1000),
                            late_reads: Some(*late),
                            ..Default::default()
                        });
                    }
                    t
                })
                .collect(),
        };
        let levels = vec![
            level(32, &[(2, 12)]),
            level(64, &[(1, 26), (2, 22), (4, 14)]),
        ];
        assert_eq!(
            flag_summary(&levels, None),
            vec![
                "4 of 8 trials client-bound (C=32 trial 2; C=64 trials 1, 2, 4); the worst, \
                 C=64 trial 1: client-bound: 26 of 1000 reads late"
            ]
        );
        let one = vec![level(8, &[(3, 5)])];
        assert_eq!(
            flag_summary(&one, Some(FlagKind::ClientBound)),
            vec!["C=8 trial 3: client-bound: 5 of 1000 reads late"]
        );
        assert!(flag_summary(&one, Some(FlagKind::LengthMisses)).is_empty());
        // In blocks, trials are numbered per block: the block is named.
        let mut blocks = vec![level(8, &[(1, 5), (2, 9)])];
        blocks[0].trials[0].block = Some(1);
        blocks[0].trials[1].block = Some(3);
        assert_eq!(
            flag_summary(&blocks, None),
            vec![
                "2 of 4 trials client-bound (C=8 trials 1 (block 1), 2 (block 3)); the worst, \
                 C=8 trial 2 (block 3): client-bound: 9 of 1000 reads late"
            ]
        );
    }
}
