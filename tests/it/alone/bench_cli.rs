//! `throughline bench` end to end: the real binary against a real simulator process.

use crate::common::*;

const SMALL: &str = r#"
[workload]
input_tokens = 16
max_tokens = 24
ignore_eos = true
[sweep]
concurrency = [1, 6]
requests_per_level = 12
warmup_requests = 2
trials = 2
request_timeout = "20s"
"#;

#[test]
fn every_request_is_accounted_for_across_two_replicas() {
    let _turn = timing_lock();
    let sim = Sim::start(2, &["--preset", "fast"]);
    let dir = tempfile::tempdir().unwrap();
    let profile = write_profile(dir.path(), "two", &sim.urls, SMALL);
    let out_dir = dir.path().join("out");
    let out = run_bench_cli(&profile, &out_dir, &[]);
    assert_eq!(code(&out), 0, "{}", text(&out));

    let result = read_json(&out_dir.join("results.json"));
    assert_eq!(result["schema_version"], 2);
    assert_eq!(result["environment"]["engine"], "throughline-sim");
    assert_eq!(result["environment"]["endpoints"], 2);
    let mut counted_tokens = 0u64;
    for level in result["levels"].as_array().unwrap() {
        for t in level["trials"].as_array().unwrap() {
            let failed: u64 = t["failed"]
                .as_object()
                .unwrap()
                .values()
                .map(|v| v.as_u64().unwrap())
                .sum();
            assert_eq!(t["requests_sent"], 12);
            assert_eq!(t["succeeded"].as_u64().unwrap() + failed, 12);
            assert_eq!(
                t["output_tokens"],
                12 * 24,
                "ignore_eos gives max_tokens each"
            );
            let tps = t["output_tok_per_s"].as_f64().unwrap();
            let expect = t["output_tokens"].as_f64().unwrap() / t["window_s"].as_f64().unwrap();
            assert!((tps - expect).abs() < 1e-6 * expect);
            assert!(t["ttft_ms"]["p50"].as_f64().unwrap() > 0.0);
            assert!(t["itl_ms"]["count"].as_u64().unwrap() == 12 * 23);
        }
    }

    // One JSONL line per request sent, warmup included; both endpoints used.
    let lines = read_journal(&out_dir);
    assert_eq!(lines.len(), 2 * (2 + 2 * 12));
    assert!(lines.iter().any(|l| l["endpoint"] == 0) && lines.iter().any(|l| l["endpoint"] == 1));
    for l in &lines {
        assert!(l["error"].is_null(), "{l}");
        counted_tokens += l["output_tokens"].as_u64().unwrap();
    }
    // The client's token count equals the server's own counter.
    assert_eq!(
        counted_tokens as f64,
        sim.counter("throughline_sim_generation_tokens_total")
    );

    let csv = std::fs::read_to_string(out_dir.join("summary.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 4);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("agg tok/s"), "{stdout}");
}

/// A level opens its connections before its first request, and its workers keep them:
/// 16 workers sending 2 x 64 requests open 16 connections, not one per request, and no
/// request waits for a connection of its own. The simulator counts what it accepted: the
/// probe, the telemetry scrapes and this test's own request add 3 (19 in every run
/// measured; hyper-util's pool, used before, gave 19-23, and 46 when the end of each body
/// was read in a task of its own).
#[test]
fn a_level_opens_its_connections_once_and_keeps_them() {
    let _turn = timing_lock();
    let sim = Sim::start(1, &["--preset", "fast"]);
    let dir = tempfile::tempdir().unwrap();
    let rest = r#"
[workload]
input_tokens = 16
max_tokens = 16
ignore_eos = true
[sweep]
concurrency = [16]
requests_per_level = 64
trials = 2
request_timeout = "20s"
"#;
    let profile = write_profile(dir.path(), "reuse", &sim.urls, rest);
    let out_dir = dir.path().join("out");
    let out = run_bench_cli(&profile, &out_dir, &["--no-plots"]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    let journal = read_journal(&out_dir);
    assert_eq!(journal.len(), 128);
    let mut after_another = 0;
    for r in &journal {
        assert!(r.get("new_connection").is_none(), "{r}");
        let send_delay = r["send_delay_ms"].as_f64().unwrap();
        assert!(send_delay >= 0.0, "{r}");
        // A worker's later requests: held from its previous response's end, which includes
        // the send delay.
        if let Some(idle) = r.get("idle_before_ms").and_then(|v| v.as_f64()) {
            assert!(idle >= send_delay - 1e-6, "{r}");
            after_another += 1;
        }
    }
    // Every request but each worker's first of each trial.
    assert_eq!(after_another, 128 - 2 * 16);
    let connections: u64 = http_get(&format!("{}/sim/connections", sim.urls[0]))
        .trim()
        .parse()
        .unwrap();
    // The probe's and the scrapes' clients are reqwest's: allow them a second connection.
    assert!(
        (16 + 3..=16 + 5).contains(&connections),
        "{connections} connections for 16 workers"
    );
}

#[test]
fn a_server_that_is_not_there_exits_2_and_says_why() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let dir = tempfile::tempdir().unwrap();
    let profile = write_profile(
        dir.path(),
        "gone",
        &[format!("http://127.0.0.1:{port}")],
        SMALL,
    );
    let out = run_bench_cli(&profile, &dir.path().join("o"), &[]);
    assert_eq!(code(&out), 2, "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot reach the server") && err.to_lowercase().contains("refused"),
        "{err}"
    );
}

#[test]
fn a_malformed_profile_exits_2_naming_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let profile = write_profile(
        dir.path(),
        "bad",
        &["http://127.0.0.1:9".into()],
        &SMALL.replace("trials = 2", "trials = -2"),
    );
    let out = run(&["bench", "--profile", profile.to_str().unwrap()]);
    assert_eq!(code(&out), 2, "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad.profile.toml") && err.contains("line 13") && err.contains("trials"),
        "{err}"
    );

    let profile = write_profile(
        dir.path(),
        "bad2",
        &["http://127.0.0.1:9".into()],
        &SMALL.replace("concurrency = [1, 6]", "concurrency = []"),
    );
    let out = run(&["bench", "--profile", profile.to_str().unwrap()]);
    assert_eq!(code(&out), 2);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("line 10") && err.contains("sweep.concurrency"),
        "{err}"
    );
}

#[test]
fn multi_token_chunks_are_counted_as_tokens() {
    let _turn = timing_lock();
    // The 122B preset runs MTP: a step sends up to 3 tokens in one chunk.
    let sim = Sim::start(1, &["--preset", "rtxpro6000x4-qwen122b"]);
    let dir = tempfile::tempdir().unwrap();
    let rest = SMALL
        .replace("concurrency = [1, 6]", "concurrency = [4]")
        .replace("requests_per_level = 12", "requests_per_level = 4")
        .replace("trials = 2", "trials = 1")
        .replace("warmup_requests = 2", "warmup_requests = 0");
    let profile = write_profile(dir.path(), "mtp", &sim.urls, &rest);
    let out_dir = dir.path().join("out");
    let out = run_bench_cli(&profile, &out_dir, &[]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    for l in read_journal(&out_dir) {
        assert_eq!(l["output_tokens"], 24);
        assert!(
            l["chunks"].as_u64().unwrap() < 24,
            "MTP chunks carry several tokens: {l}"
        );
        assert_eq!(l["token_source"], "usage");
    }
    let result = read_json(&out_dir.join("results.json"));
    let t = &result["levels"][0]["trials"][0];
    // Per-token ITL: one gap per token after the first, not one per chunk.
    assert_eq!(t["itl_ms"]["count"], 4 * 23);
    // Mean ITL equals mean TPOT (within rounding), as the definition promises.
    let itl = t["itl_ms"]["mean"].as_f64().unwrap();
    let tpot = t["tpot_ms"]["mean"].as_f64().unwrap();
    assert!((itl - tpot).abs() / tpot < 0.05, "itl {itl} tpot {tpot}");
}
