//! Nothing measured is lost: a new run into a folder that holds an earlier run's files moves
//! them into `<out>/earlier/<that run's started_at>/` before it starts, so `<out>/results.json`
//! is always the newest run (what CI scripts read) and the earlier one stays beside it.
//!
//! The move happens before the new journal is opened; `load/run/bench.rs` still removes whatever
//! derived file is left (record/files.rs `DERIVED_FILES`), so a run killed part way never
//! leaves a complete-looking result of the run before beside a new journal.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::record::files::{DERIVED_FILES, REQUESTS_FILE, RESULTS_FILE};

pub use crate::record::files::EARLIER_DIR;

/// The record of the servers a run started (`runner::processes`), relative to the folder.
const PROCESS_RECORD: &str = super::processes::PROCESSES_FILE;

/// Makes `out` hold nothing this run did not write, before the run does anything else (also
/// when it is then refused): takes the folder's lock, keeps an earlier run's files in
/// `earlier/` (as [`keep_earlier_run`]), and removes what is left that a run derives
/// (`DERIVED_FILES`: a verdict.json, pr-comment.md or report.md without a run beside it,
/// such as a pull request can commit) and the process record (a stale or planted one would
/// be appended to). `merge` and the comment step read only what the run then writes.
/// Returns the names removed, for the caller to say.
pub fn start_fresh(out: &Path) -> Result<Vec<String>> {
    crate::locks::hold_output(out)?;
    if let Some((kept, names)) = keep_earlier_run(out)? {
        println!(
            "the earlier run's files in {} ({}) are kept: moved to {}",
            out.display(),
            names.join(", "),
            kept.display()
        );
    }
    // Never through a linked servers/ (a checkout can commit `servers -> ~/`).
    crate::fsutil::refuse_linked_dir(&out.join("servers"))?;
    let mut removed = Vec::new();
    for name in DERIVED_FILES.iter().chain([&PROCESS_RECORD]) {
        let path = out.join(name);
        if std::fs::symlink_metadata(&path).is_err() {
            continue;
        }
        crate::fsutil::remove_output(&path)?;
        if std::fs::symlink_metadata(&path).is_ok() {
            anyhow::bail!(
                "{} is not a file (a folder or a special file): a run cannot write its {name} \
                 there; remove it, or give the run another output folder",
                path.display()
            );
        }
        removed.push(name.to_string());
    }
    if !removed.is_empty() {
        println!(
            "removed from {} before the run: {} (left there without a run of their own; \
             only what this run writes is read)",
            out.display(),
            removed.join(", ")
        );
    }
    Ok(removed)
}

/// The most of an earlier results.json read to find its start time.
const RESULTS_READ_LIMIT: u64 = 512 << 20;

/// Moves an earlier run's files (its journal, its results and everything derived from them)
/// out of `out` into a new `out/earlier/<stamp>/`, and returns that folder with the names
/// moved; None when `out` holds no earlier run (neither results.json nor requests.jsonl).
pub fn keep_earlier_run(out: &Path) -> Result<Option<(PathBuf, Vec<&'static str>)>> {
    // Files are moved only inside a real output folder, never inside a link's target.
    crate::fsutil::refuse_linked_dir(out)?;
    let present = |name: &str| {
        std::fs::symlink_metadata(out.join(name)).is_ok_and(|m| m.is_file() || m.is_symlink())
    };
    let names: Vec<&'static str> = std::iter::once(REQUESTS_FILE)
        .chain(DERIVED_FILES)
        .filter(|n| present(n))
        .collect();
    if !names.contains(&RESULTS_FILE) && !names.contains(&REQUESTS_FILE) {
        return Ok(None);
    }
    let stamp = started_at(&out.join(RESULTS_FILE))
        .or_else(|| modified(&out.join(REQUESTS_FILE)))
        .or_else(|| modified(&out.join(RESULTS_FILE)))
        .unwrap_or_else(|| "unknown".to_string());
    crate::fsutil::ensure_output_dir(&out.join(EARLIER_DIR))?;
    let dir = free_folder(&out.join(EARLIER_DIR), &filesystem_safe(&stamp));
    std::fs::create_dir_all(&dir)
        .with_context(|| format!("cannot create {} for the earlier run", dir.display()))?;
    for name in &names {
        let (from, to) = (out.join(name), dir.join(name));
        std::fs::rename(&from, &to).with_context(|| {
            format!(
                "cannot move the earlier run's {} to {}",
                from.display(),
                to.display()
            )
        })?;
    }
    Ok(Some((dir, names)))
}

/// The earlier run's `started_at`, when its results.json is readable.
fn started_at(results: &Path) -> Option<String> {
    let text = crate::fsutil::read_bounded(results, RESULTS_READ_LIMIT).ok()?;
    let value: serde_json::Value = serde_json::from_str(&text).ok()?;
    value.get("started_at")?.as_str().map(str::to_string)
}

/// A file's modification time as RFC 3339 (UTC): the stamp of a journal without results.
fn modified(path: &Path) -> Option<String> {
    let time = std::fs::metadata(path).ok()?.modified().ok()?;
    let time = time::OffsetDateTime::from(time);
    time.format(&time::format_description::well_known::Rfc3339)
        .ok()
}

/// A stamp usable as a folder name everywhere (no ':' for Windows and macOS Finder, no '/').
pub fn filesystem_safe(stamp: &str) -> String {
    // At most 64 characters: a folder name has a limit (255 bytes on most file systems), and
    // a stamp from a file may be any length. RFC 3339 with nanoseconds is 35.
    let safe: String = stamp
        .chars()
        .take(64)
        .map(|c| match c {
            'A'..='Z' | 'a'..='z' | '0'..='9' | '-' | '_' | '.' | '+' => c,
            _ => '-',
        })
        .collect();
    match safe.trim_matches('.') {
        "" => "unknown".to_string(),
        s => s.to_string(),
    }
}

/// `parent/name`, or `parent/name-2`, `-3`, ... when that exists already.
fn free_folder(parent: &Path, name: &str) -> PathBuf {
    let first = parent.join(name);
    if std::fs::symlink_metadata(&first).is_err() {
        return first;
    }
    (2u32..)
        .map(|i| parent.join(format!("{name}-{i}")))
        .find(|p| std::fs::symlink_metadata(p).is_err())
        .expect("a free name")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_are_safe_folder_names() {
        assert_eq!(
            filesystem_safe("2026-12-01T16:45:46.123Z"),
            "2026-12-01T16-45-46.123Z"
        );
        assert_eq!(filesystem_safe("../x/y"), "-x-y");
        assert_eq!(filesystem_safe(".."), "unknown");
    }

    #[test]
    fn an_earlier_run_moves_whole_and_twice_the_same_stamp_gets_two_folders() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path();
        assert!(keep_earlier_run(out).unwrap().is_none());
        for round in 0..2 {
            std::fs::write(
                out.join(RESULTS_FILE),
                r#"{"started_at": "2026-12-01T16:45:46Z"}"#,
            )
            .unwrap();
            std::fs::write(out.join(REQUESTS_FILE), format!("{round}\n")).unwrap();
            std::fs::write(out.join("throughput.png"), "png").unwrap();
            std::fs::write(out.join("notes.txt"), "mine").unwrap();
            let (kept, names) = keep_earlier_run(out).unwrap().unwrap();
            let want = match round {
                0 => "2026-12-01T16-45-46Z",
                _ => "2026-12-01T16-45-46Z-2",
            };
            assert_eq!(kept, out.join(EARLIER_DIR).join(want));
            assert_eq!(names, [REQUESTS_FILE, RESULTS_FILE, "throughput.png"]);
            assert_eq!(
                std::fs::read_to_string(kept.join(REQUESTS_FILE)).unwrap(),
                format!("{round}\n")
            );
            assert!(!out.join(RESULTS_FILE).exists() && !out.join("throughput.png").exists());
            // Files that are not a run's stay where they are.
            assert!(out.join("notes.txt").exists());
        }
    }
}
