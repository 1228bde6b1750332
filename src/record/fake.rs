//! Results built from trial throughputs alone, for tests of what reads results.

use super::*;
use crate::profile::Profile;

pub fn trial(n: u32, tok_per_s: f64) -> TrialResult {
    TrialResult {
        requests_sent: 10,
        succeeded: 10,
        output_tokens: (tok_per_s * 10.0) as u64,
        window_s: 10.0,
        output_tok_per_s: tok_per_s,
        requests_per_s: 1.0,
        per_request_tok_per_s: Some(tok_per_s / 4.0),
        ..TrialResult::new(n)
    }
}

pub fn run(levels: &[(u32, &[f64])]) -> RunResult {
    let profile = Profile::parse(
            "name = \"fake\"\n[target]\nendpoints = [\"http://127.0.0.1:1\"]\n[workload]\nmax_tokens = 64\n[sweep]\nconcurrency = [1]\n",
        )
        .unwrap();
    // The plan the levels came from, as a run records it: their levels, their trials.
    let mut profile = profile;
    profile.sweep.concurrency = levels.iter().map(|(c, _)| *c).collect();
    let most = levels.iter().map(|(_, tps)| tps.len()).max().unwrap_or(1);
    profile.sweep.trials = u32::try_from(most.max(1)).unwrap_or(u32::MAX);
    let mut run = RunResult {
        schema_version: SCHEMA_VERSION,
        tool: "throughline test".into(),
        profile_name: "fake".into(),
        profile_hash: "sha256:fake".into(),
        profile,
        environment: Environment {
            gpu_model: Some("TestGPU".into()),
            endpoints: 1,
            ..Default::default()
        },
        started_at: "2026-11-29T00:00:00Z".into(),
        finished_at: "2026-11-29T00:01:00Z".into(),
        complete: true,
        levels: levels
            .iter()
            .map(|(c, tps)| LevelResult {
                concurrency: *c,
                rate: None,
                trials: tps
                    .iter()
                    .enumerate()
                    .map(|(i, t)| trial(i as u32 + 1, *t))
                    .collect(),
            })
            .collect(),
        warnings: vec![],
        base: None,
        drift: None,
        notes: Vec::new(),
        servers: None,
        analysis: None,
        run_id: None,
    };
    run.analyse();
    run
}
