//! Open-loop load and duration trials end to end: the real binary against a simulator
//! process. The schedule is checked on the *actual* send times from requests.jsonl.

use crate::common::*;
use statrs::distribution::{ContinuousCDF, Exp};

/// Kolmogorov-Smirnov statistic of `x` against `cdf`.
fn ks(mut x: Vec<f64>, cdf: impl Fn(f64) -> f64) -> f64 {
    x.sort_by(f64::total_cmp);
    let n = x.len() as f64;
    x.iter()
        .enumerate()
        .map(|(i, v)| {
            let f = cdf(*v);
            (f - i as f64 / n).abs().max(((i + 1) as f64 / n - f).abs())
        })
        .fold(0.0, f64::max)
}

/// Runs `rate` req/s Poisson for `secs` and checks rate, lag, accounting and the gaps.
fn poisson_run(rate: f64, secs: u32) {
    let _turn = timing_lock();
    let sim = Sim::start(1, &["--preset", "fast"]);
    let dir = tempfile::tempdir().unwrap();
    let body = format!(
        "[workload]\ninput_tokens = 16\nmax_tokens = 16\nignore_eos = true\n[sweep]\n\
         rates = [{rate:?}]\narrival = \"poisson\"\nseed = 7\nduration = \"{secs}s\"\n\
         trials = 1\nrequest_timeout = \"20s\"\n"
    );
    let profile = write_profile(dir.path(), "open", &sim.urls, &body);
    let out_dir = dir.path().join("out");
    let out = run_bench_cli(&profile, &out_dir, &[]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    let result = read_json(&out_dir.join("results.json"));
    let level = &result["levels"][0];
    assert_eq!(level["rate"].as_f64(), Some(rate));
    let trial = &level["trials"][0];
    let expected = (rate * f64::from(secs)).round() as u64;
    assert_eq!(trial["requests_sent"].as_u64(), Some(expected), "{trial}");
    assert_eq!(trial["succeeded"].as_u64(), Some(expected), "{trial}");
    let ol = &trial["open_loop"];
    let achieved = ol["achieved_rate"].as_f64().unwrap();
    println!(
        "target {rate}/s for {secs}s: achieved {achieved:.3}/s, send lag p50 {:.3} ms p99 {:.3} ms max {:.3} ms",
        ol["send_lag_ms"]["p50"], ol["send_lag_ms"]["p99"], ol["send_lag_ms"]["max"]
    );
    assert!(
        (achieved - rate).abs() / rate < 0.01,
        "achieved {achieved} vs {rate}"
    );
    assert!(ol["e2e_from_schedule_ms"]["p50"].as_f64().unwrap() > 0.0);
    assert!(trial["client"]["lag_p99_ms"].as_f64().is_some(), "{trial}");

    let recs = read_journal(&out_dir);
    assert_eq!(recs.len() as u64, expected);
    let mut sends: Vec<f64> = recs.iter().map(|r| r["sent_s"].as_f64().unwrap()).collect();
    for r in &recs {
        let lag = r["sent_s"].as_f64().unwrap() - r["scheduled_s"].as_f64().unwrap();
        assert!(lag >= 0.0, "sent before its scheduled time: {r}");
        assert_eq!(r["rate"].as_f64(), Some(rate));
    }
    sends.sort_by(f64::total_cmp);
    let gaps: Vec<f64> = sends.windows(2).map(|w| w[1] - w[0]).collect();
    let exp = Exp::new(rate).unwrap();
    let d = ks(gaps.clone(), |x| exp.cdf(x));
    // 1% critical value of the one-sample KS test.
    let critical = 1.628 / (gaps.len() as f64).sqrt();
    println!(
        "KS D = {d:.4} over {} gaps (1% critical {critical:.4})",
        gaps.len()
    );
    assert!(d < critical, "inter-send gaps are not exponential: D = {d}");
    // And the test can fail: evenly spaced sends are far from exponential.
    let even = vec![1.0 / rate; gaps.len()];
    assert!(ks(even, |x| exp.cdf(x)) > critical);
}

#[test]
fn open_loop_keeps_the_rate_and_sends_poisson_gaps() {
    poisson_run(50.0, 4);
}

/// The full-length check (20 s); run with `cargo test --test it openloop_cli -- --ignored`.
#[test]
#[ignore]
fn open_loop_50_per_s_for_20_s() {
    poisson_run(50.0, 20);
}

#[test]
fn duration_windows_are_recorded_but_not_counted() {
    let _turn = timing_lock();
    let sim = Sim::start(1, &["--preset", "fast"]);
    let dir = tempfile::tempdir().unwrap();
    let body = "[workload]\ninput_tokens = 16\nmax_tokens = 16\nignore_eos = true\n[sweep]\n\
                concurrency = [2]\nduration = \"1s\"\nwarmup = \"400ms\"\ncooldown = \"400ms\"\n\
                trials = 2\nrequest_timeout = \"20s\"\n";
    let profile = write_profile(dir.path(), "windows", &sim.urls, body);
    let out_dir = dir.path().join("out");
    let out = run_bench_cli(&profile, &out_dir, &[]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    let result = read_json(&out_dir.join("results.json"));
    let recs = read_journal(&out_dir);
    for trial in result["levels"][0]["trials"].as_array().unwrap() {
        let n = trial["trial"].as_u64().unwrap();
        let count = |w: &str| {
            recs.iter()
                .filter(|r| r["trial"].as_u64() == Some(n) && r["window"] == w)
                .count() as u64
        };
        let (warm, measure, cool) = (count("warmup"), count("measure"), count("cooldown"));
        assert!(
            warm > 0 && measure > 0 && cool > 0,
            "{warm} {measure} {cool}"
        );
        assert_eq!(trial["requests_sent"].as_u64(), Some(measure), "{trial}");
        assert_eq!(trial["excluded_requests"].as_u64(), Some(warm + cool));
        // The measured window is longer than either side window, so it holds more requests.
        assert!(measure > warm && measure > cool, "{warm} {measure} {cool}");
    }
}

/// Issue 15, item 10: an open-loop trial that cannot keep its rate (one slot, slow requests) is
/// flagged `schedule-missed` and the run warns.
#[test]
fn a_missed_open_loop_schedule_is_flagged() {
    let _turn = timing_lock();
    let sim = Sim::start(1, &["--preset", "instant", "--token-delay-ms", "20"]);
    let tmp = tempfile::tempdir().unwrap();
    let body = "[workload]\ninput_tokens = 4\nmax_tokens = 10\nignore_eos = true\n[sweep]\n\
                rates = [50.0]\nmax_concurrency = 1\narrival = \"constant\"\n\
                requests_per_level = 12\ntrials = 1\n";
    let profile = write_profile(tmp.path(), "open", &sim.urls, body);
    let out_dir = tmp.path().join("out");
    let out = run_bench_cli(&profile, &out_dir, &[]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    let result = read_json(&out_dir.join("results.json"));
    let trial = &result["levels"][0]["trials"][0];
    let achieved = trial["open_loop"]["achieved_rate"].as_f64().unwrap();
    assert!(
        achieved < 40.0,
        "the cap did not slow the sends: {achieved}"
    );
    let flags = trial["flags"].as_array().unwrap();
    assert!(
        flags.iter().any(|f| f["kind"] == "schedule-missed"),
        "{flags:?}"
    );
    assert!(
        text(&out).contains("schedule missed"),
        "no warning: {}",
        text(&out)
    );
}
