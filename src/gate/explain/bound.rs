//! One figure at one level, head against base: the gate's estimator and a bound at the
//! family's per-test level.

use statrs::distribution::{ContinuousCDF, StudentsT};

use super::closed::closed_levels;
use super::figure::Figure;
use super::figure::Scale;
use super::moved::{Moved, EXPLAIN_ALPHA};
use super::together::LevelBlocks;
use crate::gate::block_groups::numbered_blocks_of;
use crate::record::TrialResult;
use crate::stats::basic::mean;
use crate::stats::decision::{crossover_level, relative_level};

/// What one figure's comparison at one level came to.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Compared {
    /// Beyond noise and beyond the figure's floor.
    Moved(Moved),
    /// Compared, and not listed.
    Within,
    /// Recorded, but the blocks' design cannot bound it (the gate's level would not be
    /// estimable either): nothing is listed.
    NotEstimable,
    /// Fewer than 3 values in an arm.
    Absent,
}

/// A figure's value in a trial on the scale it is compared on (logs for ratio figures).
fn on_scale(f: Figure, t: &TrialResult) -> Option<f64> {
    f.of(t)
        .map(|v| if f.scale() == Scale::Ratio { v.ln() } else { v })
}

/// Whether the comparison of `f` at one level could list it: recorded in both arms, estimable,
/// and not one value in every trial of both (no errors at all, a fixed prompt length), which
/// no bound can call a change. Only these share the family's 5%.
pub(super) fn can_list(f: Figure, base: &[TrialResult], head: &[TrialResult]) -> bool {
    can_vary(f, base, head)
        && !matches!(
            compare(f, base, head, EXPLAIN_ALPHA),
            Compared::Absent | Compared::NotEstimable
        )
}

/// One figure at one level. In a run in blocks, the blocks as the gate groups them
/// (`gate::block_groups::blocks_of`) and its estimator, `crossover_level`: the difference of block
/// means paired by slot orientation, so a slot effect cancels, with the blocks' own spread
/// (start effects) in its se and df. Ratio figures on logs, gauges and rates on their own
/// scale (the estimator only differences numbers within a block). Else Welch on the trials.
pub(super) fn compare(
    f: Figure,
    base: &[TrialResult],
    head: &[TrialResult],
    alpha: f64,
) -> Compared {
    let on_scale = |t: &TrialResult| on_scale(f, t);
    let values =
        |trials: &[TrialResult]| -> Vec<f64> { trials.iter().filter_map(on_scale).collect() };
    let (bv, hv) = (values(base), values(head));
    if bv.len() < 3 || hv.len() < 3 {
        return Compared::Absent;
    }
    let blocks = crate::gate::block_groups::blocks_of(base, head, on_scale);
    let test = if blocks.is_empty() {
        relative_level(&bv, &hv, &[], &[], 0.0)
    } else {
        let test = crossover_level(&blocks, None, 0.0);
        if !test.estimable() {
            return Compared::NotEstimable;
        }
        test
    };
    let (Some(d), Some(se)) = (test.d, test.se) else {
        return Compared::Absent;
    };
    judged(f, (&bv, &hv), (d, se, test.df), alpha, None)
}

/// One figure at every level of a run in blocks, the levels read together (`closed`): the
/// change averaged over the levels where two or more could be bounded (None otherwise), and
/// per level what the closed test at `alpha` (the figure's share of the family) came to, with
/// the level's own bound at that share. A level without blocks (trials without a block
/// number) is compared alone as [`compare`] does, at the share over the levels.
pub(super) fn compare_in_blocks(
    f: Figure,
    pairs: &[(&[TrialResult], &[TrialResult])],
    alpha: f64,
) -> (Option<Compared>, Vec<Compared>) {
    let on_scale = |t: &TrialResult| on_scale(f, t);
    let values =
        |trials: &[TrialResult]| -> Vec<f64> { trials.iter().filter_map(on_scale).collect() };
    let levels: Vec<LevelBlocks> = (pairs.iter())
        .map(|(b, h)| {
            // A level that cannot list the figure takes no part in the closed test.
            let blocks = if can_list(f, b, h) {
                numbered_blocks_of(b, h, on_scale)
            } else {
                Vec::new()
            };
            LevelBlocks::of(&blocks)
        })
        .collect();
    let closed = closed_levels(&levels, alpha);
    // The arms' values averaged over the levels in the average (the levels' own means).
    let (mut base_means, mut head_means) = (Vec::new(), Vec::new());
    let per_level = (pairs.iter().zip(closed.levels))
        .map(|((b, h), (own, listed))| {
            let (bv, hv) = (values(b), values(h));
            if bv.len() < 3 || hv.len() < 3 {
                return Compared::Absent;
            }
            if numbered_blocks_of(b, h, on_scale).is_empty() {
                // Outside the closed test: its own share of the figure's.
                return compare(f, b, h, alpha / pairs.len() as f64);
            }
            match own {
                Some(t) => {
                    base_means.push(mean(&bv));
                    head_means.push(mean(&hv));
                    judged(f, (&bv, &hv), (t.d, t.se, t.df), alpha, Some(listed))
                }
                None if can_vary(f, b, h) => Compared::NotEstimable,
                None => Compared::Within,
            }
        })
        .collect();
    let average = (closed.average).filter(|_| base_means.len() >= 2).map(|t| {
        let means = (&base_means[..], &head_means[..]);
        judged(
            f,
            means,
            (t.d, t.se, t.df),
            alpha,
            Some(closed.average_moved),
        )
    });
    (average, per_level)
}

/// Whether `f` takes more than one value over both arms' trials.
fn can_vary(f: Figure, base: &[TrialResult], head: &[TrialResult]) -> bool {
    let mut all = (base.iter().chain(head)).filter_map(|t| on_scale(f, t));
    let Some(first) = all.next() else {
        return false;
    };
    !all.all(|v| v == first)
}

/// A comparison's estimate `d`, its se and df judged: its bound at `alpha`, beyond noise
/// where the bound excludes "unchanged" (or, given, where the closed test over levels listed
/// it: its own bound at the same level then excludes it too), and beyond the figure's floor.
fn judged(
    f: Figure,
    (bv, hv): (&[f64], &[f64]),
    (d, se, df): (f64, f64, f64),
    alpha: f64,
    listed: Option<bool>,
) -> Compared {
    let ratio = f.scale() == Scale::Ratio;
    let half = if se > 0.0 {
        match StudentsT::new(0.0, 1.0, df.max(1.0)) {
            Ok(t) => t.inverse_cdf(1.0 - alpha / 2.0) * se,
            Err(_) => return Compared::Absent,
        }
    } else {
        0.0
    };
    let (low, high) = (d - half, d + half);
    let beyond_noise = listed.unwrap_or(low > 0.0 || high < 0.0);
    let beyond_floor = d.abs()
        >= if ratio {
            (1.0 + f.floor()).ln()
        } else {
            f.floor()
        };
    if !(beyond_noise && beyond_floor) {
        return Compared::Within;
    }
    let back = |x: f64| if ratio { x.exp() } else { x };
    Compared::Moved(Moved {
        figure: f,
        base: back(mean(bv)),
        head: back(mean(hv)),
        change: back(d),
        low: back(low),
        high: back(high),
        ratio_scale: ratio,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The per-test level `explain` uses for one level: 5% over the figures that could be
    /// listed.
    fn family_alpha(base: &[TrialResult], head: &[TrialResult]) -> f64 {
        let tests = (Figure::ALL.iter())
            .filter(|&&f| can_list(f, base, head))
            .count();
        EXPLAIN_ALPHA / tests.max(1) as f64
    }

    /// A/A: both arms drawn from one distribution (latencies lognormal, CV 3 to 15%; tokens
    /// per chunk noisy; lengths fixed), 400 seeded replications of 5 trials a side: the share
    /// of runs that list any figure stays within the family level (issue 27: at most 1
    /// false line in 20 runs; 12 of 400 with the family counted over the figures that vary).
    #[test]
    fn an_unchanged_run_lists_nothing_in_at_least_19_of_20() {
        use crate::stats::summary::Percentiles;
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(27);
        let mut normal = move || {
            // Box-Muller, enough for a test.
            let (u, v): (f64, f64) = (rng.gen_range(1e-12..1.0), rng.gen_range(0.0..1.0));
            (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
        };
        let mut trial = |n: u32| {
            let mut t = crate::record::fake::trial(n, 1000.0 * (0.02 * normal()).exp());
            let mut p = |median: f64, cv: f64| {
                let p50 = median * (cv * normal()).exp();
                Some(Percentiles {
                    p50,
                    p90: p50 * 1.5,
                    p99: p50 * 2.0 * (cv * normal()).exp(),
                    mean: p50,
                    min: p50 / 2.0,
                    max: p50 * 3.0,
                    count: 100,
                    relative_error: None,
                })
            };
            t.ttft_ms = p(40.0, 0.15);
            t.itl_ms = p(10.0, 0.03);
            t.e2e_ms = p(400.0, 0.05);
            t.input_tokens = 40;
            t
        };
        let runs = 400;
        let mut listed = 0;
        for _ in 0..runs {
            let base: Vec<TrialResult> = (1..=5).map(&mut trial).collect();
            let head: Vec<TrialResult> = (1..=5).map(&mut trial).collect();
            let alpha = family_alpha(&base, &head);
            if Figure::ALL
                .iter()
                .any(|&f| matches!(compare(f, &base, &head, alpha), Compared::Moved(_)))
            {
                listed += 1;
            }
        }
        assert!(
            listed * 20 <= runs,
            "{listed} of {runs} unchanged runs listed a figure"
        );
    }

    /// One relative job in blocks, as `bench --server-command --base-server-command` runs
    /// it: `blocks` blocks of 3 trials an arm, the head on slot 1 in odd blocks. Slot 1 is
    /// `slot` faster (latencies shorter by that share, ln); each server start shifts its
    /// latencies by a normal of sd `start_sd` (ln); the head's ITL changed by `itl_change`.
    /// Within a trial: ITL p50 CV 1%, TTFT 5%, E2E 2%, p99s twice that.
    fn job_in_blocks(
        normal: &mut impl FnMut() -> f64,
        blocks: u32,
        slot: f64,
        start_sd: f64,
        itl_change: f64,
    ) -> (Vec<TrialResult>, Vec<TrialResult>) {
        use crate::stats::summary::Percentiles;
        let (mut base, mut head) = (Vec::new(), Vec::new());
        for b in 1..=blocks {
            let head_slot = b % 2;
            for (arm, on_slot, change) in [
                (&mut base, 1 - head_slot, 0.0),
                (&mut head, head_slot, itl_change),
            ] {
                let start = start_sd * normal();
                let shift = start - slot * f64::from(on_slot);
                for n in 1..=3 {
                    let mut t = crate::record::fake::trial(n, 1000.0 * (-shift).exp());
                    t.block = Some(b);
                    t.slot = Some(on_slot);
                    let mut p = |median: f64, cv: f64| {
                        let p50 = median * (shift + cv * normal()).exp();
                        Some(Percentiles {
                            p50,
                            p90: p50 * 1.5,
                            p99: p50 * 2.0 * (2.0 * cv * normal()).exp(),
                            mean: p50,
                            min: p50 / 2.0,
                            max: p50 * 3.0,
                            count: 100,
                            relative_error: None,
                        })
                    };
                    t.ttft_ms = p(40.0, 0.05);
                    t.itl_ms = p(10.0 * (1.0 + change), 0.01);
                    t.e2e_ms = p(400.0, 0.02);
                    t.input_tokens = 40;
                    arm.push(t);
                }
            }
        }
        (base, head)
    }

    /// Of `runs` seeded 4-block jobs (one level, so Bonferroni over the figures that could be
    /// listed: both percentiles of TTFT and ITL, E2E and output tokens per request): how
    /// many list ITL p50, how many list any figure, and how many would have listed ITL p50
    /// with the unpaired test on block means explain used before (for comparison).
    fn listed_in_blocks(
        seed: u64,
        runs: usize,
        (slot, start_sd): (f64, f64),
        itl_change: f64,
    ) -> (usize, usize, usize) {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let mut normal = move || {
            let (u, v): (f64, f64) = (rng.gen_range(1e-12..1.0), rng.gen_range(0.0..1.0));
            (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
        };
        let (mut itl, mut any, mut unpaired) = (0, 0, 0);
        for _ in 0..runs {
            let (base, head) = job_in_blocks(&mut normal, 4, slot, start_sd, itl_change);
            let alpha = family_alpha(&base, &head);
            let moved: Vec<Figure> = (Figure::ALL.iter())
                .filter_map(|&f| match compare(f, &base, &head, alpha) {
                    Compared::Moved(m) => Some(m.figure),
                    _ => None,
                })
                .collect();
            itl += usize::from(moved.contains(&Figure::ItlP50));
            any += usize::from(!moved.is_empty());
            let ln_itl = |trials: &[TrialResult]| -> (Vec<f64>, Vec<u32>) {
                (trials.iter())
                    .map(|t| (Figure::ItlP50.of(t).unwrap().ln(), t.block.unwrap()))
                    .unzip()
            };
            let ((bv, bl), (hv, hl)) = (ln_itl(&base), ln_itl(&head));
            let old = relative_level(&bv, &hv, &bl, &hl, 0.0);
            if let (Some(d), Some(se)) = (old.d, old.se) {
                let q = StudentsT::new(0.0, 1.0, old.df.max(1.0)).unwrap();
                let half = q.inverse_cdf(1.0 - alpha / 2.0) * se;
                unpaired += usize::from(d - half > 0.0 && d >= 1.05f64.ln());
            }
        }
        (itl, any, unpaired)
    }

    /// Issue 34: a 4% slot effect cancels by orientation instead of widening the bounds: a
    /// real +10% ITL change is listed as often as without it (the same seeded jobs), in at
    /// least 80% of 4-block jobs, and an unchanged job lists anything in at most 5%, also
    /// where each server start shifts its latencies by 3% (the blocks' own spread then set
    /// apart from the trials'). 200 seeded jobs each; the 2,000-job figures (92.4% listed
    /// with or without the slot effect, 0.0% of unchanged jobs; 17.9% and 0.2% at a 3% start
    /// spread, where the starts hide a 10% change as the gate's own bound would):
    /// `cargo test --lib explain_in_blocks_measured -- --ignored --nocapture`.
    #[test]
    fn in_blocks_a_slot_effect_neither_hides_nor_makes_a_change() {
        let (itl, _, _) = listed_in_blocks(34, 200, (0.04, 0.005), 0.10);
        let (without, _, _) = listed_in_blocks(34, 200, (0.0, 0.005), 0.10);
        assert_eq!(itl, without, "the slot effect moved the listing");
        assert!(itl * 100 >= 80 * 200, "+10% ITL listed in {itl} of 200");
        for (seed, start_sd) in [(35, 0.005), (36, 0.03)] {
            let (_, any, _) = listed_in_blocks(seed, 200, (0.04, start_sd), 0.0);
            assert!(
                any * 100 <= 5 * 200,
                "unchanged, start spread {start_sd}: {any} of 200 listed a figure"
            );
        }
    }

    #[test]
    #[ignore = "a measurement: 12,000 simulated jobs"]
    fn explain_in_blocks_measured() {
        for (slot, start_sd) in [(0.0, 0.005), (0.04, 0.005), (0.04, 0.03)] {
            let (itl, _, unpaired) = listed_in_blocks(340, 2000, (slot, start_sd), 0.10);
            let (_, any, _) = listed_in_blocks(341, 2000, (slot, start_sd), 0.0);
            println!(
                "slot effect {:.0}%, start spread {:.1}%: +10% ITL listed in {:.1}% of 2000 \
                 4-block jobs (the unpaired test on block means: {:.1}%); an unchanged job \
                 listed anything in {:.1}%",
                slot * 100.0,
                start_sd * 100.0,
                itl as f64 / 20.0,
                unpaired as f64 / 20.0,
                any as f64 / 20.0
            );
        }
    }

    #[test]
    fn one_block_lists_nothing_and_says_so() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        let mut normal = move || rng.gen_range(-1.0..1.0);
        // A 30% ITL change, but one block: one orientation, no calibration.
        let (base, head) = job_in_blocks(&mut normal, 1, 0.04, 0.005, 0.3);
        let alpha = EXPLAIN_ALPHA / Figure::ALL.len() as f64;
        assert_eq!(
            compare(Figure::ItlP50, &base, &head, alpha),
            Compared::NotEstimable
        );
    }

    #[test]
    fn a_real_change_is_listed_with_its_bounds() {
        let trials = |ttft: f64| -> Vec<TrialResult> {
            (1..=5)
                .map(|n| {
                    let mut t = crate::record::fake::trial(n, 1000.0);
                    let p50 = ttft * (1.0 + 0.01 * f64::from(n));
                    t.ttft_ms = Some(crate::stats::summary::Percentiles {
                        p50,
                        p90: p50,
                        p99: p50,
                        mean: p50,
                        min: p50,
                        max: p50,
                        count: 10,
                        relative_error: None,
                    });
                    t
                })
                .collect()
        };
        let Compared::Moved(m) = compare(Figure::TtftP50, &trials(40.0), &trials(60.0), 0.001)
        else {
            panic!("a 50% change not listed")
        };
        assert!((m.change - 1.5).abs() < 1e-9, "{m:?}");
        assert!(m.low < 1.5 && m.high > 1.5 && m.low > 1.0, "{m:?}");
        // 3% is below the 5% floor: not listed, however clear.
        assert_eq!(
            compare(Figure::TtftP50, &trials(40.0), &trials(41.2), 0.001),
            Compared::Within
        );
    }
}
