//! `throughline cleanup OUT`: stops what a run into OUT started and left running: a job
//! cancelled past its grace, or throughline killed outright (SIGKILL, an out-of-memory kill),
//! cannot stop its own servers. A run in blocks records each server's process group in
//! OUT/servers/processes.txt as it starts it; this reads that record and stops each group
//! still there with its whole tree (SIGTERM, up to 30 s, SIGKILL). Nothing is chosen by
//! name: another job's server with the same command line is never touched. A process is
//! signalled only if its environment holds the run's token (`THROUGHLINE_RUN`, which every
//! server process inherits): the record sits in a checkout, and a pull request could commit
//! one listing the runner's own processes.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use clap::Args;

use crate::exit::Exit;

#[derive(Debug, Args)]
pub struct CleanupArgs {
    /// The run's output folder (its servers/processes.txt says what it started).
    #[arg(value_name = "OUT", default_value = "throughline-results")]
    pub out: PathBuf,
    /// How long the processes have between SIGTERM and SIGKILL.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = humantime::parse_duration)]
    pub grace: Duration,
}

pub const EXAMPLES: &str = "\
Examples:
  # In a workflow, after the job, whatever happened (if: always()):
  throughline cleanup throughline-results

  # A run's own folder, with a shorter wait before SIGKILL:
  throughline cleanup ci-blocks --grace 10s
";

pub async fn run(args: CleanupArgs) -> Result<Exit> {
    crate::runner::processes::stop_recorded(&args.out, args.grace).await?;
    Ok(Exit::Pass)
}
