//! The plan against reality (issue 17's acceptance test): measure a sweep on the simulator,
//! plan a job of 2,000 completions with lognormal output lengths at concurrency 16, run that
//! job for real, and compare its wall-clock with the plan's predicted time: within 5%.
//!
//! The simulator runs the `fixed` preset (every decode step lasts 5 ms whatever the batch), so
//! its speed is the server's, not this machine's load. The sweep asks 48 tokens (the job's mean) of every
//! request; the job draws its lengths (mean 48, sd 32, seeded) from the same profile the plan
//! reads with `--lengths-from`, so what is planned is what is run. If this test fails, the
//! planner is wrong (the rate, the token total or the end-of-job tail): fix the planner, do
//! not widen the tolerance. Timed (a sweep, then a job measured against it): it runs under
//! `timing_lock`, with no other test's processes beside it (beside them it once read +6%).

use std::path::Path;

use crate::common::{code, run_bench_cli, text, timing_lock, Sim};
use serde_json::Value;

const JOB_COMPLETIONS: u32 = 2000;
const CONCURRENCY: u32 = 16;

fn sweep_profile(url: &str) -> String {
    format!(
        r#"name = "plan-vs-reality-sweep"
[target]
endpoints = ["{url}"]
model = "auto"
api = "chat"
[workload]
input_tokens = 16
max_tokens = 48
ignore_eos = true
[sweep]
concurrency = [1, 4, 8, 16]
requests_per_level = 24
warmup_requests = 0
trials = 2
"#
    )
}

fn job_profile(url: &str) -> String {
    format!(
        r#"name = "plan-vs-reality-job"
[target]
endpoints = ["{url}"]
model = "auto"
api = "chat"
[workload]
input_tokens = 16
max_tokens = 1024
ignore_eos = true
degenerate_below = 1
seed = 7
[workload.output_length]
distribution = "lognormal"
mean = 48
sd = 32
[sweep]
concurrency = [{CONCURRENCY}]
requests_per_level = {JOB_COMPLETIONS}
warmup_requests = 0
trials = 1
"#
    )
}

fn json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn a_planned_job_takes_the_time_the_plan_said() {
    let _turn = timing_lock();
    let sim = Sim::start(1, &["--preset", "fixed", "--token-delay-ms", "5"]);
    let dir = tempfile::tempdir().unwrap();
    let url = &sim.urls[0];

    // 1. Measure the curve.
    let sweep = dir.path().join("sweep.toml");
    std::fs::write(&sweep, sweep_profile(url)).unwrap();
    let sweep_out = dir.path().join("sweep");
    let out = run_bench_cli(&sweep, &sweep_out, &["--no-plots", "--no-progress"]);
    assert_eq!(code(&out), 0, "{}", text(&out));

    // 2. Plan the job from it, at the job's concurrency and lengths.
    let job = dir.path().join("job.toml");
    std::fs::write(&job, job_profile(url)).unwrap();
    let out = crate::common::command()
        .args(["plan", "--results"])
        .arg(sweep_out.join("results.json"))
        .args(["--completions", &JOB_COMPLETIONS.to_string()])
        .arg("--lengths-from")
        .arg(&job)
        .args(["--max-concurrency", &CONCURRENCY.to_string()])
        .args(["--format", "json"])
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", text(&out));
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    let row = &plan["nodes"][0];
    assert_eq!(row["concurrency_per_replica"].as_f64(), Some(16.0), "{row}");
    assert_eq!(plan["workload"]["avg_output_tokens"].as_f64(), Some(48.0));
    let predicted = row["job_s"]["p50"]
        .as_f64()
        .expect("job_s with a distribution");
    let tail = row["end_tail_s"].as_f64().unwrap();
    assert!(tail > 0.0 && tail < 0.1 * predicted, "tail {tail}");

    // 3. Run the job for real: one level at that concurrency, one trial, no warmup.
    let job_out = dir.path().join("job");
    let out = run_bench_cli(&job, &job_out, &["--no-plots", "--no-progress"]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    let result = json(&job_out.join("results.json"));
    let trial = &result["levels"][0]["trials"][0];
    assert_eq!(
        trial["succeeded"].as_u64(),
        Some(u64::from(JOB_COMPLETIONS))
    );
    let measured = trial["window_s"].as_f64().unwrap();

    let error = predicted / measured - 1.0;
    eprintln!(
        "plan vs reality: predicted {predicted:.2} s (tail {tail:.2} s), measured {measured:.2} s \
         ({} output tokens), error {:+.1}%",
        trial["output_tokens"],
        error * 100.0
    );
    assert!(
        error.abs() <= 0.05,
        "predicted {predicted:.2} s, measured {measured:.2} s: {:+.1}%",
        error * 100.0
    );
}
