//! The gate's answer: a [`Verdict`] with its outcome, its levels and what it was decided
//! with, and the words and exit code of each outcome.

use serde::{Deserialize, Serialize};

use crate::exit::Exit;
use crate::profile::GateSettings;
use crate::record::TrialMetric;
use crate::stats::decision::{Design, Drift, LevelTest};

use super::explain;
use super::history_need::{HistoryNeed, HistoryPower};

/// The gate's answer.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Verdict {
    pub outcome: Outcome,
    pub baseline_name: String,
    pub profile_name: String,
    /// The git ref the baseline was read at, if any.
    pub baseline_ref: Option<String>,
    pub settings: GateSettings,
    /// Relative (base and head in one job) or history (against main's sessions). Absent in
    /// verdicts of older builds and in refusals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub design: Option<Design>,
    pub levels: Vec<LevelVerdict>,
    /// The lowest candidate/baseline throughput ratio over gated levels.
    pub worst_ratio: Option<f64>,
    /// The trend across the run's interleaved rounds, when it could be measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift: Option<Drift>,
    /// What a reviewer must act on or know before trusting the verdict (annotations in
    /// GitHub Actions, `warning:` on the console, **Warnings** in the Markdown).
    pub warnings: Vec<String>,
    /// Information beside the verdict that asks nothing of the reader: the sequential plan,
    /// why the blocks stopped, the client's flagged trials where they could not have moved
    /// the verdict, server logs cut short. Shown on the console, in verdict.md and the job
    /// summary; never an annotation. Absent from verdicts of older builds (theirs are all
    /// in `warnings`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Where the settings came from ("baseline demo at origin/main", "the run's own
    /// profile"), said in every verdict so that nobody gates with settings they did not see.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settings_from: Option<String>,
    /// Settings given on the command line over the baseline's, each printed in the verdict.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overridden: Vec<SettingOverride>,
    /// What changed besides the gated figure (relative verdicts): figures beyond noise per
    /// level and the readings of them (explain.rs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changes: Option<explain::Changes>,
    /// Relative mode: the engine each arm's server reported. Each arm speaks for itself (an
    /// engine upgrade is what such a run gates); the baseline vouches for the rest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arms: Option<ArmEngines>,
    /// History mode with too few sessions to fail a drop under the guard: how many it needs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history_need: Option<HistoryNeed>,
    /// History mode: how often this baseline catches a 10% drop, where a miss is likely.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history_power: Option<HistoryPower>,
    /// What the load generator's own lateness could do to this verdict (client_bound.rs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<ClientReview>,
    /// Why a verdict whose levels were measured was not decided (not comparable), when it
    /// was refused after measuring: the headline says it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refusal: Option<String>,
    /// The id of the run this verdict judged (its results.json carries the same), or of the
    /// `ci` that refused before measuring: `merge` and the comment step read only files
    /// whose ids agree (`record::run_id`). Absent from verdicts of older builds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
}

/// The engine and version each arm of a relative run reported (None: it did not say).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct ArmEngines {
    pub head_engine: Option<String>,
    pub head_version: Option<String>,
    pub base_engine: Option<String>,
    pub base_version: Option<String>,
}

impl ArmEngines {
    /// Whether the two arms ran different engines or versions.
    pub fn differ(&self) -> bool {
        self.head_engine != self.base_engine || self.head_version != self.base_version
    }

    /// "engines differ between the arms: head: vllm 0.2.0, base: 0.1.0" (the base's engine
    /// named only where it differs), or None when they agree or an arm said nothing (results
    /// of older builds record no base engine: silence is not a difference).
    pub fn line(&self) -> Option<String> {
        let silent = |e: &Option<String>, v: &Option<String>| e.is_none() && v.is_none();
        if !self.differ()
            || silent(&self.head_engine, &self.head_version)
            || silent(&self.base_engine, &self.base_version)
        {
            return None;
        }
        let said = |e: Option<&str>, v: Option<&str>| match (e, v) {
            (None, None) => "did not say".to_string(),
            (e, v) => [e, v].into_iter().flatten().collect::<Vec<_>>().join(" "),
        };
        let head = said(self.head_engine.as_deref(), self.head_version.as_deref());
        let base = match self.base_engine == self.head_engine {
            true => said(None, self.base_version.as_deref()),
            false => said(self.base_engine.as_deref(), self.base_version.as_deref()),
        };
        Some(format!(
            "engines differ between the arms: head: {head}, base: {base} (the verdict measures \
             that change; the baseline vouches for the profile and the hardware)"
        ))
    }
}

/// A gate setting given on the command line in place of the baseline's (or profile's).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SettingOverride {
    /// The setting, as in the profile (`alpha`, `min_effect`, `min_trials`, `tolerance`).
    pub field: String,
    pub value: String,
    /// What the baseline (or the run's profile) says.
    pub was: String,
}

impl SettingOverride {
    /// The record of `ci --allow-regression` (or `gate --allow-regression`) among a
    /// verdict's overridden settings.
    pub fn allow_regression() -> SettingOverride {
        SettingOverride {
            field: ALLOW_REGRESSION.into(),
            value: "true".into(),
            was: "false".into(),
        }
    }
}

/// How the notes that say what a verdict cost begin: a run in blocks (`compare`), and legs
/// pooled by `merge` (`pool`). The PR comment shows these notes; the rest stay in verdict.md.
pub const RUN_COST_NOTE: &str = "blocks: ";
pub const POOL_COST_NOTE: &str = "blocks per runner and pair: ";

impl Verdict {
    /// The notes that say what the verdict cost: blocks per pair (or per runner and pair),
    /// wall time, GPU-hours.
    pub fn cost_notes(&self) -> impl Iterator<Item = &String> {
        (self.notes.iter())
            .filter(|n| n.starts_with(RUN_COST_NOTE) || n.starts_with(POOL_COST_NOTE))
    }

    /// A verdict that gated no level: not comparable, `why` its one warning, nothing else
    /// said (no design, drift, changes or notices; `refusal` stays for a verdict refused
    /// after measuring). `ci` writes one for a check refused before it measured, so that
    /// `throughline merge` counts that check; `profile_name` is the baseline's name where
    /// the profile is not known.
    pub fn refused(
        baseline_name: &str,
        profile_name: &str,
        baseline_ref: Option<String>,
        settings: GateSettings,
        why: &str,
    ) -> Verdict {
        Verdict {
            outcome: Outcome::NotComparable,
            baseline_name: baseline_name.to_string(),
            profile_name: profile_name.to_string(),
            baseline_ref,
            settings,
            design: None,
            levels: Vec::new(),
            worst_ratio: None,
            drift: None,
            warnings: vec![why.to_string()],
            notes: Vec::new(),
            settings_from: None,
            overridden: Vec::new(),
            changes: None,
            arms: None,
            history_need: None,
            history_power: None,
            client: None,
            refusal: None,
            run_id: None,
        }
    }

    /// "settings overridden: alpha 0.05 (baseline: 0.01)", or None when nothing was.
    pub fn overrides_line(&self) -> Option<String> {
        if self.overridden.is_empty() {
            return None;
        }
        let source = match self.design {
            Some(Design::Relative) if self.baseline_name.ends_with("(base arm)") => "profile",
            _ => "baseline",
        };
        let parts: Vec<String> = (self.overridden.iter())
            .map(|o| format!("{} {} ({source}: {})", o.field, o.value, o.was))
            .collect();
        Some(format!("settings overridden: {}", parts.join(", ")))
    }
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// No regression: every gated level's bound at the pass confidence lies above
    /// 1 - tolerance.
    Pass,
    /// The data cannot tell (exit 0, said loudly; exit 3 with `fail_on_inconclusive`).
    Inconclusive,
    Regression,
    NotComparable,
}

impl Outcome {
    /// The exit code; an inconclusive verdict fails only when the settings say so.
    pub fn exit_with(self, settings: &GateSettings) -> Exit {
        match self {
            Outcome::Pass => Exit::Pass,
            Outcome::Inconclusive if settings.fail_on_inconclusive => Exit::NotComparable,
            Outcome::Inconclusive => Exit::Pass,
            Outcome::Regression => Exit::Regression,
            Outcome::NotComparable => Exit::NotComparable,
        }
    }

    pub fn word(self) -> &'static str {
        match self {
            Outcome::Pass => "pass",
            Outcome::Inconclusive => "inconclusive",
            Outcome::Regression => "regression",
            Outcome::NotComparable => "not_comparable",
        }
    }
}

impl Verdict {
    /// What the author must read beside the table, one line each: the arms' engines where
    /// they differ, and a history too short to fail a drop under the guard.
    pub fn notices(&self) -> Vec<String> {
        let arms = self.arms.as_ref().and_then(ArmEngines::line);
        let need = self.history_need.as_ref().map(HistoryNeed::line);
        let power = self.history_power.as_ref().map(HistoryPower::line);
        arms.into_iter().chain(need).chain(power).collect()
    }

    /// The exit code of this verdict under its own settings: 0 for a regression the check
    /// let through as intended (`ci --allow-regression`), so that `merge` of a matrix whose
    /// regressed legs were all accepted exits 0 as each leg did.
    pub fn exit(&self) -> Exit {
        match self.regression_accepted() {
            true => Exit::Pass,
            false => self.outcome.exit_with(&self.settings),
        }
    }

    /// Whether the verdict is a regression the check let through (`ci --allow-regression`,
    /// recorded among its overridden settings): its outcome stays regression everywhere.
    pub fn regression_accepted(&self) -> bool {
        self.outcome == Outcome::Regression
            && (self.overridden.iter()).any(|o| o.field == ALLOW_REGRESSION && o.value == "true")
    }
}

/// The setting `ci --allow-regression` records among the verdict's overrides: printed with
/// them ("settings overridden: allow_regression true (baseline: false)") and kept in
/// verdict.json, so that an accepted regression is never mistaken for a failed or passed one.
pub const ALLOW_REGRESSION: &str = "allow_regression";

/// One level's comparison of one metric.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LevelVerdict {
    pub concurrency: u32,
    /// What was compared (throughput unless a latency gate is set).
    #[serde(default, skip_serializing_if = "TrialMetric::is_throughput")]
    pub metric: TrialMetric,
    pub status: LevelStatus,
    /// Geometric means of the metric over trials.
    pub baseline_mean: Option<f64>,
    pub candidate_mean: Option<f64>,
    /// Candidate / baseline geometric means (of throughput, or of latency for a latency
    /// gate), with its one-sided bounds at the pass confidence (`gate.pass_confidence`, 95%):
    /// the bounds the pass rule reads.
    pub ratio: Option<f64>,
    pub ci_low: Option<f64>,
    pub ci_high: Option<f64>,
    /// One-sided p-value for "the candidate is worse", before and after Holm.
    pub p_slower: Option<f64>,
    pub p_adjusted: Option<f64>,
    pub n_baseline: usize,
    pub n_candidate: usize,
    pub baseline_sessions: usize,
    /// The smallest drop this comparison detects with 80% power, session variance included
    /// (None: none can be detected, e.g. a history of one session).
    pub min_detectable_drop: Option<f64>,
    /// Everything the decision used: sigma_w, sigma_b with its df, se and df, the guard.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test: Option<LevelTest>,
    pub note: Option<String>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum LevelStatus {
    /// No regression: the bound at the pass confidence lies above 1 - tolerance.
    Pass,
    Regression,
    /// Faster, beyond the minimum effect at the decision's level.
    Improvement,
    /// The data cannot tell.
    Inconclusive,
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
            LevelStatus::Inconclusive => "cannot tell",
            LevelStatus::InsufficientTrials => "too few trials",
            LevelStatus::NotGated => "not gated",
        }
    }
}

/// What the review found, kept in the verdict (verdict.json's `client`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct ClientReview {
    /// Per arm, the gated level where the client held requests longest: its mean share of
    /// the trials' request time.
    pub held: Vec<ArmHeld>,
    /// Trials whose client was saturated ("base arm C=64 trial 3").
    pub saturated: Vec<String>,
    /// Trials flagged client-bound for late reads only (timings blurred, tok/s not).
    pub late_read_trials: usize,
    /// The outcome with every trial put back by what its client held.
    pub corrected_outcome: Option<Outcome>,
    /// The client could have moved the verdict (or was saturated).
    pub could_move: bool,
    /// Decided anyway, with --allow-client-bound.
    pub accepted: bool,
}

/// One arm's worst level for time held in the client.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ArmHeld {
    pub arm: String,
    pub concurrency: u32,
    pub share: f64,
}

#[cfg(test)]
mod arm_tests {
    use super::ArmEngines;

    #[test]
    fn the_arms_line_names_what_differs_and_only_that() {
        let arms = |he: &str, hv: &str, be: Option<&str>, bv: Option<&str>| ArmEngines {
            head_engine: Some(he.into()),
            head_version: Some(hv.into()),
            base_engine: be.map(Into::into),
            base_version: bv.map(Into::into),
        };
        let line = arms("vllm", "0.2.0", Some("vllm"), Some("0.1.0"))
            .line()
            .unwrap();
        assert!(line.contains("head: vllm 0.2.0, base: 0.1.0"), "{line}");
        let line = arms("sglang", "0.5", Some("vllm"), Some("0.1.0"))
            .line()
            .unwrap();
        assert!(
            line.contains("head: sglang 0.5, base: vllm 0.1.0"),
            "{line}"
        );
        assert_eq!(
            arms("vllm", "0.1.0", Some("vllm"), Some("0.1.0")).line(),
            None
        );
        // An older results file records no base engine: nothing to say.
        assert_eq!(arms("vllm", "0.1.0", None, None).line(), None);
    }
}
