//! `throughline bisect` end to end (issue 27): a throwaway git repository of 16 commits whose
//! files set the simulator's speed; one commit makes it 8% slower, and one earlier commit's
//! server does not start. Each step checks a commit out, builds it (a copy of its speed file)
//! and measures its server against the good commit's in a relative run in blocks.

mod common;

use std::path::Path;

use common::*;

/// The index (0-based, after the good commit) of the commit that makes the server slower.
const CULPRIT: usize = 10;
/// A commit whose server fails to start (it is skipped, and the search steps round it).
const BROKEN: usize = 7;

/// Makes the repository: the good commit, then 16 commits; returns their ids, good first.
fn repository(dir: &Path) -> Vec<String> {
    git(dir, &["init", "-q"]);
    let mut ids = Vec::new();
    let commit = |subject: &str, ids: &mut Vec<String>| {
        git(dir, &["add", "-A"]);
        git(dir, &["commit", "-q", "-m", subject]);
        let out = std::process::Command::new("git")
            .args(["rev-parse", "HEAD"])
            .current_dir(dir)
            .output()
            .unwrap();
        ids.push(String::from_utf8_lossy(&out.stdout).trim().to_string());
    };
    std::fs::write(dir.join("slowdown.txt"), "1.00\n").unwrap();
    commit("the good commit", &mut ids);
    for i in 0..16 {
        std::fs::write(dir.join("n.txt"), format!("{i}\n")).unwrap();
        if i == CULPRIT {
            std::fs::write(dir.join("slowdown.txt"), "1.08\n").unwrap();
        }
        if i == BROKEN {
            std::fs::write(dir.join("broken"), "").unwrap();
        } else if dir.join("broken").exists() {
            std::fs::remove_file(dir.join("broken")).unwrap();
        }
        // A subject that would be a workflow command if printed raw.
        let subject = if i == CULPRIT {
            "::warning::halve the KV cache".to_string()
        } else {
            format!("change {i}")
        };
        commit(&subject, &mut ids);
    }
    ids
}

/// The server of a checkout: refuses to start where `broken` exists, else the simulator at
/// the speed its build copied.
fn server_command() -> String {
    format!(
        "if test -e broken; then echo 'cannot load the model' >&2; exit 1; fi; \
         exec {} serve-sim --port {{port}} --preset fixed --token-delay-ms 5 \
         --slowdown $(cat built.txt)",
        bin()
    )
}

const BUILD: &str = "cp slowdown.txt built.txt";

fn profile(dir: &Path) -> std::path::PathBuf {
    write_profile(
        dir,
        "bisect",
        &["http://127.0.0.1:1".to_string()],
        "[workload]\ninput_tokens = 4\nmax_tokens = 12\nignore_eos = true\n[sweep]\n\
         concurrency = [2]\nrequests_per_level = 6\nwarmup_requests = 1\ntrials = 3\n\
         [gate]\nmin_trials = 3\n",
    )
}

fn bisect(repo: &Path, profile: &Path, out: &Path, extra: &[&str]) -> std::process::Output {
    let server = server_command();
    let mut args = vec![
        "bisect",
        "-C",
        repo.to_str().unwrap(),
        "-p",
        profile.to_str().unwrap(),
        "--server-command",
        &server,
        "--build-command",
        BUILD,
        "--slots",
        "0",
        "-o",
        out.to_str().unwrap(),
        // This busy test machine's client is sometimes flagged; the 8% here is far beyond it.
        "--allow-client-bound",
    ];
    args.extend_from_slice(extra);
    run(&args)
}

#[test]
fn finds_the_slower_commit_among_16_and_steps_round_a_broken_one() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    let ids = repository(&repo);
    let profile = profile(tmp.path());
    let out = tmp.path().join("out");

    let o = bisect(
        &repo,
        &profile,
        &out,
        &["--good", &ids[0], "--bad", &ids[16]],
    );
    assert_eq!(code(&o), 0, "{}", text(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(!stdout.lines().any(|l| l.starts_with("::")), "{stdout}");
    let culprit = &ids[1 + CULPRIT];
    assert!(
        stdout.contains(&format!("first slower commit: {culprit}")),
        "{}",
        text(&o)
    );
    let report = read_json(&out.join("bisect.json"));
    assert_eq!(report["answer"]["kind"], "found");
    assert_eq!(report["answer"]["commit"], culprit.as_str());
    assert_eq!(report["commits"], 16);
    let steps = report["steps"].as_array().unwrap();
    // The bad ref confirmed first, then halving; the broken commit skipped with its reason.
    let order: Vec<&str> = steps
        .iter()
        .map(|s| s["commit"].as_str().unwrap())
        .collect();
    let expected: Vec<&str> = [16, 1 + BROKEN, 7, 11, 9, 10]
        .iter()
        .map(|&i| ids[i].as_str())
        .collect();
    assert_eq!(order, expected, "{}", text(&o));
    assert!(steps.len() <= 6, "log2 16 + the bad ref + one retry");
    let broken = &steps[1];
    assert_eq!(broken["outcome"], "skip");
    assert!(
        broken["reason"].as_str().unwrap().contains("not measured"),
        "{broken}"
    );
    for s in steps.iter().filter(|s| s["outcome"] == "bad") {
        let r = s["levels"][0]["ratio"].as_f64().unwrap();
        assert!((0.88..0.96).contains(&r), "an 8% slower commit at {r}: {s}");
    }
    let md = std::fs::read_to_string(out.join("bisect.md")).unwrap();
    assert!(md.contains(&format!("`{culprit}`")), "{md}");
    assert!(!md.lines().any(|l| l.starts_with("::")), "{md}");
    // The checkouts are gone, and git knows no worktree of them.
    assert!(!out.join("worktrees").join(&ids[16][..10]).exists());

    // Run again: every step is read back from the log, nothing is measured.
    let again = bisect(
        &repo,
        &profile,
        &out,
        &["--good", &ids[0], "--bad", &ids[16]],
    );
    assert_eq!(code(&again), 0, "{}", text(&again));
    let said = String::from_utf8_lossy(&again.stdout);
    assert!(said.contains("6 step(s) read back"), "{said}");
    assert!(
        !said.lines().any(|l| l.starts_with("block ")),
        "measured again: {said}"
    );
    assert!(said.contains(&format!("first slower commit: {culprit}")));
}

#[test]
fn one_step_for_git_bisect_run() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    let ids = repository(&repo);
    let profile = profile(tmp.path());
    let out = tmp.path().join("steps");
    let step = |at: usize| {
        git(&repo, &["checkout", "-q", "--detach", &ids[at]]);
        bisect(&repo, &profile, &out, &["--step", "--good", &ids[0]])
    };
    // The broken commit's server does not start: git bisect skips it (125).
    let o = step(1 + BROKEN);
    assert_eq!(code(&o), 125, "{}", text(&o));
    // The slower commit: bad (1), as `git bisect run` reads it.
    let o = step(1 + CULPRIT);
    assert_eq!(code(&o), 1, "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("BAD: regression"));
    // A --bad beside --step is refused by the parser.
    let o = bisect(
        &repo,
        &profile,
        &out,
        &["--step", "--good", &ids[0], "--bad", &ids[3]],
    );
    assert_eq!(code(&o), 2, "{}", text(&o));
}
