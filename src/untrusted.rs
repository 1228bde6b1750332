//! Text throughline did not write itself: a server's error bodies, its model ids and engine
//! version, names and warnings read from results and baselines. Each is printed only through
//! one of these functions, so that it cannot act on what reads it.
//!
//! - On a terminal or in a CI log ([`for_terminal`]): a GitHub Actions runner executes a line
//!   that starts with `::` (after whitespace: `::stop-commands::`, `::error::`, `::add-mask::`)
//!   and a `##[command]` anywhere in a line. Control characters are written as escapes (a
//!   newline as `\n`, others as `\u{1b}`), so untrusted text stays on its line; a `::` at the
//!   start of a line is written `\u{3a}:` and every `##[` as `#\u{23}[`. The choice is a
//!   visible ASCII escape, the same form as the control characters', not an invisible
//!   zero-width character: a reader sees that the text was changed, and the escape survives
//!   any log viewer and copy-paste. [`for_terminal_lines`] is the final printers' safety net
//!   over throughline's own multi-line text: its lines are kept, each line is defused.
//! - In Markdown (the job summary, `verdict.md`, the pull-request comment): [`inline_text`]
//!   backslash-escapes the punctuation that makes links, images, emphasis, code, headings and
//!   tables, and writes `<`, `>`, `&` as entities (no HTML); [`code_span`] and
//!   [`fenced_block`] fence with more backticks than the longest run in the text.
//! - [`bound_summary`]: GitHub drops a job summary over 1 MiB; a summary is cut to a bound
//!   and says what was left out.

use std::borrow::Cow;
use std::fmt::Write;

/// One untrusted string for a terminal or a CI log, on one line: control characters (a
/// newline too) escaped, a leading `::` (after whitespace) and every `##[` defused.
pub fn for_terminal(text: &str) -> Cow<'_, str> {
    if !needs_terminal_escape(text, false) {
        return Cow::Borrowed(text);
    }
    Cow::Owned(escape_line(text, false))
}

/// Multi-line text for a terminal or a CI log (throughline's own, which may quote untrusted
/// text): the newlines are kept, every line is escaped as by [`for_terminal`] but for tabs
/// and colour (SGR `ESC[..m`) sequences, which are kept too.
pub fn for_terminal_lines(text: &str) -> Cow<'_, str> {
    if !needs_terminal_escape(text, true) {
        return Cow::Borrowed(text);
    }
    let lines: Vec<String> = text.split('\n').map(|l| escape_line(l, true)).collect();
    Cow::Owned(lines.join("\n"))
}

fn needs_terminal_escape(text: &str, lines: bool) -> bool {
    text.contains("##[")
        || text
            .chars()
            .any(|c| is_escaped_control(c) && !(lines && (c == '\n' || c == '\t' || c == '\x1b')))
        || text.split('\n').any(|l| l.trim_start().starts_with("::"))
}

/// Characters written as escapes: C0 and C1 controls, DEL, and the Unicode line and
/// paragraph separators and bidirectional overrides (which reorder what a reader sees).
fn is_escaped_control(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{2028}' | '\u{2029}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// The length of a colour sequence `ESC [ digits;... m` at the start of `rest`, if one is.
fn sgr_len(rest: &str) -> Option<usize> {
    let body = rest.strip_prefix("\x1b[")?;
    let end = body.find(|c: char| !(c.is_ascii_digit() || c == ';'))?;
    (body.as_bytes()[end] == b'm').then_some(end + 3)
}

fn escape_line(line: &str, keep_layout: bool) -> String {
    let mut out = String::with_capacity(line.len() + 8);
    let indent = line.len() - line.trim_start().len();
    let mut defuse_colon = line.trim_start().starts_with("::");
    let mut i = 0;
    while i < line.len() {
        let rest = &line[i..];
        let c = rest.chars().next().unwrap_or_default();
        if keep_layout && c == '\x1b' {
            if let Some(n) = sgr_len(rest) {
                out.push_str(&rest[..n]);
                i += n;
                continue;
            }
        }
        if defuse_colon && i >= indent && c == ':' {
            out.push_str("\\u{3a}");
            defuse_colon = false;
        } else if rest.starts_with("##[") {
            out.push_str("#\\u{23}");
            i += 2;
            continue;
        } else if keep_layout && c == '\t' {
            out.push('\t');
        } else if c == '\n' {
            out.push_str("\\n");
        } else if c == '\r' {
            out.push_str("\\r");
        } else if c == '\t' {
            out.push_str("\\t");
        } else if is_escaped_control(c) {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        } else {
            out.push(c);
        }
        i += c.len_utf8();
    }
    out
}

/// Untrusted text inside a Markdown paragraph, list item, heading or table cell: shown as
/// the characters it is, never as a link, image, emphasis, code, heading, table cell break or
/// HTML. Control characters are written as for the terminal (`\n`), on the one line.
pub fn inline_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '\\' | '`' | '*' | '_' | '[' | ']' | '!' | '#' | '|' | '~' | '$' => {
                out.push('\\');
                out.push(c);
            }
            '\n' => out.push_str("\\\\n"),
            '\r' => out.push_str("\\\\r"),
            '\t' => out.push(' '),
            c if is_escaped_control(c) => {
                let _ = write!(out, "\\\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

/// Untrusted text as an inline code span: delimited by more backticks than the longest run
/// in it, control characters shown as escapes (a newline could end the paragraph and so the
/// span). In a table cell a `|` still splits the row: use [`code_span_in_table`] there.
pub fn code_span(text: &str) -> String {
    span(text, false)
}

/// [`code_span`] for a table cell: `|` is written `\|` (GitHub's tables read it as a `|`
/// inside a code span too).
pub fn code_span_in_table(text: &str) -> String {
    span(text, true)
}

fn span(text: &str, in_table: bool) -> String {
    let mut body = escape_line(text, false);
    if in_table {
        body = body.replace('|', "\\|");
    }
    let fence = "`".repeat(longest_backtick_run(&body) + 1);
    // A span that starts or ends with a backtick (or a space) needs a space either side;
    // CommonMark strips one from each end.
    let pad = if body.starts_with('`') || body.ends_with('`') || body.starts_with(' ') {
        " "
    } else {
        ""
    };
    if body.is_empty() {
        return "` `".to_string();
    }
    format!("{fence}{pad}{body}{pad}{fence}")
}

/// Untrusted multi-line text as a fenced code block with info string `info`: the fence is
/// longer than any backtick run in the text (at least three), so no line of the text can
/// close it; control characters other than newlines and tabs are shown as escapes. Ends
/// with a newline.
pub fn fenced_block(info: &str, text: &str) -> String {
    let body: Vec<String> = text
        .trim_end_matches('\n')
        .split('\n')
        .map(|l| {
            let mut out = String::with_capacity(l.len());
            for c in l.chars() {
                match c {
                    '\t' => out.push('\t'),
                    c if is_escaped_control(c) => {
                        let _ = write!(out, "\\u{{{:x}}}", c as u32);
                    }
                    c => out.push(c),
                }
            }
            out
        })
        .collect();
    let body = body.join("\n");
    let fence = "`".repeat((longest_backtick_run(&body) + 1).max(3));
    format!("{fence}{info}\n{body}\n{fence}\n")
}

fn longest_backtick_run(text: &str) -> usize {
    let mut best = 0;
    let mut run = 0;
    for c in text.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        best = best.max(run);
    }
    best
}

/// GitHub's limit on one step's job summary: 1 MiB.
pub const SUMMARY_LIMIT: usize = 1024 * 1024;

/// At most `limit` bytes of Markdown: whole lines from the start, then a line that says how
/// many lines and bytes were left out and where the whole is (`whole`, e.g. "verdict.json in
/// the artifact"). A fenced block open at the cut is closed first. Text within the limit is
/// returned as it is.
pub fn bound_summary(markdown: &str, limit: usize, whole: &str) -> String {
    if markdown.len() <= limit {
        return markdown.to_string();
    }
    // Room for the closing fence and the note.
    let room = limit.saturating_sub(512);
    let mut kept = 0;
    let mut open_fence: Option<String> = None;
    for line in markdown.split_inclusive('\n') {
        if kept + line.len() > room {
            break;
        }
        let t = line.trim_end();
        let ticks = t.len() - t.trim_start_matches('`').len();
        if ticks >= 3 {
            match &open_fence {
                Some(f) if t.len() == ticks && ticks >= f.len() => open_fence = None,
                None => open_fence = Some("`".repeat(ticks)),
                _ => {}
            }
        }
        kept += line.len();
    }
    let mut out = markdown[..kept].to_string();
    if let Some(fence) = open_fence {
        let _ = writeln!(out, "{fence}");
    }
    let left_lines = markdown[kept..].lines().count();
    let _ = writeln!(
        out,
        "\n**Cut here:** {left_lines} more lines ({} bytes) are left out of this summary \
         (GitHub shows at most {} KiB); the whole is {}.\n",
        markdown.len() - kept,
        limit / 1024,
        inline_text(whole)
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn executes(line: &str) -> bool {
        line.trim_start().starts_with("::") || line.contains("##[")
    }

    #[test]
    fn terminal_text_stays_on_its_line_and_runs_nothing() {
        let hostile = "oops\n::stop-commands::abc\r\n  ::error::x ##[error]y \x1b[2J\u{202e}";
        let out = for_terminal(hostile);
        assert!(!out.contains('\n') && !out.contains('\r') && !out.contains('\x1b'));
        assert!(!executes(&out), "{out}");
        assert_eq!(for_terminal("::x"), "\\u{3a}:x");
        assert_eq!(for_terminal("  ::x"), "  \\u{3a}:x");
        assert_eq!(for_terminal("a ##[b"), "a #\\u{23}[b");
        assert_eq!(for_terminal("a\nb"), "a\\nb");
        assert!(matches!(for_terminal("plain: text"), Cow::Borrowed(_)));
    }

    #[test]
    fn lines_keep_their_layout_and_colour_but_run_nothing() {
        let text = "table\n\tx\n::error::y\n\x1b[31mFAIL\x1b[0m ##[z\x07";
        let out = for_terminal_lines(text);
        assert_eq!(out.lines().count(), 4);
        assert!(out.lines().all(|l| !executes(l)), "{out}");
        assert!(out.contains("\x1b[31mFAIL\x1b[0m") && out.contains("\tx"));
        assert!(out.contains("\\u{7}"));
    }

    #[test]
    fn spans_and_fences_outlast_the_backticks_inside() {
        assert_eq!(code_span("a`b"), "``a`b``");
        assert_eq!(code_span("`x"), "`` `x ``");
        assert_eq!(code_span("a\nb"), "`a\\nb`");
        assert_eq!(code_span_in_table("a|b"), "`a\\|b`");
        let block = fenced_block("text", "x\n```\n## heading\n````");
        assert!(block.starts_with("`````text\n") && block.ends_with("\n`````\n"));
        assert_eq!(inline_text("<a>[x](y) #"), "&lt;a&gt;\\[x\\](y) \\#");
    }

    #[test]
    fn a_summary_over_the_bound_is_cut_with_a_note() {
        let text = format!("```text\n{}```\n", "line\n".repeat(10_000));
        let out = bound_summary(&text, 4096, "verdict.json");
        assert!(out.len() <= 4096, "{}", out.len());
        assert!(out.contains("more lines") && out.contains("verdict.json"));
        assert_eq!(out.matches("```").count() % 2, 0, "the fence is closed");
        assert_eq!(bound_summary("short\n", 4096, "x"), "short\n");
    }
}
