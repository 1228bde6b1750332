//! Whole profiles parsed and validated: defaults, messages naming the line and field, the hash.

use super::*;
use std::time::Duration;

const GOOD: &str = r#"
name = "seed-122b"
[target]
endpoints = ["http://127.0.0.1:30000"]
[workload]
input_tokens = 1000
max_tokens = 1000
ignore_eos = true
[sweep]
concurrency = [1, 4, 16, 32, 64]
trials = 5
request_timeout = "2m"
"#;

/// Dataset, tokenizer and trace files are read relative to the profile and hashed by
/// content: the same bytes elsewhere are the same measurement, other bytes are not.
#[test]
fn workload_files_are_relative_and_hashed_by_content() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, body: &str| std::fs::write(dir.path().join(name), body).unwrap();
    write("d.jsonl", "{\"prompt\": \"a\", \"max_tokens\": 3}\n");
    write("t.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n");
    write("tokenizer.json", "{}");
    // A dataset profile, or (dataset "") a trace profile; both with the tokenizer.
    let profile = |dataset: &str, trace: &str| {
        let mut text = GOOD.replace("ignore_eos = true", "tokenizer = \".\"");
        if dataset.is_empty() {
            text = text.replace(
                "concurrency = [1, 4, 16, 32, 64]",
                &format!("trace = {{ path = \"{trace}\" }}"),
            );
        } else {
            text = text.replace(
                "tokenizer = \".\"",
                &format!(
                    "tokenizer = \".\"\ndataset = {{ path = \"{dataset}\", format = \"jsonl\" }}"
                ),
            );
        }
        let path = dir.path().join("p.toml");
        std::fs::write(&path, text).unwrap();
        Profile::load(&path).unwrap()
    };
    let p = profile("d.jsonl", "");
    assert_eq!(
        p.workload.dataset.as_ref().unwrap().path,
        dir.path().join("d.jsonl")
    );
    assert_eq!(
        p.workload.tokenizer.as_ref().unwrap(),
        &dir.path().join(".")
    );
    let h = p.canonical_hash().unwrap();
    write("copy.jsonl", "{\"prompt\": \"a\", \"max_tokens\": 3}\n");
    assert_eq!(profile("copy.jsonl", "").canonical_hash().unwrap(), h);
    write("copy.jsonl", "{\"prompt\": \"b\", \"max_tokens\": 3}\n");
    assert_ne!(profile("copy.jsonl", "").canonical_hash().unwrap(), h);
    let t = profile("", "t.csv");
    assert_eq!(t.sweep.trace.as_ref().unwrap().speedup, 1.0);
    let th = t.canonical_hash().unwrap();
    write("t2.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n");
    assert_eq!(profile("", "t2.csv").canonical_hash().unwrap(), th);
    write("t2.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n1,2,3\n");
    assert_ne!(profile("", "t2.csv").canonical_hash().unwrap(), th);
    write("tokenizer.json", "{ }");
    assert_ne!(profile("d.jsonl", "").canonical_hash().unwrap(), h);
}

#[test]
fn dataset_and_trace_conflicts_name_the_field() {
    let err = |from: &str, to: &str| {
        format!("{:#}", Profile::parse(&GOOD.replace(from, to)).unwrap_err())
    };
    let e = err(
        "ignore_eos = true",
        "prompts_file = \"p.jsonl\"\ndataset = { path = \"d\", format = \"sharegpt\" }",
    );
    assert!(
        e.contains("workload.prompts_file") && e.contains("line 8"),
        "{e}"
    );
    let e = err(
        "ignore_eos = true",
        "dataset = { path = \"d\", format = \"csv\" }",
    );
    assert!(e.contains("csv"), "{e}");
    let e = err("trials = 5", "trials = 5\ntrace = { path = \"t.csv\" }");
    assert!(
        e.contains("sweep.trace") && e.contains("remove `concurrency`"),
        "{e}"
    );
    let trace = |extra: &str| {
        GOOD.replace(
            "concurrency = [1, 4, 16, 32, 64]",
            &format!("trace = {{ path = \"t.csv\"{extra} }}"),
        )
    };
    let e = format!("{:#}", Profile::parse(&trace(", speedup = 0")).unwrap_err());
    assert!(e.contains("speedup 0"), "{e}");
    let e = format!(
        "{:#}",
        Profile::parse(&trace("").replace("trials = 5", "trials = 5\nrequests_per_level = 9"))
            .unwrap_err()
    );
    assert!(e.contains("sweep.requests_per_level"), "{e}");
    let e = format!(
        "{:#}",
        Profile::parse(&trace("").replace(
            "ignore_eos = true",
            "[workload.output_length]\ndistribution = \"fixed\"\nvalue = 5"
        ))
        .unwrap_err()
    );
    assert!(e.contains("workload.output_length"), "{e}");
    let p = Profile::parse(&trace(", speedup = 4.0, rows = 10")).unwrap();
    assert!(p.sweep.is_open_loop());
}

/// Multi-turn conversations: ShareGPT only, closed loop only, a bounded number of turns;
/// `history` only with more than one turn. Unset keys leave the profile hash as it was.
#[test]
fn multi_turn_settings_are_checked() {
    let with = |dataset: &str, sweep: &str| {
        let text = GOOD
            .replace("ignore_eos = true", &format!("dataset = {{ {dataset} }}"))
            .replace("concurrency = [1, 4, 16, 32, 64]", sweep);
        Profile::parse(&text).map_err(|e| format!("{e:#}"))
    };
    let closed = "concurrency = [1, 4]";
    let sharegpt = "path = \"d.json\", format = \"sharegpt\"";
    let p = with(
        &format!("{sharegpt}, turns = 4, history = \"dataset\""),
        closed,
    )
    .unwrap();
    let d = p.workload.dataset.as_ref().unwrap();
    assert_eq!((d.turns, d.history), (Some(4), Some(History::Dataset)));
    for (dataset, sweep, expect) in [
        (
            format!("{sharegpt}, turns = 0"),
            closed,
            "turns`: 0 is outside",
        ),
        (
            format!("{sharegpt}, turns = 257"),
            closed,
            "turns`: 257 is outside",
        ),
        (
            format!("{sharegpt}, history = \"server\""),
            closed,
            "needs `turns` above 1",
        ),
        (
            "path = \"d.jsonl\", format = \"jsonl\", turns = 2".to_string(),
            closed,
            "come from ShareGPT",
        ),
        (
            format!("{sharegpt}, turns = 2"),
            "rates = [1.0]",
            "run closed loop",
        ),
        (format!("{sharegpt}, history = \"mine\""), closed, "mine"),
    ] {
        let e = with(&dataset, sweep).unwrap_err();
        assert!(e.contains(expect), "{dataset} / {sweep}: {e}");
    }
    let completions = GOOD
        .replace("[target]\n", "[target]\napi = \"completions\"\n")
        .replace(
            "ignore_eos = true",
            &format!("dataset = {{ {sharegpt}, turns = 2 }}"),
        );
    let e = format!("{:#}", Profile::parse(&completions).unwrap_err());
    assert!(e.contains("need the chat API"), "{e}");
    let one = with(sharegpt, closed).unwrap();
    let json = serde_json::to_string(one.workload.dataset.as_ref().unwrap()).unwrap();
    assert!(
        !json.contains("turns") && !json.contains("history"),
        "{json}"
    );
}

#[test]
fn parses_with_defaults() {
    let p = Profile::parse(GOOD).unwrap();
    assert_eq!(p.target.model, ModelChoice::Auto);
    assert_eq!(p.target.api, Api::Chat);
    assert_eq!(p.sweep.request_timeout, Duration::from_secs(120));
    assert_eq!(p.sweep.requests_at(16), 64);
    assert_eq!(p.sweep.requests_at(1), 8);
    assert_eq!(p.gate.min_trials, 5);
    assert!(p.workload.stream);
}

#[test]
fn unknown_key_names_line_and_field() {
    let text = GOOD.replace("trials = 5", "trails = 5");
    let err = format!("{:#}", Profile::parse(&text).unwrap_err());
    assert!(err.contains("line 11"), "{err}");
    assert!(err.contains("trails"), "{err}");
}

#[test]
fn bad_value_names_field() {
    let text = GOOD.replace("concurrency = [1, 4, 16, 32, 64]", "concurrency = [1, 0]");
    let err = format!("{:#}", Profile::parse(&text).unwrap_err());
    assert!(
        err.contains("sweep.concurrency") && err.contains("line 10"),
        "{err}"
    );
    let text = GOOD.replace("request_timeout = \"2m\"", "request_timeout = \"soon\"");
    let err = format!("{:#}", Profile::parse(&text).unwrap_err());
    assert!(err.contains("line 12") && err.contains("soon"), "{err}");
}

#[test]
fn hash_ignores_endpoints_but_not_workload() {
    let a = Profile::parse(GOOD).unwrap().canonical_hash().unwrap();
    let moved = GOOD.replace("127.0.0.1:30000", "127.0.0.1:31000");
    let b = Profile::parse(&moved).unwrap().canonical_hash().unwrap();
    assert_eq!(a, b);
    let longer = GOOD.replace("max_tokens = 1000", "max_tokens = 1024");
    let c = Profile::parse(&longer).unwrap().canonical_hash().unwrap();
    assert_ne!(a, c);
    assert!(a.starts_with("sha256:") && a.len() == 7 + 64);
}

#[test]
fn open_loop_keys_parse_validate_and_change_the_hash() {
    let closed = Profile::parse(GOOD).unwrap();
    // Closed-loop profiles hash as before: the new keys are absent, not null.
    let sweep = serde_json::to_value(&closed.sweep).unwrap();
    for key in [
        "rates",
        "arrival",
        "duration",
        "warmup",
        "seed",
        "max_concurrency",
    ] {
        assert!(sweep.get(key).is_none(), "{key} in {sweep}");
    }
    let open_text = GOOD.replace(
        "concurrency = [1, 4, 16, 32, 64]",
        "rates = [10.0, 50.0]\nmax_concurrency = 64\narrival = \"gamma\"\ngamma_shape = 0.5\nseed = 3\nduration = \"30s\"\nwarmup = \"5s\"\ncooldown = \"5s\"",
    );
    let open = Profile::parse(&open_text).unwrap();
    assert!(open.sweep.is_open_loop());
    assert_eq!(open.sweep.trial_span(), Some(Duration::from_secs(40)));
    let h = open.canonical_hash().unwrap();
    assert_ne!(h, closed.canonical_hash().unwrap());
    let other_seed = Profile::parse(&open_text.replace("seed = 3", "seed = 4")).unwrap();
    assert_ne!(h, other_seed.canonical_hash().unwrap());
    // Round trip through JSON (results files carry the profile).
    let back: Profile = serde_json::from_value(serde_json::to_value(&open).unwrap()).unwrap();
    assert_eq!(back, open);

    for (bad, field) in [
        ("rates = [10.0]\nconcurrency = [2]", "sweep.rates"),
        ("rates = [0.0]\nrequests_per_level = 5", "sweep.rates"),
        ("rates = [5.0]", "sweep.rates"),
        ("concurrency = [2]\narrival = \"poisson\"", "sweep.arrival"),
        (
            "rates = [5.0]\nrequests_per_level = 5\narrival = \"gamma\"",
            "sweep.arrival",
        ),
        ("concurrency = [2]\nwarmup = \"5s\"", "sweep.warmup"),
    ] {
        let text = GOOD.replace("concurrency = [1, 4, 16, 32, 64]", bad);
        let err = format!("{:#}", Profile::parse(&text).unwrap_err());
        assert!(err.contains(field), "{bad}: {err}");
    }
}

/// The profile `GOOD` with each `from` replaced by `to` is refused, its error naming `field`
/// and the allowed range (`range`).
fn assert_refused_with_the_field(cases: Vec<(String, String, &str, &str)>) {
    for (from, to, field, range) in cases {
        let text = GOOD.replace(&from, &to);
        assert_ne!(text, GOOD, "{from} not in the profile");
        let err = format!("{:#}", Profile::parse(&text).unwrap_err());
        assert!(err.contains(field) && err.contains(range), "{to}: {err}");
    }
}

const SWEEP_LINE: &str = "concurrency = [1, 4, 16, 32, 64]";

/// An open-loop sweep of 20 requests at 5 per second, with `extra` lines.
fn open_loop(extra: &str) -> String {
    format!("rates = [5.0]\nrequests_per_level = 20\n{extra}")
}

// Values that once panicked, aborted, exhausted memory or ran out of sockets: each is
// refused by validation with its field named and the allowed range (times, rates and
// arrivals, counts), and the limits themselves are allowed.

#[test]
fn values_past_the_limits_are_refused_with_the_field_times() {
    let sweep_line = SWEEP_LINE;
    assert_refused_with_the_field(vec![
        (
            "request_timeout = \"2m\"".into(),
            "request_timeout = \"1000000h\"".into(),
            "sweep.request_timeout",
            "1day",
        ),
        (
            sweep_line.into(),
            format!("{sweep_line}\nstall_timeout = \"25h\""),
            "sweep.stall_timeout",
            "1day",
        ),
        (
            sweep_line.into(),
            "concurrency = [2]\nduration = \"18446744073709551615s\"\nwarmup = \"10s\"".into(),
            "sweep.duration",
            "7days",
        ),
        (
            sweep_line.into(),
            "concurrency = [2]\nduration = \"6days\"\nwarmup = \"2days\"".into(),
            "sweep.duration",
            "7days",
        ),
    ]);
}

#[test]
fn values_past_the_limits_are_refused_with_the_field_rates() {
    let sweep_line = SWEEP_LINE;
    let open = open_loop;
    assert_refused_with_the_field(vec![
        (
            sweep_line.into(),
            open("").replace("5.0", "1e-20"),
            "sweep.rates",
            "[0.001, 1000000]",
        ),
        (
            sweep_line.into(),
            open("").replace("5.0", "1e300"),
            "sweep.rates",
            "[0.001, 1000000]",
        ),
        (
            sweep_line.into(),
            "rates = [100000.0]\nduration = \"7days\"".into(),
            "sweep.rates",
            "at most",
        ),
        (
            sweep_line.into(),
            open("arrival = \"gamma\"\ngamma_shape = 1e-300"),
            "sweep.gamma_shape",
            "[0.01, 100]",
        ),
        (
            sweep_line.into(),
            open("arrival = \"gamma\"\ngamma_shape = 1000.0"),
            "sweep.gamma_shape",
            "[0.01, 100]",
        ),
        (
            sweep_line.into(),
            open("max_concurrency = 1000000"),
            "sweep.max_concurrency",
            "[1, 65536]",
        ),
    ]);
}

#[test]
fn values_past_the_limits_are_refused_with_the_field_counts() {
    let sweep_line = SWEEP_LINE;
    assert_refused_with_the_field(vec![
        (
            sweep_line.into(),
            "concurrency = [1000000]".into(),
            "sweep.concurrency",
            "[1, 65536]",
        ),
        (
            sweep_line.into(),
            format!("{sweep_line}\nrequests_per_level = 4000000000"),
            "sweep.requests_per_level",
            "1000000",
        ),
        (
            sweep_line.into(),
            format!("{sweep_line}\nwarmup_requests = 4000000000"),
            "sweep.warmup_requests",
            "1000000",
        ),
        (
            "trials = 5".into(),
            "trials = 100000".into(),
            "sweep.trials",
            "[1, 1000]",
        ),
        (
            "input_tokens = 1000".into(),
            "input_tokens = 4000000000".into(),
            "workload.input_tokens",
            "[1, 10000000]",
        ),
        (
            "max_tokens = 1000".into(),
            "max_tokens = 4000000000".into(),
            "workload.max_tokens",
            "[1, 10000000]",
        ),
    ]);
}

#[test]
fn values_at_the_limits_are_allowed() {
    let sweep_line = SWEEP_LINE;
    // The edges themselves are allowed.
    for (from, to) in [
        (sweep_line, "concurrency = [65536]"),
        ("request_timeout = \"2m\"", "request_timeout = \"24h\""),
        (
            sweep_line,
            "rates = [0.001, 1000000.0]\nrequests_per_level = 20",
        ),
        (
            sweep_line,
            "concurrency = [2]\nduration = \"6days\"\nwarmup = \"1day\"",
        ),
        ("trials = 5", "trials = 1000"),
    ] {
        Profile::parse(&GOOD.replace(from, to)).unwrap_or_else(|e| panic!("{to}: {e:#}"));
    }
}

#[test]
fn profile_files_are_read_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.toml");
    let mut text = GOOD.to_string();
    text.push_str(&"# padding\n".repeat(120_000));
    std::fs::write(&big, text).unwrap();
    for (path, says) in [
        (big.as_path(), "over the limit"),
        (Path::new("/dev/zero"), "not a regular file"),
    ] {
        let err = format!("{:#}", Profile::load(path).unwrap_err());
        assert!(
            err.contains(says) && err.contains(&*path.to_string_lossy()),
            "{err}"
        );
    }
}

/// Every engine the probe can recognise is one `target.engine` accepts (nim, triton and
/// tensorrt-llm were once detected but refused); any other name is refused where it is read,
/// with its line and the names that would do.
#[test]
fn every_detectable_engine_is_accepted() {
    let with =
        |engine: &str| GOOD.replace("[target]\n", &format!("[target]\nengine = {engine:?}\n"));
    let hash = Profile::parse(GOOD).unwrap().canonical_hash().unwrap();
    for e in crate::engine::Engine::ALL {
        let p = Profile::parse(&with(e.name())).unwrap_or_else(|err| panic!("{e}: {err:#}"));
        assert_eq!(p.target.engine, EngineChoice::Named(*e));
        assert_eq!(
            p.canonical_hash().unwrap(),
            hash,
            "the engine is not hashed"
        );
    }
    for name in ["nim", "triton", "tensorrt-llm"] {
        assert!(Profile::parse(&with(name)).is_ok(), "{name}");
    }
    let err = format!("{:#}", Profile::parse(&with("vllm2")).unwrap_err());
    assert!(
        err.contains("line 4") && err.contains("target.engine") && err.contains("\"vllm2\""),
        "{err}"
    );
    assert!(err.contains("\"tensorrt-llm\""), "{err}");
}
