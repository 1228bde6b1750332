//! Server telemetry end to end: `throughline bench` against a real simulator process scrapes
//! its `/metrics` during every trial, and the client's token count agrees with the server's
//! counter over the same window.

use crate::common::*;

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
        // No flag but, on a busy machine, the client's own (tests/it/headroom.rs tests those).
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

/// What one `throughline bench` cost its own process: peak resident memory and CPU time
/// (this child's alone, from wait4), with its output.
struct Cost {
    peak_kib: i64,
    cpu_s: f64,
    code: i32,
    said: String,
}

// Waited for with wait4 (for this child's own rusage), not Child::wait.
#[allow(clippy::zombie_processes)]
fn bench_cost(profile: &std::path::Path, out: &std::path::Path) -> Cost {
    let log = out.with_extension("log");
    let file = std::fs::File::create(&log).unwrap();
    let child = bench_command(profile, out)
        .args(["--no-progress", "--no-plots"])
        .stdout(file.try_clone().unwrap())
        .stderr(file)
        .spawn()
        .unwrap();
    let mut status = 0;
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let waited = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    assert_eq!(waited, child.id() as i32);
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Cost {
        peak_kib: usage.ru_maxrss,
        cpu_s: seconds(usage.ru_utime) + seconds(usage.ru_stime),
        code: if libc::WIFEXITED(status) {
            libc::WEXITSTATUS(status)
        } else {
            -1
        },
        said: std::fs::read_to_string(&log).unwrap(),
    }
}

/// Issue 35 item 7: a server whose /metrics page is 8 MB (100k series of another exporter
/// after the engine's own) costs the load generator little more memory than a plain one:
/// the page is read with a cap and parsed line by line, keeping only the engine's series.
#[test]
fn an_eight_megabyte_metrics_page_keeps_the_clients_memory_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let body = r#"
[workload]
input_tokens = 8
max_tokens = 20
ignore_eos = true
[sweep]
concurrency = [2]
requests_per_level = 24
trials = 1
request_timeout = "20s"
"#;
    let sim_args = ["--preset", "fixed", "--token-delay-ms", "10"];
    let plain_sim = Sim::start(1, &sim_args);
    let plain_profile = write_profile(dir.path(), "plain", &plain_sim.urls, body);
    let plain = bench_cost(&plain_profile, &dir.path().join("plain"));
    assert_eq!(plain.code, 0, "{}", plain.said);
    drop(plain_sim);

    let config = dir.path().join("sim.toml");
    std::fs::write(&config, "[faults]\nmetrics_padding = 8000000\n").unwrap();
    let mut args = sim_args.to_vec();
    args.extend(["--config", config.to_str().unwrap()]);
    let big_sim = Sim::start(1, &args);
    let page = http_get(&format!("{}/metrics", big_sim.urls[0]));
    assert!(page.len() >= 8_000_000, "{}", page.len());
    let big_profile = write_profile(dir.path(), "big", &big_sim.urls, body);
    let big = bench_cost(&big_profile, &dir.path().join("big"));
    assert_eq!(big.code, 0, "{}", big.said);
    eprintln!(
        "peak {} KiB and CPU {:.2} s with the 8 MB page; {} KiB and {:.2} s without",
        big.peak_kib, big.cpu_s, plain.peak_kib, plain.cpu_s
    );
    assert!(
        big.peak_kib <= 2 * plain.peak_kib,
        "peak memory {} KiB with the 8 MB page, {} KiB without (CPU {:.2} s, {:.2} s)\n{}",
        big.peak_kib,
        plain.peak_kib,
        big.cpu_s,
        plain.cpu_s,
        big.said
    );
    assert!(
        big.cpu_s <= plain.cpu_s + 1.0,
        "CPU {:.2} s with the 8 MB page, {:.2} s without",
        big.cpu_s,
        plain.cpu_s
    );
    // The engine's own series came first: the telemetry is there, the cut said once.
    assert_eq!(
        big.said.matches("longer than").count(),
        1,
        "the cut page is said once: {}",
        big.said
    );
    let result = read_json(&dir.path().join("big/results.json"));
    let tele = &result["levels"][0]["trials"][0]["telemetry"];
    let samples = tele["endpoints"][0]["samples"].as_array().unwrap();
    assert!(samples.len() >= 2, "{tele}");
    assert!(
        samples[0]["generated_tokens_total"].as_f64().is_some(),
        "{tele}"
    );
    assert!(tele["server_tokens"].as_f64().unwrap() > 0.0, "{tele}");
}
