//! The engine task: one per replica, fed through a channel, stepping the [`Scheduler`] on
//! an absolute clock so that long runs do not drift.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;

use super::config::SimConfig;
use super::metrics::Metrics;
use super::sched::{Emission, GenParams, Scheduler};

/// A request handed to the engine, with the channel its tokens go back on.
pub struct Submission {
    pub params: GenParams,
    pub events: mpsc::UnboundedSender<Emission>,
}

/// When the engine falls this far behind its schedule (a stalled runtime), it restarts the
/// clock from now rather than emitting a burst of catch-up steps.
const MAX_LAG: Duration = Duration::from_millis(250);

/// The longest one step may sleep. Validation keeps decode steps far shorter; only an
/// enormous prefill could reach this, and the cap keeps the clock from overflowing.
const MAX_STEP: Duration = Duration::from_secs(86_400);

/// A step's duration as a [`Duration`], never panicking: `Duration::from_secs_f64` panics on
/// huge, infinite or NaN values (and adding a huge one to an `Instant` would panic too).
pub fn step_duration(secs: f64) -> Duration {
    Duration::try_from_secs_f64(secs)
        .unwrap_or(if secs > 0.0 { MAX_STEP } else { Duration::ZERO })
        .min(MAX_STEP)
}

/// Runs until every submitter is gone and no request remains.
pub async fn run(
    cfg: SimConfig,
    mut rx: mpsc::UnboundedReceiver<Submission>,
    metrics: Arc<Metrics>,
) {
    let mut sched: Scheduler<mpsc::UnboundedSender<Emission>> = Scheduler::new(cfg);
    let mut deadline = Instant::now();
    let mut open = true;
    loop {
        if sched.is_idle() {
            if !open {
                return;
            }
            // Idle: wait for work, then start the clock afresh.
            match rx.recv().await {
                Some(s) => sched.submit(s.events, s.params),
                None => return,
            }
            deadline = Instant::now();
        }
        while open {
            match rx.try_recv() {
                Ok(s) => sched.submit(s.events, s.params),
                Err(mpsc::error::TryRecvError::Empty) => break,
                Err(mpsc::error::TryRecvError::Disconnected) => open = false,
            }
        }
        let gone = sched.retain(|tx| !tx.is_closed());
        metrics.aborted.fetch_add(gone as u64, Relaxed);
        let Some(step) = sched.begin_step() else {
            continue;
        };
        let secs = step.secs;
        metrics.prompt_tokens.fetch_add(step.prompt_tokens, Relaxed);
        metrics
            .prefix_cache_queries
            .fetch_add(step.cache_queries, Relaxed);
        metrics
            .prefix_cache_hits
            .fetch_add(step.cache_hits, Relaxed);
        publish(&metrics, &sched);
        if secs > 0.0 {
            deadline += step_duration(secs);
            let now = Instant::now();
            if now > deadline + MAX_LAG {
                deadline = now;
            }
            tokio::time::sleep_until(deadline).await;
        } else {
            tokio::task::yield_now().await;
        }
        sched.finish_step(|tx, e| {
            let ok = tx.send(e).is_ok();
            if ok {
                metrics
                    .generation_tokens
                    .fetch_add(u64::from(e.tokens), Relaxed);
                if e.finish.is_some() {
                    metrics.requests.fetch_add(1, Relaxed);
                }
            } else {
                metrics.aborted.fetch_add(1, Relaxed);
            }
            ok
        });
        publish(&metrics, &sched);
    }
}

fn publish<H>(metrics: &Metrics, sched: &Scheduler<H>) {
    metrics.running.store(sched.running() as u64, Relaxed);
    metrics.waiting.store(sched.waiting() as u64, Relaxed);
    if let Some(usage) = sched.kv_usage() {
        metrics.kv_cache_bounded.store(true, Relaxed);
        metrics.kv_cache_usage.store(usage.to_bits(), Relaxed);
        metrics.preemptions.store(sched.preemptions(), Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_duration_never_panics_and_is_capped() {
        assert_eq!(step_duration(0.25), Duration::from_millis(250));
        assert_eq!(step_duration(0.0), Duration::ZERO);
        for huge in [1e300, f64::INFINITY, 1e6] {
            assert_eq!(step_duration(huge), MAX_STEP, "{huge}");
        }
        for bad in [f64::NAN, -1.0, f64::NEG_INFINITY] {
            assert_eq!(step_duration(bad), Duration::ZERO, "{bad}");
        }
    }
}
