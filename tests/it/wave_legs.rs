//! The waves of legs (issue 46 item 3): a second wave's leg measures only the levels the
//! first merge left undecided (`ci --levels`), each leg records the commits it compared, and
//! `merge` pools only legs of the same commits, writing the pooled verdict's pull-request
//! comment under its own run id. Real `ci` runs in blocks of the simulator, in a real git
//! repository; traffic stays on 127.0.0.1.

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::common::*;
use crate::crossover_cli::{profile, server};

/// A repository whose target branch (origin/main) holds the profile and a baseline blessed
/// from a run in blocks of the base server against itself.
fn repo(dir: &Path) -> PathBuf {
    let root = dir.join("repo");
    let baselines = root.join("baselines");
    std::fs::create_dir_all(&baselines).unwrap();
    let p = profile(&baselines);
    let first = dir.join("first");
    let o = run_bench_cli(
        &p,
        &first,
        &[
            "--no-progress",
            "--no-plots",
            "--server-command",
            &server(1.0),
            "--slots",
            "0",
            "--blocks",
            "1",
        ],
    );
    assert_eq!(code(&o), 0, "{}", text(&o));
    let o = bless(
        &without_client_flags(&first.join("results.json")),
        &baselines.join("xo.toml"),
        &["--profile", p.file_name().unwrap().to_str().unwrap()],
    );
    assert_eq!(code(&o), 0, "{}", text(&o));
    git(&root, &["init", "-q"]);
    commit_as_origin_main(&root, "profile and baseline");
    root
}

/// `ci` in blocks in the checkout, 2 blocks on the pair `slots`, into `out`.
fn leg(root: &Path, out: &Path, slots: &str, extra: &[&str]) -> Output {
    command()
        .current_dir(root)
        .env_remove("GITHUB_OUTPUT")
        .env_remove("GITHUB_STEP_SUMMARY")
        .args([
            "ci",
            "-b",
            "baselines/xo.toml",
            "--baseline-ref",
            "origin/main",
        ])
        .args(["--allow-client-bound", "--no-progress", "--slots", slots])
        .args(["--server-command", &server(1.0)])
        .args(["--base-server-command", &server(1.0)])
        .args(["--blocks", "2", "--max-blocks", "2"])
        .args(extra)
        .arg("-o")
        .arg(out)
        .output()
        .unwrap()
}

fn merge(from: &Path, out: &Path, outputs: &Path) -> Output {
    command()
        .env("GITHUB_OUTPUT", outputs)
        .env_remove("GITHUB_STEP_SUMMARY")
        .arg("merge")
        .arg("--from")
        .arg(from)
        .args(["--expect", "2", "--waves", "2", "-o"])
        .arg(out)
        .output()
        .unwrap()
}

fn rev_parse(root: &Path, what: &str) -> String {
    let o = std::process::Command::new("git")
        .current_dir(root)
        .args(["rev-parse", what])
        .output()
        .unwrap();
    String::from_utf8(o.stdout).unwrap().trim().to_string()
}

fn blocks_at(verdict: &serde_json::Value, c: u64) -> u64 {
    let levels = verdict["checks"][0]["verdict"]["levels"]
        .as_array()
        .unwrap();
    let level = levels.iter().find(|l| l["concurrency"] == c).unwrap();
    level["test"]["crossover"]["blocks"].as_u64().unwrap()
}

#[test]
fn a_second_waves_legs_measure_the_undecided_levels_and_pool_only_with_their_commits() {
    let dir = tempfile::tempdir().unwrap();
    let root = repo(dir.path());
    let legs = dir.path().join("legs");

    // A level the profile lacks is refused before any server starts.
    let o = leg(&root, &legs.join("x"), "0;1", &["--levels", "9"]);
    assert_eq!(code(&o), 2, "{}", text(&o));
    assert!(
        text(&o).contains("C=9 is not a level of the profile (its levels: 1, 4)"),
        "{}",
        text(&o)
    );
    assert!(!legs.join("x/blocks").exists(), "no block ran");
    std::fs::remove_dir_all(legs.join("x")).ok();

    // The first wave's leg measures every level, the second's only C=4.
    let o = leg(&root, &legs.join("a"), "0;1", &[]);
    assert!(legs.join("a/results.json").is_file(), "{}", text(&o));
    let o = leg(&root, &legs.join("b"), "1;0", &["--levels", "4"]);
    assert!(legs.join("b/results.json").is_file(), "{}", text(&o));
    let (a, b) = (
        read_json(&legs.join("a/results.json")),
        read_json(&legs.join("b/results.json")),
    );
    let concurrency = |r: &serde_json::Value| -> Vec<u64> {
        let levels = r["levels"].as_array().unwrap();
        levels
            .iter()
            .map(|l| l["concurrency"].as_u64().unwrap())
            .collect()
    };
    assert_eq!(concurrency(&a), [1, 4]);
    assert_eq!(concurrency(&b), [4]);
    assert_eq!(b["servers"]["only_levels"], serde_json::json!([4]));
    // On its own it is not the pull request's verdict: at best inconclusive, saying why.
    let own = read_json(&legs.join("b/verdict.json"));
    assert_ne!(own["outcome"], "pass", "{own:#}");
    let warned = own["warnings"][0].as_str().unwrap_or_default();
    assert!(
        warned.starts_with("measured only C=4 of the profile's C=1, C=4"),
        "{own:#}"
    );
    // The whole profile's hash: the leg is of the same comparison.
    assert_eq!(a["profile_hash"], b["profile_hash"]);
    let commits = serde_json::json!({
        "head": rev_parse(&root, "HEAD"),
        "base": rev_parse(&root, "origin/main"),
    });
    assert_eq!(a["servers"]["commits"], commits);
    assert_eq!(b["servers"]["commits"], commits);

    // Pooled: C=4 over both legs' blocks, C=1 over the first's; one comment, the merge's id.
    let merged = dir.path().join("merged");
    let outputs = dir.path().join("outputs");
    let o = merge(&legs, &merged, &outputs);
    assert!([0, 1].contains(&code(&o)), "{}", text(&o));
    let v = read_json(&merged.join("verdict.json"));
    assert_eq!(v["checks"].as_array().unwrap().len(), 1, "{v:#}");
    assert_eq!(blocks_at(&v, 4), 4, "{v:#}");
    assert_eq!(blocks_at(&v, 1), 2, "{v:#}");
    let said = std::fs::read_to_string(&outputs).unwrap();
    let id = (said.lines())
        .find_map(|l| l.strip_prefix("run_id="))
        .unwrap_or_else(|| panic!("no run_id output: {said}"));
    let comment = std::fs::read_to_string(merged.join("pr-comment.md")).unwrap();
    let mut lines = comment.lines();
    assert_eq!(lines.next(), Some("<!-- throughline-verdict -->"));
    assert_eq!(
        lines.next(),
        Some(format!("<!-- throughline-run: {id} -->").as_str())
    );
    assert!(comment.contains("in all over 2 runners"), "{comment}");

    // A leg of a later push (another head commit) is judged on its own, never pooled.
    std::fs::write(root.join("change.txt"), "a later push").unwrap();
    git(&root, &["add", "."]);
    git(&root, &["commit", "-qm", "a later push"]);
    std::fs::remove_dir_all(legs.join("b")).unwrap();
    let o = leg(&root, &legs.join("c"), "1;0", &["--levels", "4"]);
    assert!(legs.join("c/results.json").is_file(), "{}", text(&o));
    let o = merge(&legs, &merged, &outputs);
    let v = read_json(&merged.join("verdict.json"));
    assert_eq!(
        v["checks"].as_array().unwrap().len(),
        2,
        "{v:#}\n{}",
        text(&o)
    );
    assert!(
        text(&o).contains("judged on its own") && text(&o).contains("head commit"),
        "{}",
        text(&o)
    );
}
