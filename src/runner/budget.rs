//! A gate profile sized to a time budget (`init --budget`). Its trials are timed (a measured
//! window, not a request count), so a job's length is known before it starts whatever the
//! server's speed: each trial is its window plus the tail of the requests still in flight
//! when the window closes (one request's time at that level, from a pilot or a guess). The
//! plan keeps the default first look (4 blocks; on several pairs every pair both ways round,
//! `gate::BlockPlan::on_pairs`) and as many later looks as fit, windows no
//! shorter than [`SHORTEST_WINDOW`]; the smallest drop the plan catches is stated by the
//! gate's own minimum-detectable-drop formula (`stats::decision::decide`).

use std::time::Duration;

use anyhow::{bail, Result};
use statrs::distribution::{ContinuousCDF, StudentsT};

use crate::profile::GateSettings;

/// The shortest measured window a sized trial gets: below it a trial at a long-request
/// level holds a handful of requests, and more blocks buy less than longer trials.
pub const SHORTEST_WINDOW: Duration = Duration::from_secs(20);
/// The longest: beyond it the budget's time goes to more looks, not longer trials.
pub const LONGEST_WINDOW: Duration = Duration::from_secs(120);

/// What the budget is for.
#[derive(Debug, Clone)]
pub struct BudgetAsk {
    /// The whole job, server starts included (`--max-duration` for the run).
    pub budget: Duration,
    /// Slot pairs a round runs on at once.
    pub pairs: u32,
    /// One server's start, until it answers (two start one after the other per block).
    pub server_start: Duration,
    /// Each level's request time: the tail a timed trial waits out after its window.
    pub tails: Vec<Duration>,
    /// Trials per level and arm.
    pub trials: u32,
}

/// The plan that fits.
#[derive(Debug, Clone, PartialEq)]
pub struct Sized {
    /// Each trial's measured window and the warmup window before it.
    pub window: Duration,
    pub warmup: Duration,
    /// Blocks before the first look, and at most (`--blocks`, `--max-blocks`).
    pub first: u32,
    pub max: u32,
    /// One block: both servers' starts and both arms' trials.
    pub block: Duration,
    /// Rounds (a block on every pair at once) to the first look, and to the last.
    pub rounds_first: u32,
    pub rounds_max: u32,
    /// The first look runs each pair one way round only (the budget holds no more than one
    /// round): the pairs' slot effects must be alike for it to decide.
    pub one_way_pairs: bool,
}

impl Sized {
    /// Wall time to the first look.
    pub fn first_look(&self) -> Duration {
        self.block.saturating_mul(self.rounds_first)
    }

    /// Wall time of the whole plan (every look).
    pub fn whole(&self) -> Duration {
        self.block.saturating_mul(self.rounds_max)
    }
}

/// How long one block of timed trials takes: both servers' starts, then each arm's trials,
/// each its warmup, window and tail.
pub fn block_time(ask: &BudgetAsk, window: Duration, warmup: Duration) -> Duration {
    // Saturating: a start or a tail given as years must not overflow (it then fits nothing).
    let trials = (ask.tails.iter())
        .map(|tail| {
            (warmup.saturating_add(window).saturating_add(*tail)).saturating_mul(ask.trials)
        })
        .fold(Duration::ZERO, Duration::saturating_add);
    (ask.server_start.saturating_mul(2)).saturating_add(trials.saturating_mul(2))
}

/// The plan with the most looks whose trials still get [`SHORTEST_WINDOW`], its windows as
/// long as the budget allows (at most [`LONGEST_WINDOW`]). On 4 or more pairs where not even
/// the default first look (every pair both ways round, two rounds) fits, one round of 4
/// blocks, said: its pairs' own slot effects cannot be taken out of their blocks.
pub fn size(ask: &BudgetAsk) -> Result<Sized> {
    if ask.pairs == 0 || ask.tails.is_empty() || ask.trials == 0 {
        bail!("a budget needs at least one pair, one level and one trial");
    }
    let rounds = |blocks: u32| rounds_for(ask, blocks);
    // The default plan on these pairs: its first look, its most blocks, its step.
    let plan = crate::gate::BlockPlan::on_pairs(None, None, ask.pairs as usize)?;
    if let Some(sized) = fitting(ask, &plan) {
        return Ok(sized);
    }
    let one_round = crate::gate::BlockPlan::on_pairs(Some(4), Some(4), ask.pairs as usize)?;
    if rounds(one_round.first) < rounds(plan.first) {
        if let Some(sized) = fitting(ask, &one_round) {
            return Ok(Sized {
                one_way_pairs: true,
                ..sized
            });
        }
    }
    let first = plan.first;
    let shortest = block_time(ask, SHORTEST_WINDOW, warmup_for(SHORTEST_WINDOW));
    bail!(
        "{} is too short: the first look alone ({first} blocks in {} round(s) on {} \
         pair(s), trials of {}s) needs about {}; give more time, more pairs (--pairs), fewer \
         levels (-c) or fewer output tokens (--max-tokens)",
        humantime::format_duration(ask.budget),
        rounds(first),
        ask.pairs,
        SHORTEST_WINDOW.as_secs(),
        humantime::format_duration(Duration::from_secs(
            shortest.saturating_mul(rounds(first)).as_secs()
        ))
    )
}

/// Rounds `blocks` take on the ask's pairs (a block on every pair at once).
fn rounds_for(ask: &BudgetAsk, blocks: u32) -> u32 {
    blocks.div_ceil(ask.pairs)
}

/// `plan` with the most later looks that fit the budget, if any.
fn fitting(ask: &BudgetAsk, plan: &crate::gate::BlockPlan) -> Option<Sized> {
    let rounds = |blocks: u32| rounds_for(ask, blocks);
    let first = plan.first;
    (0..plan.looks()).rev().find_map(|later| {
        // The last look may run less than a step: never past the plan's most blocks.
        let max = (first + plan.step * later).min(plan.max);
        // Each later look runs its step in its own round(s).
        let rounds_max = rounds(first) + later * rounds(plan.step);
        let window = longest_window(ask, ask.budget / rounds_max)?;
        let warmup = warmup_for(window);
        Some(Sized {
            window,
            warmup,
            first,
            max,
            block: block_time(ask, window, warmup),
            rounds_first: rounds(first),
            rounds_max,
            one_way_pairs: false,
        })
    })
}

/// The warmup before a window: a fifth of it, whole seconds (the server reaches a steady
/// batch before requests count).
fn warmup_for(window: Duration) -> Duration {
    Duration::from_secs((window.as_secs() / 5).max(1))
}

/// The longest whole-second window (at most [`LONGEST_WINDOW`], at least
/// [`SHORTEST_WINDOW`]) whose block fits `per_block`; None when even the shortest does not.
fn longest_window(ask: &BudgetAsk, per_block: Duration) -> Option<Duration> {
    let fits = |s: u64| {
        let w = Duration::from_secs(s);
        block_time(ask, w, warmup_for(w)) <= per_block
    };
    let (lo, hi) = (SHORTEST_WINDOW.as_secs(), LONGEST_WINDOW.as_secs());
    (lo..=hi).rev().find(|s| fits(*s)).map(Duration::from_secs)
}

/// The smallest drop a throughput level's test catches with the gate's power at `blocks`
/// blocks, when each server's start moves its throughput by `start_spread` (sd, as a
/// fraction) from block to block: the gate's minimum detectable drop,
/// `1 - exp(-(t_{1-a,df} + t_{power,df}) se)`, with se = sqrt(2) x spread / sqrt(blocks) (a
/// block's ratio carries two starts), df = blocks - 2, and a the throughput test's alpha
/// (`gate::throughput_decision`) split over `looks` and `levels` (Holm's smallest). Never
/// below `min_effect` (a smaller drop never fails). None below 3 blocks (no degree of
/// freedom left).
pub fn smallest_drop(
    settings: &GateSettings,
    blocks: u32,
    looks: u32,
    levels: u32,
    start_spread: f64,
) -> Option<f64> {
    if blocks < 3 || looks == 0 || levels == 0 {
        return None;
    }
    let decision = crate::gate::throughput_decision(settings);
    let df = f64::from(blocks - 2);
    let t = StudentsT::new(0.0, 1.0, df).ok()?;
    let a = decision.main_alpha() / f64::from(looks) / f64::from(levels);
    let se = std::f64::consts::SQRT_2 * start_spread / f64::from(blocks).sqrt();
    let mdd = 1.0 - (-(t.inverse_cdf(1.0 - a) + t.inverse_cdf(decision.power)) * se).exp();
    Some(mdd.max(decision.min_effect))
}

/// Measures each level's tail on a server that is up: one wave of `C` requests at level
/// `C` (every level of `profile`, one trial, no warmup), quietly, into `scratch`; a level's
/// tail is how long its wave took (its slowest request).
pub async fn pilot_tails(
    profile: &crate::profile::Profile,
    scratch: &std::path::Path,
) -> Result<Vec<Duration>> {
    let mut tails = Vec::new();
    for c in profile.sweep.concurrency.clone() {
        let mut one = profile.clone();
        one.sweep.concurrency = vec![c];
        one.sweep.trials = 1;
        one.sweep.requests_per_level = c.max(1);
        one.sweep.warmup_requests = 0;
        one.sweep.duration = None;
        one.sweep.warmup = None;
        one.sweep.cooldown = None;
        one.validate()?;
        let out = scratch.join(format!("c{c}"));
        let env = crate::record::Environment::default();
        let setup = crate::load::BenchSetup::new(one, env, out);
        let outcome = crate::load::run_bench(setup, |_, _| {}).await?;
        let trial = (outcome.result.levels.first()).and_then(|l| l.trials.first());
        let Some(trial) = trial.filter(|t| t.succeeded > 0 && t.window_s.is_finite()) else {
            bail!(
                "the pilot at C={c} measured nothing: {}",
                outcome.problems.join("; ")
            );
        };
        tails.push(Duration::from_secs_f64(trial.window_s.clamp(0.0, 86_400.0)));
    }
    Ok(tails)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(budget_min: u64, pairs: u32) -> BudgetAsk {
        BudgetAsk {
            budget: Duration::from_secs(budget_min * 60),
            pairs,
            server_start: Duration::from_secs(60),
            tails: vec![Duration::from_secs(10); 2],
            trials: 5,
        }
    }

    #[test]
    fn a_sized_plan_fits_its_budget_and_prefers_more_looks() {
        for (minutes, pairs) in [(30, 4), (60, 4), (90, 1), (30, 2), (240, 1)] {
            let a = ask(minutes, pairs);
            let s = size(&a).unwrap();
            assert!(s.whole() <= a.budget, "{minutes}m {pairs}: {s:?}");
            assert!(s.window >= SHORTEST_WINDOW && s.window <= LONGEST_WINDOW);
            assert_eq!(block_time(&a, s.window, s.warmup), s.block);
            // One second more of window would not fit, unless the window is at its cap.
            let w = s.window + Duration::from_secs(1);
            let more = block_time(&a, w, warmup_for(w)) * s.rounds_max;
            assert!(s.window == LONGEST_WINDOW || more > a.budget, "{s:?}");
        }
        // 60 minutes on 4 pairs: the first look is two rounds (every pair both ways round),
        // each later look one more round of 4 blocks.
        let s = size(&ask(60, 4)).unwrap();
        assert_eq!((s.first, s.rounds_first, s.one_way_pairs), (8, 2, false));
        assert_eq!(s.rounds_max, 2 + (s.max - 8) / 4);
        // 20 minutes hold one round only: 4 blocks, one each pair, said.
        let s = size(&ask(20, 4)).unwrap();
        assert_eq!(
            (s.first, s.max, s.rounds_max, s.one_way_pairs),
            (4, 4, 1, true)
        );
        // 3 pairs: rounds of 3 from 6, the last look cut at the default plan's 16.
        let s = size(&ask(600, 3)).unwrap();
        assert_eq!((s.first, s.max, s.rounds_max), (6, 16, 6));
        // More pairs, same budget: at least as many blocks.
        assert!(size(&ask(90, 4)).unwrap().max >= size(&ask(90, 1)).unwrap().max);
    }

    #[test]
    fn a_budget_too_small_for_the_first_look_says_what_it_needs() {
        let err = size(&ask(10, 1)).unwrap_err().to_string();
        assert!(
            err.contains("too short") && err.contains("--pairs"),
            "{err}"
        );
        // Absurd figures refuse, never overflow (one pair: the message multiplies rounds).
        let huge = BudgetAsk {
            server_start: Duration::MAX,
            tails: vec![Duration::MAX; 3],
            ..ask(30, 1)
        };
        let err = size(&huge).unwrap_err().to_string();
        assert!(err.contains("too short"), "{err}");
    }

    #[test]
    fn the_smallest_drop_follows_the_gates_formula() {
        let g = GateSettings::default();
        // 12 blocks, 5 looks, 5 levels, 3% start spread: t_{1-0.00032,10} = 4.882 and
        // t_{0.8,10} = 0.879 (the t density integrated numerically, apart from statrs),
        // se = 1.2247% -> 1 - exp(-0.07056) = 6.81%.
        let d = smallest_drop(&g, 12, 5, 5, 0.03).unwrap();
        assert!((d - 0.0681).abs() < 0.0005, "{d}");
        // A quiet runner: the floor is the smallest drop that may fail at all.
        assert_eq!(smallest_drop(&g, 12, 5, 5, 0.001), Some(g.min_effect));
        // More blocks, smaller drop; no degrees of freedom, no figure.
        assert!(smallest_drop(&g, 12, 5, 5, 0.03) < smallest_drop(&g, 4, 1, 5, 0.03));
        assert_eq!(smallest_drop(&g, 2, 1, 5, 0.03), None);
    }
}
