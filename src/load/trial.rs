//! One trial's figures, in one place: output tok/s, requests/s and error rate over the
//! trial's window (first dispatch to last completion), TTFT, ITL per token, TPOT and E2E
//! percentiles, per-request speed, and the accounting of every request (succeeded, or
//! failed in a class). Throughput counts successful requests only.

use super::outcome::Finished;
use crate::record::flags::{FlagKind, TrialFlag};
use crate::record::{TokenSource, TrialResult};
use crate::stats::Percentiles;

/// Summarises one trial's requests.
pub fn summarize_trial(trial: u32, finished: Vec<Finished>) -> TrialResult {
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

    let (mut ttft, mut tpot, mut e2e, mut speeds) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    // Every token's gap of the trial, allocated once: at thousands of long streams this is the
    // largest allocation of the run.
    let mut itl: Vec<f32> = Vec::with_capacity(finished.iter().map(|f| f.gaps_ms.len()).sum());
    let mut estimated_splits = 0u64;
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
                result.output_tokens = result.output_tokens.saturating_add(r.output_tokens);
                *result.token_sources.entry(r.token_source).or_insert(0) += 1;
                estimated_splits += u64::from(f.estimated_split);
                ttft.extend(r.ttft_ms);
                tpot.extend(r.tpot_ms);
                e2e.push(r.e2e_ms);
                if r.e2e_ms > 0.0 {
                    speeds.push(r.output_tokens as f64 / (r.e2e_ms / 1000.0));
                }
                itl.extend(f.gaps_ms);
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
    result.ttft_ms = Percentiles::from_values(&mut ttft);
    result.itl_ms = Percentiles::from_values(&mut itl);
    result.tpot_ms = Percentiles::from_values(&mut tpot);
    result.e2e_ms = Percentiles::from_values(&mut e2e);
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
