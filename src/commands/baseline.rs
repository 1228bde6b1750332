//! `throughline baseline bless`: write a baseline from run results (never from a PR job:
//! see the README's workflows).

use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, Subcommand};

use crate::exit::Exit;
use crate::gate::baseline::{bless, Baseline, BaselineLock, BlessMode};
use crate::record::RunResult;

#[derive(Debug, Args)]
pub struct BaselineArgs {
    #[command(subcommand)]
    pub command: BaselineCommand,
}

#[derive(Debug, Subcommand)]
pub enum BaselineCommand {
    /// Write a baseline from run results, one session per results file.
    Bless(BlessArgs),
}

#[derive(Debug, Args)]
pub struct BlessArgs {
    /// results.json of a run (repeat for several runs; each becomes a session).
    #[arg(long, required = true)]
    pub results: Vec<PathBuf>,
    /// The baseline file to write, e.g. baselines/NAME.toml.
    #[arg(long)]
    pub baseline: PathBuf,
    /// Start over instead of appending a session.
    #[arg(long)]
    pub replace: bool,
    /// Append a session to the baseline (the default; say it to be explicit).
    #[arg(long, conflicts_with = "replace")]
    pub append: bool,
    /// Baseline name (default: the file name).
    #[arg(long)]
    pub name: Option<String>,
    /// The profile file, relative to the baseline, to record beside it.
    #[arg(long)]
    pub profile: Option<String>,
    /// The commit measured (default: $GITHUB_SHA, else the work tree's HEAD).
    #[arg(long)]
    pub commit: Option<String>,
}

pub async fn run(args: BaselineArgs) -> Result<Exit> {
    match args.command {
        BaselineCommand::Bless(b) => {
            let runs = b
                .results
                .iter()
                .map(|p| RunResult::load(p))
                .collect::<Result<Vec<_>>>()?;
            let _lock = BaselineLock::acquire(&b.baseline)?;
            let existing = if b.baseline.exists() && !b.replace {
                Some(Baseline::load(&b.baseline)?)
            } else {
                None
            };
            let name = b.name.clone().unwrap_or_else(|| {
                b.baseline
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_else(|| runs[0].profile_name.clone())
            });
            let commit = b
                .commit
                .clone()
                .or_else(|| std::env::var("GITHUB_SHA").ok())
                .or_else(|| crate::gate::gitref::head_commit(&b.baseline));
            let mode = if b.replace {
                BlessMode::Replace
            } else {
                BlessMode::Append
            };
            let sessions_before = existing.as_ref().map_or(0, |e| e.sessions.len());
            let baseline = bless(existing, &runs, mode, &name, b.profile.clone(), commit)?;
            baseline.save(&b.baseline)?;
            println!(
                "blessed {} session(s) into {} ({} session(s) now, levels {:?})",
                baseline.sessions.len() - sessions_before,
                b.baseline.display(),
                baseline.sessions.len(),
                baseline.levels()
            );
            Ok(Exit::Pass)
        }
    }
}
