//! `throughline merge`: one report and one verdict from several runs, e.g. the legs of a
//! workflow matrix over GPU runners (one profile or node type each).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;

use crate::exit::Exit;
use crate::fsutil::write_atomic;
use crate::gate::merge::{combine, Check};
use crate::gate::Verdict;
use crate::record::files::{REPORT_MD, RESULTS_FILE, VERDICT_JSON};
use crate::record::RunResult;
use crate::report::combined::{markdown, run_label};
use crate::report::github;

/// Combine results files into one report (one table per run) and verdict files into one
/// verdict, the worst outcome winning: regression > not comparable > pass.
#[derive(Debug, Args)]
pub struct MergeArgs {
    /// A run's results.json (repeat for each run).
    #[arg(long, value_name = "FILE")]
    pub results: Vec<PathBuf>,
    /// A check's verdict.json from `throughline ci` or `gate --json` (repeat for each).
    #[arg(long, value_name = "FILE")]
    pub verdict: Vec<PathBuf>,
    /// A folder to search (two levels deep) for results.json and verdict.json, e.g. where
    /// the matrix's artifacts were downloaded (repeatable).
    #[arg(long, value_name = "DIR")]
    pub from: Vec<PathBuf>,
    /// Folder for the combined report.md and verdict.json.
    #[arg(long, short = 'o', value_name = "DIR")]
    pub out: PathBuf,
}

pub fn run(args: MergeArgs) -> Result<Exit> {
    let mut results = args.results.clone();
    let mut verdicts = args.verdict.clone();
    let out = args.out.canonicalize().ok();
    for dir in &args.from {
        // Not our own output from an earlier merge into a folder under `dir`.
        let found: Vec<PathBuf> = find(dir, 2)?
            .into_iter()
            .filter(|p| {
                let parent = p.parent().and_then(|d| d.canonicalize().ok());
                out.is_none() || parent != out
            })
            .collect();
        let before = (results.len(), verdicts.len());
        for path in found {
            match path.file_name().and_then(|n| n.to_str()) {
                Some(RESULTS_FILE) => results.push(path),
                Some(VERDICT_JSON) => verdicts.push(path),
                _ => {}
            }
        }
        if (results.len(), verdicts.len()) == before {
            bail!(
                "--from {}: no results.json or verdict.json in it or its subfolders",
                dir.display()
            );
        }
    }
    if results.is_empty() && verdicts.is_empty() {
        bail!("nothing to merge: pass --results FILE, --verdict FILE or --from DIR");
    }

    let mut runs = Vec::new();
    for path in &results {
        runs.push((path.display().to_string(), RunResult::load(path)?));
    }
    runs.sort_by_key(|(file, run)| (run_label(run), file.clone()));
    let mut checks = Vec::new();
    for path in &verdicts {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read verdict {}", path.display()))?;
        let verdict: Verdict = serde_json::from_str(&text).with_context(|| {
            format!(
                "verdict {} is not a throughline verdict (from `throughline ci` or `gate --json`)",
                path.display()
            )
        })?;
        checks.push(Check {
            file: path.display().to_string(),
            verdict,
        });
    }
    let merged = combine(checks);

    let text = markdown(&runs, merged.as_ref());
    write_atomic(&args.out.join(REPORT_MD), text.as_bytes())?;
    for (file, run) in &runs {
        println!("run: {} ({file})", run_label(run));
    }
    github::append_step_summary(&text)?;
    let exit = match &merged {
        Some(m) => {
            write_atomic(
                &args.out.join(VERDICT_JSON),
                serde_json::to_string_pretty(m)?.as_bytes(),
            )?;
            for c in &m.checks {
                println!(
                    "check: {} -> {}{}",
                    c.file,
                    c.verdict.outcome.word(),
                    c.verdict
                        .worst_ratio
                        .map(|r| format!(" (worst ratio {r:.3})"))
                        .unwrap_or_default()
                );
            }
            println!(
                "combined verdict: {} (the worst of {} check(s))",
                m.outcome.word(),
                m.checks.len()
            );
            github::write_verdict_outputs(m.outcome.word(), m.worst_ratio)?;
            m.exit()
        }
        None => Exit::Pass,
    };
    println!("report: {}", args.out.join(REPORT_MD).display());
    Ok(exit)
}

/// Files under `dir`, at most `depth` folders down, sorted (so the report's order is stable).
fn find(dir: &Path, depth: usize) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let entries =
        std::fs::read_dir(dir).with_context(|| format!("cannot read folder {}", dir.display()))?;
    for entry in entries {
        let path = entry?.path();
        if path.is_dir() {
            if depth > 0 {
                out.extend(find(&path, depth - 1)?);
            }
        } else {
            out.push(path);
        }
    }
    out.sort();
    Ok(out)
}
