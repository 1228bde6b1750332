//! One step: a commit's server measured against the good commit's in a run in blocks, and
//! judged by the gate's rule for a step.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Result;

use super::checkout::{self, Commit, Stop};
use super::setup::{twice, Bisect};
use crate::exit::{exit_for, Exit};
use crate::gate::bisect::{step_calibration, Step, StepLevel, StepOutcome};
use crate::gate::{Against, BlockPlan, Check, LevelStatus, Verdict};
use crate::load::BenchSetup;
use crate::record::RunResult;
use crate::runner::RunSetup;

impl Bisect {
    /// Measures the server in `head_dir` against the good one's, in blocks, into `out`;
    /// `more_blocks`: the second measurement of a commit the gate could not tell, with
    /// twice the --max-blocks. A step that cannot be measured is a skip with its reason; an
    /// interruption is an error.
    pub(super) async fn measure(
        &self,
        commit: &Commit,
        number: usize,
        head_dir: &Path,
        good_dir: &Path,
        more_blocks: bool,
    ) -> Result<Step> {
        let started = Instant::now();
        let out = self
            .out
            .join("steps")
            .join(format!("{number:02}-{}", commit.short()));
        crate::fsutil::ensure_output_dir(&self.out.join("steps"))?;
        crate::fsutil::ensure_output_dir(&out)?;
        let environment = self.settings.environment.clone();
        let bench = BenchSetup::new(self.profile.clone(), environment, out);
        // A step's verdict: its arms, with the good commit's calibration from the baseline.
        let check = Check {
            allow_client_bound: self.settings.allow_client_bound,
            ..Check::new(
                Against::CalibratedArms(self.baseline.clone()),
                self.profile.gate.clone(),
            )
        };
        let decide = |run: &RunResult| check.decide(run);
        let mut again = String::new();
        if more_blocks {
            let (first, max) = self.settings.blocks;
            let max = twice(BlockPlan::new(first, max, true)?.max);
            again = format!("measured again, up to {max} blocks: ");
        }
        let measured = match self.blocks_setup(head_dir, good_dir, more_blocks) {
            Ok(blocks) => {
                let setup = RunSetup::new(bench, Some(blocks));
                crate::runner::run(setup, Some(&decide)).await
            }
            Err(e) => Err(e),
        };
        let step = |outcome, reason: String, levels, blocks| Step {
            number,
            commit: commit.id.clone(),
            subject: commit.subject.clone(),
            outcome,
            reason,
            levels,
            blocks,
            seconds: started.elapsed().as_secs_f64(),
            changes: Vec::new(),
            undecided: false,
            more_blocks,
            calibration: None,
        };
        let run = match measured {
            // A step stopped part-way is not judged: the journal keeps no line for it, and
            // the same command run again measures it afresh.
            Ok(outcome) if outcome.interrupted.is_some() => {
                let sig = outcome.interrupted.unwrap_or(libc::SIGTERM);
                return Err(crate::exit::CodedError {
                    exit: Exit::Interrupted(sig),
                    message: format!(
                        "interrupted by {} while measuring {}; run the same command again \
                         to continue",
                        crate::load::run::interrupt::signal_name(sig),
                        commit.short()
                    ),
                }
                .into());
            }
            Ok(outcome) => outcome.result,
            Err(e) if matches!(exit_for(&e), Exit::Interrupted(_)) => return Err(e),
            Err(e) => {
                let why = format!("{again}not measured: {}", not_measured(&e));
                return Ok(step(StepOutcome::Skip, why, Vec::new(), 0));
            }
        };
        let blocks = run.servers.as_ref().map_or(0, |s| s.blocks.len() as u32);
        // The gate's rule for the client's part: a step it could have decided is skipped.
        let verdict = check.judge(&run, "this step's results.json")?;
        if verdict.refusal.is_some() {
            return Ok(step(
                StepOutcome::Skip,
                format!(
                    "{again}not decided: the load generator, not the server, may have decided \
                     it ({ALLOW} decides on it)",
                    ALLOW = crate::gate::client_bound::ALLOW_FLAG
                ),
                Vec::new(),
                blocks,
            ));
        }
        let (outcome, reason) = judged(&verdict, blocks);
        let mut measured = step(
            outcome,
            format!("{again}{reason}"),
            levels_of(&verdict),
            blocks,
        );
        measured.undecided = verdict.outcome == crate::gate::Outcome::Inconclusive;
        measured.calibration = step_calibration(&run, &check.settings, check.baseline());
        measured.changes = (verdict.changes.iter())
            .flat_map(|c| &c.levels)
            .flat_map(|l| {
                l.readings
                    .iter()
                    .map(move |r| format!("C={}: {}", l.concurrency, r.said))
            })
            .collect();
        Ok(measured)
    }
}

/// Why a step could not be measured, in one line: what failed first, and the end of the
/// server's log when the error carries it.
fn not_measured(e: &anyhow::Error) -> String {
    let said = crate::record::redact::redact_error(&format!("{e:#}"));
    let mut lines = said.lines().map(str::trim).filter(|l| !l.is_empty());
    let first = lines.next().unwrap_or("").to_string();
    let last = lines
        .next_back()
        .map_or(String::new(), |l| format!("; its log ends: {l}"));
    format!("{first}{last}")
}

/// A step's outcome and the reason said, from the gate's verdict.
fn judged(verdict: &Verdict, blocks: u32) -> (StepOutcome, String) {
    use crate::gate::Outcome;
    let at = |status: LevelStatus| {
        (verdict.levels.iter())
            .filter(|l| l.status == status)
            .map(|l| match l.ratio {
                Some(r) => format!("C={} {:.3}", l.concurrency, r),
                None => format!("C={}", l.concurrency),
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    match verdict.outcome {
        Outcome::Regression => (
            StepOutcome::Bad,
            format!("regression: {}", at(LevelStatus::Regression)),
        ),
        Outcome::Pass => (
            StepOutcome::Good,
            format!(
                "no drop larger than {:.0}% at any level",
                verdict.settings.tolerance * 100.0
            ),
        ),
        Outcome::Inconclusive => (
            StepOutcome::Skip,
            format!("the gate could not tell after {blocks} block(s)"),
        ),
        Outcome::NotComparable => (
            StepOutcome::Skip,
            format!("the gate could not compare after {blocks} block(s)"),
        ),
    }
}

fn levels_of(verdict: &Verdict) -> Vec<StepLevel> {
    (verdict.levels.iter())
        .filter(|l| l.metric.is_throughput())
        .map(|l| StepLevel {
            concurrency: l.concurrency,
            status: l.status,
            ratio: l.ratio,
            low: l.ci_low,
            high: l.ci_high,
        })
        .collect()
}

/// How long a measurement has, after a signal, to stop by itself: the servers' grace
/// (SIGTERM to SIGKILL) and a margin. Only a backstop: the run in blocks sees the same
/// switch in every phase and stops its servers itself.
const MEASURE_GRACE: Duration = Duration::from_secs(45);

/// A step's measurement, ended by a signal. The run in blocks stops on the signal by itself
/// in every phase (servers loading or measuring: they are stopped, partial results written,
/// exit 130/143); should it not within [`MEASURE_GRACE`], the measurement is dropped, which
/// kills its servers' groups.
pub(super) async fn unless_stopped(
    stop: &mut Stop,
    measure: impl std::future::Future<Output = Result<Step>>,
) -> Result<Step> {
    stop.check()?;
    let mut measure = std::pin::pin!(measure);
    let sig = tokio::select! {
        step = &mut measure => return step,
        sig = stop.stopped() => sig,
    };
    match tokio::time::timeout(MEASURE_GRACE, measure).await {
        // Measured whole: it is logged, and the bisect stops before the next step.
        Ok(Ok(step)) => Ok(step),
        Ok(Err(e)) if matches!(exit_for(&e), Exit::Interrupted(_)) => Err(e),
        Ok(Err(_)) | Err(_) => Err(checkout::interrupted(sig)),
    }
}
