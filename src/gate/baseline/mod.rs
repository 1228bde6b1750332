//! Baseline files: the raw trial values a candidate run is gated against, kept in git beside
//! the profile they were measured with.
//!
//! A baseline keeps every trial (never only means), grouped in sessions (one blessed run
//! each, e.g. one per day), so the gate can estimate how much results move from one session
//! to the next as well as from one trial to the next. The gate settings live here too, so a
//! pull request cannot loosen its own gate by editing the profile.

mod at_ref;
mod bless;
mod calibrate;
mod fingerprint_match;
mod lock;
mod model;

pub use at_ref::{fingerprint_line, refuse_another_environment, resolve_ref, AtRef};
pub use bless::bless;
pub use calibrate::{calibration_rows, CalibrationFor};
pub(super) use fingerprint_match::engine_word;
pub use fingerprint_match::{
    fingerprint_differences, fingerprint_differences_except, override_warning, ARM_FIELDS,
};
pub use lock::{lock_path, BaselineLock, LOCK_WAIT};
pub use model::{
    Baseline, BaselineLevel, BlessMode, CalibrationRow, Session, BASELINE_FILE_BYTES,
    BASELINE_SCHEMA, CALIBRATION_MAX_AGE_DAYS, CALIBRATION_MAX_BLOCKS, MAX_CALIBRATION_ROWS,
};

#[cfg(test)]
#[path = "baseline_props.rs"]
mod props;
