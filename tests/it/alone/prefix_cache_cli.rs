//! Shared-prefix workloads against `serve-sim --prefix-cache`: the cache's effect shows in
//! every request's `cached_tokens` (from `usage.prompt_tokens_details`), in each trial's
//! `prefix_cache` share, in the console note, and in the simulator's own counters, which
//! agree with what the client recorded. Without a shared prefix, or without the cache,
//! nothing is cached. Multi-turn conversations carry their history forward, and the
//! server's own answers come back to it as the next turn's cached prefix.

use std::path::{Path, PathBuf};

use crate::common::*;

fn tokenizer_path() -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/tokenizer/tokenizer.json")
        .display()
        .to_string()
}

/// One of the simulator's counters, read from its `/metrics`.
fn counter(sim: &Sim, name: &str) -> u64 {
    let text = http_get(&format!("{}/metrics", sim.urls[0]));
    let line = text
        .lines()
        .find(|l| l.starts_with(&format!("{name} ")))
        .unwrap_or_else(|| panic!("no {name} in {text}"));
    line[name.len() + 1..].trim().parse().unwrap()
}

/// Runs a small bench against a fresh simulator started with `sim_flags`; returns the
/// console output, the journal, results.json and the simulator (still running).
fn bench(
    dir: &Path,
    name: &str,
    sim_flags: &[&str],
    prefix: &str,
) -> (String, Vec<serde_json::Value>, serde_json::Value, Sim) {
    let tok = tokenizer_path();
    let mut flags = vec!["--preset", "fast", "--tokenizer", &tok];
    flags.extend(sim_flags);
    let sim = Sim::start(1, &flags);
    let body = format!(
        "[workload]\nmax_tokens = 8\ninput_tokens = 40\ntokenizer = {tok:?}\n{prefix}\
         [sweep]\nconcurrency = [2]\nrequests_per_level = 16\ntrials = 2\n"
    );
    let profile = write_profile(dir, name, &sim.urls, &body);
    let out_dir = dir.join(name);
    let out = bench_ok(&profile, &out_dir);
    let results = read_json(&out_dir.join("results.json"));
    (text(&out), read_journal(&out_dir), results, sim)
}

fn trials(results: &serde_json::Value) -> Vec<serde_json::Value> {
    (results["levels"].as_array().unwrap().iter())
        .flat_map(|l| l["trials"].as_array().unwrap().clone())
        .collect()
}

const SHARED: &str = "shared_prefix_tokens = 200\nprefix_groups = 4\n";

#[test]
fn a_shared_prefix_is_served_from_the_simulated_cache() {
    let _turn = timing_lock();
    let dir = tempfile::tempdir().unwrap();
    let (console, journal, results, sim) = bench(dir.path(), "shared", &["--prefix-cache"], SHARED);
    // The first request of each of the 4 groups prefills its system prompt; every later
    // one finds its 200 tokens cached.
    let mut misses = 0;
    for l in &journal {
        assert_eq!(l["input_tokens"].as_u64(), Some(240), "{l}");
        match l["cached_tokens"].as_u64() {
            Some(0) => misses += 1,
            Some(200) => {}
            other => panic!("cached_tokens {other:?}: {l}"),
        }
    }
    assert_eq!(misses, 4, "one miss per group");
    let sum = |key: &str| -> u64 { journal.iter().filter_map(|l| l[key].as_u64()).sum() };
    // The server's counters agree with what the client recorded, token for token.
    let hits = counter(&sim, "throughline_sim_prefix_cache_hits_total");
    let queries = counter(&sim, "throughline_sim_prefix_cache_queries_total");
    assert_eq!(hits, sum("cached_tokens"));
    assert!(hits >= 200 * (journal.len() as u64 - 4), "{hits}");
    assert!(queries >= sum("input_tokens"), "{queries}");
    for t in trials(&results) {
        let c = &t["prefix_cache"];
        let share = c["share"].as_f64().unwrap_or_else(|| panic!("{t}"));
        let (prompt, cached) = (c["prompt_tokens"].as_u64(), c["cached_tokens"].as_u64());
        assert_eq!(prompt, Some(16 * 240), "{t}");
        let in_trial: u64 = (journal.iter())
            .filter(|l| l["trial"] == t["trial"] && l["warmup"] == false)
            .filter_map(|l| l["cached_tokens"].as_u64())
            .sum();
        assert_eq!(cached, Some(in_trial), "{t}");
        assert!(in_trial >= 12 * 200, "at most the 4 misses: {t}");
        assert!((share - in_trial as f64 / (16.0 * 240.0)).abs() < 1e-12);
    }
    assert!(console.contains("prefix cache: "), "{console}");
    assert!(console.contains("% of prompt tokens served"), "{console}");
    let report = std::fs::read_to_string(dir.path().join("shared/report.md")).unwrap();
    assert!(report.contains(": prefix cache: "), "{report}");
}

/// Without a shared prefix the cache serves nothing (the server still reports 0 cached
/// tokens); without the cache the server reports nothing and nothing is recorded.
#[test]
fn no_shared_prefix_or_no_cache_shows_no_cache_effect() {
    let _turn = timing_lock();
    let dir = tempfile::tempdir().unwrap();
    let (console, journal, results, sim) = bench(dir.path(), "plain", &["--prefix-cache"], "");
    for l in &journal {
        assert_eq!(l["cached_tokens"].as_u64(), Some(0), "{l}");
    }
    for t in trials(&results) {
        assert_eq!(t["prefix_cache"]["share"].as_f64(), Some(0.0), "{t}");
    }
    assert!(console.contains("prefix cache: 0.0%"), "{console}");
    assert_eq!(counter(&sim, "throughline_sim_prefix_cache_hits_total"), 0);
    assert!(counter(&sim, "throughline_sim_prefix_cache_queries_total") > 0);
    drop(sim);

    let (console, journal, results, sim) = bench(dir.path(), "uncached", &[], SHARED);
    for l in &journal {
        assert!(l.get("cached_tokens").is_none(), "{l}");
    }
    for t in trials(&results) {
        assert!(t.get("prefix_cache").is_none(), "{t}");
    }
    assert!(!console.contains("prefix cache"), "{console}");
    let report = std::fs::read_to_string(dir.path().join("uncached/report.md")).unwrap();
    assert!(!report.contains("prefix cache"), "{report}");
    assert_eq!(counter(&sim, "throughline_sim_prefix_cache_hits_total"), 0);
    assert_eq!(
        counter(&sim, "throughline_sim_prefix_cache_queries_total"),
        0
    );
}

/// A multi-turn run: each turn follows the answer to the one before and carries the whole
/// conversation. With the server's answers carried, every later turn finds its history
/// (the previous prompt and the answer the simulator generated) cached, token for token;
/// with the dataset's reference answers, which the server never generated, a turn first
/// finds only the turn before's prompt cached (a repeated conversation finds it all).
#[test]
fn multi_turn_conversations_carry_their_history() {
    let _turn = timing_lock();
    let dir = tempfile::tempdir().unwrap();
    let dataset =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/datasets/sharegpt-multiturn.json");
    let run = |name: &str, history: &str| {
        let tok = tokenizer_path();
        let sim = Sim::start(
            1,
            &["--preset", "fast", "--tokenizer", &tok, "--prefix-cache"],
        );
        let body = format!(
            "[workload]\nmax_tokens = 64\nignore_eos = true\ndegenerate_below = 1\n\
             tokenizer = {tok:?}\n\
             dataset = {{ path = {dataset:?}, format = \"sharegpt\", turns = 3{history} }}\n\
             [sweep]\nconcurrency = [2]\nrequests_per_level = 11\ntrials = 2\n"
        );
        let profile = write_profile(dir.path(), name, &sim.urls, &body);
        let out_dir = dir.path().join(name);
        bench_ok(&profile, &out_dir);
        let notes = read_json(&out_dir.join("results.json"))["notes"].to_string();
        (notes, read_journal(&out_dir), sim)
    };
    let (notes, journal, sim) = run("server", "");
    assert!(notes.contains("multi-turn: 4 conversations"), "{notes}");
    // Group the turns by (trial, conversation), in the order they were sent.
    let mut chats: std::collections::BTreeMap<(u64, u64, u64), Vec<&serde_json::Value>> =
        Default::default();
    for l in &journal {
        assert_eq!(l["error"], serde_json::Value::Null, "{l}");
        let key = (
            l["trial"].as_u64().unwrap(),
            l["conversation"].as_u64().unwrap_or_else(|| panic!("{l}")),
            0,
        );
        chats.entry(key).or_default().push(l);
    }
    let mut later_turns = 0;
    for turns in chats.values_mut() {
        turns.sort_by(|a, b| {
            a["sent_s"]
                .as_f64()
                .partial_cmp(&b["sent_s"].as_f64())
                .unwrap()
        });
        for (i, pair) in turns.windows(2).enumerate() {
            let (before, after) = (pair[0], pair[1]);
            assert_eq!(before["turn"].as_u64(), Some(i as u64 + 1), "{before}");
            assert_eq!(after["turn"].as_u64(), Some(i as u64 + 2), "{after}");
            assert!(
                after["sent_s"].as_f64() >= before["end_s"].as_f64(),
                "{after}"
            );
            // The history is the turn before and the answer the server gave it, all cached.
            let history = before["input_tokens"].as_u64().unwrap()
                + before["output_tokens"].as_u64().unwrap();
            assert_eq!(after["cached_tokens"].as_u64(), Some(history), "{after}");
            assert!(after["input_tokens"].as_u64().unwrap() > history, "{after}");
            later_turns += 1;
        }
        assert_eq!(turns[0]["turn"].as_u64(), Some(1));
        assert_eq!(
            turns[0]["cached_tokens"].as_u64(),
            Some(0),
            "a first turn has no history"
        );
    }
    assert!(
        later_turns >= 8,
        "{later_turns} later turns in {} requests",
        journal.len()
    );
    let sum: u64 = journal
        .iter()
        .filter_map(|l| l["cached_tokens"].as_u64())
        .sum();
    assert_eq!(
        counter(&sim, "throughline_sim_prefix_cache_hits_total"),
        sum
    );
    // Each turn asks for its reference answer's length, and gets it (ignore_eos).
    for l in &journal {
        assert_eq!(l["output_tokens"], l["requested_output_tokens"], "{l}");
    }
    drop(sim);

    let (_, journal, _sim) = run("dataset", ", history = \"dataset\"");
    let tokenizer =
        throughline::tokenize::ModelTokenizer::load(std::path::Path::new(&tokenizer_path()))
            .unwrap();
    let text = std::fs::read_to_string(&dataset).unwrap();
    let conversations: serde_json::Value = serde_json::from_str(&text).unwrap();
    let said = |c: u64, i: usize| {
        let turns = conversations[c as usize % 4]["conversations"]
            .as_array()
            .unwrap();
        tokenizer.count(turns[i]["value"].as_str().unwrap()) as u64
    };
    let mut seen = std::collections::HashSet::new();
    for l in &journal {
        let (c, turn) = (
            l["conversation"].as_u64().unwrap(),
            l["turn"].as_u64().unwrap(),
        );
        // The prompt is the dataset's text: its questions and reference answers so far.
        let expected: u64 = (0..(2 * turn as usize - 1)).map(|i| said(c, i)).sum();
        assert_eq!(l["input_tokens"].as_u64(), Some(expected), "{l}");
        if turn > 1 && seen.insert((c % 4, turn)) {
            // The reference answer was never generated: the first time, only the turn
            // before's prompt is found cached, not the history after it.
            let previous: u64 = (0..(2 * turn as usize - 3)).map(|i| said(c, i)).sum();
            assert_eq!(l["cached_tokens"].as_u64(), Some(previous), "{l}");
        }
    }
}

/// A turn that fails ends its conversation: its successors are never sent, the worker starts
/// the next conversation, and every request is journalled once, failed ones in their class.
/// All turns of a conversation go to one endpoint (of two replicas), where its history is.
#[test]
fn a_failed_turn_ends_its_conversation_and_turns_stay_on_one_endpoint() {
    let _turn = timing_lock();
    let dir = tempfile::tempdir().unwrap();
    let dataset =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/datasets/sharegpt-multiturn.json");
    let sim = Sim::start(
        2,
        &[
            "--preset",
            "fast",
            "--prefix-cache",
            "--fault-reset-rate",
            "0.25",
        ],
    );
    let body = format!(
        "[workload]\nmax_tokens = 64\nignore_eos = true\ndegenerate_below = 1\n\
         dataset = {{ path = {dataset:?}, format = \"sharegpt\", turns = 3 }}\n\
         [sweep]\nconcurrency = [3]\nrequests_per_level = 24\ntrials = 2\nmax_error_rate = 1.0\n"
    );
    let profile = write_profile(dir.path(), "faulty", &sim.urls, &body);
    let out_dir = dir.path().join("faulty");
    bench_ok(&profile, &out_dir);
    let journal = read_journal(&out_dir);
    assert_eq!(journal.len(), 48, "every request journalled once");
    let mut chats: std::collections::BTreeMap<(u64, u64), Vec<&serde_json::Value>> =
        Default::default();
    for l in &journal {
        let key = (
            l["trial"].as_u64().unwrap(),
            l["conversation"].as_u64().unwrap(),
        );
        chats.entry(key).or_default().push(l);
    }
    let failed = journal.iter().filter(|l| !l["error"].is_null()).count();
    assert!(failed > 0, "the faults should fail some turns");
    let mut ended_early = 0;
    for turns in chats.values_mut() {
        turns.sort_by_key(|l| l["turn"].as_u64());
        for (i, l) in turns.iter().enumerate() {
            assert_eq!(l["turn"].as_u64(), Some(i as u64 + 1), "contiguous: {l}");
            assert_eq!(l["endpoint"], turns[0]["endpoint"], "one endpoint: {l}");
            if !l["error"].is_null() {
                assert_eq!(l["error"], "reset", "{l}");
                assert_eq!(i + 1, turns.len(), "nothing after a failed turn: {l}");
                ended_early += usize::from(i + 1 < 3);
            }
        }
    }
    assert!(
        ended_early > 0,
        "some conversation should end before its third turn"
    );
    let endpoints: std::collections::BTreeSet<_> =
        journal.iter().map(|l| l["endpoint"].as_u64()).collect();
    assert_eq!(endpoints.len(), 2, "both replicas serve conversations");
}
