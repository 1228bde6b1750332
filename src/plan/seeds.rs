//! The seed measurements, transcribed from the reports in `shared/seeds/` into throughline
//! results files (`fixtures/seeds/*.json`). They are built here from the result types and
//! serialized, so they are valid results files; a test keeps the committed files equal to
//! what these functions build (regenerate with `THROUGHLINE_REGENERATE_SEEDS=1 cargo test`).

use std::collections::BTreeMap;

use crate::profile::Profile;
use crate::record::trial_flags::{FlagKind, TrialFlag};
use crate::record::{
    Environment, LevelResult, RunResult, TokenSource, TrialResult, SCHEMA_VERSION,
};

/// File name of the 5-level 122B curve under fixtures/seeds/.
pub const SEED_122B_CURVE: &str = "rtxpro6000-4x-tp4-qwen3.5-122b.json";
/// File name of the batch-1 27B measurement under fixtures/seeds/.
pub const SEED_27B_BATCH1: &str = "rtxpro6000-8x-dp-qwen3.6-27b-batch1.json";

const TRANSCRIBED: &str = "transcribed from a report, not measured by throughline: one trial per \
    level, no per-request records (TTFT, ITL and latency percentiles unknown); the date is the \
    transcription's";

/// One transcribed trial: `succeeded` requests, `tokens` output tokens at `tok_s` aggregate.
fn trial(succeeded: u64, tokens: u64, tok_s: f64, per_req: Option<f64>, input: u64) -> TrialResult {
    let window_s = tokens as f64 / tok_s;
    TrialResult {
        requests_sent: succeeded,
        succeeded,
        output_tokens: tokens,
        input_tokens: input * succeeded,
        window_s,
        output_tok_per_s: tok_s,
        requests_per_s: succeeded as f64 / window_s,
        per_request_tok_per_s: per_req,
        token_sources: BTreeMap::from([(TokenSource::Usage, succeeded)]),
        flags: vec![TrialFlag::new(
            FlagKind::Transcribed,
            "transcribed from a report; single trial",
        )],
        ..TrialResult::new(1)
    }
}

fn profile(text: &str) -> Profile {
    Profile::parse(text).expect("seed profile is valid")
}

/// Qwen3.5-122B-A10B BF16 on 4x RTX PRO 6000 Blackwell, TP=4, SGLang with MTP speculation,
/// GPU P2P DMA disabled; 1000-token inputs and outputs; one trial per level.
/// A result transcribed from a report: the parts every seed shares, with its own warnings
/// after the "transcribed" one.
fn transcribed(
    p: Profile,
    environment: Environment,
    levels: Vec<LevelResult>,
    warnings: &[&str],
) -> RunResult {
    RunResult {
        schema_version: SCHEMA_VERSION,
        tool: "transcribed by hand from a report (throughline result schema)".to_string(),
        profile_name: p.name.clone(),
        profile_hash: p.canonical_hash().expect("no prompts file"),
        profile: p,
        environment,
        started_at: "2026-11-29T00:00:00Z".to_string(),
        finished_at: "2026-11-29T00:00:00Z".to_string(),
        complete: true,
        levels,
        warnings: std::iter::once(TRANSCRIBED)
            .chain(warnings.iter().copied())
            .map(str::to_string)
            .collect(),
        base: None,
        drift: None,
        notes: Vec::new(),
        servers: None,
        // The seed files hold the transcription only; a reader computes the rest on load.
        analysis: None,
        run_id: None,
    }
}

pub fn seed_122b_curve() -> RunResult {
    let p = profile(
        r#"
name = "seed-rtxpro6000-4x-tp4-qwen3.5-122b"
description = "Transcribed from a report (seed 004): SGLang, Qwen3.5-122B-A10B BF16, 4x RTX PRO 6000 Blackwell, TP=4, MTP speculation, P2P DMA disabled. Fixed 1000-token synthetic inputs and 1000-token outputs, one warmup request, a single trial per level; requests per level were 4/8/32/64/128."
[target]
endpoints = ["http://127.0.0.1:30000"]
model = "Qwen/Qwen3.5-122B-A10B"
[workload]
input_tokens = 1000
max_tokens = 1000
[sweep]
concurrency = [1, 4, 16, 32, 64]
trials = 1
warmup_requests = 1
"#,
    );
    let rows: [(u32, u64, u64, f64, f64); 5] = [
        (1, 4, 4000, 121.6, 123.3),
        (4, 8, 7157, 399.1, 118.8),
        (16, 32, 29417, 1213.5, 84.6),
        (32, 64, 51805, 1515.1, 62.8),
        (64, 128, 97000, 1582.5, 66.1),
    ];
    let levels = rows
        .iter()
        .map(|&(c, ok, tokens, agg, per_req)| LevelResult {
            concurrency: c,
            rate: None,
            trials: vec![trial(ok, tokens, agg, Some(per_req), 1000)],
        })
        .collect();
    transcribed(
        p,
        Environment {
            gpu_model: Some("RTX PRO 6000 Blackwell".to_string()),
            gpu_count: Some(4),
            driver: None,
            engine: Some("sglang".to_string()),
            engine_version: None,
            model: Some("Qwen/Qwen3.5-122B-A10B".to_string()),
            precision: Some("bf16".to_string()),
            runner: None,
            endpoints: 1,
            speculative: Some(true),
            overridden: Vec::new(),
        },
        levels,
        &[
            "single trial per level: trial-to-trial variation is unknown; spreads come from the \
             USL fit's residuals only",
            "speculative decoding (MTP) was on: tokens per decode step can exceed one",
        ],
    )
}

/// Qwen3.6-27B BF16 on 8x RTX PRO 6000 Blackwell, one SGLang server per GPU (DP), one request
/// per server: 8,192 output tokens in 38.684 s.
pub fn seed_27b_batch1() -> RunResult {
    let p = profile(
        r#"
name = "seed-rtxpro6000-8x-dp-qwen3.6-27b-batch1"
description = "Transcribed from a report (seeds 000, 003): 8 SGLang 0.5.12 servers, one per RTX PRO 6000 Blackwell GPU, Qwen3.6-27B BF16; one request per server (max_tokens 1024, all hit the limit), 8,192 tokens in 38,684 ms. A single level: no scaling curve."
[target]
endpoints = ["http://127.0.0.1:30000", "http://127.0.0.1:30001", "http://127.0.0.1:30002", "http://127.0.0.1:30003", "http://127.0.0.1:30004", "http://127.0.0.1:30005", "http://127.0.0.1:30006", "http://127.0.0.1:30007"]
model = "Qwen/Qwen3.6-27B"
[workload]
input_tokens = 26
max_tokens = 1024
[sweep]
concurrency = [8]
trials = 1
requests_per_level = 8
"#,
    );
    let tok_s = 8192.0 / 38.684;
    let mut t = trial(8, 8192, tok_s, Some(1024.0 / 38.684), 26);
    t.window_s = 38.684;
    transcribed(
        p,
        Environment {
            gpu_model: Some("RTX PRO 6000 Blackwell".to_string()),
            gpu_count: Some(8),
            driver: None,
            engine: Some("sglang".to_string()),
            engine_version: Some("0.5.12".to_string()),
            model: Some("Qwen/Qwen3.6-27B".to_string()),
            precision: Some("bf16".to_string()),
            runner: None,
            endpoints: 8,
            speculative: None,
            overridden: Vec::new(),
        },
        vec![LevelResult {
            concurrency: 8,
            rate: None,
            trials: vec![t],
        }],
        &[
            "batch 1 per server: a latency figure, not a throughput capacity; do not \
           extrapolate it linearly",
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn check(name: &str, built: RunResult) {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures/seeds")
            .join(name);
        if std::env::var_os("THROUGHLINE_REGENERATE_SEEDS").is_some() {
            built.save(&path).unwrap();
        }
        // The file is what these functions build (compared as text: a JSON float read back
        // can differ in its last bit), and it loads as a valid results file.
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            text,
            serde_json::to_string_pretty(&built).unwrap(),
            "{name} is stale: regenerate it"
        );
        let loaded = RunResult::load(&path).unwrap();
        assert_eq!(loaded.levels.len(), built.levels.len());
    }

    #[test]
    fn seed_files_match_their_transcription() {
        let curve = seed_122b_curve();
        let agg: Vec<f64> = curve.levels.iter().map(|l| l.throughputs()[0]).collect();
        assert_eq!(agg, vec![121.6, 399.1, 1213.5, 1515.1, 1582.5]);
        assert!(curve.warnings[0].contains("transcribed from a report"));
        check(SEED_122B_CURVE, curve);
        let b1 = seed_27b_batch1();
        assert!((b1.levels[0].throughputs()[0] - 211.77).abs() < 0.01);
        check(SEED_27B_BATCH1, b1);
    }
}
