//! Text Generation Inference: `tgi_` metrics counted at completion, `/info`, and no OpenAI
//! field to ignore end-of-sequence.

use super::{Counting, FixedLength, Spec, Telemetry, VersionRoute};

pub const SPEC: Spec = Spec {
    name: "tgi",
    metric_prefixes: &["tgi_"],
    unprefixed: None,
    version: Some(VersionRoute {
        path: "/info",
        field: "version",
    }),
    fixed_length: FixedLength::Unsupported {
        warning: "workload.ignore_eos: TGI's OpenAI API has no field to ignore end-of-sequence; \
                  output lengths are not fixed (length misses are counted)",
    },
    reuses_connections: true,
    telemetry: Some(Telemetry {
        path: "/metrics",
        running: &["tgi_batch_current_size"],
        waiting: &["tgi_queue_size"],
        cache_usage: &[],
        preemptions: &[],
        generated_tokens: &["tgi_request_generated_tokens_sum"],
        counting: Counting::AtCompletion,
    }),
};
