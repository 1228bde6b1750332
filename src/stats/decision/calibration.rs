//! An A/A calibration of the relative gate's slots ([`SlotCalibration`]) and the check it
//! passes before a run in blocks may use it (issue 48). A calibration speaks of another
//! night, perhaps another machine: it is used only where this run's own blocks can check it,
//! never on trust.
//!
//! What a run can check it with: the spread of its blocks about their orientation's mean
//! (B - 2 degrees of freedom with both orientations, B - 1 with one) and, with both
//! orientations, its own slot effect s-hat = (mean D+ - mean D-) / 2 against the
//! calibration's (one degree of freedom more: under a stable slot effect s-hat - bias varies
//! by the block variance times the orientation factor, plus the calibration's own error).
//! Both go into one F test against the block variance the calibration predicts, so a
//! calibration from a quieter night and one whose slot effect moved are both set aside. One
//! block gives nothing to check it with, so a one-block look does not use it (before issue
//! 48 it took it unchecked: 22-47% false failures with a calibration from a quieter night).
//! With one orientation the calibration's slot effect is subtracted unchecked, so its
//! job-to-job spread (measured where the rows come from several `baseline calibrate` jobs)
//! widens the test; where that spread was never measured the calibration is not used there.
//!
//! A night noisier than its calibration is noisier at every level at once, so the run's
//! levels' checks are also pooled into one F test ([`pooled_evidence`], issue 48 item 4):
//! where it has the degrees of freedom, it decides whether a level may pool its calibration,
//! and the level's own test only vetoes it at a stricter p; see [`pooling_weight`].

use serde::{Deserialize, Serialize};

use super::{mean, var};

/// What A/A blocks on main measured at one level (the same server in both arms, slots
/// swapped or not): per block x = mean ln(arm on slot 1) - mean ln(arm on slot 0).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SlotCalibration {
    /// How many A/A blocks (server pairs started) the figures come from.
    pub blocks: usize,
    /// Mean of x: the slot effect (ln; slot 1 over slot 0).
    pub bias: f64,
    /// Sample variance of x (blocks - 1 df): start spread and within noise together.
    pub variance: f64,
    /// Mean within-block variance of x (the part the trials' own noise explains).
    pub within_variance: f64,
    /// How many calibrating jobs (`baseline calibrate` runs) the blocks come from.
    #[serde(default = "one")]
    pub jobs: usize,
    /// The slot effect's job-to-job variance (ln^2) beyond what the blocks' spread explains;
    /// None with one job, where it was never measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slot_spread: Option<f64>,
}

fn one() -> usize {
    1
}

impl SlotCalibration {
    /// From A/A blocks' x values and within variances, all of one job; None with fewer than
    /// 2 blocks or non-finite figures.
    pub fn from_blocks(x: &[f64], within: &[f64]) -> Option<SlotCalibration> {
        Self::from_job_blocks(x, within, &vec![0; x.len()])
    }

    /// As [`Self::from_blocks`], each block labelled with the job that measured it: with two
    /// or more jobs the slot effect's job-to-job spread is measured too.
    pub fn from_job_blocks(x: &[f64], within: &[f64], job: &[u64]) -> Option<SlotCalibration> {
        let rows: Vec<(f64, f64, u64)> = (x.iter().zip(within).zip(job))
            .filter(|((a, b), _)| a.is_finite() && b.is_finite() && **b >= 0.0)
            .map(|((a, b), j)| (*a, *b, *j))
            .collect();
        if rows.len() < 2 {
            return None;
        }
        let xs: Vec<f64> = rows.iter().map(|p| p.0).collect();
        let ws: Vec<f64> = rows.iter().map(|p| p.1).collect();
        let (jobs, slot_spread) = job_spread(&rows);
        Some(SlotCalibration {
            blocks: xs.len(),
            bias: mean(&xs),
            variance: var(&xs),
            within_variance: mean(&ws),
            jobs,
            slot_spread,
        })
    }

    /// The start spread beyond within noise (a variance, >= 0), and its df.
    pub(super) fn start_variance(&self) -> (f64, f64) {
        (
            (self.variance - self.within_variance).max(0.0),
            self.blocks as f64 - 1.0,
        )
    }

    /// Usable: at least 2 blocks and finite, non-negative figures.
    pub(super) fn usable(&self) -> bool {
        self.blocks >= 2
            && self.bias.is_finite()
            && self.variance.is_finite()
            && self.variance >= 0.0
            && self.within_variance.is_finite()
            && self.within_variance >= 0.0
            && self.slot_spread.is_none_or(|s| s.is_finite() && s >= 0.0)
    }

    /// The variance of (this run's slot effect - the calibration's bias) beyond the run's own
    /// blocks: the bias's error, and the slot effect's job-to-job spread where measured.
    fn bias_variance(&self) -> f64 {
        self.variance / self.blocks as f64 + self.slot_spread.unwrap_or(0.0)
    }
}

/// The jobs among the rows and the slot effect's job-to-job variance beyond what the blocks'
/// spread within the jobs explains (method of moments, >= 0); None with one job or where no
/// job has two blocks to tell the two apart.
fn job_spread(rows: &[(f64, f64, u64)]) -> (usize, Option<f64>) {
    let mut ids: Vec<u64> = rows.iter().map(|r| r.2).collect();
    ids.sort_unstable();
    ids.dedup();
    if ids.len() < 2 {
        return (ids.len(), None);
    }
    let groups: Vec<Vec<f64>> = (ids.iter())
        .map(|&j| rows.iter().filter(|r| r.2 == j).map(|r| r.0).collect())
        .collect();
    let means: Vec<f64> = groups.iter().map(|g| mean(g)).collect();
    let (mut ss, mut df) = (0.0, 0.0);
    for g in groups.iter().filter(|g| g.len() >= 2) {
        ss += var(g) * (g.len() as f64 - 1.0);
        df += g.len() as f64 - 1.0;
    }
    if df == 0.0 {
        return (ids.len(), None);
    }
    let inv_n = groups.iter().map(|g| 1.0 / g.len() as f64).sum::<f64>() / groups.len() as f64;
    let tau2 = (var(&means) - ss / df * inv_n).max(0.0);
    (ids.len(), tau2.is_finite().then_some(tau2))
}

/// Why a calibration held for a level was not used by a look.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CalibrationUnused {
    /// One block (or no trial noise to scale it with): nothing of this run's to check it by.
    NothingToCheck,
    /// One orientation, and the calibration's slot effect was never measured in more than
    /// one job: its subtraction could not be widened by how much it moves.
    SlotSpreadUnknown,
}

/// What a run's blocks say about a calibration: `ss` / `df` of its own (block spread and,
/// with both orientations, the slot contrast), the F test's p, and the evidence in the
/// calibration's units, which the run's other levels pool ([`RunEvidence`]).
pub(super) struct Checked {
    /// The run's evidence on the block variance: sum of squares and df.
    pub ss: f64,
    pub df: f64,
    /// The run's slot effect minus the calibration's (ln), where both orientations ran.
    pub slot_contrast: Option<f64>,
    /// The one-sided p of the level's F test.
    pub p: f64,
    /// The same evidence for pooling over levels.
    pub evidence: LevelEvidence,
}

/// One level's check of its calibration in the calibration's units: the run's sum of
/// squares over the block variance the calibration predicts (under agreement a chi-square
/// with `df`), the calibration's df, and the weight the level's own blocks' spread could
/// vouch for alone (`df_own`, at least one).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LevelEvidence {
    pub scaled_ss: f64,
    pub df: f64,
    pub df_cal: f64,
    pub weight: f64,
}

/// The run's levels' checks pooled (issue 48 item 4): one night is noisier or quieter than
/// its calibration at every level at once, so the levels' scaled sums of squares add (an F
/// test with the levels' df together, against the calibrations' df together), and a level
/// takes its calibration where the pooled evidence agrees. A run of 4 blocks and 5
/// levels checks its calibrations with 15 degrees of freedom where each level has 3.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RunEvidence {
    /// One-sided p of the pooled F test.
    pub p: f64,
    /// Its degrees of freedom (the levels' checks together) and the levels pooled.
    pub df: f64,
    pub levels: usize,
}

/// Pools the levels' checks; None where no level checked a calibration.
pub fn pooled_evidence(levels: &[LevelEvidence]) -> Option<RunEvidence> {
    let ok: Vec<&LevelEvidence> = (levels.iter())
        .filter(|e| e.scaled_ss.is_finite() && e.scaled_ss >= 0.0 && e.df > 0.0 && e.df_cal > 0.0)
        .collect();
    if ok.is_empty() {
        return None;
    }
    let sum = |f: fn(&LevelEvidence) -> f64| ok.iter().map(|e| f(e)).sum::<f64>();
    let (ss, df, df_cal) = (sum(|e| e.scaled_ss), sum(|e| e.df), sum(|e| e.df_cal));
    Some(RunEvidence {
        p: agreement_p(ss / df, 1.0, df, df_cal),
        df,
        levels: ok.len(),
    })
}

/// A calibration is pooled with a run's blocks only while the run's own evidence (its block
/// variance and, with both orientations, its slot effect against the calibration's) is not
/// above what the calibration predicts with p below this (one-sided F test). Lenient on
/// purpose: with 1-4 degrees of freedom of its own a run can show little, and pooling a
/// calibration from a quieter night with a noisier run failed unchanged servers 16-26% of
/// the time (issue 34); setting a calibration aside only costs degrees of freedom.
pub const CALIBRATION_AGREEMENT_P: f64 = 0.25;

/// The run's blocks as the check reads them.
pub(super) struct RunBlocks {
    /// Sum of squares of the blocks about their orientation's mean, and its df.
    pub ss: f64,
    pub df_own: f64,
    /// Both orientations ran: the run's slot effect `slot` is estimable, its variance the
    /// block variance times `factor`.
    pub slot: Option<f64>,
    pub factor: f64,
    /// Within-block noise of one block's difference (NaN where unknown).
    pub within: f64,
}

/// Checks `c` against the run; None where the run has nothing to check it with, or (one
/// orientation) its slot effect's job-to-job spread is unknown: see [`CalibrationUnused`].
pub(super) fn check(c: &SlotCalibration, run: &RunBlocks) -> Result<Checked, CalibrationUnused> {
    let df_check = run.df_own + if run.slot.is_some() { 1.0 } else { 0.0 };
    if !run.within.is_finite() || df_check <= 0.0 {
        return Err(CalibrationUnused::NothingToCheck);
    }
    if run.slot.is_none() && c.slot_spread.is_none() {
        return Err(CalibrationUnused::SlotSpreadUnknown);
    }
    let (start, df_cal) = c.start_variance();
    let predicted = start + run.within;
    let (mut ss, mut df) = (run.ss, run.df_own);
    let slot_contrast = run.slot.map(|s| s - c.bias);
    if let Some(r) = slot_contrast {
        // r^2 varies by predicted * factor + bias variance: scaled to the block variance.
        let scale = run.factor + c.bias_variance() / predicted.max(f64::MIN_POSITIVE);
        ss += r * r / scale;
        df += 1.0;
    }
    let p = agreement_p(ss / df, predicted, df, df_cal);
    Ok(Checked {
        ss,
        df,
        slot_contrast,
        p,
        evidence: LevelEvidence {
            scaled_ss: ss / predicted.max(f64::MIN_POSITIVE),
            df,
            df_cal,
            weight: run.df_own.max(0.0),
        },
    })
}

/// Whether a level pools its checked calibration, and with what weight (df). Where the
/// run's levels pooled enough evidence (at least [`POOLED_MIN_DF`] over two or more levels):
/// pooled unless the level's own F test says it differs (p below [`LEVEL_DISAGREEMENT_P`]),
/// at a weight that ramps with the pooled test's p from nothing at [`POOLED_P_NONE`] to all
/// of it at [`POOLED_P_FULL`], all of it being the calibration's df but no more than the
/// level's own blocks' df (the levels' df together bought more power, 60.7% of 5% drops
/// caught at a same-night 3% spread, but failed 1.5-2.9% of unchanged jobs where one level's
/// calibration alone was from a quieter night). Else the level alone decides, as before
/// issue 48 item 4: p at least [`CALIBRATION_AGREEMENT_P`], weight no more than its own df.
pub(super) fn pooling_weight(
    c: &SlotCalibration,
    ch: &Checked,
    run: Option<&RunEvidence>,
) -> Option<f64> {
    let (_, df_cal) = c.start_variance();
    let own_weight = ch.evidence.weight.max(1.0);
    match run.filter(|r| pooled_decides(r)) {
        Some(r) => {
            let share = ((r.p - POOLED_P_NONE) / (POOLED_P_FULL - POOLED_P_NONE)).clamp(0.0, 1.0);
            let weight = share * df_cal.min(own_weight);
            (ch.p >= LEVEL_DISAGREEMENT_P && share > 0.0).then_some(weight)
        }
        None => (ch.p >= CALIBRATION_AGREEMENT_P).then_some(df_cal.min(own_weight)),
    }
}

/// Whether the run's pooled check decides ([`pooling_weight`]).
pub(super) fn pooled_decides(r: &RunEvidence) -> bool {
    r.df >= POOLED_MIN_DF && r.levels >= 2
}

/// The pooled check speaks for the levels only with this many degrees of freedom: 5 levels
/// at 3 blocks (2 each, slot contrast included), 4 levels at 4 blocks. Below it (two blocks,
/// or a profile of one or two levels) each level decides alone, as before.
pub const POOLED_MIN_DF: f64 = 10.0;

/// The pooled F test's p below which no level pools its calibration, and above which a
/// level takes all the weight it may; in between the weight ramps. Chosen on the crossover
/// bench (issue 48 item 4; benches/gate_crossover.rs, tables 7 and 9): a run of the
/// calibration's own night lies below 0.001 one time in a thousand and takes all the weight
/// 95% of the time; the ramp keeps a borderline night from taking the calibration whole.
pub const POOLED_P_NONE: f64 = 0.001;
pub const POOLED_P_FULL: f64 = 0.05;

/// Where the run's levels together agree with their calibrations, a level still sets its
/// own aside when its own F test says it differs at this p (a night noisy at one level only:
/// at 0.01 such a level failed 0.45-0.95% of unchanged jobs, at 0.05 0.35-0.65%).
pub const LEVEL_DISAGREEMENT_P: f64 = 0.05;

/// The calibration's share of the block variance at `weight` df: its start spread with this
/// run's within noise, times the weight.
pub(super) fn calibration_share(c: &SlotCalibration, within: f64, weight: f64) -> f64 {
    (c.start_variance().0 + within) * weight
}

/// The extra variance of delta-hat where one orientation ran and the calibration's slot
/// effect was subtracted, and its df.
pub(super) fn subtracted_bias(c: &SlotCalibration) -> (f64, f64) {
    let df = match c.slot_spread {
        Some(_) => c.jobs as f64 - 1.0,
        None => c.blocks as f64 - 1.0,
    };
    (c.bias_variance(), df.max(1.0))
}

/// One-sided p of an F test that a run's block variance `own` (df `df_own`) is no larger
/// than `predicted` (df `df_cal`): P(F >= own / predicted). 1 where it cannot be computed.
fn agreement_p(own: f64, predicted: f64, df_own: f64, df_cal: f64) -> f64 {
    use statrs::distribution::{ContinuousCDF, FisherSnedecor};
    if !(own.is_finite() && predicted > 0.0 && df_own > 0.0 && df_cal > 0.0) {
        return 1.0;
    }
    match FisherSnedecor::new(df_own, df_cal) {
        Ok(f) => f.sf(own / predicted),
        Err(_) => 1.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    #[test]
    fn calibration_needs_two_blocks() {
        assert!(SlotCalibration::from_blocks(&[0.01], &[0.0001]).is_none());
        let c = SlotCalibration::from_blocks(&[0.01, 0.03, f64::NAN], &[1e-4, 3e-4, 1e-4]).unwrap();
        assert_eq!((c.blocks, c.jobs, c.slot_spread), (2, 1, None));
        assert!(close(c.bias, 0.02, 1e-15) && close(c.variance, 0.0002, 1e-15));
        assert!(close(c.within_variance, 2e-4, 1e-15));
    }

    #[test]
    fn the_slot_effects_job_to_job_spread_is_measured_across_jobs() {
        // Two jobs of three blocks: slot effects 2% and 8%, blocks within 0.1% of them.
        let x = [0.019, 0.020, 0.021, 0.079, 0.080, 0.081];
        let c = SlotCalibration::from_job_blocks(&x, &[1e-5; 6], &[1, 1, 1, 2, 2, 2]).unwrap();
        assert_eq!(c.jobs, 2);
        // var of the job means (0.02, 0.08) = 0.0018, less the blocks' 1e-6 / 3.
        let tau2 = c.slot_spread.unwrap();
        assert!(close(tau2, 0.0018 - 1e-6 / 3.0, 1e-12), "{tau2}");
        // Jobs of one block each cannot tell the two apart.
        let c = SlotCalibration::from_job_blocks(&[0.02, 0.08], &[1e-5; 2], &[1, 2]).unwrap();
        assert_eq!((c.jobs, c.slot_spread), (2, None));
    }

    fn run(ss: f64, df_own: f64, slot: Option<f64>) -> RunBlocks {
        RunBlocks {
            ss,
            df_own,
            slot,
            factor: 0.5,
            within: 1e-4,
        }
    }

    #[test]
    fn one_block_has_nothing_to_check_a_calibration_with() {
        let c =
            SlotCalibration::from_job_blocks(&[0.0, 0.01, -0.01, 0.0], &[1e-4; 4], &[1, 1, 2, 2])
                .unwrap();
        assert_eq!(
            check(&c, &run(0.0, 0.0, None)).err(),
            Some(CalibrationUnused::NothingToCheck)
        );
        // One job: one orientation cannot widen by a spread never measured.
        let one_job = SlotCalibration::from_blocks(&[0.0, 0.01, -0.01], &[1e-4; 3]).unwrap();
        assert_eq!(
            check(&one_job, &run(1e-3, 2.0, None)).err(),
            Some(CalibrationUnused::SlotSpreadUnknown)
        );
        // Two blocks, one each way round: the slot contrast is one degree of freedom.
        let two = check(&one_job, &run(0.0, 0.0, Some(0.0))).unwrap();
        assert_eq!(two.df, 1.0);
    }

    #[test]
    fn a_slot_effect_that_moved_sets_the_calibration_aside() {
        // The calibration: slot 1 4% faster, starts spread little.
        let x: Vec<f64> = (0..20)
            .map(|i| 0.04 + 0.002 * f64::from(i % 3) - 0.002)
            .collect();
        let c = SlotCalibration::from_blocks(&x, &[1e-4; 20]).unwrap();
        let same = check(&c, &run(0.0, 0.0, Some(0.04))).unwrap();
        assert!(same.p >= CALIBRATION_AGREEMENT_P);
        // This run's slot effect is 0%: four points off, with block sd about 1.4%.
        let moved = check(&c, &run(0.0, 0.0, Some(0.0))).unwrap();
        assert!(
            moved.p < CALIBRATION_AGREEMENT_P && close(moved.slot_contrast.unwrap(), -0.04, 1e-3)
        );
    }
    fn evidence(scaled_ss: f64, df: f64) -> LevelEvidence {
        LevelEvidence {
            scaled_ss,
            df,
            df_cal: 19.0,
            weight: df - 1.0,
        }
    }

    #[test]
    fn the_levels_checks_pool_into_one_f_test() {
        assert!(pooled_evidence(&[]).is_none());
        // Five levels of 4 blocks, each as its calibration predicts: 15 df, p about 0.5.
        let agree = pooled_evidence(&[evidence(3.0, 3.0); 5]).unwrap();
        assert_eq!((agree.df, agree.levels), (15.0, 5));
        assert!(agree.p > 0.3 && agree.p < 0.7, "{agree:?}");
        // Each level 3 times noisier than predicted: alone F(3, 19) = 3 gives p about 0.06,
        // together F(15, 95) = 3 far below the ramp's floor.
        let alone = agreement_p(3.0, 1.0, 3.0, 19.0);
        let noisy = pooled_evidence(&[evidence(9.0, 3.0); 5]).unwrap();
        assert!(alone > 0.03 && noisy.p < POOLED_P_NONE, "{alone} {noisy:?}");
        // A hostile figure is left out, not pooled.
        let odd = pooled_evidence(&[evidence(f64::NAN, 3.0), evidence(3.0, 3.0)]).unwrap();
        assert_eq!(odd.levels, 1);
    }

    fn checked(p: f64, df_own: f64) -> Checked {
        Checked {
            ss: 0.0,
            df: df_own + 1.0,
            slot_contrast: Some(0.0),
            p,
            evidence: LevelEvidence {
                scaled_ss: 0.0,
                df: df_own + 1.0,
                df_cal: 19.0,
                weight: df_own,
            },
        }
    }

    fn run_check(p: f64, df: f64, levels: usize) -> RunEvidence {
        RunEvidence { p, df, levels }
    }

    #[test]
    fn the_weight_ramps_with_the_runs_evidence() {
        let c = SlotCalibration {
            blocks: 20,
            bias: 0.04,
            variance: 2e-4,
            within_variance: 1e-4,
            jobs: 1,
            slot_spread: None,
        };
        // Alone (no pooled check, or too few df in it): the old rule, p >= 0.25 and no more
        // weight than the level's own df.
        assert_eq!(pooling_weight(&c, &checked(0.3, 2.0), None), Some(2.0));
        assert_eq!(pooling_weight(&c, &checked(0.2, 2.0), None), None);
        let thin = run_check(0.9, 6.0, 2);
        assert_eq!(pooling_weight(&c, &checked(0.2, 2.0), Some(&thin)), None);
        // Pooled over 5 levels at 15 df and p >= POOLED_P_FULL: a level p of 0.2 no longer
        // sets it aside; the weight is still no more than the level's own df.
        let agree = run_check(0.4, 15.0, 5);
        assert_eq!(
            pooling_weight(&c, &checked(0.2, 2.0), Some(&agree)),
            Some(2.0)
        );
        // ... but a level whose own test says it differs keeps its own spread.
        let lone = checked(LEVEL_DISAGREEMENT_P / 2.0, 2.0);
        assert_eq!(pooling_weight(&c, &lone, Some(&agree)), None);
        // Capped by the calibration's df; half way up the ramp, half the weight.
        assert_eq!(
            pooling_weight(&c, &checked(0.5, 30.0), Some(&agree)),
            Some(19.0)
        );
        let mid = run_check(0.5 * (POOLED_P_NONE + POOLED_P_FULL), 15.0, 5);
        let w = pooling_weight(&c, &checked(0.5, 6.0), Some(&mid)).unwrap();
        assert!(close(w, 3.0, 1e-9), "{w}");
        // Below the ramp's floor: set aside at every level.
        let noisy = run_check(POOLED_P_NONE / 2.0, 15.0, 5);
        assert_eq!(pooling_weight(&c, &checked(0.9, 2.0), Some(&noisy)), None);
    }
}
