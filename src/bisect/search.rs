//! The search, driven here: steps until the answer, each logged; and `--step`, one step
//! for `git bisect run`.

use std::path::PathBuf;

use anyhow::{bail, Result};

use super::chain;
use super::checkout::{self, Commit, Stop, Walk};
use super::journal::{self, Header, Journal};
use super::measure::unless_stopped;
use super::setup::{calibration_id, Bisect};
use crate::exit::Exit;
use crate::fsutil::write_atomic;
use crate::gate::bisect::{
    measure_again, next_step, open_range, planned_steps, Answer, Next, Report, Step, StepOutcome,
};

/// The search, driven here: steps until the answer, each logged.
pub async fn search(bisect: &Bisect, stop: &mut Stop) -> Result<Exit> {
    let args = &bisect.settings;
    let walk = checkout::walk(&args.repo, &args.good, &args.bad)?;
    let n = walk.commits.len();
    let (mut journal, mut said) = read_back(bisect, &walk)?;
    let index_of = |id: &str| walk.commits.iter().position(|c| c.id == id);
    let good_dir = ready_or_fail(&walk, bisect, &walk.good, stop).await?;
    let answer = loop {
        stop.check()?;
        // A commit the gate could not tell is measured again before the search moves on.
        let again = measure_again(&journal.steps).and_then(|s| index_of(&s.commit));
        let next = again.map_or_else(|| next_step(n, &said), Next::Measure);
        match next {
            Next::Measure(i) => {
                if bisect.time_left().is_some_and(|t| t.is_zero()) {
                    break Answer::OutOfTime {
                        commits: ids(&walk, open_range(n, &said)),
                    };
                }
                let commit = &walk.commits[i];
                let number = journal.steps.len() + 1;
                println!(
                    "step {number}: {} {}{}",
                    commit.short(),
                    crate::untrusted::for_terminal(&commit.subject),
                    if again.is_some() {
                        " (the gate could not tell: again, with more blocks)"
                    } else {
                        ""
                    }
                );
                let step = match checkout::ready(
                    &walk,
                    &bisect.out,
                    commit,
                    args.build_command.as_deref(),
                    args.build_timeout,
                    stop,
                )
                .await?
                {
                    Ok(dir) => {
                        let measured =
                            bisect.measure(commit, number, &dir, &good_dir, again.is_some());
                        unless_stopped(stop, measured).await?
                    }
                    Err(checkout::NotReady(why)) => Step {
                        number,
                        commit: commit.id.clone(),
                        subject: commit.subject.clone(),
                        outcome: StepOutcome::Skip,
                        reason: format!("not built: {why}"),
                        levels: Vec::new(),
                        blocks: 0,
                        seconds: 0.0,
                        changes: Vec::new(),
                        undecided: false,
                        more_blocks: again.is_some(),
                        calibration: None,
                    },
                };
                println!("{}", crate::report::bisect::step_line(&step));
                said.push((i, step.outcome));
                journal.append(step)?;
                // Kept (built) for its second measurement.
                if !args.keep_worktrees && measure_again(&journal.steps).is_none() {
                    checkout::remove(&walk, &checkout::checkout_dir(&bisect.out, commit));
                }
            }
            Next::Found(i) => {
                break Answer::Found {
                    commit: walk.commits[i].id.clone(),
                    subject: walk.commits[i].subject.clone(),
                }
            }
            Next::Range { first, last } => {
                break Answer::Range {
                    commits: ids(&walk, first..=last),
                }
            }
            Next::NotReproduced => break Answer::NotReproduced,
            Next::BadUnmeasurable => break Answer::BadUnmeasurable,
        }
    };
    if !args.keep_worktrees {
        checkout::remove(&walk, &good_dir);
    }
    let report = write_report(bisect, &walk, &journal, answer)?;
    Ok(match report.answer {
        Answer::Found { .. } => Exit::Pass,
        _ => Exit::Failure,
    })
}

/// The bisect's log, opened (or continued: its steps read back, said, and placed in the
/// walk; a step naming a commit outside it is an error).
fn read_back(bisect: &Bisect, walk: &Walk) -> Result<(Journal, Vec<(usize, StepOutcome)>)> {
    let args = &bisect.settings;
    let n = walk.commits.len();
    let bad = walk.commits.last().expect("walk has the bad commit");
    let redact = |c: &str| crate::record::redact::redact(c).into_owned();
    let header = Header {
        good: walk.good.id.clone(),
        bad: bad.id.clone(),
        profile_hash: bisect.profile.canonical_hash()?,
        server_command: redact(&args.server_command),
        build_command: args.build_command.as_deref().map(redact),
        // A baseline without calibration rows decides as no baseline does.
        calibration: (bisect.baseline.as_ref())
            .filter(|b| !b.calibration.is_empty())
            .map(calibration_id)
            .transpose()?,
    };
    // The key lives outside what the commits bisected could write (chain.rs).
    let key = chain::LogKey::load(&[&bisect.out, &walk.repo_dir]);
    let journal = Journal::open(&bisect.out, &header, key)?;
    let index_of = |id: &str| walk.commits.iter().position(|c| c.id == id);
    let mut said: Vec<(usize, StepOutcome)> = Vec::new();
    for step in &journal.steps {
        let Some(i) = index_of(&step.commit) else {
            bail!(
                "the bisect log names commit {} that is not between --good and --bad",
                crate::untrusted::for_terminal(&step.commit)
            );
        };
        said.push((i, step.outcome));
    }
    println!(
        "throughline bisect: {n} commit(s) after {} up to {}; a clean search measures {} of \
         them (the bad one first, to confirm it is slower){}",
        walk.good.short(),
        bad.short(),
        planned_steps(n),
        if journal.steps.is_empty() {
            String::new()
        } else {
            format!(
                "; {} step(s) read back from {}",
                journal.steps.len(),
                journal::LOG_FILE
            )
        }
    );
    for step in &journal.steps {
        println!("{}", crate::report::bisect::step_line(step));
    }
    Ok((journal, said))
}

/// bisect.json and bisect.md, written whole, and the answer said.
fn write_report(bisect: &Bisect, walk: &Walk, journal: &Journal, answer: Answer) -> Result<Report> {
    let n = walk.commits.len();
    let bad = walk.commits.last().expect("walk has the bad commit");
    let report = Report {
        good: walk.good.id.clone(),
        bad: bad.id.clone(),
        commits: n,
        planned_steps: planned_steps(n),
        steps: journal.steps.clone(),
        answer,
    };
    let subjects = |id: &str| {
        walk.commits
            .iter()
            .find(|c| c.id == id)
            .map_or(String::new(), |c| c.subject.clone())
    };
    write_atomic(
        &bisect.out.join("bisect.json"),
        &serde_json::to_vec_pretty(&report)?,
    )?;
    write_atomic(
        &bisect.out.join("bisect.md"),
        crate::report::bisect::markdown(&report, &subjects).as_bytes(),
    )?;
    println!("{}", crate::report::bisect::answer_line(&report, &subjects));
    println!("wrote {}", bisect.out.display());
    Ok(report)
}

fn ids(walk: &Walk, range: std::ops::RangeInclusive<usize>) -> Vec<String> {
    walk.commits[range].iter().map(|c| c.id.clone()).collect()
}

/// The good commit's checkout, built; one that cannot be built ends the bisect.
async fn ready_or_fail(
    walk: &Walk,
    bisect: &Bisect,
    commit: &Commit,
    stop: &mut Stop,
) -> Result<PathBuf> {
    match checkout::ready(
        walk,
        &bisect.out,
        commit,
        bisect.settings.build_command.as_deref(),
        bisect.settings.build_timeout,
        stop,
    )
    .await?
    {
        Ok(dir) => Ok(dir),
        Err(checkout::NotReady(why)) => bail!(
            "the good commit {} could not be built, so nothing can be measured against it: {why}",
            commit.short()
        ),
    }
}

/// `--step`: the checkout as it is against the good commit, for `git bisect run`.
pub async fn one_step(bisect: &Bisect, stop: &mut Stop) -> Result<Exit> {
    let args = &bisect.settings;
    let walk = checkout::walk(&args.repo, &args.good, "HEAD")?;
    let head = walk.commits.last().expect("walk has HEAD").clone();
    let good_dir = ready_or_fail(&walk, bisect, &walk.good, stop).await?;
    if let Some(build) = &args.build_command {
        let log = bisect.out.join(format!("build-{}.log", head.short()));
        if let Err(why) =
            checkout::run_build(&walk.repo_dir, build, &log, args.build_timeout, stop).await?
        {
            println!("{}: not built: {why}: skip", head.short());
            return Ok(Exit::BisectSkip);
        }
    }
    let number = std::fs::read_dir(bisect.out.join("steps")).map_or(0, |d| d.count()) + 1;
    let measured = bisect.measure(&head, number, &walk.repo_dir, &good_dir, false);
    let mut step = unless_stopped(stop, measured).await?;
    println!("{}", crate::report::bisect::step_line(&step));
    if step.undecided {
        let measured = bisect.measure(&head, number + 1, &walk.repo_dir, &good_dir, true);
        step = unless_stopped(stop, measured).await?;
        println!("{}", crate::report::bisect::step_line(&step));
    }
    // Stopped: `git bisect run` ends on 130/143, rather than taking the step as said.
    stop.check()?;
    Ok(match step.outcome {
        StepOutcome::Good => Exit::Pass,
        StepOutcome::Bad => Exit::Regression,
        StepOutcome::Skip => Exit::BisectSkip,
    })
}
