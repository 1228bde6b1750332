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
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}
