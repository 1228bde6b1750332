//! The README's promises that no other test decides (issue 21, items 3-7), each checked so
//! that breaking the promise fails it: the gate's settings come from the baseline; incomplete
//! results can be neither gated nor blessed, and bless's other refusals with their exit
//! codes; failures never count in throughput; open-loop latency from the schedule, the
//! `max_concurrency` cap and an absolute schedule; atomic writes survive a kill; the profile
//! hash ignores the key variable and the gate settings.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::common::*;
use serde_json::Value;

/// One level, five trials (the gate's default `min_trials`): 8 requests of 16 tokens each.
const CLOSED: &str = "[workload]\ninput_tokens = 16\nmax_tokens = 16\nignore_eos = true\n\
                      [sweep]\nconcurrency = [2]\nrequests_per_level = 8\nwarmup_requests = 2\n\
                      trials = 5\nrequest_timeout = \"20s\"\n";

/// Every decode step lasts 5 ms, on deadlines counted from the first while the simulator is
/// busy: figures that do not depend on the batch or the machine's load to within far less than
/// the effects gated below.
const FIXED_5MS: [&str; 4] = ["--preset", "fixed", "--token-delay-ms", "5"];

/// Runs `body` (a profile without its name and endpoints) against `sim` into `dir/name`;
/// returns the results file and the bench's exit code.
fn bench(sim: &Sim, dir: &Path, name: &str, body: &str) -> (PathBuf, i32) {
    let profile = write_profile(dir, name, &sim.urls, body);
    let out = dir.join(name);
    let o = run_bench_cli(&profile, &out, &[]);
    let results = out.join("results.json");
    assert!(results.is_file(), "no results.json: {}", text(&o));
    (results, code(&o))
}

/// A copy of `results` with `edit` applied, written beside it as `name`.
fn edited(results: &Path, name: &str, edit: impl FnOnce(&mut Value)) -> PathBuf {
    let mut v = read_json(results);
    edit(&mut v);
    let path = results.with_file_name(name);
    std::fs::write(&path, serde_json::to_string(&v).unwrap()).unwrap();
    path
}

/// Item 3: a pull request's profile cannot loosen its own gate. The baseline was blessed
/// with the default settings (3% minimum effect, 25% guard); the candidate's profile asks
/// for a 50% minimum effect, a 90% guard and alpha 0.4, and runs 40% slower. With the
/// baseline's settings the guard fires (exit 1); with the profile's it would not.
#[test]
fn the_gate_settings_come_from_the_baseline_not_the_pull_requests_profile() {
    let _turn = timing_lock();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let base = Sim::start(1, &FIXED_5MS);
    let (blessed, rc) = bench(&base, d, "gated", CLOSED);
    assert_eq!(rc, 0);
    let baseline = d.join("gated.toml");
    let o = bless(&without_client_flags(&blessed), &baseline, &[]);
    assert_eq!(code(&o), 0, "{}", text(&o));

    let slow = Sim::start(1, &[&FIXED_5MS[..], &["--slowdown", "1.67"]].concat());
    let loose = format!(
        "{CLOSED}[gate]\nalpha = 0.4\nmin_effect = 0.5\nguard = 0.9\nfail_on_inconclusive = false\n"
    );
    // Another folder: the profile file has the same name.
    let pr = d.join("pr");
    std::fs::create_dir(&pr).unwrap();
    let (candidate, rc) = bench(&slow, &pr, "gated", &loose);
    assert_eq!(rc, 0);
    let ran = read_json(&candidate);
    assert_eq!(
        ran["profile"]["gate"]["min_effect"], 0.5,
        "the profile as run"
    );
    assert_eq!(
        ran["profile_hash"],
        read_json(&blessed)["profile_hash"],
        "gate settings are not in the profile hash"
    );

    let verdict = d.join("verdict.json");
    let o = gate(
        &candidate,
        &baseline,
        &["--json", verdict.to_str().unwrap()],
    );
    assert_eq!(code(&o), 1, "the baseline's 25% guard fires: {}", text(&o));
    let v = read_json(&verdict);
    assert_eq!(v["outcome"], "regression", "{v}");
    let used = &v["settings"];
    assert_eq!(used["min_effect"], 0.03, "{used}");
    assert_eq!(used["guard"], 0.25, "{used}");
    assert_eq!(used["alpha"], 0.01, "{used}");
}

/// Item 4: what bless and the gate refuse, each with the exit code the README gives it
/// (2: could not do the job; 3: not comparable), and no baseline written by a refusal.
#[test]
fn incomplete_results_and_bless_refusals_with_their_exit_codes() {
    let _turn = timing_lock();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let sim = Sim::start(1, &FIXED_5MS);
    let (good, rc) = bench(&sim, d, "refusals", CLOSED);
    assert_eq!(rc, 0);
    let good = without_client_flags(&good);
    let baseline = d.join("refusals.toml");

    let refused = |results: &Path, extra: &[&str], exit: i32, says: &str| {
        let before = std::fs::read(&baseline).ok();
        let o = bless(results, &baseline, extra);
        assert_eq!(code(&o), exit, "{says}: {}", text(&o));
        assert!(text(&o).contains(says), "wanted {says:?}: {}", text(&o));
        assert_eq!(
            std::fs::read(&baseline).ok(),
            before,
            "a refusal wrote the baseline"
        );
    };

    // Incomplete: neither blessed nor gated (a copy of a good run, marked as a stopped one).
    let stopped = edited(&good, "stopped.json", |v| v["complete"] = false.into());
    refused(&stopped, &[], 2, "incomplete");
    let o = bless(&good, &baseline, &[]);
    assert_eq!(code(&o), 0, "{}", text(&o));
    let o = gate(&stopped, &baseline, &[]);
    assert_eq!(code(&o), 2, "{}", text(&o));
    assert!(text(&o).contains("incomplete"), "{}", text(&o));
    // The same run, complete, gates (so it is the mark that was refused).
    let o = gate(&good, &baseline, &[]);
    assert_ne!(code(&o), 2, "{}", text(&o));

    // Too few trials for the gate's min_trials (5): not comparable.
    let few = CLOSED.replace("trials = 5", "trials = 2");
    let other = d.join("few");
    std::fs::create_dir(&other).unwrap();
    let (few, rc) = bench(&sim, &other, "refusals", &few);
    assert_eq!(rc, 0);
    refused(
        &without_client_flags(&few),
        &["--replace"],
        3,
        "has 2 trials",
    );

    // A level over the error limit: the bench exits 2, and bless will not take it.
    let failing = Sim::start(
        1,
        &[
            &FIXED_5MS[..],
            &["--fault-http-error-rate", "0.5", "--seed", "3"],
        ]
        .concat(),
    );
    let errors = d.join("errors");
    std::fs::create_dir(&errors).unwrap();
    let (over, rc) = bench(&failing, &errors, "refusals", CLOSED);
    assert_eq!(rc, 2, "error rate over max_error_rate");
    refused(&without_client_flags(&over), &[], 2, "max_error_rate");

    // Open loop: levels keyed by rate.
    let open = "[workload]\ninput_tokens = 16\nmax_tokens = 4\nignore_eos = true\ndegenerate_below = 1\n[sweep]\n\
                rates = [20.0]\narrival = \"constant\"\nduration = \"1s\"\ntrials = 5\n\
                request_timeout = \"20s\"\n";
    let ol = d.join("open");
    std::fs::create_dir(&ol).unwrap();
    let (open, rc) = bench(&sim, &ol, "refusals", open);
    assert_eq!(rc, 0);
    refused(&without_client_flags(&open), &["--replace"], 2, "open loop");

    // Appending a run of another profile or another environment: not comparable.
    let longer = CLOSED.replace("max_tokens = 16", "max_tokens = 12");
    let lg = d.join("longer");
    std::fs::create_dir(&lg).unwrap();
    let (longer, rc) = bench(&sim, &lg, "refusals", &longer);
    assert_eq!(rc, 0);
    refused(&without_client_flags(&longer), &[], 3, "use --replace");
    let elsewhere = edited(&good, "elsewhere.json", |v| {
        v["environment"]["model"] = "another-model".into()
    });
    refused(&elsewhere, &[], 3, "use --replace");
    // And the refusals were about the mismatch: the same run appends.
    let o = bless(&good, &baseline, &[]);
    assert_eq!(code(&o), 0, "{}", text(&o));
    assert!(text(&o).contains("2 session(s) now"), "{}", text(&o));
}

/// Item 5: failed requests never count in throughput. Against a simulator that fails a
/// third or more of its requests (some after their first tokens), every trial's `output_tokens` is
/// the sum over its successful journal lines, the failed ones' tokens are kept apart, and
/// `window_s` is the last end minus the first send.
#[test]
fn failures_never_count_in_throughput() {
    let _turn = timing_lock();
    let dir = tempfile::tempdir().unwrap();
    let sim = Sim::start(
        1,
        &[
            "--preset",
            "fixed",
            "--token-delay-ms",
            "2",
            "--seed",
            "11",
            "--fault-reset-rate",
            "0.15",
            "--fault-degenerate-rate",
            "0.15",
            "--fault-http-error-rate",
            "0.1",
        ],
    );
    let body = "[workload]\ninput_tokens = 16\nmax_tokens = 16\nignore_eos = true\n\
                degenerate_below = 8\n[sweep]\nconcurrency = [1, 4]\nrequests_per_level = 24\n\
                warmup_requests = 2\ntrials = 6\nrequest_timeout = \"20s\"\nmax_error_rate = 1.0\n";
    let (results, rc) = bench(&sim, dir.path(), "failing", body);
    assert_eq!(rc, 0);
    let result = read_json(&results);
    let journal = read_journal(dir.path().join("failing").as_path());
    let f = |l: &Value, k: &str| l[k].as_f64().unwrap_or_else(|| panic!("{k} in {l}"));
    let mut failed_tokens_seen = 0;
    let mut failed_at_an_end = 0;
    for level in result["levels"].as_array().unwrap() {
        let c = level["concurrency"].as_u64().unwrap();
        for t in level["trials"].as_array().unwrap() {
            let n = t["trial"].as_u64().unwrap();
            let lines: Vec<&Value> = journal
                .iter()
                .filter(|l| l["concurrency"].as_u64() == Some(c) && l["trial"].as_u64() == Some(n))
                .collect();
            assert_eq!(lines.len() as u64, t["requests_sent"].as_u64().unwrap());
            let tokens = |ok: bool| -> u64 {
                lines
                    .iter()
                    .filter(|l| l["error"].is_null() == ok)
                    .map(|l| l["output_tokens"].as_u64().unwrap())
                    .sum()
            };
            assert_eq!(
                t["output_tokens"].as_u64(),
                Some(tokens(true)),
                "C={c} trial {n}: {t}"
            );
            assert_eq!(
                t["failed_output_tokens"].as_u64(),
                Some(tokens(false)),
                "{t}"
            );
            failed_tokens_seen += tokens(false);
            let first = lines
                .iter()
                .map(|l| l["sent_s"].as_f64().unwrap())
                .fold(f64::MAX, f64::min);
            let last = lines
                .iter()
                .map(|l| l["end_s"].as_f64().unwrap())
                .fold(f64::MIN, f64::max);
            // Count trials where a failed request opened or closed the window, so the
            // check below decides whether failed requests count in it.
            let earliest = lines
                .iter()
                .min_by(|a, b| f(a, "sent_s").total_cmp(&f(b, "sent_s")));
            let latest = lines
                .iter()
                .max_by(|a, b| f(a, "end_s").total_cmp(&f(b, "end_s")));
            if [earliest, latest]
                .iter()
                .flatten()
                .any(|l| !l["error"].is_null())
            {
                failed_at_an_end += 1;
            }
            let window = t["window_s"].as_f64().unwrap();
            assert!(
                (window - (last - first)).abs() < 1e-5,
                "C={c} trial {n}: window_s {window} vs last end - first send {}",
                last - first
            );
            let tok_s = t["output_tok_per_s"].as_f64().unwrap();
            let expected = tokens(true) as f64 / window;
            assert!(
                (tok_s - expected).abs() <= 1e-6 * expected,
                "{tok_s} vs {expected}"
            );
        }
    }
    // The check had something to catch: failures that carried tokens.
    assert!(failed_tokens_seen > 0, "no failed request carried tokens");
    assert!(
        failed_at_an_end > 0,
        "no trial began or ended with a failed request"
    );
}

/// Item 6: open loop. A capped client (`max_concurrency = 1`) against a server that stalls
/// some requests 400 ms before its first byte: the requests behind a stall wait, and their
/// latency from the *schedule* shows the stall (coordinated omission) while latency from the
/// send does not; never more than one request is in flight; the schedule is absolute, so the
/// requests after a stall go out on their own times again.
#[test]
fn open_loop_latency_from_the_schedule_the_cap_and_an_absolute_schedule() {
    let _turn = timing_lock();
    let dir = tempfile::tempdir().unwrap();
    let sim = Sim::start(
        1,
        &[
            "--preset",
            "fixed",
            "--token-delay-ms",
            "2",
            "--seed",
            "5",
            "--fault-slow-first-byte-rate",
            "0.08",
            "--fault-slow-first-byte",
            "400ms",
        ],
    );
    let rate = 10.0;
    let body = format!(
        "[workload]\ninput_tokens = 16\nmax_tokens = 4\nignore_eos = true\ndegenerate_below = 1\n[sweep]\n\
         rates = [{rate:?}]\narrival = \"constant\"\nmax_concurrency = 1\nduration = \"4s\"\n\
         trials = 1\nrequest_timeout = \"20s\"\n"
    );
    let (results, rc) = bench(&sim, dir.path(), "open", &body);
    assert_eq!(rc, 0);
    let result = read_json(&results);
    let trial = &result["levels"][0]["trials"][0];
    let mut recs: Vec<Value> = read_journal(&dir.path().join("open"))
        .into_iter()
        .filter(|r| r["trial"].as_u64() == Some(1))
        .collect();
    recs.sort_by_key(|r| r["index"].as_u64().unwrap());
    assert!(recs.len() >= 30, "{} requests", recs.len());
    let f = |r: &Value, k: &str| r[k].as_f64().unwrap_or_else(|| panic!("{k} in {r}"));

    // The cap: no two requests overlap.
    for w in recs.windows(2) {
        assert!(
            f(&w[1], "sent_s") >= f(&w[0], "end_s") - 1e-6,
            "two requests in flight under max_concurrency = 1:\n{}\n{}",
            w[0],
            w[1]
        );
    }

    // The schedule is absolute: constant gaps of 1/rate from the first, whatever was late.
    let s0 = f(&recs[0], "scheduled_s");
    for (i, r) in recs.iter().enumerate() {
        let want = s0 + i as f64 / rate;
        assert!((f(r, "scheduled_s") - want).abs() < 1e-3, "{i}: {r}");
    }
    // Some sends were held behind a stall, and the first request whose time came after the
    // previous one ended went out on time again.
    let mut held = 0;
    let mut back_on_time = 0;
    let mut prev_end = f64::MIN;
    for r in &recs {
        let lag = f(r, "sent_s") - f(r, "scheduled_s");
        if lag > 0.2 {
            held += 1;
        }
        if f(r, "scheduled_s") > prev_end + 0.02 && held > 0 {
            assert!(
                lag < 0.05,
                "a send after the stall cleared is {lag} s late: {r}"
            );
            back_on_time += 1;
        }
        prev_end = f(r, "end_s");
    }
    assert!(held > 0, "no send was held: the stall did not happen");
    assert!(back_on_time > 0, "nothing was sent after a stall");

    // Coordinated omission: latency from the schedule holds the wait, latency from the send
    // does not; the results' figures are the journal's.
    let ok: Vec<&Value> = recs.iter().filter(|r| r["error"].is_null()).collect();
    let mut from_schedule: Vec<f64> = ok
        .iter()
        .map(|r| (f(r, "end_s") - f(r, "scheduled_s")) * 1000.0)
        .collect();
    from_schedule.sort_by(f64::total_cmp);
    let ol = &trial["open_loop"]["e2e_from_schedule_ms"];
    let max = ol["max"].as_f64().unwrap();
    assert!(
        (max - from_schedule.last().unwrap()).abs() < 0.01,
        "results' max {max} vs journal {:?}",
        from_schedule.last()
    );
    let held_latencies = ok
        .iter()
        .filter(|r| f(r, "sent_s") - f(r, "scheduled_s") > 0.2)
        .map(|r| (f(r, "end_s") - f(r, "scheduled_s")) * 1000.0)
        .collect::<Vec<_>>();
    for l in &held_latencies {
        assert!(
            *l > 200.0,
            "a held request's latency from the schedule is {l} ms"
        );
    }
    let mean_sched = ol["mean"].as_f64().unwrap();
    let mean_send = trial["e2e_ms"]["mean"].as_f64().unwrap();
    let journal_mean = from_schedule.iter().sum::<f64>() / from_schedule.len() as f64;
    assert!(
        (mean_sched - journal_mean).abs() < 0.01,
        "{mean_sched} vs {journal_mean}"
    );
    assert!(
        mean_sched > mean_send + 10.0,
        "the wait behind the stall is missing: from schedule {mean_sched} ms, from send {mean_send} ms"
    );
}

/// The child of [`an_atomic_write_killed_midway_leaves_the_earlier_file_whole`]: rewrites one
/// file for ever, alternating two contents. Runs only when that test starts it.
#[test]
#[ignore]
fn atomic_writer_child() {
    let Ok(path) = std::env::var("THROUGHLINE_ATOMIC_CHILD") else {
        return;
    };
    let path = PathBuf::from(path);
    let (a, b) = (vec![b'a'; ATOMIC_BYTES], vec![b'b'; ATOMIC_BYTES]);
    loop {
        throughline::fsutil::write_atomic(&path, &b).unwrap();
        throughline::fsutil::write_atomic(&path, &a).unwrap();
    }
}

const ATOMIC_BYTES: usize = 8 << 20;

/// Item 7: a process killed (SIGKILL) while it rewrites a file leaves the earlier file whole,
/// never a torn one. The child spends nearly all its time writing 8 MiB files; it is killed
/// at ten different moments.
#[test]
fn an_atomic_write_killed_midway_leaves_the_earlier_file_whole() {
    // Seconds of 8 MiB writes with fsync: not beside the timed benches.
    let _turn = timing_lock();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("results.json");
    throughline::fsutil::write_atomic(&path, &vec![b'a'; ATOMIC_BYTES]).unwrap();
    for (i, delay_ms) in [40, 75, 110, 150, 190, 230, 280, 330, 390, 450]
        .iter()
        .enumerate()
    {
        let mut child = own_test(module_path!(), "atomic_writer_child")
            .arg("--ignored")
            .env("THROUGHLINE_ATOMIC_CHILD", &path)
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(*delay_ms));
        child.kill().unwrap();
        let status = child.wait().unwrap();
        assert!(
            status.code().is_none(),
            "the writer ended on its own: {status}"
        );
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(
            bytes.len(),
            ATOMIC_BYTES,
            "kill {i} after {delay_ms} ms: a torn file"
        );
        let first = bytes[0];
        assert!(
            (first == b'a' || first == b'b') && bytes.iter().all(|&x| x == first),
            "kill {i} after {delay_ms} ms: mixed contents"
        );
    }
}

/// Item 7: the profile hash names what was measured; the key variable, the description and
/// the gate settings are not part of it, while the workload and the sweep are.
#[test]
fn the_profile_hash_ignores_the_key_variable_and_the_gate_settings() {
    use throughline::profile::Profile;
    let base = "name = \"h\"\n[target]\nendpoints = [\"http://127.0.0.1:1\"]\n\
                api_key_env = \"OPENAI_API_KEY\"\n[workload]\ninput_tokens = 16\n\
                max_tokens = 16\n[sweep]\nconcurrency = [1, 4]\ntrials = 5\n";
    let hash = |text: &str| {
        Profile::parse(text)
            .unwrap_or_else(|e| panic!("{e:#}\n{text}"))
            .canonical_hash()
            .unwrap()
    };
    let h = hash(base);
    let same = [
        base.replace("OPENAI_API_KEY", "ANOTHER_KEY"),
        base.replace("api_key_env = \"OPENAI_API_KEY\"\n", ""),
        format!(
            "{base}[gate]\nalpha = 0.05\nmin_effect = 0.1\nguard = 0.5\nmin_trials = 3\n\
             max_sessions = 4\nfail_on_inconclusive = true\n[gate.latency]\nttft_p99 = 0.2\n"
        ),
        base.replace("http://127.0.0.1:1", "http://127.0.0.1:2"),
    ];
    for text in &same {
        assert_eq!(hash(text), h, "the hash changed for:\n{text}");
    }
    // And it can tell: what is measured changes it.
    for text in [
        base.replace("max_tokens = 16", "max_tokens = 17"),
        base.replace("trials = 5", "trials = 6"),
        base.replace("concurrency = [1, 4]", "concurrency = [1, 8]"),
    ] {
        assert_ne!(hash(&text), h, "the hash did not change for:\n{text}");
    }
}
