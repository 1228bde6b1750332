//! A baseline file's contents (sessions of trial values, the gate settings, the slots' A/A
//! calibration) and how it is read, checked and written.

use std::path::Path;

use anyhow::{anyhow, bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::fsutil::write_atomic;
use crate::profile::GateSettings;
use crate::record::{Environment, TrialMetric, FIGURE_MAX};

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
    /// The runner (label or host) the A/A servers ran on: another machine's slots and starts
    /// are not this one's, so its rows are used only where asked (issue 48). Absent in rows
    /// of older builds, and where the run did not record its runner.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner: Option<String>,
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

    pub(super) fn validate(&self, origin: &str) -> Result<()> {
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
}
