//! A Prometheus text page, parsed one line at a time.

use std::collections::BTreeMap;

/// One series of a metric: its labels and value.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub labels: Vec<(String, String)>,
    pub value: f64,
}

/// A Prometheus text page, parsed: the finite series of the sample names kept. Histograms
/// and summaries keep their `_bucket`/`_sum`/`_count` names (the names as the lines write
/// them). Parsed one line at a time, as the page arrives: label values may hold `}`, `,` or
/// escaped quotes; a malformed line spoils only itself; a line whose name is not kept costs
/// no more than reading it.
#[derive(Debug, Clone, Default)]
pub struct Page {
    pub(super) series: BTreeMap<String, Vec<Series>>,
}

/// A line's sample name: the leading name characters of a line that is not a comment;
/// `None` for a comment or a blank line. The rest of the line is not looked at (see
/// [`sample_rest`]), so that a line whose name is not wanted costs little.
pub(super) fn line_name(line: &str) -> Option<(&str, &str)> {
    let line = line.trim_start();
    let bytes = line.as_bytes();
    let mut end = 0;
    while end < bytes.len()
        && (bytes[end].is_ascii_alphanumeric() || bytes[end] == b'_' || bytes[end] == b':')
    {
        end += 1;
    }
    if end == 0 || bytes[0].is_ascii_digit() {
        return None;
    }
    Some((&line[..end], &line[end..]))
}

/// What follows a sample's name: the text between its label braces (empty without labels)
/// and its value; `None` when malformed or the value is not finite.
pub(super) fn sample_rest(rest: &str) -> Option<(&str, f64)> {
    let rest = rest.trim_end();
    let (labels, rest) = match rest.strip_prefix('{') {
        Some(inner) => {
            let close = labels_end(inner)?;
            (&inner[..close], &inner[close + 1..])
        }
        None => ("", rest),
    };
    // The value, then at most a timestamp.
    if !rest.starts_with([' ', '\t']) {
        return None;
    }
    let mut fields = rest.split_ascii_whitespace();
    let value: f64 = fields.next()?.parse().ok()?;
    if let Some(stamp) = fields.next() {
        stamp.parse::<i64>().ok()?;
    }
    if fields.next().is_some() || !value.is_finite() {
        return None;
    }
    Some((labels, value))
}

/// Where the label block that `text` starts inside ends (the index of its `}`), checking
/// each `name="value"` on the way; `None` when it is malformed.
fn labels_end(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut i = 0;
    let skip_space = |i: &mut usize| {
        while *i < bytes.len() && bytes[*i].is_ascii_whitespace() {
            *i += 1;
        }
    };
    loop {
        skip_space(&mut i);
        if *bytes.get(i)? == b'}' {
            return Some(i);
        }
        let start = i;
        while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
            i += 1;
        }
        if i == start {
            return None;
        }
        skip_space(&mut i);
        if *bytes.get(i)? != b'=' {
            return None;
        }
        i += 1;
        skip_space(&mut i);
        if *bytes.get(i)? != b'"' {
            return None;
        }
        i += 1;
        loop {
            match *bytes.get(i)? {
                b'\\' => i += 2,
                b'"' => break,
                _ => i += 1,
            }
        }
        i += 1;
        skip_space(&mut i);
        match *bytes.get(i)? {
            b',' => i += 1,
            b'}' => return Some(i),
            _ => return None,
        }
    }
}

/// The labels of a block [`labels_end`] accepted, their values unescaped.
fn parse_labels(text: &str) -> Vec<(String, String)> {
    let mut labels = Vec::new();
    let mut rest = text;
    while let Some((key, after)) = rest.split_once('=') {
        let key = key.trim().trim_start_matches(',').trim();
        let Some(after) = after.trim_start().strip_prefix('"') else {
            break;
        };
        let mut value = String::new();
        let mut chars = after.char_indices();
        let mut end = after.len();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some((_, 'n')) => value.push('\n'),
                    Some((_, other)) => value.push(other),
                    None => {}
                },
                '"' => {
                    end = i + 1;
                    break;
                }
                c => value.push(c),
            }
        }
        labels.push((key.to_string(), value));
        rest = &after[end..];
    }
    labels
}

impl Page {
    /// Every series of a page.
    pub fn parse(text: &str) -> Page {
        Page::parse_only(text, |_| true)
    }

    /// The series of a page whose sample names `keep` says to keep.
    pub fn parse_only(text: &str, keep: impl Fn(&str) -> bool) -> Page {
        let mut page = Page::default();
        for line in text.lines() {
            page.add_line(line, &keep);
        }
        page
    }

    /// Adds one line of a page, when it is a sample whose name `keep` keeps (the rest of a
    /// line is parsed only then).
    pub fn add_line(&mut self, line: &str, keep: impl Fn(&str) -> bool) {
        let Some((name, rest)) = line_name(line) else {
            return;
        };
        if !keep(name) {
            return;
        }
        if let Some((labels, value)) = sample_rest(rest) {
            self.add(name, labels, value);
        }
    }

    pub(super) fn add(&mut self, name: &str, labels: &str, value: f64) {
        let labels = parse_labels(labels);
        let series = match self.series.get_mut(name) {
            Some(s) => s,
            None => self.series.entry(name.to_string()).or_default(),
        };
        series.push(Series { labels, value });
    }

    /// The series a name (optionally `name{label=value}`) selects; empty when absent.
    pub fn select(&self, selector: &str) -> Vec<&Series> {
        let (name, filter) = match selector.split_once('{') {
            Some((n, rest)) => (n, rest.trim_end_matches('}').split_once('=')),
            None => (selector, None),
        };
        let all = self.series.get(name).map(Vec::as_slice).unwrap_or(&[]);
        all.iter()
            .filter(|s| {
                filter.is_none_or(|(k, v)| s.labels.iter().any(|(lk, lv)| lk == k && lv == v))
            })
            .collect()
    }

    /// The sum over the selected series (counters, request counts), `None` when absent.
    pub fn sum(&self, selector: &str) -> Option<f64> {
        let s = self.select(selector);
        (!s.is_empty()).then(|| s.iter().map(|s| s.value).sum())
    }

    /// The largest selected series and how many there were (utilisations, per rank).
    pub fn max(&self, selector: &str) -> Option<(f64, usize)> {
        let s = self.select(selector);
        let m = s.iter().map(|s| s.value).reduce(f64::max)?;
        Some((m, s.len()))
    }

    pub fn contains(&self, selector: &str) -> bool {
        !self.select(selector).is_empty()
    }
}

/// The sample name a selector (`name` or `name{label=value}`) reads.
pub(super) fn selector_name(selector: &str) -> &str {
    selector.split_once('{').map_or(selector, |(n, _)| n)
}
