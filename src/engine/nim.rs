//! NVIDIA NIM for LLMs: unprefixed metric names at `/v1/metrics` (NIM's observability
//! page), `/v1/version`.

use super::{Counting, FixedLength, Spec, Telemetry, Unprefixed, VersionRoute};

pub const SPEC: Spec = Spec {
    name: "nim",
    metric_prefixes: &[],
    unprefixed: Some(Unprefixed {
        path: "/v1/metrics",
        metric: "num_requests_running",
    }),
    version: Some(VersionRoute {
        path: "/v1/version",
        field: "release",
    }),
    fixed_length: FixedLength::IgnoreEos,
    reuses_connections: true,
    telemetry: Some(Telemetry {
        path: "/v1/metrics",
        running: &["num_requests_running"],
        waiting: &["num_requests_waiting"],
        cache_usage: &["gpu_cache_usage_perc"],
        preemptions: &[],
        generated_tokens: &["generation_tokens_total"],
        counting: Counting::PerToken,
    }),
};
