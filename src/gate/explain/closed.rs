//! Whether one figure moved, and at which levels, in a run in blocks, at the figure's share
//! of the family's 5%: its change averaged over the levels (`together` over all of them) and
//! each level's own change, read by one closed test (Marcus, Peritz and Gabriel) over those
//! hypotheses, so that every claim, the average's and each level's, holds the share together.
//!
//! Why: split over every level and figure (about 50 comparisons in a 5-level profile), each
//! test of a 4-block job (2 df) needed t > 31.6, and a +10% ITL change was listed in none of
//! them (issue 48). Averaged over the levels, a change they share is seen with the same 2 df
//! and a smaller spread (`together`: honest whatever the levels share); one level's own test
//! keeps its 2 df, so at 4 blocks a level is often not told apart even where the average is.
//!
//! The closed test rejects a hypothesis when every intersection holding it is rejected by
//! its local test: a set of levels S by the mean over S at half the share or its smallest
//! one-level p-value at the other half over |S| (so a change at one level is not drowned by
//! the levels that did not move); one level alone at the whole share; the average alone at the
//! whole share, and the average with a set S by the average at `AVERAGE_SHARE` of it or the
//! set's smallest p-value at the rest over |S|. So the average is claimed at 90% of the share
//! in practice, and a level with strong evidence of its own (one measured over many more
//! blocks by a sequential plan than the others, which the average over common blocks
//! leaves out) is claimed even where the average is not. Unchanged hypotheses are claimed
//! with a chance of at most the share (strong control); over the figures (Bonferroni) an
//! unchanged run lists anything in at most 5%.

use super::together::{together, LevelBlocks, Together};

/// Levels enumerated in full (2^12 sets); above that, the average at `AVERAGE_SHARE` of the
/// share and Holm over the levels at the rest (Bonferroni between the two), which needs no
/// enumeration.
const MAX_ENUMERATED: usize = 12;

/// The part of the share the average's test takes where it is tested with levels: most of
/// it, the average being what a short job can see (0.8 cost 4-7 points of table 14's +10%
/// ITL cells at 4 blocks); the rest lets a level with strong evidence of its own past it.
const AVERAGE_SHARE: f64 = 0.9;

/// What one figure's levels came to: the change averaged over the levels that could be
/// bounded and whether it moved at `alpha`; per level its own test (None where it cannot be
/// bounded) and whether the closed test lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct ClosedLevels {
    pub average: Option<Together>,
    pub average_moved: bool,
    pub levels: Vec<(Option<Together>, bool)>,
}

/// See the module doc.
pub fn closed_levels(levels: &[LevelBlocks], alpha: f64) -> ClosedLevels {
    let own: Vec<Option<Together>> = levels.iter().map(|l| together(&[l])).collect();
    // Only the levels that can be bounded take part; the others are never listed.
    let testable: Vec<usize> = (0..levels.len()).filter(|&i| own[i].is_some()).collect();
    let chosen: Vec<&LevelBlocks> = testable.iter().map(|&i| &levels[i]).collect();
    let p: Vec<f64> = (testable.iter())
        .map(|&i| own[i].map_or(1.0, |t| t.p))
        .collect();
    let average = together(&chosen);
    let p_average = average.map_or(1.0, |t| t.p);
    let (average_moved, listed) = if testable.len() == 1 {
        // One level: the average is that level, one hypothesis at the whole share.
        (p[0] <= alpha, vec![p[0] <= alpha])
    } else if testable.len() > MAX_ENUMERATED {
        (
            p_average <= AVERAGE_SHARE * alpha,
            holm(&p, (1.0 - AVERAGE_SHARE) * alpha),
        )
    } else {
        closed(&chosen, &p, p_average, alpha)
    };
    let mut out: Vec<(Option<Together>, bool)> = own.into_iter().map(|t| (t, false)).collect();
    for (&i, l) in testable.iter().zip(listed) {
        out[i].1 = l;
    }
    ClosedLevels {
        average,
        average_moved,
        levels: out,
    }
}

/// The closed test over the average and the levels: every set of levels (a bit mask) tested
/// locally without the average and with it; the average is claimed when every set with it is
/// rejected, a level when every set holding it is, with the average or without.
fn closed(levels: &[&LevelBlocks], p: &[f64], p_average: f64, alpha: f64) -> (bool, Vec<bool>) {
    let k = levels.len();
    let sets = 1usize << k;
    // Index 0 (no level): the average alone.
    let (mut plain, mut with_average) = (vec![true; sets], vec![p_average <= alpha; sets]);
    for mask in 1..sets {
        let members: Vec<usize> = (0..k).filter(|i| mask & (1 << i) != 0).collect();
        let size = members.len() as f64;
        let min_p = members.iter().map(|&i| p[i]).fold(1.0, f64::min);
        plain[mask] = if let [only] = members[..] {
            p[only] <= alpha
        } else {
            let set: Vec<&LevelBlocks> = members.iter().map(|&i| levels[i]).collect();
            min_p <= alpha / (2.0 * size) || together(&set).is_some_and(|t| t.p <= alpha / 2.0)
        };
        with_average[mask] =
            p_average <= AVERAGE_SHARE * alpha || min_p <= (1.0 - AVERAGE_SHARE) * alpha / size;
    }
    let average = with_average.iter().all(|&r| r);
    let listed = (0..k)
        .map(|i| (1..sets).all(|m| m & (1 << i) == 0 || (plain[m] && with_average[m])))
        .collect();
    (average, listed)
}

/// Holm's step-down over the levels' own p-values.
fn holm(p: &[f64], alpha: f64) -> Vec<bool> {
    let mut order: Vec<usize> = (0..p.len()).collect();
    order.sort_by(|&a, &b| p[a].total_cmp(&p[b]));
    let mut out = vec![false; p.len()];
    for (rank, &i) in order.iter().enumerate() {
        if p[i] > alpha / (p.len() - rank) as f64 {
            break;
        }
        out[i] = true;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::decision::Block;
    use rand::{Rng, SeedableRng};

    /// A normal from the seeded generator (Box-Muller, enough for a test).
    fn normal(rng: &mut impl Rng) -> f64 {
        let (u, v): (f64, f64) = (rng.gen_range(1e-12..1.0), rng.gen_range(0.0..1.0));
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    }

    /// `levels` levels of one figure in `blocks` blocks of 3 trials an arm (ln; trials 1%,
    /// each start 0.5%, `shared` of the start the same at every level, a 4% slot effect),
    /// the head shifted by `shift[l]` at level l.
    fn job(rng: &mut impl Rng, blocks: u32, shift: &[f64], shared: bool) -> Vec<LevelBlocks> {
        let mut per_level: Vec<Vec<(u32, Block)>> = vec![Vec::new(); shift.len()];
        for n in 1..=blocks {
            let head_slot = n % 2;
            let slot = if head_slot == 1 { 0.04 } else { -0.04 };
            let (ub, uh) = (0.005 * normal(rng), 0.005 * normal(rng));
            for (l, &s) in shift.iter().enumerate() {
                let (ub, uh) = if shared {
                    (ub, uh)
                } else {
                    (0.005 * normal(rng), 0.005 * normal(rng))
                };
                let base = (0..3).map(|_| ub + 0.01 * normal(rng)).collect();
                let head = (0..3).map(|_| s + slot + uh + 0.01 * normal(rng)).collect();
                per_level[l].push((
                    n,
                    Block {
                        base,
                        head,
                        head_slot,
                    },
                ));
            }
        }
        per_level.iter().map(|b| LevelBlocks::of(b)).collect()
    }

    /// Issue 48 item 5: 4 blocks, 5 levels, the share of 5% over 8 figures: +10% at every
    /// level is listed (on average over the levels) in at least 80% of 200 seeded jobs, where
    /// the old split over 8 x 5 tests listed it (at some level) in fewer of the same jobs; a
    /// +50% change at one level only is listed there and nowhere else in at least half; an
    /// unchanged figure lists nothing in at least 199 of 200 (its share is 0.6%), with starts
    /// shared by the levels or not.
    #[test]
    fn four_blocks_five_levels_list_a_ten_percent_change() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(485);
        let alpha = 0.05 / 8.0;
        let (mut listed, mut old, mut lone, mut aa) = (0, 0, 0, 0);
        for i in 0..200 {
            let shared = i % 2 == 0;
            let all = job(&mut rng, 4, &[0.0953; 5], shared);
            let out = closed_levels(&all, alpha);
            listed += usize::from(out.average_moved);
            old +=
                usize::from((out.levels.iter()).any(|o| o.0.is_some_and(|t| t.p <= alpha / 5.0)));
            let one = job(&mut rng, 4, &[0.0, 0.0, 0.0, 0.0, 0.4], shared);
            let out = closed_levels(&one, alpha).levels;
            lone += usize::from(out[4].1 && !out[..4].iter().any(|o| o.1));
            let same = closed_levels(&job(&mut rng, 4, &[0.0; 5], shared), alpha);
            aa += usize::from(same.average_moved || same.levels.iter().any(|o| o.1));
        }
        assert!(listed >= 160, "+10% listed in {listed} of 200");
        assert!(old < listed, "the old split listed {old} of 200");
        assert!(
            lone >= 100,
            "a change at one level listed there in {lone} of 200"
        );
        assert!(aa <= 1, "an unchanged figure listed in {aa} of 200");
    }

    #[test]
    fn a_level_that_cannot_be_bounded_is_never_listed() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        let mut levels = job(&mut rng, 6, &[0.3, 0.3], false);
        levels.push(LevelBlocks::of(&[]));
        let out = closed_levels(&levels, 0.01);
        assert!(out.average_moved, "{out:?}");
        let out = out.levels;
        assert!(out[0].1 && out[1].1, "{out:?}");
        assert_eq!(out[2], (None, false));
    }

    /// A sequential plan measures undecided levels in more blocks: a change at one level seen
    /// over 12 blocks is listed there although the average over the 4 blocks every level
    /// measured does not move.
    #[test]
    fn a_level_measured_longer_is_listed_on_its_own_evidence() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        let mut levels = job(&mut rng, 4, &[0.0; 4], false);
        levels.extend(job(&mut rng, 12, &[0.08], false));
        let out = closed_levels(&levels, 0.05 / 8.0);
        assert!(!out.average_moved, "{out:?}");
        assert!(out.levels[4].1, "{out:?}");
        assert!(!out.levels[..4].iter().any(|l| l.1), "{out:?}");
    }

    #[test]
    fn holm_steps_down() {
        assert_eq!(holm(&[0.001, 0.02, 0.04], 0.05), vec![true, true, true]);
        assert_eq!(holm(&[0.02, 0.001, 0.04], 0.05), vec![true, true, true]);
        assert_eq!(holm(&[0.02, 0.03, 0.04], 0.05), vec![false, false, false]);
        assert_eq!(holm(&[0.001, 0.03, 0.04], 0.05), vec![true, false, false]);
    }

    /// Many levels fall back to Holm: the same levels listed as the closed test would with
    /// Bonferroni sets.
    #[test]
    fn many_levels_are_read_by_holm() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(2);
        let mut shift = vec![0.0; 14];
        shift[13] = 0.5;
        let out = closed_levels(&job(&mut rng, 8, &shift, false), 0.01).levels;
        assert!(out[13].1, "{out:?}");
        assert!(!out[..13].iter().any(|o| o.1), "{out:?}");
    }
}
