//! `trtllm-serve`: request histograms only, at `/prometheus/metrics` (recognised, so the run
//! says which engine it measured; nothing to sample), `/version`.

use super::{Counting, FixedLength, Spec, Telemetry, VersionRoute};

pub const SPEC: Spec = Spec {
    name: "tensorrt-llm",
    metric_prefixes: &["trtllm_", "trtllm:"],
    unprefixed: None,
    version: Some(VersionRoute {
        path: "/version",
        field: "version",
    }),
    fixed_length: FixedLength::IgnoreEos,
    reuses_connections: true,
    telemetry: Some(Telemetry {
        path: "/prometheus/metrics",
        running: &[],
        waiting: &[],
        cache_usage: &[],
        preemptions: &[],
        generated_tokens: &[],
        counting: Counting::AtCompletion,
    }),
};
