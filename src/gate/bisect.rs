//! Which commit to measure next when looking for the one that made a server slower.
//!
//! The commits between the good and the bad ref, oldest first (the bad ref last), each end
//! up good (the gate passed it against the good ref's server), bad (the gate found a
//! regression) or skipped (it did not build, its server did not start, or the gate could not
//! tell). The search first confirms that the bad ref is slower at all (a slowdown that does
//! not reproduce has no commit to find), then halves the range the first bad commit can lie
//! in, stepping round skipped commits as `git bisect` does. Measurements are noisy, so the
//! range is read from the lowest bad commit and the highest good one below it: a good
//! verdict above a bad one (noise, or a slowdown undone later) never moves the answer above
//! a commit measured bad. A step the gate could not tell (inconclusive) is measured once
//! more with more blocks before it counts as skipped ([`measure_again`]): the bad ref's too,
//! before the search gives up on it.

use serde::{Deserialize, Serialize};

/// What one step said about a commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepOutcome {
    /// The gate passed it against the good ref: no drop beyond the tolerance.
    Good,
    /// The gate found a regression against the good ref.
    Bad,
    /// It could not be measured, or the gate could not tell.
    Skip,
}

/// What to do next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// Measure the commit at this index.
    Measure(usize),
    /// The first bad commit is the one at this index.
    Found(usize),
    /// The first bad commit is one of these (the ones between were skipped).
    Range { first: usize, last: usize },
    /// The bad ref is not slower than the good one beyond noise: nothing to find.
    NotReproduced,
    /// The bad ref itself could not be measured (or the gate could not tell).
    BadUnmeasurable,
}

/// The search over `commits` commits (oldest first, the bad ref last), given each measured
/// commit's outcome by index.
pub fn next_step(commits: usize, outcomes: &[(usize, StepOutcome)]) -> Next {
    if commits == 0 {
        return Next::NotReproduced;
    }
    let last = commits - 1;
    let said = |i: usize| latest(outcomes, i);
    match said(last) {
        None => return Next::Measure(last),
        Some(StepOutcome::Good) => return Next::NotReproduced,
        Some(StepOutcome::Skip) => return Next::BadUnmeasurable,
        Some(StepOutcome::Bad) => {}
    }
    let range = open_range(commits, outcomes);
    let (hi, lo) = (*range.end(), *range.start() as i64 - 1);
    let open: Vec<usize> = ((lo + 1) as usize..hi)
        .filter(|&i| said(i).is_none())
        .collect();
    if open.is_empty() {
        let first = (lo + 1) as usize;
        return if first == hi {
            Next::Found(hi)
        } else {
            Next::Range { first, last: hi }
        };
    }
    // The middle of the range the first bad commit can lie in (lo+1..=hi), or the open
    // commit nearest to it (the lower one on a tie).
    let mid = lo + (hi as i64 - lo) / 2;
    let pick = open
        .iter()
        .copied()
        .min_by_key(|&i| ((i as i64 - mid).abs(), i))
        .expect("open is not empty");
    Next::Measure(pick)
}

/// The latest outcome said of commit `i` (a commit measured again counts as its last).
fn latest(outcomes: &[(usize, StepOutcome)], i: usize) -> Option<StepOutcome> {
    outcomes
        .iter()
        .rev()
        .find(|(j, _)| *j == i)
        .map(|(_, o)| *o)
}

/// The most steps a clean search over `commits` commits takes: the bad ref, then halving.
pub fn planned_steps(commits: usize) -> usize {
    if commits <= 1 {
        return commits;
    }
    1 + (usize::BITS - (commits - 1).leading_zeros()) as usize
}

/// One level of a step: the gate's ratio of the commit to the good ref, with the pass
/// bounds it read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepLevel {
    pub concurrency: u32,
    pub status: super::verdict::LevelStatus,
    pub ratio: Option<f64>,
    pub low: Option<f64>,
    pub high: Option<f64>,
}

/// One measured (or skipped) commit, as the log and bisect.json keep it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// 1, 2, ... in the order measured.
    pub number: usize,
    pub commit: String,
    /// The commit's subject line (untrusted text: escape it where it is shown).
    pub subject: String,
    pub outcome: StepOutcome,
    /// Why: the regression or pass, or what stopped the measurement.
    pub reason: String,
    #[serde(default)]
    pub levels: Vec<StepLevel>,
    #[serde(default)]
    pub blocks: u32,
    pub seconds: f64,
    /// What changed besides tok/s against the good commit (the verdict's readings, per level:
    /// "C=8: KV cache 0% -> 84%, ...: the KV cache fills sooner").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<String>,
    /// The gate measured it and could not tell (inconclusive): it is measured once more,
    /// with more blocks, before the search steps round it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub undecided: bool,
    /// This step is that second measurement (so a resumed bisect does not take a third).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub more_blocks: bool,
    /// The `--baseline` calibration rows this step's verdict read, per level (their count
    /// and hash), or that none applied: the log's header names all of the baseline's rows,
    /// and a step reads only those of the good commit's engine version, age and runner.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibration: Option<String>,
}

/// The step whose commit is to be measured again with more blocks: the latest, where the
/// gate could not tell and it was not already the second measurement. Read from the log,
/// so a bisect stopped between the two continues with the second.
pub fn measure_again(steps: &[Step]) -> Option<&Step> {
    steps.last().filter(|s| s.undecided && !s.more_blocks)
}

/// A step's verdict: the commit (head) against the good commit's server (base), in one
/// relative run in blocks, with the slots' A/A calibration from `baseline` where it holds
/// one for the level (recent rows of the base arm's engine version and this runner, as `gate`
/// reads them). The baseline vouches for nothing else: both arms were measured here, so its
/// profile and environment are not compared.
pub fn step_verdict(
    run: &crate::record::RunResult,
    settings: &crate::profile::GateSettings,
    baseline: Option<&super::baseline::Baseline>,
) -> anyhow::Result<super::verdict::Verdict> {
    let query = calibration_query(run, settings);
    let calibration = |c: u32| baseline.and_then(|b| b.slot_calibration(c, &query));
    super::compare::evaluate_relative_calibrated(run, settings, &calibration)
}

/// Which of a baseline's calibration rows a step's run may read.
fn calibration_query<'a>(
    run: &'a crate::record::RunResult,
    settings: &crate::profile::GateSettings,
) -> super::baseline::CalibrationFor<'a> {
    super::baseline::CalibrationFor {
        at: Some(run.started_at.as_str()),
        engine_version: run.base.as_ref().and_then(|b| b.engine_version.as_deref()),
        runner: run.environment.runner.as_deref(),
        any_runner: settings.calibration_from_any_runner,
    }
}

/// The calibration rows [`step_verdict`] read for `run`, for its step's log line: per level
/// their count and hash ("C=2: 6 rows, sha256:..."), or that none of the baseline's rows
/// applied. None without a baseline or calibration rows.
pub fn step_calibration(
    run: &crate::record::RunResult,
    settings: &crate::profile::GateSettings,
    baseline: Option<&super::baseline::Baseline>,
) -> Option<String> {
    let baseline = baseline.filter(|b| !b.calibration.is_empty())?;
    let query = calibration_query(run, settings);
    let per_level: Vec<String> = (run.levels.iter())
        .filter_map(|l| {
            let rows = baseline.calibration_rows_for(l.concurrency, &query);
            let bytes = serde_json::to_vec(&rows).ok()?;
            (!rows.is_empty()).then(|| {
                let id = crate::profile::sha256_id(&bytes);
                format!("C={}: {} rows, {id}", l.concurrency, rows.len())
            })
        })
        .collect();
    Some(if per_level.is_empty() {
        format!(
            "none of the baseline's {} rows applied (another engine version, runner, or too \
             old)",
            baseline.calibration.len()
        )
    } else {
        per_level.join("; ")
    })
}

/// The answer of a whole bisect.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Answer {
    /// The first commit the gate finds slower than the good ref.
    Found { commit: String, subject: String },
    /// The first bad commit is one of these (oldest first): the others could not be measured.
    Range { commits: Vec<String> },
    /// The bad ref is not slower than the good ref beyond noise.
    NotReproduced,
    /// The bad ref could not be measured, or the gate could not tell.
    BadUnmeasurable,
    /// The time budget ran out; the first bad commit lies among these (oldest first).
    OutOfTime { commits: Vec<String> },
}

/// What bisect.json holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub good: String,
    pub bad: String,
    /// Commits after the good ref up to the bad ref (first-parent line).
    pub commits: usize,
    /// Steps a clean search takes over that many commits (the bad ref, then halving).
    pub planned_steps: usize,
    pub steps: Vec<Step>,
    pub answer: Answer,
}

/// The commits the first bad one can still be among: from the one after the highest good
/// commit below the lowest bad one, to that bad one (`next_step`'s range), oldest first.
pub fn open_range(
    commits: usize,
    outcomes: &[(usize, StepOutcome)],
) -> std::ops::RangeInclusive<usize> {
    let said = |i: usize| latest(outcomes, i);
    let hi = (0..commits)
        .find(|&i| said(i) == Some(StepOutcome::Bad))
        .unwrap_or(commits.saturating_sub(1));
    let lo = (0..hi).rev().find(|&i| said(i) == Some(StepOutcome::Good));
    lo.map_or(0, |i| i + 1)..=hi
}

#[cfg(test)]
mod tests {
    use super::StepOutcome::{Bad, Good, Skip};
    use super::*;

    /// Runs the search against a truth (index of the first bad commit) and a set of commits
    /// that cannot be measured; returns the answer and the commits measured, in order.
    fn search(commits: usize, first_bad: usize, broken: &[usize]) -> (Next, Vec<usize>) {
        let mut said = Vec::new();
        let mut order = Vec::new();
        loop {
            match next_step(commits, &said) {
                Next::Measure(i) => {
                    assert!(!order.contains(&i), "measured {i} twice: {order:?}");
                    order.push(i);
                    let outcome = if broken.contains(&i) {
                        Skip
                    } else if i >= first_bad {
                        Bad
                    } else {
                        Good
                    };
                    said.push((i, outcome));
                }
                answer => return (answer, order),
            }
        }
    }

    #[test]
    fn finds_every_culprit_among_16_in_five_steps() {
        for first_bad in 0..16 {
            let (answer, order) = search(16, first_bad, &[]);
            assert_eq!(answer, Next::Found(first_bad), "{order:?}");
            assert!(order.len() <= planned_steps(16), "{first_bad}: {order:?}");
            assert_eq!(order[0], 15, "the bad ref is confirmed first");
        }
        assert_eq!(planned_steps(16), 5);
        assert_eq!(planned_steps(1), 1);
        assert_eq!(planned_steps(2), 2);
    }

    #[test]
    fn steps_round_a_commit_that_cannot_be_measured() {
        // The first midpoint (7) does not start: its neighbour is measured instead.
        let (answer, order) = search(16, 10, &[7]);
        assert_eq!(answer, Next::Found(10));
        assert_eq!(order, vec![15, 7, 6, 10, 8, 9]);
        // Every commit but the culprit broken: the answer is the range they leave.
        let broken: Vec<usize> = (0..16).filter(|&i| i != 10 && i != 15).collect();
        let (answer, _) = search(16, 10, &broken);
        assert_eq!(answer, Next::Range { first: 0, last: 10 });
        // The culprit itself broken: its range ends at the next measurable commit.
        let (answer, _) = search(16, 10, &[10]);
        assert_eq!(
            answer,
            Next::Range {
                first: 10,
                last: 11
            }
        );
    }

    #[test]
    fn a_slowdown_that_does_not_reproduce_has_no_commit() {
        assert_eq!(search(16, 99, &[]).0, Next::NotReproduced);
        assert_eq!(search(16, 3, &[15]).0, Next::BadUnmeasurable);
        assert_eq!(next_step(0, &[]), Next::NotReproduced);
        assert_eq!(search(1, 0, &[]).0, Next::Found(0));
    }

    fn step(commit: &str, undecided: bool, more_blocks: bool) -> Step {
        Step {
            number: 1,
            commit: commit.into(),
            subject: String::new(),
            outcome: Skip,
            reason: String::new(),
            levels: Vec::new(),
            blocks: 4,
            seconds: 1.0,
            changes: Vec::new(),
            undecided,
            more_blocks,
            calibration: None,
        }
    }

    #[test]
    fn an_undecided_step_is_measured_again_once() {
        assert_eq!(measure_again(&[]), None);
        let first = step("a", true, false);
        assert_eq!(measure_again(std::slice::from_ref(&first)), Some(&first));
        // The second measurement, undecided too: skipped for good.
        assert_eq!(measure_again(&[first.clone(), step("a", true, true)]), None);
        // A skip for another reason (not built, not started) is not measured again.
        assert_eq!(measure_again(&[step("b", false, false)]), None);
    }

    #[test]
    fn a_good_verdict_above_a_bad_one_never_moves_the_answer_up() {
        // Noise: 12 measured good though 8 was bad. The answer stays at or below 8.
        let said = [(15, Bad), (7, Good), (11, Good), (8, Bad), (12, Good)];
        match next_step(16, &said) {
            Next::Found(i) => assert_eq!(i, 8),
            other => panic!("{other:?}"),
        }
        // The latest verdict on a commit counts (a remeasured one).
        let said = [(15, Bad), (7, Skip), (7, Good)];
        assert_eq!(next_step(16, &said), Next::Measure(11));
    }
}
