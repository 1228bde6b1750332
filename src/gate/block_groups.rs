//! A relative run in blocks read block by block: the grouping the gate and explain share, so
//! that a figure beside the verdict is paired as the verdict is (a module of its own, below
//! both: explain is called by the comparison).

use crate::record::blocks::ServerSetup;
use crate::record::TrialResult;
use crate::stats::decision::{Block, GroupedBlock};

/// Two arms' trials of one level grouped by block (each block's base and head values, from
/// `value`, and the head's slot): what `crossover_level` reads. The gate and explain both
/// group through it, so a figure beside the verdict is paired as the verdict is. Trials
/// without a block or a value are left out; empty when the run has no blocks.
pub fn blocks_of(
    base: &[TrialResult],
    head: &[TrialResult],
    value: impl Fn(&TrialResult) -> Option<f64>,
) -> Vec<Block> {
    numbered_blocks_of(base, head, value)
        .into_iter()
        .map(|(_, block)| block)
        .collect()
}

/// [`blocks_of`] with each block's number (to look up its record: its pair, say).
pub fn numbered_blocks_of(
    base: &[TrialResult],
    head: &[TrialResult],
    value: impl Fn(&TrialResult) -> Option<f64>,
) -> Vec<(u32, Block)> {
    let trials = |trials: &[TrialResult]| -> Vec<(u32, Option<u32>, f64)> {
        (trials.iter())
            .filter_map(|t| Some((t.block?, t.slot, value(t)?)))
            .collect()
    };
    let (b, h) = (trials(base), trials(head));
    let mut numbers: Vec<u32> = b.iter().chain(&h).map(|t| t.0).collect();
    numbers.sort_unstable();
    numbers.dedup();
    numbers
        .into_iter()
        .map(|n| {
            let block = Block {
                base: b.iter().filter(|t| t.0 == n).map(|t| t.2).collect(),
                head: h.iter().filter(|t| t.0 == n).map(|t| t.2).collect(),
                head_slot: h.iter().find(|t| t.0 == n).and_then(|t| t.1).unwrap_or(0),
            };
            (n, block)
        })
        .collect()
}

/// [`blocks_of`] with each block's runner and pair from the run's block records (0 where a
/// record says none): what `grouped_level` reads.
pub fn grouped_blocks_of(
    base: &[TrialResult],
    head: &[TrialResult],
    servers: Option<&ServerSetup>,
    value: impl Fn(&TrialResult) -> Option<f64>,
) -> Vec<GroupedBlock> {
    let place = |n: u32| {
        (servers.into_iter())
            .flat_map(|s| s.blocks.iter())
            .find(|b| b.number == n)
            .map_or((0, 0), |b| (b.runner.unwrap_or(0), b.pair.unwrap_or(0)))
    };
    numbered_blocks_of(base, head, value)
        .into_iter()
        .map(|(n, block)| {
            let (runner, pair) = place(n);
            GroupedBlock {
                block,
                runner,
                pair,
            }
        })
        .collect()
}
