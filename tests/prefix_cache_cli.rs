//! Shared-prefix workloads against `serve-sim --prefix-cache`: the cache's effect shows in
//! every request's `cached_tokens` (from `usage.prompt_tokens_details`), in each trial's
//! `prefix_cache` share, in the console note, and in the simulator's own counters, which
//! agree with what the client recorded. Without a shared prefix, or without the cache,
//! nothing is cached.

mod common;

use std::path::{Path, PathBuf};

use common::*;

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
    let out = run_bench_cli(&profile, &out_dir, &["--no-progress"]);
    assert_eq!(code(&out), 0, "{}", text(&out));
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
