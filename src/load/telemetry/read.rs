//! Reading a `/metrics` answer as it arrives: in lines, with a cap on the page and on a line.

use super::super::stream::client::error_chain;

/// The most of one `/metrics` answer read. An engine's page is some hundreds of KiB; past
/// this a scrape stops reading and keeps what it parsed (the run says so once), so a page
/// swollen by another exporter's series costs neither memory nor a failed scrape.
pub const MAX_PAGE_BYTES: usize = 4 << 20;
/// The longest line read; a longer one is skipped whole.
const MAX_LINE_BYTES: usize = 64 << 10;

/// A page cut into lines as its pieces arrive: at most `cap` bytes read, no line longer
/// than [`MAX_LINE_BYTES`] kept (one is skipped whole), nothing held but the line being read.
struct Lines {
    line: Vec<u8>,
    too_long: bool,
    left: usize,
}

impl Lines {
    fn new(cap: usize) -> Lines {
        Lines {
            line: Vec::new(),
            too_long: false,
            left: cap,
        }
    }

    /// Hands each line `piece` ends to `each`; true when the cap cut the page (the line it
    /// cut is dropped: nothing more is to be fed).
    fn feed(&mut self, piece: &[u8], each: &mut impl FnMut(&str)) -> bool {
        let cut = piece.len() > self.left;
        let mut rest = &piece[..piece.len().min(self.left)];
        self.left -= rest.len();
        while let Some(at) = memchr::memchr(b'\n', rest) {
            self.take(&rest[..at]);
            self.give(each);
            rest = &rest[at + 1..];
        }
        self.take(rest);
        cut
    }

    fn take(&mut self, bytes: &[u8]) {
        if self.too_long || self.line.len() + bytes.len() > MAX_LINE_BYTES {
            self.too_long = true;
            self.line.clear();
        } else {
            self.line.extend_from_slice(bytes);
        }
    }

    /// The page ended: its last line, which needs no newline.
    fn finish(mut self, each: &mut impl FnMut(&str)) {
        if !self.line.is_empty() {
            self.give(each);
        }
    }

    fn give(&mut self, each: &mut impl FnMut(&str)) {
        if !self.too_long {
            if let Ok(text) = std::str::from_utf8(&self.line) {
                each(text);
            }
        }
        self.line.clear();
        self.too_long = false;
    }
}

/// Reads a `/metrics` answer as it arrives, handing each whole line to `each`: at most
/// `cap` bytes (then the rest is left unread and the line the cap cut is dropped) and no
/// line longer than [`MAX_LINE_BYTES`] (skipped). Ok(true) when the page was cut at `cap`;
/// Err when the connection broke.
pub async fn read_lines(
    mut response: reqwest::Response,
    cap: usize,
    mut each: impl FnMut(&str),
) -> Result<bool, String> {
    let mut lines = Lines::new(cap);
    loop {
        match response.chunk().await {
            Ok(Some(piece)) => {
                if lines.feed(&piece, &mut each) {
                    return Ok(true);
                }
            }
            Ok(None) => break,
            Err(e) => return Err(error_chain(&e)),
        }
    }
    lines.finish(&mut each);
    Ok(false)
}

/// The run's one warning for scrapes that read only the first [`MAX_PAGE_BYTES`] of a
/// page, if any did.
pub fn cut_page_warning(levels: &[crate::record::LevelResult]) -> Option<String> {
    let cut: u32 = (levels.iter())
        .flat_map(|l| &l.trials)
        .filter_map(|t| t.telemetry.as_ref())
        .flat_map(|t| &t.endpoints)
        .map(|e| e.cut_scrapes)
        .sum();
    (cut > 0).then(|| {
        format!(
            "server telemetry: the /metrics page was longer than {} MiB at {cut} scrape(s); \
             only its first {} MiB were read, so series after that are missing from the samples",
            MAX_PAGE_BYTES >> 20,
            MAX_PAGE_BYTES >> 20
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_is_read_in_lines_up_to_its_cap() {
        let read = |pieces: &[&str], cap: usize| {
            let mut lines = Lines::new(cap);
            let mut got = Vec::new();
            let mut each = |l: &str| got.push(l.to_string());
            let cut = pieces.iter().any(|p| lines.feed(p.as_bytes(), &mut each));
            if !cut {
                lines.finish(&mut each);
            }
            (got, cut)
        };
        // Lines split across pieces are joined; the last needs no newline.
        let (got, cut) = read(&["a 1\nb ", "2\nc", " 3"], 100);
        assert_eq!(
            (got, cut),
            (vec!["a 1".into(), "b 2".into(), "c 3".into()], false)
        );
        // The cap cuts the page: the line it cut is dropped.
        let (got, cut) = read(&["a 1\nb 2\nc 3\n"], 6);
        assert_eq!((got, cut), (vec!["a 1".into()], true));
        let (got, cut) = read(&["a 1\n", "b 2\n"], 8);
        assert_eq!((got, cut), (vec!["a 1".into(), "b 2".into()], false));
        // A line past the longest is skipped whole, the next one read.
        let long = format!("x{{l=\"{}\"}} 1\ny 2\n", "v".repeat(MAX_LINE_BYTES));
        let (got, _) = read(&[&long[..1000], &long[1000..]], usize::MAX);
        assert_eq!(got, vec!["y 2".to_string()]);
    }
}
