//! The server telemetry kept with a trial: `/metrics` samples per endpoint and the
//! client/server token cross-check (scraped by `load::telemetry`).

use serde::{Deserialize, Serialize};

/// When an engine's generated-token counter moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Counting {
    /// As each token is produced (vLLM, SGLang, the simulator).
    PerToken,
    /// When the request finishes, all its tokens at once (llama.cpp, TGI).
    AtCompletion,
}

/// One scrape of one endpoint. Absent metrics are `None`, never zero.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// Seconds since the run started (the middle of the GET).
    pub t: f64,
    /// Requests running and waiting, summed over the engine's ranks (they add up).
    pub running: Option<f64>,
    pub waiting: Option<f64>,
    /// KV cache usage 0..1: the fullest rank's, never a sum (two ranks at 50% are not full).
    pub cache_usage: Option<f64>,
    /// How many ranks (series) `cache_usage` is the maximum of, when more than one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_usage_ranks: Option<u32>,
    pub generated_tokens_total: Option<f64>,
    #[serde(default)]
    pub preemptions_total: Option<f64>,
}

/// The telemetry of one trial, kept in the results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrialTelemetry {
    pub engine: String,
    pub counting: Counting,
    /// One series per endpoint, in the profile's order.
    pub endpoints: Vec<EndpointSeries>,
    /// Tokens the server's counters moved by, first to last scrape of each endpoint.
    pub server_tokens: Option<f64>,
    /// Tokens the client received over the same windows, counted the way the server counts.
    pub client_tokens: Option<f64>,
    /// Mean length of the endpoints' windows, seconds.
    pub window_s: Option<f64>,
    /// client_tokens / server_tokens - 1.
    pub disagreement: Option<f64>,
    /// Why the server looked saturated (empty: it did not, as far as its metrics say).
    pub saturation: Vec<String>,
}

/// The samples of one endpoint during one trial.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EndpointSeries {
    pub endpoint: usize,
    pub samples: Vec<Sample>,
    /// Scrapes that failed (unreachable, non-2xx); their samples are missing.
    #[serde(default)]
    pub failed_scrapes: u32,
    /// Scrapes of a page longer than the most read (load/telemetry.rs `MAX_PAGE_BYTES`):
    /// their samples hold only the series in the part read.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cut_scrapes: u32,
    /// Gauge and counter values dropped from the samples because no server could have had
    /// them ([`Sample::drop_impossible`]): a server's text, not a measurement.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub invalid_values: u32,
    /// Samples dropped to keep the series within `load::telemetry::MAX_SAMPLES` (a trial of
    /// hours): every other one, bar the ends and those holding a counter's first or last
    /// value or a gauge's highest, and the scrapes came half as often after each thinning.
    /// The cross-check and the highest gauges are unchanged by it; a gauge's mean over time
    /// is read from fewer samples.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub dropped_samples: u64,
}

impl Sample {
    /// Drops the values no server could have had, and returns how many it dropped: a count
    /// of requests or tokens below zero, a KV cache usage outside 0..1 (every engine's gauge
    /// is a fraction: vLLM's `_perc` too), anything not finite. The page is the server's
    /// text: kept, `-2` became "KV cache -200%" in a verdict's explanation and `5` "KV cache
    /// near full (500%)" in a run's summary. Dropped, the figure reads as not reported
    /// (`None`), as an absent metric does; the count says that it was there.
    pub fn drop_impossible(&mut self) -> u32 {
        let mut dropped = 0;
        let mut check = |v: &mut Option<f64>, possible: fn(f64) -> bool| {
            if v.is_some_and(|x| !(x.is_finite() && possible(x))) {
                *v = None;
                dropped += 1;
            }
        };
        let counted = |x: f64| x >= 0.0;
        check(&mut self.running, counted);
        check(&mut self.waiting, counted);
        check(&mut self.generated_tokens_total, counted);
        check(&mut self.preemptions_total, counted);
        check(&mut self.cache_usage, |x| (0.0..=1.0).contains(&x));
        if self.cache_usage.is_none() {
            self.cache_usage_ranks = None;
        }
        dropped
    }
}

impl EndpointSeries {
    /// Drops the impossible values of every sample (a results file read back may have been
    /// written by hand or by an older version), counting them in `invalid_values`.
    pub fn drop_impossible(&mut self) {
        let dropped: u32 = self.samples.iter_mut().map(Sample::drop_impossible).sum();
        self.invalid_values = self.invalid_values.saturating_add(dropped);
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

fn is_zero_u64(n: &u64) -> bool {
    *n == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(running: f64, waiting: f64, cache: f64, tokens: f64, preempted: f64) -> Sample {
        Sample {
            t: 1.0,
            running: Some(running),
            waiting: Some(waiting),
            cache_usage: Some(cache),
            cache_usage_ranks: Some(2),
            generated_tokens_total: Some(tokens),
            preemptions_total: Some(preempted),
        }
    }

    #[test]
    fn impossible_gauges_are_dropped_and_counted() {
        let mut s = sample(3.0, 0.0, 1.0, 0.0, 2.0);
        let kept = s;
        assert_eq!(s.drop_impossible(), 0);
        assert_eq!(s, kept, "possible values, the edges included, are kept");
        let mut s = sample(-1.0, f64::NAN, -2.0, f64::INFINITY, -0.5);
        assert_eq!(s.drop_impossible(), 5);
        assert_eq!(
            (s.running, s.waiting, s.cache_usage, s.cache_usage_ranks),
            (None, None, None, None)
        );
        assert_eq!(
            (s.generated_tokens_total, s.preemptions_total),
            (None, None)
        );
        // A fraction over 1 (a percent where a fraction is meant) is not a usage either.
        let mut s = sample(1.0, 1.0, 1.5, 1.0, 0.0);
        assert_eq!(s.drop_impossible(), 1);
        assert_eq!((s.cache_usage, s.running), (None, Some(1.0)));
        let mut e = EndpointSeries {
            endpoint: 0,
            samples: vec![
                sample(-1.0, 0.0, 5.0, 1.0, 0.0),
                sample(1.0, 0.0, 0.5, 1.0, 0.0),
            ],
            failed_scrapes: 0,
            cut_scrapes: 0,
            invalid_values: 1,
            dropped_samples: 0,
        };
        e.drop_impossible();
        assert_eq!(e.invalid_values, 3);
        assert_eq!(e.samples[1].cache_usage, Some(0.5));
    }
}
