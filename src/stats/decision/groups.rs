//! Blocks from several pairs of slots and several runners, read as one crossover (issue 46).
//! A pair's (or a runner's) own speed falls on both arms of its block and cancels in the
//! block's difference D_b; its slot effect does not, and pairs differ in it (one measured
//! -3% to +5%). One slot effect for all of them leaves each pair's own in the blocks'
//! spread and costs power (4 pairs of mixed sign lost 52 points of a 5% drop caught).
//!
//! Here each group, a (runner, pair) whose blocks ran both ways round, has a slot effect of
//! its own: D_b = delta_g + o_b s_g + u_b + e_b, delta_g = (mean D_+ + mean D_-) / 2 free
//! of s_g. Blocks of groups that ran one way round only cannot tell their slot effect from
//! the change: they are read together (per runner, else over the pool) with one slot effect
//! for them, their own slot effects left in their spread as a random pair effect would be
//! (honest, and costly: a look of one block per pair is read so as a whole).
//!
//! The groups' gaps delta_g may differ too (a runner whose GPUs favour one build). The two
//! sides of the verdict read that differently:
//! - the fail test asks whether the head is slower on this pool's own average (the runners
//!   as fixed effects: differing gaps make no failure false; benches/gate_runners.rs: at
//!   most 0.1% in unchanged pools whose runners' gaps are +/-3%). Where the gaps agree,
//!   their spread about their weighted mean (G - 1 df) is pooled with the blocks'
//!   within-group spread (more df); where they differ beyond chance it is no noise of that
//!   average, and the within-group spread alone is its residual (a 10% drop on one runner
//!   of 2 is caught 99-100% so, 11-13% with the gaps' spread pooled in);
//! - the pass bound rules a drop out for the pool's runners: where an F test says the gaps
//!   differ beyond the blocks' spread ([`GROUPS_AGREEMENT_P`]), it is judged on the gaps'
//!   spread alone with its own G - 1 degrees of freedom, the groups as its sample (what
//!   Facebook's Perflab found: ignoring the host makes intervals too narrow). Not so where
//!   every group is a pair of one runner: one node serves the sum of its pairs, so the
//!   node's own average is what a pass rules on, as one pair's blocks rule on that pair;
//!   there both sides read the within-group spread. Judged on the pairs' spread, 2 pairs
//!   rested the bound on 1 degree of freedom in the one unchanged look in ten whose gaps
//!   test apart by chance (A/A pass 93.0% at a 2% start spread against one pair's 99.9%).
//!
//! The gaps' spread judging the fail test too cost 2-8 points of a 5% drop caught against
//! one runner with the same blocks (the F test fires in about 10% of unchanged pools, and
//! those were judged on 1-3 df); read so, the fail side matches one runner within 0.2 points.
//!
//! Where the groups' slot effects agree with the blocks' spread, their spread joins the
//! residual (as one slot effect would read them, but never narrower): alike pairs give back
//! the degrees of freedom their own slot effects took.
//!
//! With at most one group the blocks go to [`crossover_level`] unchanged (one pair, or one
//! look of one block per pair): the grouped model only ever speaks where it can.

use serde::{Deserialize, Serialize};

use super::calibration::{LevelEvidence, RunEvidence, SlotCalibration};
use super::crossover::{calibration_evidence, crossover_level_with, trimmed_block, Block};
use super::level::{Design, LevelTest};
use super::{finite, mean, pooled_within};

/// Below this p the groups' gaps are taken to differ (one-sided F test of the between-group
/// spread against the blocks' within-group spread): the between-group spread judges the pass
/// bound, and the fail test reads the within-group spread alone (see the module doc).
/// Lenient towards setting the pooling aside: a wrong pool narrows the bound, a needless
/// set-aside only costs degrees of freedom (benches/gate_runners.rs).
pub const GROUPS_AGREEMENT_P: f64 = 0.10;

/// One block with where it ran: the runner (the leg of a merge; 0 in one run) and the pair
/// of slots on it (0 with one pair).
#[derive(Debug, Clone, PartialEq)]
pub struct GroupedBlock {
    pub block: Block,
    pub runner: u32,
    pub pair: u32,
}

/// One group's slot effect as its blocks measured it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupSlot {
    pub runner: u32,
    pub pair: u32,
    pub blocks: usize,
    /// ln, slot 1 over slot 0.
    pub slot_effect: f64,
    /// The group's own head/base gap (ln), its slot effect taken out.
    pub gap: f64,
}

/// How the grouped model read a level's blocks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupsInfo {
    /// Groups read with a slot effect of their own, each.
    pub slots: Vec<GroupSlot>,
    /// Blocks of groups that ran one way round only, read with one slot effect together.
    pub shared_slot_blocks: usize,
    /// Blocks set aside: one way round only, with nothing of the other way to pair them.
    pub set_aside: usize,
    /// The groups' slot effects agreed with the blocks' spread: their spread was pooled into
    /// the residual (more degrees of freedom, a bound never narrower).
    #[serde(default)]
    pub slots_pooled: bool,
    /// p of the F test that the groups' gaps agree (None: no within-group df to test).
    pub agreement_p: Option<f64>,
    /// Whether the between-group spread alone judged the pass bound (the gaps differ beyond
    /// chance, over several runners); the fail test then reads the within-group spread alone.
    pub between_judged: bool,
    /// The gaps differ beyond chance, all groups pairs of one runner: both sides read the
    /// node's average on the within-group spread (see the module doc).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub node_average: bool,
    /// The groups' gaps' spread beyond what the blocks explain (sd of the gaps, ln), where
    /// any.
    pub between_spread: Option<f64>,
}

/// A block after trimming, with its group and difference.
struct Kept {
    group: (u32, u32),
    orient: f64,
    d: f64,
    inv_n: f64,
    base: Vec<f64>,
    head: Vec<f64>,
}

/// One group's estimate: gap, slot effect, variance factor, within-cell sum of squares.
struct Group {
    key: (u32, u32),
    blocks: usize,
    gap: f64,
    slot: f64,
    factor: f64,
    ss: f64,
    df: f64,
}

impl Group {
    /// From blocks with both orientations; None otherwise.
    fn of(key: (u32, u32), blocks: &[&Kept]) -> Option<Group> {
        let side = |sign: f64| -> Vec<f64> {
            (blocks.iter().filter(|k| k.orient == sign))
                .map(|k| k.d)
                .collect()
        };
        let (plus, minus) = (side(1.0), side(-1.0));
        if plus.is_empty() || minus.is_empty() {
            return None;
        }
        let (mp, mm) = (mean(&plus), mean(&minus));
        let ss = |v: &[f64], m: f64| v.iter().map(|x| (x - m) * (x - m)).sum::<f64>();
        Some(Group {
            key,
            blocks: blocks.len(),
            gap: 0.5 * (mp + mm),
            slot: 0.5 * (mp - mm),
            factor: 0.25 * (1.0 / plus.len() as f64 + 1.0 / minus.len() as f64),
            ss: ss(&plus, mp) + ss(&minus, mm),
            df: blocks.len() as f64 - 2.0,
        })
    }
}

/// One level of a run in blocks over several pairs and runners; see the module doc.
pub fn grouped_level(
    blocks: &[GroupedBlock],
    calibration: Option<&SlotCalibration>,
    guard: f64,
) -> LevelTest {
    grouped_level_with(blocks, calibration, None, guard)
}

/// The blocks as one plain crossover, where they are read so: one (runner, pair), or fewer
/// than two groups that ran both ways round. Only that reading uses a calibration.
fn plain(blocks: &[GroupedBlock]) -> Option<Vec<Block>> {
    (one_place(blocks) || form_groups(&keep(blocks).0).0.len() < 2).then(|| as_plain(blocks))
}

fn one_place(blocks: &[GroupedBlock]) -> bool {
    let place = |g: &GroupedBlock| (g.runner, g.pair);
    blocks.windows(2).all(|w| place(&w[0]) == place(&w[1]))
}

fn as_plain(blocks: &[GroupedBlock]) -> Vec<Block> {
    blocks.iter().map(|g| g.block.clone()).collect()
}

/// What a level's blocks say about its calibration, as [`grouped_level_with`] reads them
/// (for [`super::pooled_evidence`]).
pub fn grouped_evidence(
    blocks: &[GroupedBlock],
    calibration: Option<&SlotCalibration>,
) -> Option<LevelEvidence> {
    calibration?;
    calibration_evidence(&plain(blocks)?, calibration)
}

/// [`grouped_level`] with the run's levels' checks of their calibrations pooled (`run`; see
/// [`super::crossover_level_with`]).
pub fn grouped_level_with(
    blocks: &[GroupedBlock],
    calibration: Option<&SlotCalibration>,
    run: Option<&RunEvidence>,
    guard: f64,
) -> LevelTest {
    // One (runner, pair) forms one group at most: the plain reading, its blocks trimmed once.
    if one_place(blocks) {
        return crossover_level_with(&as_plain(blocks), calibration, run, guard);
    }
    let (kept, ignored, dropped) = keep(blocks);
    let (groups, shared, set_aside) = form_groups(&kept);
    if groups.len() < 2 {
        return crossover_level_with(&as_plain(blocks), calibration, run, guard);
    }
    let used: Vec<&Kept> = kept
        .iter()
        .filter(|k| groups.iter().any(|g| g.members.contains(&k.group)))
        .collect();
    let weight: f64 = groups.iter().map(|g| 1.0 / g.est.factor).sum();
    let gap = groups.iter().map(|g| g.est.gap / g.est.factor).sum::<f64>() / weight;
    let mut lv = LevelTest::new(Design::Relative, finite(gap));
    lv.sessions_base = used.len();
    lv.sessions_head = used.len();
    lv.n_base = used.iter().map(|k| k.base.len()).sum();
    lv.n_head = used.iter().map(|k| k.head.len()).sum();
    (lv.ignored_base, lv.ignored_head) = ignored;
    (lv.dropped_base, lv.dropped_head) = dropped;
    let cells: Vec<&Vec<f64>> = used.iter().flat_map(|k| [&k.base, &k.head]).collect();
    let (s2w, dfw) = pooled_within(&cells);
    lv.sigma_w = (dfw > 0).then(|| s2w.sqrt());
    // The within-noise variance of one block's difference, on average over the blocks.
    let mean_inv_n = used.iter().map(|k| k.inv_n).sum::<f64>() / used.len() as f64;
    let within = if dfw > 0 { s2w * mean_inv_n } else { f64::NAN };
    let floor = if within.is_finite() { within } else { 0.0 };
    let mut ss_w: f64 = groups.iter().map(|g| g.est.ss).sum();
    let mut df_w: f64 = groups.iter().map(|g| g.est.df).sum();
    let q = spread(&groups, |g| g.gap, gap);
    let df_b = groups.len() as f64 - 1.0;
    // The groups' slot effects' spread about their weighted mean (G - 1 df). Where it agrees
    // with the blocks' own spread (or, with no df within groups, the gaps' spread), it joins
    // the residual: its expectation is never below the blocks' variance, so pooling it can
    // only widen the bound, and its degrees of freedom are what alike slots give back.
    let slot_mean = (groups.iter())
        .map(|g| g.est.slot / g.est.factor)
        .sum::<f64>()
        / weight;
    let q_s = spread(&groups, |g| g.slot, slot_mean);
    let (reference, reference_df) = match df_w > 0.0 {
        true => ((ss_w / df_w).max(floor), df_w),
        false => ((q / df_b).max(floor), df_b),
    };
    let slots_pooled = f_sf(q_s / df_b / reference, df_b, reference_df) >= GROUPS_AGREEMENT_P;
    if slots_pooled {
        ss_w += q_s;
        df_w += df_b;
    }
    let agreement_p = (df_w > 0.0).then(|| f_sf(q / df_b / (ss_w / df_w).max(floor), df_b, df_w));
    let gaps_differ = agreement_p.is_some_and(|p| p < GROUPS_AGREEMENT_P);
    let node_average = gaps_differ && one_runner(blocks);
    let between_judged = gaps_differ && !node_average;
    // Fail side: the pool's own average; gaps that differ are no noise of it (see the module
    // doc). Pass side: where the gaps differ beyond chance, their spread with G - 1 df, but
    // on one runner the node's average as the fail side reads it.
    let (block_var, df) = match gaps_differ {
        true => ((ss_w / df_w).max(floor), df_w),
        false => (((ss_w + q) / (df_w + df_b)).max(floor), df_w + df_b),
    };
    lv.set_main((block_var / weight).sqrt(), df);
    if between_judged {
        lv.set_pass(((q / df_b).max(floor) / weight).sqrt(), df_b);
    }
    if within.is_finite() {
        lv.set_within((within / weight).sqrt(), dfw as f64);
    }
    let within_var = (df_w > 0.0).then(|| (ss_w / df_w).max(floor));
    let info = GroupsInfo {
        slots: own_slots(&groups),
        shared_slot_blocks: shared,
        set_aside,
        slots_pooled,
        agreement_p,
        between_judged,
        node_average,
        between_spread: within_var
            .and_then(|w| gap_spread(q / df_b, w, groups.len() as f64 / weight)),
    };
    let head_on_slot1 = used.iter().filter(|k| k.orient > 0.0).count();
    let slots: Vec<f64> = groups.iter().map(|g| g.est.slot).collect();
    lv.crossover = Some(super::CrossoverInfo {
        blocks: used.len(),
        head_on_slot1,
        head_on_slot0: used.len() - head_on_slot1,
        slot_effect: finite(mean(&slots)),
        slot_effect_from: Some("blocks, per pair and runner".into()),
        start_spread: within
            .is_finite()
            .then(|| (block_var - within).max(0.0).sqrt()),
        start_spread_df: df,
        calibrated: false,
        starts_covered: true,
        calibration_spread: None,
        calibration_blocks: None,
        own_spread: None,
        calibration_disagreed: false,
        calibration_unused: None,
        calibration_slot_contrast: None,
        calibration_weight: None,
        calibration_run_check: None,
        groups: Some(info),
    });
    lv.finish(guard)
}

/// The blocks after trimming (a block with an empty arm is left out), and what trimming set
/// aside, (base, head).
fn keep(blocks: &[GroupedBlock]) -> (Vec<Kept>, (usize, usize), (usize, usize)) {
    let (mut ignored, mut dropped) = ((0, 0), (0, 0));
    let mut kept = Vec::new();
    for g in blocks {
        let t = trimmed_block(&g.block.base, &g.block.head);
        ignored = (ignored.0 + t.ignored.0, ignored.1 + t.ignored.1);
        dropped = (dropped.0 + t.dropped.0, dropped.1 + t.dropped.1);
        if t.base.is_empty() || t.head.is_empty() {
            continue;
        }
        kept.push(Kept {
            group: (g.runner, g.pair),
            orient: if g.block.head_slot == 1 { 1.0 } else { -1.0 },
            d: mean(&t.head) - mean(&t.base),
            inv_n: 1.0 / t.base.len() as f64 + 1.0 / t.head.len() as f64,
            base: t.base,
            head: t.head,
        });
    }
    (kept, ignored, dropped)
}

/// A group as the model reads it: its estimate and the (runner, pair) groups it holds (one,
/// or several read with one slot effect).
struct Formed {
    est: Group,
    members: Vec<(u32, u32)>,
}

/// The groups: each (runner, pair) that ran both ways round; the rest of a runner's blocks
/// together where they ran both ways round; what is left over the pool likewise, else set
/// aside. Returns the groups, the blocks read with a shared slot effect and those set aside.
fn form_groups(kept: &[Kept]) -> (Vec<Formed>, usize, usize) {
    let mut keys: Vec<(u32, u32)> = kept.iter().map(|k| k.group).collect();
    keys.sort_unstable();
    keys.dedup();
    let members_of = |keys: &[(u32, u32)]| -> Vec<&Kept> {
        kept.iter().filter(|k| keys.contains(&k.group)).collect()
    };
    let mut formed = Vec::new();
    let mut partial: Vec<(u32, u32)> = Vec::new();
    for key in keys {
        match Group::of(key, &members_of(&[key])) {
            Some(est) => formed.push(Formed {
                est,
                members: vec![key],
            }),
            None => partial.push(key),
        }
    }
    let mut runners: Vec<u32> = partial.iter().map(|k| k.0).collect();
    runners.dedup();
    let mut leftover = Vec::new();
    let mut shared = 0;
    for r in runners {
        let keys: Vec<(u32, u32)> = partial.iter().filter(|k| k.0 == r).copied().collect();
        let members = members_of(&keys);
        match Group::of((r, u32::MAX), &members) {
            Some(est) => {
                shared += members.len();
                formed.push(Formed { est, members: keys });
            }
            None => leftover.extend(keys),
        }
    }
    let members = members_of(&leftover);
    let set_aside = match Group::of((u32::MAX, u32::MAX), &members) {
        Some(est) => {
            shared += members.len();
            formed.push(Formed {
                est,
                members: leftover,
            });
            0
        }
        None => members.len(),
    };
    (formed, shared, set_aside)
}

/// The slot effects of the groups that are one (runner, pair) each.
fn own_slots(groups: &[Formed]) -> Vec<GroupSlot> {
    (groups.iter())
        .filter(|g| g.members.len() == 1)
        .map(|g| GroupSlot {
            runner: g.est.key.0,
            pair: g.est.key.1,
            blocks: g.est.blocks,
            slot_effect: g.est.slot,
            gap: g.est.gap,
        })
        .collect()
}

/// The groups' gaps' sd beyond what the blocks explain, on the gaps' own scale: `between`
/// (q / (G - 1)) and `within` are a block difference's variance, and a group's gap varies by
/// `factor` (their mean) times that, so the gaps' own variance beyond the blocks' is
/// factor * (between - within). Read on the blocks' scale it said 10.4% for two pairs whose
/// gaps were +3.7% and -3.7% (sd 5.2%).
fn gap_spread(between: f64, within: f64, factor: f64) -> Option<f64> {
    finite(((between - within).max(0.0) * factor).sqrt())
}

/// Whether every block of the level ran on one runner (its pairs): all of them, not only
/// those the groups kept, so that a merge whose other runners' blocks were trimmed or set
/// aside at a level is never read as one node.
fn one_runner(blocks: &[GroupedBlock]) -> bool {
    blocks.windows(2).all(|w| w[0].runner == w[1].runner)
}

/// The groups' weighted sum of squares of `of` about `mean` (weights 1 / factor).
fn spread(groups: &[Formed], of: impl Fn(&Group) -> f64, mean: f64) -> f64 {
    (groups.iter())
        .map(|g| (of(&g.est) - mean).powi(2) / g.est.factor)
        .sum()
}

/// P(F(d1, d2) >= x); 1 where it cannot be computed.
fn f_sf(x: f64, d1: f64, d2: f64) -> f64 {
    use statrs::distribution::{ContinuousCDF, FisherSnedecor};
    if !(x.is_finite() && x >= 0.0 && d1 > 0.0 && d2 > 0.0) {
        return 1.0;
    }
    FisherSnedecor::new(d1, d2).map_or(1.0, |f| f.sf(x))
}

#[cfg(test)]
#[path = "groups_tests.rs"]
mod tests;
