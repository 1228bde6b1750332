//! The end of a server's log, safe to put into an error message.
//!
//! Everything a server writes is untrusted text: it may hold control characters (a
//! terminal's escape sequences) or lines a CI runner would read as its own commands
//! (`::error ...` on GitHub Actions). The log file keeps it as it was; a tail shown to the
//! user has its control characters escaped and every line behind a `| ` margin.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

/// At most this much of the end of a log is read for a tail, however long the log.
pub const TAIL_BYTES: u64 = 64 * 1024;

/// The last `lines` lines of the log at `path` (at most its last [`TAIL_BYTES`]), each
/// behind a `| ` margin, control characters other than tab escaped. A log that cannot be
/// read says so in the text instead (this feeds error messages, which must still be made).
pub fn log_tail(path: &Path, lines: usize) -> String {
    tail_from(path, 0, lines)
}

/// [`log_tail`] of what was written from byte `from` on (a log appended to by several
/// starts of a server shows only the last start's lines).
pub(super) fn tail_from(path: &Path, from: u64, lines: usize) -> String {
    match read_end(path, from) {
        Ok(text) => format_tail(&text, lines),
        Err(e) => format!("| (cannot read the log {}: {e})", path.display()),
    }
}

/// The last `lines` lines of `text` behind a `| ` margin, control characters escaped.
pub(super) fn format_tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    let shown = &all[all.len().saturating_sub(lines)..];
    if shown.is_empty() {
        return "| (the log is empty)".to_string();
    }
    shown
        .iter()
        .map(|line| format!("| {}", escape_controls(line)))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The file's bytes from `max(from, len - TAIL_BYTES)` on, as text; a first line cut by
/// that bound is left out.
pub(super) fn read_end(path: &Path, from: u64) -> std::io::Result<String> {
    let mut file = File::open(path)?;
    let len = file.metadata()?.len();
    let start = from.max(len.saturating_sub(TAIL_BYTES)).min(len);
    file.seek(SeekFrom::Start(start))?;
    let mut bytes = Vec::new();
    file.take(TAIL_BYTES).read_to_end(&mut bytes)?;
    let mut text = String::from_utf8_lossy(&bytes).into_owned();
    if start > from {
        // Started inside a line: drop its rest.
        text = match text.split_once('\n') {
            Some((_, rest)) => rest.to_string(),
            None => String::new(),
        };
    }
    Ok(text)
}

/// `text` with control characters other than tab and newline written as `\r`, `\u{1b}`...
// TODO: use the shared escape function for untrusted text once it lands (another branch).
pub fn escape_controls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\n' | '\t' => out.push(c),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_is_the_last_lines_behind_a_margin() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("server.log");
        let text: String = (1..=100).map(|i| format!("line {i}\n")).collect();
        std::fs::write(&path, text).unwrap();
        assert_eq!(log_tail(&path, 3), "| line 98\n| line 99\n| line 100");
        assert_eq!(log_tail(&path, 1000).lines().count(), 100);
        assert_eq!(log_tail(&path, 0), "| (the log is empty)");
        let from = "line 1\n".len() as u64;
        assert!(tail_from(&path, from, 1000).starts_with("| line 2\n"));
    }

    #[test]
    fn the_tail_reads_only_the_end_of_a_big_log() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("server.log");
        // 10 MB of one line, then two short ones: the cut line is left out.
        let mut text = "x".repeat(10_000_000);
        text.push_str("\nlast but one\nlast\n");
        std::fs::write(&path, &text).unwrap();
        let tail = log_tail(&path, 40);
        assert_eq!(tail, "| last but one\n| last");
        // Many lines: no more than 64 KiB of them are read.
        let text: String = (0..100_000).map(|i| format!("{i:09}\n")).collect();
        std::fs::write(&path, &text).unwrap();
        let tail = log_tail(&path, usize::MAX);
        assert!(tail.len() <= TAIL_BYTES as usize * 2, "{}", tail.len());
        assert!(tail.ends_with("| 000099999"));
    }

    #[test]
    fn the_tail_escapes_control_characters_and_runner_commands() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("server.log");
        std::fs::write(&path, b"::error::fake\n\x1b[31mred\r\tok\n\x07bell\xff\n").unwrap();
        let tail = log_tail(&path, 10);
        assert_eq!(
            tail,
            "| ::error::fake\n| \\u{1b}[31mred\\r\tok\n| \\u{7}bell\u{fffd}"
        );
        assert!(tail.lines().all(|l| l.starts_with("| ")));
    }

    #[test]
    fn a_missing_log_says_so() {
        let tail = log_tail(Path::new("/nonexistent/throughline/server.log"), 5);
        assert!(tail.contains("cannot read the log"), "{tail}");
    }
}
