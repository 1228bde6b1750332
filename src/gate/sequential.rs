//! The sequential plan of a relative run in blocks: how many blocks run before the gate
//! looks, how many at most, and which levels a look leaves open for the next pair of blocks.
//! The fail side's alpha is split over the looks the plan allows (`per_look` in compare.rs),
//! so false failures stay within the family alpha however many looks are taken.

use anyhow::{bail, Result};

use super::verdict::{LevelStatus, Verdict};

/// The most blocks one run may take (each starts two servers).
pub const MAX_BLOCKS: u32 = 64;

/// The most blocks of a relative run without `--max-blocks`, or the first look's + 8 where
/// that is more (`--blocks 12`, several pairs). With a start spread of 3% (a real
/// llama-server here: 2.4-3.6%) 12 blocks passed an unchanged server 80.2% of the time once
/// the pass side was split over the looks (issue 34), 16 blocks 95.8% (96.2% with a
/// same-night calibration, which then catches 74.5% of 5% drops where 12 caught 52.1%); at
/// spreads up to 2% the two plans differ by under half a block on average
/// (benches/gate_crossover.rs, table 4).
pub const DEFAULT_MOST_BLOCKS: u32 = 16;

/// Blocks the looks after the first may add at least, without `--max-blocks`.
const MORE_BLOCKS: u32 = 8;

/// The most blocks of a relative run whose first look is `first` blocks, without
/// `--max-blocks`: [`DEFAULT_MOST_BLOCKS`], or `first` + [`MORE_BLOCKS`] where that is more,
/// never past [`MAX_BLOCKS`].
fn default_most(first: u32) -> u32 {
    first
        .saturating_add(MORE_BLOCKS)
        .clamp(DEFAULT_MOST_BLOCKS, MAX_BLOCKS)
}

/// The block plan a run follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockPlan {
    /// Blocks before the first look.
    pub first: u32,
    /// Blocks in all, at most.
    pub max: u32,
    /// Blocks each later look adds: a pair (one each way round) on one pair of slots, a
    /// round (one on every pair) on several.
    pub step: u32,
}

impl BlockPlan {
    /// The plan from `--blocks` and `--max-blocks` (None: the defaults), checked. A relative
    /// run looks after 4 blocks and may add blocks two at a time while a level is undecided,
    /// up to [`DEFAULT_MOST_BLOCKS`] (or `--blocks` + 8 where more): with a start spread
    /// near 3% (a real llama-server) 8 blocks passed an unchanged server 43% of the time, 12
    /// blocks 80%, 16 blocks 96% (benches/gate_crossover.rs, table 4). One server alone runs
    /// one block and never adds any.
    pub fn new(first: Option<u32>, max: Option<u32>, relative: bool) -> Result<BlockPlan> {
        let first = first.unwrap_or(if relative { 4 } else { 1 });
        if first == 0 || first > MAX_BLOCKS {
            bail!("--blocks: {first} is outside 1..={MAX_BLOCKS}");
        }
        let max = max.unwrap_or(if relative { default_most(first) } else { first });
        if max < first || max > MAX_BLOCKS {
            bail!("--max-blocks: {max} is outside {first}..={MAX_BLOCKS} (at least --blocks)");
        }
        if !relative && max > first {
            bail!("--max-blocks needs --base-server-command: only a relative run adds blocks");
        }
        Ok(BlockPlan {
            first,
            max,
            step: 2,
        })
    }

    /// The plan of a relative run on `pairs` pairs of slots at once (`--slots` once per
    /// pair), from the same flags. Every look runs whole rounds, and the first waits until
    /// every pair has run both ways round: a pair's slot effect is only taken out of its
    /// blocks once it ran both ways (stats::decision::groups), and a first look of one block
    /// per pair, with slot effects of -3% to +5% by pair, caught a 5% drop 63 points less
    /// often than one pair with the same blocks (26% against 89%); on this plan 99.2% /
    /// 93.8% against 99.6% / 96.1% at 1% / 2% start spreads (docs/gate-calibration.md, table
    /// R1). Later looks add a round, so no pair sits idle and each pair's blocks keep
    /// alternating. `--max-blocks` given is kept (a first look of fewer blocks, said by the
    /// run); by default the most is [`DEFAULT_MOST_BLOCKS`] or the first look's blocks + 8
    /// where that is more, as on one pair (on 4 pairs 8, then 12 and 16: with 12 at most a
    /// 5% drop was caught 66.9% of the time at a 2% start spread where one pair with the same
    /// blocks caught it 87.8%; the fourth round gives every pair two blocks each way).
    pub fn on_pairs(first: Option<u32>, max: Option<u32>, pairs: usize) -> Result<BlockPlan> {
        let one = BlockPlan::new(first, max, true)?;
        let pairs = u32::try_from(pairs).unwrap_or(u32::MAX);
        if pairs < 2 {
            return Ok(one);
        }
        let both_ways = pairs.saturating_mul(2).min(MAX_BLOCKS);
        let wanted = one.first.max(both_ways);
        let max = max.unwrap_or(default_most(wanted));
        Ok(BlockPlan {
            first: wanted.min(max),
            max,
            step: pairs.min(MAX_BLOCKS),
        })
    }

    /// The plan of a run in blocks from its flags: [`BlockPlan::on_pairs`] for a relative
    /// run, [`BlockPlan::new`] for one server alone (which never adds blocks).
    pub fn of_run(
        first: Option<u32>,
        max: Option<u32>,
        relative: bool,
        pairs: usize,
    ) -> Result<BlockPlan> {
        match relative {
            true => BlockPlan::on_pairs(first, max, pairs),
            false => BlockPlan::new(first, max, false),
        }
    }

    /// How many times the gate may look: after the first blocks, then after each step.
    pub fn looks(&self) -> u32 {
        1 + (self.max - self.first).div_ceil(self.step.max(1))
    }

    /// How many blocks the next chunk runs after `done` blocks: the first blocks, then a
    /// step, never past the maximum.
    pub fn next_chunk(&self, done: u32) -> u32 {
        match done {
            0 => self.first,
            _ => self.step.min(self.max.saturating_sub(done)),
        }
    }
}

/// The levels a verdict left undecided (any metric): where another pair of blocks may
/// decide. None once a level regressed: the verdict is then a regression whatever the
/// others say (and benches/gate_crossover.rs calibrated the plan stopping there).
pub fn undecided_levels(verdict: &Verdict) -> Vec<u32> {
    if (verdict.levels.iter()).any(|l| l.status == LevelStatus::Regression) {
        return Vec::new();
    }
    let mut levels: Vec<u32> = (verdict.levels.iter())
        .filter(|l| l.status == LevelStatus::Inconclusive)
        .map(|l| l.concurrency)
        .collect();
    levels.sort_unstable();
    levels.dedup();
    levels
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_counts_its_looks_and_chunks() {
        let plan = BlockPlan::new(None, None, true).unwrap();
        assert_eq!((plan.first, plan.max, plan.looks()), (4, 16, 7));
        assert_eq!(
            (plan.next_chunk(0), plan.next_chunk(4), plan.next_chunk(15)),
            (4, 2, 1)
        );
        // --blocks given: 16 at most, or 8 more where that is more.
        let plan = BlockPlan::new(Some(2), None, true).unwrap();
        assert_eq!((plan.first, plan.max), (2, 16));
        let plan = BlockPlan::new(Some(12), None, true).unwrap();
        assert_eq!((plan.first, plan.max), (12, 20));
        // A first look near the most blocks one run may take: the default most stops there.
        let plan = BlockPlan::new(Some(60), None, true).unwrap();
        assert_eq!((plan.first, plan.max), (60, MAX_BLOCKS));
        assert_eq!(BlockPlan::new(None, None, false).unwrap().looks(), 1);
        let err = BlockPlan::new(None, Some(2), true).unwrap_err();
        assert!(err.to_string().contains("--max-blocks"), "{err}");
        let err = BlockPlan::new(Some(1), Some(3), false).unwrap_err();
        assert!(err.to_string().contains("--base-server-command"), "{err}");
        assert!(BlockPlan::new(Some(0), None, true).is_err());
    }

    #[test]
    fn on_several_pairs_every_look_is_whole_rounds_and_the_first_runs_each_pair_both_ways() {
        let plan = |first, max, pairs| {
            let p = BlockPlan::on_pairs(first, max, pairs).unwrap();
            (p.first, p.max, p.step, p.looks())
        };
        assert_eq!(plan(None, None, 1), (4, 16, 2, 7), "one pair: as before");
        assert_eq!(
            plan(None, None, 2),
            (4, 16, 2, 7),
            "2 pairs: 2 rounds already"
        );
        assert_eq!(plan(None, None, 3), (6, 16, 3, 5));
        assert_eq!(plan(None, None, 4), (8, 16, 4, 3));
        assert_eq!(plan(None, None, 8), (16, 24, 8, 2));
        assert_eq!(
            plan(Some(4), Some(4), 4),
            (4, 4, 4, 1),
            "--max-blocks given is kept"
        );
        assert_eq!(plan(Some(12), None, 4), (12, 20, 4, 3));
        let p = BlockPlan::on_pairs(None, None, 4).unwrap();
        assert_eq!(
            (p.next_chunk(0), p.next_chunk(8), p.next_chunk(14)),
            (8, 4, 2)
        );
        assert!(BlockPlan::on_pairs(Some(8), Some(4), 4).is_err());
    }
}
