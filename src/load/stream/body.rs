//! Reading one response's body: the SSE stream event by event (with the stall and request
//! timers), a whole JSON answer, an error body up to its cap, and each read's arrival time.

use std::time::{Duration, Instant};

use http_body_util::BodyExt;
use hyper::body::Incoming;
use tokio::time::timeout_at;

use super::chunk::{append_answer, parse_response};
use super::observed::{error_chain, Observed};
use super::reader::StreamReader;
use crate::load::wire::read_delay;
use crate::load::wire::wire_clock::WireClock;
use crate::record::ErrorClass;

/// The most of an error response's body that is read (its first 200 characters are kept);
/// the rest is not read and the connection is closed.
pub const MAX_ERROR_BODY: usize = 64 << 10;
/// The most of a whole (non-streamed) response that is read: far above any completion of a
/// few thousand tokens, low enough that a body that never ends cannot take the memory.
pub const MAX_WHOLE_BODY: usize = 64 << 20;

/// Reads a hyper body up to its end or `cap` bytes, whichever comes first. Returns the bytes
/// read (at most `cap`) and whether the body ended.
pub(super) async fn read_body_capped(
    body: &mut Incoming,
    cap: usize,
) -> Result<(Vec<u8>, bool), String> {
    let mut read = Vec::new();
    loop {
        match next_data(body).await {
            Ok(Some(piece)) => {
                let room = cap - read.len();
                if piece.len() > room {
                    read.extend_from_slice(&piece[..room]);
                    return Ok((read, false));
                }
                read.extend_from_slice(&piece);
            }
            Ok(None) => return Ok((read, true)),
            Err(e) => return Err(error_chain(&e)),
        }
    }
}

/// Reads a finished response's body to its end (for at most a second). Returns whether it
/// got there.
pub(super) async fn drain(mut body: Incoming) -> bool {
    let rest = async {
        loop {
            match body.frame().await {
                Some(Ok(_)) => {}
                Some(Err(_)) => return false,
                None => return true,
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(1), rest)
        .await
        .unwrap_or(false)
}

/// The arrival times of one response's reads, never earlier than the request was sent nor
/// than the read before.
pub(super) struct Arrivals {
    pub(super) clock: Option<WireClock>,
    pub(super) floor: Instant,
}

impl Arrivals {
    pub(super) fn latest(&mut self) -> Instant {
        self.latest_read().0
    }

    /// The latest read's arrival time, and whether it was late (its data waited in the
    /// socket longer than [`read_delay::LATE_READ`]).
    fn latest_read(&mut self) -> (Instant, bool) {
        let (at, waited) = self
            .clock
            .as_ref()
            .and_then(WireClock::latest_read)
            .unwrap_or_else(|| (Instant::now(), None));
        let at = at.max(self.floor);
        self.floor = at;
        (at, waited.is_some_and(|w| w > read_delay::LATE_READ))
    }
}

/// The next piece of body data; trailers are skipped. `Ok(None)` at the end of the body.
async fn next_data(body: &mut Incoming) -> Result<Option<bytes::Bytes>, hyper::Error> {
    while let Some(frame) = body.frame().await {
        if let Ok(data) = frame?.into_data() {
            return Ok(Some(data));
        }
    }
    Ok(None)
}

/// Reads the SSE stream into `obs`, held to `max_tokens` (StreamReader::with_max_tokens).
/// Returns true when it stopped at `[DONE]` (or a failure) before the body's end.
pub(super) async fn read_stream(
    body: &mut Incoming,
    obs: &mut Observed,
    deadline: tokio::time::Instant,
    stall: Duration,
    max_tokens: Option<u32>,
    clock: Instant,
    arrivals: &mut Arrivals,
) -> bool {
    let since = |t: Instant| t.duration_since(clock).as_secs_f64();
    let mut reader = StreamReader::with_max_tokens(max_tokens);
    let mut merges = LateMerges::default();
    // The stall clock restarts only when an SSE data event arrives: keep-alive comments
    // (`: ping`) are bytes, not progress, and must not hide a server that stopped generating.
    let mut stall_deadline = tokio::time::Instant::now() + stall;
    // One timer for the whole stream, moved only when it fires early: a timer armed and
    // cancelled for every chunk was about 3% of the client's CPU samples at a thousand
    // streams (tokio's timer wheel, insert and remove).
    let timer = tokio::time::sleep_until(stall_deadline.min(deadline));
    tokio::pin!(timer);
    loop {
        let next = tokio::select! {
            biased;
            next = next_data(body) => next,
            () = &mut timer => {
                let due = stall_deadline.min(deadline);
                if tokio::time::Instant::now() < due {
                    // Data came since the timer was set: it fired early.
                    timer.as_mut().reset(due);
                    continue;
                }
                obs.failure = Some(if stall_deadline < deadline {
                    (
                        ErrorClass::Stall,
                        format!("no data event for {}", humantime::format_duration(stall)),
                    )
                } else {
                    (
                        ErrorClass::Timeout,
                        "response not finished before the request timeout".into(),
                    )
                });
                return true;
            }
        };
        let bytes = match next {
            Ok(Some(b)) => b,
            Ok(None) => break,
            Err(e) => {
                obs.failure = Some((
                    ErrorClass::Reset,
                    format!("connection broke mid-stream: {}", error_chain(&e)),
                ));
                return true;
            }
        };
        let events_before = reader.data_events;
        let chunks_before = obs.chunks.len();
        let (at, late) = arrivals.latest_read();
        let stop = reader.push(since(at), &bytes, obs);
        merges.count(at, late, obs.chunks.len() - chunks_before);
        if stop {
            return true;
        }
        if reader.data_events > events_before {
            stall_deadline = tokio::time::Instant::now() + stall;
        }
    }
    reader.finish(since(arrivals.latest()), obs);
    false
}

/// Counts a stream's content chunks that came in a late read together with the chunk
/// before them (read_delay.rs), and reports them when the stream ends.
#[derive(Default)]
struct LateMerges {
    chunks: u64,
    late_merged: u64,
    /// The arrival time of the stream's latest content chunk.
    last: Option<Instant>,
}

impl LateMerges {
    /// `new_chunks` content chunks were taken from a read that arrived `at` (late or not).
    fn count(&mut self, at: Instant, late: bool, new_chunks: usize) {
        if new_chunks == 0 {
            return;
        }
        let with_previous = usize::from(self.last == Some(at));
        if late {
            self.late_merged += (new_chunks - 1 + with_previous) as u64;
        }
        self.chunks += new_chunks as u64;
        self.last = Some(at);
    }
}

impl Drop for LateMerges {
    fn drop(&mut self) {
        read_delay::record_chunks(self.chunks, self.late_merged);
    }
}

pub(super) async fn read_whole(
    body: Incoming,
    obs: &mut Observed,
    deadline: tokio::time::Instant,
    clock: Instant,
    arrivals: &mut Arrivals,
) {
    let mut body = body;
    let text = match timeout_at(deadline, read_body_capped(&mut body, MAX_WHOLE_BODY)).await {
        Err(_) => {
            obs.failure = Some((
                ErrorClass::Timeout,
                "response not finished before the request timeout".into(),
            ));
            return;
        }
        Ok(Err(e)) => {
            obs.failure = Some((ErrorClass::Reset, format!("connection broke: {e}")));
            return;
        }
        Ok(Ok((_, false))) => {
            obs.failure = Some((
                ErrorClass::Protocol,
                format!("response body longer than {} MiB", MAX_WHOLE_BODY >> 20),
            ));
            return;
        }
        Ok(Ok((bytes, true))) => bytes,
    };
    let text = match std::str::from_utf8(&text) {
        Ok(t) => t,
        Err(_) => {
            obs.failure = Some((ErrorClass::Protocol, "response body is not UTF-8".into()));
            return;
        }
    };
    let now = arrivals.latest().duration_since(clock).as_secs_f64();
    match parse_response(text) {
        Err(msg) => obs.failure = Some((ErrorClass::Protocol, msg)),
        Ok(info) => {
            if let Some(err) = info.error {
                obs.failure = Some((ErrorClass::Protocol, format!("server error: {err}")));
                return;
            }
            obs.usage = info.usage;
            obs.finish_reason = info.finish_reason.clone();
            if let Some(answer) = obs.answer.as_mut() {
                append_answer(text, answer, obs.answer_cap);
            }
            if info.has_content() {
                obs.chunks.push(
                    now,
                    info.text_chars,
                    info.usage.map(|u| u.completion_tokens),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Chunks count as read late together only when their read was late and the chunk
    /// shares its arrival time with the one before (or came in the same frame).
    #[test]
    fn late_merges_are_counted_per_shared_read() {
        let t0 = Instant::now();
        let t1 = t0 + Duration::from_millis(20);
        let mut m = LateMerges::default();
        m.count(t0, false, 1);
        m.count(t0, false, 1); // one prompt read, two frames: a server write, not counted
        m.count(t1, true, 0); // a keep-alive: no chunk
        m.count(t1, true, 1); // a late read, but alone
        m.count(t1, true, 2); // the same late read: both share it with the one before
        m.count(t1 + Duration::from_millis(20), true, 3); // a late read of three
        assert_eq!((m.chunks, m.late_merged), (8, 4));
        std::mem::forget(m); // not counted into this process's totals
    }
}
