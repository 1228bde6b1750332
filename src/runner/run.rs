//! The one run entry: a command's measurement, typed once from its flags (`RunSetup`), run
//! against servers that are up, or in blocks when throughline starts them. The runner alone
//! takes the output folder: `take_output` first, before anything that can refuse (the folder
//! then holds only what this run writes), its lock held from there to the process's end.

use std::path::Path;

use anyhow::Result;

use super::setup::{BlocksSetup, Decide};
use crate::load::{BenchOutcome, BenchSetup};
use crate::record::blocks::Commits;

/// What a command asks the runner to measure.
pub struct RunSetup {
    /// The profile, the fingerprint given, the folder, the base endpoints.
    pub bench: BenchSetup,
    /// The servers throughline starts, in blocks (`--server-command`); None: they are up.
    pub blocks: Option<BlocksSetup>,
    /// Print each level's server note under its row (the demo's brief output leaves them).
    pub server_notes: bool,
}

impl RunSetup {
    /// A run of `bench`, in `blocks` when given, saying everything.
    pub fn new(bench: BenchSetup, blocks: Option<BlocksSetup>) -> RunSetup {
        RunSetup {
            bench,
            blocks,
            server_notes: true,
        }
    }

    /// The same run recording the commits it compares, where it runs in blocks (the
    /// results carry them; `merge` pools only legs that agree).
    pub fn comparing(self, commits: Commits) -> RunSetup {
        RunSetup {
            blocks: self.blocks.map(|b| b.comparing(commits)),
            ..self
        }
    }

    /// Whether throughline starts the servers (else they must be up: `ready`).
    pub fn starts_servers(&self) -> bool {
        self.blocks.is_some()
    }

    /// Whether the run can add blocks while the gate is undecided (a relative run in
    /// blocks): only then do sequential looks ask a verdict.
    pub fn looks_ahead(&self) -> bool {
        self.blocks.as_ref().is_some_and(BlocksSetup::relative)
    }
}

/// Takes the output folder for this process's run: locked, an earlier run's files kept in
/// `earlier/`, and whatever a run derives left without a run of its own removed
/// (`earlier::start_fresh`). Call it before anything that can refuse.
pub fn take_output(out: &Path) -> Result<()> {
    super::earlier::start_fresh(out).map(|_| ())
}

/// Measures `setup`; `decide` (None: no sequential looks) is the gate's verdict at each look
/// of a run in blocks.
pub async fn run(setup: RunSetup, decide: Option<&Decide<'_>>) -> Result<BenchOutcome> {
    match &setup.blocks {
        Some(blocks) => super::in_blocks::run_in_blocks(setup.bench, blocks, decide).await,
        None => super::measure::measure_with(setup.bench, setup.server_notes).await,
    }
}
