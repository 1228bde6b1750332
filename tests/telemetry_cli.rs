//! Server telemetry end to end: `throughline bench` against a real simulator process scrapes
//! its `/metrics` during every trial, and the client's token count agrees with the server's
//! counter over the same window.

mod common;

use common::*;

#[test]
fn telemetry_cross_check_agrees_and_saturation_is_seen() {
    // Two slots, 10 ms per step: at C=1 nothing waits; at C=8 six requests queue until the
    // last rounds (32 requests, 16 rounds of 0.2 s).
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
max_tokens = 20
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
    assert!(
        stdout.contains("server: saturated: queue non-empty (up to 6 waiting)"),
        "{}",
        text(&out)
    );

    let result = read_json(&out_dir.join("results.json"));
    for level in result["levels"].as_array().unwrap() {
        let t = &level["trials"][0];
        // Written only when non-zero: every request generated its 20 tokens.
        assert!(t.get("length_misses").is_none(), "{t}");
        let tele = &t["telemetry"];
        assert_eq!(tele["engine"], "throughline-sim");
        let samples = tele["endpoints"][0]["samples"].as_array().unwrap();
        // One scrape at the start, about one a second, one at the end: trials of 1.6 s and
        // 3.2 s give at least three.
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
        assert_eq!(tokens, t["requests_sent"].as_f64().unwrap() * 20.0);
        assert!(
            server >= 0.9 * tokens && server <= tokens,
            "{server} of {tokens}"
        );
        let flags = t["flags"].as_array().unwrap();
        assert!(flags.is_empty(), "{flags:?}");
    }
    let c8 = &result["levels"][1]["trials"][0]["telemetry"];
    assert_eq!(c8["saturation"][0], "queue non-empty (up to 6 waiting)");
}
