//! An engine's telemetry names and how to read a page with them; what the probe reads of a
//! page to tell the engine.

use super::page::{line_name, sample_rest, selector_name, Page};
use crate::engine::{self, Engine};
use crate::record::telemetry::{Counting, Sample};

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

/// The run's one warning for gauge values dropped as impossible, if any were.
pub fn impossible_values_warning(levels: &[crate::record::LevelResult]) -> Option<String> {
    let dropped: u64 = (levels.iter())
        .flat_map(|l| &l.trials)
        .filter_map(|t| t.telemetry.as_ref())
        .flat_map(|t| &t.endpoints)
        .map(|e| u64::from(e.invalid_values))
        .sum();
    (dropped > 0).then(|| {
        format!(
            "server telemetry: {dropped} value(s) on the /metrics pages could not be true (a \
             count below zero, a KV cache usage outside 0-100%, not a number); they were \
             dropped, and those figures read as not reported"
        )
    })
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

    /// The sample of a page parsed already, without the values no server could have had.
    pub fn sample_of(&self, t: f64, page: &Page) -> Sample {
        self.checked_sample_of(t, page).0
    }

    /// [`Adapter::sample_of`], and how many of the page's values it dropped as impossible
    /// ([`Sample::drop_impossible`]): checked here, where the server's text becomes figures.
    pub fn checked_sample_of(&self, t: f64, page: &Page) -> (Sample, u32) {
        let mut sample = self.raw_sample_of(t, page);
        let dropped = sample.drop_impossible();
        (sample, dropped)
    }

    /// The figures as the page gives them.
    fn raw_sample_of(&self, t: f64, page: &Page) -> Sample {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::telemetry::summarize;
    use crate::load::telemetry::EndpointSeries;

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
            invalid_values: 0,
            dropped_samples: 0,
        }];
        let count = crate::load::telemetry::ClientCount::new(Counting::PerToken, 1);
        let t = summarize(&adapter(Engine::Vllm).unwrap(), series, &count);
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

    /// A page's impossible values are dropped where the page becomes a sample, and counted.
    #[test]
    fn impossible_values_are_dropped_where_the_page_is_read() {
        let page = "vllm:num_requests_running{engine=\"0\"} -7\n\
                    vllm:num_requests_waiting{engine=\"0\"} 2\n\
                    vllm:kv_cache_usage_perc{engine=\"0\"} -2\n";
        let a = adapter(Engine::Vllm).unwrap();
        let wanted = a.wanted();
        let (s, dropped) =
            a.checked_sample_of(0.0, &Page::parse_only(page, |n| wanted.contains(&n)));
        assert_eq!(dropped, 2);
        assert_eq!(
            (s.running, s.waiting, s.cache_usage),
            (None, Some(2.0), None)
        );
        assert_eq!(a.sample(0.0, page).cache_usage, None);
    }
}
