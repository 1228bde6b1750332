//! vLLM: `vllm:` metrics counted per token, `/version`, `ignore_eos` with `min_tokens`.

use super::{Counting, FixedLength, Spec, Telemetry, VersionRoute};

pub const SPEC: Spec = Spec {
    name: "vllm",
    metric_prefixes: &["vllm:"],
    unprefixed: None,
    version: Some(VersionRoute {
        path: "/version",
        field: "version",
    }),
    fixed_length: FixedLength::MinTokens,
    reuses_connections: true,
    telemetry: Some(Telemetry {
        path: "/metrics",
        running: &["vllm:num_requests_running"],
        waiting: &["vllm:num_requests_waiting"],
        // Renamed in vLLM V1; older releases export the GPU-only name.
        cache_usage: &["vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"],
        preemptions: &["vllm:num_preemptions_total", "vllm:num_preemptions"],
        generated_tokens: &["vllm:generation_tokens_total"],
        counting: Counting::PerToken,
    }),
};
