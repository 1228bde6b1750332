//! The sequential plan of a relative run in blocks: how many blocks run before the gate
//! looks, how many at most, and which levels a look leaves open for the next pair of blocks.
//! The fail side's alpha is split over the looks the plan allows (`per_look` in compare.rs),
//! so false failures stay within the family alpha however many looks are taken.

use anyhow::{bail, Result};

use super::verdict::{LevelStatus, Verdict};

/// The most blocks one run may take (each starts two servers).
pub const MAX_BLOCKS: u32 = 64;

/// The block plan a run follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockPlan {
    /// Blocks before the first look.
    pub first: u32,
    /// Blocks in all, at most.
    pub max: u32,
}

impl BlockPlan {
    /// The plan from `--blocks` and `--max-blocks` (None: the defaults), checked. A relative
    /// run looks after 4 blocks and may add 8 (two at a time) while a level is undecided:
    /// with a start spread near 3% (a real llama-server) 8 blocks passed an unchanged server
    /// 64% of the time, 12 blocks 94% (benches/gate_crossover.rs). One server alone runs one
    /// block and never adds any.
    pub fn new(first: Option<u32>, max: Option<u32>, relative: bool) -> Result<BlockPlan> {
        let first = first.unwrap_or(if relative { 4 } else { 1 });
        if first == 0 || first > MAX_BLOCKS {
            bail!("--blocks: {first} is outside 1..={MAX_BLOCKS}");
        }
        let max = max.unwrap_or(if relative { first + 8 } else { first });
        if max < first || max > MAX_BLOCKS {
            bail!("--max-blocks: {max} is outside {first}..={MAX_BLOCKS} (at least --blocks)");
        }
        if !relative && max > first {
            bail!("--max-blocks needs --base-server-command: only a relative run adds blocks");
        }
        Ok(BlockPlan { first, max })
    }

    /// How many times the gate may look: after the first blocks, then after each pair.
    pub fn looks(&self) -> u32 {
        1 + (self.max - self.first).div_ceil(2)
    }

    /// How many blocks the next chunk runs after `done` blocks: the first blocks, then a
    /// pair (one each way round), never past the maximum.
    pub fn next_chunk(&self, done: u32) -> u32 {
        match done {
            0 => self.first,
            _ => 2.min(self.max.saturating_sub(done)),
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
        assert_eq!((plan.first, plan.max, plan.looks()), (4, 12, 5));
        assert_eq!(
            (plan.next_chunk(0), plan.next_chunk(4), plan.next_chunk(11)),
            (4, 2, 1)
        );
        assert_eq!(BlockPlan::new(None, None, false).unwrap().looks(), 1);
        let err = BlockPlan::new(None, Some(2), true).unwrap_err();
        assert!(err.to_string().contains("--max-blocks"), "{err}");
        let err = BlockPlan::new(Some(1), Some(3), false).unwrap_err();
        assert!(err.to_string().contains("--base-server-command"), "{err}");
        assert!(BlockPlan::new(Some(0), None, true).is_err());
    }
}
