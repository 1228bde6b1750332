//! `throughline merge`: one report and one verdict from several runs, e.g. the legs of a
//! workflow matrix over GPU runners (one profile or node type each).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;

use crate::exit::Exit;
use crate::fsutil::write_atomic;
use crate::gate::merge::{combine, Check};
use crate::gate::Verdict;
use crate::record::checks::level_problems;
use crate::record::files::{REPORT_MD, RESULTS_FILE, VERDICT_JSON, VERDICT_MD};
use crate::record::RunResult;
use crate::report::combined::{markdown, run_label};
use crate::report::github;
use crate::report::verdict::shown_ratio;

/// The examples `merge --help` ends with (tests/it/help_examples.rs runs each).
pub const EXAMPLES: &str = "\
Examples:
  # The folders of a runner matrix's artifacts, into one report and one exit code
  throughline merge --from ci-out --from ci-ab -o merged
  # Named files instead
  throughline merge -r ci-out/results.json --verdict ci-out/verdict.json -o merged-one";

/// Combine results files into one report (one table per run) and verdict files into one
/// verdict, the worst outcome winning: regression > not comparable > pass.
#[derive(Debug, Args)]
pub struct MergeArgs {
    /// A run's results.json (repeat for each run).
    #[arg(long, short = 'r', value_name = "FILE")]
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

/// The most a verdict.json read may hold (a verdict is kilobytes; this is a bound).
const VERDICT_FILE_BYTES: u64 = 64 * 1024 * 1024;

pub fn run(args: MergeArgs) -> Result<Exit> {
    refuse_output_in_an_input(&args)?;
    let (results, verdicts) = inputs(&args)?;

    let mut runs = Vec::new();
    for path in &results {
        runs.push((path.display().to_string(), RunResult::load(path)?));
    }
    // A leg that did not measure must not disappear into a passing whole.
    let mut failed_legs: Vec<String> = runs
        .iter()
        .filter_map(|(file, run)| leg_failure(run).map(|why| format!("{file}: {why}")))
        .collect();
    for dir in &args.from {
        failed_legs.extend(unmeasured_checks(dir)?);
    }
    runs.sort_by_key(|(file, run)| (run_label(run), file.clone()));
    let merged = combine(read_checks(&verdicts)?);

    let mut text = markdown(&runs, merged.as_ref());
    if !failed_legs.is_empty() {
        text.push_str("\n## ❌ Legs that did not measure\n\n");
        for leg in &failed_legs {
            text.push_str(&format!("- {}\n", crate::untrusted::inline_text(leg)));
        }
    }
    crate::fsutil::ensure_output_dir(&args.out)?;
    write_atomic(&args.out.join(REPORT_MD), text.as_bytes())?;
    for (file, run) in &runs {
        let said = format!("run: {} ({file})", run_label(run));
        println!("{}", crate::untrusted::for_terminal(&said));
    }
    github::append_step_summary(&text)?;
    let exit = match &merged {
        Some(m) => {
            write_atomic(
                &args.out.join(VERDICT_JSON),
                serde_json::to_string_pretty(m)?.as_bytes(),
            )?;
            for c in &m.checks {
                let worst = match c.verdict.worst_ratio.map(shown_ratio) {
                    None => String::new(),
                    Some(Some(r)) => format!(" (worst ratio {r:.3})"),
                    Some(None) => " (worst ratio not finite)".to_string(),
                };
                println!(
                    "check: {} -> {}{worst}",
                    crate::untrusted::for_terminal(&c.file),
                    c.verdict.outcome.word(),
                );
            }
            let accepted = match m.regression_accepted() {
                true => "; accepted as intended by every regressed check (--allow-regression)",
                false => "",
            };
            println!(
                "combined verdict: {} (the worst of {} check(s)){accepted}",
                m.outcome.word(),
                m.checks.len()
            );
            // A leg that did not measure makes the whole an error (below): that is the word.
            let word = match failed_legs.is_empty() {
                true => m.outcome.word(),
                false => "error",
            };
            github::write_verdict_outputs(word, m.worst_ratio)?;
            if failed_legs.is_empty() && m.regression_accepted() {
                github::write_accepted_output()?;
            }
            m.exit()
        }
        None => Exit::Pass,
    };
    println!("report: {}", args.out.join(REPORT_MD).display());
    if !failed_legs.is_empty() {
        eprintln!("error: {} leg(s) did not measure:", failed_legs.len());
        for leg in &failed_legs {
            eprintln!("  {}", crate::untrusted::for_terminal(leg));
        }
        if merged.is_none() {
            github::write_verdict_outputs("error", None)?;
        }
        return Ok(Exit::Failure);
    }
    Ok(exit)
}

/// The results and verdicts to merge: those named, and those found in each --from folder
/// (two levels down), but never an earlier merge's own output.
fn inputs(args: &MergeArgs) -> Result<(Vec<PathBuf>, Vec<PathBuf>)> {
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
    Ok((results, verdicts))
}

/// Each verdict file, read and parsed (a file that is not a verdict is named).
fn read_checks(verdicts: &[PathBuf]) -> Result<Vec<Check>> {
    let mut checks = Vec::new();
    for path in verdicts {
        let text = crate::fsutil::read_bounded(path, VERDICT_FILE_BYTES)
            .with_context(|| format!("--verdict: cannot read verdict {}", path.display()))?;
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
    Ok(checks)
}

/// The output folder must not be where an input lives: its files would be taken for an
/// earlier merge's output (the leg dropped) and its verdict.json overwritten with the
/// combined one. A leg's folder holds a results.json, a verdict.md (from `ci`) or a
/// verdict.json that is not a merged one; a named input's folder is refused as well.
fn refuse_output_in_an_input(args: &MergeArgs) -> Result<()> {
    let Ok(out) = args.out.canonicalize() else {
        return Ok(()); // Not there yet: nothing in it.
    };
    let named = args.results.iter().chain(&args.verdict);
    for file in named {
        let dir = file.parent().map(|d| match d.as_os_str().is_empty() {
            true => Path::new("."),
            false => d,
        });
        if dir.and_then(|d| d.canonicalize().ok()).as_ref() == Some(&out) {
            bail!(
                "-o {}: it holds the input {}, which the merged files would overwrite or \
                 hide; write the merge to a folder of its own",
                args.out.display(),
                file.display()
            );
        }
    }
    if args.from.is_empty() {
        return Ok(());
    }
    let merged_verdict = |p: &Path| {
        crate::fsutil::read_bounded(p, VERDICT_FILE_BYTES)
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .is_some_and(|v| v.get("checks").is_some())
    };
    let leg = [RESULTS_FILE, VERDICT_MD]
        .into_iter()
        .find(|n| out.join(n).exists())
        .or_else(|| {
            let v = out.join(VERDICT_JSON);
            (v.exists() && !merged_verdict(&v)).then_some(VERDICT_JSON)
        });
    if let Some(name) = leg {
        bail!(
            "-o {}: it holds a leg's {name} (a run or check to merge, not an earlier merge), \
             which the merge would leave out and overwrite; write the merge to a folder of its \
             own, e.g. -o merged",
            args.out.display()
        );
    }
    Ok(())
}

/// Why a leg's run cannot count: stopped, a level that did not measure, or nothing measured.
fn leg_failure(run: &RunResult) -> Option<String> {
    if !run.complete {
        return Some("the run is marked incomplete (it was stopped)".into());
    }
    let problems = level_problems(&run.levels, run.profile.sweep.max_error_rate);
    if !problems.is_empty() {
        return Some(format!("did not measure: {}", problems.join("; ")));
    }
    if run.levels.iter().all(|l| l.throughputs().is_empty()) {
        return Some("measured nothing".into());
    }
    None
}

/// Check folders under `dir` where `throughline ci` could not measure: it leaves its
/// verdict.md there but no verdict.json.
fn unmeasured_checks(dir: &Path) -> Result<Vec<String>> {
    Ok(find(dir, 2)?
        .into_iter()
        .filter(|p| p.file_name().and_then(|n| n.to_str()) == Some(VERDICT_MD))
        .filter(|p| !p.with_file_name(VERDICT_JSON).exists())
        .map(|p| {
            format!(
                "{}: the check could not measure (verdict.md without verdict.json)",
                p.parent().unwrap_or(dir).display()
            )
        })
        .collect())
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::fake;

    fn merge_from(dir: &Path) -> Exit {
        run(MergeArgs {
            results: vec![],
            verdict: vec![],
            from: vec![dir.to_path_buf()],
            out: dir.join("merged"),
        })
        .unwrap()
    }

    #[test]
    fn a_failed_leg_fails_the_merge() {
        let dir = tempfile::tempdir().unwrap();
        let leg = |name: &str, run: RunResult| {
            let d = dir.path().join(name);
            std::fs::create_dir_all(&d).unwrap();
            run.save(&d.join(RESULTS_FILE)).unwrap();
        };
        std::fs::create_dir_all(dir.path().join("merged")).unwrap();
        leg("good", fake::run(&[(1, &[100.0, 101.0])]));
        assert_eq!(merge_from(dir.path()), Exit::Pass);

        let mut stopped = fake::run(&[(1, &[100.0, 101.0])]);
        stopped.complete = false;
        leg("stopped", stopped);
        assert_eq!(merge_from(dir.path()), Exit::Failure);
        std::fs::remove_dir_all(dir.path().join("stopped")).unwrap();

        let mut empty = fake::run(&[(1, &[100.0])]);
        empty.levels[0].trials[0].succeeded = 0;
        empty.levels[0].trials[0].requests_sent = 0;
        leg("empty", empty);
        assert_eq!(merge_from(dir.path()), Exit::Failure);
        std::fs::remove_dir_all(dir.path().join("empty")).unwrap();

        // A ci leg that could not measure: its verdict.md, no verdict.json.
        let refused = dir.path().join("refused");
        std::fs::create_dir_all(&refused).unwrap();
        std::fs::write(refused.join(VERDICT_MD), "could not measure").unwrap();
        assert_eq!(merge_from(dir.path()), Exit::Failure);
        let report = std::fs::read_to_string(dir.path().join("merged").join(REPORT_MD)).unwrap();
        assert!(report.contains("Legs that did not measure") && report.contains("refused"));
    }
}
