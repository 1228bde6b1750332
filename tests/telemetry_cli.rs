//! Server telemetry end to end: `throughline bench` against a real simulator process scrapes
//! its `/metrics` during every trial, and the client's token count agrees with the server's
//! counter over the same window.

mod common;

use common::*;

#[test]
fn telemetry_cross_check_agrees_and_saturation_is_seen() {
    // Two slots, 10 ms per step: at C=1 nothing waits; at C=8 six requests queue until the
    // last rounds (32 requests, 16 rounds of about 0.17 s). The queue is a gauge sampled once a
    // second. A sample taken just as two requests finish can find their workers' next requests
    // not yet sent (5 or 4 waiting), so the rounds are 17 tokens long: the samples at 1 s and
    // 2 s then fall 30-110 ms away from a round's end, not on it as 20-token rounds did.
    let sim = Sim::start(
        1,
        &[
            "--preset",
            "fixed",
            "--token-delay-ms",
            "10",
            "--max-running",
            "2",
        ],
    );
    let dir = tempfile::tempdir().unwrap();
    let profile = write_profile(
        dir.path(),
        "tele",
        &sim.urls,
        r#"
[workload]
input_tokens = 8
max_tokens = 17
ignore_eos = true
[sweep]
concurrency = [1, 8]
trials = 1
request_timeout = "20s"
"#,
    );
    let out_dir = dir.path().join("out");
    let out = run_bench_cli(&profile, &out_dir, &[]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("server: not saturated"), "{}", text(&out));
    let console_waiting = stdout
        .split("server: saturated: queue non-empty (up to ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse::<u32>().ok());
    // Never more than 8 workers minus 2 slots; at least 4 even in the worst sample.
    assert!(
        matches!(console_waiting, Some(4..=6)),
        "{:?}\n{}",
        console_waiting,
        text(&out)
    );

    let result = read_json(&out_dir.join("results.json"));
    for level in result["levels"].as_array().unwrap() {
        let t = &level["trials"][0];
        // Written only when non-zero: every request generated its 17 tokens.
        assert!(t.get("length_misses").is_none(), "{t}");
        let tele = &t["telemetry"];
        assert_eq!(tele["engine"], "throughline-sim");
        let samples = tele["endpoints"][0]["samples"].as_array().unwrap();
        // One scrape at the start, about one a second, one at the end: trials of 1.4 s and
        // 2.8 s give at least three.
        assert!(samples.len() >= 3, "{samples:?}");
        let client = tele["client_tokens"].as_f64().unwrap();
        let server = tele["server_tokens"].as_f64().unwrap();
        assert!(server > 0.0);
        assert!(
            (client / server - 1.0).abs() <= 0.02,
            "client {client} vs server {server}"
        );
        // The window spans the trial, so both saw (nearly) every token of it.
        let tokens = t["output_tokens"].as_f64().unwrap();
        assert_eq!(tokens, t["requests_sent"].as_f64().unwrap() * 17.0);
        assert!(
            server >= 0.9 * tokens && server <= tokens,
            "{server} of {tokens}"
        );
        // No flag but, on a busy machine, the client's own (tests/headroom.rs tests those).
        let flags = t["flags"].as_array().unwrap();
        assert!(
            flags.iter().all(|f| f["kind"] == "client-bound"),
            "{flags:?}"
        );
    }
    let c8 = &result["levels"][1]["trials"][0]["telemetry"];
    let reason = c8["saturation"][0].as_str().unwrap();
    assert_eq!(
        Some(reason),
        console_waiting
            .map(|n| format!("queue non-empty (up to {n} waiting)"))
            .as_deref(),
        "results.json and the console disagree"
    );
}
