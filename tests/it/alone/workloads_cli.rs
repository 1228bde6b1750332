//! Real workloads end to end against `serve-sim`: exact input lengths from the model's
//! tokenizer (and the per-trial check that flags prompts off their length), datasets sent
//! round-robin with each row's output length, and trace replay on the trace's schedule.

use std::path::PathBuf;

use crate::common::*;
use throughline::tokenize::ModelTokenizer;

fn fixture(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(rel)
}

fn tokenizer_path() -> String {
    fixture("tokenizer/tokenizer.json").display().to_string()
}

/// The trials' flags of one kind, across the run.
fn flags_of(results: &serde_json::Value, kind: &str) -> Vec<String> {
    (results["levels"].as_array().unwrap().iter())
        .flat_map(|l| l["trials"].as_array().unwrap())
        .flat_map(|t| t["flags"].as_array().unwrap())
        .filter(|f| f["kind"] == kind)
        .map(|f| f["message"].as_str().unwrap().to_string())
        .collect()
}

fn notes(results: &serde_json::Value) -> String {
    results["notes"].to_string()
}

fn exact_profile(api: &str, tokenizer: bool) -> String {
    let tok = match tokenizer {
        true => format!("tokenizer = {:?}\n", tokenizer_path()),
        false => String::new(),
    };
    format!(
        "api = \"{api}\"\n[workload]\nmax_tokens = 8\ninput_tokens = 120\n{tok}\
         [workload.input_length]\ndistribution = \"uniform\"\nmean = 120\nrange_ratio = 0.5\n\
         [sweep]\nconcurrency = [4]\nrequests_per_level = 12\ntrials = 2\n"
    )
}

/// With the served model's tokenizer named in the profile, every prompt is exactly the
/// requested (drawn) number of tokens as the server counts them, and no trial is flagged.
/// Without it (lengths in words) the same server counts other lengths: the trials are
/// flagged and the run's notes say the lengths are words.
#[test]
fn prompts_are_exact_in_tokens_with_the_models_tokenizer() {
    let _turn = timing_lock();
    let sim = Sim::start(1, &["--preset", "fast", "--tokenizer", &tokenizer_path()]);
    let dir = tempfile::tempdir().unwrap();

    let profile = write_profile(
        dir.path(),
        "exact",
        &sim.urls,
        &exact_profile("completions", true),
    );
    let out_dir = dir.path().join("exact-out");
    bench_ok(&profile, &out_dir);
    let lines = read_journal(&out_dir);
    assert_eq!(lines.len(), 24);
    let mut lengths = std::collections::BTreeSet::new();
    for l in &lines {
        let want = l["requested_input_tokens"].as_u64().expect("recorded");
        assert!(l["requested_input_words"].is_null(), "{l}");
        assert_eq!(l["input_tokens"].as_u64(), Some(want), "{l}");
        lengths.insert(want);
    }
    assert!(lengths.len() > 5, "drawn, not one length: {lengths:?}");
    let results = read_json(&out_dir.join("results.json"));
    assert!(flags_of(&results, "input-length-off").is_empty());
    let check = &results["levels"][0]["trials"][0]["input_check"];
    assert_eq!(check["requested_mean"], check["achieved_mean"], "{check}");
    assert_eq!(check["exact"], true);
    assert!(
        notes(&results).contains("input lengths are exact"),
        "{results}"
    );

    // The same server, the profile without the tokenizer: words are not tokens.
    let words = write_profile(
        dir.path(),
        "words",
        &sim.urls,
        &exact_profile("completions", false),
    );
    let words_out = dir.path().join("words-out");
    let out = bench_ok(&words, &words_out);
    let results = read_json(&words_out.join("results.json"));
    let flagged = flags_of(&results, "input-length-off");
    assert_eq!(flagged.len(), 2, "{results}");
    assert!(flagged[0].contains("words"), "{flagged:?}");
    assert!(
        notes(&results).contains("words of synthetic text"),
        "{results}"
    );
    // The report shows the flag.
    assert!(text(&out).contains("usage.prompt_tokens"), "{}", text(&out));

    // The chat API: the simulator counts message contents (no template), so exact too; a
    // real server's template tokens would show as the flag.
    let chat = write_profile(dir.path(), "chat", &sim.urls, &exact_profile("chat", true));
    let chat_out = dir.path().join("chat-out");
    bench_ok(&chat, &chat_out);
    for l in read_journal(&chat_out) {
        assert_eq!(l["input_tokens"], l["requested_input_tokens"], "{l}");
    }
}

/// A ShareGPT dataset goes out round-robin: each request carries its row's prompt and asks
/// for its reference answer's length, counted with the profile's tokenizer; rows that are
/// not a human question and an answer are skipped.
#[test]
fn sharegpt_rows_go_out_round_robin_with_their_answer_lengths() {
    let _turn = timing_lock();
    let sim = Sim::start(1, &["--preset", "fast", "--tokenizer", &tokenizer_path()]);
    let dir = tempfile::tempdir().unwrap();
    let body = format!(
        "api = \"completions\"\n[workload]\nmax_tokens = 200\nignore_eos = true\n\
         degenerate_below = 1\ntokenizer = {:?}\n\
         dataset = {{ path = {:?}, format = \"sharegpt\" }}\n\
         [sweep]\nconcurrency = [2]\nrequests_per_level = 8\ntrials = 1\n",
        tokenizer_path(),
        fixture("datasets/sharegpt-sample.json")
            .display()
            .to_string()
    );
    let profile = write_profile(dir.path(), "sharegpt", &sim.urls, &body);
    let out_dir = dir.path().join("out");
    bench_ok(&profile, &out_dir);

    let t = ModelTokenizer::load(&fixture("tokenizer")).unwrap();
    let data: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(fixture("datasets/sharegpt-sample.json")).unwrap(),
    )
    .unwrap();
    let usable: Vec<(usize, usize)> = ["kv-cache", "batching", "sort", "short"]
        .iter()
        .map(|id| {
            let c = data
                .as_array()
                .unwrap()
                .iter()
                .find(|c| c["id"] == *id)
                .unwrap();
            let turn = |i: usize| c["conversations"][i]["value"].as_str().unwrap();
            (t.count(turn(0)), t.count(turn(1)))
        })
        .collect();
    let lines = read_journal(&out_dir);
    assert_eq!(lines.len(), 8);
    for l in &lines {
        let (prompt, answer) = usable[l["index"].as_u64().unwrap() as usize % 4];
        assert_eq!(
            l["requested_output_tokens"].as_u64(),
            Some(answer as u64),
            "{l}"
        );
        assert_eq!(l["output_tokens"].as_u64(), Some(answer as u64), "{l}");
        assert_eq!(l["input_tokens"].as_u64(), Some(prompt as u64), "{l}");
    }
    let results = read_json(&out_dir.join("results.json"));
    assert!(
        notes(&results).contains("4 requests sent round-robin"),
        "{results}"
    );
    assert!(notes(&results).contains("exact (tokenizer"), "{results}");
    // Datasets ask for no input length: nothing to check.
    assert!(results["levels"][0]["trials"][0]["input_check"].is_null());

    // Without a tokenizer the answers' lengths are estimates, and the notes say so.
    let jsonl = format!(
        "[workload]\nmax_tokens = 20\nignore_eos = true\ndegenerate_below = 1\n\
         dataset = {{ path = {:?}, format = \"jsonl\", rows = 3 }}\n\
         [sweep]\nconcurrency = [1]\nrequests_per_level = 6\ntrials = 1\n",
        fixture("datasets/requests.jsonl").display().to_string()
    );
    let profile = write_profile(dir.path(), "jsonl", &sim.urls, &jsonl);
    let out_dir = dir.path().join("jsonl-out");
    bench_ok(&profile, &out_dir);
    let asked: Vec<u64> = read_journal(&out_dir)
        .iter()
        .map(|l| l["requested_output_tokens"].as_u64().unwrap())
        .collect();
    // Row 1 asks for 24 (capped at max_tokens 20), row 2 for 12, row 3 for its answer's
    // estimated length (62 characters: 16 tokens); rows = 3 leaves the fourth out.
    assert_eq!(asked, vec![20, 12, 16, 20, 12, 16]);
    let results = read_json(&out_dir.join("results.json"));
    assert!(notes(&results).contains("estimated"), "{results}");
    assert!(
        notes(&results).contains("1 of 3 dataset rows ask for more"),
        "{results}"
    );
}

/// A trace is replayed open loop: every request is sent at its timestamp over the speedup
/// (within a tolerance), with the trace's input and output lengths, latency counted from
/// the schedule; each trial replays the whole trace.
#[test]
fn a_trace_is_replayed_on_its_schedule_with_its_lengths() {
    let _turn = timing_lock();
    let sim = Sim::start(1, &["--preset", "fast", "--tokenizer", &tokenizer_path()]);
    let dir = tempfile::tempdir().unwrap();
    let body = format!(
        "api = \"completions\"\n[workload]\nmax_tokens = 64\nignore_eos = true\n\
         degenerate_below = 1\ntokenizer = {:?}\n\
         [sweep]\ntrace = {{ path = {:?}, speedup = 2.0 }}\ntrials = 2\n",
        tokenizer_path(),
        fixture("traces/azure-sample.csv").display().to_string()
    );
    let profile = write_profile(dir.path(), "trace", &sim.urls, &body);
    let out_dir = dir.path().join("out");
    bench_ok(&profile, &out_dir);

    let csv = std::fs::read_to_string(fixture("traces/azure-sample.csv")).unwrap();
    let rows: Vec<(f64, u64, u64)> = csv
        .lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            let secs: f64 = f[0][17..].parse().unwrap(); // seconds of the minute
            (secs, f[1].parse().unwrap(), f[2].parse().unwrap())
        })
        .collect();
    let lines = read_journal(&out_dir);
    assert_eq!(lines.len(), 2 * rows.len());
    for trial in [1, 2] {
        let mut reqs: Vec<&serde_json::Value> =
            lines.iter().filter(|l| l["trial"] == trial).collect();
        reqs.sort_by_key(|l| l["index"].as_u64());
        assert_eq!(reqs.len(), rows.len());
        let t0 = reqs[0]["scheduled_s"].as_f64().unwrap();
        for (l, (secs, input, output)) in reqs.iter().zip(&rows) {
            let scheduled = l["scheduled_s"].as_f64().unwrap() - t0;
            let want = (secs - rows[0].0) / 2.0;
            assert!(
                (scheduled - want).abs() < 1e-3,
                "{scheduled} vs {want}: {l}"
            );
            let lag = l["sent_s"].as_f64().unwrap() - l["scheduled_s"].as_f64().unwrap();
            assert!((0.0..0.1).contains(&lag), "sent {lag} s late: {l}");
            assert_eq!(l["input_tokens"].as_u64(), Some(*input), "{l}");
            assert_eq!(l["output_tokens"].as_u64(), Some(*output), "{l}");
        }
    }
    let results = read_json(&out_dir.join("results.json"));
    let level = &results["levels"][0];
    // One level: the trace's mean rate (11 gaps over 4 s, at twice the speed).
    assert!(
        (level["rate"].as_f64().unwrap() - 5.5).abs() < 1e-9,
        "{level}"
    );
    let open = &level["trials"][0]["open_loop"];
    assert_eq!(open["arrival"], "trace");
    assert!(open["e2e_from_schedule_ms"]["p50"].as_f64().unwrap() > 0.0);
    assert!(flags_of(&results, "input-length-off").is_empty());
    assert!(
        notes(&results).contains("12 requests over 4.000 s"),
        "{results}"
    );
}

/// A shared prefix: every prompt opens with its group's system prompt of exactly N tokens,
/// so the server counts N more prompt tokens than the request's own part, and the check
/// (requested = own + prefix) raises no flag.
#[test]
fn a_shared_prefix_adds_exactly_its_tokens() {
    let _turn = timing_lock();
    let sim = Sim::start(1, &["--preset", "fast", "--tokenizer", &tokenizer_path()]);
    let dir = tempfile::tempdir().unwrap();
    let body = format!(
        "[workload]\nmax_tokens = 8\ninput_tokens = 40\ntokenizer = {:?}\n\
         shared_prefix_tokens = 200\nprefix_groups = 2\n\
         [sweep]\nconcurrency = [2]\nrequests_per_level = 6\ntrials = 1\n",
        tokenizer_path()
    );
    let profile = write_profile(dir.path(), "prefix", &sim.urls, &body);
    let out_dir = dir.path().join("out");
    bench_ok(&profile, &out_dir);
    for l in read_journal(&out_dir) {
        assert_eq!(l["input_tokens"].as_u64(), Some(240), "{l}");
    }
    let results = read_json(&out_dir.join("results.json"));
    assert!(
        flags_of(&results, "input-length-off").is_empty(),
        "{results}"
    );
    assert_eq!(
        results["levels"][0]["trials"][0]["input_check"]["requested_mean"],
        240.0
    );
    assert!(
        notes(&results).contains("2 system prompts of 200 tokens"),
        "{results}"
    );
}

/// A malformed dataset or trace row stops the run before anything is sent, with the file,
/// the line and the field.
#[test]
fn bad_rows_are_refused_with_file_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let endpoints = ["http://127.0.0.1:9".to_string()];
    std::fs::write(
        dir.path().join("d.jsonl"),
        "{\"prompt\": \"ok\"}\n{\"prompt\": \"bad\", \"max_tokens\": \"many\"}\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("t.csv"),
        "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.1,10,5\n2023-11-16 18:15:47,ten,5\n",
    )
    .unwrap();
    for (name, body, want) in [
        (
            "dataset",
            "[workload]\nmax_tokens = 8\ndataset = { path = \"d.jsonl\", format = \"jsonl\" }\n\
             [sweep]\nconcurrency = [1]\n",
            ["d.jsonl", "line 2", "field `max_tokens`"],
        ),
        (
            "trace",
            "[workload]\nmax_tokens = 8\n[sweep]\ntrace = { path = \"t.csv\" }\n",
            ["t.csv", "line 3", "column `ContextTokens`"],
        ),
    ] {
        let profile = write_profile(dir.path(), name, &endpoints, body);
        let out = run_bench_cli(&profile, &dir.path().join(name), &["--no-progress"]);
        assert_eq!(code(&out), 2, "{}", text(&out));
        for w in want {
            assert!(text(&out).contains(w), "{name}: {w}: {}", text(&out));
        }
    }
}

/// A model id as the tokenizer (`tokenizer = "acme/tiny"`, no such path beside the profile)
/// is found in the local Hugging Face cache, laid out as huggingface_hub lays it out (the
/// file a link into blobs/, refs/main naming the snapshot), by the client and by serve-sim;
/// a model that is not there is a bad profile (exit 2) that says where it was looked for.
#[test]
fn a_model_id_finds_its_tokenizer_in_the_hugging_face_cache() {
    let _turn = timing_lock();
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("hub");
    let repo = cache.join("models--acme--tiny");
    let commit = "0123456789abcdef0123456789abcdef01234567";
    let snapshot = repo.join("snapshots").join(commit);
    std::fs::create_dir_all(&snapshot).unwrap();
    std::fs::create_dir_all(repo.join("blobs")).unwrap();
    std::fs::create_dir_all(repo.join("refs")).unwrap();
    std::fs::copy(tokenizer_path(), repo.join("blobs/5e1f")).unwrap();
    std::os::unix::fs::symlink("../../blobs/5e1f", snapshot.join("tokenizer.json")).unwrap();
    std::fs::write(repo.join("refs/main"), commit).unwrap();
    let env = [("HF_HUB_CACHE", cache.to_str().unwrap())];

    let sim = Sim::start_env(1, &["--preset", "fast", "--tokenizer", "acme/tiny"], &env);
    let body = exact_profile("completions", false)
        .replace("[workload]\n", "[workload]\ntokenizer = \"acme/tiny\"\n");
    let profile = write_profile(dir.path(), "by-id", &sim.urls, &body);
    let out_dir = dir.path().join("by-id-out");
    let out = bench_command(&profile, &out_dir)
        .arg("--no-progress")
        .envs(env)
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", text(&out));
    for l in read_journal(&out_dir) {
        assert_eq!(l["input_tokens"], l["requested_input_tokens"], "{l}");
        assert!(l["requested_input_tokens"].is_u64(), "{l}");
    }
    let results = read_json(&out_dir.join("results.json"));
    assert!(notes(&results).contains("models--acme--tiny"), "{results}");

    let absent = write_profile(
        dir.path(),
        "absent",
        &sim.urls,
        &body.replace("acme/tiny", "acme/absent"),
    );
    let out = bench_command(&absent, &dir.path().join("absent-out"))
        .envs(env)
        .output()
        .unwrap();
    assert_eq!(code(&out), 2, "{}", text(&out));
    let said = text(&out);
    assert!(
        said.contains("workload.tokenizer") && said.contains("models--acme--absent"),
        "{said}"
    );
}
