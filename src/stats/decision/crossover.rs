//! Relative runs in blocks (issue 26): each block starts both servers fresh, and the arms
//! swap their slots (GPU 0 / GPU 1, or the first / second started) from one block to the
//! next. Interleaving trials cancels what shifts both arms; it cannot cancel a difference
//! between the two servers themselves (a slot effect: on a real llama.cpp server the one
//! started second was 2.5-4.4% faster) or between two starts of one server (the start
//! spread). Blocks make both estimable:
//!
//! D_b = mean ln head - mean ln base in block b = delta + o_b s + u_b + e_b
//!
//! with o_b = +1 when the head ran on slot 1 and -1 on slot 0, s the slot effect (slot 1
//! over slot 0), u_b the start spread and e_b the within-block noise. With both orientations
//! delta-hat = (mean of D_+ + mean of D_-) / 2, free of s whatever it is; s-hat = (mean D_+ -
//! mean D_-) / 2; the spread of the D_b about their orientation's mean estimates Var(u + e)
//! with B - 2 degrees of freedom, floored at the within-block noise's share Var(e) (which
//! the trials estimate with many df: a variance of u + e below it is chance). An A/A
//! calibration from main ([`SlotCalibration`], checked first by this run's blocks: see
//! `super::calibration`) adds its own blocks' spread (start spread beyond its within noise,
//! plus this run's within noise) with its df, and its bias stands in for s where a run has
//! one orientation only. With neither (one block, which has nothing to check a calibration
//! with, or one swap and no calibration) the start spread is not covered: the main test is
//! then not estimable (only the gross-regression guard, on the within-block noise, can
//! fail) and the verdict says so ([`CrossoverInfo::starts_covered`]).

use serde::{Deserialize, Serialize};

use super::calibration::{
    calibration_share, check, pooled_decides, pooling_weight, subtracted_bias, CalibrationUnused,
    LevelEvidence, RunBlocks, RunEvidence, SlotCalibration,
};
use super::level::{Design, LevelTest};
use super::outliers::{outlier_mask_relative, OUTLIER_Z};
use super::{finite, mean, pooled_within, usable};

/// One block at one level: the arms' ln values and the slot the head ran on (0 or 1).
#[derive(Debug, Clone, PartialEq)]
pub struct Block {
    pub base: Vec<f64>,
    pub head: Vec<f64>,
    pub head_slot: u32,
}

/// What the blocks said about the servers themselves, beside the comparison.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CrossoverInfo {
    /// Blocks used (each with both arms measured).
    pub blocks: usize,
    /// Blocks with the head on slot 1 and on slot 0.
    pub head_on_slot1: usize,
    pub head_on_slot0: usize,
    /// Slot effect (ln, slot 1 over slot 0): from this run's blocks when both orientations
    /// ran, else the calibration's; None when neither knows it.
    pub slot_effect: Option<f64>,
    /// Where `slot_effect` came from: "blocks" or "calibration".
    pub slot_effect_from: Option<String>,
    /// Start spread (sd of a block's difference beyond its within noise, ln) and its df.
    pub start_spread: Option<f64>,
    pub start_spread_df: f64,
    /// An A/A calibration was used (its blocks counted in the df).
    pub calibrated: bool,
    /// Whether the test's variance covers start and slot effects; false with too few blocks
    /// and no calibration, when the main test is left not estimable.
    pub starts_covered: bool,
    /// The calibration's start spread (sd of an A/A block's difference beyond its within
    /// noise, ln) and its blocks, where the baseline had one for this level.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibration_spread: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibration_blocks: Option<usize>,
    /// This run's own block spread (the same measure, from its blocks alone) where it has
    /// degrees of freedom of its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub own_spread: Option<f64>,
    /// The calibration was set aside: this run's blocks spread more, or its slot effect sat
    /// further from the calibration's, than it allows (an F test at
    /// [`super::calibration::CALIBRATION_AGREEMENT_P`]); the run's own blocks decided.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub calibration_disagreed: bool,
    /// The calibration held for the level was not used, and why (issue 48).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibration_unused: Option<CalibrationUnused>,
    /// This run's slot effect minus the calibration's (ln), where both orientations ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibration_slot_contrast: Option<f64>,
    /// The weight (df) the calibration was pooled with, where it was (issue 48 item 4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibration_weight: Option<f64>,
    /// The run's levels' checks of their calibrations pooled, where that decided
    /// (`super::pooled_evidence`): its p and the levels in it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibration_run_check: Option<RunEvidence>,
    /// Blocks over several pairs or runners read with a slot effect per group
    /// (`groups.rs`, issue 46); absent where one slot effect served.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub groups: Option<super::GroupsInfo>,
}

/// One block's values after what every reader of a block applies: non-finite values
/// ignored, then the outlier rule within the block (as for a run of one session).
pub struct TrimmedBlock {
    pub base: Vec<f64>,
    pub head: Vec<f64>,
    /// Non-finite values and outliers set aside, (base, head).
    pub ignored: (usize, usize),
    pub dropped: (usize, usize),
}

/// See [`TrimmedBlock`]; the gate and `baseline calibrate` read blocks through it.
pub fn trimmed_block(base: &[f64], head: &[f64]) -> TrimmedBlock {
    let (bv, _, ib) = usable(base, &[], "base");
    let (hv, _, ih) = usable(head, &[], "head");
    let (mb, mh) = outlier_mask_relative(&bv, &hv, OUTLIER_Z);
    let keep = |v: &[f64], m: &[bool]| -> Vec<f64> {
        v.iter()
            .zip(m)
            .filter(|(_, &x)| !x)
            .map(|(&v, _)| v)
            .collect()
    };
    let (bk, hk) = (keep(&bv, &mb), keep(&hv, &mh));
    TrimmedBlock {
        dropped: (bv.len() - bk.len(), hv.len() - hk.len()),
        ignored: (ib, ih),
        base: bk,
        head: hk,
    }
}

/// One level of a relative run in blocks; see the module doc. `guard` as in
/// [`super::relative_level`]. A block with an empty arm is left out. The calibration is
/// checked by this level's blocks alone; [`crossover_level_with`] pools the run's levels.
pub fn crossover_level(
    blocks: &[Block],
    calibration: Option<&SlotCalibration>,
    guard: f64,
) -> LevelTest {
    crossover_level_with(blocks, calibration, None, guard)
}

/// What one level's blocks say about its calibration, for [`super::pooled_evidence`]; None
/// where there is no usable calibration or nothing to check it with.
pub fn calibration_evidence(
    blocks: &[Block],
    calibration: Option<&SlotCalibration>,
) -> Option<LevelEvidence> {
    let c = calibration.filter(|c| c.usable())?;
    check(c, &Reading::of(blocks).run)
        .ok()
        .map(|ch| ch.evidence)
}

/// The blocks read before any calibration: kept, by orientation, the trials' pooled noise,
/// and what the run's own blocks check a calibration with.
struct Reading {
    kept: Kept,
    o: Orientations,
    s2w: f64,
    dfw: usize,
    run: RunBlocks,
}

impl Reading {
    fn of(blocks: &[Block]) -> Reading {
        let kept = Kept::of(blocks);
        let o = Orientations::of(&kept.blocks);
        let cells: Vec<&Vec<f64>> = kept.blocks.iter().flat_map(|k| [&k.0, &k.1]).collect();
        let (s2w, dfw) = pooled_within(&cells);
        // The within-noise variance of one block's difference, on average over the blocks.
        let inv_n = |k: &KeptBlock| 1.0 / k.0.len() as f64 + 1.0 / k.1.len() as f64;
        let mean_inv_n = kept.blocks.iter().map(inv_n).sum::<f64>() / o.blocks() as f64;
        let within = if dfw > 0 { s2w * mean_inv_n } else { f64::NAN };
        let (ss, df_own) = o.own_sum_of_squares();
        let run = RunBlocks {
            ss,
            df_own,
            slot: o.both.then_some(0.5 * (o.m_plus - o.m_minus)),
            factor: o.factor(),
            within,
        };
        Reading {
            kept,
            o,
            s2w,
            dfw,
            run,
        }
    }
}

/// [`crossover_level`] with the run's levels' checks of their calibrations pooled (`run`,
/// from [`super::pooled_evidence`]): the calibration is pooled where both this level's check
/// and the run's agree, weighted by what the run's evidence vouches for.
pub fn crossover_level_with(
    blocks: &[Block],
    calibration: Option<&SlotCalibration>,
    run: Option<&RunEvidence>,
    guard: f64,
) -> LevelTest {
    let held = calibration.filter(|c| c.usable());
    let Reading {
        kept,
        o,
        s2w,
        dfw,
        run: own,
    } = Reading::of(blocks);
    let (ss, df_own, within) = (own.ss, own.df_own, own.within);
    let mut info = o.info(held);
    // The calibration is used only where this run's blocks checked it and agree (see
    // super::calibration): its start spread, with this run's within noise added, is what it
    // predicts for this run's block variance.
    let used = held.and_then(|c| match check(c, &own) {
        Ok(ch) => {
            let weight = pooling_weight(c, &ch, run);
            info.calibration_disagreed = weight.is_none();
            info.calibration_weight = weight;
            info.calibration_run_check = run.filter(|r| pooled_decides(r)).copied();
            info.calibration_slot_contrast = ch.slot_contrast.and_then(finite);
            weight.map(|w| (c, ch, w))
        }
        Err(why) => {
            info.calibration_unused = Some(why);
            None
        }
    });
    let calibration = used.as_ref().map(|u| u.0);
    info.calibrated = calibration.is_some();
    if let (false, Some(c)) = (o.both, calibration) {
        info.slot_effect = Some(c.bias);
        info.slot_effect_from = Some("calibration".into());
    }
    let d = o.estimate(calibration);
    let mut lv = kept.counted(LevelTest::new(Design::Relative, d));
    lv.sigma_w = (dfw > 0).then(|| s2w.sqrt());
    if d.is_none() {
        lv.crossover = Some(info);
        return lv.finish(guard);
    }
    if df_own > 0.0 && within.is_finite() {
        info.own_spread = finite((ss / df_own - within).max(0.0).sqrt());
    }
    let spread = match &used {
        Some((c, ch, weight)) => BlockSpread {
            ss: ch.ss,
            cal_ss: calibration_share(c, within, *weight),
            df_block: ch.df + weight,
            within,
        },
        None => BlockSpread {
            ss,
            cal_ss: 0.0,
            df_block: df_own,
            within,
        },
    };
    // One orientation is estimable only with a calibration's slot effect taken out (and its
    // spread agreeing with the run's): else the slot effect stays in the estimate, whatever
    // the number of blocks (a level that lost one orientation's trials).
    if spread.df_block > 0.0 && (o.both || calibration.is_some()) {
        set_main_test(&mut lv, &mut info, &spread, &o, calibration);
    }
    // Too few blocks and no calibration: the start spread (and, with one orientation, the
    // slot effect) is unknown, so the main test is not estimable: only the guard can fail
    // and nothing passes, as with a history of one session. The within-block noise alone
    // failed unchanged servers up to 79% of the time (benches/gate_crossover.rs, --blocks 1
    // with a 4% slot effect), and a sequential plan adds blocks while a level is undecided.
    if within.is_finite() {
        lv.set_within((within * o.factor()).sqrt(), dfw as f64);
    }
    lv.crossover = Some(info);
    lv.finish(guard)
}

/// A block kept for the comparison: its arms after trimming, and its orientation (+1: the
/// head ran on slot 1, -1: on slot 0).
type KeptBlock = (Vec<f64>, Vec<f64>, f64);

/// The blocks a level compares, and what trimming set aside on the way.
struct Kept {
    blocks: Vec<KeptBlock>,
    /// Non-finite values and outliers set aside over all blocks, (base, head).
    ignored: (usize, usize),
    dropped: (usize, usize),
}

impl Kept {
    /// Per block: usable values, then the outlier rule within the block (as for one
    /// session); a block left with an empty arm is not kept.
    fn of(blocks: &[Block]) -> Kept {
        let mut kept: Vec<KeptBlock> = Vec::new();
        let (mut ignored_b, mut ignored_h, mut dropped_b, mut dropped_h) = (0, 0, 0, 0);
        for b in blocks {
            let t = trimmed_block(&b.base, &b.head);
            let (bk, hk) = (t.base, t.head);
            ignored_b += t.ignored.0;
            ignored_h += t.ignored.1;
            dropped_b += t.dropped.0;
            dropped_h += t.dropped.1;
            if !bk.is_empty() && !hk.is_empty() {
                let o = if b.head_slot == 1 { 1.0 } else { -1.0 };
                kept.push((bk, hk, o));
            }
        }
        Kept {
            blocks: kept,
            ignored: (ignored_b, ignored_h),
            dropped: (dropped_b, dropped_h),
        }
    }

    /// The test with what it counted: blocks as sessions, trials, and what was set aside.
    fn counted(&self, mut lv: LevelTest) -> LevelTest {
        let big_b = self.blocks.len();
        lv.sessions_base = big_b;
        lv.sessions_head = big_b;
        lv.n_base = self.blocks.iter().map(|k| k.0.len()).sum();
        lv.n_head = self.blocks.iter().map(|k| k.1.len()).sum();
        lv.dropped_base = self.dropped.0;
        lv.dropped_head = self.dropped.1;
        lv.ignored_base = self.ignored.0;
        lv.ignored_head = self.ignored.1;
        lv
    }
}

/// The kept blocks' differences D_b (mean ln head - mean ln base) by orientation.
struct Orientations {
    diffs: Vec<f64>,
    orient: Vec<f64>,
    /// Blocks with the head on slot 1 and on slot 0, and whether both ran.
    n_plus: usize,
    n_minus: usize,
    both: bool,
    /// The mean difference of each orientation.
    m_plus: f64,
    m_minus: f64,
}

impl Orientations {
    fn of(kept: &[KeptBlock]) -> Orientations {
        let diffs: Vec<f64> = kept.iter().map(|(b, h, _)| mean(h) - mean(b)).collect();
        let orient: Vec<f64> = kept.iter().map(|k| k.2).collect();
        let n_plus = orient.iter().filter(|&&o| o > 0.0).count();
        let n_minus = kept.len() - n_plus;
        let mean_of = |sign: f64| -> f64 {
            let v: Vec<f64> = (diffs.iter().zip(&orient))
                .filter(|(_, &o)| o == sign)
                .map(|(&d, _)| d)
                .collect();
            mean(&v)
        };
        let (m_plus, m_minus) = (mean_of(1.0), mean_of(-1.0));
        Orientations {
            diffs,
            orient,
            n_plus,
            n_minus,
            both: n_plus > 0 && n_minus > 0,
            m_plus,
            m_minus,
        }
    }

    /// B, the blocks kept.
    fn blocks(&self) -> usize {
        self.diffs.len()
    }

    /// delta-hat: the mean of the two orientations' means, free of the slot effect; with one
    /// orientation, the calibration's slot effect is taken out, else it stays in.
    fn estimate(&self, calibration: Option<&SlotCalibration>) -> Option<f64> {
        match (self.blocks(), self.both, calibration) {
            (0, _, _) => None,
            (_, true, _) => Some(0.5 * (self.m_plus + self.m_minus)),
            (_, false, Some(c)) => {
                let o = self.orient[0];
                Some(mean(&self.diffs) - o * c.bias)
            }
            (_, false, None) => Some(mean(&self.diffs)),
        }
    }

    /// How a block's variance maps to delta-hat's: (1/n+ + 1/n-)/4 with both orientations
    /// (the mean of two orientation means), 1/B with one.
    fn factor(&self) -> f64 {
        if self.both {
            0.25 * (1.0 / self.n_plus as f64 + 1.0 / self.n_minus as f64)
        } else {
            1.0 / self.blocks() as f64
        }
    }

    /// The run's own blocks: their sum of squares about their orientation's mean, and its df.
    fn own_sum_of_squares(&self) -> (f64, f64) {
        let big_b = self.blocks();
        if self.both {
            let ss: f64 = (self.diffs.iter().zip(&self.orient))
                .map(|(&x, &o)| {
                    let m = if o > 0.0 { self.m_plus } else { self.m_minus };
                    (x - m) * (x - m)
                })
                .sum();
            (ss, big_b as f64 - 2.0)
        } else {
            let m = mean(&self.diffs);
            let ss: f64 = self.diffs.iter().map(|x| (x - m) * (x - m)).sum();
            (ss, big_b as f64 - 1.0)
        }
    }

    /// What the blocks said of the servers before any spread is estimated: the counts, the
    /// slot effect where both orientations ran, and the calibration held for the level.
    fn info(&self, calibration: Option<&SlotCalibration>) -> CrossoverInfo {
        let mut info = CrossoverInfo {
            blocks: self.blocks(),
            head_on_slot1: self.n_plus,
            head_on_slot0: self.n_minus,
            slot_effect: None,
            slot_effect_from: None,
            start_spread: None,
            start_spread_df: 0.0,
            calibrated: false,
            starts_covered: false,
            calibration_spread: calibration.map(|c| c.start_variance().0.sqrt()),
            calibration_blocks: calibration.map(|c| c.blocks),
            own_spread: None,
            calibration_disagreed: false,
            calibration_unused: None,
            calibration_slot_contrast: None,
            calibration_weight: None,
            calibration_run_check: None,
            groups: None,
        };
        if self.both {
            info.slot_effect = finite(0.5 * (self.m_plus - self.m_minus));
            info.slot_effect_from = Some("blocks".into());
        }
        info
    }
}

/// What a block's difference varies by: the run's own blocks' sum of squares `ss`, the
/// calibration's share `cal_ss`, their degrees of freedom together, and the within-block
/// noise (NaN where unknown).
struct BlockSpread {
    ss: f64,
    cal_ss: f64,
    df_block: f64,
    within: f64,
}

/// The main test from the blocks' spread (and the calibration's, pooled), with the start
/// spread it covers said in `info`.
fn set_main_test(
    lv: &mut LevelTest,
    info: &mut CrossoverInfo,
    spread: &BlockSpread,
    o: &Orientations,
    calibration: Option<&SlotCalibration>,
) {
    let BlockSpread {
        ss,
        cal_ss,
        df_block,
        within,
    } = *spread;
    // A block's difference varies at least as much as its trials' noise says: with few
    // blocks their own spread can come out far below it by chance (4 blocks of a real
    // llama-server on a busy machine: 1.6% against 4.5%), so the within-block noise is
    // a floor. Only ever wider; the t quantile keeps the blocks' df.
    let block_var = ((ss + cal_ss) / df_block).max(if within.is_finite() { within } else { 0.0 });
    info.starts_covered = o.both || calibration.is_some();
    if within.is_finite() {
        info.start_spread = finite((block_var - within).max(0.0).sqrt());
        info.start_spread_df = df_block;
    }
    let main = block_var * o.factor();
    // With one orientation the calibration's bias was subtracted: its own error, and how
    // much the slot effect moves from job to job, add.
    let (bias_var, df_bias) = match (o.both, calibration) {
        (false, Some(c)) => subtracted_bias(c),
        _ => (0.0, 1.0),
    };
    let se2 = main + bias_var;
    let df = if bias_var > 0.0 && se2 > 0.0 {
        se2 * se2 / (main * main / df_block + bias_var * bias_var / df_bias)
    } else {
        df_block
    };
    lv.set_main(se2.sqrt(), df);
}

#[cfg(test)]
mod tests {
    use super::super::{decide, DecisionSettings, LevelOutcome};
    use super::*;

    /// n trials around `centre` (ln), a fixed spread pattern (sd about 0.5%).
    fn trials(centre: f64, n: usize) -> Vec<f64> {
        let pattern = [-0.006, 0.004, -0.002, 0.006, 0.0, -0.004, 0.002, 0.0];
        (0..n)
            .map(|i| centre + pattern[i % pattern.len()])
            .collect()
    }

    /// Blocks with the head alternating slot 1, 0, 1, 0 ... and a slot effect `slot` (slot 1
    /// faster by `slot`, ln), a true change `delta`, per-block start offsets `starts`.
    fn alternating(delta: f64, slot: f64, starts: &[f64], n: usize) -> Vec<Block> {
        (starts.iter().enumerate())
            .map(|(i, &u)| {
                let head_slot = if i % 2 == 0 { 1 } else { 0 };
                let (base_slot_fx, head_slot_fx) = if head_slot == 1 {
                    (0.0, slot)
                } else {
                    (slot, 0.0)
                };
                Block {
                    base: trials(5.0 + base_slot_fx, n),
                    head: trials(5.0 + delta + head_slot_fx + u, n),
                    head_slot,
                }
            })
            .collect()
    }

    /// 20 A/A blocks that measured slot 1 4% faster, with a small start spread.
    fn calibrated_4pct() -> SlotCalibration {
        SlotCalibration {
            blocks: 20,
            bias: 0.04,
            variance: 0.0001,
            within_variance: 0.00002,
            jobs: 1,
            slot_spread: None,
        }
    }

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    #[test]
    fn a_slot_effect_cancels_and_is_reported() {
        // Slot 1 is 4% faster; nothing changed; starts spread a little.
        let blocks = alternating(0.0, 0.04, &[0.003, -0.002, -0.003, 0.002], 4);
        let lv = crossover_level(&blocks, None, 0.25);
        let info = lv.crossover.as_ref().unwrap();
        assert!(close(lv.d.unwrap(), 0.0, 1e-12), "delta {:?}", lv.d);
        assert!(close(info.slot_effect.unwrap(), 0.04, 1e-12));
        assert_eq!(
            (info.blocks, info.head_on_slot1, info.head_on_slot0),
            (4, 2, 2)
        );
        assert!(info.starts_covered && !info.calibrated);
        assert_eq!(lv.df, 2.0);
        let mut levels = [lv];
        let s = DecisionSettings::default();
        assert_ne!(decide(&mut levels, &s), LevelOutcome::Regression);
        // The same data read as one session would call the slot a 4% regression or gain.
        let base: Vec<f64> = blocks.iter().flat_map(|b| b.base.clone()).collect();
        let head: Vec<f64> = blocks.iter().flat_map(|b| b.head.clone()).collect();
        let naive = super::super::relative_level(&base, &head, &[], &[], 0.25);
        assert!(naive.sigma_w.unwrap() > 0.015, "{naive:?}");
    }

    #[test]
    fn the_delta_is_free_of_the_slot_effect_by_hand() {
        // Two blocks per orientation; D = delta + o s + u exactly.
        let (delta, s) = (-0.05, 0.03);
        let u = [0.01, -0.01, 0.0, 0.0];
        let blocks = alternating(delta, s, &u, 3);
        let lv = crossover_level(&blocks, None, 0.25);
        // D+ = delta + s + (0.01, 0.0), D- = delta - s + (-0.01, 0.0)
        let m_plus = delta + s + 0.005;
        let m_minus = delta - s - 0.005;
        assert!(close(lv.d.unwrap(), 0.5 * (m_plus + m_minus), 1e-12));
        // Residuals +-0.005 in each orientation: SS = 4 * 0.005^2, df 2, factor (1/2+1/2)/4.
        let block_var = 4.0 * 0.005f64.powi(2) / 2.0;
        assert!(close(lv.se.unwrap(), (block_var * 0.25).sqrt(), 1e-12));
        let info = lv.crossover.unwrap();
        let within = lv.sigma_w.unwrap().powi(2) * (2.0 / 3.0);
        assert!(close(
            info.start_spread.unwrap(),
            (block_var - within).max(0.0).sqrt(),
            1e-12
        ));
    }

    #[test]
    fn the_trials_noise_floors_a_block_spread_that_came_out_small_by_chance() {
        // Four blocks whose differences agree to 0.1%, but whose trials scatter by about 3%:
        // the blocks' own 2 df cannot claim more precision than the trials allow.
        let noisy =
            |centre: f64| -> Vec<f64> { [-0.03, 0.0, 0.03].iter().map(|e| centre + e).collect() };
        let blocks: Vec<Block> = [(1, 0.001), (0, -0.001), (1, -0.001), (0, 0.001)]
            .iter()
            .map(|&(head_slot, u)| Block {
                base: noisy(5.0),
                head: noisy(5.0 + u),
                head_slot,
            })
            .collect();
        let lv = crossover_level(&blocks, None, 0.25);
        let within = lv.sigma_w.unwrap().powi(2) * (2.0 / 3.0);
        assert!(
            close(lv.se.unwrap(), (within * 0.25).sqrt(), 1e-12),
            "{lv:?}"
        );
        assert_eq!(lv.df, 2.0);
    }

    #[test]
    fn one_block_without_calibration_does_not_cover_starts() {
        let blocks = alternating(0.0, 0.04, &[0.0], 6);
        let lv = crossover_level(&blocks, None, 0.25);
        let info = lv.crossover.as_ref().unwrap();
        assert!(!info.starts_covered);
        // The slot effect stays in the estimate: nothing could take it out, so the main
        // test is not estimable; only the guard (on within-block noise) remains.
        assert!(close(lv.d.unwrap(), 0.04, 1e-12));
        assert!(!lv.estimable());
        assert!(lv.se_w > 0.0 && lv.df_w > 0.0);
        let mut levels = [lv];
        assert_eq!(
            decide(&mut levels, &DecisionSettings::default()),
            LevelOutcome::Inconclusive
        );
        // Two blocks, one each way round: the slot cancels but the start spread has no df.
        let two = crossover_level(&alternating(0.0, 0.04, &[0.0, 0.02], 6), None, 0.25);
        assert!(!two.crossover.as_ref().unwrap().starts_covered && !two.estimable());
    }

    #[test]
    fn one_block_does_not_use_a_calibration_it_cannot_check() {
        // Before issue 48 one block took the calibration unchecked: from a quieter night it
        // failed unchanged servers 22-47% of the time.
        let blocks = alternating(0.0, 0.04, &[0.0], 6);
        let lv = crossover_level(&blocks, Some(&calibrated_4pct()), 0.25);
        let info = lv.crossover.as_ref().unwrap();
        assert!(!info.calibrated && !info.starts_covered && !lv.estimable());
        assert_eq!(
            info.calibration_unused,
            Some(CalibrationUnused::NothingToCheck)
        );
    }

    #[test]
    fn two_blocks_check_a_calibration_by_its_slot_effect() {
        // One block each way round: the slot contrast is the one degree of freedom.
        let blocks = alternating(0.0, 0.04, &[0.0, 0.002], 6);
        let cal = calibrated_4pct();
        let lv = crossover_level(&blocks, Some(&cal), 0.25);
        let info = lv.crossover.as_ref().unwrap();
        assert!(
            info.calibrated && info.starts_covered && lv.estimable(),
            "{info:?}"
        );
        // Own 1 df (the contrast) + the calibration weighted by no more: 2 df.
        assert_eq!(lv.df, 2.0);
        assert!(close(
            info.calibration_slot_contrast.unwrap(),
            -0.001,
            1e-12
        ));
        // The same blocks with the slot effect moved to 0%: the calibration is set aside.
        let moved = alternating(0.0, 0.0, &[0.0, 0.002], 6);
        let lv = crossover_level(&moved, Some(&cal), 0.25);
        let info = lv.crossover.as_ref().unwrap();
        assert!(info.calibration_disagreed && !info.calibrated && !lv.estimable());
    }

    #[test]
    fn one_orientation_is_never_estimable_without_a_calibration() {
        // Three blocks, all with the head on slot 1 (a level that lost the other
        // orientation's trials): a 4% slot effect would read as a 4% gain or loss.
        let mut blocks = alternating(0.0, 0.04, &[0.0, 0.0, 0.0, 0.0, 0.0, 0.0], 4);
        blocks.retain(|b| b.head_slot == 1);
        let lv = crossover_level(&blocks, None, 0.25);
        assert!(!lv.estimable(), "{lv:?}");
        assert!(!lv.crossover.as_ref().unwrap().starts_covered);
        // A calibration of one job: its slot effect's job-to-job spread is unknown.
        let cal = calibrated_4pct();
        let lv = crossover_level(&blocks, Some(&cal), 0.25);
        assert!(!lv.estimable(), "{lv:?}");
        let info = lv.crossover.as_ref().unwrap();
        assert_eq!(
            info.calibration_unused,
            Some(CalibrationUnused::SlotSpreadUnknown)
        );
        // Of several jobs, whose slot effects spread 1%: taken out, and the test widened.
        let jobs = SlotCalibration {
            jobs: 4,
            slot_spread: Some(0.0001),
            ..cal
        };
        let lv = crossover_level(&blocks, Some(&jobs), 0.25);
        assert!(lv.estimable() && close(lv.d.unwrap(), 0.0, 1e-12));
        assert!(lv.se.unwrap() > 0.01 && lv.df < 4.0, "{lv:?}");
    }

    #[test]
    fn a_calibration_from_a_quieter_night_is_set_aside() {
        // The calibration says starts spread 0.5%; this run's blocks spread about 4%.
        let quiet = SlotCalibration {
            blocks: 40,
            bias: 0.0,
            variance: 0.005f64.powi(2) + 0.00002,
            within_variance: 0.00002,
            jobs: 1,
            slot_spread: None,
        };
        let noisy = alternating(0.0, 0.0, &[0.04, -0.04, -0.04, 0.04, 0.03, -0.03], 4);
        let lv = crossover_level(&noisy, Some(&quiet), 0.25);
        let info = lv.crossover.as_ref().unwrap();
        assert!(info.calibration_disagreed && !info.calibrated, "{info:?}");
        assert_eq!(lv.df, 4.0, "the run's own blocks alone: 6 - 2 df");
        assert!(close(info.calibration_slot_contrast.unwrap(), 0.0, 0.03));
        assert!(info.own_spread.unwrap() > 0.03 && info.calibration_spread.unwrap() < 0.006);
        // A run as quiet as its calibration pools it.
        let calm = alternating(0.0, 0.0, &[0.004, -0.004, -0.004, 0.004, 0.003, -0.003], 4);
        let lv = crossover_level(&calm, Some(&quiet), 0.25);
        let info = lv.crossover.as_ref().unwrap();
        assert!(!info.calibration_disagreed && info.calibrated, "{info:?}");
        // Its own 4 df and the slot contrast's 1, and the calibration weighted by no more df
        // than the run's own blocks' spread has (6 - 2), not the 39 it holds.
        assert_eq!(lv.df, 9.0);
    }

    #[test]
    fn the_run_s_levels_together_vouch_for_a_calibration_one_level_doubted() {
        // Five levels of a night as the calibration's; C=1's 4 blocks spread more by chance.
        let levels: Vec<Vec<Block>> = [0.012, 0.006, 0.006, 0.006, 0.006]
            .iter()
            .map(|&u| alternating(0.0, 0.04, &[u, -u, -u, u], 4))
            .collect();
        let cal = calibrated_4pct();
        let alone = crossover_level(&levels[0], Some(&cal), 0.25);
        assert!(alone.crossover.as_ref().unwrap().calibration_disagreed);
        let evidence: Vec<LevelEvidence> = (levels.iter())
            .filter_map(|b| calibration_evidence(b, Some(&cal)))
            .collect();
        let run = super::super::pooled_evidence(&evidence).unwrap();
        assert_eq!((run.levels, run.df), (5, 15.0));
        let pooled = crossover_level_with(&levels[0], Some(&cal), Some(&run), 0.25);
        let info = pooled.crossover.as_ref().unwrap();
        assert!(
            info.calibrated && info.calibration_run_check == Some(run),
            "{info:?}"
        );
        // Own 2 df and the slot contrast's 1, and the calibration's at the level's own 2.
        assert_eq!(
            (info.calibration_weight, pooled.df, alone.df),
            (Some(2.0), 5.0, 2.0)
        );
    }

    #[test]
    fn a_real_drop_fails_through_the_blocks() {
        let blocks = alternating(-0.10, 0.04, &[0.002, -0.002, 0.001, -0.001, 0.0, 0.0], 4);
        let mut levels = [crossover_level(&blocks, None, 0.25)];
        assert_eq!(
            decide(&mut levels, &DecisionSettings::default()),
            LevelOutcome::Regression
        );
    }

    #[test]
    fn empty_and_hostile_blocks_do_not_panic() {
        let none = crossover_level(&[], None, 0.25);
        assert!(none.d.is_none());
        let odd = [Block {
            base: vec![f64::NAN, f64::INFINITY],
            head: vec![],
            head_slot: 7,
        }];
        let lv = crossover_level(&odd, None, 0.25);
        assert!(lv.d.is_none() && lv.p == 1.0);
    }
}
