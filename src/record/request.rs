//! One request as `requests.jsonl` records it, and the words it is described with: why it
//! failed, where its token count came from, which arm and which window it belongs to.

use std::fmt;

use serde::{Deserialize, Serialize};

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
    /// More output than the request's `max_tokens` allowed: more content chunks streamed
    /// (each carries at least one token), or a usage count over it. The stream is cut off
    /// at the first chunk too many; none of its tokens is credited.
    OverLength,
    /// In flight when the run was interrupted (SIGINT/SIGTERM) and abandoned after the grace
    /// period: sent, never finished, so counted here to keep sent == succeeded + failed.
    Cancelled,
}

impl ErrorClass {
    pub const ALL: [ErrorClass; 10] = [
        ErrorClass::Connect,
        ErrorClass::Timeout,
        ErrorClass::Stall,
        ErrorClass::Http,
        ErrorClass::Reset,
        ErrorClass::Protocol,
        ErrorClass::Degenerate,
        ErrorClass::MissingUsage,
        ErrorClass::OverLength,
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
            ErrorClass::OverLength => "over_length",
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

/// The part of a duration-based trial a request was sent in.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Window {
    Warmup,
    Measure,
    Cooldown,
}
