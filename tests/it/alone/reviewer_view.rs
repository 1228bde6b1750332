//! What a reviewer sees of a check in GitHub Actions (issue 50): the annotations, the job
//! summary's heading and the pull-request comment's, for a pass, an inconclusive history
//! check and a regression let through on purpose. Each runs the binary with the Actions
//! variables against simulator processes.

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::common::*;

/// One level, 5 trials of 8 short requests at a fixed cadence (about a second an arm).
const BODY: &str = r#"
[workload]
input_tokens = 8
max_tokens = 12
ignore_eos = true
[sweep]
concurrency = [2]
requests_per_level = 8
warmup_requests = 1
trials = 5
request_timeout = "20s"
[gate]
min_effect = 0.08
min_trials = 5
"#;

const SIM: [&str; 4] = ["--preset", "fixed", "--token-delay-ms", "4"];

/// The files a step writes for GitHub: its job summary and its outputs.
struct Actions {
    summary: PathBuf,
    outputs: PathBuf,
}

impl Actions {
    fn new(dir: &Path) -> Actions {
        Actions {
            summary: dir.join("summary.md"),
            outputs: dir.join("outputs.txt"),
        }
    }

    /// The binary with `args` in `cwd`, inside Actions (nothing of the test's own GITHUB_
    /// or THROUGHLINE_ variables).
    fn run(&self, cwd: &Path, args: &[&str]) -> Output {
        let _ = std::fs::remove_file(&self.summary);
        let _ = std::fs::remove_file(&self.outputs);
        let mut cmd = command();
        for (k, _) in std::env::vars() {
            if k.starts_with("GITHUB_") || k == "THROUGHLINE_ALLOW_REGRESSION" {
                cmd.env_remove(k);
            }
        }
        cmd.args(args)
            .current_dir(cwd)
            .env("GITHUB_ACTIONS", "true")
            .env("GITHUB_STEP_SUMMARY", &self.summary)
            .env("GITHUB_OUTPUT", &self.outputs)
            .output()
            .expect("run throughline")
    }

    fn summary(&self) -> String {
        std::fs::read_to_string(&self.summary).unwrap_or_default()
    }

    fn outputs(&self) -> String {
        std::fs::read_to_string(&self.outputs).unwrap_or_default()
    }
}

/// The workflow commands (`::warning ...`, `::error ...`) a step printed.
fn annotations(o: &Output) -> Vec<String> {
    [&o.stdout, &o.stderr]
        .iter()
        .flat_map(|s| {
            String::from_utf8_lossy(s)
                .into_owned()
                .lines()
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .filter(|l| {
            l.starts_with("::warning") || l.starts_with("::error") || l.starts_with("::notice")
        })
        .collect()
}

/// A repository whose main holds the profile and a baseline of one session blessed from
/// `base`, as a team has on its first day.
fn repository(dir: &Path, base: &Sim) -> PathBuf {
    let repo = dir.join("repo");
    let baselines = repo.join("baselines");
    std::fs::create_dir_all(&baselines).unwrap();
    let profile = write_profile(&baselines, "quick", &base.urls, BODY);
    let first = dir.join("first");
    bench_ok(&profile, &first);
    let results = without_client_flags(&first.join("results.json"));
    let o = bless(
        &results,
        &baselines.join("quick.toml"),
        &["--profile", "quick.profile.toml"],
    );
    assert_eq!(code(&o), 0, "{}", text(&o));
    git(&repo, &["init", "-q"]);
    commit_as_origin_main(&repo, "profile and baseline");
    repo
}

/// Issue 50 item 3: `ci` without a base (history mode) on an 8% slower head against a
/// baseline of one session is INCONCLUSIVE and exits 0; where a reviewer looks (the
/// annotation's title, the job summary's heading, the comment's heading) it must not look
/// like a pass, and the title says that this baseline cannot catch a 10% drop.
#[test]
fn an_inconclusive_history_check_does_not_look_like_a_pass() {
    let _turn = timing_lock();
    let dir = tempfile::tempdir().unwrap();
    let base = Sim::start(1, &SIM);
    let repo = repository(dir.path(), &base);
    let head = Sim::start(1, &[SIM[0], SIM[1], SIM[2], SIM[3], "--slowdown", "1.08"]);
    let actions = Actions::new(dir.path());
    let out = dir.path().join("out");
    let o = actions.run(
        &repo,
        &[
            "ci",
            "--allow-client-bound",
            "--baseline",
            "baselines/quick.toml",
            "--baseline-ref",
            "origin/main",
            "--endpoint",
            &head.urls[0],
            "--wait-healthy",
            "20s",
            "--out",
            out.to_str().unwrap(),
        ],
    );
    assert_eq!(code(&o), 0, "{}", text(&o));
    assert!(
        actions.outputs().contains("verdict=inconclusive\n"),
        "{}",
        actions.outputs()
    );
    let said = annotations(&o);
    let title = said
        .iter()
        .find(|a| a.starts_with("::warning title=Throughput inconclusive"))
        .unwrap_or_else(|| panic!("no inconclusive annotation: {said:?}"));
    // In a title GitHub reads % as an escape: 10% is written 10%25.
    assert!(
        title.contains("not a pass") && title.contains("cannot catch a 10%25 drop"),
        "{title}"
    );
    let summary = actions.summary();
    let heading = summary.lines().find(|l| l.starts_with("## ")).unwrap();
    assert!(
        !heading.contains('✅') && !heading.contains('❔'),
        "{heading}"
    );
    assert!(heading.contains("INCONCLUSIVE (not a pass)"), "{heading}");
    assert!(heading.contains("cannot catch a 10% drop"), "{heading}");
    let comment = std::fs::read_to_string(out.join("pr-comment.md")).unwrap();
    let first = comment.lines().find(|l| !l.starts_with("<!--")).unwrap();
    assert!(
        first.starts_with("### ") && first.contains("INCONCLUSIVE (not a pass)"),
        "{first}"
    );
    assert!(first.contains("cannot catch a 10% drop"), "{first}");
}

/// Issue 50 item 5: an ordinary passing `ci` in blocks (both servers started by throughline,
/// slots swapped) says in annotations only what a reviewer must act on: the sequential plan,
/// why the blocks stopped and the client's notes are information, in the summary, and the
/// step shows at most 2 annotations.
#[test]
fn a_passing_check_in_blocks_makes_at_most_two_annotations() {
    let _turn = timing_lock();
    let dir = tempfile::tempdir().unwrap();
    let base = Sim::start(1, &SIM);
    let repo = repository(dir.path(), &base);
    drop(base);
    let server = format!(
        "exec {} serve-sim --port {{port}} --preset fixed --token-delay-ms 4",
        bin()
    );
    let actions = Actions::new(dir.path());
    let out = dir.path().join("out");
    let o = actions.run(
        &repo,
        &[
            "ci",
            "--allow-client-bound",
            "--baseline",
            "baselines/quick.toml",
            "--baseline-ref",
            "origin/main",
            "--server-command",
            &server,
            "--base-server-command",
            &server,
            "--slots",
            "0;1",
            "--out",
            out.to_str().unwrap(),
        ],
    );
    assert_eq!(code(&o), 0, "{}", text(&o));
    let outputs = actions.outputs();
    assert!(
        outputs.contains("verdict=pass\n") || outputs.contains("verdict=inconclusive\n"),
        "{outputs}"
    );
    let said = annotations(&o);
    assert!(said.len() <= 2, "{said:#?}");
    for a in &said {
        for info in ["sequential:", "blocks:", "trials client-bound", "client: "] {
            assert!(!a.contains(info), "information as an annotation: {a}");
        }
    }
    // Still said, in the summary and the console.
    let summary = actions.summary();
    assert!(summary.contains("sequential: up to"), "{summary}");
    assert!(summary.contains("stopped: "), "{summary}");
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("sequential: up to"),
        "{}",
        text(&o)
    );
}

/// Issue 50 item 2: a saved run that regressed, gated again with `gate --allow-regression`
/// as `ci --allow-regression` would have: reported as a regression (verdict, outputs,
/// headline) with `accepted=true`, and exit 0; without the flag, exit 1.
#[test]
fn gate_allow_regression_lets_a_saved_regression_through_as_ci_does() {
    let _turn = timing_lock();
    let dir = tempfile::tempdir().unwrap();
    let base = Sim::start(1, &SIM);
    let slow = Sim::start(1, &[SIM[0], SIM[1], SIM[2], SIM[3], "--slowdown", "1.4"]);
    let profile = write_profile(dir.path(), "ab", &slow.urls, BODY);
    let run = dir.path().join("run");
    let o = run_bench_cli(
        &profile,
        &run,
        &["--no-progress", "--base-endpoint", &base.urls[0]],
    );
    assert_eq!(code(&o), 0, "{}", text(&o));
    let results = run.join("results.json");
    let actions = Actions::new(dir.path());
    let gate = |extra: &[&str]| {
        let mut args = vec![
            "gate",
            "--allow-client-bound",
            "--results",
            results.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        actions.run(dir.path(), &args)
    };
    let o = gate(&[]);
    assert_eq!(code(&o), 1, "40% slower must fail: {}", text(&o));
    assert!(
        !actions.outputs().contains("accepted=true"),
        "{}",
        actions.outputs()
    );

    let o = gate(&["--allow-regression"]);
    assert_eq!(code(&o), 0, "accepted as intended: {}", text(&o));
    let outputs = actions.outputs();
    assert!(outputs.contains("verdict=regression\n"), "{outputs}");
    assert!(outputs.contains("accepted=true\n"), "{outputs}");
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("REGRESSION: slower at C=2"), "{stdout}");
    assert!(stdout.contains("accepted as intended"), "{stdout}");
    assert!(
        stdout.contains("::warning title=Throughput regression accepted::"),
        "{stdout}"
    );
    assert!(stdout.contains("allow_regression true"), "{stdout}");
}
