//! The SSE-to-[`Observed`] step: decoded events applied to what the client observed.

use super::chunk::{append_answer, parse_chunk};
use super::observed::Observed;
use crate::load::wire::sse::{SseDecoder, SseError};
use crate::record::ErrorClass;

/// The SSE-to-[`Observed`] step on its own: bytes in, each with the time it arrived (seconds
/// since the run's origin). The network loop feeds it; tests feed it recorded streams with
/// their arrival times, so what is measured is parsed by exactly one path.
#[derive(Debug, Default)]
pub struct StreamReader {
    decoder: SseDecoder,
    events: Vec<String>,
    done: bool,
    /// SSE data events decoded so far (comments and keep-alives are not events).
    pub data_events: u64,
}

impl StreamReader {
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds bytes that arrived at `at_s`. Returns true when reading should stop: the request
    /// failed (recorded in `obs`) or the stream said `[DONE]`.
    pub fn push(&mut self, at_s: f64, bytes: &[u8], obs: &mut Observed) -> bool {
        if let Err(e) = self.decoder.push(bytes, &mut self.events) {
            obs.failure = Some((ErrorClass::Protocol, sse_error(e)));
            return true;
        }
        self.data_events += self.events.len() as u64;
        handle_events(&mut self.events, obs, at_s, &mut self.done) || self.done
    }

    /// The connection closed at `at_s` without `[DONE]` having stopped the reading.
    pub fn finish(&mut self, at_s: f64, obs: &mut Observed) {
        if let Err(e) = self.decoder.finish(&mut self.events) {
            obs.failure = Some((ErrorClass::Protocol, sse_error(e)));
            return;
        }
        if handle_events(&mut self.events, obs, at_s, &mut self.done) {
            return;
        }
        if !self.done {
            obs.failure = Some((
                ErrorClass::Protocol,
                "stream ended without `data: [DONE]`".into(),
            ));
        }
    }
}

/// Applies decoded events; returns true when the request has failed.
fn handle_events(events: &mut Vec<String>, obs: &mut Observed, now: f64, done: &mut bool) -> bool {
    for data in events.drain(..) {
        if *done {
            continue;
        }
        if data.trim() == "[DONE]" {
            *done = true;
            continue;
        }
        obs.first_chunk_s.get_or_insert(now);
        let info = match parse_chunk(&data) {
            Ok(i) => i,
            Err(msg) => {
                obs.failure = Some((ErrorClass::Protocol, msg));
                return true;
            }
        };
        if let Some(err) = info.error {
            obs.failure = Some((
                ErrorClass::Protocol,
                format!("server error in stream: {err}"),
            ));
            return true;
        }
        if info.has_content() {
            obs.chunks.push(
                now,
                info.text_chars,
                info.usage.map(|u| u.completion_tokens),
            );
            if let Some(answer) = obs.answer.as_mut() {
                append_answer(&data, answer, obs.answer_cap);
            }
        }
        if info.usage.is_some() {
            obs.usage = info.usage;
        }
        if info.finish_reason.is_some() {
            obs.finish_reason = info.finish_reason;
        }
    }
    false
}

fn sse_error(e: SseError) -> String {
    match e {
        SseError::InvalidUtf8 => "stream line is not UTF-8".into(),
        SseError::LineTooLong => {
            format!(
                "stream line longer than {} MiB",
                crate::load::wire::sse::MAX_LINE >> 20
            )
        }
        SseError::EventTooLong => format!(
            "stream event longer than {} MiB (data lines without the blank line that ends an \
             event)",
            crate::load::wire::sse::MAX_EVENT >> 20
        ),
    }
}
