//! The example profiles parse, describe what they say, and run against the simulator at a
//! reduced count.

use crate::common::*;

const SEEDS_JOB: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/examples/seeds-job.profile.toml"
);

/// The seeds' job: 902,087 completions, a mean of 1,818 output tokens (1.64 billion tokens).
#[test]
fn the_seeds_job_describes_its_token_budget() {
    let p = throughline::profile::Profile::load(std::path::Path::new(SEEDS_JOB)).unwrap();
    let (mean, _) = p.workload.output_length.as_ref().unwrap().moments();
    assert_eq!(mean, 1818.0);
    let total = 902_087.0 * mean;
    assert!((total / 1.64e9 - 1.0).abs() < 0.01, "{total}");
}

#[test]
fn the_seeds_job_runs_short_against_the_simulator() {
    let _turn = timing_lock();
    let sim = Sim::start(1, &["--preset", "instant"]);
    let dir = tempfile::tempdir().unwrap();
    let body = std::fs::read_to_string(SEEDS_JOB)
        .unwrap()
        .replace("http://127.0.0.1:30000", &sim.urls[0])
        .replace("concurrency = [16, 32, 64]", "concurrency = [4]")
        .replace("requests_per_level = 256", "requests_per_level = 8")
        .replace("warmup_requests = 8", "warmup_requests = 0")
        .replace("trials = 5", "trials = 1");
    let profile = dir.path().join("short.profile.toml");
    std::fs::write(&profile, body).unwrap();
    let out_dir = dir.path().join("out");
    bench_ok(&profile, &out_dir);
    let lines = read_journal(&out_dir);
    assert_eq!(lines.len(), 8);
    for l in &lines {
        let want = l["requested_output_tokens"].as_u64().unwrap();
        assert!((1..=8192).contains(&want), "{l}");
        assert_eq!(l["output_tokens"].as_u64().unwrap(), want, "{l}");
    }
}
