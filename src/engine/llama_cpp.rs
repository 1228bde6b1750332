//! llama.cpp's `llama-server`: `llamacpp:` metrics counted at completion, `/props`,
//! `n_predict`, and a new connection per request.

use super::{Counting, FixedLength, Spec, Telemetry, VersionRoute};

pub const SPEC: Spec = Spec {
    name: "llama.cpp",
    metric_prefixes: &["llamacpp:"],
    unprefixed: None,
    version: Some(VersionRoute {
        path: "/props",
        field: "build_info",
    }),
    fixed_length: FixedLength::NPredict,
    // llama-server answers a streamed request with `Keep-Alive` and then closes the
    // connection; a closed-loop client that sends its next request at once races that close
    // and gets "connection closed before message completed" for a request the server never
    // saw. A new connection per request costs nothing there: the old one would have closed.
    reuses_connections: false,
    telemetry: Some(Telemetry {
        path: "/metrics",
        running: &["llamacpp:requests_processing"],
        waiting: &["llamacpp:requests_deferred"],
        // Exported by older llama-server builds only.
        cache_usage: &["llamacpp:kv_cache_usage_ratio"],
        preemptions: &[],
        generated_tokens: &["llamacpp:tokens_predicted_total"],
        counting: Counting::AtCompletion,
    }),
};
