//! What the client observed of one request before it is classified, the limits it was
//! sent under, and how a failure is written down.

use std::time::{Duration, Instant};

use super::chunk::Usage;
use super::tokens::ChunkLog;
use crate::record::ErrorClass;

/// Limits on one request: its whole time and the longest silence.
#[derive(Debug, Clone, Copy)]
pub struct RequestLimits {
    /// The whole request, from send to the last byte.
    pub request_timeout: Duration,
    /// The longest wait for the next piece of the response once it has started.
    pub stall_timeout: Duration,
    /// Keep up to this many bytes of the answer's text in [`Observed::answer`] (0: none):
    /// multi-turn runs carry it into the next turn (`Conversations::answer_bytes`).
    pub answer_bytes: usize,
    /// The most output tokens any request of the run asks for (`workload.max_tokens`: drawn
    /// lengths and turns are capped at it). A stream that goes past it fails as
    /// `over_length` and is read no further, so an endless stream neither earns tokens nor
    /// grows the request's memory. None: no bound (the client's own benchmark).
    pub max_tokens: Option<u32>,
}

/// What the client observed for one request, before classification.
#[derive(Debug, Clone, Default)]
pub struct Observed {
    /// When the request's first bytes were handed to the kernel (when it was started, if
    /// it never got that far or the connection could not say).
    pub sent_s: f64,
    /// From the start of the request to its first bytes leaving: the client's own queueing
    /// (and the connect, on a new connection), kept out of TTFT and E2E.
    pub send_delay_s: Option<f64>,
    /// The request opened its connection (its send delay includes the handshakes).
    pub new_connection: bool,
    pub first_byte_s: Option<f64>,
    pub first_chunk_s: Option<f64>,
    pub end_s: f64,
    /// Content chunks only (role-only and usage-only chunks are not tokens).
    pub chunks: ChunkLog,
    pub usage: Option<Usage>,
    pub finish_reason: Option<String>,
    pub http_status: Option<u16>,
    pub failure: Option<(ErrorClass, String)>,
    /// The answer's text, kept only when [`RequestLimits::answer_bytes`] is set.
    pub answer: Option<String>,
    /// The most bytes of it kept.
    pub answer_cap: usize,
}

pub(super) fn fail(
    mut obs: Observed,
    class: ErrorClass,
    msg: &str,
    since: impl Fn(Instant) -> f64,
) -> Observed {
    obs.end_s = since(Instant::now());
    obs.failure = Some((class, msg.to_string()));
    obs
}

/// The error with its causes ("connection refused" is usually a few levels down).
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let s_text = s.to_string();
        if !text.contains(&s_text) {
            text.push_str(": ");
            text.push_str(&s_text);
        }
        source = s.source();
    }
    text
}
