//! The line a verdict over several runners and pairs adds beside its slot effects: each
//! (runner, pair)'s own slot effect, and whether the runners' gaps agreed and were pooled or
//! the pass bound was judged on their spread, or (pairs of one node) the node's average
//! judged both sides (stats::decision::groups).

use crate::stats::decision::{CrossoverInfo, GroupSlot};

/// "per runner and pair: C=1: runner 0 pair 0 +5.1%, runner 1 pair 0 -4.9%; gaps agree (p
/// 0.62), pooled; ..." where a level was read by groups; None where none was.
pub fn groups_line(blocks: &[(u32, &CrossoverInfo)]) -> Option<String> {
    let levels: Vec<String> = (blocks.iter())
        .filter_map(|(c, x)| {
            let g = x.groups.as_ref()?;
            let slots: Vec<String> = (g.slots.iter())
                .map(|s| {
                    format!(
                        "runner {} pair {} {:+.1}%",
                        s.runner,
                        s.pair,
                        100.0 * s.slot_effect.exp_m1()
                    )
                })
                .collect();
            let mut said = format!("C={c}: {}", slots.join(", "));
            if g.shared_slot_blocks > 0 {
                said.push_str(&format!(
                    ", {} block(s) of pairs that ran one way round read with one slot effect",
                    g.shared_slot_blocks
                ));
            }
            if g.slots_pooled {
                said.push_str(" (alike: their spread pooled)");
            }
            if g.set_aside > 0 {
                said.push_str(&format!(
                    ", {} block(s) set aside (one way round, nothing to pair them)",
                    g.set_aside
                ));
            }
            let beyond = (g.between_spread)
                .map(|s| format!(" ({:.1}% beyond the blocks')", 100.0 * s))
                .unwrap_or_default();
            said.push_str(&match (g.between_judged, g.node_average, g.agreement_p) {
                (true, _, Some(p)) => format!(
                    "; the groups' gaps differ (p {p:.3}): the pass bound judged on their \
                     spread{beyond}"
                ),
                (false, true, Some(p)) => format!(
                    "; the pairs' gaps differ (p {p:.3}){beyond}: pairs of one node, so both \
                     sides judge the node's average on the spread within pairs (head/base by \
                     pair: {}; a PASS speaks for the node's average, not for each pair)",
                    pair_gaps(&g.slots)
                ),
                (false, false, Some(p)) => format!("; the groups' gaps agree (p {p:.2}): pooled"),
                (_, _, None) => "; the groups' spread is the blocks' only measure".into(),
            });
            Some(said)
        })
        .collect();
    (!levels.is_empty()).then(|| format!("per runner and pair: {}", levels.join("; ")))
}

/// "pair 0 +3.2%, pair 1 -3.1%": each pair's own head/base gap, its slot effect taken out.
fn pair_gaps(slots: &[GroupSlot]) -> String {
    (slots.iter())
        .map(|s| format!("pair {} {:+.1}%", s.pair, 100.0 * s.gap.exp_m1()))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::decision::{grouped_level, Block, GroupedBlock};

    /// Four blocks on each of two groups, two each way round, the head `gaps[g]` (ln) off the
    /// base on group g; `pairs`: the groups are pairs of runner 0, else runners of one pair.
    fn info(pairs: bool, gaps: [f64; 2]) -> CrossoverInfo {
        let noise = [-0.006, 0.004, -0.002, 0.006];
        let wobble = [0.003, -0.002, -0.003, 0.002];
        let blocks: Vec<GroupedBlock> = (0..8)
            .map(|i| {
                let g = i / 4;
                let head_slot = (i % 2) as u32;
                let o = if head_slot == 1 { 0.5 } else { -0.5 };
                let arm = |c: f64| noise.iter().map(|n| c + n).collect::<Vec<f64>>();
                GroupedBlock {
                    block: Block {
                        base: arm(5.0 - o * 0.02),
                        head: arm(5.0 + o * 0.02 + gaps[g] + wobble[i % 4]),
                        head_slot,
                    },
                    runner: if pairs { 0 } else { g as u32 },
                    pair: if pairs { g as u32 } else { 0 },
                }
            })
            .collect();
        grouped_level(&blocks, None, 0.25).crossover.unwrap()
    }

    #[test]
    fn the_line_says_which_reading_judged_the_pass_bound() {
        let apart = [0.03, -0.03];
        let node = info(true, apart);
        let said = groups_line(&[(1, &node)]).unwrap();
        assert!(said.contains("runner 0 pair 1"), "{said}");
        assert!(
            said.contains("pairs of one node, so both sides judge the node's average"),
            "{said}"
        );
        // Each pair's own gap is said: the pass does not hide the pair that is slower.
        assert!(
            said.contains("head/base by pair: pair 0 +3.0%, pair 1 -3.0%"),
            "{said}"
        );
        let runners = info(false, apart);
        let said = groups_line(&[(1, &runners)]).unwrap();
        assert!(said.contains("runner 1 pair 0"), "{said}");
        assert!(
            said.contains("the pass bound judged on their spread"),
            "{said}"
        );
        let alike = info(true, [0.0, 0.0]);
        let said = groups_line(&[(1, &alike)]).unwrap();
        assert!(said.contains("gaps agree"), "{said}");
    }
}
