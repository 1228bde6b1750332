//! The order of a run's trials (rounds, arms, levels) and the work it plans, step by step,
//! for the progress display.

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::progress;
use crate::profile::{Profile, TrialOrder};

/// One trial's place in the run: its round (1-based), the arm (an index into the run's arms)
/// and the level (an index into the profile's levels).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Slot {
    pub round: u32,
    pub arm: usize,
    pub level: usize,
}

/// The order of a run's trials. Interleaved: round r runs trial r of every level, the levels
/// in an order drawn for the round from `seed`; with two arms, one arm's half of the round
/// and then the other's, the first arm alternating from round to round (AB, BA: ABBA
/// blocks), so drift and a warming server fall on both arms and every level alike.
/// Sequential: every trial of a level (arms alternating the same way), then the next level.
pub(crate) fn schedule(
    levels: usize,
    trials: u32,
    arms: usize,
    order: TrialOrder,
    seed: u64,
) -> Vec<Slot> {
    let arm_order = |round: u32| -> Vec<usize> {
        let mut a: Vec<usize> = (0..arms).collect();
        if round % 2 == 0 {
            a.reverse();
        }
        a
    };
    let mut slots = Vec::new();
    match order {
        TrialOrder::Sequential => {
            for level in 0..levels {
                for round in 1..=trials {
                    for arm in arm_order(round) {
                        slots.push(Slot { round, arm, level });
                    }
                }
            }
        }
        TrialOrder::Interleaved => {
            for round in 1..=trials {
                let mut rng = ChaCha8Rng::seed_from_u64(seed ^ u64::from(round).rotate_left(32));
                let mut perm: Vec<usize> = (0..levels).collect();
                perm.shuffle(&mut rng);
                for arm in arm_order(round) {
                    for &level in &perm {
                        slots.push(Slot { round, arm, level });
                    }
                }
            }
        }
    }
    slots
}

/// The run's work for the progress display, in the order it runs (each level's warmup
/// before its first trial), and the requests it plans to send (warmups included; timed
/// closed-loop trials count none).
pub(super) fn plan_steps(
    profile: &Profile,
    levels: &[(u32, Option<f64>)],
    slots: &[Slot],
    trace_requests: Option<u64>,
) -> (Vec<progress::Step>, u64) {
    use progress::{Step, StepKind};
    let sweep = &profile.sweep;
    let mut warmed = std::collections::HashSet::new();
    let (mut steps, mut requests) = (Vec::new(), 0u64);
    for slot in slots {
        let (concurrency, rate) = levels[slot.level];
        let level = slot.arm * levels.len() + slot.level;
        if warmed.insert(level) && sweep.warmup_requests > 0 {
            let concurrency = match rate {
                Some(r) if concurrency == 0 => (r.ceil() as u32).max(1),
                _ => concurrency,
            };
            requests += u64::from(sweep.warmup_requests);
            steps.push(Step {
                level,
                kind: StepKind::Closed {
                    requests: u64::from(sweep.warmup_requests),
                    concurrency,
                },
            });
        }
        let kind = match (rate, sweep.trial_span()) {
            (Some(r), Some(span)) => {
                let n = open_loop_count(r, span) as u64;
                requests += n;
                StepKind::Timed {
                    seconds: span.as_secs_f64(),
                    requests: Some(n),
                }
            }
            (Some(r), None) => {
                let n = trace_requests.unwrap_or(u64::from(sweep.requests_per_level));
                requests += n;
                StepKind::Timed {
                    seconds: n as f64 / r,
                    requests: Some(n),
                }
            }
            (None, Some(span)) => StepKind::Timed {
                seconds: span.as_secs_f64(),
                requests: None,
            },
            (None, None) => {
                let n = u64::from(sweep.requests_at(concurrency));
                requests += n;
                StepKind::Closed {
                    requests: n,
                    concurrency,
                }
            }
        };
        steps.push(Step { level, kind });
    }
    (steps, requests)
}

/// Requests in an open-loop duration trial: the rate times the whole span (at least one).
pub(super) fn open_loop_count(rate: f64, span: std::time::Duration) -> usize {
    ((rate * span.as_secs_f64()).round() as usize).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interleaved_rounds_run_every_level_once_per_arm_in_abba_order() {
        let slots = schedule(4, 6, 2, TrialOrder::Interleaved, 7);
        assert_eq!(slots.len(), 4 * 6 * 2);
        for round in 1..=6 {
            let r: Vec<&Slot> = slots.iter().filter(|s| s.round == round).collect();
            assert_eq!(r.len(), 8);
            // One arm's half, then the other's; the first arm alternates (AB, BA, AB...).
            let first = if round % 2 == 1 { 0 } else { 1 };
            assert!(
                r[..4].iter().all(|s| s.arm == first),
                "round {round}: {r:?}"
            );
            assert!(r[4..].iter().all(|s| s.arm == 1 - first));
            // Both halves run the levels in the round's order, each level once.
            let order: Vec<usize> = r[..4].iter().map(|s| s.level).collect();
            assert_eq!(order, r[4..].iter().map(|s| s.level).collect::<Vec<_>>());
            let mut sorted = order.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, vec![0, 1, 2, 3]);
        }
        // The order is drawn per round from the seed: reproducible, and not always the same.
        assert_eq!(slots, schedule(4, 6, 2, TrialOrder::Interleaved, 7));
        let firsts: std::collections::BTreeSet<usize> = (1..=6)
            .map(|r| slots.iter().find(|s| s.round == r).unwrap().level)
            .collect();
        assert!(firsts.len() > 1, "{slots:?}");
    }

    #[test]
    fn sequential_runs_a_level_to_its_end_first() {
        let slots = schedule(2, 3, 1, TrialOrder::Sequential, 0);
        let got: Vec<(usize, u32)> = slots.iter().map(|s| (s.level, s.round)).collect();
        assert_eq!(got, vec![(0, 1), (0, 2), (0, 3), (1, 1), (1, 2), (1, 3)]);
    }
}
