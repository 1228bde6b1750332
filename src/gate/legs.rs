//! The legs of a merge (one check each, e.g. one per runner of a workflow matrix), found and
//! vouched for before any verdict counts. A verdict counts only when it is the measurement's
//! own: it carries a run id (`record::run_id`), and a verdict that gated levels stands beside
//! the results.json of the same run, complete and measured, with verdict.md and pr-comment.md
//! (where present) naming the same id. Anything else fails its leg, by name: a `verdict.json`
//! committed to the branch, a leg whose artifact holds only logs (its check never ran, or the
//! job hit its time limit), files of two runs mixed in one folder. A leg never disappears
//! from the whole in silence.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use super::merge::Check;
use super::verdict::{Outcome, Verdict};
use crate::record::checks::level_problems;
use crate::record::files::{
    EARLIER_DIR, PR_COMMENT_MD, RESULTS_FILE, VERDICT_FILE_BYTES, VERDICT_JSON, VERDICT_MD,
};
use crate::record::run_id::{from_markdown, is_run_id};
use crate::record::RunResult;

/// What to merge, as the flags name it.
pub struct Inputs<'a> {
    pub results: &'a [PathBuf],
    pub verdicts: &'a [PathBuf],
    pub from: &'a [PathBuf],
    /// The merge's own output folder: never read as a leg.
    pub out: &'a Path,
    /// How many legs the workflow ran (`--expect`): more or fewer fail the merge.
    pub expect: Option<usize>,
}

/// The legs read: the runs for the report, the vouched-for checks, and each leg that
/// cannot count with why (any of these fails the merge, exit 2).
#[derive(Default)]
pub struct Legs {
    pub runs: Vec<(String, RunResult)>,
    pub checks: Vec<Check>,
    pub failed: Vec<String>,
}

/// One leg's files.
#[derive(Default)]
struct Leg {
    /// The folder, or the named file, for messages.
    name: String,
    results: Option<PathBuf>,
    verdict: Option<PathBuf>,
    folder: Option<PathBuf>,
}

/// Finds the legs, reads them and vouches for each verdict.
pub fn read(inputs: &Inputs) -> Result<Legs> {
    let out = inputs.out.canonicalize().ok();
    let mut legs: Vec<Leg> = Vec::new();
    let mut out_legs = Legs::default();
    for dir in inputs.from {
        let (found, empty) = leg_folders(dir, out.as_deref())?;
        if found.is_empty() && empty.is_empty() {
            bail!(
                "--from {}: no results.json or verdict.json in it or its subfolders",
                dir.display()
            );
        }
        legs.extend(found.into_iter().map(|folder| Leg {
            name: folder.display().to_string(),
            results: Some(folder.join(RESULTS_FILE)).filter(|p| p.is_file()),
            verdict: Some(folder.join(VERDICT_JSON)).filter(|p| p.is_file()),
            folder: Some(folder),
        }));
        out_legs.failed.extend(empty);
    }
    // Named files: a verdict with the results beside it (or named with --results, matched
    // by run id below); results named alone are a leg of their own.
    for v in inputs.verdicts {
        let beside = v.with_file_name(RESULTS_FILE);
        legs.push(Leg {
            name: v.display().to_string(),
            results: Some(beside).filter(|p| p.is_file()),
            verdict: Some(v.clone()),
            folder: None,
        });
    }
    let named_results: Vec<PathBuf> = inputs.results.to_vec();
    let same = |a: &Path, b: &Path| match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    };
    for r in &named_results {
        if !legs
            .iter()
            .any(|l| l.results.as_deref().is_some_and(|x| same(x, r)))
        {
            legs.push(Leg {
                name: r.display().to_string(),
                results: Some(r.clone()),
                ..Leg::default()
            });
        }
    }
    if legs.is_empty() && out_legs.failed.is_empty() {
        bail!("nothing to merge: pass --results FILE, --verdict FILE or --from DIR");
    }
    let gated = inputs.expect.is_some() || legs.iter().any(|l| l.verdict.is_some());
    let mut loaded: Vec<(PathBuf, RunResult)> = Vec::new();
    for r in named_results
        .iter()
        .chain(legs.iter().filter_map(|l| l.results.as_ref()))
    {
        if loaded.iter().any(|(p, _)| same(p, r)) {
            continue;
        }
        match RunResult::load(r) {
            Ok(run) => loaded.push((r.clone(), run)),
            Err(e) => out_legs.failed.push(format!("{}: {e:#}", r.display())),
        }
    }
    for leg in &legs {
        let results = leg
            .results
            .as_ref()
            .and_then(|r| loaded.iter().find(|(p, _)| same(p, r)));
        match (&leg.verdict, results) {
            (Some(v), _) => match vouch(leg, v, results, &loaded) {
                Ok(check) => out_legs.checks.push(check),
                Err(why) => out_legs.failed.push(format!("{}: {why}", leg.name)),
            },
            (None, Some((path, run))) => {
                if let Some(why) = leg_failure(run) {
                    out_legs.failed.push(format!("{}: {why}", path.display()));
                } else if gated && leg.folder.is_some() {
                    out_legs.failed.push(format!(
                        "{}: results.json without a verdict.json: the check did not reach a \
                         verdict",
                        leg.name
                    ));
                }
            }
            (None, None) => match &leg.folder {
                Some(folder) if folder.join(VERDICT_MD).is_file() => out_legs.failed.push(format!(
                    "{}: the check could not measure (verdict.md without verdict.json)",
                    leg.name
                )),
                _ => {} // an unreadable results file, said above
            },
        }
    }
    for (path, run) in loaded {
        out_legs.runs.push((path.display().to_string(), run));
    }
    let empty_legs = out_legs
        .failed
        .iter()
        .filter(|f| f.contains(NO_FILES))
        .count();
    if let Some(want) = inputs.expect {
        if let Some(why) = expect_problem(want, &legs, &out_legs.runs, empty_legs) {
            out_legs.failed.push(why);
        }
    }
    Ok(out_legs)
}

/// Whether the legs found are the `want` the workflow ran (`--expect`), counting the folders
/// that left no check among them. One run downloaded into two folders is one leg: counted
/// twice it would stand in for a leg that never uploaded.
fn expect_problem(
    want: usize,
    legs: &[Leg],
    runs: &[(String, RunResult)],
    empty_legs: usize,
) -> Option<String> {
    let run_of = |leg: &Leg| {
        let results = leg.results.as_ref()?.display().to_string();
        let (_, run) = runs.iter().find(|(p, _)| *p == results)?;
        run.run_id.clone()
    };
    let distinct: std::collections::BTreeSet<String> = (legs.iter())
        .map(|l| run_of(l).unwrap_or_else(|| format!("folder {}", l.name)))
        .collect();
    let have = distinct.len() + empty_legs;
    if have == want {
        return None;
    }
    let twice = match distinct.len() < legs.len() {
        true => "; folders holding the same run count once",
        false => "",
    };
    Some(format!(
        "--expect {want}: {have} leg(s) found ({}{twice}): a leg that is missing (its \
         artifact never uploaded) or extra cannot be told from a whole",
        leg_names(legs)
    ))
}

/// Said of a leg folder that holds none of a check's files.
const NO_FILES: &str = "holds no verdict.json, verdict.md or results.json";

fn leg_names(legs: &[Leg]) -> String {
    let names: Vec<&str> = legs.iter().map(|l| l.name.as_str()).collect();
    match names.is_empty() {
        true => "none".into(),
        false => names.join(", "),
    }
}

/// The verdict at `path` as a check, when it is the measurement's own (see the module's
/// doc); else why not.
fn vouch(
    leg: &Leg,
    path: &Path,
    results: Option<&(PathBuf, RunResult)>,
    named: &[(PathBuf, RunResult)],
) -> std::result::Result<Check, String> {
    let text = crate::fsutil::read_bounded(path, VERDICT_FILE_BYTES)
        .map_err(|e| format!("cannot read {}: {e:#}", path.display()))?;
    let verdict: Verdict = serde_json::from_str(&text).map_err(|e| {
        format!(
            "{} is not a throughline verdict (from `throughline ci` or `gate --json`): {e}",
            path.display()
        )
    })?;
    let Some(id) = verdict.run_id.as_deref().filter(|id| is_run_id(id)) else {
        return Err(format!(
            "{} names no run that measured (no run id): a file from the branch or by hand, \
             or from a throughline before 0.1 (gate the run again)",
            path.display()
        ));
    };
    if verdict.outcome != Outcome::NotComparable {
        // A gated verdict stands beside its run: the one named, or the one with its id.
        let run = results
            .filter(|(_, r)| r.run_id.as_deref() == Some(id))
            .or_else(|| named.iter().find(|(_, r)| r.run_id.as_deref() == Some(id)));
        let Some((_, run)) = run else {
            return Err(match results {
                Some((p, r)) => format!(
                    "{} (run {id}) and {} (run {}) are not from the same run",
                    path.display(),
                    p.display(),
                    r.run_id.as_deref().unwrap_or("none")
                ),
                None => format!(
                    "a {} verdict with no results.json of its run (id {id}) beside it or named \
                     with --results",
                    verdict.outcome.word()
                ),
            });
        };
        if let Some(why) = leg_failure(run) {
            return Err(format!("its run {why}"));
        }
    }
    if let Some(folder) = &leg.folder {
        for name in [VERDICT_MD, PR_COMMENT_MD] {
            let file = folder.join(name);
            if !file.is_file() {
                continue;
            }
            let text = crate::fsutil::read_bounded(&file, VERDICT_FILE_BYTES)
                .map_err(|e| format!("cannot read {}: {e:#}", file.display()))?;
            if from_markdown(&text) != Some(id) {
                return Err(format!(
                    "{} is not the verdict's run's (it does not name run {id}): files of \
                     different runs in one folder",
                    file.display()
                ));
            }
        }
    }
    Ok(Check {
        file: path.display().to_string(),
        verdict,
        pooled: Vec::new(),
    })
}

/// Why a leg's run cannot count: stopped, a level that did not measure, nothing measured, or
/// less in its file than its plan measured (a level or a block's trials cut).
pub fn leg_failure(run: &RunResult) -> Option<String> {
    if !run.complete {
        return Some("is marked incomplete (it was stopped)".into());
    }
    let problems = level_problems(&run.levels, run.profile.sweep.max_error_rate);
    if !problems.is_empty() {
        return Some(format!("did not measure: {}", problems.join("; ")));
    }
    if run.levels.iter().all(|l| l.throughputs().is_empty()) {
        return Some("measured nothing".into());
    }
    let missing = crate::record::coverage::coverage_problems(run);
    if !missing.is_empty() {
        return Some(format!(
            "does not hold what its plan measured: {}",
            missing.join("; ")
        ));
    }
    None
}

/// Whether `dir` holds a check's or a run's files itself.
fn is_leg(dir: &Path) -> bool {
    [RESULTS_FILE, VERDICT_JSON, VERDICT_MD]
        .iter()
        .any(|n| dir.join(n).is_file())
}

/// The leg folders of a `--from`: itself when it is one; else each subfolder that is one, or
/// whose subfolders are (the folder a matrix's artifacts were downloaded to). A subfolder
/// holding none is a leg that left no check behind, said with what it does hold. Never the
/// merge's own output folder, never a run's `earlier/`.
fn leg_folders(dir: &Path, out: Option<&Path>) -> Result<(Vec<PathBuf>, Vec<String>)> {
    if is_leg(dir) {
        return Ok((vec![dir.to_path_buf()], Vec::new()));
    }
    let mut found = Vec::new();
    let mut empty = Vec::new();
    for sub in subfolders(dir, out)? {
        if is_leg(&sub) {
            found.push(sub);
            continue;
        }
        let inner: Vec<PathBuf> = subfolders(&sub, out)?
            .into_iter()
            .filter(|d| is_leg(d))
            .collect();
        if inner.is_empty() {
            empty.push(format!(
                "{}: {NO_FILES} (the check did not run or did not finish; it holds: {})",
                sub.display(),
                listing(&sub)
            ));
        }
        found.extend(inner);
    }
    Ok((found, empty))
}

/// The subfolders of `dir`, sorted, without links, `earlier/` and the output folder.
fn subfolders(dir: &Path, out: Option<&Path>) -> Result<Vec<PathBuf>> {
    let entries =
        std::fs::read_dir(dir).with_context(|| format!("cannot read folder {}", dir.display()))?;
    let mut dirs = Vec::new();
    for entry in entries {
        let entry = entry?;
        let path = entry.path();
        let real_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        let skipped = entry.file_name() == EARLIER_DIR
            || (out.is_some() && path.canonicalize().ok().as_deref() == out);
        if real_dir && !skipped {
            dirs.push(path);
        }
    }
    dirs.sort();
    Ok(dirs)
}

/// A folder's file names, a few, for a message ("nothing" when empty).
fn listing(dir: &Path) -> String {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok())
                .map(|e| crate::untrusted::inline_text(&e.file_name().to_string_lossy()))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    match names.len() {
        0 => "nothing".into(),
        n if n > 8 => format!("{} and {} more", names[..8].join(", "), n - 8),
        _ => names.join(", "),
    }
}
