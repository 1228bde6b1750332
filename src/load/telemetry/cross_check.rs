//! A trial's telemetry summarised: the client/server token cross-check and the signs of a
//! saturated server.

use super::adapter::Adapter;
use super::count::ClientCount;
use crate::record::telemetry::{EndpointSeries, Sample, TrialTelemetry};
use crate::record::trial_flags::{FlagKind, TrialFlag};
use crate::record::TrialResult;

/// Client and server token rates may differ by this much before the trial is flagged.
pub const AGREEMENT: f64 = 0.02;
/// Cache usage at or above this counts as "near full".
pub const CACHE_NEAR_FULL: f64 = 0.95;

/// The trial's telemetry: series, the cross-check (the client's tokens as `client` placed
/// them between the scrapes, count.rs) and the saturation signs.
pub fn summarize(
    adapter: &Adapter,
    endpoints: Vec<EndpointSeries>,
    client_count: &ClientCount,
) -> TrialTelemetry {
    let (mut server, mut client, mut windows, mut counted) = (0.0, 0.0, 0.0, 0usize);
    for e in &endpoints {
        let with_counter = |s: &Sample| s.generated_tokens_total.is_some();
        let first = e.samples.iter().position(with_counter);
        let last = e.samples.iter().rposition(with_counter);
        if let (Some(ia), Some(ib)) = (first, last) {
            let (a, b) = (&e.samples[ia], &e.samples[ib]);
            if b.t > a.t {
                let delta = b.generated_tokens_total.unwrap_or(0.0)
                    - a.generated_tokens_total.unwrap_or(0.0);
                if delta >= 0.0 {
                    server += delta;
                    client += client_count.between(e.endpoint, ia, ib) as f64;
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
    use crate::engine::Engine;
    use crate::load::stream::outcome::Finished;
    use crate::load::telemetry::{adapter, Counting};
    use crate::record::{ErrorClass, RequestRecord, TokenSource};

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

    /// The client's count of `finished` against the series' scrapes (each taken at once).
    fn counted(
        counting: Counting,
        series: &[EndpointSeries],
        finished: &[Finished],
    ) -> ClientCount {
        let count = ClientCount::new(counting, series.len());
        for e in series {
            for s in &e.samples {
                count.scrape_began(e.endpoint, s.t);
                count.scrape_ended(e.endpoint, Some(s.t));
            }
        }
        finished.iter().for_each(|f| count.add(f));
        count
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
            invalid_values: 0,
            dropped_samples: 0,
        }];
        let count = counted(Counting::PerToken, &series, &f);
        let t = summarize(&adapter(Engine::Sim).unwrap(), series.clone(), &count);
        assert_eq!(t.server_tokens, Some(2.0));
        assert_eq!(t.client_tokens, Some(2.0));
        assert_eq!(t.disagreement, Some(0.0));
        assert_eq!(t.saturation, vec!["queue non-empty (up to 2 waiting)"]);
        // Counted at completion: the request ended after the window, so nothing inside it.
        let count = counted(Counting::AtCompletion, &series, &f);
        let t = summarize(&adapter(Engine::LlamaCpp).unwrap(), series, &count);
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
            invalid_values: 0,
            dropped_samples: 0,
        }];
        let count = counted(Counting::PerToken, &series, &[]);
        let t = summarize(&adapter(Engine::Vllm).unwrap(), series, &count);
        assert_eq!(t.disagreement, None);
        assert!(t.saturation.is_empty());
    }
}
