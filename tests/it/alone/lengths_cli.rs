//! Length distributions end to end: per-request lengths drawn from the profile go out as each
//! request's `max_tokens` (with `ignore_eos`) and prompt length, are recorded per request in
//! requests.jsonl, and the simulator's responses follow them.

use std::collections::BTreeSet;

use crate::common::*;

const PROFILE: &str = r#"
[workload]
max_tokens = 96
ignore_eos = true
degenerate_below = 1
seed = 11
[workload.output_length]
distribution = "normal"
mean = 40
sd = 15
[workload.input_length]
distribution = "uniform"
mean = 60
range_ratio = 0.5
[sweep]
concurrency = [4]
requests_per_level = 24
warmup_requests = 2
trials = 2
"#;

#[test]
fn output_lengths_follow_the_drawn_ones_and_are_recorded() {
    let _turn = timing_lock();
    let sim = Sim::start(1, &["--preset", "fast"]);
    let dir = tempfile::tempdir().unwrap();
    let profile = write_profile(dir.path(), "lengths", &sim.urls, PROFILE);
    let out_dir = dir.path().join("out");
    bench_ok(&profile, &out_dir);

    let lines = read_journal(&out_dir);
    assert_eq!(lines.len(), 2 + 2 * 24);
    let mut outputs = BTreeSet::new();
    let mut prompt_minus_words = BTreeSet::new();
    for l in &lines {
        assert!(l["error"].is_null(), "{l}");
        let want = l["requested_output_tokens"].as_u64().expect("recorded");
        assert!((1..=96).contains(&want), "{l}");
        assert_eq!(l["output_tokens"].as_u64().unwrap(), want, "{l}");
        outputs.insert(want);
        let words = l["requested_input_words"].as_u64().expect("recorded");
        assert!((30..=90).contains(&words), "{l}");
        prompt_minus_words.insert(l["input_tokens"].as_i64().unwrap() - words as i64);
    }
    // Drawn, not one length for all; and the prompts are as long as drawn (the simulator
    // counts words, plus the same chat overhead on every request).
    assert!(outputs.len() >= 10, "{outputs:?}");
    assert_eq!(prompt_minus_words.len(), 1, "{prompt_minus_words:?}");

    // The same seed draws the same lengths again; the distribution is part of the hash.
    let again = dir.path().join("again");
    bench_ok(&profile, &again);
    let drawn = |ls: &[serde_json::Value]| -> Vec<(u64, u64)> {
        let mut v: Vec<(u64, u64)> = ls
            .iter()
            .map(|l| {
                (
                    l["index"].as_u64().unwrap() + 1000 * l["trial"].as_u64().unwrap(),
                    l["requested_output_tokens"].as_u64().unwrap(),
                )
            })
            .collect();
        v.sort_unstable();
        v
    };
    assert_eq!(drawn(&lines), drawn(&read_journal(&again)));
    let hash = |p: &std::path::Path| read_json(&p.join("results.json"))["profile_hash"].clone();
    let other = write_profile(
        dir.path(),
        "other",
        &sim.urls,
        &PROFILE.replace("sd = 15", "sd = 16"),
    );
    let other_out = dir.path().join("other-out");
    bench_ok(&other, &other_out);
    assert_ne!(hash(&out_dir), hash(&other_out));
}
