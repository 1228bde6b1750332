//! The comparison itself: refuse what cannot be compared, build one test per gated metric and
//! level (`stats::decision`), decide across the levels, and say what the decision used.

use anyhow::{bail, Result};

use super::baseline::{
    engine_word, fingerprint_differences_except, Baseline, CalibrationFor, ARM_FIELDS,
};
use super::history_need::{
    catch_rate, sessions_needed, HistoryNeed, HistoryPower, Observed, POWER_DROP,
    POWER_WORTH_SAYING,
};
use super::verdict::{ArmEngines, LevelStatus, LevelVerdict, Outcome, Verdict};
use crate::exit::not_comparable;
use crate::profile::GateSettings;
use crate::record::checks::level_problems;
use crate::record::fingerprint::FingerprintField;
use crate::record::trial_flags::FlagKind;
use crate::record::{drift_warning, LevelResult, RunResult, TrialMetric, TrialResult};
use crate::stats::decision::{
    decide, grouped_evidence, grouped_level_with, history_level, pooled_evidence, relative_level,
    DecisionSettings, Design, GroupedBlock, LevelOutcome, LevelTest, RunEvidence, SlotCalibration,
};
use crate::stats::Spread;

/// Power at which the smallest detectable drop is reported.
const POWER: f64 = 0.8;

/// Gates a run against a baseline: history mode, or relative mode when the run measured the
/// base server itself (the baseline then vouches for the profile and the environment, and
/// gives the settings). Errors: exit 3 when the two measured different things, exit 2 when
/// the run itself did not measure.
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
    // Relative mode: each arm says which engine it ran (the change under test may be an
    // engine upgrade); the baseline vouches for the profile, the model and the hardware.
    let skip: &[&str] = match candidate.base {
        Some(_) => &ARM_FIELDS,
        None => &[],
    };
    let (differ, mut warnings) =
        fingerprint_differences_except(&baseline.environment, &candidate.environment, skip);
    if !differ.is_empty() {
        return Err(not_comparable(format!(
            "the environment differs from the baseline's: {}",
            differ.join("; ")
        )));
    }
    let mut verdict = match &candidate.base {
        Some(base) => {
            // Rows measured on the engine version the base arm ran, recent enough, and on
            // this runner unless another's were asked for.
            let query = CalibrationFor {
                at: Some(candidate.started_at.as_str()),
                engine_version: base.engine_version.as_deref(),
                runner: candidate.environment.runner.as_deref(),
                any_runner: settings.calibration_from_any_runner,
            };
            let calibration = |c| baseline.slot_calibration(c, &query);
            let mut v = relative(candidate, settings, &calibration)?;
            let levels: Vec<u32> = candidate.levels.iter().map(|l| l.concurrency).collect();
            v.notes
                .extend(baseline.calibration_runner_line(&levels, &query));
            v
        }
        None => {
            check_candidate(candidate)?;
            let sources = |metric: TrialMetric, c: u32| Sides {
                base: baseline.sessions_of(metric, c),
                head: candidate_values(&candidate.levels, metric, c),
                blocks: Vec::new(),
                calibration: None,
            };
            let mut levels = baseline.levels();
            levels.extend(candidate.levels.iter().map(|l| l.concurrency));
            let mut v = gate(candidate, settings, Design::History, levels, &sources);
            v.history_need = history_need(&v, baseline.sessions.len(), settings);
            if let Some(need) = &v.history_need {
                v.warnings.push(need.line());
            }
            // Said where the need is not (that line already says history cannot fail yet).
            if v.history_need.is_none() {
                v.history_power = history_power(&v, baseline.sessions.len(), settings);
            }
            if let Some(power) = &v.history_power {
                v.warnings.push(power.line());
            }
            if let Some(servers) = &candidate.servers {
                v.notes.extend(servers.log_cuts());
            }
            v
        }
    };
    verdict.baseline_name = baseline.name.clone();
    warnings.append(&mut verdict.warnings);
    // A relative verdict names the overrides too: say each once.
    let mut seen = std::collections::HashSet::new();
    warnings.retain(|w| seen.insert(w.clone()));
    verdict.warnings = warnings;
    Ok(verdict)
}

/// Gates a relative (A/B) run on its own: the head arm (the run's levels) against the base
/// arm measured in the same job. The settings are the run's profile's unless given.
pub fn evaluate_relative(candidate: &RunResult, settings: &GateSettings) -> Result<Verdict> {
    relative(candidate, settings, &|_| None)
}

/// A relative verdict with the slots' A/A calibration `calibration` gives per level, and
/// none of `evaluate`'s refusals for a baseline's profile or environment: for a run whose
/// calibration comes from a baseline that vouches for nothing else (a bisect step).
pub fn evaluate_relative_calibrated(
    candidate: &RunResult,
    settings: &GateSettings,
    calibration: &dyn Fn(u32) -> Option<SlotCalibration>,
) -> Result<Verdict> {
    relative(candidate, settings, calibration)
}

/// The relative verdict, with an A/A calibration per level where the baseline holds one.
fn relative(
    candidate: &RunResult,
    settings: &GateSettings,
    calibration: &dyn Fn(u32) -> Option<SlotCalibration>,
) -> Result<Verdict> {
    let Some(base) = &candidate.base else {
        bail!(
            "the run measured one server; a relative verdict needs a run of two (bench or ci \
             with --base-endpoint), or a baseline to gate against (--baseline)"
        );
    };
    check_candidate(candidate)?;
    let problems = level_problems(&base.levels, candidate.profile.sweep.max_error_rate);
    if !problems.is_empty() {
        bail!(
            "the base arm did not measure every level: {}",
            problems.join("; ")
        );
    }
    // Without blocks the base arm is one session, shared with the head: the session offset
    // cancels. In blocks each block is a session of both arms, slots swapped between them.
    let sources = |metric: TrialMetric, c: u32| {
        let base_values = candidate_values(&base.levels, metric, c);
        Sides {
            base: if base_values.is_empty() {
                vec![]
            } else {
                vec![base_values]
            },
            head: candidate_values(&candidate.levels, metric, c),
            blocks: blocks_at(candidate, &base.levels, metric, c),
            calibration: calibration(c).filter(|_| metric.is_throughput()),
        }
    };
    let levels = (candidate.levels.iter().chain(&base.levels))
        .map(|l| l.concurrency)
        .collect();
    // A run in blocks that could add blocks while undecided: both sides' errors are split
    // over the looks its plan allowed (Bonferroni), so a false failure stays within alpha,
    // and a pass of a level that is really `tolerance` slower within 1 - pass_confidence,
    // over the whole plan and not only at one look.
    let looks = candidate.servers.as_ref().map_or(1, |s| s.looks.max(1));
    let per_look = per_look(settings, looks);
    let mut verdict = gate(candidate, &per_look, Design::Relative, levels, &sources);
    // How the run was planned and why it stopped: information, not something to act on.
    if looks > 1 {
        verdict.notes.push(format!(
            "sequential: up to {looks} looks, each side split over them: fail alpha {:.4} a \
             look (Bonferroni, {} over the plan), pass bounds at {:.1}% a look (a level at the \
             tolerance passes at most about 7% over the plan; docs/gate-calibration.md table 7)",
            per_look.alpha,
            settings.alpha,
            per_look.pass_confidence * 100.0
        ));
    }
    if let Some(stopped) = candidate.servers.as_ref().and_then(|s| s.stopped.as_ref()) {
        verdict
            .notes
            .push(format!("{}{stopped}", super::verdict::RUN_COST_NOTE));
        verdict.notes.extend(super::stopped_early::note(&verdict));
    }
    if let Some(servers) = &candidate.servers {
        // A pair whose server did not start cost blocks: the reviewer should know.
        verdict
            .warnings
            .extend(servers.dropped.iter().map(|d| format!("blocks: {d}")));
        verdict
            .warnings
            .extend(super::pairs::disagreeing(candidate));
        verdict.notes.extend(servers.log_cuts());
    }
    let overrides = candidate.environment.overridden.iter();
    verdict
        .warnings
        .extend(overrides.map(super::baseline::override_warning));
    verdict.baseline_name = format!("{} (base arm)", candidate.profile_name);
    verdict.changes = super::explain::explain(candidate);
    verdict.arms = Some(ArmEngines {
        head_engine: engine_word(&candidate.environment, FingerprintField::Engine),
        head_version: engine_word(&candidate.environment, FingerprintField::EngineVersion),
        base_engine: base.engine.clone(),
        base_version: base.engine_version.clone(),
    });
    Ok(verdict)
}

/// The settings one look of a sequential plan of `looks` decides with. The fail side's
/// alpha is divided by the looks (Bonferroni: false failures within alpha whatever the
/// looks' correlation). The pass side's error (1 - pass_confidence) is divided by the square
/// root of the looks: the looks see the same blocks plus a few, so they are strongly
/// correlated and a full Bonferroni split is needlessly strict (it dropped the A/A pass rate
/// at a 3% start spread from 93% to 57%); measured over whole plans (benches/gate_crossover.rs
/// table 7, 2,000 jobs a cell), a level really `tolerance` slower then passes at most 6.6%
/// of the time over plans of 8-16 blocks (4.2-6.6% at the default 16 with start spreads of
/// 2-3%), which the verdict states as "at most about 7%".
pub fn per_look(settings: &GateSettings, looks: u32) -> GateSettings {
    let looks = f64::from(looks.max(1));
    GateSettings {
        alpha: settings.alpha / looks,
        pass_confidence: 1.0 - (1.0 - settings.pass_confidence) / looks.sqrt(),
        ..settings.clone()
    }
}

/// The gated throughput levels of a verdict (those with a test).
fn gated_throughput(verdict: &Verdict) -> Vec<&LevelVerdict> {
    (verdict.levels.iter())
        .filter(|l| l.metric.is_throughput() && l.p_slower.is_some())
        .collect()
}

/// The decision settings of the throughput family, as `gate` splits alpha over the metrics.
pub fn throughput_decision(settings: &GateSettings) -> DecisionSettings {
    decision_settings(settings, settings.min_effect, settings.tolerance)
}

/// The decision settings of one gated metric's family, with its minimum effect and pass
/// tolerance on the gate's scale ([`metrics`]): the family alpha split evenly across the
/// gated metrics, the smallest detectable drop reported at [`POWER`].
fn decision_settings(settings: &GateSettings, min_effect: f64, tolerance: f64) -> DecisionSettings {
    DecisionSettings {
        alpha: settings.alpha / metrics(settings).len() as f64,
        min_effect,
        guard: settings.guard,
        power: POWER,
        pass_confidence: settings.pass_confidence,
        tolerance,
    }
}

/// The noise a history level showed, as the session simulations take it (the session spread
/// only where 2+ sessions measured it).
fn observed(level: &LevelVerdict, test: &LevelTest, sessions: usize) -> Option<Observed> {
    Some(Observed {
        sigma_w: test.sigma_w?,
        sigma_b: test.sigma_b.filter(|_| sessions >= 2),
        per_session: level.n_baseline / level.baseline_sessions.max(1),
        candidate: level.n_candidate,
    })
}

/// How often a history verdict's weakest throughput level (the largest standard error)
/// would catch a 10% drop, by the gate's own test on sessions spread as observed
/// ([`catch_rate`]), where that is under 80%: None otherwise.
fn history_power(
    verdict: &Verdict,
    sessions: usize,
    settings: &GateSettings,
) -> Option<HistoryPower> {
    let gated = gated_throughput(verdict);
    let decision = throughput_decision(settings);
    // Every gated level's catch rate, weakest first (the weakest alone understates the rest).
    let mut per_level: Vec<(u32, f64, Observed)> = (gated.iter())
        .filter_map(|l| {
            let observed = observed(l, l.test.as_ref()?, sessions)?;
            let power = catch_rate(observed, sessions, gated.len(), &decision, POWER_DROP);
            Some((l.concurrency, power, observed))
        })
        .collect();
    per_level.sort_by(|a, b| a.1.total_cmp(&b.1));
    let &(concurrency, power, observed) = per_level.first()?;
    (power < POWER_WORTH_SAYING).then(|| HistoryPower {
        sessions,
        spread: observed.sigma_b,
        drop: POWER_DROP,
        power,
        concurrency,
        per_level: per_level.iter().map(|&(c, p, _)| (c, p)).collect(),
    })
}

/// A history baseline of `sessions` that cannot yet fail a drop under the guard at some
/// gated throughput level: how many sessions it needs, from the noise the gate observed
/// (the worst level's). None when it can, or when no level was tested.
fn history_need(
    verdict: &Verdict,
    sessions: usize,
    settings: &GateSettings,
) -> Option<HistoryNeed> {
    let gated = gated_throughput(verdict);
    let decision = throughput_decision(settings);
    let needed = (gated.iter())
        .filter_map(|l| {
            let test = l.test.as_ref()?;
            let observed = observed(l, test, sessions)?;
            Some(sessions_needed(observed, gated.len(), &decision))
        })
        .reduce(|a, b| match (a, b) {
            (Some(a), Some(b)) => Some(a.max(b)),
            _ => None,
        })?;
    if needed.is_some_and(|n| n <= sessions) {
        return None;
    }
    Some(HistoryNeed {
        sessions,
        needed,
        guard: settings.guard,
    })
}

/// A run that did not measure, was stopped, or ran open loop cannot be gated.
fn check_candidate(candidate: &RunResult) -> Result<()> {
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
    let missing = crate::record::coverage::coverage_problems(candidate);
    if !missing.is_empty() {
        bail!(
            "the run does not hold what its plan measured (cut by hand, or by a tool that \
             lost part of it): {}; a gate that judged what is left could pass on what was kept",
            missing.join("; ")
        );
    }
    Ok(())
}

/// The trials' values of `metric` at level `c` of `levels` (empty when the level is absent).
fn candidate_values(levels: &[LevelResult], metric: TrialMetric, c: u32) -> Vec<f64> {
    levels
        .iter()
        .find(|l| l.concurrency == c)
        .map(|l| l.values(metric))
        .unwrap_or_default()
}

/// A value on the gate's scale: ln of throughput, -ln of latency (a drop is always "worse").
fn gate_scale(metric: TrialMetric, x: f64) -> f64 {
    if metric.higher_is_worse() {
        -x.ln()
    } else {
        x.ln()
    }
}

/// The trials of a relative run in blocks at level `c`, block by block (each block's base
/// and head values, the head's slot, and the runner and pair it ran on); empty when the run
/// has no blocks.
fn blocks_at(
    candidate: &RunResult,
    base: &[LevelResult],
    metric: TrialMetric,
    c: u32,
) -> Vec<GroupedBlock> {
    fn at(levels: &[LevelResult], c: u32) -> &[TrialResult] {
        (levels.iter().find(|l| l.concurrency == c)).map_or(&[], |l| l.trials.as_slice())
    }
    let head = &candidate.levels;
    let servers = candidate.servers.as_ref();
    super::block_groups::grouped_blocks_of(at(base, c), at(head, c), servers, |t| {
        t.measured()
            .then(|| metric.of(t))
            .flatten()
            .map(|x| gate_scale(metric, x))
    })
}

/// One level's raw values: the baseline's by session (relative: one "session", the base
/// arm), the candidate's (the head's), and a run in blocks block by block (on the gate's
/// scale), with the A/A calibration of its slots where the baseline has one.
struct Sides {
    base: Vec<Vec<f64>>,
    head: Vec<f64>,
    blocks: Vec<GroupedBlock>,
    calibration: Option<SlotCalibration>,
}

/// The gated metrics with their minimum effects and pass tolerances on the gate's scale (a
/// latency rise of m is a drop of 1 - 1/(1 + m) on the inverse scale). A latency gate's pass
/// rules out a rise of its own fail threshold or the tolerance, whichever is larger.
fn metrics(settings: &GateSettings) -> Vec<(TrialMetric, f64, f64)> {
    let mut out = vec![(
        TrialMetric::OutputTokPerS,
        settings.min_effect,
        settings.tolerance,
    )];
    let l = &settings.latency;
    let inverse = |m: f64| 1.0 - 1.0 / (1.0 + m);
    for (metric, rise) in [
        (TrialMetric::TtftP99, l.ttft_p99),
        (TrialMetric::ItlP99, l.itl_p99),
        (TrialMetric::E2eP99, l.e2e_p99),
    ] {
        if let Some(m) = rise {
            out.push((metric, inverse(m), inverse(m.max(settings.tolerance))));
        }
    }
    out
}

/// The verdict from one test per (metric, level) of `concurrencies`: Holm within each metric, the family alpha
/// split evenly across the metrics.
fn gate(
    candidate: &RunResult,
    settings: &GateSettings,
    design: Design,
    mut concurrencies: Vec<u32>,
    sources: &dyn Fn(TrialMetric, u32) -> Sides,
) -> Verdict {
    concurrencies.sort_unstable();
    concurrencies.dedup();
    // The client's flagged trials are information: where the client could have moved the
    // verdict, client_bound::review refuses it (a warning) or says it was let through.
    let notes = arm_summaries(candidate);
    let mut warnings = Vec::new();
    let mut levels = Vec::new();
    for (metric, min_effect, tolerance) in metrics(settings) {
        let decision = decision_settings(settings, min_effect, tolerance);
        let gated = Gated {
            metric,
            design,
            settings,
            decision: &decision,
        };
        levels.extend(gated.levels(&concurrencies, sources, &mut warnings));
    }
    warnings.extend(inconclusive_warning(&levels, settings));
    // Computed once with the record (`RunResult::analyse`), read here.
    let drift = candidate.drift.clone();
    if let Some(d) = drift.as_ref().filter(|d| d.flagged) {
        warnings.push(drift_warning(d));
    }
    let worst_ratio = levels
        .iter()
        .filter(|v| v.metric.is_throughput())
        .filter_map(|v| v.ratio)
        .reduce(f64::min);
    // What the gate does not decide here stays as in a verdict that gated nothing; the
    // callers name the baseline and add what they know.
    Verdict {
        outcome: outcome_of(&levels),
        design: Some(design),
        levels,
        worst_ratio,
        drift,
        warnings,
        notes,
        run_id: candidate.run_id.clone(),
        ..Verdict::refused("", &candidate.profile_name, None, settings.clone(), "")
    }
}

/// One line per arm: how many trials were flagged, which, and the worst
/// (record::flag_summary).
fn arm_summaries(candidate: &RunResult) -> Vec<String> {
    let mut notes: Vec<String> = Vec::new();
    let summary =
        |levels: &[LevelResult]| crate::record::flag_summary(levels, Some(FlagKind::ClientBound));
    let head = if candidate.base.is_some() {
        "head"
    } else {
        "this run"
    };
    notes.extend(
        summary(&candidate.levels)
            .into_iter()
            .map(|l| format!("{head}: {l}")),
    );
    if let Some(base) = &candidate.base {
        notes.extend(
            summary(&base.levels)
                .into_iter()
                .map(|l| format!("base arm: {l}")),
        );
    }
    notes
}

/// One gated metric: what it is compared with and how its family decides.
struct Gated<'a> {
    metric: TrialMetric,
    design: Design,
    settings: &'a GateSettings,
    decision: &'a DecisionSettings,
}

impl Gated<'_> {
    /// The metric's verdict at each level: a test per level that can be gated, decided
    /// together (Holm within the metric), each verdict then filled from its decided test.
    fn levels(
        &self,
        concurrencies: &[u32],
        sources: &dyn Fn(TrialMetric, u32) -> Sides,
        warnings: &mut Vec<String>,
    ) -> Vec<LevelVerdict> {
        let mut verdicts = Vec::new();
        let mut tests = Vec::new();
        let all: Vec<(u32, Sides)> = (concurrencies.iter())
            .map(|&c| (c, sources(self.metric, c)))
            .collect();
        // One night is noisier or quieter than its calibrations at every level at once: the
        // levels' checks are pooled before any level decides whether to use its own
        // (stats::decision::pooled_evidence, issue 48 item 4).
        let evidence: Vec<_> = (all.iter())
            .filter(|_| self.design == Design::Relative)
            .filter_map(|(_, s)| grouped_evidence(&s.blocks, s.calibration.as_ref()))
            .collect();
        let run = pooled_evidence(&evidence);
        for (c, sides) in &all {
            let (v, test) = level(*c, self.metric, sides, self.design, self.settings, run);
            if let Some(t) = test {
                tests.push((verdicts.len(), t));
            }
            verdicts.push(v);
        }
        let mut decided: Vec<LevelTest> = tests.iter().map(|(_, t)| t.clone()).collect();
        if !decided.is_empty() {
            decide(&mut decided, self.decision);
        }
        for ((i, _), test) in tests.iter().zip(decided) {
            finish_level(
                &mut verdicts[*i],
                test,
                self.decision,
                self.settings,
                warnings,
            );
        }
        verdicts
    }
}

/// The levels the data cannot decide, each with the smallest drop it could have seen, and
/// what narrows them.
fn inconclusive_warning(levels: &[LevelVerdict], settings: &GateSettings) -> Option<String> {
    let inconclusive: Vec<String> = levels
        .iter()
        .filter(|l| l.status == LevelStatus::Inconclusive)
        .map(|l| {
            let seen = match l.min_detectable_drop {
                Some(d) => format!("{:.1}%", d * 100.0),
                None => "none".into(),
            };
            format!(
                "{} at C={} (smallest detectable: {seen})",
                l.metric.label(),
                l.concurrency
            )
        })
        .collect();
    (!inconclusive.is_empty()).then(|| {
        format!(
            "inconclusive: the data cannot tell a drop of {:.1}% from how much runs differ at {}; \
             more trials (relative mode) or more baseline sessions narrow it",
            settings.min_effect * 100.0,
            inconclusive.join(", ")
        )
    })
}

/// The overall outcome: a regression anywhere, else a level that could not be gated, else
/// a level the data cannot decide, else a pass.
fn outcome_of(levels: &[LevelVerdict]) -> Outcome {
    let any = |s: &[LevelStatus]| levels.iter().any(|v| s.contains(&v.status));
    if any(&[LevelStatus::Regression]) {
        Outcome::Regression
    } else if any(&[LevelStatus::InsufficientTrials, LevelStatus::NotGated]) {
        Outcome::NotComparable
    } else if any(&[LevelStatus::Inconclusive]) {
        Outcome::Inconclusive
    } else {
        Outcome::Pass
    }
}

/// One level's verdict before the decision, and its test when the level can be gated.
fn level(
    c: u32,
    metric: TrialMetric,
    sides: &Sides,
    design: Design,
    settings: &GateSettings,
    run: Option<RunEvidence>,
) -> (LevelVerdict, Option<LevelTest>) {
    let base: Vec<f64> = sides.base.concat();
    let head = &sides.head;
    let mut v = LevelVerdict {
        concurrency: c,
        metric,
        status: LevelStatus::NotGated,
        baseline_mean: Spread::of(&base).map(|s| s.geo_mean),
        candidate_mean: Spread::of(head).map(|s| s.geo_mean),
        ratio: None,
        ci_low: None,
        ci_high: None,
        p_slower: None,
        p_adjusted: None,
        n_baseline: base.len(),
        n_candidate: head.len(),
        baseline_sessions: sides.base.len(),
        min_detectable_drop: None,
        test: None,
        note: None,
    };
    if base.is_empty() || head.is_empty() {
        v.note = Some(
            match (base.is_empty(), metric.is_throughput()) {
                (true, true) => "not in the baseline",
                (true, false) => "not in the baseline (bless again to record latency per trial)",
                (false, _) => "not in this run",
            }
            .into(),
        );
        return (v, None);
    }
    let min_trials = settings.min_trials as usize;
    if base.len() < min_trials.max(2) || head.len() < min_trials.max(2) {
        v.status = LevelStatus::InsufficientTrials;
        v.note = Some(format!(
            "{} baseline and {} candidate trials; the gate needs {min_trials} on each side",
            base.len(),
            head.len()
        ));
        return (v, None);
    }
    let scale = |x: &f64| gate_scale(metric, *x);
    let head_ln: Vec<f64> = head.iter().map(scale).collect();
    let test = match design {
        Design::Relative if !sides.blocks.is_empty() => {
            let cal = sides.calibration.as_ref();
            grouped_level_with(&sides.blocks, cal, run.as_ref(), settings.guard)
        }
        Design::Relative => {
            let base_ln: Vec<f64> = base.iter().map(scale).collect();
            relative_level(
                &base_ln,
                &head_ln,
                &vec![0; base_ln.len()],
                &vec![0; head_ln.len()],
                settings.guard,
            )
        }
        Design::History => {
            let sessions: Vec<Vec<f64>> = sides
                .base
                .iter()
                .map(|s| s.iter().map(scale).collect())
                .collect();
            history_level(&sessions, &head_ln, settings.guard)
        }
    };
    (v, Some(test))
}

/// Fills a level's verdict from its decided test.
fn finish_level(
    v: &mut LevelVerdict,
    test: LevelTest,
    decision: &DecisionSettings,
    settings: &GateSettings,
    warnings: &mut Vec<String>,
) {
    let latency = v.metric.higher_is_worse();
    // Throughput: head / base. Latency: the test's ratio is base / head latency; people
    // read head / base latency, so it and its bounds are inverted.
    let (ratio, low, high) = match latency {
        false => (test.ratio, Some(test.pass_lower), test.pass_upper),
        true => (
            test.ratio.map(|r| 1.0 / r),
            test.pass_upper.map(|u| 1.0 / u),
            (test.pass_lower > 0.0).then(|| 1.0 / test.pass_lower),
        ),
    };
    v.ratio = ratio;
    v.ci_low = low;
    v.ci_high = high;
    v.p_slower = Some(test.p);
    v.p_adjusted = Some(test.p_holm);
    v.min_detectable_drop = test.mdd;
    v.status = match test.outcome {
        LevelOutcome::Regression => LevelStatus::Regression,
        LevelOutcome::NoRegression if test.lower >= 1.0 + decision.min_effect => {
            LevelStatus::Improvement
        }
        LevelOutcome::NoRegression => LevelStatus::Pass,
        LevelOutcome::Inconclusive => LevelStatus::Inconclusive,
    };
    let mut notes = Vec::new();
    if test.guard_tripped && test.outcome == LevelOutcome::Regression {
        notes.push(format!("beyond the {:.0}% guard", settings.guard * 100.0));
    }
    if test.dropped_base + test.dropped_head > 0 {
        notes.push(format!(
            "{} base and {} head trial(s) set aside as outliers",
            test.dropped_base, test.dropped_head
        ));
        if test.dropped_head >= test.dropped_base + 2 {
            warnings.push(format!(
                "C={}: {} head trials fell far below both arms (set aside as outliers) against {} \
                 base trials: a server that slows intermittently is itself a regression; look at \
                 requests.jsonl",
                v.concurrency, test.dropped_head, test.dropped_base
            ));
        }
    }
    if test.design == Design::History && test.sessions_base < 2 {
        notes.push("one baseline session".into());
    }
    if !notes.is_empty() {
        v.note = Some(notes.join("; "));
    }
    v.test = Some(test);
}

#[cfg(test)]
#[path = "compare_tests.rs"]
mod tests;
