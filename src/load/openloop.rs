//! Open-loop load: requests sent at a target rate on a schedule computed in advance,
//! whether or not earlier requests have finished (how real users arrive). A closed loop
//! slows its sending when the server slows, hiding the queueing a user would see
//! (coordinated omission); here latency is also measured from the *scheduled* send time.
//!
//! The schedule is absolute: send i happens at t0 + (sum of the first i gaps), each awaited
//! with `sleep_until`, so a late send does not push back the ones after it.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::sweep::{build_body, send_built, Batch, Shared};
use crate::profile::Arrival;
use crate::record::flags::{FlagKind, TrialFlag};
use crate::record::{OpenLoopStats, RequestRecord};
use crate::stats::LatencySketch;

/// Send offsets (seconds from the trial's start) of `n` requests at `rate` requests/s.
///
/// The first request goes at 0. The n - 1 gaps are drawn from the arrival distribution
/// (mean 1 / rate) and then scaled so that they sum to exactly (n - 1) / rate: the process
/// conditioned on its count. For Poisson arrivals that is exact (given n arrivals in a
/// window, their times are uniform order statistics, whose spacings are normalised
/// exponentials), and it means a trial's achieved rate measures the client, not the luck
/// of the draw (a free Poisson count over 1,000 requests varies by about 3%).
pub fn schedule(arrival: Arrival, gamma_shape: f64, rate: f64, n: usize, seed: u64) -> Vec<f64> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mean = 1.0 / rate;
    let gamma = match arrival {
        Arrival::Gamma => statrs::distribution::Gamma::new(gamma_shape, gamma_shape * rate).ok(),
        _ => None,
    };
    let mut gaps: Vec<f64> = (1..n)
        .map(|_| match arrival {
            Arrival::Constant => mean,
            // Inverse CDF; 1 - u is in (0, 1], so the logarithm is finite.
            Arrival::Poisson => -(1.0 - rng.gen::<f64>()).ln() * mean,
            Arrival::Gamma => match &gamma {
                Some(g) => rng.sample(g),
                None => mean,
            },
        })
        .collect();
    let sum: f64 = gaps.iter().sum();
    if sum > 0.0 {
        let scale = (n.saturating_sub(1)) as f64 * mean / sum;
        gaps.iter_mut().for_each(|g| *g *= scale);
    }
    let mut offsets = Vec::with_capacity(n);
    let mut t = 0.0;
    if n > 0 {
        offsets.push(0.0);
    }
    for g in gaps {
        t += g;
        offsets.push(t);
    }
    offsets
}

/// The seed of one trial's schedule: the profile's seed mixed with the rate and the trial,
/// so trials are independent draws and every run repeats the same ones.
pub fn trial_seed(seed: u64, rate: f64, trial: u32) -> u64 {
    let mut x = seed ^ rate.to_bits().rotate_left(17) ^ (u64::from(trial) << 48);
    // splitmix64 finaliser
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d049bb133111eb);
    x ^ (x >> 31)
}

/// Sends `offsets.len()` requests on the schedule. `max_concurrency` makes a send wait for a
/// free slot (the wait shows as send lag). Each request is handed to [`Shared::finished`]
/// as it finishes (journal, progress, the trial's tally) and its task reaped while the
/// schedule runs on, so a long trial holds only the requests in flight.
pub async fn run_schedule(
    shared: &Arc<Shared>,
    batch: Batch,
    offsets: &[f64],
    max_concurrency: Option<u32>,
) -> Result<()> {
    let slots = max_concurrency.map(|c| Arc::new(tokio::sync::Semaphore::new(c as usize)));
    let t0 = tokio::time::Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for (i, &offset) in offsets.iter().enumerate() {
        while let Some(done) = tasks.try_join_next() {
            done.context("a request task panicked")??;
        }
        let at = t0 + Duration::from_secs_f64(offset);
        // Built before its send time, so building it is not send lag.
        let body = build_body(shared, batch, i as u32);
        // An interrupted run sends nothing more (checked at least every 100 ms of a long
        // gap); what was sent is still awaited and counted.
        loop {
            if shared.interrupt.is_stopping() {
                break;
            }
            let step = tokio::time::Instant::now() + Duration::from_millis(100);
            if step >= at {
                tokio::time::sleep_until(at).await;
                break;
            }
            tokio::time::sleep_until(step).await;
        }
        if shared.interrupt.is_stopping() {
            break;
        }
        let permit = match &slots {
            Some(s) => Some(
                Arc::clone(s)
                    .acquire_owned()
                    .await
                    .context("concurrency cap closed")?,
            ),
            None => None,
        };
        let scheduled_s = at
            .into_std()
            .saturating_duration_since(shared.clock)
            .as_secs_f64();
        let window = batch.windows.map(|w| w.window_at(offset));
        let shared = Arc::clone(shared);
        tasks.spawn(async move {
            let finished = send_built(
                &shared,
                batch,
                i as u32,
                body,
                Some(scheduled_s),
                window,
                None,
            )
            .await;
            drop(permit);
            let drawn = shared.lengths.draw(batch.first_prompt + i as u64);
            shared.finished(batch, finished, drawn, None)
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.context("a request task panicked")??;
    }
    Ok(())
}

/// How well the trial kept its schedule, and latency from the schedule, folded as the
/// trial's counted requests (its measure window) finish: the first and last send, and
/// sketches of the send lag and the latencies from the scheduled time.
#[derive(Debug)]
pub struct ScheduleTally {
    sends: u64,
    first: f64,
    last: f64,
    lag: LatencySketch<f64>,
    ttft: LatencySketch<f64>,
    e2e: LatencySketch<f64>,
}

impl Default for ScheduleTally {
    fn default() -> Self {
        ScheduleTally {
            sends: 0,
            first: f64::INFINITY,
            last: f64::NEG_INFINITY,
            lag: LatencySketch::new(),
            ttft: LatencySketch::new(),
            e2e: LatencySketch::new(),
        }
    }
}

impl ScheduleTally {
    pub fn add(&mut self, r: &RequestRecord) {
        self.sends += 1;
        self.first = self.first.min(r.sent_s);
        self.last = self.last.max(r.sent_s);
        let Some(s) = r.scheduled_s else { return };
        self.lag.record(((r.sent_s - s) * 1000.0).max(0.0));
        if r.error.is_none() {
            self.e2e.record((r.end_s - s) * 1000.0);
            if let Some(t) = r.first_token_s {
                self.ttft.record((t - s) * 1000.0);
            }
        }
    }

    /// The trial's open-loop figures against `target_rate`, arrivals named `arrival`.
    pub fn stats(self, target_rate: f64, arrival: &str) -> OpenLoopStats {
        let achieved_rate = (self.sends > 1 && self.last > self.first)
            .then(|| (self.sends - 1) as f64 / (self.last - self.first));
        OpenLoopStats {
            target_rate,
            achieved_rate,
            arrival: arrival.to_string(),
            send_lag_ms: self.lag.percentiles(),
            ttft_from_schedule_ms: self.ttft.percentiles(),
            e2e_from_schedule_ms: self.e2e.percentiles(),
        }
    }
}

/// How far the achieved rate may stray from the target, either way, before a trial is
/// flagged: the schedule is conditioned on its count, so a kept schedule lands within a few
/// percent (send lag at the ends only).
pub const RATE_TOLERANCE: f64 = 0.20;
/// Fewer measured sends than this cannot tell a missed schedule from the ends' jitter.
pub const MIN_SENDS_TO_JUDGE: usize = 10;

/// Flags a trial whose achieved rate is off its target by more than [`RATE_TOLERANCE`], too
/// fast (the schedule collapsed into a burst) or too slow (the client or a concurrency cap
/// could not keep it). `sends` is the number of measured requests.
pub fn judge_schedule(stats: &OpenLoopStats, sends: usize) -> Option<TrialFlag> {
    if sends < MIN_SENDS_TO_JUDGE {
        return None;
    }
    let target = stats.target_rate;
    let (word, achieved) = match stats.achieved_rate {
        // Every send at the same instant: no rate at all, the worst burst.
        None => ("all at once", f64::INFINITY),
        Some(a) if a > target * (1.0 + RATE_TOLERANCE) => ("too fast", a),
        Some(a) if a < target * (1.0 - RATE_TOLERANCE) => ("too slow", a),
        Some(_) => return None,
    };
    Some(TrialFlag::new(
        FlagKind::ScheduleMissed,
        format!(
            "schedule missed ({word}): achieved {achieved:.3} requests/s against a target of \
             {target} (more than {:.0}% off); the trial did not measure the asked load",
            RATE_TOLERANCE * 100.0
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use statrs::distribution::{ContinuousCDF, Exp};

    fn gaps(offsets: &[f64]) -> Vec<f64> {
        offsets.windows(2).map(|w| w[1] - w[0]).collect()
    }

    /// Kolmogorov-Smirnov statistic of `x` against `cdf`.
    fn ks(mut x: Vec<f64>, cdf: impl Fn(f64) -> f64) -> f64 {
        x.sort_by(f64::total_cmp);
        let n = x.len() as f64;
        x.iter()
            .enumerate()
            .map(|(i, v)| {
                let f = cdf(*v);
                (f - i as f64 / n).abs().max(((i + 1) as f64 / n - f).abs())
            })
            .fold(0.0, f64::max)
    }

    #[test]
    fn constant_schedule_is_evenly_spaced_and_exact() {
        let s = schedule(Arrival::Constant, 1.0, 50.0, 101, 7);
        assert_eq!(s.len(), 101);
        assert!((s[100] - 2.0).abs() < 1e-9);
        assert!(gaps(&s).iter().all(|g| (g - 0.02).abs() < 1e-12));
    }

    #[test]
    fn poisson_gaps_are_exponential_and_span_is_exact() {
        let n = 2000;
        let s = schedule(Arrival::Poisson, 1.0, 50.0, n, 42);
        assert!((s[n - 1] - (n - 1) as f64 / 50.0).abs() < 1e-9);
        let exp = Exp::new(50.0).unwrap();
        let d = ks(gaps(&s), |x| exp.cdf(x));
        // 1% critical value of the one-sample KS test: 1.628 / sqrt(n).
        assert!(d < 1.628 / ((n - 1) as f64).sqrt(), "D = {d}");
        // Same seed, same schedule; another seed, another one.
        assert_eq!(s, schedule(Arrival::Poisson, 1.0, 50.0, n, 42));
        assert_ne!(s, schedule(Arrival::Poisson, 1.0, 50.0, n, 43));
    }

    #[test]
    fn gamma_shape_changes_burstiness() {
        let cv = |k: f64| {
            let g = gaps(&schedule(Arrival::Gamma, k, 10.0, 5000, 1));
            let m = g.iter().sum::<f64>() / g.len() as f64;
            let var = g.iter().map(|x| (x - m).powi(2)).sum::<f64>() / g.len() as f64;
            var.sqrt() / m
        };
        // Gamma's coefficient of variation is 1 / sqrt(k).
        assert!((cv(0.25) - 2.0).abs() < 0.2, "{}", cv(0.25));
        assert!((cv(4.0) - 0.5).abs() < 0.05, "{}", cv(4.0));
    }

    #[test]
    fn seeds_differ_by_trial_and_rate() {
        assert_ne!(trial_seed(0, 50.0, 1), trial_seed(0, 50.0, 2));
        assert_ne!(trial_seed(0, 50.0, 1), trial_seed(0, 10.0, 1));
        assert_eq!(trial_seed(3, 50.0, 1), trial_seed(3, 50.0, 1));
    }

    #[test]
    fn achieved_rate_is_judged_both_ways() {
        let stats = |achieved: Option<f64>| OpenLoopStats {
            target_rate: 5.0,
            achieved_rate: achieved,
            arrival: "gamma".into(),
            send_lag_ms: None,
            ttft_from_schedule_ms: None,
            e2e_from_schedule_ms: None,
        };
        for (achieved, sends, flagged) in [
            (Some(5.0), 100, false),
            (Some(5.9), 100, false),
            (Some(4.1), 100, false),
            (Some(17_938.0), 100, true),
            (Some(6.5), 100, true),
            (Some(3.0), 100, true),
            (None, 100, true),
            (Some(17_938.0), MIN_SENDS_TO_JUDGE - 1, false),
        ] {
            let flag = judge_schedule(&stats(achieved), sends);
            assert_eq!(
                flag.is_some(),
                flagged,
                "{achieved:?} over {sends}: {flag:?}"
            );
            if let Some(f) = flag {
                assert_eq!(f.kind, FlagKind::ScheduleMissed);
            }
        }
    }
}
