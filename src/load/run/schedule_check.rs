//! Did an open-loop trial keep its schedule? The achieved rate against the target, the send
//! lag, and latency from the scheduled send time (free of coordinated omission), folded as
//! the trial's counted requests finish; openloop.rs makes and sends the schedule.

use crate::record::trial_flags::{FlagKind, TrialFlag};
use crate::record::{OpenLoopStats, RequestRecord};
use crate::stats::LatencySketch;

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
