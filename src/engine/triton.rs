//! Triton with the TensorRT-LLM backend: the backend's metric families, selected by label,
//! and Triton's own queue gauge. No generated-token counter, so no cross-check; no version
//! route read.

use super::{Counting, FixedLength, Spec, Telemetry};

pub const SPEC: Spec = Spec {
    name: "triton",
    metric_prefixes: &["nv_trt_llm_", "nv_inference_"],
    unprefixed: None,
    version: None,
    fixed_length: FixedLength::IgnoreEos,
    reuses_connections: true,
    telemetry: Some(Telemetry {
        path: "/metrics",
        running: &["nv_trt_llm_request_metrics{request_type=active}"],
        waiting: &[
            "nv_trt_llm_request_metrics{request_type=waiting}",
            "nv_inference_pending_request_count",
        ],
        cache_usage: &["nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type=fraction}"],
        preemptions: &[],
        generated_tokens: &[],
        counting: Counting::AtCompletion,
    }),
};
