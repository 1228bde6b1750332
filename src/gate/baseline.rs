//! Baseline files: the raw trial values a candidate run is gated against, kept in git beside
//! the profile they were measured with.
//!
//! A baseline keeps every trial (never only means), grouped in sessions (one blessed run
//! each, e.g. one per day), so the gate can estimate how much results move from one session
//! to the next as well as from one trial to the next. The gate settings live here too, so a
//! pull request cannot loosen its own gate by editing the profile.

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::exit::not_comparable;
use crate::fsutil::write_atomic;
use crate::profile::GateSettings;
use crate::record::checks::level_problems;
use crate::record::fingerprint::FingerprintField;
use crate::record::{Environment, RunResult, TrialMetric, FIGURE_MAX};
use crate::stats::decision::SlotCalibration;

/// The largest baseline file read (bytes): a rolling window of sessions of trial values.
pub const BASELINE_FILE_BYTES: u64 = 64 * 1024 * 1024;

/// Version of the baseline schema written by this build.
pub const BASELINE_SCHEMA: u32 = 1;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Baseline {
    pub schema_version: u32,
    pub name: String,
    /// The profile file this baseline was measured with, relative to the baseline file.
    #[serde(default)]
    pub profile: Option<String>,
    pub profile_hash: String,
    pub environment: Environment,
    pub gate: GateSettings,
    pub sessions: Vec<Session>,
    /// A/A calibration of the relative gate's two server slots (`baseline calibrate`): one
    /// row per A/A block and level, newest last, at most [`MAX_CALIBRATION_ROWS`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub calibration: Vec<CalibrationRow>,
}

/// The most calibration rows a baseline keeps (the oldest go first).
pub const MAX_CALIBRATION_ROWS: usize = 2000;

/// One A/A block at one level: the same server in both slots, started fresh.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CalibrationRow {
    /// When the A/A run started (RFC 3339).
    pub measured_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    pub concurrency: u32,
    /// ln(tok/s of the server on slot 1) - ln(tok/s of the server on slot 0), trial means.
    pub slot_difference: f64,
    /// The within-block (trial-to-trial) variance of that difference.
    pub within_variance: f64,
    /// The engine version the A/A servers reported: a row measured on another version
    /// does not calibrate a run of this one. Absent in rows of older builds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine_version: Option<String>,
}

/// Calibration rows older than this, counted back from the gated run's start, are not used:
/// a runner's drivers, clocks and neighbours change.
pub const CALIBRATION_MAX_AGE_DAYS: i64 = 30;

/// At most this many of a level's newest rows are used: a calibration's degrees of freedom
/// stop growing with every `calibrate`, so it never drowns the run's own blocks.
pub const CALIBRATION_MAX_BLOCKS: usize = 40;

/// One blessed run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Session {
    /// When the run started (RFC 3339).
    pub measured_at: String,
    /// The commit of the code under test when it was measured.
    #[serde(default)]
    pub commit: Option<String>,
    pub tool: String,
    #[serde(default)]
    pub runner: Option<String>,
    pub levels: Vec<BaselineLevel>,
}

/// The trials of one session at one concurrency level.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct BaselineLevel {
    pub concurrency: u32,
    /// Output tok/s of each trial.
    pub tok_per_s: Vec<f64>,
    /// Per-request tok/s of each trial (reported, not gated).
    #[serde(default)]
    pub per_request_tok_per_s: Vec<f64>,
    /// Each trial's p99 TTFT, ITL and E2E (ms), for the latency gates; empty in baselines
    /// blessed before they existed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ttft_p99_ms: Vec<f64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub itl_p99_ms: Vec<f64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub e2e_p99_ms: Vec<f64>,
}

impl BaselineLevel {
    /// The trials' values of `metric`.
    pub fn values(&self, metric: TrialMetric) -> &[f64] {
        match metric {
            TrialMetric::OutputTokPerS => &self.tok_per_s,
            TrialMetric::TtftP99 => &self.ttft_p99_ms,
            TrialMetric::ItlP99 => &self.itl_p99_ms,
            TrialMetric::E2eP99 => &self.e2e_p99_ms,
        }
    }
}

/// The A/A rows of a relative run in blocks whose two arms ran the same server command
/// (`baseline calibrate`): per level and block, ln(slot 1's tok/s) - ln(slot 0's) over the
/// trial means (after the same outlier rule the gate applies within a block) and its
/// within-block variance. Refused: a run that is not A/A, not in blocks, or was not
/// measured with the baseline's profile and fingerprint (exit 3).
pub fn calibration_rows(
    baseline: &Baseline,
    run: &RunResult,
    commit: Option<String>,
) -> Result<Vec<CalibrationRow>> {
    let (Some(base), Some(servers)) = (&run.base, &run.servers) else {
        bail!(
            "the run is not an A/A run of servers throughline started: calibrate from `bench` \
             or `ci` with --server-command and --base-server-command set to the same command"
        );
    };
    if servers.base_command.as_deref() != Some(servers.head_command.as_str()) {
        bail!(
            "the run's arms ran different commands ({:?} and {:?}): an A/A calibration runs the \
             same server in both slots",
            servers.head_command,
            servers.base_command.as_deref().unwrap_or("")
        );
    }
    if !run.complete {
        bail!("the run is marked incomplete (it was stopped); it cannot calibrate");
    }
    if run.profile_hash != baseline.profile_hash {
        return Err(not_comparable(format!(
            "the run used profile {}, the baseline was measured with {}",
            run.profile_hash, baseline.profile_hash
        )));
    }
    let (differ, _) = fingerprint_differences(&baseline.environment, &run.environment);
    if !differ.is_empty() {
        return Err(not_comparable(format!(
            "the environment differs from the baseline's: {}",
            differ.join("; ")
        )));
    }
    let mut rows = Vec::new();
    for head in &run.levels {
        let Some(base) = base
            .levels
            .iter()
            .find(|l| l.concurrency == head.concurrency)
        else {
            continue;
        };
        for block in &servers.blocks {
            let values = |level: &crate::record::LevelResult| -> Vec<f64> {
                (level.trials.iter())
                    .filter(|t| t.measured() && t.block == Some(block.number))
                    .map(|t| t.output_tok_per_s.ln())
                    .filter(|v| v.is_finite())
                    .collect()
            };
            let (b, h) = (values(base), values(head));
            let trimmed = crate::stats::decision::trimmed_block(&b, &h);
            let (b, h) = (trimmed.base, trimmed.head);
            if b.len() < 2 || h.len() < 2 {
                continue;
            }
            let d = crate::stats::mean(&h) - crate::stats::mean(&b);
            let within = crate::stats::variance(&h) / h.len() as f64
                + crate::stats::variance(&b) / b.len() as f64;
            // Oriented slot 1 minus slot 0: the head ran on slot 1 or on slot 0.
            let x = if block.head_slot == 1 { d } else { -d };
            rows.push(CalibrationRow {
                measured_at: run.started_at.clone(),
                commit: commit.clone(),
                concurrency: head.concurrency,
                slot_difference: x,
                within_variance: within,
                engine_version: run.environment.engine_version.clone(),
            });
        }
    }
    if rows.is_empty() {
        bail!(
            "the run has no block with at least 2 trials per arm at any level: nothing to \
             calibrate from"
        );
    }
    Ok(rows)
}

/// Whether `bless` adds a session or starts over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlessMode {
    Append,
    Replace,
}

impl Baseline {
    /// Reads a baseline from the working tree.
    pub fn load(path: &Path) -> Result<Baseline> {
        let text = crate::fsutil::read_bounded(path, BASELINE_FILE_BYTES)
            .with_context(|| format!("cannot read baseline {}", path.display()))?;
        Baseline::parse(&text, &path.display().to_string())
    }

    /// Reads a baseline as it is at a git ref (see [`crate::gate::gitref`]).
    pub fn load_at_ref(path: &Path, reference: &str) -> Result<Baseline> {
        let text = crate::gate::gitref::read_at_ref(path, reference)?;
        Baseline::parse(&text, &format!("{} at {reference}", path.display()))
    }

    /// Parses baseline text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Baseline> {
        let value: toml::Table = toml::from_str(text)
            .map_err(|e| anyhow!("baseline {origin} is not valid TOML: {e}"))?;
        match value
            .get("schema_version")
            .and_then(toml::Value::as_integer)
        {
            Some(v) if v == i64::from(BASELINE_SCHEMA) => {}
            Some(v) if v > i64::from(BASELINE_SCHEMA) => bail!(
                "baseline {origin}: field `schema_version` is {v}, newer than this build reads \
                 ({BASELINE_SCHEMA}); upgrade throughline"
            ),
            Some(v) => bail!("baseline {origin}: field `schema_version` {v} is not supported"),
            None => bail!("baseline {origin}: field `schema_version` is missing or not a number"),
        }
        let baseline: Baseline =
            toml::from_str(text).map_err(|e| anyhow!("baseline {origin}: {e}"))?;
        baseline.validate(origin)?;
        Ok(baseline)
    }

    fn validate(&self, origin: &str) -> Result<()> {
        self.gate
            .validate()
            .with_context(|| format!("baseline {origin}"))?;
        if self.sessions.is_empty() {
            bail!("baseline {origin}: field `sessions`: holds no session");
        }
        for (i, s) in self.sessions.iter().enumerate() {
            for level in &s.levels {
                // Every array: a NaN, negative or infinite latency would switch its gate off
                // silently, and 1e308 is finite but its sums are not. Zero is a measurement
                // (an instant server), except where a gate divides by it: throughput, and a
                // latency this baseline gates on.
                let gated = &self.gate.latency;
                let arrays = [
                    ("tok_per_s", &level.tok_per_s, true),
                    ("per_request_tok_per_s", &level.per_request_tok_per_s, false),
                    ("ttft_p99_ms", &level.ttft_p99_ms, gated.ttft_p99.is_some()),
                    ("itl_p99_ms", &level.itl_p99_ms, gated.itl_p99.is_some()),
                    ("e2e_p99_ms", &level.e2e_p99_ms, gated.e2e_p99.is_some()),
                ];
                for (field, values, positive) in arrays {
                    let fits = |v: f64| {
                        v.is_finite() && v <= FIGURE_MAX && (v > 0.0 || (!positive && v == 0.0))
                    };
                    if let Some(bad) = values.iter().find(|v| !fits(**v)) {
                        let expected = match positive {
                            true => "a positive number",
                            false => "a number from 0",
                        };
                        bail!(
                            "baseline {origin}: field `sessions[{i}].levels` (C={}): {field} \
                             value {} is not {expected} up to {FIGURE_MAX:e}{}",
                            level.concurrency,
                            crate::record::figure_text(*bad),
                            match (positive, field) {
                                (true, f) if f.ends_with("_ms") =>
                                    " (the gate's latency check divides by it)",
                                _ => "",
                            }
                        );
                    }
                }
            }
        }
        if self.calibration.len() > MAX_CALIBRATION_ROWS {
            bail!(
                "baseline {origin}: field `calibration`: {} rows, at most {MAX_CALIBRATION_ROWS} are kept",
                self.calibration.len()
            );
        }
        for (i, row) in self.calibration.iter().enumerate() {
            // A slot difference beyond +-ln 2 is no slot effect but a broken server.
            let ok = row.slot_difference.is_finite()
                && row.slot_difference.abs() < std::f64::consts::LN_2
                && row.within_variance.is_finite()
                && row.within_variance >= 0.0
                && row.within_variance < 1.0;
            if !ok {
                bail!(
                    "baseline {origin}: field `calibration[{i}]` (C={}): slot_difference {} / \
                     within_variance {} is not a plausible A/A figure (|difference| < ln 2, \
                     variance in [0, 1))",
                    row.concurrency,
                    row.slot_difference,
                    row.within_variance
                );
            }
        }
        Ok(())
    }

    /// The A/A calibration of the slots at `concurrency` for a run started at `at` (RFC
    /// 3339) on `engine_version`, when at least two blocks hold it: the newest
    /// [`CALIBRATION_MAX_BLOCKS`] rows of the level, none older than
    /// [`CALIBRATION_MAX_AGE_DAYS`] before `at` (a row whose date cannot be read is left
    /// out when `at` is given) and none of another engine version (where both are known).
    pub fn slot_calibration(
        &self,
        concurrency: u32,
        at: Option<&str>,
        engine_version: Option<&str>,
    ) -> Option<SlotCalibration> {
        let parse = |stamp: &str| {
            time::OffsetDateTime::parse(stamp, &time::format_description::well_known::Rfc3339).ok()
        };
        let now = at.and_then(parse);
        let fresh = |r: &&CalibrationRow| match now {
            None => true,
            Some(now) => parse(&r.measured_at).is_some_and(|then| {
                then <= now + time::Duration::hours(1)
                    && now - then <= time::Duration::days(CALIBRATION_MAX_AGE_DAYS)
            }),
        };
        let same_engine = |r: &&CalibrationRow| match (engine_version, &r.engine_version) {
            (Some(a), Some(b)) => a == b,
            _ => true,
        };
        let rows: Vec<&CalibrationRow> = (self.calibration.iter())
            .filter(|r| r.concurrency == concurrency)
            .filter(fresh)
            .filter(same_engine)
            .collect();
        let newest = &rows[rows.len().saturating_sub(CALIBRATION_MAX_BLOCKS)..];
        let (x, within): (Vec<f64>, Vec<f64>) = (newest.iter())
            .map(|r| (r.slot_difference, r.within_variance))
            .unzip();
        SlotCalibration::from_blocks(&x, &within)
    }

    /// Adds A/A rows, keeping the newest [`MAX_CALIBRATION_ROWS`].
    pub fn add_calibration(&mut self, rows: Vec<CalibrationRow>) {
        self.calibration.extend(rows);
        let excess = self.calibration.len().saturating_sub(MAX_CALIBRATION_ROWS);
        self.calibration.drain(..excess);
    }

    /// Writes the baseline atomically.
    pub fn save(&self, path: &Path) -> Result<()> {
        let body = toml::to_string_pretty(self).context("cannot serialise the baseline")?;
        let text = format!(
            "# throughline baseline: raw trial values per concurrency level, per session.\n\
             # Written by `throughline baseline bless`; review changes like code.\n{body}"
        );
        write_atomic(path, text.as_bytes())
    }

    /// Concurrency levels present in any session, ascending.
    pub fn levels(&self) -> Vec<u32> {
        let mut levels: Vec<u32> = self
            .sessions
            .iter()
            .flat_map(|s| s.levels.iter().map(|l| l.concurrency))
            .collect();
        levels.sort_unstable();
        levels.dedup();
        levels
    }

    /// Trials' tok/s at `concurrency`, one vector per session that measured it.
    pub fn sessions_at(&self, concurrency: u32) -> Vec<Vec<f64>> {
        self.sessions_of(TrialMetric::OutputTokPerS, concurrency)
    }

    /// Trials' values of `metric` at `concurrency`, one vector per session that has them.
    pub fn sessions_of(&self, metric: TrialMetric, concurrency: u32) -> Vec<Vec<f64>> {
        self.sessions
            .iter()
            .filter_map(|s| s.levels.iter().find(|l| l.concurrency == concurrency))
            .map(|l| l.values(metric).to_vec())
            .filter(|t| !t.is_empty())
            .collect()
    }

    /// All trials at each level, for plots.
    pub fn trials_by_level(&self) -> Vec<(u32, Vec<f64>)> {
        self.levels()
            .into_iter()
            .map(|c| (c, self.sessions_at(c).concat()))
            .collect()
    }

    /// Every trial's per-request tok/s at each level (empty where a baseline predates them),
    /// for the per-request chart.
    pub fn per_request_by_level(&self) -> Vec<(u32, Vec<f64>)> {
        self.levels()
            .into_iter()
            .map(|c| {
                let values = self
                    .sessions
                    .iter()
                    .flat_map(|s| s.levels.iter().filter(move |l| l.concurrency == c))
                    .flat_map(|l| l.per_request_tok_per_s.iter().copied())
                    .collect();
                (c, values)
            })
            .collect()
    }
}

/// Compares two fingerprints. Returns the differences that make results incomparable
/// (hardware, model, server) and warnings for the rest (runner, fields one side lacks).
pub fn fingerprint_differences(
    baseline: &Environment,
    candidate: &Environment,
) -> (Vec<String>, Vec<String>) {
    fingerprint_differences_except(baseline, candidate, &[])
}

/// The fingerprint fields each arm of a relative run reports for itself: a relative run
/// gates exactly a change of engine or version, so the baseline does not vouch for them.
pub const ARM_FIELDS: [&str; 2] = ["engine", "engine_version"];

/// [`fingerprint_differences`] leaving out the fields in `skip` (e.g. [`ARM_FIELDS`]).
pub fn fingerprint_differences_except(
    baseline: &Environment,
    candidate: &Environment,
    skip: &[&str],
) -> (Vec<String>, Vec<String>) {
    let mut differ = Vec::new();
    let mut warn = Vec::new();
    for field in FingerprintField::ALL {
        let name = field.name();
        if skip.contains(&name) {
            continue;
        }
        match (field.read(baseline), field.read(candidate)) {
            (Some(b), Some(c)) if b != c => differ.push(format!("{name}: baseline {b:?}, this run {c:?}")),
            (Some(b), None) => differ.push(format!(
                "{name}: baseline {b:?}, this run does not say (pass {} or its THROUGHLINE_ variable)",
                field.flag()
            )),
            (None, Some(c)) => warn.push(format!("{name}: this run says {c:?}, the baseline does not record it")),
            _ => {}
        }
    }
    if baseline.endpoints != candidate.endpoints {
        differ.push(format!(
            "endpoints (replicas): baseline {}, this run {}",
            baseline.endpoints, candidate.endpoints
        ));
    }
    if let (Some(b), Some(c)) = (&baseline.runner, &candidate.runner) {
        if b != c {
            warn.push(format!("runner: baseline {b:?}, this run {c:?}"));
        }
    }
    // The recorded values agree, but the engines themselves may not (a typed value can be
    // stale; the engine's own word cannot): never compare across what the engines said.
    let arm_fields = [FingerprintField::Engine, FingerprintField::EngineVersion];
    for field in arm_fields.into_iter().filter(|f| !skip.contains(&f.name())) {
        let name = field.name();
        if let (Some(b), Some(c)) = (engine_word(baseline, field), engine_word(candidate, field)) {
            let said = differ.iter().any(|d| d.starts_with(&format!("{name}:")));
            if b != c && !said {
                differ.push(format!(
                    "{name}: the baseline's server said {b:?}, this run's says {c:?} (a typed \
                     value hides it): this would compare across engine versions; update the \
                     typed value or bless a new baseline"
                ));
            }
        }
    }
    override_differences(candidate, &mut warn);
    (differ, warn)
}

/// What an environment's engine said of itself for `field` (engine, engine_version): the
/// detected value where a typed one overrode it, else the recorded value.
pub(super) fn engine_word(env: &Environment, field: FingerprintField) -> Option<String> {
    match env.overridden.iter().find(|o| o.field == field.name()) {
        Some(o) => Some(o.detected.clone()),
        None => field.read(env),
    }
}

/// Every typed value that hides a different detected one is said loudly.
fn override_differences(candidate: &Environment, warn: &mut Vec<String>) {
    warn.extend(candidate.overridden.iter().map(override_warning));
}

/// The verdict's line for a typed value that hides a different detected one.
pub fn override_warning(o: &crate::record::Override) -> String {
    format!(
        "FINGERPRINT OVERRIDDEN: {} typed {:?} but detected {:?}; the comparison uses the \
         typed value",
        o.field, o.typed, o.detected
    )
}

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
        if !run.complete {
            bail!(
                "{which} is marked incomplete (the run was stopped); it cannot become a baseline"
            );
        }
        let problems = level_problems(&run.levels, run.profile.sweep.max_error_rate);
        if !problems.is_empty() {
            bail!(
                "{which} has levels that did not measure: {}",
                problems.join("; ")
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
        if run.levels.iter().any(|l| l.rate.is_some()) {
            bail!("{which} is open loop (levels keyed by request rate); baselines hold closed-loop concurrency levels only");
        }
        if run.base.is_some() {
            bail!("{which} is a relative (A/B) run of two servers; a baseline holds one server's sessions: bless a run of the server alone");
        }
        super::client_bound::check(&which, run, allow_client_bound)?;
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
    }
    let mut baseline = match (existing, mode) {
        (Some(b), BlessMode::Append) => {
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
            b
        }
        _ => Baseline {
            schema_version: BASELINE_SCHEMA,
            name: name.to_string(),
            profile: profile_path.clone(),
            profile_hash: first.profile_hash.clone(),
            environment: first.environment.clone(),
            gate: first.profile.gate.clone(),
            sessions: Vec::new(),
            calibration: Vec::new(),
        },
    };
    if profile_path.is_some() {
        baseline.profile = profile_path;
    }
    for run in runs {
        baseline.sessions.push(Session {
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
        });
    }
    // A rolling window of main's history: the newest `max_sessions` sessions.
    let keep = baseline.gate.max_sessions.max(1) as usize;
    if baseline.sessions.len() > keep {
        let drop = baseline.sessions.len() - keep;
        baseline.sessions.drain(..drop);
    }
    // Never write what the loader would refuse.
    baseline.validate("to be written")?;
    Ok(baseline)
}

/// An exclusive lock on a baseline file while it is rewritten, so two blesses cannot
/// interleave: an OS lock (`flock`), which dies with the process (a bless killed by SIGKILL
/// or stopped by SIGTERM never blocks the next one). The lock file lives in the temporary
/// folder, named by a hash of the baseline's absolute path ([`lock_path`]), never beside the
/// baseline where `git add -A` would commit it. It stays there: deleting it would let a third
/// bless lock a new file while the second still holds the old one.
pub struct BaselineLock {
    // Holds the lock while open; closing the file releases it.
    _file: std::fs::File,
}

/// How long a bless waits for another to finish before giving up.
pub const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

impl BaselineLock {
    /// Takes the lock, waiting up to [`LOCK_WAIT`] for another bless to release it.
    pub fn acquire(baseline: &Path) -> Result<BaselineLock> {
        BaselineLock::acquire_within(baseline, LOCK_WAIT)
    }

    pub fn acquire_within(baseline: &Path, wait: std::time::Duration) -> Result<BaselineLock> {
        use std::os::fd::AsRawFd;
        use std::os::unix::fs::OpenOptionsExt;
        // The baseline's folder first (the bless writes there next), so that its lock is
        // keyed by the folder's resolved path from the first bless on.
        if let Some(dir) = baseline.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create folder {}", dir.display()))?;
        }
        let path = lock_path(baseline)?;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create folder {}", dir.display()))?;
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o644)
            .open(&path)
            .with_context(|| format!("cannot open lock {}", path.display()))?;
        let started = std::time::Instant::now();
        let mut said = false;
        loop {
            // SAFETY: flock on a descriptor this function owns; no memory is passed.
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
                return Ok(BaselineLock { _file: file });
            }
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() != Some(libc::EWOULDBLOCK) {
                return Err(err).with_context(|| format!("cannot lock {}", path.display()));
            }
            if started.elapsed() >= wait {
                bail!(
                    "another bless holds {} (waited {} s); a stopped bless releases it by itself",
                    path.display(),
                    wait.as_secs()
                );
            }
            if !said {
                eprintln!("waiting for another bless to release {}", path.display());
                said = true;
            }
            std::thread::sleep(std::time::Duration::from_millis(25));
        }
    }
}

/// Where the lock of `baseline` lives: `$TMPDIR/throughline-locks-<uid>/<sha256 of the
/// baseline's absolute path, its folder resolved>.lock`. Keyed by the path, so two spellings
/// of one file (`./b.toml`, `dir/../b.toml`, a linked folder) share a lock; per user, so one
/// user's folder never blocks another's.
pub fn lock_path(baseline: &Path) -> Result<PathBuf> {
    use sha2::{Digest, Sha256};
    let Some(file) = baseline.file_name() else {
        bail!("{} names no file to lock", baseline.display());
    };
    let dir = match baseline.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(d) => d.to_path_buf(),
        None => PathBuf::from("."),
    };
    // The folder exists by now in a bless (it writes there next); if not, the plain path.
    let dir = std::fs::canonicalize(&dir).or_else(|_| std::path::absolute(&dir))?;
    let key = dir.join(file);
    let digest = Sha256::digest(key.as_os_str().as_encoded_bytes());
    let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    // SAFETY: getuid has no preconditions and cannot fail.
    let uid = unsafe { libc::getuid() };
    Ok(std::env::temp_dir()
        .join(format!("throughline-locks-{uid}"))
        .join(format!("{hex}.lock")))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = r#"
schema_version = 1
name = "demo"
profile_hash = "sha256:abc"

[environment]
gpu_model = "RTX PRO 6000"
endpoints = 1

[gate]
alpha = 0.01
min_effect = 0.03
min_trials = 5

[[sessions]]
measured_at = "2026-11-28T10:00:00Z"
tool = "throughline 0.1.0"

[[sessions.levels]]
concurrency = 1
tok_per_s = [121.0, 122.5, 120.9, 121.8, 122.0]
"#;

    #[test]
    fn parses_and_round_trips() {
        let b = Baseline::parse(SAMPLE, "sample").unwrap();
        assert_eq!(
            b.sessions_at(1),
            vec![vec![121.0, 122.5, 120.9, 121.8, 122.0]]
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b.toml");
        b.save(&path).unwrap();
        assert_eq!(Baseline::load(&path).unwrap(), b);
    }

    #[test]
    fn bad_baselines_say_what_is_wrong() {
        let newer = SAMPLE.replace("schema_version = 1", "schema_version = 7");
        let err = format!("{:#}", Baseline::parse(&newer, "x").unwrap_err());
        assert!(err.contains("newer"), "{err}");
        let typo = SAMPLE.replace("tok_per_s", "tok_per_sec");
        let err = format!("{:#}", Baseline::parse(&typo, "x").unwrap_err());
        assert!(
            err.contains("tok_per_sec") && err.contains("line 21"),
            "{err}"
        );
        let truncated = &SAMPLE[..SAMPLE.len() - 30];
        assert!(Baseline::parse(truncated, "x").is_err());
        let negative = SAMPLE.replace("121.0,", "-1.0,");
        let err = format!("{:#}", Baseline::parse(&negative, "x").unwrap_err());
        assert!(err.contains("-1"), "{err}");
    }

    #[test]
    fn fingerprint_names_what_differs() {
        let b = Environment {
            gpu_model: Some("H100".into()),
            endpoints: 2,
            ..Default::default()
        };
        let c = Environment {
            gpu_model: Some("H200".into()),
            endpoints: 2,
            ..Default::default()
        };
        let (differ, _) = fingerprint_differences(&b, &c);
        assert_eq!(
            differ,
            vec!["gpu_model: baseline \"H100\", this run \"H200\"".to_string()]
        );
        let missing = Environment {
            endpoints: 2,
            ..Default::default()
        };
        let (differ, _) = fingerprint_differences(&b, &missing);
        assert!(differ[0].contains("--gpu"), "{differ:?}");
        // A stale typed engine version that matches the baseline while the server says
        // otherwise is refused, not compared.
        let base = Environment {
            engine_version: Some("0.6.3".into()),
            ..Default::default()
        };
        let mut stale = base.clone();
        stale.take_detected(FingerprintField::EngineVersion, Some("0.7.0".into()));
        assert_eq!(stale.engine_version.as_deref(), Some("0.6.3"));
        let (differ, _) = fingerprint_differences(&base, &stale);
        assert!(
            differ[0].contains("across engine versions") && differ[0].contains("0.7.0"),
            "{differ:?}"
        );
        // A GPU name typed differently from nvidia-smi's is said loudly, not refused.
        let mut named = base.clone();
        named.gpu_model = Some("H200".into());
        let mut b2 = base.clone();
        b2.gpu_model = Some("H200".into());
        named.take_detected(FingerprintField::GpuModel, Some("NVIDIA H200".into()));
        let (differ, warn) = fingerprint_differences(&b2, &named);
        assert!(differ.is_empty(), "{differ:?}");
        assert!(warn[0].starts_with("FINGERPRINT OVERRIDDEN"), "{warn:?}");
        // The same wrong typed value on both sides, the same engine underneath: compared
        // (said loudly), not refused. A typed value that changed is refused even where the
        // engine did not change: either side saying "different" is enough.
        let mut wrong = Environment {
            engine_version: Some("1.0".into()),
            ..Default::default()
        };
        wrong.take_detected(FingerprintField::EngineVersion, Some("0.1.0".into()));
        let (differ, warn) = fingerprint_differences(&wrong, &wrong.clone());
        assert!(differ.is_empty(), "{differ:?}");
        assert_eq!(warn.len(), 1, "{warn:?}");
        let mut retyped = Environment {
            engine_version: Some("2.0".into()),
            ..Default::default()
        };
        retyped.take_detected(FingerprintField::EngineVersion, Some("0.1.0".into()));
        let (differ, _) = fingerprint_differences(&wrong, &retyped);
        assert_eq!(differ.len(), 1, "{differ:?}");
        let (differ, warn) = fingerprint_differences(&missing, &b);
        assert!(differ.is_empty() && warn.len() == 1);
    }

    #[test]
    fn lock_is_exclusive_and_released() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b.toml");
        let short = std::time::Duration::from_millis(100);
        let lock = BaselineLock::acquire(&path).unwrap();
        let err = BaselineLock::acquire_within(&path, short).err().unwrap();
        assert!(err.to_string().contains("another bless holds"), "{err}");
        drop(lock);
        assert!(BaselineLock::acquire_within(&path, short).is_ok());
        // Nothing beside the baseline for `git add -A` to commit.
        let beside: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert!(beside.is_empty(), "{beside:?}");
        // Two spellings of one file share the lock; another file has its own.
        let sub = dir.path().join("sub");
        std::fs::create_dir(&sub).unwrap();
        let other_spelling = sub.join("..").join("b.toml");
        assert_eq!(
            lock_path(&other_spelling).unwrap(),
            lock_path(&path).unwrap()
        );
        assert_ne!(
            lock_path(&dir.path().join("c.toml")).unwrap(),
            lock_path(&path).unwrap()
        );
    }
}

#[cfg(test)]
#[path = "baseline_props.rs"]
mod props;
