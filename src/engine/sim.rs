//! throughline's simulator (`serve-sim`): `throughline_sim_` metrics counted per token,
//! `/version`, `ignore_eos`.

use super::{Counting, FixedLength, Spec, Telemetry, VersionRoute};

pub const SPEC: Spec = Spec {
    name: "throughline-sim",
    metric_prefixes: &["throughline_sim_"],
    unprefixed: None,
    version: Some(VersionRoute {
        path: "/version",
        field: "version",
    }),
    fixed_length: FixedLength::IgnoreEos,
    reuses_connections: true,
    telemetry: Some(Telemetry {
        path: "/metrics",
        running: &["throughline_sim_num_requests_running"],
        waiting: &["throughline_sim_num_requests_waiting"],
        // Exported only with a bounded cache (serve-sim --kv-cache-tokens).
        cache_usage: &["throughline_sim_kv_cache_usage_perc"],
        preemptions: &["throughline_sim_num_preemptions_total"],
        generated_tokens: &["throughline_sim_generation_tokens_total"],
        counting: Counting::PerToken,
    }),
};
