//! `throughline merge`: one report and one verdict from several runs, e.g. the legs of a
//! workflow matrix over GPU runners (one profile or node type each).

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use clap::Args;

use crate::exit::Exit;
use crate::fsutil::write_atomic;
use crate::gate::legs::{self, Inputs, Legs};
use crate::gate::merge::combine;
use crate::record::files::{
    PR_COMMENT_MD, REPORT_MD, RESULTS_FILE, VERDICT_FILE_BYTES, VERDICT_JSON, VERDICT_MD,
};
use crate::report::combined::{markdown, run_label};
use crate::report::github;
use crate::report::merged_comment::merged_comment;
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
    /// How many legs the workflow ran (the matrix's size): a leg missing (its artifact never
    /// uploaded) or one too many fails the merge (exit 2), naming what was found.
    #[arg(long, value_name = "N")]
    pub expect: Option<usize>,
    /// How many merges (waves of legs) the workflow may make before it stops: legs of one
    /// comparison (same profile, baseline, settings, server commands, GPU model, driver and
    /// engine versions) are pooled into one verdict over all their blocks, and each wave is a
    /// look of it (both sides' errors split over the waves as over looks).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=20))]
    pub waves: u32,
}

pub fn run(args: MergeArgs) -> Result<Exit> {
    refuse_output_in_an_input(&args)?;
    let Legs {
        mut runs,
        checks,
        failed: failed_legs,
    } = legs::read(&Inputs {
        results: &args.results,
        verdicts: &args.verdict,
        from: &args.from,
        out: &args.out,
        expect: args.expect,
    })?;
    runs.sort_by_key(|(file, run)| (run_label(run), file.clone()));
    let mut checks = checks;
    checks.sort_by(|a, b| a.file.cmp(&b.file));
    let pooled = crate::gate::pool::pool(checks, &runs, args.waves)?;
    for line in &pooled.said {
        println!("{}", crate::untrusted::for_terminal(line));
    }
    let merged = combine(pooled.checks);

    let text = report_text(&runs, merged.as_ref(), &pooled.said, &failed_legs);
    crate::fsutil::ensure_output_dir(&args.out)?;
    write_atomic(&args.out.join(REPORT_MD), text.as_bytes())?;
    for (file, run) in &runs {
        let said = format!("run: {} ({file})", run_label(run));
        println!("{}", crate::untrusted::for_terminal(&said));
    }
    github::append_step_summary(&text)?;
    // The merge's own id: its comment names it, and the comment step posts only a body
    // whose id is the merge step's `run_id` output.
    let run_id = crate::record::run_id::run_id();
    let exit = match &merged {
        Some(m) => {
            write_atomic(
                &args.out.join(VERDICT_JSON),
                serde_json::to_string_pretty(m)?.as_bytes(),
            )?;
            let comment = merged_comment(m, run_id, &github::RunContext::from_env());
            write_atomic(&args.out.join(PR_COMMENT_MD), comment.as_bytes())?;
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
            m.exit()
        }
        None => Exit::Pass,
    };
    // Every output key once, at the end: a leg that did not measure makes the whole an
    // error (below), and then nothing is accepted.
    let word = match (failed_legs.is_empty(), &merged) {
        (false, _) => Some("error"),
        (true, Some(m)) => Some(m.outcome.word()),
        (true, None) => None,
    };
    if let Some(word) = word {
        let accepted =
            failed_legs.is_empty() && merged.as_ref().is_some_and(|m| m.regression_accepted());
        github::write_verdict_outputs(
            word,
            merged.as_ref().and_then(|m| m.worst_ratio),
            accepted,
            merged.as_ref().map(|_| run_id),
        )?;
    }
    let undecided = undecided(merged.as_ref(), failed_legs.is_empty());
    if !undecided.is_empty() {
        let list: Vec<String> = undecided.iter().map(u32::to_string).collect();
        println!(
            "undecided: C={} (a further wave of legs would measure them)",
            list.join(",")
        );
    }
    github::write_undecided_output(&undecided)?;
    println!("report: {}", args.out.join(REPORT_MD).display());
    if !failed_legs.is_empty() {
        eprintln!("error: {} leg(s) did not measure:", failed_legs.len());
        for leg in &failed_legs {
            eprintln!("  {}", crate::untrusted::for_terminal(leg));
        }
        return Ok(Exit::Failure);
    }
    Ok(exit)
}

/// report.md: the runs and the verdicts, the legs judged on their own and those that did
/// not measure.
fn report_text(
    runs: &[(String, crate::record::RunResult)],
    merged: Option<&crate::gate::merge::MergedVerdict>,
    alone: &[String],
    failed_legs: &[String],
) -> String {
    let mut text = markdown(runs, merged);
    if !alone.is_empty() {
        text.push_str("\n## Legs judged on their own\n\n");
        for line in alone {
            text.push_str(&format!("- {}\n", crate::untrusted::inline_text(line)));
        }
    }
    if !failed_legs.is_empty() {
        text.push_str("\n## ❌ Legs that did not measure\n\n");
        for leg in failed_legs {
            text.push_str(&format!("- {}\n", crate::untrusted::inline_text(leg)));
        }
    }
    text
}

/// The levels a further wave would measure: none once a leg failed or a level regressed.
fn undecided(merged: Option<&crate::gate::merge::MergedVerdict>, legs_measured: bool) -> Vec<u32> {
    match merged {
        Some(m) if legs_measured && m.outcome != crate::gate::Outcome::Regression => {
            let mut levels: Vec<u32> = (m.checks.iter())
                .flat_map(|c| crate::gate::undecided_levels(&c.verdict))
                .collect();
            levels.sort_unstable();
            levels.dedup();
            levels
        }
        _ => Vec::new(),
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::Verdict;
    use crate::record::{fake, RunResult};

    fn merge_from(dir: &Path, expect: Option<usize>) -> Exit {
        run(MergeArgs {
            results: vec![],
            verdict: vec![],
            from: vec![dir.to_path_buf()],
            out: dir.join("merged"),
            expect,
            waves: 1,
        })
        .unwrap()
    }

    const ID: &str = "00112233445566aa";

    /// A leg folder: `run` as results.json, and a pass verdict with run id `id` when given.
    fn leg(dir: &Path, name: &str, run: RunResult, verdict_id: Option<Option<&str>>) {
        let d = dir.join(name);
        std::fs::create_dir_all(&d).unwrap();
        run.save(&d.join(RESULTS_FILE)).unwrap();
        if let Some(id) = verdict_id {
            let mut v = Verdict::refused("b", "p", None, Default::default(), "");
            v.outcome = crate::gate::Outcome::Pass;
            v.run_id = id.map(str::to_string);
            std::fs::write(d.join(VERDICT_JSON), serde_json::to_string(&v).unwrap()).unwrap();
        }
    }

    fn with_id(mut run: RunResult) -> RunResult {
        run.run_id = Some(ID.into());
        run
    }

    #[test]
    fn a_failed_leg_fails_the_merge() {
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path();
        std::fs::create_dir_all(dir.join("merged")).unwrap();
        leg(dir, "good", fake::run(&[(1, &[100.0, 101.0])]), None);
        assert_eq!(merge_from(dir, None), Exit::Pass);

        let mut stopped = fake::run(&[(1, &[100.0, 101.0])]);
        stopped.complete = false;
        leg(dir, "stopped", stopped, None);
        assert_eq!(merge_from(dir, None), Exit::Failure);
        std::fs::remove_dir_all(dir.join("stopped")).unwrap();

        let mut empty = fake::run(&[(1, &[100.0])]);
        empty.levels[0].trials[0].succeeded = 0;
        empty.levels[0].trials[0].requests_sent = 0;
        leg(dir, "empty", empty, None);
        assert_eq!(merge_from(dir, None), Exit::Failure);
        std::fs::remove_dir_all(dir.join("empty")).unwrap();

        // A ci leg that could not measure: its verdict.md, no verdict.json.
        let refused = dir.join("refused");
        std::fs::create_dir_all(&refused).unwrap();
        std::fs::write(refused.join(VERDICT_MD), "could not measure").unwrap();
        assert_eq!(merge_from(dir, None), Exit::Failure);
        let report = std::fs::read_to_string(dir.join("merged").join(REPORT_MD)).unwrap();
        assert!(report.contains("Legs that did not measure") && report.contains("refused"));
    }

    #[test]
    fn only_a_verdict_beside_its_own_run_counts() {
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path();
        let run = || with_id(fake::run(&[(1, &[100.0, 101.0])]));
        leg(dir, "a", run(), Some(Some(ID)));
        const B: &str = "00112233445566bb";
        let mut b = run();
        b.run_id = Some(B.into());
        leg(dir, "b", b, Some(Some(B)));
        assert_eq!(merge_from(dir, None), Exit::Pass);
        assert_eq!(merge_from(dir, Some(2)), Exit::Pass);
        // The workflow ran three legs: one is missing.
        assert_eq!(merge_from(dir, Some(3)), Exit::Failure);
        // Leg a downloaded twice is one leg: it does not stand in for the missing third.
        leg(dir, "a-again", run(), Some(Some(ID)));
        assert_eq!(merge_from(dir, Some(3)), Exit::Failure);
        assert_eq!(merge_from(dir, Some(2)), Exit::Pass);
        std::fs::remove_dir_all(dir.join("a-again")).unwrap();
        // A leg whose artifact holds only logs.
        std::fs::create_dir_all(dir.join("c")).unwrap();
        std::fs::write(dir.join("c/server.log"), "loading").unwrap();
        assert_eq!(merge_from(dir, None), Exit::Failure);
        assert_eq!(merge_from(dir, Some(3)), Exit::Failure);
        std::fs::remove_dir_all(dir.join("c")).unwrap();
        // A committed "pass" with no run id; one beside another run's results.
        leg(dir, "forged", run(), Some(None));
        assert_eq!(merge_from(dir, None), Exit::Failure);
        std::fs::remove_dir_all(dir.join("forged")).unwrap();
        leg(dir, "mixed", run(), Some(Some("ffffffffffffffff")));
        assert_eq!(merge_from(dir, None), Exit::Failure);
        std::fs::remove_dir_all(dir.join("mixed")).unwrap();
        // A verdict.md of another run beside the verdict.
        std::fs::write(
            dir.join("a").join(VERDICT_MD),
            "<!-- throughline-run: ffffffffffffffff -->",
        )
        .unwrap();
        assert_eq!(merge_from(dir, None), Exit::Failure);
        let report = std::fs::read_to_string(dir.join("merged").join(REPORT_MD)).unwrap();
        assert!(report.contains("not the verdict's run's"), "{report}");
    }
}
