//! API keys: read from the variable the profile names, sent as a bearer token (the simulator
//! checks it), and never written anywhere: not in results, journal, CSV, baseline, plots,
//! report, stdout or stderr, whether the key is right or wrong.

use std::path::Path;
use std::process::Output;

use crate::common::*;

const KEY: &str = "sk-tl-test-Q7f3a9c1e5b2d8";
const WRONG: &str = "sk-tl-wrong-Z9y8x7w6v5u4";

const BODY: &str = r#"api_key_env = "TL_TEST_BENCH_KEY"
[workload]
input_tokens = 4
max_tokens = 10
ignore_eos = true
[sweep]
concurrency = [1, 2]
requests_per_level = 8
warmup_requests = 1
trials = 5
"#;

fn run_env(args: &[&str], key: &str) -> Output {
    crate::common::command()
        .args(args)
        .env("TL_TEST_BENCH_KEY", key)
        .output()
        .unwrap()
}

/// Every file under `dir`, as bytes, must not contain either key.
fn assert_no_key_in_files(dir: &Path) -> usize {
    let mut n = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            n += assert_no_key_in_files(&path);
            continue;
        }
        let bytes = std::fs::read(&path).unwrap();
        for key in [KEY, WRONG] {
            assert!(
                !bytes.windows(key.len()).any(|w| w == key.as_bytes()),
                "the API key leaked into {}",
                path.display()
            );
        }
        n += 1;
    }
    n
}

fn assert_no_key_in_output(out: &Output) {
    let all = text(out);
    assert!(
        !all.contains(KEY) && !all.contains(WRONG),
        "key leaked: {all}"
    );
}

#[test]
fn the_key_is_sent_and_never_written() {
    let sim = Sim::start_env(
        1,
        &[
            "--preset",
            "instant",
            "--require-api-key-env",
            "TL_TEST_SIM_KEY",
        ],
        &[("TL_TEST_SIM_KEY", KEY)],
    );
    let tmp = tempfile::tempdir().unwrap();
    let profile = write_profile(tmp.path(), "secret", &sim.urls, BODY);
    let out_dir = tmp.path().join("out");
    let bench = [
        "bench",
        "--profile",
        profile.to_str().unwrap(),
        "--out",
        out_dir.to_str().unwrap(),
    ];
    let out = run_env(&bench, KEY);
    assert_eq!(code(&out), 0, "{}", text(&out));
    assert_no_key_in_output(&out);
    // The server saw the key on every request (warmup included) and refused none.
    let sent = std::fs::read_to_string(out_dir.join("requests.jsonl"))
        .unwrap()
        .lines()
        .count();
    assert_eq!(sent, 2 * (1 + 5 * 8));
    assert_eq!(
        sim.counter("throughline_sim_authorized_requests_total"),
        sent as f64
    );

    // What is made from the results: a baseline, plots and the Markdown report.
    // (The client's timing is not what is tested here: on a busy machine a few late reads
    // could flag these short trials client-bound, and bless would rightly refuse them.)
    let results = without_client_flags(&out_dir.join("results.json"));
    let baseline = tmp.path().join("baselines").join("secret.toml");
    let out = run_env(
        &[
            "baseline",
            "bless",
            "--commit",
            "abc",
            "--results",
            results.to_str().unwrap(),
            "--baseline",
            baseline.to_str().unwrap(),
        ],
        KEY,
    );
    assert_eq!(code(&out), 0, "{}", text(&out));
    assert_no_key_in_output(&out);
    let plots = tmp.path().join("plots");
    let out = run_env(
        &[
            "plot",
            "--results",
            results.to_str().unwrap(),
            "--out",
            plots.to_str().unwrap(),
        ],
        KEY,
    );
    assert_eq!(code(&out), 0, "{}", text(&out));
    assert_no_key_in_output(&out);
    let out = run_env(
        &[
            "gate",
            "--allow-client-bound",
            "--results",
            results.to_str().unwrap(),
            "--baseline",
            baseline.to_str().unwrap(),
        ],
        KEY,
    );
    // The baseline's one session holds these very figures: inconclusive, exit 0.
    assert_eq!(code(&out), 0, "{}", text(&out));
    assert_no_key_in_output(&out);

    // A wrong key: the probe's GET /v1/models is refused with 401 (like vLLM's --api-key),
    // the run fails up front saying so, and the key is still secret.
    let wrong_dir = tmp.path().join("wrong");
    let bench_wrong = [
        "bench",
        "--profile",
        profile.to_str().unwrap(),
        "--out",
        wrong_dir.to_str().unwrap(),
    ];
    let out = run_env(&bench_wrong, WRONG);
    assert_eq!(code(&out), 2, "{}", text(&out));
    assert_no_key_in_output(&out);
    assert!(text(&out).contains("401"), "{}", text(&out));

    let files = assert_no_key_in_files(tmp.path());
    assert!(files >= 8, "only {files} files checked");
}

#[test]
fn a_missing_key_variable_is_named_not_guessed() {
    let tmp = tempfile::tempdir().unwrap();
    let profile = write_profile(
        tmp.path(),
        "nokey",
        &["http://127.0.0.1:9".to_string()],
        &BODY.replace("TL_TEST_BENCH_KEY", "TL_TEST_UNSET_KEY_VAR"),
    );
    let out = run_bench_cli(&profile, &tmp.path().join("o"), &[]);
    assert_eq!(code(&out), 2, "{}", text(&out));
    assert!(
        text(&out).contains("TL_TEST_UNSET_KEY_VAR"),
        "{}",
        text(&out)
    );
}

/// `ci` against a server that guards `/v1` with a key (vLLM `--api-key`): its health and
/// environment checks send the same key as the load, so it measures and gates (exit 0: the
/// same server against its own one-session baseline) instead of stopping at "401
/// Unauthorized to GET .../v1/models" (exit 2). The fixed 5 ms cadence keeps both runs'
/// throughput within the 25% guard on a busy machine.
#[test]
fn ci_sends_the_key_to_its_checks() {
    let sim = Sim::start_env(
        1,
        &[
            "--preset",
            "fixed",
            "--token-delay-ms",
            "5",
            "--require-api-key-env",
            "TL_TEST_SIM_KEY",
        ],
        &[("TL_TEST_SIM_KEY", KEY)],
    );
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    std::fs::create_dir_all(repo.join("baselines")).unwrap();
    git(&repo, &["init", "-q"]);
    write_profile(&repo.join("baselines"), "keyed", &sim.urls, BODY);
    let in_repo = |args: &[&str]| {
        let mut cmd = crate::common::command();
        cmd.args(args)
            .current_dir(&repo)
            .env("TL_TEST_BENCH_KEY", KEY);
        for (k, _) in std::env::vars() {
            if k.starts_with("THROUGHLINE_") || k.starts_with("GITHUB_") {
                cmd.env_remove(k);
            }
        }
        cmd.output().unwrap()
    };
    let first = dir.path().join("first");
    let out = in_repo(&[
        "bench",
        "--profile",
        "baselines/keyed.profile.toml",
        "--out",
        first.to_str().unwrap(),
    ]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    let results = without_client_flags(&first.join("results.json"));
    let out = in_repo(&[
        "baseline",
        "bless",
        "--results",
        results.to_str().unwrap(),
        "--baseline",
        "baselines/keyed.toml",
        "--profile",
        "keyed.profile.toml",
    ]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-qm", "profile and baseline"]);
    let ci_dir = dir.path().join("ci");
    let out = in_repo(&[
        "ci",
        "--allow-client-bound",
        "--baseline",
        "baselines/keyed.toml",
        "--baseline-ref",
        "HEAD",
        "--endpoint",
        &sim.urls[0],
        "--wait-healthy",
        "20s",
        "--out",
        ci_dir.to_str().unwrap(),
    ]);
    assert_eq!(
        code(&out),
        0,
        "ci with the key must measure and gate: {}",
        text(&out)
    );
    assert!(!text(&out).contains("401"), "{}", text(&out));
    assert_no_key_in_output(&out);
    assert_no_key_in_files(dir.path());
}

/// The profile of docs/github-actions.md section 2, as a user copies it.
fn docs_profile() -> String {
    let docs = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/docs/github-actions.md"
    ))
    .unwrap();
    let section = docs.split("## 2. The profile").nth(1).unwrap();
    let block = section.split("```toml\n").nth(1).unwrap();
    block.split("```").next().unwrap().to_string()
}

#[test]
fn a_401_names_api_key_env_and_the_docs_profile_reads_the_recipes_variable() {
    let sim = Sim::start_env(
        1,
        &[
            "--preset",
            "instant",
            "--require-api-key-env",
            "TL_TEST_SIM_KEY",
        ],
        &[("TL_TEST_SIM_KEY", KEY)],
    );
    let tmp = tempfile::tempdir().unwrap();
    let bench = |profile: &Path, var: &str, key: &str| {
        let out = tmp.path().join("out");
        crate::common::command()
            .args(["bench", "--no-progress", "--no-plots", "--profile"])
            .arg(profile)
            .arg("--out")
            .arg(&out)
            .args(["--concurrency", "1", "--trials", "3", "--max-tokens", "16"])
            .env_remove("TL_TEST_BENCH_KEY")
            .env_remove("VLLM_API_KEY")
            .env(var, key)
            .output()
            .unwrap()
    };
    // No api_key_env in the profile: the 401 says what to write, and where.
    let plain = write_profile(tmp.path(), "nokey", &sim.urls, QUICK_BODY);
    let o = bench(&plain, "UNUSED_VAR", KEY);
    assert_eq!(code(&o), 2, "{}", text(&o));
    assert!(text(&o).contains("401"), "{}", text(&o));
    assert!(text(&o).contains("api_key_env"), "{}", text(&o));
    assert_no_key_in_output(&o);
    // api_key_env naming a variable that is not set: named.
    let unset = write_profile(tmp.path(), "unset", &sim.urls, BODY);
    let o = bench(&unset, "UNUSED_VAR", KEY);
    assert_eq!(code(&o), 2, "{}", text(&o));
    assert!(text(&o).contains("TL_TEST_BENCH_KEY"), "{}", text(&o));

    // The docs' profile reads the variable the docs' recipes set, and runs as copied.
    let recipe = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/docs/workflows/throughput-2gpu.yml"
    ))
    .unwrap();
    assert!(recipe.contains("VLLM_API_KEY: ${{ secrets.VLLM_API_KEY }}"));
    let text_of = docs_profile().replace(
        "endpoints = [\"http://127.0.0.1:8000\"]",
        &format!("endpoints = [\"{}\"]", sim.urls[0]),
    );
    let parsed: toml::Value = toml::from_str(&text_of).unwrap();
    assert_eq!(
        parsed["target"]["api_key_env"].as_str(),
        Some("VLLM_API_KEY")
    );
    let docs = tmp.path().join("docs.profile.toml");
    std::fs::write(&docs, text_of).unwrap();
    let o = bench(&docs, "VLLM_API_KEY", KEY);
    assert_eq!(code(&o), 0, "{}", text(&o));
    assert_no_key_in_output(&o);
}
