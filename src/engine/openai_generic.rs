//! Any other OpenAI-compatible server (`target.engine = "openai"`): `ignore_eos` only, no
//! telemetry, no version route. Naming it skips detection (and so the telemetry scrapes).

use super::{FixedLength, Spec};

pub const SPEC: Spec = Spec {
    name: "openai",
    metric_prefixes: &[],
    unprefixed: None,
    version: None,
    fixed_length: FixedLength::IgnoreEos,
    reuses_connections: true,
    telemetry: None,
};
