//! `throughline bisect`: which commit made the server slower. Each commit the search picks
//! (gate/bisect.rs) is checked out in its own worktree, built, and its server measured
//! against the good commit's server in a relative run in blocks (runner/blocks.rs: both
//! started fresh in each block, slots swapped), so that a step calls a commit bad only on
//! the gate's regression verdict, with the same statistics as the pull-request check (and
//! the slots' A/A calibration of `--baseline`, where given). A commit the gate cannot tell
//! after its extra blocks is measured once more with twice the blocks; one that still
//! cannot be told, does not build or whose server does not start is skipped. Every step is
//! logged as it ends (journal.rs), so a killed bisect continues where it stopped.
//!
//! With `--step` it is the command `git bisect run` calls: the checkout as it is against
//! the good commit, exit 0 good, 1 bad, 125 skip.

mod chain;
mod checkout;
mod journal;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;

use super::flags::{BlockArgs, EnvironmentArgs};
use crate::exit::{exit_for, Exit};
use crate::fsutil::write_atomic;
use crate::gate::baseline::Baseline;
use crate::gate::bisect::{
    measure_again, next_step, open_range, planned_steps, step_calibration, step_verdict, Answer,
    Next, Report, Step, StepLevel, StepOutcome,
};
use crate::gate::{BlockPlan, LevelStatus, Verdict};
use crate::load::BenchSetup;
use crate::profile::Profile;
use crate::record::RunResult;
use crate::runner::BlocksSetup;
use checkout::{Commit, Stop, Walk};
use journal::{Header, Journal};

/// The examples `bisect --help` ends with.
pub const EXAMPLES: &str = "\
Examples:
  # Which commit between v0.4.0 and main made the server slower (each built and served)
  throughline bisect --good v0.4.0 --bad main -p bench.toml \\
      --build-command 'python -m venv .venv && .venv/bin/pip install -e .' \\
      --server-command '.venv/bin/vllm serve MODEL --port {port}' --slots '0;1'
  # At most 6 hours; run the same command again to continue where it stopped
  throughline bisect --good v0.4.0 -p bench.toml --server-command './serve.sh {port}' \\
      --max-duration 6h -o ../bisect-out
  # The same search driven by git (one step per commit git checks out):
  #   git bisect start main v0.4.0
  #   git bisect run throughline bisect --step --good v0.4.0 -p bench.toml \\
  #       --server-command './serve.sh {port}' -o ../bisect-out

Exit codes: 0 the first slower commit named; 2 no commit could be named (the bad ref is
not slower beyond noise, commits could not be measured, or --max-duration ran out:
bisect.md says which); 130/143 interrupted (run the same command again to continue).
With --step: 0 good, 1 bad (a regression), 125 skip, as `git bisect run` reads them.";

/// Find the commit that made a server slower: measure commits between a good and a bad ref
/// against the good one's server, in relative runs in blocks, halving the range each step.
#[derive(Debug, Args)]
pub struct BisectArgs {
    /// The last commit known fast (a ref or commit id).
    #[arg(long, value_name = "REF")]
    pub good: String,
    /// The commit known slow.
    #[arg(
        long,
        value_name = "REF",
        default_value = "HEAD",
        conflicts_with = "step"
    )]
    pub bad: String,
    /// The profile to measure each commit with (its [gate] settings decide each step).
    #[arg(long, short = 'p', value_name = "FILE")]
    pub profile: PathBuf,
    /// A commit's server: a shell command run in the commit's checkout, in which {port} is
    /// replaced by a free port, {slot} by the slot number and {gpus} by the slot's GPUs.
    #[arg(long, value_name = "COMMAND")]
    pub server_command: String,
    /// Run in each commit's checkout before its server starts (e.g. an install into a
    /// virtual environment of its own); a commit that fails to build is skipped.
    #[arg(long, value_name = "COMMAND")]
    pub build_command: Option<String>,
    /// The longest a build may take.
    #[arg(long, value_name = "DURATION", default_value = "60m", value_parser = humantime::parse_duration)]
    pub build_timeout: Duration,
    /// The git repository (any folder in its work tree).
    #[arg(long, short = 'C', value_name = "DIR", default_value = ".")]
    pub repo: PathBuf,
    /// Folder for the log, each step's run, the checkouts, bisect.md and bisect.json
    /// [default: throughline-bisect-NAME beside the repository's work tree, NAME its
    /// folder's name: never inside it, where git status lists it and git clean deletes it].
    #[arg(long, short = 'o', value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// One step for `git bisect run`: the checkout in --repo as it is, against --good.
    #[arg(long)]
    pub step: bool,
    /// Each step's slots and blocks, as `bench` and `ci` take them.
    #[command(flatten)]
    pub blocks: BlockArgs,
    /// The whole bisect's time budget: no step starts once it is spent, and the answer is
    /// the range left (the log keeps every step: the same command continues).
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    pub max_duration: Option<Duration>,
    /// Let a step decide where its load generator could have moved the verdict; without it
    /// such a step is skipped, as `gate` and `ci` refuse it.
    #[arg(long)]
    pub allow_client_bound: bool,
    /// A baseline whose A/A slot calibration (`baseline calibrate`) each step's verdict uses,
    /// as `gate` does: a run of few blocks then covers start effects. Only its calibration
    /// is read: both arms of a step are measured here, so its profile and environment are
    /// not compared.
    #[arg(long, value_name = "FILE")]
    pub baseline: Option<PathBuf>,
    /// Keep the checkouts (OUT/worktrees) when the bisect ends.
    #[arg(long)]
    pub keep_worktrees: bool,
    #[command(flatten)]
    pub environment: EnvironmentArgs,
}

/// What every step shares.
struct Bisect {
    profile: Profile,
    baseline: Option<Baseline>,
    args: BisectArgs,
    out: PathBuf,
    started: Instant,
}

pub async fn run(args: BisectArgs) -> Result<Exit> {
    let profile = Profile::load(&args.profile)?;
    let baseline = (args.baseline.as_deref())
        .map(|p| Baseline::load(p).context("--baseline"))
        .transpose()?;
    for flag in [&args.server_command]
        .into_iter()
        .chain(args.build_command.as_ref())
    {
        if flag.trim().is_empty() {
            bail!("--server-command and --build-command must not be empty");
        }
    }
    // From here on a signal is the bisect's to act on: a build running is stopped, its
    // checkout removed, and the bisect exits 130/143 with its log whole.
    let mut stop = Stop::from_signals();
    let out = match &args.out {
        Some(out) => out.clone(),
        None => {
            let out = checkout::beside_work_tree(&args.repo)?;
            println!(
                "bisect: output folder {} (beside the work tree; -o for another)",
                out.display()
            );
            out
        }
    };
    crate::fsutil::ensure_output_dir(&out)?;
    crate::locks::hold_output(&out)?;
    // Its report is written anew at the end: one left in the folder (or committed there)
    // must not stand for this bisect's meanwhile. The log is the bisect's own journal.
    for report in ["bisect.json", "bisect.md"] {
        crate::fsutil::remove_output(&out.join(report))?;
    }
    let out = out
        .canonicalize()
        .with_context(|| format!("cannot resolve {}", out.display()))?;
    let bisect = Bisect {
        profile,
        baseline,
        out,
        started: Instant::now(),
        args,
    };
    // The template as written, checked before anything is checked out or built.
    let command = &bisect.args.server_command;
    let checked = bisect.args.blocks.to_setup(command, Some(command))?;
    super::flags::BlockArgs::say_gpu_locks(&checked);
    if bisect.args.step {
        one_step(&bisect, &mut stop).await
    } else {
        search(&bisect, &mut stop).await
    }
}

impl Bisect {
    /// One step's run in blocks: the commit's server as head, the good one's as base, within
    /// what is left of the time budget; `more_blocks`: up to twice the --max-blocks.
    fn blocks_setup(
        &self,
        head_dir: &Path,
        good_dir: &Path,
        more_blocks: bool,
    ) -> Result<BlocksSetup> {
        let head = checkout::in_dir(head_dir, &self.args.server_command);
        let base = checkout::in_dir(good_dir, &self.args.server_command);
        let mut setup = self.args.blocks.to_setup(&head, Some(&base))?;
        setup.max_duration = self.time_left();
        if more_blocks {
            let first = setup.plan.first;
            setup.plan = BlockPlan::new(Some(first), Some(twice(setup.plan.max)), true)?;
        }
        Ok(setup)
    }

    /// The time left of --max-duration (None: no budget).
    fn time_left(&self) -> Option<Duration> {
        self.args
            .max_duration
            .map(|d| d.saturating_sub(self.started.elapsed()))
    }

    /// Measures the server in `head_dir` against the good one's, in blocks, into `out`;
    /// `more_blocks`: the second measurement of a commit the gate could not tell, with
    /// twice the --max-blocks. A step that cannot be measured is a skip with its reason; an
    /// interruption is an error.
    async fn measure(
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
        let setup = BenchSetup {
            profile: self.profile.clone(),
            environment: self.args.environment.to_environment(),
            out_dir: out,
            show_progress: false,
            base_endpoints: Vec::new(),
        };
        let settings = self.profile.gate.clone();
        let baseline = self.baseline.as_ref();
        let decide = |run: &RunResult| step_verdict(run, &settings, baseline);
        let mut again = String::new();
        if more_blocks {
            let (first, max) = (self.args.blocks.first, self.args.blocks.max);
            let max = twice(BlockPlan::new(first, max, true)?.max);
            again = format!("measured again, up to {max} blocks: ");
        }
        let measured = match self.blocks_setup(head_dir, good_dir, more_blocks) {
            Ok(blocks) => crate::runner::run_in_blocks(setup, &blocks, Some(&decide)).await,
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
        let mut verdict = decide(&run)?;
        // The gate's rule for the client's part: a step it could have decided is skipped.
        crate::gate::client_bound::review(
            &mut verdict,
            &run,
            self.args.allow_client_bound,
            "this step's results.json",
            &decide,
        )?;
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
        measured.calibration = step_calibration(&run, &settings, baseline);
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

/// The search, driven here: steps until the answer, each logged.
async fn search(bisect: &Bisect, stop: &mut Stop) -> Result<Exit> {
    let args = &bisect.args;
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
    let args = &bisect.args;
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

/// How long a measurement has, after a signal, to stop by itself: the servers' grace
/// (SIGTERM to SIGKILL) and a margin. Only a backstop: the run in blocks sees the same
/// switch in every phase and stops its servers itself.
const MEASURE_GRACE: Duration = Duration::from_secs(45);

/// A step's measurement, ended by a signal. The run in blocks stops on the signal by itself
/// in every phase (servers loading or measuring: they are stopped, partial results written,
/// exit 130/143); should it not within [`MEASURE_GRACE`], the measurement is dropped, which
/// kills its servers' groups.
async fn unless_stopped(
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
        bisect.args.build_command.as_deref(),
        bisect.args.build_timeout,
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
async fn one_step(bisect: &Bisect, stop: &mut Stop) -> Result<Exit> {
    let args = &bisect.args;
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

/// A step measured again gets twice the plan's most blocks, within the most any plan may
/// have (a large --max-blocks is not a reason to skip the commit).
fn twice(max: u32) -> u32 {
    max.saturating_mul(2)
        .min(crate::gate::sequential::MAX_BLOCKS)
}

/// What a log's steps were decided with from `--baseline`: its calibration rows, counted and
/// hashed (a bisect resumed under another calibration is another search).
fn calibration_id(baseline: &Baseline) -> Result<String> {
    let rows = serde_json::to_vec(&baseline.calibration)?;
    Ok(format!(
        "{} rows, {}",
        baseline.calibration.len(),
        crate::profile::sha256_id(&rows)
    ))
}
