//! The result data model and its files: the run result (JSON), one line per request (JSONL)
//! and a CSV summary.
//!
//! Every request sent is accounted for: `requests_sent == succeeded + sum(failed)` in every
//! trial, and throughput counts successful requests only. The JSON carries a schema version
//! so that readers refuse files they do not understand instead of misreading them.
//! What the figures say (peak, knee, drift, the scaling fit) is [`analysis`], computed once
//! per record and read by every report.
//!
//! By job: `model` the run, level and trial types; `request` one request's line;
//! `store` reading and writing the files; `text` the sentences flags and drift are told
//! in; `drift` the drift across rounds. Their items are re-exported here
//! (`crate::record::TrialResult`).

pub mod analysis;
pub mod blocks;
pub mod checks;
pub mod coverage;
pub mod files;
pub mod fingerprint;
mod model;
pub mod redact;
mod request;
mod run_drift;
pub mod run_id;
mod store;
pub mod telemetry;
mod text;
pub mod trial_flags;

pub use model::{
    per_request_by_level, trials_by_level, BaseArm, ClientHeadroom, Environment, InputCheck,
    LevelResult, OpenLoopStats, Override, PrefixCacheUse, RunResult, TrialMetric, TrialResult,
    FIGURE_MAX,
};
pub use request::{Arm, ErrorClass, RequestRecord, TokenSource, Window};
pub use store::{OLDEST_SCHEMA_VERSION, RESULTS_FILE_BYTES, SCHEMA_VERSION};
pub use text::{
    drift_warning, estimated_percentiles_note, figure_text, flag_lines, flag_summary, levels_text,
};

#[cfg(test)]
pub mod fake;

#[cfg(test)]
#[path = "record_props.rs"]
mod props;
