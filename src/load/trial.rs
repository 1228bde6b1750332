//! One trial's figures, in one place: output tok/s, requests/s and error rate over the
//! trial's window (first dispatch to last completion), TTFT, ITL per token, TPOT and E2E
//! percentiles, per-request speed, and the accounting of every request (succeeded, or
//! failed in a class). Throughput counts successful requests only.

use super::outcome::Finished;
use crate::record::flags::{FlagKind, TrialFlag};
use crate::record::{PrefixCacheUse, TokenSource, TrialResult, Window};
use crate::stats::LatencySketch;

/// The token gaps of the trial running now, folded in as each request finishes so a trial's
/// memory does not grow with its tokens (a 20-second trial at 1.3M tokens/s once held 270 MB
/// of gaps). The per-request gaps are dropped once folded, unless `keep_gaps` (the server's
/// token counter is cross-checked per token, telemetry.rs), and then only up to
/// [`KEPT_GAPS_LIMIT`] a trial: past it, a request's tokens are placed at its end, which
/// counts the same wherever the counter's samples span the whole trial.
#[derive(Debug, Default)]
pub struct GapSink {
    itl: LatencySketch<f32>,
    keep_gaps: bool,
    kept: usize,
}

/// The most per-token gaps a trial keeps on its requests for the telemetry cross-check
/// (4 MiB).
pub const KEPT_GAPS_LIMIT: usize = 1 << 20;

impl GapSink {
    /// Starts a trial's sink.
    pub fn new(keep_gaps: bool) -> Self {
        GapSink {
            itl: LatencySketch::new(),
            keep_gaps,
            kept: 0,
        }
    }

    /// Folds a finished request's gaps in when they count (a successful request of the
    /// trial's measured window; warmups are not counted), and frees them unless kept.
    pub fn fold(&mut self, f: &mut Finished) {
        let r = &f.record;
        let counted =
            !r.warmup && r.error.is_none() && matches!(r.window, None | Some(Window::Measure));
        if counted {
            self.itl.extend(f.gaps_ms.iter().copied());
        }
        let room = self.kept + f.gaps_ms.len() <= KEPT_GAPS_LIMIT;
        if self.keep_gaps && !r.warmup && room {
            self.kept += f.gaps_ms.len();
        } else {
            f.gaps_ms = Vec::new();
        }
    }

    /// The trial's per-token gaps, folded.
    pub fn into_itl(self) -> LatencySketch<f32> {
        self.itl
    }
}

/// Summarises one trial's requests, their token gaps taken from the requests.
pub fn summarize_trial(trial: u32, mut finished: Vec<Finished>) -> TrialResult {
    let mut sink = GapSink::new(false);
    for f in &mut finished {
        sink.fold(f);
    }
    summarize_trial_folded(trial, finished, sink.into_itl())
}

/// Summarises one trial's requests, their token gaps already folded into `itl` (by a
/// [`GapSink`] as they finished; any gaps still on the requests are not counted again).
pub fn summarize_trial_folded(
    trial: u32,
    finished: Vec<Finished>,
    itl: LatencySketch<f32>,
) -> TrialResult {
    let mut result = TrialResult {
        trial,
        requests_sent: finished.len() as u64,
        succeeded: 0,
        failed: Default::default(),
        error_examples: Default::default(),
        output_tokens: 0,
        failed_output_tokens: 0,
        input_tokens: 0,
        window_s: 0.0,
        output_tok_per_s: 0.0,
        requests_per_s: 0.0,
        error_rate: 0.0,
        per_request_tok_per_s: None,
        ttft_ms: None,
        itl_ms: None,
        tpot_ms: None,
        e2e_ms: None,
        token_sources: Default::default(),
        flags: Vec::new(),
        length_misses: 0,
        telemetry: None,
        client: None,
        open_loop: None,
        excluded_requests: 0,
        round: None,
        block: None,
        slot: None,
        input_check: None,
        prefix_cache: None,
    };
    if finished.is_empty() {
        return result;
    }
    let first_dispatch = finished
        .iter()
        .map(|f| f.record.sent_s)
        .fold(f64::INFINITY, f64::min);
    let last_completion = finished
        .iter()
        .map(|f| f.record.end_s)
        .fold(f64::NEG_INFINITY, f64::max);
    result.window_s = (last_completion - first_dispatch).max(0.0);

    let (mut ttft, mut tpot, mut e2e) = (
        LatencySketch::<f64>::new(),
        LatencySketch::<f64>::new(),
        LatencySketch::<f64>::new(),
    );
    let mut speeds = Vec::new();
    let mut estimated_splits = 0u64;
    let mut cache: Option<PrefixCacheUse> = None;
    for f in finished {
        let r = f.record;
        result.input_tokens = result
            .input_tokens
            .saturating_add(r.input_tokens.unwrap_or(0));
        match r.error {
            Some(class) => {
                *result.failed.entry(class).or_insert(0) += 1;
                if let Some(msg) = r.error_message {
                    result.error_examples.entry(class).or_insert(msg);
                }
                result.failed_output_tokens =
                    result.failed_output_tokens.saturating_add(r.output_tokens);
            }
            None => {
                result.succeeded += 1;
                if let (Some(prompt), Some(cached)) = (r.input_tokens, r.cached_tokens) {
                    let c = cache.get_or_insert(PrefixCacheUse {
                        requests: 0,
                        prompt_tokens: 0,
                        cached_tokens: 0,
                        share: 0.0,
                    });
                    c.requests += 1;
                    c.prompt_tokens = c.prompt_tokens.saturating_add(prompt);
                    c.cached_tokens = c.cached_tokens.saturating_add(cached);
                }
                result.output_tokens = result.output_tokens.saturating_add(r.output_tokens);
                *result.token_sources.entry(r.token_source).or_insert(0) += 1;
                estimated_splits += u64::from(f.estimated_split);
                ttft.extend(r.ttft_ms);
                tpot.extend(r.tpot_ms);
                e2e.record(r.e2e_ms);
                if r.e2e_ms > 0.0 {
                    speeds.push(r.output_tokens as f64 / (r.e2e_ms / 1000.0));
                }
            }
        }
    }
    if result.window_s > 0.0 {
        result.output_tok_per_s = result.output_tokens as f64 / result.window_s;
        result.requests_per_s = result.succeeded as f64 / result.window_s;
    }
    result.error_rate = result.failed_total() as f64 / result.requests_sent as f64;
    if !speeds.is_empty() {
        result.per_request_tok_per_s = Some(speeds.iter().sum::<f64>() / speeds.len() as f64);
    }
    result.prefix_cache = cache.map(|c| PrefixCacheUse {
        share: if c.prompt_tokens > 0 {
            c.cached_tokens as f64 / c.prompt_tokens as f64
        } else {
            0.0
        },
        ..c
    });
    result.ttft_ms = ttft.percentiles();
    result.itl_ms = itl.percentiles();
    result.tpot_ms = tpot.percentiles();
    result.e2e_ms = e2e.percentiles();
    if estimated_splits > 0 {
        result.flags.push(TrialFlag::new(FlagKind::TokensEstimated, format!(
            "{estimated_splits} requests: tokens per chunk estimated from text length (the server sent no per-chunk usage); ITL is approximate"
        )));
    }
    if let Some(n) = result.token_sources.get(&TokenSource::ChunkCount) {
        result.flags.push(TrialFlag::new(
            FlagKind::TokensCountedByChunk,
            format!(
                "{n} requests: the server reported no usage; output tokens counted one per chunk"
            ),
        ));
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::outcome::a_finished_request;
    use crate::record::ErrorClass;

    fn with_gaps(gaps: usize, window: Option<Window>, warmup: bool) -> Finished {
        let mut f = a_finished_request(1.0, 100.0);
        f.gaps_ms = vec![2.0; gaps];
        f.record.window = window;
        f.record.warmup = warmup;
        f
    }

    /// Only the measured window's successful requests count; gaps are freed once folded,
    /// and kept for telemetry only up to the limit.
    #[test]
    fn the_sink_counts_measured_successes_and_frees_what_it_folded() {
        let mut sink = GapSink::new(false);
        let mut counted = with_gaps(9, Some(Window::Measure), false);
        let mut warm = with_gaps(9, Some(Window::Warmup), false);
        let mut warmup = with_gaps(9, None, true);
        let mut failed = with_gaps(9, None, false);
        failed.record.error = Some(ErrorClass::Reset);
        for f in [&mut counted, &mut warm, &mut warmup, &mut failed] {
            sink.fold(f);
            assert!(f.gaps_ms.is_empty());
        }
        assert_eq!(sink.into_itl().count(), 9);

        let mut sink = GapSink::new(true);
        let mut kept = with_gaps(KEPT_GAPS_LIMIT - 5, None, false);
        let mut over = with_gaps(10, None, false);
        sink.fold(&mut kept);
        sink.fold(&mut over);
        assert_eq!(kept.gaps_ms.len(), KEPT_GAPS_LIMIT - 5);
        assert!(over.gaps_ms.is_empty());
        assert_eq!(sink.into_itl().count(), KEPT_GAPS_LIMIT as u64 + 5);
    }

    /// The share of prompt tokens served from the cache, over the successful requests that
    /// reported it; absent when none did.
    #[test]
    fn the_cache_share_counts_successes_that_reported_it() {
        let req = |input: u64, cached: Option<u64>, failed: bool| {
            let mut f = a_finished_request(1.0, 100.0);
            f.record.input_tokens = Some(input);
            f.record.cached_tokens = cached;
            if failed {
                f.record.error = Some(ErrorClass::Reset);
            }
            f
        };
        let t = summarize_trial(
            1,
            vec![
                req(240, Some(0), false),
                req(240, Some(200), false),
                req(240, Some(200), true),
                req(100, None, false),
            ],
        );
        let c = t.prefix_cache.unwrap();
        assert_eq!(
            (c.requests, c.prompt_tokens, c.cached_tokens),
            (2, 480, 200)
        );
        assert!((c.share - 200.0 / 480.0).abs() < 1e-12);
        let none = summarize_trial(1, vec![req(100, None, false)]);
        assert_eq!(none.prefix_cache, None);
    }

    /// Folded and unfolded summaries agree, exactly, for a small trial.
    #[test]
    fn folding_as_requests_finish_changes_no_figure() {
        let requests = || -> Vec<Finished> {
            (0..5)
                .map(|i| {
                    let mut f = a_finished_request(1.0 + i as f64, 90.0 + i as f64);
                    f.gaps_ms = (0..9).map(|g| (g * 7 + i) as f32 / 3.0).collect();
                    f
                })
                .collect()
        };
        let whole = summarize_trial(1, requests());
        let mut sink = GapSink::new(false);
        let mut folded: Vec<Finished> = requests();
        for f in folded.iter_mut().rev() {
            sink.fold(f);
        }
        let t = summarize_trial_folded(1, folded, sink.into_itl());
        assert_eq!(t.itl_ms, whole.itl_ms);
        assert_eq!(t.itl_ms.as_ref().unwrap().count, 45);
        assert_eq!((t.ttft_ms, t.e2e_ms), (whole.ttft_ms, whole.e2e_ms));
    }
}
