//! SGLang: `sglang:` metrics counted per token, `/get_server_info`, `min_tokens` (its
//! OpenAI layer's name for `min_new_tokens`).

use super::{Counting, FixedLength, Spec, Telemetry, VersionRoute};

pub const SPEC: Spec = Spec {
    name: "sglang",
    metric_prefixes: &["sglang:"],
    unprefixed: None,
    version: Some(VersionRoute {
        path: "/get_server_info",
        field: "version",
    }),
    fixed_length: FixedLength::MinTokens,
    reuses_connections: true,
    telemetry: Some(Telemetry {
        path: "/metrics",
        running: &["sglang:num_running_reqs"],
        waiting: &["sglang:num_queue_reqs"],
        cache_usage: &["sglang:token_usage"],
        preemptions: &["sglang:num_retracted_reqs"],
        generated_tokens: &["sglang:generation_tokens_total"],
        counting: Counting::PerToken,
    }),
};
