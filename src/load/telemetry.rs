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

/// One series of a metric: its labels and value.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub labels: Vec<(String, String)>,
    pub value: f64,
}

/// A Prometheus text page, parsed: every finite series of every sample name. Histograms
/// and summaries keep their `_bucket`/`_sum`/`_count` names. Parsed by
/// `prom_text_format_parser` (label values may hold `}`, `,` or escaped quotes); a page with
/// a malformed line keeps its other lines (they are parsed one by one).
#[derive(Debug, Clone, Default)]
pub struct Page {
    series: BTreeMap<String, Vec<Series>>,
}

impl Page {
    pub fn parse(text: &str) -> Page {
        let mut page = Page::default();
        let (metrics, error) = prom_text_format_parser::parse_scrape(text);
        if error.is_none() || !metrics.is_empty() {
            page.add(metrics);
        } else {
            for line in text.lines().map(str::trim) {
                if !line.is_empty() && !line.starts_with('#') {
                    page.add(prom_text_format_parser::parse_scrape(line).0);
                }
            }
        }
        page
    }

    fn add(&mut self, metrics: Vec<prom_text_format_parser::Metric>) {
        use prom_text_format_parser::{Type, ValueType};
        for m in metrics {
            for s in m.samples {
                let Ok(value) = s.value.value.parse::<f64>() else {
                    continue;
                };
                if !value.is_finite() {
                    continue;
                }
                let labels: Vec<(String, String)> = (s.labels.iter())
                    .map(|l| (l.key.clone(), l.value.clone()))
                    .collect();
                let name = match s.value.value_type {
                    ValueType::Sum => format!("{}_sum", m.name),
                    ValueType::Count => format!("{}_count", m.name),
                    ValueType::Sample
                        if m.kind == Type::Histogram && labels.iter().any(|(k, _)| k == "le") =>
                    {
                        format!("{}_bucket", m.name)
                    }
                    ValueType::Sample => m.name.clone(),
                };
                self.series
                    .entry(name)
                    .or_default()
                    .push(Series { labels, value });
            }
        }
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

    /// Whether any sample has a name starting with `prefix`.
    pub fn has_prefix(&self, prefix: &str) -> bool {
        self.series.keys().any(|k| k.starts_with(prefix))
    }

    pub fn contains(&self, selector: &str) -> bool {
        !self.select(selector).is_empty()
    }
}

impl Adapter {
    /// The sample a metrics page gives, each figure combined by its meaning.
    pub fn sample(&self, t: f64, text: &str) -> Sample {
        let page = Page::parse(text);
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
        let page = Page::parse(text);
        let names = self.names;
        [
            names.running,
            names.waiting,
            names.cache_usage,
            names.preemptions,
            names.generated_tokens,
        ]
        .iter()
        .flat_map(|names| names.iter())
        .filter(|n| page.contains(n))
        .copied()
        .collect()
    }
}

/// One endpoint's scraper: the stop signal and the task that returns its samples and the
/// number of failed scrapes.
type Scraper = (oneshot::Sender<()>, JoinHandle<(Vec<Sample>, u32)>);

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
            let (samples, failed_scrapes) = task.await.unwrap_or_default();
            endpoints.push(EndpointSeries {
                endpoint: i,
                samples,
                failed_scrapes,
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
    first: Option<Sample>,
    mut stop: oneshot::Receiver<()>,
) -> (Vec<Sample>, u32) {
    let mut failed = u32::from(first.is_none());
    let mut samples: Vec<Sample> = first.into_iter().collect();
    let start = tokio::time::Instant::now() + INTERVAL;
    let mut tick = tokio::time::interval_at(start, INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let last = tokio::select! {
            _ = tick.tick() => false,
            _ = &mut stop => true,
        };
        match scrape(&client, &url, &adapter, clock).await {
            Some(s) => samples.push(s),
            None => failed += 1,
        }
        if last {
            return (samples, failed);
        }
    }
}

async fn scrape(
    client: &reqwest::Client,
    url: &str,
    adapter: &Adapter,
    clock: Instant,
) -> Option<Sample> {
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
    let body =
        super::stream::client::read_capped(response, super::stream::client::MAX_METRICS_BODY)
            .await
            .ok()?;
    let text = String::from_utf8(body).ok()?;
    let after = clock.elapsed().as_secs_f64();
    Some(adapter.sample((before + after) / 2.0, &text))
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
        }];
        let t = summarize(&adapter(Engine::Vllm).unwrap(), series, &[]);
        assert_eq!(t.disagreement, None);
        assert!(t.saturation.is_empty());
    }
}
