//! The regression gate: is the candidate run slower than the baseline, beyond noise?
//!
//! Per level, a one-sided Welch t-test on ln(tok/s), candidate trials against baseline trials
//! (with the between-session variance added when the baseline pools several sessions); Holm
//! correction across the gated levels; a level FAILS only when the corrected p-value is below
//! alpha, the estimated drop is at least the minimum effect, and both sides have enough
//! trials. Runs that measured something else are refused (exit 3) rather than compared.

pub mod baseline;
pub mod gitref;
pub mod merge;

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};

use crate::exit::{not_comparable, Exit};
use crate::gate::baseline::{fingerprint_differences, Baseline};
use crate::profile::GateSettings;
use crate::record::checks::level_problems;
use crate::record::flags::FlagKind;
use crate::record::RunResult;
use crate::stats::{
    compare_log_ratio, holm, level_fails, min_detectable_drop, session_extra_variance, Spread,
};

/// Confidence level of the ratio intervals shown in reports.
pub const CI_LEVEL: f64 = 0.95;
/// Power used for the "smallest detectable change" warning.
const POWER: f64 = 0.8;

/// The gate's answer.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Verdict {
    pub outcome: Outcome,
    pub baseline_name: String,
    pub profile_name: String,
    /// The git ref the baseline was read at, if any.
    pub baseline_ref: Option<String>,
    pub settings: GateSettings,
    pub levels: Vec<LevelVerdict>,
    /// The lowest candidate/baseline ratio over gated levels.
    pub worst_ratio: Option<f64>,
    pub warnings: Vec<String>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Pass,
    Regression,
    NotComparable,
}

impl Outcome {
    pub fn exit(self) -> Exit {
        match self {
            Outcome::Pass => Exit::Pass,
            Outcome::Regression => Exit::Regression,
            Outcome::NotComparable => Exit::NotComparable,
        }
    }

    pub fn word(self) -> &'static str {
        match self {
            Outcome::Pass => "pass",
            Outcome::Regression => "regression",
            Outcome::NotComparable => "not_comparable",
        }
    }
}

/// One level's comparison.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LevelVerdict {
    pub concurrency: u32,
    pub status: LevelStatus,
    /// Geometric means of tok/s.
    pub baseline_mean: Option<f64>,
    pub candidate_mean: Option<f64>,
    /// Candidate / baseline geometric means, with its interval.
    pub ratio: Option<f64>,
    pub ci_low: Option<f64>,
    pub ci_high: Option<f64>,
    /// One-sided p-value for "the candidate is slower", before and after Holm.
    pub p_slower: Option<f64>,
    pub p_adjusted: Option<f64>,
    pub n_baseline: usize,
    pub n_candidate: usize,
    pub baseline_sessions: usize,
    /// The smallest drop this comparison detects with 80% power.
    pub min_detectable_drop: Option<f64>,
    pub note: Option<String>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum LevelStatus {
    Pass,
    Regression,
    Improvement,
    /// Fewer trials than the gate needs on one side.
    InsufficientTrials,
    /// The level is in the baseline but not in the run, or the reverse.
    NotGated,
}

impl LevelStatus {
    pub fn word(self) -> &'static str {
        match self {
            LevelStatus::Pass => "pass",
            LevelStatus::Regression => "FAIL",
            LevelStatus::Improvement => "faster",
            LevelStatus::InsufficientTrials => "too few trials",
            LevelStatus::NotGated => "not gated",
        }
    }
}

/// Compares a candidate run with a baseline. Errors: exit 3 when the two measured different
/// things, exit 2 when the candidate run itself did not measure.
pub fn evaluate(
    baseline: &Baseline,
    candidate: &RunResult,
    settings: &GateSettings,
) -> Result<Verdict> {
    if candidate.profile_hash != baseline.profile_hash {
        return Err(not_comparable(format!(
            "the run used profile {} ({}), the baseline was measured with {}: they measured different things",
            candidate.profile_name, candidate.profile_hash, baseline.profile_hash
        )));
    }
    let (differ, mut warnings) =
        fingerprint_differences(&baseline.environment, &candidate.environment);
    if !differ.is_empty() {
        return Err(not_comparable(format!(
            "the environment differs from the baseline's: {}",
            differ.join("; ")
        )));
    }
    if !candidate.complete {
        bail!("the run is marked incomplete (it was stopped); it cannot be gated");
    }
    let problems = level_problems(&candidate.levels, candidate.profile.sweep.max_error_rate);
    if !problems.is_empty() {
        bail!(
            "the run did not measure every level: {}",
            problems.join("; ")
        );
    }
    if candidate.levels.iter().any(|l| l.rate.is_some()) {
        bail!("the run is open loop (levels keyed by request rate); the gate compares closed-loop concurrency levels only");
    }
    for line in candidate.flag_lines(Some(FlagKind::ClientBound)) {
        warnings.push(format!("candidate: {line}"));
    }

    let mut levels = Vec::new();
    let mut comparisons = Vec::new();
    let mut all_levels = baseline.levels();
    for l in &candidate.levels {
        if !all_levels.contains(&l.concurrency) {
            all_levels.push(l.concurrency);
        }
    }
    all_levels.sort_unstable();
    for c in all_levels {
        let sessions = baseline.sessions_at(c);
        let base: Vec<f64> = sessions.concat();
        let cand: Vec<f64> = candidate
            .levels
            .iter()
            .find(|l| l.concurrency == c)
            .map(|l| l.throughputs())
            .unwrap_or_default();
        let mut v = LevelVerdict {
            concurrency: c,
            status: LevelStatus::NotGated,
            baseline_mean: Spread::of(&base).map(|s| s.geo_mean),
            candidate_mean: Spread::of(&cand).map(|s| s.geo_mean),
            ratio: None,
            ci_low: None,
            ci_high: None,
            p_slower: None,
            p_adjusted: None,
            n_baseline: base.len(),
            n_candidate: cand.len(),
            baseline_sessions: sessions.len(),
            min_detectable_drop: None,
            note: None,
        };
        if base.is_empty() || cand.is_empty() {
            v.note = Some(
                if base.is_empty() {
                    "not in the baseline"
                } else {
                    "not in this run"
                }
                .into(),
            );
            levels.push(v);
            continue;
        }
        if base.len() < 2 || cand.len() < 2 {
            v.status = LevelStatus::InsufficientTrials;
            v.note = Some("a comparison needs at least 2 trials on each side".into());
            levels.push(v);
            continue;
        }
        match compare_log_ratio(&base, &cand, CI_LEVEL, session_extra_variance(&sessions)) {
            Ok(cmp) => {
                v.ratio = Some(cmp.ratio);
                v.ci_low = Some(cmp.ci_low);
                v.ci_high = Some(cmp.ci_high);
                v.p_slower = Some(cmp.p_slower);
                comparisons.push((levels.len(), cmp.p_slower, cmp.p_faster));
            }
            Err(e) => v.note = Some(format!("cannot compare: {e}")),
        }
        levels.push(v);
    }

    let gated = comparisons.len().max(1);
    let adjusted_slower = holm(&comparisons.iter().map(|c| c.1).collect::<Vec<_>>());
    let adjusted_faster = holm(&comparisons.iter().map(|c| c.2).collect::<Vec<_>>());
    let min_trials = settings.min_trials as usize;
    for (k, &(i, _, _)) in comparisons.iter().enumerate() {
        let v = &mut levels[i];
        let ratio = v.ratio.unwrap_or(1.0);
        v.p_adjusted = Some(adjusted_slower[k]);
        let enough = v.n_baseline >= min_trials && v.n_candidate >= min_trials;
        v.status = if level_fails(
            adjusted_slower[k],
            ratio,
            settings.alpha,
            settings.min_effect,
            v.n_baseline,
            v.n_candidate,
            min_trials,
        ) {
            LevelStatus::Regression
        } else if !enough {
            LevelStatus::InsufficientTrials
        } else if adjusted_faster[k] < settings.alpha && ratio - 1.0 >= settings.min_effect {
            LevelStatus::Improvement
        } else {
            LevelStatus::Pass
        };
        if !enough {
            v.note = Some(format!(
                "{} baseline and {} candidate trials; the gate needs {min_trials} on each side to fail a level",
                v.n_baseline, v.n_candidate
            ));
        }
        let base_cv = Spread::of(&baseline.sessions_at(v.concurrency).concat()).map(|s| s.cv);
        let cand_cv = candidate
            .levels
            .iter()
            .find(|l| l.concurrency == v.concurrency)
            .and_then(|l| Spread::of(&l.throughputs()))
            .map(|s| s.cv);
        if let (Some(cb), Some(cc)) = (base_cv, cand_cv) {
            let mdd = min_detectable_drop(
                cb,
                cc,
                v.n_baseline,
                v.n_candidate,
                settings.alpha / gated as f64,
                POWER,
            );
            v.min_detectable_drop = Some(mdd);
            if mdd > settings.min_effect {
                warnings.push(format!(
                    "C={}: with trial-to-trial variation of {:.1}% (baseline) and {:.1}% (candidate) and {}+{} trials, \
                     the smallest drop this gate detects reliably is {:.1}%, above the {:.1}% it is set to catch; add trials or reduce noise",
                    v.concurrency,
                    cb * 100.0,
                    cc * 100.0,
                    v.n_baseline,
                    v.n_candidate,
                    if mdd.is_finite() { mdd * 100.0 } else { 100.0 },
                    settings.min_effect * 100.0
                ));
            }
        }
    }
    if baseline.sessions.len() == 1 {
        warnings.push(
            "the baseline holds one session: day-to-day variation is not known yet; bless runs from other days \
             (`baseline bless --append`) so the gate can allow for it"
                .into(),
        );
    }

    let worst_ratio = levels.iter().filter_map(|v| v.ratio).reduce(f64::min);
    let outcome = if levels.iter().any(|v| v.status == LevelStatus::Regression) {
        Outcome::Regression
    } else if levels.iter().any(|v| {
        matches!(
            v.status,
            LevelStatus::InsufficientTrials | LevelStatus::NotGated
        )
    }) {
        Outcome::NotComparable
    } else {
        Outcome::Pass
    };
    Ok(Verdict {
        outcome,
        baseline_name: baseline.name.clone(),
        profile_name: candidate.profile_name.clone(),
        baseline_ref: None,
        settings: settings.clone(),
        levels,
        worst_ratio,
        warnings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exit::{exit_for, Exit};
    use crate::gate::baseline::{bless, BlessMode};
    use crate::record::fake;

    const BASE: [f64; 5] = [100.0, 101.0, 99.5, 100.4, 99.8];

    fn baseline() -> Baseline {
        let run = fake::run(&[(1, &BASE), (8, &[700.0, 705.0, 698.0, 702.0, 699.0])]);
        bless(None, &[run], BlessMode::Replace, "b", None, None).unwrap()
    }

    #[test]
    fn same_speed_passes() {
        let cand = fake::run(&[
            (1, &[100.2, 99.7, 100.9, 100.1, 99.6]),
            (8, &[701.0, 699.0, 703.0, 700.0, 698.5]),
        ]);
        let v = evaluate(&baseline(), &cand, &GateSettings::default()).unwrap();
        assert_eq!(v.outcome, Outcome::Pass, "{v:#?}");
        assert!(v.levels.iter().all(|l| l.status == LevelStatus::Pass));
    }

    #[test]
    fn ten_percent_drop_fails_only_that_level() {
        let cand = fake::run(&[
            (1, &[100.2, 99.7, 100.9, 100.1, 99.6]),
            (8, &[630.0, 632.0, 628.0, 631.0, 629.0]),
        ]);
        let v = evaluate(&baseline(), &cand, &GateSettings::default()).unwrap();
        assert_eq!(v.outcome, Outcome::Regression);
        assert_eq!(v.levels[0].status, LevelStatus::Pass);
        assert_eq!(v.levels[1].status, LevelStatus::Regression);
        let r = v.levels[1].ratio.unwrap();
        assert!((r - 0.9).abs() < 0.005, "{r}");
        assert!(v.levels[1].ci_low.unwrap() < r && r < v.levels[1].ci_high.unwrap());
    }

    #[test]
    fn significant_but_tiny_drop_passes() {
        // 2% slower, very precise: significant, but under the 3% minimum effect.
        let cand = fake::run(&[
            (1, &[98.0, 98.1, 97.9, 98.0, 98.05]),
            (8, &[701.0, 699.0, 703.0, 700.0, 698.5]),
        ]);
        let v = evaluate(&baseline(), &cand, &GateSettings::default()).unwrap();
        assert_eq!(v.levels[0].status, LevelStatus::Pass);
        assert!(v.levels[0].p_adjusted.unwrap() < 0.01);
    }

    #[test]
    fn too_few_trials_cannot_fail() {
        let cand = fake::run(&[(1, &[80.0, 80.5, 79.5]), (8, &[701.0, 699.0, 703.0])]);
        let v = evaluate(&baseline(), &cand, &GateSettings::default()).unwrap();
        assert_eq!(v.levels[0].status, LevelStatus::InsufficientTrials);
        assert_eq!(v.outcome, Outcome::NotComparable);
    }

    #[test]
    fn different_profile_or_gpu_is_not_comparable() {
        let mut cand = fake::run(&[(1, &BASE), (8, &BASE)]);
        cand.profile_hash = "sha256:other".into();
        let err = evaluate(&baseline(), &cand, &GateSettings::default()).unwrap_err();
        assert_eq!(exit_for(&err), Exit::NotComparable);
        let mut cand = fake::run(&[(1, &BASE), (8, &BASE)]);
        cand.environment.gpu_model = Some("OtherGPU".into());
        let err = evaluate(&baseline(), &cand, &GateSettings::default()).unwrap_err();
        assert_eq!(exit_for(&err), Exit::NotComparable);
        assert!(format!("{err:#}").contains("OtherGPU"));
    }

    #[test]
    fn failed_candidate_level_is_an_error_not_a_pass() {
        let mut cand = fake::run(&[(1, &BASE), (8, &BASE)]);
        cand.levels[1].trials[0].succeeded = 0;
        cand.levels[1].trials[0]
            .failed
            .insert(crate::record::ErrorClass::Http, 10);
        let err = evaluate(&baseline(), &cand, &GateSettings::default()).unwrap_err();
        assert_eq!(exit_for(&err), Exit::Failure);
    }
}
