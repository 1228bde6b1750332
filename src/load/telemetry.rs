//! Server telemetry: `/metrics` scraped about once a second during each trial.
//!
//! Two reasons. The client's numbers only say how fast the server answered; the server's
//! gauges say *why* (a queue that never emptied, a KV cache at 99%, preemptions), so each level
//! can say whether the server was saturated. And the server's own token counter is an
//! independent measurement of the same thing the client counted: over the same window (first
//! to last scrape inside the trial) the two rates must agree, or one of them is wrong.
//!
//! Engines count generated tokens at different moments: vLLM, SGLang and the simulator as
//! tokens are produced, llama.cpp and TGI when a request finishes. The client side of the
//! cross-check counts the same way: tokens by arrival time, or whole requests by end time.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::stream::outcome::Finished;
use super::wire::body::base_url;
use crate::engine::{self, Engine};
use crate::record::flags::{FlagKind, TrialFlag};
pub use crate::record::telemetry::{Counting, EndpointSeries, Sample, TrialTelemetry};
use crate::record::TrialResult;

/// How often `/metrics` is read during a trial.
pub const INTERVAL: Duration = Duration::from_secs(1);
/// Client and server token rates may differ by this much before the trial is flagged.
pub const AGREEMENT: f64 = 0.02;
/// Cache usage at or above this counts as "near full".
pub const CACHE_NEAR_FULL: f64 = 0.95;

/// One engine's telemetry: its metric names (src/engine/, one file per engine) and how its
/// token counter counts. A name may select series by one label, written `name{label=value}`
/// (Triton's TensorRT-LLM backend puts several figures in one family).
#[derive(Debug, Clone, Copy)]
pub struct Adapter {
    pub engine: Engine,
    pub names: &'static engine::Telemetry,
    pub counting: Counting,
}

/// The adapter for an engine, when it has metrics to read.
pub fn adapter(engine: Engine) -> Option<Adapter> {
    let names = engine.spec().telemetry.as_ref()?;
    let counting = match names.counting {
        engine::Counting::PerToken => Counting::PerToken,
        engine::Counting::AtCompletion => Counting::AtCompletion,
    };
    Some(Adapter {
        engine,
        names,
        counting,
    })
}

/// A warning when the engine's `/metrics` (as the probe read it) lacks the token counter, so
/// the client/server cross-check cannot be made.
pub fn missing_counter_warning(engine: Option<Engine>, present: &[&str]) -> Option<String> {
    let a = adapter(engine?)?;
    if a.names.generated_tokens.iter().any(|n| present.contains(n)) {
        return None;
    }
    if a.names.generated_tokens.is_empty() {
        return Some(format!(
            "server telemetry: {} exports no generated-token counter; the client's token \
             count is not cross-checked against the server's",
            a.engine
        ));
    }
    Some(format!(
        "server telemetry: the {} /metrics page has no {}; the client's token count is not \
         cross-checked against the server's",
        a.engine,
        a.names.generated_tokens.join(" or ")
    ))
}

/// The most of one `/metrics` answer read. An engine's page is some hundreds of KiB; past
/// this a scrape stops reading and keeps what it parsed (the run says so once), so a page
/// swollen by another exporter's series costs neither memory nor a failed scrape.
pub const MAX_PAGE_BYTES: usize = 4 << 20;
/// The longest line read; a longer one is skipped whole.
const MAX_LINE_BYTES: usize = 64 << 10;

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
    series: BTreeMap<String, Vec<Series>>,
}

/// A line's sample name: the leading name characters of a line that is not a comment;
/// `None` for a comment or a blank line. The rest of the line is not looked at (see
/// [`sample_rest`]), so that a line whose name is not wanted costs little.
fn line_name(line: &str) -> Option<(&str, &str)> {
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
fn sample_rest(rest: &str) -> Option<(&str, f64)> {
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

    fn add(&mut self, name: &str, labels: &str, value: f64) {
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
fn selector_name(selector: &str) -> &str {
    selector.split_once('{').map_or(selector, |(n, _)| n)
}

impl Adapter {
    /// Every selector this adapter reads.
    fn selectors(&self) -> impl Iterator<Item = &'static str> {
        let names = self.names;
        [
            names.running,
            names.waiting,
            names.cache_usage,
            names.preemptions,
            names.generated_tokens,
        ]
        .into_iter()
        .flatten()
        .copied()
    }

    /// The sample names this adapter reads, sorted: the only series a scrape keeps.
    pub fn wanted(&self) -> Vec<&'static str> {
        let mut names: Vec<&'static str> = self.selectors().map(selector_name).collect();
        names.sort_unstable();
        names.dedup();
        names
    }

    /// The sample a metrics page gives, each figure combined by its meaning.
    pub fn sample(&self, t: f64, text: &str) -> Sample {
        let wanted = self.wanted();
        self.sample_of(t, &Page::parse_only(text, |n| wanted.contains(&n)))
    }

    /// The sample of a page parsed already.
    pub fn sample_of(&self, t: f64, page: &Page) -> Sample {
        let sum = |names: &[&str]| names.iter().find_map(|n| page.sum(n));
        let names = self.names;
        let cache = names.cache_usage.iter().find_map(|n| page.max(n));
        Sample {
            t,
            running: sum(names.running),
            waiting: sum(names.waiting),
            cache_usage: cache.map(|(v, _)| v),
            cache_usage_ranks: cache.and_then(|(_, n)| (n > 1).then_some(n as u32)),
            generated_tokens_total: sum(names.generated_tokens),
            preemptions_total: sum(names.preemptions),
        }
    }

    /// The names of this adapter's metrics that a page exports.
    pub fn present(&self, text: &str) -> Vec<&'static str> {
        let wanted = self.wanted();
        self.present_in(&Page::parse_only(text, |n| wanted.contains(&n)))
    }

    /// [`Adapter::present`] of a page parsed already.
    pub fn present_in(&self, page: &Page) -> Vec<&'static str> {
        self.selectors().filter(|n| page.contains(n)).collect()
    }
}

/// What the probe reads of a page, line by line: the engine prefixes its names start with
/// and the series any engine's adapter reads (memory bounded by the engines' names, not by
/// the page).
#[derive(Debug)]
pub struct Recognizer {
    /// Every engine's prefixes, and those seen on the page.
    prefixes: Vec<&'static str>,
    seen: Vec<&'static str>,
    /// The sample names kept, sorted: every adapter's, and the unprefixed engines' marks.
    wanted: Vec<&'static str>,
    page: Page,
}

impl Default for Recognizer {
    fn default() -> Recognizer {
        let specs = || Engine::ALL.iter().map(|e| e.spec());
        let prefixes = specs().flat_map(|s| s.metric_prefixes).copied().collect();
        let mut wanted: Vec<&'static str> = (Engine::ALL.iter())
            .filter_map(|e| adapter(*e))
            .flat_map(|a| a.wanted())
            .chain(specs().filter_map(|s| s.unprefixed.as_ref().map(|u| u.metric)))
            .collect();
        wanted.sort_unstable();
        wanted.dedup();
        Recognizer {
            prefixes,
            seen: Vec::new(),
            wanted,
            page: Page::default(),
        }
    }
}

impl Recognizer {
    /// Reads one line of the page (the whole line only when its name matters).
    pub fn line(&mut self, line: &str) {
        let Some((name, rest)) = line_name(line) else {
            return;
        };
        let new_prefix = (self.prefixes.iter())
            .find(|p| name.starts_with(**p) && !self.seen.contains(*p))
            .copied();
        let kept = self.wanted.binary_search(&name).is_ok();
        if new_prefix.is_none() && !kept {
            return;
        }
        let Some((labels, value)) = sample_rest(rest) else {
            return;
        };
        for p in &self.prefixes {
            if name.starts_with(*p) && !self.seen.contains(p) {
                self.seen.push(p);
            }
        }
        if kept {
            self.page.add(name, labels, value);
        }
    }

    /// The engine the page read from `path` names, if any.
    pub fn engine(&self, path: &str) -> Option<Engine> {
        Engine::detect(path, |p| self.seen.contains(&p), |m| self.page.contains(m))
    }

    /// The series kept: what [`Adapter::present_in`] reads.
    pub fn page(&self) -> &Page {
        &self.page
    }
}

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
            Err(e) => return Err(super::stream::client::error_chain(&e)),
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

/// What one endpoint's scrapes gave: the samples, the scrapes that failed and those that
/// read only the first [`MAX_PAGE_BYTES`] of the page.
#[derive(Debug, Default)]
struct Scraped {
    samples: Vec<Sample>,
    failed: u32,
    cut: u32,
}

/// One endpoint's scraper: the stop signal and the task that returns what it scraped.
type Scraper = (oneshot::Sender<()>, JoinHandle<Scraped>);

/// Background scrapers for one trial, one task per endpoint.
pub struct Watch {
    adapter: Adapter,
    tasks: Vec<Scraper>,
}

impl Watch {
    /// Takes a first sample of every endpoint before the trial's first request (so the
    /// cross-check window holds the whole trial), then scrapes every [`INTERVAL`] in the
    /// background. None when the engine has no adapter (an unknown OpenAI-compatible server).
    /// `client` should not be the one sending the requests: a scrape must not take a
    /// keep-alive connection (and a server thread) the load needs.
    pub async fn start(
        client: &reqwest::Client,
        endpoints: &[String],
        engine: Option<Engine>,
        clock: Instant,
    ) -> Option<Watch> {
        let adapter = adapter(engine?)?;
        let urls: Vec<String> = endpoints
            .iter()
            .map(|e| format!("{}{}", base_url(e), adapter.names.path))
            .collect();
        let first =
            futures::future::join_all(urls.iter().map(|u| scrape(client, u, &adapter, clock)))
                .await;
        let tasks = urls
            .into_iter()
            .zip(first)
            .map(|(url, first)| {
                let (stop, stopped) = oneshot::channel();
                let task = tokio::spawn(scrape_loop(
                    client.clone(),
                    url,
                    adapter,
                    clock,
                    first,
                    stopped,
                ));
                (stop, task)
            })
            .collect();
        Some(Watch { adapter, tasks })
    }

    /// Stops the scrapers (each takes one last sample, after the trial's last request) and
    /// summarises the samples against the trial's requests.
    pub async fn finish(self, finished: &[Finished]) -> Option<TrialTelemetry> {
        let mut endpoints = Vec::new();
        for (i, (stop, task)) in self.tasks.into_iter().enumerate() {
            let _ = stop.send(());
            let scraped = task.await.unwrap_or_default();
            endpoints.push(EndpointSeries {
                endpoint: i,
                samples: scraped.samples,
                failed_scrapes: scraped.failed,
                cut_scrapes: scraped.cut,
            });
        }
        Some(summarize(&self.adapter, endpoints, finished))
    }
}

async fn scrape_loop(
    client: reqwest::Client,
    url: String,
    adapter: Adapter,
    clock: Instant,
    first: Option<(Sample, bool)>,
    mut stop: oneshot::Receiver<()>,
) -> Scraped {
    let mut scraped = Scraped::default();
    let mut keep = |got: Option<(Sample, bool)>| match got {
        Some((sample, cut)) => {
            scraped.samples.push(sample);
            scraped.cut += u32::from(cut);
        }
        None => scraped.failed += 1,
    };
    keep(first);
    let start = tokio::time::Instant::now() + INTERVAL;
    let mut tick = tokio::time::interval_at(start, INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let last = tokio::select! {
            _ = tick.tick() => false,
            _ = &mut stop => true,
        };
        keep(scrape(&client, &url, &adapter, clock).await);
        if last {
            return scraped;
        }
    }
}

/// One scrape: the sample, and whether the page was cut at [`MAX_PAGE_BYTES`]. Only the
/// adapter's series are kept as the page is read.
async fn scrape(
    client: &reqwest::Client,
    url: &str,
    adapter: &Adapter,
    clock: Instant,
) -> Option<(Sample, bool)> {
    let before = clock.elapsed().as_secs_f64();
    let response = client
        .get(url)
        .timeout(Duration::from_secs(2))
        .send()
        .await
        .ok()?;
    if !response.status().is_success() {
        return None;
    }
    let mut page = Page::default();
    let wanted = adapter.wanted();
    let cut = read_lines(response, MAX_PAGE_BYTES, |line| {
        page.add_line(line, |n| wanted.binary_search(&n).is_ok())
    })
    .await
    .ok()?;
    let after = clock.elapsed().as_secs_f64();
    Some((adapter.sample_of((before + after) / 2.0, &page), cut))
}

/// How many of one request's tokens arrived inside `[from, to]` (seconds since the run
/// started): the first token, then the per-token gaps; when the gaps are not there (failed,
/// not streamed, or past the trial's gap limit), all at the end. Counted in place, so the
/// check holds no list of token times (memory stays flat however long the trial).
fn tokens_inside(f: &Finished, from: f64, to: f64) -> u64 {
    let r = &f.record;
    let inside = |t: f64| t >= from && t <= to;
    match r.first_token_s {
        Some(first) if f.gaps_ms.len() as u64 + 1 == r.output_tokens => {
            let mut t = first;
            let mut n = u64::from(inside(t));
            for g in &f.gaps_ms {
                t += f64::from(*g) / 1000.0;
                n += u64::from(inside(t));
            }
            n
        }
        _ if inside(r.end_s) => r.output_tokens,
        _ => 0,
    }
}

/// Client tokens inside `[from, to]` for one endpoint, counted like the server counts.
fn client_tokens(finished: &[Finished], endpoint: usize, from: f64, to: f64, c: Counting) -> f64 {
    let mine = finished.iter().filter(|f| f.record.endpoint == endpoint);
    match c {
        Counting::AtCompletion => mine
            .filter(|f| f.record.end_s >= from && f.record.end_s <= to)
            .map(|f| f.record.output_tokens as f64)
            .sum(),
        Counting::PerToken => mine.map(|f| tokens_inside(f, from, to)).sum::<u64>() as f64,
    }
}

/// The trial's telemetry: series, the cross-check and the saturation signs.
pub fn summarize(
    adapter: &Adapter,
    endpoints: Vec<EndpointSeries>,
    finished: &[Finished],
) -> TrialTelemetry {
    let (mut server, mut client, mut windows, mut counted) = (0.0, 0.0, 0.0, 0usize);
    for e in &endpoints {
        let with_counter: Vec<&Sample> = e
            .samples
            .iter()
            .filter(|s| s.generated_tokens_total.is_some())
            .collect();
        if let (Some(a), Some(b)) = (with_counter.first(), with_counter.last()) {
            if b.t > a.t {
                let delta = b.generated_tokens_total.unwrap_or(0.0)
                    - a.generated_tokens_total.unwrap_or(0.0);
                if delta >= 0.0 {
                    server += delta;
                    client += client_tokens(finished, e.endpoint, a.t, b.t, adapter.counting);
                    windows += b.t - a.t;
                    counted += 1;
                }
            }
        }
    }
    let compared = counted == endpoints.len() && counted > 0 && server > 0.0;
    let all: Vec<&Sample> = endpoints.iter().flat_map(|e| &e.samples).collect();
    let max = |f: fn(&Sample) -> Option<f64>| {
        all.iter()
            .filter_map(|s| f(s))
            .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))))
    };
    let mut saturation = Vec::new();
    if let Some(w) = max(|s| s.waiting).filter(|w| *w > 0.0) {
        saturation.push(format!("queue non-empty (up to {w:.0} waiting)"));
    }
    if let Some(c) = max(|s| s.cache_usage).filter(|c| *c >= CACHE_NEAR_FULL) {
        let ranks = all.iter().filter_map(|s| s.cache_usage_ranks).max();
        let per = match ranks {
            Some(n) => format!(", the fullest of {n} ranks"),
            None => String::new(),
        };
        saturation.push(format!("KV cache near full ({:.0}%{per})", c * 100.0));
    }
    let preempted: f64 = endpoints
        .iter()
        .filter_map(|e| {
            let v: Vec<f64> = e
                .samples
                .iter()
                .filter_map(|s| s.preemptions_total)
                .collect();
            Some(v.last()? - v.first()?)
        })
        .sum();
    if preempted > 0.0 {
        saturation.push(format!("{preempted:.0} preemptions"));
    }
    TrialTelemetry {
        engine: adapter.engine.name().to_string(),
        counting: adapter.counting,
        endpoints,
        server_tokens: compared.then_some(server),
        client_tokens: compared.then_some(client),
        window_s: compared.then(|| windows / counted as f64),
        disagreement: compared.then(|| client / server - 1.0),
        saturation,
    }
}

/// Puts the telemetry on the trial and flags a client/server disagreement over 2%.
pub fn attach(trial: &mut TrialResult, telemetry: Option<TrialTelemetry>) {
    if let Some(t) = &telemetry {
        if let (Some(d), Some(c), Some(s)) = (t.disagreement, t.client_tokens, t.server_tokens) {
            if d.abs() > AGREEMENT {
                trial.flags.push(TrialFlag::new(
                    FlagKind::CountersDisagree,
                    format!(
                        "client counted {c:.0} output tokens but the server's counter moved \
                         {s:.0} over the same {:.1} s ({:+.1}%): one of them is wrong",
                        t.window_s.unwrap_or(0.0),
                        d * 100.0
                    ),
                ));
            }
        }
    }
    trial.telemetry = telemetry;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{ErrorClass, RequestRecord, TokenSource};

    const VLLM: &str = r#"# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3.0
vllm:num_requests_running{engine="1",model_name="m"} 2.0
vllm:num_requests_waiting{engine="0",model_name="m"} 4.0
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.97
vllm:num_preemptions_total{engine="0",model_name="m"} 2.0
vllm:generation_tokens_total{engine="0",model_name="m"} 1200.0
vllm:generation_tokens_created{engine="0",model_name="m"} 1.7e9
"#;

    #[test]
    fn parses_labels_and_sums_ranks() {
        let s = adapter(Engine::Vllm).unwrap().sample(1.0, VLLM);
        assert_eq!(s.running, Some(5.0));
        assert_eq!(s.waiting, Some(4.0));
        assert_eq!(s.cache_usage, Some(0.97));
        assert_eq!(s.generated_tokens_total, Some(1200.0));
        let old = VLLM.replace("kv_cache_usage_perc", "gpu_cache_usage_perc");
        assert_eq!(
            adapter(Engine::Vllm).unwrap().sample(1.0, &old).cache_usage,
            Some(0.97)
        );
        let llama = "llamacpp:tokens_predicted_total 77\nllamacpp:requests_deferred 0\n";
        let s = adapter(Engine::LlamaCpp).unwrap().sample(0.0, llama);
        assert_eq!(s.generated_tokens_total, Some(77.0));
        assert_eq!(s.running, None, "absent is None, not zero");
    }

    #[test]
    fn utilisation_is_per_rank_and_counters_are_summed() {
        // Two data-parallel ranks, each half full: the server is half full, not "near full".
        let page = r#"# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="org/m{v}2"} 0.5
vllm:kv_cache_usage_perc{engine="1",model_name="org/m{v}2"} 0.5
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="org/m{v}2"} 100.0
vllm:generation_tokens_total{engine="1",model_name="org/m{v}2"} 50.0
vllm:num_requests_running{engine="0",model_name="a}b,c=\"d\""} 3
"#;
        let s = adapter(Engine::Vllm).unwrap().sample(0.0, page);
        assert_eq!(s.cache_usage, Some(0.5));
        assert_eq!(s.cache_usage_ranks, Some(2));
        assert_eq!(s.generated_tokens_total, Some(150.0));
        // A label value holding `}` and an escaped quote is read, not cut at the brace.
        assert_eq!(s.running, Some(3.0));
        // One rank near full is named as the fullest of two.
        let full = page.replacen("} 0.5", "} 0.97", 1);
        let series = vec![EndpointSeries {
            endpoint: 0,
            samples: vec![adapter(Engine::Vllm).unwrap().sample(0.0, &full)],
            failed_scrapes: 0,
            cut_scrapes: 0,
        }];
        let t = summarize(&adapter(Engine::Vllm).unwrap(), series, &[]);
        assert_eq!(
            t.saturation,
            vec!["KV cache near full (97%, the fullest of 2 ranks)"]
        );
    }

    #[test]
    fn histograms_keep_their_sample_names_and_a_bad_line_spoils_only_itself() {
        let tgi = "# TYPE tgi_request_generated_tokens histogram\n\
                   tgi_request_generated_tokens_bucket{le=\"+Inf\"} 2\n\
                   tgi_request_generated_tokens_sum 40\n\
                   tgi_request_generated_tokens_count 2\n\
                   tgi_queue_size 1\n";
        let s = adapter(Engine::Tgi).unwrap().sample(0.0, tgi);
        assert_eq!(s.generated_tokens_total, Some(40.0));
        assert_eq!(s.waiting, Some(1.0));
        let broken = format!("{tgi}this is not a metric line {{\n");
        let s = adapter(Engine::Tgi).unwrap().sample(0.0, &broken);
        assert_eq!(s.waiting, Some(1.0));
    }

    #[test]
    fn nim_and_triton_pages_are_read() {
        let nim = "num_requests_running{model_name=\"m\"} 2\n\
                   num_requests_waiting{model_name=\"m\"} 0\n\
                   gpu_cache_usage_perc{model_name=\"m\"} 0.25\n\
                   generation_tokens_total{model_name=\"m\"} 9\n";
        let a = adapter(Engine::Nim).unwrap();
        assert_eq!(a.names.path, "/v1/metrics");
        let s = a.sample(0.0, nim);
        assert_eq!(
            (s.running, s.cache_usage, s.generated_tokens_total),
            (Some(2.0), Some(0.25), Some(9.0))
        );
        let triton = "nv_trt_llm_request_metrics{model=\"t\",request_type=\"active\",version=\"1\"} 4\n\
                      nv_trt_llm_request_metrics{model=\"t\",request_type=\"max\",version=\"1\"} 512\n\
                      nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type=\"fraction\",model=\"t\",version=\"1\"} 0.3\n\
                      nv_inference_pending_request_count{model=\"t\",version=\"1\"} 6\n";
        let s = adapter(Engine::Triton).unwrap().sample(0.0, triton);
        // Only the "active" series, not active + max.
        assert_eq!(s.running, Some(4.0));
        assert_eq!(s.waiting, Some(6.0));
        assert_eq!(s.cache_usage, Some(0.3));
        assert!(missing_counter_warning(Some(Engine::Triton), &[]).is_some());
    }

    /// Issue 35 item 7: only the adapter's series are kept, however many others a page has;
    /// a malformed line, a comment and a non-finite value are skipped one by one.
    #[test]
    fn only_the_adapters_series_are_kept() {
        let mut page = String::from(VLLM);
        for i in 0..20_000 {
            page.push_str(&format!("node_unrelated_total{{shard=\"{i}\"}} {i}\n"));
        }
        page.push_str("vllm:num_requests_waiting{engine=\"1\"} NaN\n");
        page.push_str("vllm:num_requests_waiting{engine=\"1\" 7\n");
        page.push_str("vllm:num_requests_waiting{engine=\"1\"} 7 123 extra\n");
        page.push_str("vllm:num_requests_waiting{engine=\"2\",} 1 1700000000000\n");
        let a = adapter(Engine::Vllm).unwrap();
        let wanted = a.wanted();
        let kept = Page::parse_only(&page, |n| wanted.contains(&n));
        assert_eq!(kept.series.values().map(Vec::len).sum::<usize>(), 7);
        assert!(!kept.contains("node_unrelated_total"));
        assert_eq!(a.sample_of(0.0, &kept).waiting, Some(5.0));
        assert_eq!(
            Page::parse(&page).select("node_unrelated_total").len(),
            20_000
        );
        // The probe keeps every engine's names, and the prefixes it saw.
        let mut r = Recognizer::default();
        page.lines().for_each(|l| r.line(l));
        assert_eq!(r.engine("/metrics"), Some(Engine::Vllm));
        assert_eq!(r.page().series.values().map(Vec::len).sum::<usize>(), 7);
        assert_eq!(a.present_in(r.page()), a.present(&page));
    }

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

    fn done(endpoint: usize, first: f64, gaps: Vec<f64>, end: f64) -> Finished {
        let n = gaps.len() as u64 + 1;
        Finished {
            gaps_ms: gaps.into_iter().map(|g| g as f32).collect(),
            estimated_split: false,
            answer: None,
            requested_output_tokens: None,
            record: RequestRecord {
                concurrency: 1,
                trial: 1,
                index: 0,
                warmup: false,
                endpoint,
                sent_s: first - 0.1,
                send_delay_ms: None,
                new_connection: false,
                idle_before_ms: None,
                first_byte_s: None,
                first_chunk_s: None,
                first_token_s: Some(first),
                end_s: end,
                ttft_ms: None,
                e2e_ms: 0.0,
                tpot_ms: None,
                output_tokens: n,
                input_tokens: None,
                cached_tokens: None,
                token_source: TokenSource::Usage,
                chunks: n as u32,
                finish_reason: None,
                http_status: Some(200),
                error: None::<ErrorClass>,
                error_message: None,
                rate: None,
                scheduled_s: None,
                window: None,
                arm: None,
            },
        }
    }

    fn sample(t: f64, tokens: f64, waiting: f64) -> Sample {
        Sample {
            t,
            running: Some(1.0),
            waiting: Some(waiting),
            cache_usage: None,
            cache_usage_ranks: None,
            generated_tokens_total: Some(tokens),
            preemptions_total: None,
        }
    }

    #[test]
    fn cross_check_counts_tokens_inside_the_window() {
        // Tokens at 0.5, 1.5, 2.5, 3.5 s; scrapes at 1 and 3 s see the counter move by 2.
        let f = [done(0, 0.5, vec![1000.0; 3], 3.5)];
        let series = vec![EndpointSeries {
            endpoint: 0,
            samples: vec![sample(1.0, 1.0, 0.0), sample(3.0, 3.0, 2.0)],
            failed_scrapes: 0,
            cut_scrapes: 0,
        }];
        let t = summarize(&adapter(Engine::Sim).unwrap(), series.clone(), &f);
        assert_eq!(t.server_tokens, Some(2.0));
        assert_eq!(t.client_tokens, Some(2.0));
        assert_eq!(t.disagreement, Some(0.0));
        assert_eq!(t.saturation, vec!["queue non-empty (up to 2 waiting)"]);
        // Counted at completion: the request ended after the window, so nothing inside it.
        let t = summarize(&adapter(Engine::LlamaCpp).unwrap(), series, &f);
        assert_eq!(t.client_tokens, Some(0.0));
        let mut trial = crate::record::fake::trial(1, 10.0);
        attach(&mut trial, Some(t));
        assert!(
            trial.flags[0].message.contains("one of them is wrong"),
            "{:?}",
            trial.flags
        );
    }

    #[test]
    fn one_scrape_gives_no_cross_check() {
        let series = vec![EndpointSeries {
            endpoint: 0,
            samples: vec![sample(1.0, 1.0, 0.0)],
            failed_scrapes: 3,
            cut_scrapes: 0,
        }];
        let t = summarize(&adapter(Engine::Vllm).unwrap(), series, &[]);
        assert_eq!(t.disagreement, None);
        assert!(t.saturation.is_empty());
    }
}
