//! `throughline trend` end to end: a baseline file committed session by session in a real
//! git repository, its window dropping old sessions from the file; the history is read back
//! from git, drawn, and a lasting slowdown fails the check (exit 1).

use std::fmt::Write;
use std::path::Path;

use crate::common::{code, git, read_json, run, text};

/// A baseline file holding `sessions` (day, tok/s at C=1, tok/s at C=8), the last `window`.
fn baseline_text(sessions: &[(u32, f64, f64)], window: usize) -> String {
    let mut t = String::from(
        "schema_version = 1\nname = \"trend-test\"\nprofile_hash = \"sha256:abc\"\n\n\
         [environment]\nengine = \"throughline-sim\"\nendpoints = 1\n\n\
         [gate]\nalpha = 0.01\nmin_effect = 0.03\nmin_trials = 3\n",
    );
    let start = sessions.len().saturating_sub(window);
    for (day, c1, c8) in &sessions[start..] {
        let _ = write!(
            t,
            "\n[[sessions]]\nmeasured_at = \"2026-10-{day:02}T03:00:00Z\"\n\
             commit = \"{day:040}\"\ntool = \"throughline test\"\n"
        );
        for (c, v) in [(1, c1), (8, c8)] {
            let _ = write!(
                t,
                "\n[[sessions.levels]]\nconcurrency = {c}\n\
                 tok_per_s = [{}, {}, {}]\n",
                v * 0.995,
                v,
                v * 1.005
            );
        }
    }
    t
}

/// Commits the baseline once per session, as a nightly bless on main would.
fn history_repo(dir: &Path, c8_after_drop: f64) -> std::path::PathBuf {
    git(dir, &["init", "-q"]);
    let file = dir.join("baseline.toml");
    let wobble = [1.0, 1.008, 0.993, 1.004, 0.996];
    let mut sessions = Vec::new();
    for day in 1..=24u32 {
        let w = wobble[day as usize % 5];
        let c8 = if day >= 13 { c8_after_drop } else { 1000.0 };
        sessions.push((day, 26.5 * w, c8 * w));
        std::fs::write(&file, baseline_text(&sessions, 8)).unwrap();
        git(dir, &["add", "."]);
        git(dir, &["commit", "-qm", &format!("bless day {day}")]);
    }
    file
}

#[test]
fn a_lasting_slowdown_in_the_git_history_fails_and_is_drawn() {
    let dir = tempfile::tempdir().unwrap();
    let file = history_repo(dir.path(), 940.0);
    let out = dir.path().join("trend");
    let o = run(&[
        "trend",
        "--baseline",
        file.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    let t = text(&o);
    assert_eq!(code(&o), 1, "{t}");
    assert!(
        t.contains("24 sessions from the file and 24 committed version(s)"),
        "{t}"
    );
    assert!(
        t.contains("TREND SLOWER: C=8 is 6.0% slower since 2026-10-13T03:00:00Z"),
        "{t}"
    );
    // The change lies between the last session before the drop (day 12) and the first
    // after it (day 13): the bisect command for that range is printed, and in trend.md.
    let command = format!("throughline bisect --good {:040} --bad {:040}", 12, 13);
    assert!(t.contains(&command), "{t}");
    let json = read_json(&out.join("trend.json"));
    assert_eq!(json["sessions"], 24);
    let shift = &json["levels"][1]["shifts"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(shift["before_commit"], format!("{:040}", 12));
    assert_eq!(shift["commit"], format!("{:040}", 13));
    let levels = json["levels"].as_array().unwrap();
    assert_eq!(levels[0]["concurrency"], 1);
    assert_eq!(levels[0]["slower"], false);
    assert_eq!(levels[1]["slower"], true);
    let md = std::fs::read_to_string(out.join("trend.md")).unwrap();
    assert!(md.contains("| 8 | 24 |"), "{md}");
    assert!(md.contains("![throughput trend](trend.png)"), "{md}");
    assert!(
        md.contains("## Which commit?") && md.contains(&command),
        "{md}"
    );
    let png = std::fs::read(out.join("trend.png")).unwrap();
    assert_eq!(&png[1..4], b"PNG");

    // Without git only the file's window of 8 sessions is read: too few after the drop to
    // place a shift, so the answer is "no lasting slowdown" over what it saw.
    let o = run(&[
        "trend",
        "--baseline",
        file.to_str().unwrap(),
        "--no-git",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code(&o), 0, "{}", text(&o));
    assert!(
        text(&o).contains("8 sessions from the file;"),
        "{}",
        text(&o)
    );
}

#[test]
fn an_unchanged_history_passes() {
    let dir = tempfile::tempdir().unwrap();
    let file = history_repo(dir.path(), 1000.0);
    let out = dir.path().join("trend");
    let o = run(&[
        "trend",
        "-b",
        file.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    let t = text(&o);
    assert_eq!(code(&o), 0, "{t}");
    assert!(
        t.contains("TREND OK: no lasting slowdown of 3% or more over 24 sessions"),
        "{t}"
    );
}

#[test]
fn a_broken_baseline_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("baseline.toml");
    std::fs::write(&file, "schema_version = 1\nname = \n").unwrap();
    let o = run(&["trend", "-b", file.to_str().unwrap(), "--no-git"]);
    assert_eq!(code(&o), 2, "{}", text(&o));
    assert!(text(&o).contains("baseline.toml"), "{}", text(&o));
}
