//! A/A calibration of the relative gate's two server slots (`baseline calibrate`): the rows
//! a calibrating run adds to a baseline, and the calibration a gated run reads back.

use anyhow::{bail, Result};

use super::fingerprint_match::fingerprint_differences;
use super::model::{
    Baseline, CalibrationRow, CALIBRATION_MAX_AGE_DAYS, CALIBRATION_MAX_BLOCKS,
    MAX_CALIBRATION_ROWS,
};
use crate::exit::not_comparable;
use crate::record::RunResult;
use crate::stats::decision::SlotCalibration;

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

impl Baseline {
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
}
