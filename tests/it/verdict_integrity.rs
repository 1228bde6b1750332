//! Issue 47: only the measurement writes the verdict. A pull request controls every file it
//! commits: an output folder in the checkout holding a `verdict.json` that says "pass" (or
//! "regression, accepted"), a `pr-comment.md`, a process record. `ci` clears them before
//! anything else, also when it is then refused, and `merge` counts a verdict only beside the
//! run that measured it (the run id), failing a leg that left no verdict (logs only).
//! Traffic stays on 127.0.0.1.

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::common::*;

/// A git repository with a profile and a baseline blessed from one quick run, the target
/// branch at origin/main.
struct Repo {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

impl Repo {
    fn new(sim: &Sim) -> Repo {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("repo");
        std::fs::create_dir_all(root.join("baselines")).unwrap();
        git(&root, &["init", "-q"]);
        let profile = write_profile(&root.join("baselines"), "gate", &sim.urls, QUICK_BODY);
        let first = dir.path().join("first");
        bench_ok(&profile, &first);
        let o = bless(
            &without_client_flags(&first.join("results.json")),
            &root.join("baselines/gate.toml"),
            &["--profile", "gate.profile.toml"],
        );
        assert_eq!(code(&o), 0, "{}", text(&o));
        commit_as_origin_main(&root, "profile and baseline");
        Repo { _dir: dir, root }
    }

    /// `throughline ci` in the checkout, as the workflow's step runs it, into `out`.
    fn ci(&self, out: &Path, endpoint: &str, outputs: &Path) -> Output {
        let mut cmd = command();
        cmd.current_dir(&self.root)
            .env("GITHUB_ACTIONS", "true")
            .env("GITHUB_OUTPUT", outputs)
            .env_remove("GITHUB_STEP_SUMMARY")
            .args([
                "ci",
                "-b",
                "baselines/gate.toml",
                "--baseline-ref",
                "origin/main",
            ])
            .args([
                "--allow-client-bound",
                "--no-progress",
                "--wait-healthy",
                "0s",
            ])
            .args(["-e", endpoint, "-o"])
            .arg(out);
        cmd.output().unwrap()
    }
}

/// `throughline merge --from FROM -o OUT [extra]`, with its step outputs in `outputs`.
fn merge(from: &Path, out: &Path, outputs: &Path, extra: &[&str]) -> Output {
    let mut cmd = command();
    cmd.env("GITHUB_OUTPUT", outputs)
        .args(["merge", "--from"])
        .arg(from)
        .arg("-o")
        .arg(out)
        .args(extra);
    cmd.output().unwrap()
}

/// A verdict file as a pull request would commit it: a real verdict's shape, edited.
fn forged_verdict(outcome: &str, accepted: bool) -> String {
    let mut v = serde_json::json!({
        "outcome": outcome,
        "baseline_name": "gate",
        "profile_name": "gate",
        "baseline_ref": "origin/main",
        "settings": {},
        "levels": [],
        "worst_ratio": 1.0,
        "warnings": [],
    });
    if accepted {
        v["overridden"] =
            serde_json::json!([{"field": "allow_regression", "value": "true", "was": "false"}]);
    }
    v.to_string()
}

/// 1a, 1b, 2: the output folder sits in the checkout and holds a committed verdict.json
/// (pass; regression accepted) and pr-comment.md; the server never answers, so `ci` exits 2.
/// Once `merge` read the committed file: exit 0, `verdict=pass` (or `accepted=true`), and the
/// comment job posted the pull request's "pass". Now `ci` removes them first and `merge`
/// fails the leg.
#[test]
fn a_committed_verdict_never_passes_a_check_that_did_not_measure() {
    let sim = Sim::start(1, &["--preset", "instant"]);
    let repo = Repo::new(&sim);
    let dead = "http://127.0.0.1:9";
    for (outcome, accepted) in [("pass", false), ("regression", true)] {
        let legs = repo.root.join(format!(".throughline-{outcome}"));
        let out = legs.join("leg");
        std::fs::create_dir_all(&out).unwrap();
        std::fs::write(out.join("verdict.json"), forged_verdict(outcome, accepted)).unwrap();
        std::fs::write(
            out.join("pr-comment.md"),
            "<!-- throughline-verdict -->\n### ✅ throughline: PASS\n",
        )
        .unwrap();
        let outputs = legs.join("outputs.txt");
        let o = repo.ci(&out, dead, &outputs);
        assert_eq!(code(&o), 2, "{}", text(&o));
        assert!(
            !out.join("pr-comment.md").exists(),
            "the committed comment survived a refused ci"
        );
        let merged = legs.join("merged");
        let o = merge(&legs, &merged, &outputs, &[]);
        let said = std::fs::read_to_string(&outputs).unwrap_or_default();
        assert_eq!(code(&o), 2, "{outcome}: {}\n{said}", text(&o));
        assert!(said.contains("verdict=error\n"), "{said}");
        assert!(!said.contains("accepted=true"), "{said}");
        assert!(text(&o).contains("could not measure"), "{}", text(&o));
    }
}

/// 1c: one leg measured and passed; the other's artifact holds only logs (its wait step
/// failed and `ci` was skipped, or the job hit its time limit). Once `merge` dropped it and
/// passed on the other leg; now that leg fails the merge, named, and `--expect` counts legs.
#[test]
fn a_leg_with_only_logs_fails_the_merge() {
    let sim = Sim::start(1, &["--preset", "instant"]);
    let repo = Repo::new(&sim);
    let legs = repo.root.join("legs");
    let outputs = legs.join("outputs.txt");
    let o = repo.ci(&legs.join("a"), &sim.urls[0], &outputs);
    assert!([0, 1].contains(&code(&o)), "{}", text(&o));
    let verdict = read_json(&legs.join("a/verdict.json"));
    let results = read_json(&legs.join("a/results.json"));
    assert!(verdict["run_id"].is_string(), "{verdict}");
    assert_eq!(verdict["run_id"], results["run_id"]);
    let ok = code(&o);
    let o = merge(&legs, &legs.join("merged"), &outputs, &["--expect", "1"]);
    assert_eq!(code(&o), ok, "{}", text(&o));
    // The second leg: logs only.
    std::fs::create_dir_all(legs.join("b/servers")).unwrap();
    std::fs::write(legs.join("b/server.log"), "loading model\n").unwrap();
    let o = merge(&legs, &legs.join("merged"), &outputs, &[]);
    assert_eq!(code(&o), 2, "{}", text(&o));
    assert!(
        text(&o).contains("b: holds no verdict.json"),
        "{}",
        text(&o)
    );
    // A leg whose artifact never arrived: only --expect can tell.
    std::fs::remove_dir_all(legs.join("b")).unwrap();
    let o = merge(&legs, &legs.join("merged"), &outputs, &["--expect", "2"]);
    assert_eq!(code(&o), 2, "{}", text(&o));
    assert!(
        text(&o).contains("--expect 2: 1 leg(s) found"),
        "{}",
        text(&o)
    );
}

/// Item 4: the reusable workflow's `OUT=$GITHUB_WORKSPACE/.throughline/results`, with a
/// committed `.throughline` link: an absolute `-o` was checked for links at its last folder
/// only, and the results, server logs and process record went outside the checkout. Now
/// every folder below the workspace is checked: refused, nothing written there.
#[test]
fn an_absolute_output_under_a_linked_folder_of_the_checkout_is_refused() {
    let sim = Sim::start(1, &["--preset", "instant"]);
    let repo = Repo::new(&sim);
    let elsewhere = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(elsewhere.path(), repo.root.join(".throughline")).unwrap();
    let out = repo.root.join(".throughline/results");
    let outputs = repo.root.join("outputs.txt");
    for workspace in [None, Some(&repo.root)] {
        let mut cmd = command();
        cmd.current_dir(if workspace.is_some() {
            Path::new("/")
        } else {
            repo.root.as_path()
        });
        if let Some(w) = workspace {
            cmd.env("GITHUB_WORKSPACE", w);
        }
        let o = cmd
            .env("GITHUB_OUTPUT", &outputs)
            .args([
                "bench",
                "--no-progress",
                "--no-plots",
                "-e",
                &sim.urls[0],
                "-o",
            ])
            .arg(&out)
            .output()
            .unwrap();
        assert_eq!(code(&o), 2, "{}", text(&o));
        assert!(text(&o).contains("symbolic link"), "{}", text(&o));
        let left: Vec<_> = std::fs::read_dir(elsewhere.path()).unwrap().collect();
        assert!(left.is_empty(), "written through the link: {left:?}");
    }
}

/// Item 7: `--max-duration` bounded only the blocks added after the first look: with a 20 s
/// budget, runs took 97 s (slow answers within the request timeout) and 51 s (a slow start),
/// outliving a job's `timeout-minutes` with no verdict. Now it is one deadline for the whole
/// job: a slow start or a slow first block ends at it (exit 2, said in verdict.md), and a run
/// whose blocks are quick enough concludes from the blocks it finished, with its verdict.
#[test]
fn max_duration_is_one_deadline_for_the_whole_job() {
    let sim = Sim::start(1, &["--preset", "instant"]);
    let repo = Repo::new(&sim);
    let serve = |before: &str, delay: u32| {
        format!(
            "{before}exec {} serve-sim --port {{port}} --preset fixed --token-delay-ms {delay}",
            bin()
        )
    };
    let cases = [
        ("slow-start", serve("sleep 120; ", 1), 2),
        ("slow-answers", serve("", 60), 2),
        ("quick-blocks", serve("", 8), 0),
    ];
    let started = std::time::Instant::now();
    let children: Vec<_> = cases
        .iter()
        .map(|(name, server, _)| {
            let out = repo.root.join(format!("out-{name}"));
            let mut cmd = command();
            cmd.current_dir(&repo.root)
                .env_remove("GITHUB_OUTPUT")
                .env_remove("GITHUB_STEP_SUMMARY")
                .args([
                    "ci",
                    "-b",
                    "baselines/gate.toml",
                    "--baseline-ref",
                    "origin/main",
                ])
                .args(["--allow-client-bound", "--no-progress", "--slots", "0"])
                .args(["--server-command", server, "--base-server-command", server])
                .args(["--server-timeout", "5m", "--max-duration", "20s", "-o"])
                .arg(&out)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped());
            (out, cmd.spawn().unwrap())
        })
        .collect();
    for ((name, _, exit), (out, child)) in cases.iter().zip(children) {
        let o = wait_with_deadline(child, std::time::Duration::from_secs(90), name);
        let took = started.elapsed();
        // 20 s and the stop, the gate and the files; before, 51 s and 97 s.
        assert!(took.as_secs() < 45, "{name}: {took:?}\n{}", text(&o));
        let said = text(&o);
        let verdict_md = std::fs::read_to_string(out.join("verdict.md")).unwrap_or_default();
        match exit {
            2 => {
                assert_eq!(code(&o), 2, "{name}: {said}");
                assert!(said.contains("--max-duration 20s"), "{name}: {said}");
                assert!(
                    verdict_md.contains("could not measure"),
                    "{name}: {verdict_md}"
                );
            }
            _ => {
                assert!([0, 1].contains(&code(&o)), "{name}: {said}");
                let results = read_json(&out.join("results.json"));
                let stopped = results["servers"]["stopped"].as_str().unwrap_or_default();
                assert!(stopped.contains("--max-duration 20s"), "{name}: {stopped}");
                assert!(out.join("verdict.json").is_file(), "{name}: {said}");
            }
        }
    }
}

/// Item 13: `-o .` in a checkout left `.throughline.lock` in the repository's root. The
/// output folder's lock now lives beside the GPU locks: the folder gets only the run's files.
#[test]
fn an_output_folder_gets_no_lock_file() {
    let sim = Sim::start(1, &["--preset", "instant"]);
    let dir = tempfile::tempdir().unwrap();
    let profile = write_profile(dir.path(), "quick", &sim.urls, QUICK_BODY);
    let o = command()
        .current_dir(dir.path())
        .args(["bench", "--no-progress", "--no-plots", "--profile"])
        .arg(&profile)
        .args(["-o", "."])
        .output()
        .unwrap();
    assert_eq!(code(&o), 0, "{}", text(&o));
    assert!(dir.path().join("results.json").is_file());
    assert!(!dir.path().join(".throughline.lock").exists());
}

/// THROUGHLINE_ALLOW_REGRESSION (the action's allow-slowdown) is a yes or a no: a typo is an
/// error before anything runs, never read as a yes that lets a slowdown through (clap's
/// default took every value but a few falsey ones as true).
#[test]
fn an_allow_regression_variable_that_is_not_a_yes_or_no_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let run = |value: &str| {
        command()
            .args([
                "ci",
                "-b",
                "missing.toml",
                "--baseline-ref",
                "main",
                "-o",
                "out",
            ])
            .env("THROUGHLINE_ALLOW_REGRESSION", value)
            .current_dir(dir.path())
            .output()
            .unwrap()
    };
    for typo in ["maybe", "ture", "accepted"] {
        let o = run(typo);
        assert_eq!(code(&o), 2, "{typo}: {}", text(&o));
        assert!(
            text(&o).contains("expected true or false"),
            "{typo}: {}",
            text(&o)
        );
        assert!(!dir.path().join("out").exists(), "{typo}: the check began");
    }
    // A yes, a no and an empty value are read, and the check goes on (to its own error here).
    for fine in ["true", "false", "", "1", "no", "YES"] {
        let o = run(fine);
        assert!(
            !text(&o).contains("expected true or false"),
            "{fine:?}: {}",
            text(&o)
        );
        assert!(
            text(&o).contains("cannot read the baseline"),
            "{fine:?}: {}",
            text(&o)
        );
    }
}
