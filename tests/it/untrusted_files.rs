//! Untrusted files, end to end through the real binary (issue 29, items 4 to 11): special
//! files (FIFOs, /dev/zero) where a regular file belongs, `merge -o` into a leg's folder,
//! `ci` with workload files relative to the profile, `trend` on a non-ASCII commit and on a
//! long history, a trace longer than the duration cap, and crafted numbers in results,
//! baselines, profiles and flags. Each is refused with exit 2 (bad input) and a message
//! naming the file and the field, quickly, without a panic. Traffic stays on 127.0.0.1.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::common::*;

/// Runs `cmd`, killing it past `limit`; returns the output and how long it ran.
fn timed(cmd: &mut Command, limit: Duration, what: &str) -> (Output, Duration) {
    crate::common::share_machine();
    let started = Instant::now();
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = wait_with_deadline(child, limit, what);
    (out, started.elapsed())
}

fn cli(args: &[&str]) -> Command {
    let mut cmd = crate::common::command();
    cmd.args(args);
    cmd
}

/// Exit 2, no panic, and every one of `says` in the output.
fn refused(out: &Output, says: &[&str], what: &str) {
    let t = text(out);
    assert_eq!(code(out), 2, "{what}: {t}");
    assert!(!t.contains("panicked"), "{what}: {t}");
    for s in says {
        assert!(t.contains(s), "{what}: expected {s:?} in {t}");
    }
}

/// One complete run of the instant simulator (made once, shared by the tests that edit a
/// copy of its results.json): its results.json without the client-bound flags.
fn quick_results() -> &'static Path {
    static RESULTS: OnceLock<PathBuf> = OnceLock::new();
    RESULTS.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap().keep();
        let sim = Sim::start(1, &["--preset", "instant"]);
        let profile = write_profile(&dir, "quick", &sim.urls, QUICK_BODY);
        bench_ok(&profile, &dir.join("out"));
        without_client_flags(&dir.join("out/results.json"))
    })
}

/// A copy of the shared results in `dir`, edited by `edit`.
fn edited_results(dir: &Path, name: &str, edit: impl FnOnce(&mut serde_json::Value)) -> PathBuf {
    let mut v = read_json(quick_results());
    edit(&mut v);
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_string_pretty(&v).unwrap()).unwrap();
    path
}

/// Item 4: a FIFO or /dev/zero as prompts_file, dataset, trace or tokenizer once hung
/// `bench` (the profile hash streamed it forever, or waited for a writer). Now each is
/// refused at once, exit 2, naming the field and the file.
#[test]
fn special_files_in_a_profile_are_refused_at_once_by_bench_and_ci() {
    let sim = Sim::start(1, &["--preset", "instant"]);
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    mkfifo(&fifo);
    let f = fifo.display().to_string();
    let cases: Vec<(&str, String, &str, String)> = vec![
        (
            "prompts_file FIFO",
            format!("[workload]\nmax_tokens = 8\nprompts_file = {f:?}\n[sweep]\nconcurrency = [1]\n"),
            "workload.prompts_file",
            f.clone(),
        ),
        (
            "prompts_file /dev/zero",
            "[workload]\nmax_tokens = 8\nprompts_file = \"/dev/zero\"\n[sweep]\nconcurrency = [1]\n"
                .into(),
            "workload.prompts_file",
            "/dev/zero".into(),
        ),
        (
            "dataset FIFO",
            format!(
                "[workload]\nmax_tokens = 8\ndataset = {{ path = {f:?}, format = \"sharegpt\" }}\n\
                 [sweep]\nconcurrency = [1]\n"
            ),
            "workload.dataset.path",
            f.clone(),
        ),
        (
            "trace /dev/zero",
            "[workload]\nmax_tokens = 8\n[sweep]\ntrace = { path = \"/dev/zero\" }\n".into(),
            "sweep.trace.path",
            "/dev/zero".into(),
        ),
        (
            "tokenizer /dev/zero",
            "[workload]\nmax_tokens = 8\ninput_tokens = 8\ntokenizer = \"/dev/zero\"\n\
             [sweep]\nconcurrency = [1]\n"
                .into(),
            "workload.tokenizer",
            "/dev/zero".into(),
        ),
    ];
    for (i, (what, body, field, file)) in cases.iter().enumerate() {
        let profile = write_profile(dir.path(), &format!("p{i}"), &sim.urls, body);
        let out = dir.path().join(format!("out{i}"));
        let (o, took) = timed(
            bench_command(&profile, &out).arg("--no-progress"),
            Duration::from_secs(20),
            what,
        );
        refused(&o, &[field, file, "not a regular file"], what);
        assert!(took < Duration::from_secs(3), "{what}: took {took:?}");
    }

    // `ci` hashes the profile at the baseline's ref before anything else.
    let repo = dir.path().join("repo");
    std::fs::create_dir_all(repo.join("b")).unwrap();
    git(&repo, &["init", "-q"]);
    write_profile(
        &repo.join("b"),
        "x",
        &sim.urls,
        &format!(
            "[workload]\nmax_tokens = 8\ndataset = {{ path = {f:?}, format = \"sharegpt\" }}\n\
             [sweep]\nconcurrency = [1]\n"
        ),
    );
    std::fs::write(
        repo.join("b/x.toml"),
        baseline_text("x.profile.toml", "sha256:0", &[]),
    )
    .unwrap();
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-qm", "x"]);
    let (o, took) = timed(
        cli(&[
            "ci",
            "--allow-client-bound",
            "--baseline",
            "b/x.toml",
            "--baseline-ref",
            "HEAD",
        ])
        .current_dir(&repo),
        Duration::from_secs(20),
        "ci",
    );
    refused(
        &o,
        &["workload.dataset.path", &f, "not a regular file"],
        "ci",
    );
    assert!(took < Duration::from_secs(3), "ci took {took:?}");
}

/// A baseline file: `sessions` as (measured_at, commit, tok/s of the trials) at C=1.
fn baseline_text(
    profile: &str,
    hash: &str,
    sessions: &[(String, Option<String>, Vec<f64>)],
) -> String {
    let mut t = format!(
        "schema_version = 1\nname = \"x\"\nprofile = \"{profile}\"\nprofile_hash = \"{hash}\"\n\
         [environment]\nendpoints = 1\n[gate]\n"
    );
    let default = [("2026-01-01T00:00:00Z".to_string(), None, vec![1.0, 1.0])];
    let sessions = if sessions.is_empty() {
        &default[..]
    } else {
        sessions
    };
    for (at, commit, tok) in sessions {
        t.push_str(&format!(
            "[[sessions]]\nmeasured_at = \"{at}\"\ntool = \"t\"\n"
        ));
        if let Some(c) = commit {
            t.push_str(&format!("commit = {c:?}\n"));
        }
        t.push_str(&format!(
            "[[sessions.levels]]\nconcurrency = 1\ntok_per_s = {tok:?}\n"
        ));
    }
    t
}

/// Item 5: `merge --from ci -o ci/leg` once dropped that leg (its files were taken for an
/// earlier merge's output) and overwrote its regression verdict with the combined "pass".
/// Now an output folder holding a leg's files is refused, and the leg's files stay.
#[test]
fn merge_into_a_legs_folder_is_refused_and_the_leg_kept() {
    let dir = tempfile::tempdir().unwrap();
    let ci = dir.path().join("ci");
    let results = quick_results();
    // A baseline at the run's own speed (a pass, or inconclusive: the instant simulator's
    // trials spread widely) and one a hundred times as fast (a regression past the guard).
    let blessed = dir.path().join("same.toml");
    let o = bless(results, &blessed, &[]);
    assert_eq!(code(&o), 0, "{}", text(&o));
    let mut faster: toml::Value =
        toml::from_str(&std::fs::read_to_string(&blessed).unwrap()).unwrap();
    for s in faster["sessions"].as_array_mut().unwrap() {
        for l in s["levels"].as_array_mut().unwrap() {
            for v in l["tok_per_s"].as_array_mut().unwrap() {
                *v = toml::Value::Float(v.as_float().unwrap() * 100.0);
            }
        }
    }
    let faster_path = dir.path().join("faster.toml");
    std::fs::write(&faster_path, toml::to_string(&faster).unwrap()).unwrap();
    for (leg, baseline) in [("slow", &faster_path), ("ok", &blessed)] {
        let d = ci.join(leg);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::copy(results, d.join("results.json")).unwrap();
        let verdict = d.join("verdict.json");
        let o = gate(results, baseline, &["--json", verdict.to_str().unwrap()]);
        assert!(verdict.is_file(), "{leg}: {}", text(&o));
        if leg == "slow" {
            assert_eq!(code(&o), 1, "{leg}: {}", text(&o));
        }
    }
    let slow_verdict = std::fs::read(ci.join("slow/verdict.json")).unwrap();
    let o = run(&[
        "merge",
        "--from",
        ci.to_str().unwrap(),
        "-o",
        ci.join("slow").to_str().unwrap(),
    ]);
    refused(&o, &["slow", "-o"], "merge into a leg");
    assert_eq!(
        std::fs::read(ci.join("slow/verdict.json")).unwrap(),
        slow_verdict
    );
    // Named files: an output folder holding one of them is refused too.
    let o = run(&[
        "merge",
        "--verdict",
        ci.join("ok/verdict.json").to_str().unwrap(),
        "-o",
        ci.join("ok").to_str().unwrap(),
    ]);
    refused(&o, &["-o"], "merge into a named file's folder");
    // Into a folder of its own it merges, the regression winning.
    let o = run(&[
        "merge",
        "--from",
        ci.to_str().unwrap(),
        "-o",
        ci.join("merged").to_str().unwrap(),
    ]);
    assert_eq!(code(&o), 1, "{}", text(&o));
}

/// Item 6: `ci` once read the profile's dataset, trace and tokenizer relative to the working
/// directory (only prompts_file was taken relative to the profile, as bench and bless take
/// all of them). Here the dataset sits beside the profile: the check reaches the health wait.
#[test]
fn ci_reads_workload_files_relative_to_the_profile() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    std::fs::create_dir_all(repo.join("b")).unwrap();
    git(&repo, &["init", "-q"]);
    std::fs::write(
        repo.join("b/d.json"),
        r#"[{"conversations": [{"from": "human", "value": "hello there"}, {"from": "gpt", "value": "hi"}]}]"#,
    )
    .unwrap();
    let dead = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let profile = write_profile(
        &repo.join("b"),
        "x",
        &[format!("http://127.0.0.1:{dead}")],
        "[workload]\nmax_tokens = 8\ndataset = { path = \"d.json\", format = \"sharegpt\" }\n\
         [sweep]\nconcurrency = [1]\n",
    );
    let hash = throughline::profile::Profile::load(&profile)
        .unwrap()
        .canonical_hash()
        .unwrap();
    std::fs::write(
        repo.join("b/x.toml"),
        baseline_text("x.profile.toml", &hash, &[]),
    )
    .unwrap();
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-qm", "x"]);
    let (o, _) = timed(
        cli(&[
            "ci",
            "--allow-client-bound",
            "--baseline",
            "b/x.toml",
            "--baseline-ref",
            "HEAD",
            "--wait-healthy",
            "1s",
        ])
        .current_dir(&repo),
        Duration::from_secs(30),
        "ci",
    );
    refused(&o, &["not healthy after"], "ci with a relative dataset");
}

/// Sessions a day apart from 2026-01-01, the given tok/s each, the commit of session `i`.
fn history(
    values: &[f64],
    commit: impl Fn(usize) -> Option<String>,
) -> Vec<(String, Option<String>, Vec<f64>)> {
    let start = time::OffsetDateTime::parse(
        "2026-01-01T00:00:00Z",
        &time::format_description::well_known::Rfc3339,
    )
    .unwrap();
    values
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let at = (start + time::Duration::hours(i as i64))
                .format(&time::format_description::well_known::Rfc3339)
                .unwrap();
            (at, commit(i), vec![v * 0.99, *v, v * 1.01])
        })
        .collect()
}

/// Item 7: `trend` once panicked (exit 101) cutting a non-ASCII commit at byte 10, and
/// `bless --commit` accepts any text.
#[test]
fn trend_shows_a_non_ascii_commit() {
    let dir = tempfile::tempdir().unwrap();
    let values: Vec<f64> = (0..16)
        .map(|i| if i < 8 { 1000.0 } else { 800.0 })
        .collect();
    let sessions = history(&values, |i| Some(format!("çé{i}ççççççççç")));
    let b = dir.path().join("b.toml");
    std::fs::write(&b, baseline_text("p.toml", "sha256:0", &sessions)).unwrap();
    let out = dir.path().join("trend");
    let o = run(&[
        "trend",
        "-b",
        b.to_str().unwrap(),
        "--no-git",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code(&o), 1, "{}", text(&o));
    assert!(text(&o).contains("çé8"), "{}", text(&o));
}

/// Item 8: `trend`'s change-point search was quadratic in sessions for each of its 999
/// shuffles: 2,000 sessions ran past a minute (40,000 asked for 12.8 GB). Now it tests a
/// window of the latest sessions, says so, and finishes in seconds.
#[test]
fn trend_on_a_long_history_is_bounded_and_says_what_it_tested() {
    let dir = tempfile::tempdir().unwrap();
    let values: Vec<f64> = (0..2000)
        .map(|i| {
            1000.0 * [1.0, 1.01, 0.99, 1.005, 0.995][i % 5] * if i >= 1990 { 0.9 } else { 1.0 }
        })
        .collect();
    let b = dir.path().join("b.toml");
    std::fs::write(
        &b,
        baseline_text("p.toml", "sha256:0", &history(&values, |_| None)),
    )
    .unwrap();
    let out = dir.path().join("trend");
    let (o, took) = timed(
        &mut cli(&[
            "trend",
            "-b",
            b.to_str().unwrap(),
            "--no-git",
            "-o",
            out.to_str().unwrap(),
        ]),
        Duration::from_secs(40),
        "trend over 2,000 sessions",
    );
    assert_eq!(code(&o), 1, "{}", text(&o));
    assert!(took < Duration::from_secs(30), "took {took:?}");
    let t = text(&o);
    assert!(
        t.contains("latest") && t.contains("of 2000 sessions"),
        "{t}"
    );
    let md = std::fs::read_to_string(out.join("trend.md")).unwrap();
    assert!(md.contains("of 2000 sessions"), "{md}");
}

/// Item 9: files read whole once read /dev/zero until memory ran out, or waited on a FIFO
/// for a writer: now refused at once, naming the flag and the file.
#[test]
fn special_files_given_as_flags_are_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    mkfifo(&fifo);
    let f = fifo.to_str().unwrap();
    let out = dir.path().join("merged");
    let o = out.to_str().unwrap();
    let cases: Vec<(&str, Vec<&str>, &str)> = vec![
        (
            "merge --verdict /dev/zero",
            vec!["merge", "--verdict", "/dev/zero", "-o", o],
            "/dev/zero",
        ),
        (
            "merge --verdict FIFO",
            vec!["merge", "--verdict", f, "-o", o],
            f,
        ),
        (
            "plan --catalog /dev/zero",
            vec!["plan", "--output-tokens", "1e9", "--catalog", "/dev/zero"],
            "/dev/zero",
        ),
        (
            "plan --model-config FIFO",
            vec![
                "plan",
                "--output-tokens",
                "1e9",
                "--model-config",
                f,
                "--params",
                "8",
            ],
            f,
        ),
        (
            "plan --model-config /dev/zero",
            vec![
                "plan",
                "--output-tokens",
                "1e9",
                "--model-config",
                "/dev/zero",
                "--params",
                "8",
            ],
            "/dev/zero",
        ),
        (
            "serve-sim --config /dev/zero",
            vec!["serve-sim", "--port", "0", "--config", "/dev/zero"],
            "/dev/zero",
        ),
        (
            "serve-sim --config FIFO",
            vec!["serve-sim", "--port", "0", "--config", f],
            f,
        ),
    ];
    for (what, args, file) in cases {
        let (o, took) = timed(&mut cli(&args), Duration::from_secs(10), what);
        refused(&o, &[file, "not a regular file"], what);
        assert!(took < Duration::from_secs(2), "{what}: took {took:?}");
    }
}

/// Item 10: a trace replay was not held to the 7-day cap of `sweep.duration`: a trace
/// spanning years (or a tiny speedup) was accepted and waited silently. Now it is refused
/// before anything is sent; one within the cap says how long it will take before it starts.
#[test]
fn a_trace_past_the_duration_cap_is_refused_and_a_replay_says_how_long() {
    let sim = Sim::start(1, &["--preset", "instant"]);
    let dir = tempfile::tempdir().unwrap();
    let rows = |span: f64| {
        format!(
            "{{\"timestamp\": 0, \"input_tokens\": 4, \"output_tokens\": 4}}\n\
             {{\"timestamp\": {span}, \"input_tokens\": 4, \"output_tokens\": 4}}\n"
        )
    };
    std::fs::write(dir.path().join("long.jsonl"), rows(8.0 * 86400.0)).unwrap();
    std::fs::write(dir.path().join("slow.jsonl"), rows(1000.0)).unwrap();
    std::fs::write(dir.path().join("short.jsonl"), rows(0.2)).unwrap();
    for (name, spec) in [
        ("long", "{ path = \"long.jsonl\" }"),
        ("slow", "{ path = \"slow.jsonl\", speedup = 0.001 }"),
    ] {
        let profile = write_profile(
            dir.path(),
            name,
            &sim.urls,
            &format!("[workload]\nmax_tokens = 8\n[sweep]\ntrace = {spec}\ntrials = 2\n"),
        );
        let (o, took) = timed(
            bench_command(&profile, &dir.path().join(name)).arg("--no-progress"),
            Duration::from_secs(10),
            name,
        );
        refused(
            &o,
            &["sweep.trace", &format!("{name}.jsonl"), "7days"],
            name,
        );
        assert!(took < Duration::from_secs(3), "{name}: took {took:?}");
    }
    let profile = write_profile(
        dir.path(),
        "short",
        &sim.urls,
        "[workload]\nmax_tokens = 8\ndegenerate_below = 1\n\
         [sweep]\ntrace = { path = \"short.jsonl\" }\ntrials = 2\n",
    );
    let o = bench_ok(&profile, &dir.path().join("short"));
    let t = text(&o);
    assert!(t.contains("trace replay") && t.contains("2 trials"), "{t}");
}

/// Item 11: crafted numbers. Failure counts that wrap to 0, figures of 1e308 (finite, but
/// their sums are not), non-finite or non-positive baseline latencies, a histogram whose
/// weights sum to inf, `--completions 1e23`, and a 4,000-character `started_at`.
#[test]
fn crafted_numbers_are_refused_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let p = |x: &Path| x.to_str().unwrap().to_string();
    let blessed = dir.path().join("b.toml");
    let o = bless(quick_results(), &blessed, &[]);
    assert_eq!(code(&o), 0, "{}", text(&o));

    // Two failure classes of 2^63 each: sent 0 = succeeded 0 + (2^63 + 2^63 wrapped).
    let wrap = edited_results(dir.path(), "wrap.json", |v| {
        let t = &mut v["levels"][0]["trials"][0];
        t["requests_sent"] = serde_json::json!(0u64);
        t["succeeded"] = serde_json::json!(0u64);
        t["failed"] = serde_json::json!({"connect": 1u64 << 63, "timeout": 1u64 << 63});
    });
    let o = gate(&wrap, &blessed, &[]);
    refused(&o, &["wrap.json", "failed"], "wrapping failure counts");

    // 1e308 tok/s: finite, but a mean of two is not.
    let huge = edited_results(dir.path(), "huge.json", |v| {
        for t in v["levels"][0]["trials"].as_array_mut().unwrap() {
            t["output_tok_per_s"] = serde_json::json!(1e308);
        }
    });
    let o = gate(&huge, &blessed, &[]);
    refused(
        &o,
        &["huge.json", "output_tok_per_s"],
        "1e308 tok/s in results",
    );
    let o = run(&["plan", "-r", &p(&huge), "--output-tokens", "1e9"]);
    refused(
        &o,
        &["huge.json", "output_tok_per_s"],
        "1e308 tok/s into plan",
    );

    // Baseline latencies that would switch the latency gate off (0 where the baseline
    // gates on that latency: an instant server measures 0 ms).
    let text_b = std::fs::read_to_string(&blessed).unwrap() + "[gate.latency]\nttft_p99 = 0.1\n";
    for bad in ["nan", "0.0", "-5.0", "inf", "1e308"] {
        let b = dir.path().join("lat.toml");
        // The first session's ttft_p99_ms array (written over lines by bless), replaced.
        let from = text_b.find("ttft_p99_ms = [").unwrap();
        let to = from + text_b[from..].find(']').unwrap() + 1;
        let edited = format!(
            "{}ttft_p99_ms = [{bad}, 10.0, 10.0, 10.0, 10.0]{}",
            &text_b[..from],
            &text_b[to..]
        );
        std::fs::write(&b, edited).unwrap();
        let o = gate(quick_results(), &b, &[]);
        refused(&o, &["lat.toml", "ttft_p99_ms"], bad);
    }

    // A histogram whose weights sum to inf: the profile's field is named, not a flag.
    let profile = dir.path().join("h.toml");
    std::fs::write(
        &profile,
        "name = \"h\"\n[target]\nendpoints = [\"http://127.0.0.1:9\"]\n[workload]\nmax_tokens = 100\n\
         input_tokens = 4\noutput_length = { distribution = \"histogram\", bins = [[1, 10, 1e308], [10, 20, 1e308]] }\n\
         [sweep]\nconcurrency = [1]\n",
    )
    .unwrap();
    let o = run(&[
        "plan",
        "--lengths-from",
        &p(&profile),
        "--completions",
        "1000",
    ]);
    refused(
        &o,
        &["workload.output_length", "weights"],
        "histogram summing to inf",
    );
    assert!(!text(&o).contains("--avg-output-tokens"), "{}", text(&o));

    // A catalog figure of 1e308: days = tokens / it printed as 0.0 s.
    let catalog = dir.path().join("c.toml");
    std::fs::write(
        &catalog,
        "[[node]]\nname = \"a\"\ngpu = \"H100\"\ngpus_per_node = 8\nbasis = \"stated\"\nmodel = \"m\"\n\
         tok_s_per_node = 1e308\n",
    )
    .unwrap();
    let o = run(&["plan", "--output-tokens", "1e9", "--catalog", &p(&catalog)]);
    refused(
        &o,
        &["c.toml", "tok_s_per_node", "1e308", "up to 1e12"],
        "1e308 tok/s in a catalog",
    );

    let o = run(&[
        "plan",
        "--completions",
        "1e23",
        "--avg-output-tokens",
        "100",
    ]);
    refused(&o, &["--completions", "1e23"], "--completions 1e23");

    // A results.json whose started_at is 4,000 characters: the next run still starts, and
    // keeps it under a name the file system takes.
    let sim = Sim::start(1, &["--preset", "instant"]);
    let out = dir.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    edited_results(&out, "results.json", |v| {
        v["started_at"] = serde_json::json!("9".repeat(4000));
    });
    let profile = write_profile(dir.path(), "again", &sim.urls, QUICK_BODY);
    bench_ok(&profile, &out);
    let kept: Vec<_> = std::fs::read_dir(out.join("earlier"))
        .unwrap()
        .map(|e| e.unwrap().file_name().len())
        .collect();
    assert!(kept.len() == 1 && kept[0] <= 100, "{kept:?}");
}
