//! `plan` with output length distributions (issue 17 item 13) and `--cheapest-mix` (item 14),
//! end to end on the seed curve (Qwen3.5-122B on 4x RTX PRO 6000, TP4, one replica).

use std::path::{Path, PathBuf};
use std::process::Output;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
}

fn seed_curve() -> String {
    root()
        .join("fixtures/seeds/rtxpro6000-4x-tp4-qwen3.5-122b.json")
        .display()
        .to_string()
}

fn plan(args: &[&str]) -> Output {
    crate::common::command()
        .arg("plan")
        // The whole plan (each node's details, the notes): what these tests read.
        .arg("-v")
        .args(args)
        .current_dir(std::env::temp_dir())
        .output()
        .expect("the binary runs")
}

fn json(o: &Output) -> serde_json::Value {
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap()
}

fn f(v: &serde_json::Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn run_plan(extra: &[&str]) -> Output {
    let curve = seed_curve();
    let mut args = vec![
        "--results",
        curve.as_str(),
        "--node",
        "rtxpro6000-4x-tp4",
        "--completions",
        "902087",
    ];
    args.extend_from_slice(extra);
    plan(&args)
}

/// Equal lengths of 1,818 tokens: the time-weighted context is 909 (half), and the tail over
/// n slots is 1818 (n/(n+1) - 1/2) token-times of n / (tok/s) seconds each; a lognormal of
/// the same mean and sd 1,200 reads E[L^2]/2E[L] = (1818^2 + 1200^2) / 3636 = 1,305.04.
#[test]
fn a_length_distribution_sets_the_context_and_the_tail() {
    let p = json(&run_plan(&[
        "--output-length",
        "fixed:value=1818",
        "--format",
        "json",
    ]));
    assert_eq!(f(&p["workload"]["avg_output_tokens"]), 1818.0);
    assert_eq!(f(&p["workload"]["output_tokens"]), 902_087.0 * 1818.0);
    let row = &p["nodes"][0];
    assert!((f(&row["roofline"]["context_tokens"]) - 909.0).abs() < 1e-9);
    let n = (f(&row["concurrency_per_replica"]) * f(&row["replicas_per_node"])).round();
    let tok_s = f(&row["tok_s_per_node"]["p50"]);
    let tail = 1818.0 * (n / (n + 1.0) - 0.5) * n / tok_s;
    assert!(
        (f(&row["end_tail_s"]) - tail).abs() < 1e-3 * tail,
        "{} vs {tail}",
        row["end_tail_s"]
    );
    let job = f(&row["job_s"]["p50"]);
    assert!((job - (f(&row["days"]["p50"]) * 86_400.0 + tail)).abs() < 1e-3 * tail);

    let p = json(&run_plan(&[
        "--output-length",
        "lognormal:mean=1818,sd=1200",
        "--format",
        "json",
    ]));
    let row = &p["nodes"][0];
    assert!((f(&row["roofline"]["context_tokens"]) - 1305.04).abs() < 0.01);
    assert!(f(&row["end_tail_s"]) > tail, "a spread lengthens the tail");
    assert_eq!(p["workload"]["output_length"]["distribution"], "lognormal");

    // The seeds' job profile gives the same distribution.
    let profile = root().join("examples/seeds-job.profile.toml");
    let q = json(&run_plan(&[
        "--lengths-from",
        profile.to_str().unwrap(),
        "--format",
        "json",
    ]));
    assert_eq!(
        q["workload"]["output_length"],
        p["workload"]["output_length"]
    );
    assert_eq!(q["nodes"][0]["end_tail_s"], p["nodes"][0]["end_tail_s"]);
}

#[test]
fn length_flags_that_contradict_or_cannot_be_read_exit_2() {
    for (extra, needle) in [
        (
            vec!["--output-length", "lognormal:mean=1818", "--format", "json"],
            "--output-length",
        ),
        (
            vec!["--output-length", "gamma:mean=5,sd=1"],
            "--output-length",
        ),
        (
            vec![
                "--output-length",
                "fixed:value=100",
                "--avg-output-tokens",
                "200",
            ],
            "give one",
        ),
        (
            vec!["--lengths-from", "/nonexistent/profile.toml"],
            "--lengths-from",
        ),
    ] {
        let o = run_plan(&extra);
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(needle), "{extra:?}: {}", stderr(&o));
    }
}

/// A catalog with 3 nodes of the run's type: a 5-day deadline takes all three at P90 (each at
/// the row's P10 throughput), the scaled rows are left out (no P90), and 2 days cannot be met.
#[test]
fn the_cheapest_mix_meets_the_deadline_at_p90_or_says_why_not() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = dir.path().join("catalog.toml");
    let text = std::fs::read_to_string(root().join("fixtures/catalog.toml")).unwrap();
    let text = text.replace(
        "name = \"rtxpro6000-4x-tp4\"\n",
        "name = \"rtxpro6000-4x-tp4\"\navailable = 3\n",
    );
    std::fs::write(&catalog, text).unwrap();
    let cat = catalog.to_str().unwrap();
    let base = [
        "--avg-output-tokens",
        "1818",
        "--catalog",
        cat,
        "--cheapest-mix",
    ];
    let mut args = base.to_vec();
    args.extend(["--deadline", "5d", "--format", "json"]);
    let p = json(&run_plan(&args));
    let row = &p["nodes"][0];
    let mix = &p["mix"];
    assert_eq!(mix["best"]["counts"][0][0], "rtxpro6000-4x-tp4", "{mix}");
    assert_eq!(mix["best"]["counts"][0][1], 3, "{mix}");
    let tokens = 902_087.0 * 1818.0;
    let hours = tokens / (3.0 * f(&row["tok_s_per_node"]["p10"])) / 3600.0;
    assert!(
        (f(&mix["best"]["hours"]) - hours).abs() < 1e-6 * hours,
        "{mix}"
    );
    let usd = hours * 3.0 * f(&row["usd_per_node_hour"]);
    assert!((f(&mix["best"]["usd"]) - usd).abs() < 1e-6 * usd, "{mix}");
    assert!(mix["left_out"][0].as_str().unwrap().contains("P90 unknown"));

    let mut args = base.to_vec();
    args.extend(["--deadline", "5d"]);
    let o = run_plan(&args);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("cheapest mix") && out.contains("3 x rtxpro6000-4x-tp4"),
        "{out}"
    );

    let mut args = base.to_vec();
    args.extend(["--deadline", "2d"]);
    let o = run_plan(&args);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("no mix of the available nodes meets the deadline"),
        "{}",
        stderr(&o)
    );
    // Without a deadline there is nothing to meet.
    let o = run_plan(&base);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}
