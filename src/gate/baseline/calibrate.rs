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
use crate::untrusted::code_span;

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
                runner: run.environment.runner.clone(),
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

/// A calibrating job's key: its rows' start stamp, hashed (FNV-1a).
fn job_key(measured_at: &str) -> u64 {
    measured_at.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Which calibration rows a gated run may use: its start (RFC 3339), the base arm's engine
/// version, its runner, and whether another runner's rows were asked for
/// (`[gate] calibration_from_any_runner`).
#[derive(Debug, Clone, Copy, Default)]
pub struct CalibrationFor<'a> {
    pub at: Option<&'a str>,
    pub engine_version: Option<&'a str>,
    pub runner: Option<&'a str>,
    pub any_runner: bool,
}

impl CalibrationFor<'_> {
    /// A row of another runner, where both say which (a row or run that does not say is
    /// taken as this runner's, as before rows recorded it).
    fn other_runner(&self, row: &CalibrationRow) -> bool {
        matches!((self.runner, &row.runner), (Some(a), Some(b)) if a != b)
    }
}

impl Baseline {
    /// The A/A calibration of the slots at `concurrency` for the run `query` describes, when
    /// at least two blocks hold it: the newest [`CALIBRATION_MAX_BLOCKS`] rows of the
    /// level, none older than [`CALIBRATION_MAX_AGE_DAYS`] before its start (a row whose date
    /// cannot be read is left out when the start is given), none of another engine version
    /// (where both are known) and none of another runner unless asked.
    pub fn slot_calibration(
        &self,
        concurrency: u32,
        query: &CalibrationFor<'_>,
    ) -> Option<SlotCalibration> {
        let newest = self.calibration_rows_for(concurrency, query);
        let (x, within): (Vec<f64>, Vec<f64>) = (newest.iter())
            .map(|r| (r.slot_difference, r.within_variance))
            .unzip();
        // One `baseline calibrate` run is one job: its rows share their start stamp. Jobs
        // tell how far the slot effect moves from one to the next (issue 48).
        let job: Vec<u64> = newest.iter().map(|r| job_key(&r.measured_at)).collect();
        SlotCalibration::from_job_blocks(&x, &within, &job)
    }

    /// The rows [`Self::slot_calibration`] reads for a level.
    pub fn calibration_rows_for(
        &self,
        concurrency: u32,
        query: &CalibrationFor<'_>,
    ) -> Vec<&CalibrationRow> {
        let parse = |stamp: &str| {
            time::OffsetDateTime::parse(stamp, &time::format_description::well_known::Rfc3339).ok()
        };
        let now = query.at.and_then(parse);
        let fresh = |r: &&CalibrationRow| match now {
            None => true,
            Some(now) => parse(&r.measured_at).is_some_and(|then| {
                then <= now + time::Duration::hours(1)
                    && now - then <= time::Duration::days(CALIBRATION_MAX_AGE_DAYS)
            }),
        };
        let same_engine = |r: &&CalibrationRow| match (query.engine_version, &r.engine_version) {
            (Some(a), Some(b)) => a == b,
            _ => true,
        };
        let rows: Vec<&CalibrationRow> = (self.calibration.iter())
            .filter(|r| r.concurrency == concurrency)
            .filter(fresh)
            .filter(same_engine)
            .filter(|r| query.any_runner || !query.other_runner(r))
            .collect();
        rows[rows.len().saturating_sub(CALIBRATION_MAX_BLOCKS)..].to_vec()
    }

    /// What to say of the runners behind the calibration rows in reach of a run over
    /// `levels`: rows of another runner used (asked for) or left out (not asked), and rows
    /// that do not say their runner. None where every such row is this runner's.
    pub fn calibration_runner_line(
        &self,
        levels: &[u32],
        query: &CalibrationFor<'_>,
    ) -> Option<String> {
        let everything = CalibrationFor {
            any_runner: true,
            ..*query
        };
        let mut other: Vec<&str> = Vec::new();
        let mut unsaid = false;
        for &c in levels {
            for r in self.calibration_rows_for(c, &everything) {
                match &r.runner {
                    Some(name) if everything.other_runner(r) => other.push(name),
                    None if query.runner.is_some() => unsaid = true,
                    _ => {}
                }
            }
        }
        other.sort_unstable();
        other.dedup();
        let names: Vec<String> = other.iter().map(|n| code_span(n)).collect();
        let this = query.runner.map_or("unrecorded".to_string(), code_span);
        match (names.is_empty(), query.any_runner) {
            (false, true) => Some(format!(
                "calibration: rows of another runner used (asked: [gate] \
                 calibration_from_any_runner): {}; this run's runner {this}",
                names.join(", ")
            )),
            (false, false) => Some(format!(
                "calibration: rows of another runner not used (its slots and starts are not \
                 this machine's; [gate] calibration_from_any_runner = true uses them): {}; this \
                 run's runner {this}",
                names.join(", ")
            )),
            (true, _) if unsaid => Some(
                "calibration: some rows do not record their runner (older builds): used as \
                 this runner's"
                    .into(),
            ),
            _ => None,
        }
    }

    /// Adds A/A rows, keeping the newest [`MAX_CALIBRATION_ROWS`].
    pub fn add_calibration(&mut self, rows: Vec<CalibrationRow>) {
        self.calibration.extend(rows);
        let excess = self.calibration.len().saturating_sub(MAX_CALIBRATION_ROWS);
        self.calibration.drain(..excess);
    }
}
