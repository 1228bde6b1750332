//! The line a verdict over several runners and pairs adds beside its slot effects: each
//! (runner, pair)'s own slot effect, and whether the runners' gaps agreed and were pooled or
//! the pass bound was judged on their spread (stats::decision::groups).

use crate::stats::decision::CrossoverInfo;

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
            said.push_str(&match (g.between_judged, g.agreement_p) {
                (true, Some(p)) => format!(
                    "; the groups' gaps differ (p {p:.3}): the pass bound judged on their spread{}",
                    g.between_spread
                        .map(|s| format!(" ({:.1}% beyond the blocks')", 100.0 * s))
                        .unwrap_or_default()
                ),
                (false, Some(p)) => format!("; the groups' gaps agree (p {p:.2}): pooled"),
                (_, None) => "; the groups' spread is the blocks' only measure".into(),
            });
            Some(said)
        })
        .collect();
    (!levels.is_empty()).then(|| format!("per runner and pair: {}", levels.join("; ")))
}
