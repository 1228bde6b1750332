//! One trial's figures, in one place: output tok/s, requests/s and error rate over the
//! trial's window (first dispatch to last completion), TTFT, ITL per token, TPOT and E2E
//! percentiles, per-request speed, and the accounting of every request (succeeded, or
//! failed in a class). Throughput counts successful requests only.
//!
//! Requests are folded into a [`TrialTally`] as they finish (after `requests.jsonl` has
//! them) and then dropped: a trial keeps counts, sums and bounded latency sketches, so its
//! memory does not grow with its length (records held to the trial's end once cost ~500
//! bytes a request: over 4 GB for a 24-hour soak at 100 requests/s).

use std::collections::BTreeMap;
use std::sync::Arc;

use super::headroom::{self, SendTally};
use super::schedule_check::{self, ScheduleTally};
use crate::load::dialect;
use crate::load::stream::outcome::{ConnectFailures, Finished};
use crate::load::telemetry::{self, ClientCount};
use crate::load::wire::read_delay::ReadDelays;
use crate::load::workload::input_check::{self, InputTally};
use crate::record::telemetry::TrialTelemetry;
use crate::record::trial_flags::{FlagKind, TrialFlag};
use crate::record::{
    ClientHeadroom, ErrorClass, PrefixCacheUse, RequestRecord, TokenSource, TrialResult, Window,
};
use crate::stats::LatencySketch;

/// What the run knew of a request when it finished, beyond its record.
#[derive(Debug, Clone, Copy, Default)]
pub struct Asked {
    /// The prompt length it asked for (synthetic prompts only), for the input check.
    pub input_tokens: Option<u32>,
    /// A successful request that missed its fixed output length (`dialect::length_misses`).
    pub missed_length: bool,
}

/// The running trial's state, folded in as each request finishes: counts, sums and latency
/// sketches of a fixed size (exact while a figure has at most
/// [`crate::stats::sketch::EXACT_LIMIT`] values, an HDR histogram past that); the records,
/// their strings and their token gaps are dropped. Where the server's counters are
/// watched, each request's tokens are first placed between the scrapes
/// (`telemetry::ClientCount`), one count per scrape: nothing of the request is kept.
#[derive(Debug)]
pub struct TrialTally {
    /// Every request of the batch, warmup and cooldown windows included.
    requests: u64,
    /// Requests sent in a warmup or cooldown window (not counted below).
    excluded: u64,
    connect: ConnectFailures,
    // The counted requests (the measure window, or all of a trial without windows).
    measured: u64,
    succeeded: u64,
    failed: BTreeMap<ErrorClass, u64>,
    /// Per class, the message of its first request (lowest index) and that index.
    examples: BTreeMap<ErrorClass, (u32, String)>,
    output_tokens: u64,
    failed_output_tokens: u64,
    input_tokens: u64,
    first_dispatch: f64,
    last_completion: f64,
    token_sources: BTreeMap<TokenSource, u64>,
    estimated_splits: u64,
    cache: Option<PrefixCacheUse>,
    ttft: LatencySketch<f64>,
    tpot: LatencySketch<f64>,
    e2e: LatencySketch<f64>,
    itl: LatencySketch<f32>,
    speed_sum: f64,
    speeds: u64,
    length_misses: u64,
    inputs: InputTally,
    sends: SendTally,
    schedule: ScheduleTally,
    /// The telemetry cross-check's count of the client's tokens, where it is made.
    client_count: Option<Arc<ClientCount>>,
}

impl Default for TrialTally {
    fn default() -> Self {
        Self::new(None)
    }
}

impl TrialTally {
    /// Starts a trial's tally; `count` where the server's counters are watched.
    pub fn new(client_count: Option<Arc<ClientCount>>) -> Self {
        TrialTally {
            requests: 0,
            excluded: 0,
            connect: ConnectFailures::default(),
            measured: 0,
            succeeded: 0,
            failed: BTreeMap::new(),
            examples: BTreeMap::new(),
            output_tokens: 0,
            failed_output_tokens: 0,
            input_tokens: 0,
            first_dispatch: f64::INFINITY,
            last_completion: f64::NEG_INFINITY,
            token_sources: BTreeMap::new(),
            estimated_splits: 0,
            cache: None,
            ttft: LatencySketch::new(),
            tpot: LatencySketch::new(),
            e2e: LatencySketch::new(),
            itl: LatencySketch::new(),
            speed_sum: 0.0,
            speeds: 0,
            length_misses: 0,
            inputs: InputTally::default(),
            sends: SendTally::default(),
            schedule: ScheduleTally::default(),
            client_count,
        }
    }

    /// Folds a finished request in and drops it. The server counted every request of the
    /// trial, warmup and cooldown windows included: so does the cross-check.
    pub fn add(&mut self, f: Finished, asked: Asked) {
        self.requests += 1;
        self.connect.add(&f.record);
        let counted = matches!(f.record.window, None | Some(Window::Measure));
        if counted {
            self.count(&f, asked);
        } else {
            self.excluded += 1;
        }
        if let Some(c) = &self.client_count {
            c.add(&f);
        }
    }

    /// A counted request's share of the figures.
    fn count(&mut self, f: &Finished, asked: Asked) {
        let r = &f.record;
        self.measured += 1;
        self.first_dispatch = self.first_dispatch.min(r.sent_s);
        self.last_completion = self.last_completion.max(r.end_s);
        self.input_tokens = self
            .input_tokens
            .saturating_add(r.input_tokens.unwrap_or(0));
        self.inputs.add(r, asked.input_tokens);
        self.sends.add(r);
        self.schedule.add(r);
        self.length_misses += u64::from(asked.missed_length);
        match r.error {
            Some(class) => self.count_failure(class, r),
            None => {
                self.succeeded += 1;
                if let (Some(prompt), Some(cached)) = (r.input_tokens, r.cached_tokens) {
                    let c = self.cache.get_or_insert(PrefixCacheUse {
                        requests: 0,
                        prompt_tokens: 0,
                        cached_tokens: 0,
                        share: 0.0,
                    });
                    c.requests += 1;
                    c.prompt_tokens = c.prompt_tokens.saturating_add(prompt);
                    c.cached_tokens = c.cached_tokens.saturating_add(cached);
                }
                self.output_tokens = self.output_tokens.saturating_add(r.output_tokens);
                *self.token_sources.entry(r.token_source).or_insert(0) += 1;
                self.estimated_splits += u64::from(f.estimated_split);
                self.ttft.extend(r.ttft_ms);
                self.tpot.extend(r.tpot_ms);
                self.e2e.record(r.e2e_ms);
                if r.e2e_ms > 0.0 {
                    self.speed_sum += r.output_tokens as f64 / (r.e2e_ms / 1000.0);
                    self.speeds += 1;
                }
                if !r.warmup {
                    self.itl.extend(f.gaps_ms.iter().copied());
                }
            }
        }
    }

    fn count_failure(&mut self, class: ErrorClass, r: &RequestRecord) {
        *self.failed.entry(class).or_insert(0) += 1;
        self.failed_output_tokens = self.failed_output_tokens.saturating_add(r.output_tokens);
        if let Some(msg) = &r.error_message {
            let earlier = self.examples.get(&class).is_some_and(|(i, _)| *i < r.index);
            if !earlier {
                self.examples.insert(class, (r.index, msg.clone()));
            }
        }
    }

    /// Every request of the batch, windows included.
    pub fn requests(&self) -> u64 {
        self.requests
    }

    /// Why the server looks gone, when every request of the batch failed to connect.
    pub fn unreachable(&self) -> Option<String> {
        self.connect.verdict()
    }

    /// The trial's figures from its requests alone (no telemetry, client or schedule).
    pub fn summary(&mut self, trial: u32) -> TrialResult {
        let mut result = TrialResult {
            requests_sent: self.measured,
            succeeded: self.succeeded,
            failed: std::mem::take(&mut self.failed),
            error_examples: (std::mem::take(&mut self.examples).into_iter())
                .map(|(class, (_, msg))| (class, msg))
                .collect(),
            output_tokens: self.output_tokens,
            failed_output_tokens: self.failed_output_tokens,
            input_tokens: self.input_tokens,
            token_sources: std::mem::take(&mut self.token_sources),
            ..TrialResult::new(trial)
        };
        if self.measured == 0 {
            return result;
        }
        result.window_s = (self.last_completion - self.first_dispatch).max(0.0);
        if result.window_s > 0.0 {
            result.output_tok_per_s = result.output_tokens as f64 / result.window_s;
            result.requests_per_s = result.succeeded as f64 / result.window_s;
        }
        result.error_rate = result.failed_total() as f64 / result.requests_sent as f64;
        if self.speeds > 0 {
            result.per_request_tok_per_s = Some(self.speed_sum / self.speeds as f64);
        }
        result.prefix_cache = self.cache.take().map(|c| PrefixCacheUse {
            share: if c.prompt_tokens > 0 {
                c.cached_tokens as f64 / c.prompt_tokens as f64
            } else {
                0.0
            },
            ..c
        });
        result.ttft_ms = std::mem::take(&mut self.ttft).percentiles();
        result.itl_ms = std::mem::take(&mut self.itl).percentiles();
        result.tpot_ms = std::mem::take(&mut self.tpot).percentiles();
        result.e2e_ms = std::mem::take(&mut self.e2e).percentiles();
        if self.estimated_splits > 0 {
            result.flags.push(TrialFlag::new(FlagKind::TokensEstimated, format!(
                "{} requests: tokens per chunk estimated from text length (the server sent no per-chunk usage); ITL is approximate",
                self.estimated_splits
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

    /// The whole trial result: the figures, then the length misses, the server's telemetry,
    /// the open-loop schedule, the input check and the client's headroom, each with its flag.
    pub fn into_result(
        mut self,
        place: &TrialPlace,
        server: Option<TrialTelemetry>,
        mut client: ClientHeadroom,
        reads: &ReadDelays,
    ) -> TrialResult {
        let mut t = self.summary(place.trial);
        dialect::note_length_misses(&mut t, self.length_misses, place.asked_output_tokens);
        telemetry::attach(&mut t, server);
        t.excluded_requests = self.excluded;
        if let Some((rate, arrival)) = &place.open_loop {
            let stats = std::mem::take(&mut self.schedule).stats(*rate, arrival);
            t.flags.extend(schedule_check::judge_schedule(
                &stats,
                self.measured as usize,
            ));
            t.open_loop = Some(stats);
        }
        t.input_check = self.inputs.finish(place.exact_input);
        t.flags
            .extend(t.input_check.as_ref().and_then(input_check::judge));
        self.sends.judge(&mut client);
        headroom::judge_reads(&mut client, reads, t.itl_ms.as_ref().map(|p| p.p50));
        t.flags.extend(headroom::flag(&client));
        t.client = Some(client);
        t.round = place.round;
        t
    }
}

/// Where a trial sits in the run and what it asked for, beyond its requests.
#[derive(Debug, Clone, Default)]
pub struct TrialPlace {
    pub trial: u32,
    /// The round it ran in (interleaved runs only).
    pub round: Option<u32>,
    /// Open-loop levels: the target rate (requests/s) and the arrivals' name ("trace" for
    /// a replay).
    pub open_loop: Option<(f64, String)>,
    /// The one output length every request asked for; None where lengths are drawn.
    pub asked_output_tokens: Option<u32>,
    /// Prompt lengths are tokens of the model's tokenizer (else words).
    pub exact_input: bool,
}

/// Summarises one trial's requests (the figures of [`TrialTally::summary`]).
pub fn summarize_trial(trial: u32, finished: Vec<Finished>) -> TrialResult {
    let mut tally = TrialTally::new(None);
    for f in finished {
        tally.add(f, Asked::default());
    }
    tally.summary(trial)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::stream::outcome::a_finished_request;
    use crate::record::ErrorClass;

    fn with_gaps(gaps: usize, window: Option<Window>, warmup: bool) -> Finished {
        let mut f = a_finished_request(1.0, 100.0);
        f.gaps_ms = vec![2.0; gaps];
        f.record.window = window;
        f.record.warmup = warmup;
        f
    }

    /// Only the measured window's successful requests count; every request's tokens go to
    /// the cross-check's count, windows included.
    #[test]
    fn the_tally_counts_measured_successes_and_places_every_request() {
        let count = Arc::new(ClientCount::new(telemetry::Counting::AtCompletion, 1));
        count.scrape_began(0, 0.0);
        count.scrape_ended(0, Some(0.0));
        let mut tally = TrialTally::new(Some(Arc::clone(&count)));
        let counted = with_gaps(9, Some(Window::Measure), false);
        let warm = with_gaps(9, Some(Window::Warmup), false);
        let warmup = with_gaps(9, None, true);
        let mut failed = with_gaps(9, None, false);
        failed.record.error = Some(ErrorClass::Reset);
        for f in [counted, warm, warmup, failed] {
            tally.add(f, Asked::default());
        }
        assert_eq!(
            (tally.requests(), tally.excluded, tally.measured),
            (4, 1, 3)
        );
        let t = tally.summary(1);
        assert_eq!(t.itl_ms.as_ref().unwrap().count, 9);
        assert_eq!((t.requests_sent, t.succeeded, t.failed_total()), (3, 2, 1));
        // Each request ended at 1.1 s: a last scrape at 2 s counts all their tokens.
        count.scrape_began(0, 2.0);
        count.scrape_ended(0, Some(2.0));
        assert_eq!(count.between(0, 0, 1), 4 * 10);
    }

    /// The figures do not depend on the order requests finish in, and the tally's
    /// percentiles are the exact ones of the requests' values (while they are few).
    #[test]
    fn folding_in_any_order_gives_the_exact_figures() {
        let requests = || -> Vec<Finished> {
            (0..7u32)
                .map(|i| {
                    let mut f = a_finished_request(1.0 + f64::from(i), 90.0 + f64::from(i) * 3.7);
                    f.record.index = i;
                    f.gaps_ms = (0..9).map(|g| (g * 7 + i) as f32 / 3.0).collect();
                    if i % 3 == 1 {
                        f.record.error = Some(ErrorClass::Reset);
                        f.record.error_message = Some(format!("reset {i}"));
                    }
                    f
                })
                .collect()
        };
        let fold = |finished: Vec<Finished>| {
            let mut tally = TrialTally::new(None);
            for f in finished {
                tally.add(f, Asked::default());
            }
            tally.summary(1)
        };
        let forward = fold(requests());
        let backward = fold(requests().into_iter().rev().collect());
        assert_eq!(forward.itl_ms, backward.itl_ms);
        assert_eq!(forward.itl_ms.as_ref().unwrap().count, 5 * 9);
        assert_eq!(
            (&forward.ttft_ms, &forward.e2e_ms),
            (&backward.ttft_ms, &backward.e2e_ms)
        );
        // The example of a class is its first request's, whatever order they finished in.
        assert_eq!(backward.error_examples[&ErrorClass::Reset], "reset 1");
        assert_eq!(forward.error_examples, backward.error_examples);
        assert_eq!(forward.window_s, backward.window_s);
        let mut e2e: Vec<f64> = (requests().into_iter())
            .filter(|f| f.record.error.is_none())
            .map(|f| f.record.e2e_ms)
            .collect();
        assert_eq!(
            forward.e2e_ms,
            crate::stats::Percentiles::from_values(&mut e2e)
        );
    }

    /// A trial whose every request failed to connect says the server went away, with the
    /// first request's message; one request that got through settles it.
    #[test]
    fn connect_failures_are_told_from_the_first_request() {
        let refused = |i: u32| {
            let mut f = a_finished_request(1.0, 1.0);
            f.record.index = i;
            f.record.error = Some(ErrorClass::Connect);
            f.record.error_message = Some(format!("refused {i}"));
            f
        };
        let mut tally = TrialTally::new(None);
        for i in [2, 0, 1] {
            tally.add(refused(i), Asked::default());
        }
        let why = tally.unreachable().unwrap();
        assert!(
            why.contains("all 3 requests") && why.contains("refused 0"),
            "{why}"
        );
        tally.add(a_finished_request(1.0, 1.0), Asked::default());
        assert_eq!(tally.unreachable(), None);
    }

    /// Length misses and prompt lengths come in with each request and reach the result.
    #[test]
    fn the_whole_result_is_built_here() {
        let mut tally = TrialTally::new(None);
        for i in 0..4u32 {
            let mut f = a_finished_request(1.0, 100.0);
            f.record.index = i;
            f.record.input_tokens = Some(20);
            let asked = Asked {
                input_tokens: Some(10),
                missed_length: i == 0,
            };
            tally.add(f, asked);
        }
        let place = TrialPlace {
            trial: 2,
            round: Some(2),
            open_loop: Some((5.0, "trace".into())),
            asked_output_tokens: Some(10),
            exact_input: true,
        };
        let reads = ReadDelays::of(&[]);
        let t = tally.into_result(&place, None, ClientHeadroom::default(), &reads);
        assert_eq!((t.trial, t.round, t.length_misses), (2, Some(2), 1));
        let check = t.input_check.as_ref().unwrap();
        assert_eq!(
            (check.requests, check.requested_mean, check.achieved_mean),
            (4, 10.0, 20.0)
        );
        let kinds: Vec<FlagKind> = t.flags.iter().map(|f| f.kind).collect();
        assert!(kinds.contains(&FlagKind::LengthMisses), "{kinds:?}");
        assert!(kinds.contains(&FlagKind::InputLengthOff), "{kinds:?}");
        assert_eq!(t.open_loop.as_ref().unwrap().arrival, "trace");
        assert!(t.client.is_some());
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
}
