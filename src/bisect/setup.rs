//! What every step of a bisect shares: the profile, the calibration, the settings from the
//! command line, the output folder and the clock of --max-duration.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use super::checkout;
use crate::gate::baseline::Baseline;
use crate::profile::Profile;
use crate::record::Environment;
use crate::runner::BlocksSetup;

/// The bisect's settings, as the command took them.
pub struct Settings {
    /// The last commit known fast, and the one known slow.
    pub good: String,
    pub bad: String,
    /// The git repository (any folder in its work tree).
    pub repo: PathBuf,
    /// A commit's server command template, run in its checkout.
    pub server_command: String,
    /// Run in each commit's checkout before its server starts.
    pub build_command: Option<String>,
    pub build_timeout: Duration,
    /// The whole bisect's time budget.
    pub max_duration: Option<Duration>,
    /// Let a step decide where the load generator could have moved the verdict.
    pub allow_client_bound: bool,
    pub keep_worktrees: bool,
    /// Blocks before the first look and at most, as given (None: the defaults).
    pub blocks: (Option<u32>, Option<u32>),
    pub environment: Environment,
}

/// A step's run in blocks of a head and a base server command (the command's slots and
/// blocks, checked as `bench` and `ci` check them).
pub type BlocksFor = Box<dyn Fn(&str, &str) -> Result<BlocksSetup> + Send + Sync>;

/// What every step shares.
pub struct Bisect {
    pub profile: Profile,
    pub baseline: Option<Baseline>,
    pub settings: Settings,
    pub blocks_for: BlocksFor,
    pub out: PathBuf,
    pub started: Instant,
}

/// Makes the output folder `out` ready and holds it: a report left there from before is
/// removed (this bisect's is written anew at its end), the log kept. Returns its full path.
pub fn prepare_output(out: &Path) -> Result<PathBuf> {
    crate::fsutil::ensure_output_dir(out)?;
    crate::locks::hold_output(out)?;
    // Its report is written anew at the end: one left in the folder (or committed there)
    // must not stand for this bisect's meanwhile. The log is the bisect's own journal.
    for report in ["bisect.json", "bisect.md"] {
        crate::fsutil::remove_output(&out.join(report))?;
    }
    out.canonicalize()
        .with_context(|| format!("cannot resolve {}", out.display()))
}

impl Bisect {
    /// One step's run in blocks: the commit's server as head, the good one's as base, within
    /// what is left of the time budget; `more_blocks`: up to twice the --max-blocks.
    pub(super) fn blocks_setup(
        &self,
        head_dir: &Path,
        good_dir: &Path,
        more_blocks: bool,
    ) -> Result<BlocksSetup> {
        let head = checkout::in_dir(head_dir, &self.settings.server_command);
        let base = checkout::in_dir(good_dir, &self.settings.server_command);
        let setup = (self.blocks_for)(&head, &base)?.with_deadline(self.time_left());
        match more_blocks {
            true => {
                let max = twice(setup.plan().max);
                setup.with_max_blocks(max)
            }
            false => Ok(setup),
        }
    }

    /// The time left of --max-duration (None: no budget).
    pub(super) fn time_left(&self) -> Option<Duration> {
        self.settings
            .max_duration
            .map(|d| d.saturating_sub(self.started.elapsed()))
    }
}

/// A step measured again gets twice the plan's most blocks, within the most any plan may
/// have (a large --max-blocks is not a reason to skip the commit).
pub(super) fn twice(max: u32) -> u32 {
    max.saturating_mul(2)
        .min(crate::gate::sequential::MAX_BLOCKS)
}

/// What a log's steps were decided with from `--baseline`: its calibration rows, counted and
/// hashed (a bisect resumed under another calibration is another search).
pub(super) fn calibration_id(baseline: &Baseline) -> Result<String> {
    let rows = serde_json::to_vec(&baseline.calibration)?;
    Ok(format!(
        "{} rows, {}",
        baseline.calibration.len(),
        crate::profile::sha256_id(&rows)
    ))
}
