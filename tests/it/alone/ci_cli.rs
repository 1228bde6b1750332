//! `throughline ci` end to end, as a GitHub Actions step would run it: a git repository with
//! a profile and a blessed baseline, a real simulator process, the Actions environment
//! variables, and the exit codes for pass, regression and not comparable. Then `merge`,
//! `gate --out` and `plot --baseline` on the files it left.

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::common::*;

/// Small and fast: 2 levels x 5 trials, 16-token outputs at a fixed 5 ms per step (about
/// 4 s an arm). While busy, the simulator's steps end on deadlines counted from the first, so
/// late wake-ups do not add up, and the timed test runs without other tests' processes beside
/// it (`timing_lock`). The gate's minimum effect is 8% so that a busy test machine does not
/// fail the same-speed run, while the 15% slowdown still must.
const BODY: &str = r#"
[workload]
input_tokens = 16
max_tokens = 16
ignore_eos = true
[sweep]
concurrency = [1, 4]
requests_per_level = 8
warmup_requests = 1
trials = 5
request_timeout = "20s"
max_error_rate = 0.0
[gate]
alpha = 0.01
min_effect = 0.08
min_trials = 5
"#;

const SIM: [&str; 4] = ["--preset", "fixed", "--token-delay-ms", "5"];

/// A CI step: the binary in `repo` with a clean environment plus the Actions variables.
struct Step {
    repo: PathBuf,
    summary: PathBuf,
    outputs: PathBuf,
}

impl Step {
    fn run(&self, args: &[&str], base_ref: Option<&str>) -> Output {
        self.run_env(args, base_ref, &[])
    }

    /// [`Step::run`] with more variables, as a workflow step's `env:` gives them.
    fn run_env(&self, args: &[&str], base_ref: Option<&str>, env: &[(&str, &str)]) -> Output {
        let _ = std::fs::remove_file(&self.summary);
        let _ = std::fs::remove_file(&self.outputs);
        let mut cmd = crate::common::command();
        cmd.args(args).current_dir(&self.repo);
        for (k, _) in std::env::vars() {
            if k.starts_with("THROUGHLINE_") || k.starts_with("GITHUB_") || k == "RUNNER_NAME" {
                cmd.env_remove(k);
            }
        }
        cmd.env("GITHUB_ACTIONS", "true")
            .env("GITHUB_STEP_SUMMARY", &self.summary)
            .env("GITHUB_OUTPUT", &self.outputs);
        if let Some(r) = base_ref {
            cmd.env("GITHUB_BASE_REF", r);
        }
        cmd.envs(env.iter().copied());
        cmd.output().expect("run throughline")
    }

    fn summary(&self) -> String {
        std::fs::read_to_string(&self.summary).unwrap_or_default()
    }

    fn outputs(&self) -> String {
        std::fs::read_to_string(&self.outputs).unwrap_or_default()
    }
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn ci_passes_fails_and_refuses_with_the_right_exit_codes_and_reports() {
    let _turn = timing_lock();
    let sim = Sim::start(1, &SIM);
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    std::fs::create_dir_all(repo.join("baselines")).unwrap();
    git(&repo, &["init", "-q"]);
    // The committed profile points nowhere useful: the runner's ports come from --endpoint.
    let profile = write_profile(
        &repo.join("baselines"),
        "gate",
        &["http://127.0.0.1:9".to_string()],
        BODY,
    );
    let step = Step {
        repo: repo.clone(),
        summary: dir.path().join("summary.md"),
        outputs: dir.path().join("outputs.txt"),
    };
    let first = dir.path().join("first");
    let out = step.run(
        &[
            "bench",
            "--profile",
            "baselines/gate.profile.toml",
            "--endpoint",
            &sim.urls[0],
            "--engine-version",
            "1.0",
            "--out",
            first.to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(code(&out), 0, "{}", text(&out));
    let out = step.run(
        &[
            "baseline",
            "bless",
            "--results",
            without_client_flags(&first.join("results.json"))
                .to_str()
                .unwrap(),
            "--baseline",
            "baselines/gate.toml",
            "--profile",
            "gate.profile.toml",
        ],
        None,
    );
    assert_eq!(code(&out), 0, "{}", text(&out));
    commit_as_origin_main(&repo, "profile and baseline");

    // 1. Same speed, relative mode (a second server plays the target branch's): pass. The
    // baseline ref comes from GITHUB_BASE_REF; the pull request's own edit of the profile is
    // not what gets measured, and the check says so.
    let committed = std::fs::read_to_string(&profile).unwrap();
    std::fs::write(
        &profile,
        committed.replace("max_tokens = 16", "max_tokens = 20"),
    )
    .unwrap();
    let pass_dir = dir.path().join("pass");
    let ci = |out_dir: &Path, url: &str, engine_version: &str, extra: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = [
            "ci",
            "--allow-client-bound",
            "--baseline",
            "baselines/gate.toml",
            "--endpoint",
            url,
            "--engine-version",
            engine_version,
            "--wait-healthy",
            "20s",
            "--out",
            out_dir.to_str().unwrap(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };
    let base_sim = Sim::start(1, &SIM);
    let args = ci(
        &pass_dir,
        &sim.urls[0],
        "1.0",
        &["--base-endpoint", &base_sim.urls[0]],
    );
    let out = step.run(
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
        Some("main"),
    );
    assert_eq!(code(&out), 0, "same speed must pass: {}", text(&out));
    let summary = step.summary();
    assert!(
        summary.contains("| C | base (geo. mean) | head (geo. mean) | ratio [bounds] |"),
        "{summary}"
    );
    assert!(
        summary.contains("relative: base and head in one job"),
        "{summary}"
    );
    assert!(summary.contains("`origin/main`"), "{summary}");
    // The summary shows Mermaid charts and names the PNGs; a local path would be a broken image.
    assert!(summary.contains("\nxychart-beta\n"), "{summary}");
    for png in [
        "ratio.png",
        "throughput.png",
        "per_request.png",
        "latency.png",
    ] {
        assert!(summary.contains(&format!("`{png}`")), "{summary}");
        assert!(!summary.contains(&format!("]({png})")), "{summary}");
        assert!(pass_dir.join(png).is_file(), "{png}");
    }
    assert!(pass_dir.join("pr-comment.md").is_file());
    for f in [
        "results.json",
        "requests.jsonl",
        "summary.csv",
        "report.md",
        "verdict.json",
        "verdict.md",
        "junit.xml",
    ] {
        assert!(pass_dir.join(f).is_file(), "{f} missing");
    }
    let outputs = step.outputs();
    assert!(outputs.contains("verdict=pass\n"), "{outputs}");
    assert_eq!(
        read_json(&pass_dir.join("results.json"))["base"]["levels"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    assert!(outputs.contains("worst_ratio="), "{outputs}");
    let said = stdout(&out);
    assert!(
        said.contains("::warning title=throughline::this change edits"),
        "{said}"
    );
    let result = read_json(&pass_dir.join("results.json"));
    assert_eq!(result["profile"]["workload"]["max_tokens"], 16);
    assert_eq!(result["environment"]["engine_version"], "1.0");
    assert_eq!(result["profile"]["target"]["endpoints"][0], sim.urls[0]);
    std::fs::write(&profile, &committed).unwrap();

    // 1b. The same server against the baseline's history of one session: the honest answer
    // is "cannot tell" (exit 0, said loudly), not a pass and not a failure.
    let history_dir = dir.path().join("history");
    let args = ci(
        &history_dir,
        &sim.urls[0],
        "1.0",
        &["--baseline-ref", "main"],
    );
    let out = step.run(&args.iter().map(String::as_str).collect::<Vec<_>>(), None);
    assert_eq!(code(&out), 0, "{}", text(&out));
    assert!(step.outputs().contains("verdict=inconclusive\n"));
    assert!(
        stdout(&out).contains("::warning title=Throughput inconclusive (not a pass)"),
        "{}",
        text(&out)
    );

    // 2. A 15% slower head against the base server in the same job: regression, exit 1, an
    // error annotation. The action's allow-slowdown input left at its default ('false',
    // given by the variable) changes nothing.
    let slow = Sim::start(1, &[SIM[0], SIM[1], SIM[2], SIM[3], "--slowdown", "1.15"]);
    // The slower head gated against the base in one job, the allow-slowdown variable set.
    let slow_job = |out_dir: &std::path::Path, allow: &str| {
        let args = ci(
            out_dir,
            &slow.urls[0],
            "1.0",
            &[
                "--baseline-ref",
                "main",
                "--base-endpoint",
                &base_sim.urls[0],
            ],
        );
        step.run_env(
            &args.iter().map(String::as_str).collect::<Vec<_>>(),
            None,
            &[("THROUGHLINE_ALLOW_REGRESSION", allow)],
        )
    };
    let reg_dir = dir.path().join("regression");
    let out = slow_job(&reg_dir, "false");
    assert_eq!(code(&out), 1, "15% slower must fail: {}", text(&out));
    assert!(
        !step.outputs().contains("accepted=true"),
        "{}",
        step.outputs()
    );
    assert!(!step.summary().contains("accepted as intended"));
    assert!(
        stdout(&out).contains("::error title=Throughput regression::"),
        "{}",
        text(&out)
    );
    // Against the base server of this job, not "against baseline ..." (the file's name).
    assert!(
        stdout(&out).contains("regressed against the base server: C="),
        "{}",
        text(&out)
    );
    assert!(step.outputs().contains("verdict=regression\n"));
    assert!(step.summary().contains("FAIL"), "{}", step.summary());
    let worst: f64 = step
        .outputs()
        .lines()
        .find_map(|l| l.strip_prefix("worst_ratio="))
        .unwrap()
        .parse()
        .unwrap();
    assert!(worst < 0.92, "worst ratio {worst}");

    // 2b. The same slower head, slower on purpose: the action's allow-slowdown input (the
    // pull request's `throughput: intended-slowdown` label) sets the variable. The verdict
    // stays a regression with its size, everywhere; only the exit code and one line differ.
    let accepted_dir = dir.path().join("accepted");
    let out = slow_job(&accepted_dir, "true");
    assert_eq!(code(&out), 0, "accepted as intended: {}", text(&out));
    let accepted = "; accepted as intended (allow-slowdown, --allow-regression): not failed; \
                    bless the target branch's baseline after merging";
    let said = stdout(&out);
    assert!(
        said.contains("::warning title=Throughput regression accepted::"),
        "{said}"
    );
    assert!(
        !said.contains("::error title=Throughput regression::"),
        "{said}"
    );
    assert!(said.contains("REGRESSION: slower at C="), "{said}");
    let outputs = step.outputs();
    assert!(outputs.contains("verdict=regression\n"), "{outputs}");
    assert!(outputs.contains("accepted=true\n"), "{outputs}");
    let worst: f64 = (outputs.lines())
        .find_map(|l| l.strip_prefix("worst_ratio="))
        .unwrap()
        .parse()
        .unwrap();
    assert!(worst < 0.92, "the size is still said: worst ratio {worst}");
    for (name, file) in [
        ("job summary", step.summary()),
        (
            "verdict.md",
            std::fs::read_to_string(accepted_dir.join("verdict.md")).unwrap(),
        ),
        (
            "pr-comment.md",
            std::fs::read_to_string(accepted_dir.join("pr-comment.md")).unwrap(),
        ),
    ] {
        let headline = (file.lines())
            .find(|l| l.contains("REGRESSION: slower at C="))
            .unwrap_or_else(|| panic!("{name}: no headline\n{file}"));
        assert!(headline.ends_with(accepted), "{name}: {headline}");
        // Markdown escapes the underscore in the summary and verdict.md.
        assert!(
            (file.replace('\\', ""))
                .contains("overridden: allow_regression true (baseline: false)"),
            "{name}: {file}"
        );
    }
    let verdict = read_json(&accepted_dir.join("verdict.json"));
    assert_eq!(verdict["outcome"], "regression");
    assert_eq!(
        verdict["overridden"],
        serde_json::json!([{"field": "allow_regression", "value": "true", "was": "false"}])
    );
    // A matrix's merge: the accepted leg alone exits 0 and says so in the outputs; beside the
    // same regression not accepted (the unlabelled leg), the whole still fails.
    let merge = |verdicts: &[&std::path::Path], out: &str| {
        let mut args = vec!["merge".to_string(), "-o".into()];
        args.push(dir.path().join(out).display().to_string());
        for v in verdicts {
            args.extend([
                "--verdict".into(),
                v.join("verdict.json").display().to_string(),
            ]);
        }
        step.run(&args.iter().map(String::as_str).collect::<Vec<_>>(), None)
    };
    let out = merge(&[&accepted_dir], "merged-accepted");
    assert_eq!(code(&out), 0, "{}", text(&out));
    assert!(
        step.outputs().contains("accepted=true\n"),
        "{}",
        step.outputs()
    );
    assert!(stdout(&out).contains("accepted as intended by every regressed check"));
    let out = merge(&[&accepted_dir, &reg_dir], "merged-mixed");
    assert_eq!(code(&out), 1, "{}", text(&out));
    assert!(
        !step.outputs().contains("accepted=true"),
        "{}",
        step.outputs()
    );
    drop(slow);

    // 3. Another engine version: not comparable (exit 3), refused before measuring.
    let other_dir = dir.path().join("other-engine");
    let args = ci(&other_dir, &sim.urls[0], "2.0", &["--baseline-ref", "main"]);
    let out = step.run(&args.iter().map(String::as_str).collect::<Vec<_>>(), None);
    assert_eq!(code(&out), 3, "{}", text(&out));
    assert!(stdout(&out).contains("::error title=Throughput not comparable::"));
    assert!(stdout(&out).contains("engine_version"), "{}", text(&out));
    assert!(step.outputs().contains("verdict=not_comparable\n"));
    assert!(
        step.summary().contains("not comparable"),
        "{}",
        step.summary()
    );
    assert!(!other_dir.join("results.json").exists(), "nothing measured");
    let refused = read_json(&other_dir.join("verdict.json"));
    assert_eq!(refused["outcome"], "not_comparable");

    // 4. The profile edited on the target branch without a new baseline: exit 3.
    std::fs::write(
        &profile,
        committed.replace("max_tokens = 16", "max_tokens = 20"),
    )
    .unwrap();
    git(
        &repo,
        &["commit", "-qam", "edit the profile, forget the baseline"],
    );
    git(&repo, &["update-ref", "refs/remotes/origin/main", "HEAD"]);
    let args = ci(&dir.path().join("edited"), &sim.urls[0], "1.0", &[]);
    let out = step.run(
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
        Some("main"),
    );
    assert_eq!(code(&out), 3, "{}", text(&out));
    assert!(
        text(&out).contains("edited without blessing a new baseline"),
        "{}",
        text(&out)
    );

    // merge: one table per run, the worst verdict wins (regression), exit 1.
    let merged = dir.path().join("merged");
    let s = |p: PathBuf| p.to_str().unwrap().to_string();
    let args = [
        "merge".to_string(),
        "--results".into(),
        s(pass_dir.join("results.json")),
        "--results".into(),
        s(reg_dir.join("results.json")),
        "--verdict".into(),
        s(pass_dir.join("verdict.json")),
        "--verdict".into(),
        s(reg_dir.join("verdict.json")),
        "--verdict".into(),
        s(other_dir.join("verdict.json")),
        "--out".into(),
        s(merged.clone()),
    ];
    let out = step.run(&args.iter().map(String::as_str).collect::<Vec<_>>(), None);
    assert_eq!(code(&out), 1, "{}", text(&out));
    let report = std::fs::read_to_string(merged.join("report.md")).unwrap();
    assert_eq!(report.matches("| C | trials |").count(), 2, "{report}");
    assert!(
        report.contains("REGRESSION (the worst of 3 check(s)"),
        "{report}"
    );
    assert_eq!(
        read_json(&merged.join("verdict.json"))["outcome"],
        "regression"
    );
    assert!(step.outputs().contains("verdict=regression\n"));
    // Without the regression, the refused check decides: exit 3.
    let out = step.run(
        &[
            "merge",
            "--verdict",
            &s(pass_dir.join("verdict.json")),
            "--verdict",
            &s(other_dir.join("verdict.json")),
            "--out",
            &s(merged.clone()),
        ],
        None,
    );
    assert_eq!(code(&out), 3, "{}", text(&out));

    // merge --from: the folder the matrix's artifacts were downloaded to.
    let legs = dir.path().join("legs");
    for (leg, from) in [("a", &pass_dir), ("b", &reg_dir)] {
        std::fs::create_dir_all(legs.join(leg)).unwrap();
        for f in ["results.json", "verdict.json"] {
            std::fs::copy(from.join(f), legs.join(leg).join(f)).unwrap();
        }
    }
    let out = step.run(
        &[
            "merge",
            "--from",
            &s(legs.clone()),
            "--out",
            &s(legs.join("merged")),
        ],
        None,
    );
    assert_eq!(code(&out), 1, "{}", text(&out));
    let report = std::fs::read_to_string(legs.join("merged/report.md")).unwrap();
    assert_eq!(report.matches("| C | trials |").count(), 2, "{report}");
    // Again, with the first merge's output now under the folder: not read back.
    let out = step.run(
        &[
            "merge",
            "--from",
            &s(legs.clone()),
            "--out",
            &s(legs.join("merged")),
        ],
        None,
    );
    assert_eq!(code(&out), 1, "{}", text(&out));

    // gate --out: charts beside the Markdown summary, linked from it.
    let gate_dir = dir.path().join("gate");
    let out = step.run(
        &[
            "gate",
            "--allow-client-bound",
            "--results",
            &s(reg_dir.join("results.json")),
            "--baseline",
            &s(repo.join("baselines/gate.toml")),
            "--out",
            &s(gate_dir.clone()),
            "--markdown",
            &s(gate_dir.join("summary.md")),
        ],
        None,
    );
    assert_eq!(code(&out), 1, "{}", text(&out));
    let md = std::fs::read_to_string(gate_dir.join("summary.md")).unwrap();
    assert!(md.contains("![throughput.png](throughput.png)"), "{md}");
    assert!(gate_dir.join("report.md").is_file());
    assert!(step.summary().contains("throughput.png"));

    // plot --baseline: the baseline's trials drawn beside a run.
    let plot_dir = dir.path().join("plot");
    let out = step.run(
        &[
            "plot",
            "--results",
            &s(pass_dir.join("results.json")),
            "--baseline",
            &s(repo.join("baselines/gate.toml")),
            "--out",
            &s(plot_dir.clone()),
        ],
        None,
    );
    assert_eq!(code(&out), 0, "{}", text(&out));
    assert!(plot_dir.join("throughput.png").is_file());
}

#[test]
fn ci_needs_a_ref_and_a_healthy_server() {
    let _turn = timing_lock();
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().to_path_buf();
    git(&repo, &["init", "-q"]);
    std::fs::create_dir_all(repo.join("baselines")).unwrap();
    let step = Step {
        repo: repo.clone(),
        summary: dir.path().join("summary.md"),
        outputs: dir.path().join("outputs.txt"),
    };
    // Not a pull request and no flag: say what to pass.
    let out = step.run(
        &[
            "ci",
            "--allow-client-bound",
            "--baseline",
            "baselines/x.toml",
        ],
        None,
    );
    assert_eq!(code(&out), 2, "{}", text(&out));
    assert!(text(&out).contains("--baseline-ref"), "{}", text(&out));
    assert!(step.outputs().contains("verdict=error\n"));
    assert!(stdout(&out).contains("::error title=throughline could not measure::"));

    // A baseline whose server never comes up: exit 2 once --wait-healthy has passed.
    write_profile(
        &repo.join("baselines"),
        "x",
        &["http://127.0.0.1:9".to_string()],
        BODY,
    );
    // Only the hash matters here: the check must stop at the health wait, before any run.
    let hash = profile_hash(&repo.join("baselines/x.profile.toml"));
    std::fs::write(
        repo.join("baselines/x.toml"),
        format!(
            "schema_version = 1\nname = \"x\"\nprofile = \"x.profile.toml\"\nprofile_hash = \"{hash}\"\n\
             [environment]\nendpoints = 1\n[gate]\n[[sessions]]\nmeasured_at = \"2026-01-01T00:00:00Z\"\n\
             tool = \"t\"\n[[sessions.levels]]\nconcurrency = 1\ntok_per_s = [1.0, 1.0]\n"
        ),
    )
    .unwrap();
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-qm", "x"]);
    let dead = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    crate::common::share_machine();
    let started = std::time::Instant::now();
    let out = step.run(
        &[
            "ci",
            "--allow-client-bound",
            "--baseline",
            "baselines/x.toml",
            "--baseline-ref",
            "HEAD",
            "--endpoint",
            &format!("http://127.0.0.1:{dead}"),
            "--wait-healthy",
            "1s",
        ],
        None,
    );
    assert_eq!(code(&out), 2, "{}", text(&out));
    assert!(text(&out).contains("not healthy after"), "{}", text(&out));
    assert!(started.elapsed().as_secs() < 15);
    assert!(step.summary().contains("could not measure"));
}

/// The profile's canonical hash, as the library computes it.
fn profile_hash(path: &Path) -> String {
    throughline::profile::Profile::load(path)
        .unwrap()
        .canonical_hash()
        .unwrap()
}

/// Issue 35 item 8: a merged leg whose verdict says `worst_ratio = 1e308` (hand-edited) and a
/// leg that did not measure: `$GITHUB_OUTPUT` gets one `verdict=` line (`error`, as the exit
/// code says) and no 309-digit ratio; the summary says the ratio is not finite, not "+inf%".
#[test]
fn merge_writes_each_output_once_and_only_finite_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let sim = Sim::start(1, &SIM);
    let profile = write_profile(dir.path(), "quick", &sim.urls, QUICK_BODY);
    let run_dir = dir.path().join("run");
    bench_ok(&profile, &run_dir);
    let results = run_dir.join("results.json");
    let baseline = dir.path().join("b.toml");
    let o = bless(&without_client_flags(&results), &baseline, &[]);
    assert_eq!(code(&o), 0, "{}", text(&o));
    let verdict_path = dir.path().join("verdict.json");
    let o = gate(
        &results,
        &baseline,
        &["--json", verdict_path.to_str().unwrap()],
    );
    assert!([0, 1, 3].contains(&code(&o)), "{}", text(&o));
    let mut verdict = read_json(&verdict_path);
    verdict["outcome"] = "inconclusive".into();
    verdict["worst_ratio"] = 1e308.into();
    std::fs::write(&verdict_path, verdict.to_string()).unwrap();
    let mut stopped = read_json(&results);
    stopped["complete"] = false.into();
    let stopped_path = dir.path().join("stopped.json");
    std::fs::write(&stopped_path, stopped.to_string()).unwrap();

    let step = Step {
        repo: dir.path().to_path_buf(),
        summary: dir.path().join("summary.md"),
        outputs: dir.path().join("outputs.txt"),
    };
    let merged = dir.path().join("merged");
    let o = step.run(
        &[
            "merge",
            // The verdict's own run first (a verdict counts only beside it), then the leg
            // that did not measure.
            "--results",
            results.to_str().unwrap(),
            "--results",
            stopped_path.to_str().unwrap(),
            "--verdict",
            verdict_path.to_str().unwrap(),
            "--out",
            merged.to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(code(&o), 2, "{}", text(&o));
    let outputs = step.outputs();
    let keys: Vec<&str> = outputs
        .lines()
        .filter_map(|l| l.split('=').next())
        .collect();
    let mut unique = keys.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(keys.len(), unique.len(), "a key written twice: {outputs}");
    assert!(outputs.contains("verdict=error\n"), "{outputs}");
    for line in outputs.lines() {
        assert!(line.len() < 40, "a long output line: {line}");
        if let Some(r) = line.strip_prefix("worst_ratio=").filter(|r| !r.is_empty()) {
            assert!(r.parse::<f64>().unwrap().is_finite(), "{line}");
        }
    }
    let summary = step.summary();
    assert!(!summary.contains("inf"), "{summary}");
    assert!(!summary.contains("00000000000"), "{summary}");
    assert!(summary.contains("not finite"), "{summary}");
    let report = std::fs::read_to_string(merged.join("report.md")).unwrap();
    assert!(!report.contains("00000000000"), "{report}");
    assert!(!text(&o).contains("00000000000"), "{}", text(&o));
}
