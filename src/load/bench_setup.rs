//! What a benchmark run takes (its typed setup) and gives (the result and what makes it
//! unusable), and the two things every run's files need: the files written, the time said.

use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::profile::Profile;
use crate::record::files::{RESULTS_FILE, SUMMARY_FILE};
use crate::record::{Environment, RunResult};

/// How to run a benchmark.
pub struct BenchSetup {
    pub profile: Profile,
    /// Fingerprint fields given by the user; the rest is filled from the server.
    pub environment: Environment,
    pub out_dir: PathBuf,
    /// Show progress: a bar on a terminal, a line every ~30 s off one (run/progress.rs).
    pub show_progress: bool,
    /// Relative (A/B) runs: the base server's endpoints (the target branch's), measured in
    /// the same job as the profile's (the head's), trials interleaved. Empty: one server.
    pub base_endpoints: Vec<String>,
}

impl BenchSetup {
    /// A run of `profile` into `out_dir` against one server (no base endpoints), with no
    /// progress bar: the fields a caller changes are then named where it changes them.
    pub fn new(profile: Profile, environment: Environment, out_dir: PathBuf) -> BenchSetup {
        BenchSetup {
            profile,
            environment,
            out_dir,
            show_progress: false,
            base_endpoints: Vec::new(),
        }
    }
}

/// A finished (or stopped) run and what makes it unusable, if anything.
pub struct BenchOutcome {
    pub result: RunResult,
    /// Levels that could not be measured (no success, or too many errors), or why the run
    /// stopped early (the server went away): exit 2.
    pub problems: Vec<String>,
    /// The signal (SIGINT 2, SIGTERM 15) that stopped the run: exit 128 + signal.
    pub interrupted: Option<i32>,
}

/// Writes `results.json` and `summary.csv` into `dir`, atomically.
pub fn write_results(result: &RunResult, dir: &Path) -> Result<()> {
    result.save(&dir.join(RESULTS_FILE))?;
    result.save_csv(&dir.join(SUMMARY_FILE))
}

/// The current UTC time as RFC 3339 text.
pub fn now_rfc3339() -> String {
    time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_else(|_| "unknown".to_string())
}
