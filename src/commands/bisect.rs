//! `throughline bisect`: which commit made the server slower (the search and its steps:
//! src/bisect/). The flags parsed into the bisect's settings, the search called.
//!
//! With `--step` it is the command `git bisect run` calls: the checkout as it is against
//! the good commit, exit 0 good, 1 bad, 125 skip.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;

use super::flags::{BlockArgs, EnvironmentArgs};
use crate::bisect::checkout::{self, Stop};
use crate::bisect::{Bisect, Settings};
use crate::exit::Exit;
use crate::gate::baseline::Baseline;
use crate::profile::Profile;

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
    let out = crate::bisect::prepare_output(&out)?;
    // The template as written, checked before anything is checked out or built.
    let command = &args.server_command;
    let checked = args.blocks.to_setup(command, Some(command))?;
    BlockArgs::say_gpu_locks(&checked);
    let blocks = args.blocks.clone();
    let bisect = Bisect {
        profile,
        baseline,
        blocks_for: Box::new(move |head, base| blocks.to_setup(head, Some(base))),
        out,
        started: Instant::now(),
        settings: Settings {
            good: args.good,
            bad: args.bad,
            repo: args.repo,
            server_command: args.server_command,
            build_command: args.build_command,
            build_timeout: args.build_timeout,
            max_duration: args.max_duration,
            allow_client_bound: args.allow_client_bound,
            keep_worktrees: args.keep_worktrees,
            blocks: (args.blocks.first, args.blocks.max),
            environment: args.environment.to_environment(),
        },
    };
    if args.step {
        crate::bisect::one_step(&bisect, &mut stop).await
    } else {
        crate::bisect::search(&bisect, &mut stop).await
    }
}
