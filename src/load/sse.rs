//! An incremental Server-Sent Events decoder: bytes in, `data` payloads out.
//!
//! Network reads split events anywhere (mid-line, mid-UTF-8 character), so the decoder keeps
//! the unfinished tail between calls. It follows the SSE rules that matter for OpenAI-style
//! streams: lines end in LF, CRLF or CR; `data:` lines of one event are joined with LF; a blank
//! line ends the event; comment lines (`:`) and other fields are ignored.

/// Decodes SSE `data` payloads from a byte stream.
#[derive(Debug, Default)]
pub struct SseDecoder {
    /// Bytes of the line not yet ended.
    line: Vec<u8>,
    /// `data` lines of the event not yet ended.
    data: Option<String>,
    /// The previous byte was CR: a following LF belongs to the same line ending.
    after_cr: bool,
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
                    if self.line.len() >= MAX_LINE {
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
                if held + value.len() > MAX_EVENT {
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
