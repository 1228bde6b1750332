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

/// Send offsets (seconds from the trial's start) of `n` requests at `rate` requests/s.
///
/// The first request goes at 0. The n - 1 gaps are drawn from the arrival distribution
/// (mean 1 / rate) and then scaled so that they sum to exactly (n - 1) / rate: the process
/// conditioned on its count. For Poisson arrivals that is exact (given n arrivals in a
/// window, their times are uniform order statistics, whose spacings are normalised
/// exponentials), and it means a trial's achieved rate measures the client, not the luck
/// of the draw (a free Poisson count over 1,000 requests varies by about 3%).
pub fn schedule(arrival: Arrival, gamma_shape: f64, rate: f64, n: usize, seed: u64) -> Vec<f64> {
    offsets(arrival, gamma_shape, rate, n, seed).collect()
}

/// [`schedule`]'s offsets one at a time, the same values bit for bit, without a list: the
/// gaps are drawn twice from the same seed, once for their sum and once to scale and send,
/// so a trial of a million requests holds no schedule.
pub fn offsets(
    arrival: Arrival,
    gamma_shape: f64,
    rate: f64,
    n: usize,
    seed: u64,
) -> impl Iterator<Item = f64> {
    let mean = 1.0 / rate;
    let gamma = match arrival {
        Arrival::Gamma => statrs::distribution::Gamma::new(gamma_shape, gamma_shape * rate).ok(),
        _ => None,
    };
    let gaps = move || {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        (1..n).map(move |_| match arrival {
            Arrival::Constant => mean,
            // Inverse CDF; 1 - u is in (0, 1], so the logarithm is finite.
            Arrival::Poisson => -(1.0 - rng.gen::<f64>()).ln() * mean,
            Arrival::Gamma => match &gamma {
                Some(g) => rng.sample(g),
                None => mean,
            },
        })
    };
    let sum: f64 = gaps().sum();
    let scale = (sum > 0.0).then(|| (n.saturating_sub(1)) as f64 * mean / sum);
    let mut t = 0.0;
    let rest = gaps().map(move |g| {
        t += scale.map_or(g, |s| g * s);
        t
    });
    (n > 0).then_some(0.0).into_iter().chain(rest)
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

/// Sends a request at each of `offsets` (ascending). `max_concurrency` makes a send wait
/// for a free slot (the wait shows as send lag). Each request is handed to [`Shared::finished`]
/// as it finishes (journal, progress, the trial's tally) and its task reaped while the
/// schedule runs on, so a long trial holds only the requests in flight.
pub async fn run_schedule(
    shared: &Arc<Shared>,
    batch: Batch,
    offsets: impl IntoIterator<Item = f64>,
    max_concurrency: Option<u32>,
) -> Result<()> {
    let slots = max_concurrency.map(|c| Arc::new(tokio::sync::Semaphore::new(c as usize)));
    let t0 = tokio::time::Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for (i, offset) in offsets.into_iter().enumerate() {
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

    /// The offsets drawn one at a time are the list's, bit for bit: the same as the schedule
    /// built whole before them (kept here as it was).
    #[test]
    fn offsets_one_at_a_time_are_the_whole_schedule() {
        let whole = |arrival: Arrival, shape: f64, rate: f64, n: usize, seed: u64| {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let mean = 1.0 / rate;
            let gamma = statrs::distribution::Gamma::new(shape, shape * rate).ok();
            let mut gaps: Vec<f64> = (1..n)
                .map(|_| match arrival {
                    Arrival::Constant => mean,
                    Arrival::Poisson => -(1.0 - rng.gen::<f64>()).ln() * mean,
                    Arrival::Gamma => rng.sample(gamma.as_ref().unwrap()),
                })
                .collect();
            let sum: f64 = gaps.iter().sum();
            if sum > 0.0 {
                let scale = (n.saturating_sub(1)) as f64 * mean / sum;
                gaps.iter_mut().for_each(|g| *g *= scale);
            }
            let mut out = Vec::new();
            let mut t = 0.0;
            if n > 0 {
                out.push(0.0);
            }
            for g in gaps {
                t += g;
                out.push(t);
            }
            out
        };
        for arrival in [Arrival::Constant, Arrival::Poisson, Arrival::Gamma] {
            for n in [0, 1, 2, 1000] {
                let want = whole(arrival, 0.5, 37.0, n, 9);
                let got: Vec<f64> = offsets(arrival, 0.5, 37.0, n, 9).collect();
                let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&got), bits(&want), "{arrival:?} n={n}");
            }
        }
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
}
