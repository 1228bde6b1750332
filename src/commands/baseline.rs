//! `throughline baseline bless`: write a baseline from run results (never from a PR job:
//! see the README's workflows).

use anyhow::Result;

use crate::baseline::{bless, Baseline, BaselineLock, BlessMode};
use crate::cli::{BaselineArgs, BaselineCommand};
use crate::exit::Exit;
use crate::record::RunResult;

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
                .or_else(|| crate::gitref::head_commit(&b.baseline));
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
