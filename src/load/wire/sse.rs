//! An incremental Server-Sent Events decoder: bytes in, `data` payloads out.
//!
//! Network reads split events anywhere (mid-line, mid-UTF-8 character), so the decoder keeps
//! the unfinished tail between calls. It follows the SSE rules that matter for OpenAI-style
//! streams: lines end in LF, CRLF or CR; `data:` lines of one event are joined with LF; a blank
//! line ends the event; comment lines (`:`) and other fields are ignored.

/// Decodes SSE `data` payloads from a byte stream. It holds at most one unfinished line of
/// [`MAX_LINE`] bytes and one unfinished event of [`MAX_EVENT`] bytes; more is an error.
#[derive(Debug)]
pub struct SseDecoder {
    /// Bytes of the line not yet ended.
    line: Vec<u8>,
    /// `data` lines of the event not yet ended.
    data: Option<String>,
    /// The previous byte was CR: a following LF belongs to the same line ending.
    after_cr: bool,
    max_line: usize,
    max_event: usize,
}

impl Default for SseDecoder {
    fn default() -> Self {
        Self::with_limits(MAX_LINE, MAX_EVENT)
    }
}

/// A problem in the byte stream itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SseError {
    /// A line that is not UTF-8.
    InvalidUtf8,
    /// A single line longer than the limit (a server that never ends a line).
    LineTooLong,
    /// One event's `data` lines together longer than the limit (a server that never sends
    /// the blank line ending an event).
    EventTooLong,
}

/// Longest line accepted: far above any real chunk, low enough to bound memory per stream.
pub const MAX_LINE: usize = 4 << 20;
/// Longest event accepted (its `data` lines joined): the same bound, so that a stream holds
/// at most one line and one event of at most 4 MiB each while it is read.
pub const MAX_EVENT: usize = 4 << 20;

impl SseDecoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// A decoder with other limits on a line and an event (tests use small ones).
    pub fn with_limits(max_line: usize, max_event: usize) -> Self {
        SseDecoder {
            line: Vec::new(),
            data: None,
            after_cr: false,
            max_line,
            max_event,
        }
    }

    /// Bytes of the unfinished line and event held now.
    pub fn held(&self) -> usize {
        self.line.len() + self.data.as_ref().map_or(0, String::len)
    }

    /// Feeds bytes; appends every completed event's data to `out`.
    pub fn push(&mut self, bytes: &[u8], out: &mut Vec<String>) -> Result<(), SseError> {
        for &b in bytes {
            match b {
                b'\n' if self.after_cr => self.after_cr = false,
                b'\n' | b'\r' => {
                    self.after_cr = b == b'\r';
                    self.end_line(out)?;
                }
                _ => {
                    self.after_cr = false;
                    if self.line.len() >= self.max_line {
                        return Err(SseError::LineTooLong);
                    }
                    self.line.push(b);
                }
            }
        }
        Ok(())
    }

    /// Ends the stream: an event left without its blank line is still delivered, since
    /// some servers close right after the last `data:` line.
    pub fn finish(&mut self, out: &mut Vec<String>) -> Result<(), SseError> {
        if !self.line.is_empty() {
            self.end_line(out)?;
        }
        if let Some(data) = self.data.take() {
            out.push(data);
        }
        Ok(())
    }

    fn end_line(&mut self, out: &mut Vec<String>) -> Result<(), SseError> {
        if self.line.is_empty() {
            if let Some(data) = self.data.take() {
                out.push(data);
            }
            return Ok(());
        }
        let line = std::str::from_utf8(&self.line).map_err(|_| SseError::InvalidUtf8)?;
        if let Some(rest) = line.strip_prefix("data") {
            if rest.is_empty() || rest.starts_with(':') {
                let value = rest.strip_prefix(':').unwrap_or("");
                let value = value.strip_prefix(' ').unwrap_or(value);
                let held = self.data.as_ref().map_or(0, |d| d.len() + 1);
                if held + value.len() > self.max_event {
                    return Err(SseError::EventTooLong);
                }
                match &mut self.data {
                    Some(d) => {
                        d.push('\n');
                        d.push_str(value);
                    }
                    None => self.data = Some(value.to_string()),
                }
            }
        }
        // Comments (":...") and other fields (event, id, retry) carry nothing we measure.
        self.line.clear();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn decode_all(parts: &[&[u8]]) -> Vec<String> {
        let mut d = SseDecoder::new();
        let mut out = Vec::new();
        for p in parts {
            d.push(p, &mut out).unwrap();
        }
        d.finish(&mut out).unwrap();
        out
    }

    /// Events up to the first error, and that error.
    fn decode_checked(parts: &[&[u8]]) -> (Vec<String>, Option<SseError>) {
        let mut d = SseDecoder::new();
        let mut out = Vec::new();
        for p in parts {
            if let Err(e) = d.push(p, &mut out) {
                return (out, Some(e));
            }
        }
        let err = d.finish(&mut out).err();
        (out, err)
    }

    #[test]
    fn splits_events_and_ignores_comments() {
        let out = decode_all(&[b": ping\n\ndata: {\"a\":1}\n\ndata: [DONE]\n\n"]);
        assert_eq!(out, vec!["{\"a\":1}", "[DONE]"]);
    }

    #[test]
    fn handles_crlf_and_split_reads() {
        let out = decode_all(&[b"data: one\r", b"\n\r\ndata:two\r\n", b"\r\n"]);
        assert_eq!(out, vec!["one", "two"]);
    }

    #[test]
    fn joins_multiline_data_and_keeps_unterminated_last_event() {
        let out = decode_all(&[b"data: a\ndata: b\n\ndata: last"]);
        assert_eq!(out, vec!["a\nb", "last"]);
    }

    /// The real limits: a 5 MiB line is refused, and so are `data:` lines adding up to more
    /// than 4 MiB without the blank line that ends their event, fed a kilobyte at a time;
    /// the decoder never holds more than the limits.
    #[test]
    fn over_long_lines_and_events_are_refused_at_the_real_limits() {
        let mut d = SseDecoder::new();
        let mut out = Vec::new();
        let piece = [b'a'; 1024];
        let mut err = None;
        d.push(b"data: ", &mut out).unwrap();
        for _ in 0..5 * 1024 {
            if let Err(e) = d.push(&piece, &mut out) {
                err = Some(e);
                break;
            }
        }
        assert_eq!(err, Some(SseError::LineTooLong));
        assert!(d.held() <= MAX_LINE);

        let mut d = SseDecoder::new();
        let line = format!("data: {}\n", "b".repeat(1017));
        let mut err = None;
        for _ in 0..5 * 1024 {
            if let Err(e) = d.push(line.as_bytes(), &mut out) {
                err = Some(e);
                break;
            }
            assert!(d.held() <= MAX_LINE + MAX_EVENT);
        }
        assert_eq!(err, Some(SseError::EventTooLong));
        assert!(out.is_empty());
        // A line and an event up to the limits pass.
        let mut d = SseDecoder::new();
        let big = format!("data: {}\n\n", "c".repeat(MAX_LINE.min(MAX_EVENT) - 6));
        d.push(big.as_bytes(), &mut out).unwrap();
        assert_eq!(out.len(), 1);
    }

    #[test]
    fn rejects_invalid_utf8() {
        let mut d = SseDecoder::new();
        let mut out = Vec::new();
        assert_eq!(
            d.push(b"data: \xff\xfe\n", &mut out),
            Err(SseError::InvalidUtf8)
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// However the network splits a stream, the events are the same.
        #[test]
        fn split_points_do_not_matter(payloads in prop::collection::vec("[a-z0-9{}\":, ]{0,40}", 1..8),
                                      cut in 0usize..400, crlf in any::<bool>()) {
            let nl = if crlf { "\r\n" } else { "\n" };
            let text: String = payloads.iter().map(|p| format!("data: {p}{nl}{nl}")).collect();
            let bytes = text.as_bytes();
            let cut = cut.min(bytes.len());
            let out = decode_all(&[&bytes[..cut], &bytes[cut..]]);
            prop_assert_eq!(out, payloads);
        }

        /// Arbitrary bytes (valid or not) decode the same, error included, however they are
        /// split into reads.
        #[test]
        fn any_split_of_any_bytes_decodes_the_same(
            bytes in prop::collection::vec(prop_oneof![
                4 => prop::sample::select(b"data: {}[DONE]\r\n:x".to_vec()),
                1 => any::<u8>(),
            ], 0..400),
            cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..8),
        ) {
            let whole = decode_checked(&[&bytes]);
            let mut at: Vec<usize> = cuts.iter().map(|c| c.index(bytes.len() + 1)).collect();
            at.push(0);
            at.push(bytes.len());
            at.sort_unstable();
            let parts: Vec<&[u8]> = at.windows(2).map(|w| &bytes[w[0]..w[1]]).collect();
            prop_assert_eq!(decode_checked(&parts), whole);
        }

        /// With small limits, so that over-long lines and events are common: however a stream
        /// is split into reads, the events and the error are the same; every event delivered
        /// is within the event limit, the decoder never holds more than a line and an event,
        /// and an error is the answer exactly when a line or an event went over its limit.
        #[test]
        fn limits_hold_under_any_split(
            bytes in prop::collection::vec(prop_oneof![
                6 => prop::sample::select(b"data: xyz\n".to_vec()),
                1 => Just(b'\r'),
                1 => any::<u8>().prop_map(|b| b & 0x7f),
            ], 0..600),
            cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..12),
            max_line in 1usize..40,
            max_event in 0usize..80,
        ) {
            let decode = |parts: &[&[u8]]| {
                let mut d = SseDecoder::with_limits(max_line, max_event);
                let mut out = Vec::new();
                let mut err = None;
                for p in parts {
                    if let Err(e) = d.push(p, &mut out) {
                        err = Some(e);
                        break;
                    }
                    assert!(d.held() <= max_line + max_event + 1, "held {}", d.held());
                }
                if err.is_none() {
                    err = d.finish(&mut out).err();
                }
                (out, err)
            };
            let whole = decode(&[&bytes]);
            let mut at: Vec<usize> = cuts.iter().map(|c| c.index(bytes.len() + 1)).collect();
            at.extend([0, bytes.len()]);
            at.sort_unstable();
            let parts: Vec<&[u8]> = at.windows(2).map(|w| &bytes[w[0]..w[1]]).collect();
            let split = decode(&parts);
            prop_assert_eq!(&split, &whole);
            for event in &whole.0 {
                prop_assert!(event.len() <= max_event, "{} > {}", event.len(), max_event);
            }
            // The same stream under limits it cannot reach: no error from size, and the
            // over-long line or event is there.
            let (free, free_err) = {
                let mut d = SseDecoder::with_limits(usize::MAX, usize::MAX);
                let mut out = Vec::new();
                let err = d.push(&bytes, &mut out).err().or_else(|| d.finish(&mut out).err());
                (out, err)
            };
            let longest_line = bytes
                .split(|&b| b == b'\n' || b == b'\r')
                .map(<[u8]>::len)
                .max()
                .unwrap_or(0);
            let longest_event = free.iter().map(String::len).max().unwrap_or(0);
            match &whole.1 {
                Some(SseError::LineTooLong) => prop_assert!(longest_line >= max_line),
                Some(SseError::EventTooLong) => prop_assert!(longest_event > max_event || free_err.is_some()),
                Some(SseError::InvalidUtf8) => prop_assert_eq!(&free_err, &whole.1),
                None => {
                    prop_assert!(longest_line <= max_line);
                    prop_assert_eq!(free, whole.0);
                }
            }
        }

        /// Arbitrary bytes never panic.
        #[test]
        fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
            let mut d = SseDecoder::new();
            let mut out = Vec::new();
            let _ = d.push(&bytes, &mut out);
            let _ = d.finish(&mut out);
        }
    }
}
