//! Progress off a terminal (CI logs): the plan before the first request, then a line every
//! interval with the level, requests done/total, tok/s so far, errors and the run's ETA.
//! The interval is 30 s in real use; THROUGHLINE_PROGRESS_INTERVAL shortens it here.

use crate::common::*;

fn bench_lines(rest: &str) -> (String, std::process::Output) {
    let sim = Sim::start(1, &["--preset", "fast"]);
    let dir = tempfile::tempdir().unwrap();
    let profile = write_profile(dir.path(), "p", &sim.urls, rest);
    let out = bench_command(&profile, &dir.path().join("out"))
        .env("THROUGHLINE_PROGRESS_INTERVAL", "150ms")
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", text(&out));
    (String::from_utf8_lossy(&out.stderr).into_owned(), out)
}

#[test]
fn closed_loop_levels_print_lines_with_counts_rate_errors_and_eta() {
    let _turn = timing_lock();
    let (stderr, out) = bench_lines(
        "[workload]\ninput_tokens = 8\nmax_tokens = 64\nignore_eos = true\n[sweep]\n\
         concurrency = [2]\nrequests_per_level = 16\nwarmup_requests = 2\ntrials = 2\n",
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("planned: 1 level(s) x 2 trial(s) = 32 requests (+2 warmup)"),
        "{stdout}"
    );
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("progress: "))
        .collect();
    assert!(lines.len() >= 2, "{stderr}");
    let trial_line = lines
        .iter()
        .find(|l| l.starts_with("progress: C=2 trial"))
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(trial_line.contains("/16 requests, "), "{trial_line}");
    assert!(
        trial_line.contains(" tok/s so far, 0 errors; run ETA"),
        "{trial_line}"
    );
    assert!(trial_line.contains("(estimate)"), "{trial_line}");
    // Off a terminal nothing draws a bar.
    assert!(!stderr.contains('\r'), "{stderr:?}");
}

#[test]
fn timed_trials_say_the_planned_total_up_front() {
    let _turn = timing_lock();
    let (stderr, out) = bench_lines(
        "[workload]\ninput_tokens = 8\nmax_tokens = 32\nignore_eos = true\n[sweep]\n\
         concurrency = [1, 2]\nduration = \"600ms\"\nwarmup_requests = 0\ntrials = 1\n",
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    // Said once, before the table (not again on stderr).
    assert!(
        stdout.contains("planned: 2 level(s) x 1 trial(s) of 600ms each; estimate: about "),
        "{stdout}"
    );
    assert!(!stderr.contains("Plan: "), "{stderr}");
    assert!(
        stderr
            .lines()
            .any(|l| l.starts_with("progress: C=1 trial 1/1: ")
                && l.contains(" requests, ")
                && l.contains("run ETA ~")),
        "{stderr}"
    );
}

#[test]
fn no_progress_prints_nothing_of_it() {
    let _turn = timing_lock();
    let sim = Sim::start(1, &["--preset", "fast"]);
    let dir = tempfile::tempdir().unwrap();
    let profile = write_profile(
        dir.path(),
        "p",
        &sim.urls,
        "[workload]\ninput_tokens = 8\nmax_tokens = 64\n[sweep]\nconcurrency = [2]\n\
         requests_per_level = 8\nwarmup_requests = 0\ntrials = 1\n",
    );
    let out = bench_command(&profile, &dir.path().join("out"))
        .arg("--no-progress")
        .env("THROUGHLINE_PROGRESS_INTERVAL", "50ms")
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("progress: ") && !stderr.contains("Plan: "),
        "{stderr}"
    );
}
