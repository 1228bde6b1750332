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
        let Some((secs, prefill)) = sched.begin_step() else {
            continue;
        };
        metrics.prompt_tokens.fetch_add(prefill, Relaxed);
        publish(&metrics, &sched);
        if secs > 0.0 {
            deadline += Duration::from_secs_f64(secs);
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
}
