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
    /// The request's `max_tokens`, where the stream is held to it.
    max_tokens: Option<u64>,
}

impl StreamReader {
    pub fn new() -> Self {
        Self::default()
    }

    /// A reader that fails the request as `over_length`, and stops, at the first content
    /// chunk past `max_tokens` or a usage count over it. No margin: every content chunk
    /// carries at least one token (an engine holds back text that is not yet a whole
    /// character or may be a stop string, and sends it later in one chunk, never splits one
    /// token over two), and the usage counts the same tokens; the last chunk that carries
    /// only `finish_reason` or usage has no content and is not counted.
    pub fn with_max_tokens(max_tokens: Option<u32>) -> Self {
        StreamReader {
            max_tokens: max_tokens.map(u64::from),
            ..Self::default()
        }
    }

    /// Feeds bytes that arrived at `at_s`. Returns true when reading should stop: the request
    /// failed (recorded in `obs`) or the stream said `[DONE]`.
    pub fn push(&mut self, at_s: f64, bytes: &[u8], obs: &mut Observed) -> bool {
        if let Err(e) = self.decoder.push(bytes, &mut self.events) {
            obs.failure = Some((ErrorClass::Protocol, sse_error(e)));
            return true;
        }
        self.data_events += self.events.len() as u64;
        let max = self.max_tokens;
        handle_events(&mut self.events, obs, at_s, &mut self.done, max) || self.done
    }

    /// The connection closed at `at_s` without `[DONE]` having stopped the reading.
    pub fn finish(&mut self, at_s: f64, obs: &mut Observed) {
        if let Err(e) = self.decoder.finish(&mut self.events) {
            obs.failure = Some((ErrorClass::Protocol, sse_error(e)));
            return;
        }
        if handle_events(&mut self.events, obs, at_s, &mut self.done, self.max_tokens) {
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

/// Applies decoded events; returns true when the request has failed (the drain drops the
/// events left: nothing after a failure is read).
fn handle_events(
    events: &mut Vec<String>,
    obs: &mut Observed,
    now: f64,
    done: &mut bool,
    max_tokens: Option<u64>,
) -> bool {
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
        if let Some(why) = max_tokens.and_then(|max| over_length(obs, max)) {
            obs.failure = Some((ErrorClass::OverLength, why));
            return true;
        }
        if info.finish_reason.is_some() {
            obs.finish_reason = info.finish_reason;
        }
    }
    false
}

/// Why the stream so far is longer than `max` tokens, if it is: more content chunks than
/// that, or a usage count over it.
fn over_length(obs: &Observed, max: u64) -> Option<String> {
    let chunks = obs.chunks.len() as u64;
    if chunks > max {
        return Some(format!(
            "the stream sent more than the request's max_tokens = {max} content chunks (each \
             carries at least one token); cut off at chunk {chunks}"
        ));
    }
    // The last usage seen: the final count, or a running one (vLLM's continuous usage).
    let usage = obs
        .usage
        .map(|u| u.completion_tokens)
        .filter(|&n| n > max)?;
    Some(format!(
        "usage.completion_tokens = {usage} is more than the request's max_tokens = {max}"
    ))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn content(n: usize) -> String {
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"}}]}\n\n".repeat(n)
    }

    /// Feeds `text` in one piece to a reader held to `max`; whether it stopped, and what it saw.
    fn read(max: Option<u32>, text: &str) -> (bool, Observed) {
        let mut reader = StreamReader::with_max_tokens(max);
        let mut obs = Observed::default();
        let stopped = reader.push(1.0, text.as_bytes(), &mut obs);
        if !stopped {
            reader.finish(2.0, &mut obs);
        }
        (stopped, obs)
    }

    #[test]
    fn a_stream_is_held_to_max_tokens() {
        // Exactly max_tokens chunks, a finish chunk without content, then usage: whole.
        let whole = format!(
            "{}data: {{\"choices\":[{{\"index\":0,\"delta\":{{}},\"finish_reason\":\"length\"}}]}}\n\n\
             data: {{\"choices\":[],\"usage\":{{\"completion_tokens\":8}}}}\n\ndata: [DONE]\n\n",
            content(8)
        );
        let (_, obs) = read(Some(8), &whole);
        assert_eq!(obs.failure, None);
        assert_eq!(obs.chunks.len(), 8);
        // One chunk too many: cut off there, the rest not read.
        let (stopped, obs) = read(Some(8), &format!("{}data: [DONE]\n\n", content(1000)));
        assert!(stopped);
        let (class, msg) = obs.failure.unwrap();
        assert_eq!(class, ErrorClass::OverLength);
        assert!(
            msg.contains("max_tokens = 8") && msg.contains("chunk 9"),
            "{msg}"
        );
        assert_eq!(obs.chunks.len(), 9);
        // Unbounded (the client's own benchmark, recorded streams): read whole.
        let (_, obs) = read(None, &format!("{}data: [DONE]\n\n", content(1000)));
        assert_eq!((obs.failure, obs.chunks.len()), (None, 1000));
    }

    #[test]
    fn a_usage_count_over_max_tokens_is_over_length() {
        let counted = |n: u64| {
            format!("data: {{\"choices\":[],\"usage\":{{\"completion_tokens\":{n}}}}}\n\n")
        };
        let (stopped, obs) = read(Some(8), &format!("{}{}", content(3), counted(9)));
        assert!(stopped);
        let (class, msg) = obs.failure.unwrap();
        assert_eq!(class, ErrorClass::OverLength);
        assert!(msg.contains("usage.completion_tokens = 9"), "{msg}");
        // A running count on a content chunk (vLLM's continuous usage) is held too.
        let running = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"}}],\
                       \"usage\":{\"completion_tokens\":40}}\n\n";
        let (stopped, obs) = read(Some(8), running);
        assert!(stopped);
        assert_eq!(obs.failure.unwrap().0, ErrorClass::OverLength);
    }
}
