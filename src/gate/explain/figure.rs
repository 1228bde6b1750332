//! The figures compared: what each is called, how it is compared (ratio or difference),
//! the smallest change worth a line, and how a trial's value is read.

use serde::{Deserialize, Serialize};

use crate::record::TrialResult;
use crate::stats::basic::mean;

/// A figure recorded for each trial of both arms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Figure {
    TtftP50,
    TtftP99,
    ItlP50,
    ItlP99,
    E2eP50,
    /// Each request's (E2E - TTFT) / (output tokens - 1), averaged over the trial's requests:
    /// the decode time per token, steady where ITL p50 is not (a chunk split over reads, or
    /// tokens coalesced, moves the median gap; a mean over every token does not move).
    TpotMean,
    /// Output tokens per content chunk: above 1 with speculative decoding (MTP).
    TokensPerChunk,
    OutputTokensPerRequest,
    /// Prompt tokens the server reported serving (usage.prompt_tokens).
    PromptTokensPerRequest,
    ErrorRate,
    PrefixCacheShare,
    /// Requests running at once, per replica (the server's gauge, mean over the trial).
    BatchSize,
    /// Requests waiting for a slot, per replica.
    Waiting,
    /// KV cache usage 0..1 (the server's gauge, mean over the trial).
    KvCacheUsage,
    /// Preemptions (evictions) per request during the trial.
    PreemptionsPerRequest,
}

/// How a figure is compared: as a ratio (on logs) or as a difference (values near zero).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Scale {
    Ratio,
    Difference,
}

impl Figure {
    pub const ALL: [Figure; 15] = [
        Figure::TtftP50,
        Figure::TtftP99,
        Figure::ItlP50,
        Figure::ItlP99,
        Figure::E2eP50,
        Figure::TpotMean,
        Figure::TokensPerChunk,
        Figure::OutputTokensPerRequest,
        Figure::PromptTokensPerRequest,
        Figure::ErrorRate,
        Figure::PrefixCacheShare,
        Figure::BatchSize,
        Figure::Waiting,
        Figure::KvCacheUsage,
        Figure::PreemptionsPerRequest,
    ];

    /// What people read.
    pub fn name(self) -> &'static str {
        match self {
            Figure::TtftP50 => "TTFT p50",
            Figure::TtftP99 => "TTFT p99",
            Figure::ItlP50 => "ITL p50",
            Figure::ItlP99 => "ITL p99",
            Figure::E2eP50 => "E2E p50",
            Figure::TpotMean => "TPOT mean",
            Figure::TokensPerChunk => "tokens per chunk",
            Figure::OutputTokensPerRequest => "output tokens per request",
            Figure::PromptTokensPerRequest => "prompt tokens per request",
            Figure::ErrorRate => "error rate",
            Figure::PrefixCacheShare => "prefix-cache share",
            Figure::BatchSize => "batch size",
            Figure::Waiting => "requests waiting",
            Figure::KvCacheUsage => "KV cache",
            Figure::PreemptionsPerRequest => "preemptions per request",
        }
    }

    pub(super) fn scale(self) -> Scale {
        match self {
            Figure::ErrorRate
            | Figure::PrefixCacheShare
            | Figure::KvCacheUsage
            | Figure::PreemptionsPerRequest
            | Figure::Waiting => Scale::Difference,
            _ => Scale::Ratio,
        }
    }

    /// The smallest change worth a line: 5% for ratios; for differences, in the figure's
    /// own unit.
    pub(super) fn floor(self) -> f64 {
        match self {
            Figure::ErrorRate => 0.01,
            Figure::PrefixCacheShare | Figure::KvCacheUsage => 0.05,
            Figure::PreemptionsPerRequest => 0.01,
            Figure::Waiting => 0.5,
            _ => 0.05,
        }
    }

    /// The trial's value, where it was recorded.
    pub(super) fn of(self, t: &TrialResult) -> Option<f64> {
        let per_request = |x: u64| (t.succeeded > 0).then(|| x as f64 / t.succeeded as f64);
        let v = match self {
            Figure::TtftP50 => t.ttft_ms.as_ref().map(|p| p.p50),
            Figure::TtftP99 => t.ttft_ms.as_ref().map(|p| p.p99),
            Figure::ItlP50 => t.itl_ms.as_ref().map(|p| p.p50),
            Figure::ItlP99 => t.itl_ms.as_ref().map(|p| p.p99),
            Figure::E2eP50 => t.e2e_ms.as_ref().map(|p| p.p50),
            Figure::TpotMean => t.tpot_ms.as_ref().map(|p| p.mean),
            Figure::TokensPerChunk => (t.client.as_ref())
                .and_then(|c| c.chunks)
                .filter(|&c| c > 0)
                .map(|c| t.output_tokens as f64 / c as f64),
            Figure::OutputTokensPerRequest => per_request(t.output_tokens),
            Figure::PromptTokensPerRequest => per_request(t.input_tokens).filter(|&v| v > 0.0),
            Figure::ErrorRate => Some(t.error_rate),
            Figure::PrefixCacheShare => t.prefix_cache.as_ref().map(|p| p.share),
            Figure::BatchSize => gauge_mean(t, |s| s.running),
            Figure::Waiting => gauge_mean(t, |s| s.waiting),
            Figure::KvCacheUsage => gauge_mean(t, |s| s.cache_usage),
            Figure::PreemptionsPerRequest => preemptions(t)
                .filter(|_| t.succeeded > 0)
                .map(|p| p / t.succeeded as f64),
        };
        v.filter(|v| v.is_finite() && (self.scale() == Scale::Difference || *v > 0.0))
    }

    /// Formats a value of the figure.
    pub fn show(self, v: f64) -> String {
        match self {
            Figure::TtftP50
            | Figure::TtftP99
            | Figure::ItlP50
            | Figure::ItlP99
            | Figure::E2eP50 => format!("{v:.1} ms"),
            Figure::TpotMean => format!("{v:.2} ms"),
            Figure::ErrorRate | Figure::PrefixCacheShare | Figure::KvCacheUsage => {
                format!("{:.0}%", v * 100.0)
            }
            Figure::PreemptionsPerRequest => format!("{v:.3}"),
            _ => format!("{v:.1}"),
        }
    }
}

/// The mean of a gauge under load, per replica (endpoints averaged): the samples taken
/// while the trial ran, without the first (scraped as it starts) and the last (as it ends),
/// which read an idle server and would pull both arms towards zero. Each sample stands for
/// the time around it (half the gap to each neighbour): the scrapes come quicker at a
/// trial's start (load/telemetry `FIRST_GAPS`), and the start must not weigh more.
fn gauge_mean(
    t: &TrialResult,
    pick: impl Fn(&crate::record::telemetry::Sample) -> Option<f64>,
) -> Option<f64> {
    let tel = t.telemetry.as_ref()?;
    let mut weighed: Vec<(f64, f64)> = Vec::new();
    for e in &tel.endpoints {
        for w in e.samples.windows(3) {
            let value = pick(&w[1]).filter(|v| v.is_finite());
            if let Some(v) = value {
                weighed.push((v, ((w[2].t - w[0].t) / 2.0).max(0.0)));
            }
        }
    }
    let time: f64 = weighed.iter().map(|(_, w)| w).sum();
    if !(time > 0.0 && time.is_finite()) {
        let values: Vec<f64> = weighed.iter().map(|(v, _)| *v).collect();
        return (!values.is_empty()).then(|| mean(&values));
    }
    Some(weighed.iter().map(|(v, w)| v * w).sum::<f64>() / time)
}

/// Preemptions counted during the trial: each endpoint's counter, last minus first sample.
fn preemptions(t: &TrialResult) -> Option<f64> {
    let tel = t.telemetry.as_ref()?;
    let mut total = None;
    for e in &tel.endpoints {
        let counts: Vec<f64> = (e.samples.iter())
            .filter_map(|s| s.preemptions_total)
            .collect();
        if let (Some(first), Some(last)) = (counts.first(), counts.last()) {
            *total.get_or_insert(0.0) += (last - first).max(0.0);
        }
    }
    total
}
