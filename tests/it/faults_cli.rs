//! Faults end to end: `serve-sim` injects one fault class at a time, `bench` must classify
//! every failure, keep `sent == succeeded + failed` in every trial and in the journal, exit
//! with the right code, and leave valid JSON behind. Also: the server dying mid-run, Ctrl-C
//! and SIGTERM during a run, and two blesses racing for one baseline.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;
use serde_json::Value;

/// C=1 and C=3, 2 trials of 8, 2 warmup requests each: 36 requests, well under a second
/// at `fixed --token-delay-ms 5` with 12 tokens each.
fn profile(extra_sweep: &str, extra_workload: &str) -> String {
    format!(
        r#"
[workload]
input_tokens = 8
max_tokens = 12
ignore_eos = true
{extra_workload}
[sweep]
concurrency = [1, 3]
requests_per_level = 8
warmup_requests = 2
trials = 2
request_timeout = "10s"
{extra_sweep}
"#
    )
}

const FIXED: &[&str] = &["--preset", "fixed", "--token-delay-ms", "5", "--seed", "7"];

struct Run {
    out: Output,
    dir: PathBuf,
    _tmp: tempfile::TempDir,
}

impl Run {
    fn result(&self) -> Value {
        read_json(&self.dir.join("results.json"))
    }

    fn journal(&self) -> Vec<Value> {
        read_journal(&self.dir)
    }

    /// The error message of the first request that failed in `class`.
    fn first_message(&self, class: &str) -> String {
        let journal = self.journal();
        let line = journal
            .iter()
            .find(|l| l["error"] == class)
            .unwrap_or_else(|| panic!("no {class} failure"));
        line["error_message"].as_str().unwrap().to_string()
    }
}

fn bench(sim: &Sim, body: &str) -> Run {
    let tmp = tempfile::tempdir().unwrap();
    let path = write_profile(tmp.path(), "faults", &sim.urls, body);
    let dir = tmp.path().join("out");
    let out = run_bench_cli(&path, &dir, &[]);
    Run {
        out,
        dir,
        _tmp: tmp,
    }
}

/// Checks the accounting of every trial and that the trials agree with the journal's
/// non-warmup lines; returns the failures by class over the whole journal (warmup included).
fn check_accounting(result: &Value, journal: &[Value]) -> BTreeMap<String, u64> {
    let mut trial_failed = BTreeMap::<String, u64>::new();
    let mut trial_sent = 0;
    let mut trial_ok = 0;
    for level in result["levels"].as_array().unwrap() {
        for t in level["trials"].as_array().unwrap() {
            let sent = t["requests_sent"].as_u64().unwrap();
            let ok = t["succeeded"].as_u64().unwrap();
            let mut failed = 0;
            for (class, n) in t["failed"].as_object().unwrap() {
                failed += n.as_u64().unwrap();
                *trial_failed.entry(class.clone()).or_default() += n.as_u64().unwrap();
            }
            assert_eq!(sent, ok + failed, "trial does not add up: {t}");
            trial_sent += sent;
            trial_ok += ok;
        }
    }
    let counted: Vec<&Value> = journal.iter().filter(|l| l["warmup"] == false).collect();
    assert_eq!(
        counted.len() as u64,
        trial_sent,
        "journal and results disagree"
    );
    assert_eq!(
        counted.iter().filter(|l| l["error"].is_null()).count() as u64,
        trial_ok
    );
    let mut journal_failed = BTreeMap::<String, u64>::new();
    for l in &counted {
        if let Some(c) = l["error"].as_str() {
            *journal_failed.entry(c.to_string()).or_default() += 1;
        }
    }
    assert_eq!(journal_failed, trial_failed);
    let mut all = BTreeMap::new();
    for l in journal {
        if let Some(c) = l["error"].as_str() {
            *all.entry(c.to_string()).or_default() += 1;
        }
    }
    all
}

/// The simulator's own count of injected faults of one kind.
fn injected(sim: &Sim, kind: &str) -> u64 {
    let body = http_get(&format!("{}/metrics", sim.urls[0]));
    let prefix = format!("throughline_sim_faults_injected_total{{kind=\"{kind}\"}} ");
    body.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {prefix} in /metrics:\n{body}"))
}

/// One fault class: every injected fault shows up as exactly one failure of `class`, and
/// nothing else fails.
fn one_class(flags: &[&str], body: &str, kind: &str, class: &str, exit: i32) -> Run {
    let sim = Sim::start(1, &[FIXED, flags].concat());
    let r = bench(&sim, body);
    assert_eq!(code(&r.out), exit, "{}", text(&r.out));
    let failed = check_accounting(&r.result(), &r.journal());
    let n = injected(&sim, kind);
    assert!(n > 0, "the seed drew no {kind} fault; pick a higher rate");
    assert_eq!(failed.get(class).copied(), Some(n), "{failed:?}");
    assert_eq!(failed.len(), 1, "only {class} expected: {failed:?}");
    r
}

#[test]
fn http_errors_keep_their_status_and_fail_the_error_limit() {
    let r = one_class(
        &["--fault-http-error-rate", "0.3"],
        &profile("", ""),
        "http",
        "http",
        2,
    );
    let statuses: Vec<u64> = r
        .journal()
        .iter()
        .filter(|l| l["error"] == "http")
        .map(|l| l["http_status"].as_u64().unwrap())
        .collect();
    assert!(statuses.iter().all(|s| [429, 500, 503].contains(s)));
    let err = String::from_utf8_lossy(&r.out.stderr);
    assert!(
        err.contains("max_error_rate") && err.contains("http"),
        "{err}"
    );
    assert_eq!(r.result()["complete"], true);
}

#[test]
fn http_errors_under_the_limit_pass() {
    // Same faults, a profile that tolerates them: exit 0, failures still counted.
    let r = one_class(
        &[
            "--fault-http-error-rate",
            "0.3",
            "--fault-http-statuses",
            "429",
        ],
        &profile("max_error_rate = 0.9", ""),
        "http",
        "http",
        0,
    );
    assert!(r
        .journal()
        .iter()
        .filter(|l| l["error"] == "http")
        .all(|l| l["http_status"] == 429));
}

#[test]
fn resets_mid_stream() {
    let r = one_class(
        &["--fault-reset-rate", "0.3"],
        &profile("max_error_rate = 0.9", ""),
        "reset",
        "reset",
        0,
    );
    // A reset request had started streaming: it got a first byte.
    assert!(r
        .journal()
        .iter()
        .filter(|l| l["error"] == "reset")
        .all(|l| l["first_byte_s"].is_number()));
}

#[test]
fn stalls_hit_the_stall_timeout() {
    let r = one_class(
        &["--fault-stall-rate", "0.2", "--fault-stall", "5s"],
        &profile("max_error_rate = 0.9\nstall_timeout = \"300ms\"", ""),
        "stall",
        "stall",
        0,
    );
    for l in r.journal().iter().filter(|l| l["error"] == "stall") {
        let e2e = l["e2e_ms"].as_f64().unwrap();
        assert!((300.0..3000.0).contains(&e2e), "stall ended after {e2e} ms");
    }
}

#[test]
fn malformed_sse_is_a_protocol_error() {
    let r = one_class(
        &["--fault-malformed-rate", "0.3"],
        &profile("max_error_rate = 0.9", ""),
        "malformed",
        "protocol",
        0,
    );
    let msg = r.first_message("protocol");
    assert!(msg.contains("not JSON"), "{msg}");
}

#[test]
fn missing_done_is_a_protocol_error() {
    let r = one_class(
        &["--fault-no-done-rate", "0.3"],
        &profile("max_error_rate = 0.9", ""),
        "no_done",
        "protocol",
        0,
    );
    let msg = r.first_message("protocol");
    assert!(msg.contains("[DONE]"), "{msg}");
}

#[test]
fn missing_usage_is_flagged_or_fails_when_required() {
    let flags = ["--fault-no-usage-rate", "0.3"];
    // Not required: counted one token per chunk, flagged, still a pass.
    let sim = Sim::start(1, &[FIXED, &flags[..]].concat());
    let r = bench(&sim, &profile("", ""));
    assert_eq!(code(&r.out), 0, "{}", text(&r.out));
    let failed = check_accounting(&r.result(), &r.journal());
    assert!(failed.is_empty(), "{failed:?}");
    let n = injected(&sim, "no_usage");
    let estimated = r
        .journal()
        .iter()
        .filter(|l| l["token_source"] == "chunk_count")
        .count() as u64;
    assert!(n > 0);
    assert_eq!(estimated, n);
    let err = String::from_utf8_lossy(&r.out.stderr);
    assert!(err.contains("reported no usage"), "{err}");
    // Every estimated count is still right here: one token per chunk at MTP 1.
    assert!(r
        .journal()
        .iter()
        .all(|l| l["output_tokens"] == 12 && l["error"].is_null()));
    drop(sim);

    // Required: the same responses fail as missing_usage, the level goes over its limit.
    one_class(
        &flags,
        &profile("", "require_usage = true"),
        "no_usage",
        "missing_usage",
        2,
    );
}

#[test]
fn degenerate_answers_fail() {
    one_class(
        &["--fault-degenerate-rate", "0.3"],
        &profile("max_error_rate = 0.9", ""),
        "degenerate",
        "degenerate",
        0,
    );
}

#[test]
fn slow_first_byte_hits_the_request_timeout() {
    let r = one_class(
        &[
            "--fault-slow-first-byte-rate",
            "0.15",
            "--fault-slow-first-byte",
            "4s",
        ],
        &profile("max_error_rate = 0.9", "")
            .replace("request_timeout = \"10s\"", "request_timeout = \"600ms\""),
        "slow_first_byte",
        "timeout",
        0,
    );
    for l in r.journal().iter().filter(|l| l["error"] == "timeout") {
        assert!(l["first_byte_s"].is_null(), "{l}");
    }
}

#[test]
fn faults_from_a_config_file_are_deterministic() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = tmp.path().join("sim.toml");
    std::fs::write(
        &cfg,
        "[faults]\nreset_rate = 0.2\ndegenerate_rate = 0.2\nhttp_error_rate = 0.1\n",
    )
    .unwrap();
    let flags = ["--config", cfg.to_str().unwrap()];
    let mut seen = Vec::new();
    for _ in 0..2 {
        // C=1 only, so the arrival order (and thus every draw) is the same in both runs.
        let sim = Sim::start(1, &[FIXED, &flags[..]].concat());
        let body = profile("max_error_rate = 0.9", "").replace("[1, 3]", "[1]");
        let r = bench(&sim, &body);
        assert_eq!(code(&r.out), 0, "{}", text(&r.out));
        check_accounting(&r.result(), &r.journal());
        let classes: Vec<Value> = r.journal().iter().map(|l| l["error"].clone()).collect();
        seen.push(classes);
    }
    assert_eq!(seen[0], seen[1]);
    assert!(seen[0].iter().any(|c| !c.is_null()));

    // A bad config file names the file, the line and the field.
    std::fs::write(&cfg, "[faults]\nreset_rate = 0.2\nrest_rate = 0.1\n").unwrap();
    let out = run(&[
        "serve-sim",
        "--port",
        "0",
        "--config",
        cfg.to_str().unwrap(),
    ]);
    assert_eq!(code(&out), 2, "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("sim.toml") && err.contains("line 3") && err.contains("rest_rate"),
        "{err}"
    );
}

/// The server dies mid-run: the run stops after the first batch that could not connect at
/// all, writes what it measured, marks it incomplete and exits 2 with the reason.
fn server_dies(flags: &[&str]) {
    let sim = Sim::start(1, &[FIXED, flags].concat());
    let body = profile("", "").replace("[1, 3]", "[1, 2, 3, 4]");
    crate::common::share_machine();
    let started = Instant::now();
    let r = bench(&sim, &body);
    assert_eq!(code(&r.out), 2, "{}", text(&r.out));
    assert!(started.elapsed() < Duration::from_secs(20));
    let result = r.result();
    assert_eq!(result["complete"], false);
    let failed = check_accounting(&result, &r.journal());
    assert!(
        failed.get("connect").copied().unwrap_or(0) > 0,
        "{failed:?}"
    );
    // Trials are interleaved across levels: a sweep that stopped early ran fewer trials
    // than its 4 levels x trials.
    let levels = result["levels"].as_array().unwrap();
    let ran: usize = levels
        .iter()
        .map(|l| l["trials"].as_array().unwrap().len())
        .sum();
    let planned = 4 * result["profile"]["sweep"]["trials"].as_u64().unwrap() as usize;
    assert!(
        ran < planned,
        "the sweep should stop early: {ran} of {planned} trials"
    );
    let err = String::from_utf8_lossy(&r.out.stderr);
    assert!(
        err.contains("stopped early") && err.contains("failed to connect"),
        "{err}"
    );
    assert!(std::fs::read_to_string(r.dir.join("summary.csv"))
        .unwrap()
        .starts_with("concurrency,"));
}

#[test]
fn server_exiting_after_n_requests_ends_the_run() {
    server_dies(&["--exit-after-requests", "12"]);
}

#[test]
fn server_exiting_after_a_time_ends_the_run() {
    // 1.5 s into the run: the sweep takes several seconds, so the server is gone before its
    // last round, with room for a slow start of bench on a busy machine.
    server_dies(&["--exit-after", "1500ms"]);
}

fn spawn_bench(profile_path: &Path, dir: &Path) -> std::process::Child {
    crate::common::command()
        .args(["bench", "--profile", profile_path.to_str().unwrap()])
        .args(["--out", dir.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn sigint_writes_an_incomplete_result_with_every_finished_request() {
    let sim = Sim::start(1, &["--preset", "fixed", "--token-delay-ms", "20"]);
    let tmp = tempfile::tempdir().unwrap();
    // About 15 s if left alone: 2 x 40 x 3 requests of ~0.5 s at C=2.
    let body = profile("", "")
        .replace("[1, 3]", "[2]")
        .replace("requests_per_level = 8", "requests_per_level = 40")
        .replace("trials = 2", "trials = 3")
        .replace("max_tokens = 12", "max_tokens = 24");
    let path = write_profile(tmp.path(), "kill", &sim.urls, &body);
    let dir = tmp.path().join("out");
    let child = spawn_bench(&path, &dir);
    crate::common::share_machine();
    let started = Instant::now();
    loop {
        let lines = std::fs::read_to_string(dir.join("requests.jsonl"))
            .map(|t| t.lines().filter(|l| l.contains("\"warmup\":false")).count())
            .unwrap_or(0);
        if lines >= 3 {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(20), "no requests");
        std::thread::sleep(Duration::from_millis(20));
    }
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = wait_with_deadline(child, Duration::from_secs(8), "bench after the signal");
    assert_eq!(code(&out), 130, "{}", text(&out));
    let result = read_json(&dir.join("results.json"));
    assert_eq!(result["complete"], false);
    let journal = read_journal(&dir);
    check_accounting(&result, &journal);
    let counted = journal.iter().filter(|l| l["warmup"] == false).count();
    assert!(
        (3..120).contains(&counted),
        "{counted} requests; it should have stopped early"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("interrupted by SIGINT"), "{err}");
}

#[test]
fn sigterm_abandons_stalled_requests_as_cancelled() {
    // Every request stalls for 60 s: nothing can finish within the grace period.
    let sim = Sim::start(
        1,
        &[
            FIXED,
            &["--fault-stall-rate", "1", "--fault-stall", "60s"][..],
        ]
        .concat(),
    );
    let tmp = tempfile::tempdir().unwrap();
    let body = profile("stall_timeout = \"120s\"", "")
        .replace("request_timeout = \"10s\"", "request_timeout = \"120s\"")
        .replace("[1, 3]", "[3]")
        .replace("warmup_requests = 2", "warmup_requests = 0");
    let path = write_profile(tmp.path(), "term", &sim.urls, &body);
    let dir = tmp.path().join("out");
    let child = spawn_bench(&path, &dir);
    crate::common::share_machine();
    let started = Instant::now();
    // The engine generates every token even though the streams stall after the first: all
    // 3 x 12 tokens mean all three requests were sent (3 could be the first request's alone).
    while sim.counter("throughline_sim_generation_tokens_total") < 36.0 {
        assert!(started.elapsed() < Duration::from_secs(20), "no requests");
        std::thread::sleep(Duration::from_millis(50));
    }
    crate::common::share_machine();
    let signalled = Instant::now();
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let out = wait_with_deadline(child, Duration::from_secs(10), "bench after the signal");
    assert_eq!(code(&out), 143, "{}", text(&out));
    let waited = signalled.elapsed();
    // The README promises 3 s for requests in flight (counted from before the signal was
    // sent, so never less), and then no more waiting than exiting takes.
    assert!(
        waited >= Duration::from_secs(3) && waited < Duration::from_secs(6),
        "grace period not the promised 3 s: {waited:?}"
    );
    let result = read_json(&dir.join("results.json"));
    assert_eq!(result["complete"], false);
    let failed = check_accounting(&result, &read_journal(&dir));
    assert_eq!(failed.get("cancelled"), Some(&3), "{failed:?}");
    assert_eq!(failed.len(), 1, "{failed:?}");
}

#[test]
fn concurrent_blesses_never_lose_a_session() {
    let sim = Sim::start(1, &["--preset", "instant"]);
    let tmp = tempfile::tempdir().unwrap();
    let path = write_profile(tmp.path(), "bless", &sim.urls, QUICK_BODY);
    let dir = tmp.path().join("out");
    let out = run_bench_cli(&path, &dir, &[]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    // Blessing is what is tested, not the instant preset's timing.
    let results = without_client_flags(&dir.join("results.json"));
    let baseline = tmp.path().join("base.toml");
    let bless = || {
        crate::common::command()
            .args(["baseline", "bless", "--commit", "abc"])
            .args(["--results", results.to_str().unwrap()])
            .args(["--baseline", baseline.to_str().unwrap()])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    // The test holds the bless lock itself until both blesses of a pair say they wait for it:
    // both have started and neither has finished, so they overlap. Released, they race for
    // it; each waits its turn, and every one succeeds.
    let lock_path = throughline::gate::baseline::lock_path(&baseline).unwrap();
    std::fs::create_dir_all(lock_path.parent().unwrap()).unwrap();
    let mut succeeded = 0;
    for _ in 0..3 {
        let held = hold_lock(&lock_path);
        let mut pair = [bless(), bless()];
        let mut said: Vec<String> = Vec::new();
        for child in &mut pair {
            said.push(wait_for_line(child, "waiting for another bless"));
        }
        drop(held);
        for (child, said) in pair.into_iter().zip(said) {
            let out = wait_with_deadline(child, Duration::from_secs(30), "bless");
            assert_eq!(code(&out), 0, "{said}{}", text(&out));
            succeeded += 1;
        }
    }
    let text = std::fs::read_to_string(&baseline).unwrap();
    let sessions = text.matches("[[sessions]]").count();
    assert_eq!(sessions, succeeded, "a bless was lost:\n{text}");
}

/// An exclusive `flock` on `path` (as `baseline bless` takes it), held until the file closes.
fn hold_lock(path: &Path) -> std::fs::File {
    use std::os::fd::AsRawFd;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .unwrap();
    // SAFETY: flock on a descriptor this function owns.
    assert_eq!(
        unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) },
        0,
        "flock {}",
        path.display()
    );
    file
}

/// Reads `child`'s stderr until a line containing `wanted` (at most 20 s); returns what it
/// read. The rest of stderr is left unread; a bless writes little.
fn wait_for_line(child: &mut std::process::Child, wanted: &str) -> String {
    use std::io::BufRead;
    let stderr = child.stderr.take().unwrap();
    let wanted = wanted.to_string();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut read = String::new();
        for line in std::io::BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            read.push_str(&line);
            read.push('\n');
            if line.contains(&wanted) {
                let _ = tx.send(Ok(read));
                return;
            }
        }
        let _ = tx.send(Err(read));
    });
    match rx.recv_timeout(Duration::from_secs(20)) {
        Ok(Ok(read)) => read,
        Ok(Err(read)) => panic!("the bless never waited for the lock; its stderr:\n{read}"),
        Err(_) => panic!("the bless did not say it waits for the lock within 20 s"),
    }
}
