//! Blessing: building or extending a baseline from complete runs, one session per run.

use anyhow::{anyhow, bail, Result};

use super::fingerprint_match::fingerprint_differences;
use super::model::{Baseline, BaselineLevel, BlessMode, Session, BASELINE_SCHEMA};
use crate::exit::not_comparable;
use crate::record::checks::level_problems;
use crate::record::{RunResult, TrialMetric};

/// Builds or extends a baseline from runs, one session per run. Refuses incomplete runs,
/// runs with a level over its error limit, runs with fewer trials than the gate needs, and
/// runs that measured something else (profile hash or fingerprint), and client-bound runs
/// unless `allow_client_bound` (the gate's rule too, `gate::client_bound`).
pub fn bless(
    existing: Option<Baseline>,
    runs: &[RunResult],
    mode: BlessMode,
    name: &str,
    profile_path: Option<String>,
    commit: Option<String>,
    allow_client_bound: bool,
) -> Result<Baseline> {
    let first = runs
        .first()
        .ok_or_else(|| anyhow!("bless needs at least one results file"))?;
    for (i, run) in runs.iter().enumerate() {
        let which = format!("results #{} ({})", i + 1, run.started_at);
        refuse_what_did_not_measure(&which, run)?;
        refuse_what_measured_something_else(&which, run, first, allow_client_bound)?;
    }
    let mut baseline = match (existing, mode) {
        (Some(b), BlessMode::Append) => extendable(b, first)?,
        _ => fresh(name, profile_path.clone(), first),
    };
    if profile_path.is_some() {
        baseline.profile = profile_path;
    }
    for run in runs {
        baseline.sessions.push(session_of(run, &commit));
    }
    keep_newest_sessions(&mut baseline);
    // Never write what the loader would refuse.
    baseline.validate("to be written")?;
    Ok(baseline)
}

/// A run that was stopped, has a level over its error limit or too few trials, or a trial
/// without a positive tok/s, did not measure what a baseline holds.
fn refuse_what_did_not_measure(which: &str, run: &RunResult) -> Result<()> {
    if !run.complete {
        bail!("{which} is marked incomplete (the run was stopped); it cannot become a baseline");
    }
    let problems = level_problems(&run.levels, run.profile.sweep.max_error_rate);
    if !problems.is_empty() {
        bail!(
            "{which} has levels that did not measure: {}",
            problems.join("; ")
        );
    }
    let missing = crate::record::coverage::coverage_problems(run);
    if !missing.is_empty() {
        bail!(
            "{which} does not hold what its plan measured (cut by hand, or by a tool that \
             lost part of it): {}",
            missing.join("; ")
        );
    }
    let min_trials = run.profile.gate.min_trials as usize;
    for level in &run.levels {
        let n = level.throughputs().len();
        if n < min_trials {
            // Exit 3, as the README's table says for too few trials (every command).
            return Err(not_comparable(format!(
                "{which}: level C={} has {n} trials; the gate needs at least {min_trials} (sweep.trials)",
                level.concurrency
            )));
        }
    }
    for level in &run.levels {
        let bad = (level.trials.iter())
            .filter(|t| t.measured())
            .find(|t| !(t.output_tok_per_s.is_finite() && t.output_tok_per_s > 0.0));
        if let Some(t) = bad {
            bail!(
                "{which}: level C={} trial {}: field `output_tok_per_s` is {}; a baseline \
                 holds positive tok/s only",
                level.concurrency,
                t.trial,
                t.output_tok_per_s
            );
        }
    }
    Ok(())
}

/// A baseline holds one closed-loop server's sessions, all measured like results #1 (the
/// same profile and fingerprint), none of them client-bound unless allowed.
fn refuse_what_measured_something_else(
    which: &str,
    run: &RunResult,
    first: &RunResult,
    allow_client_bound: bool,
) -> Result<()> {
    if run.levels.iter().any(|l| l.rate.is_some()) {
        bail!("{which} is open loop (levels keyed by request rate); baselines hold closed-loop concurrency levels only");
    }
    if run.base.is_some() {
        bail!("{which} is a relative (A/B) run of two servers; a baseline holds one server's sessions: bless a run of the server alone");
    }
    crate::gate::client_bound::check(which, run, allow_client_bound)?;
    if run.profile_hash != first.profile_hash {
        return Err(not_comparable(format!(
            "{which} used a different profile ({}) than results #1 ({})",
            run.profile_hash, first.profile_hash
        )));
    }
    let (differ, _) = fingerprint_differences(&first.environment, &run.environment);
    if !differ.is_empty() {
        return Err(not_comparable(format!(
            "{which} ran on a different environment than results #1: {}",
            differ.join("; ")
        )));
    }
    Ok(())
}

/// The existing baseline, when the runs measured what it was measured with (else exit 3).
fn extendable(b: Baseline, first: &RunResult) -> Result<Baseline> {
    if b.profile_hash != first.profile_hash {
        return Err(not_comparable(format!(
            "the baseline was measured with profile {}, these results with {}; use --replace to start a new baseline",
            b.profile_hash, first.profile_hash
        )));
    }
    let (differ, _) = fingerprint_differences(&b.environment, &first.environment);
    if !differ.is_empty() {
        return Err(not_comparable(format!(
            "the environment differs from the baseline's: {}; use --replace to start a new baseline",
            differ.join("; ")
        )));
    }
    Ok(b)
}

/// A new baseline with no session yet, taking its profile, fingerprint and gate settings
/// from results #1.
fn fresh(name: &str, profile_path: Option<String>, first: &RunResult) -> Baseline {
    Baseline {
        schema_version: BASELINE_SCHEMA,
        name: name.to_string(),
        profile: profile_path,
        profile_hash: first.profile_hash.clone(),
        environment: first.environment.clone(),
        gate: first.profile.gate.clone(),
        sessions: Vec::new(),
        calibration: Vec::new(),
    }
}

/// One run's trial values, level by level: the session a bless adds.
fn session_of(run: &RunResult, commit: &Option<String>) -> Session {
    Session {
        measured_at: run.started_at.clone(),
        commit: commit.clone(),
        tool: run.tool.clone(),
        runner: run.environment.runner.clone(),
        levels: run
            .levels
            .iter()
            .map(|l| BaselineLevel {
                concurrency: l.concurrency,
                tok_per_s: l.throughputs(),
                per_request_tok_per_s: l
                    .trials
                    .iter()
                    .filter(|t| t.measured())
                    .filter_map(|t| t.per_request_tok_per_s)
                    .collect(),
                ttft_p99_ms: l.values(TrialMetric::TtftP99),
                itl_p99_ms: l.values(TrialMetric::ItlP99),
                e2e_p99_ms: l.values(TrialMetric::E2eP99),
            })
            .collect(),
    }
}

/// A rolling window of main's history: the newest `max_sessions` sessions.
fn keep_newest_sessions(baseline: &mut Baseline) {
    let keep = baseline.gate.max_sessions.max(1) as usize;
    if baseline.sessions.len() > keep {
        let drop = baseline.sessions.len() - keep;
        baseline.sessions.drain(..drop);
    }
}
