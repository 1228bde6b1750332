//! `throughline baseline bless`: write a baseline from run results (never from a PR job:
//! see the README's workflows).

use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, Subcommand};

use crate::exit::Exit;
use crate::gate::baseline::{
    bless, calibration_rows, Baseline, BaselineLock, BlessMode, CalibrationFor,
    CALIBRATION_MAX_AGE_DAYS, CALIBRATION_MAX_BLOCKS,
};
use crate::record::RunResult;

/// The examples `baseline --help` ends with (tests/it/help_examples.rs runs each).
pub const EXAMPLES: &str = "\
Examples:
  # A baseline from a run on main, naming the profile beside it (for `throughline ci`)
  throughline baseline bless -r throughline-results/results.json -b baselines/main.toml \\
      --profile ../throughline.toml
  # Add a session (another run on main) to it
  throughline baseline bless -r throughline-results/results.json -b baselines/main.toml \\
      --append
  # Calibrate the relative gate's slots from a run in blocks whose arms ran the same server
  throughline baseline calibrate -r aa/results.json -b baselines/main.toml";

/// The examples `baseline bless --help` ends with (run by tests/it/help_examples.rs).
pub const BLESS_EXAMPLES: &str = "\
Examples:
  # The first baseline: a run on main, naming its profile (relative to the baseline file)
  throughline baseline bless -r throughline-results/results.json -b baselines/main.toml \\
      --profile ../throughline.toml
  # Another session, from another day: history mode needs several (a nightly bless)
  throughline baseline bless -r throughline-results/results.json -b baselines/main.toml \\
      --append
  # Start over after a deliberate change (a new engine version, driver or GPU)
  throughline baseline bless -r throughline-results/results.json -b baselines/main.toml \\
      --replace --profile ../throughline.toml";

#[derive(Debug, Args)]
pub struct BaselineArgs {
    #[command(subcommand)]
    pub command: BaselineCommand,
}

#[derive(Debug, Subcommand)]
pub enum BaselineCommand {
    /// Write a baseline from run results, one session per results file.
    #[command(after_help = BLESS_EXAMPLES)]
    Bless(BlessArgs),
    /// Add an A/A calibration of the relative gate's two slots to a baseline, from a run in
    /// blocks whose two arms ran the same server (e.g. nightly on main): the slot effect and
    /// the start spread, which a pull request's relative check then takes into account.
    Calibrate(CalibrateArgs),
}

#[derive(Debug, Args)]
pub struct CalibrateArgs {
    /// results.json of an A/A run in blocks (`bench` or `ci` with --server-command and
    /// --base-server-command set to the same command).
    #[arg(long, short = 'r', value_name = "RUN.json")]
    pub results: PathBuf,
    /// The baseline file to add the calibration to.
    #[arg(long, short = 'b', value_name = "FILE")]
    pub baseline: PathBuf,
    /// The commit measured (default: $GITHUB_SHA, else the work tree's HEAD).
    #[arg(long)]
    pub commit: Option<String>,
}

#[derive(Debug, Args)]
pub struct BlessArgs {
    /// results.json of a run (repeat for several runs; each becomes a session).
    #[arg(long, short = 'r', required = true, value_name = "RUN.json")]
    pub results: Vec<PathBuf>,
    /// The baseline file to write, e.g. baselines/NAME.toml.
    #[arg(long, short = 'b', value_name = "FILE")]
    pub baseline: PathBuf,
    /// Start over instead of appending a session.
    #[arg(long)]
    pub replace: bool,
    /// Append a session to the baseline (the default; say it to be explicit).
    #[arg(long, conflicts_with = "replace")]
    pub append: bool,
    /// Baseline name (default: the file name).
    #[arg(long)]
    pub name: Option<String>,
    /// The profile file, relative to the baseline, to record beside it.
    #[arg(long)]
    pub profile: Option<String>,
    /// The commit measured (default: $GITHUB_SHA, else the work tree's HEAD).
    #[arg(long)]
    pub commit: Option<String>,
    /// Bless runs whose load generator was saturated or held requests for more than a third
    /// of the gate's minimum effect (late reads alone never refuse); `gate` and `ci` take
    /// the same flag.
    #[arg(long)]
    pub allow_client_bound: bool,
}

pub async fn run(args: BaselineArgs) -> Result<Exit> {
    match args.command {
        BaselineCommand::Calibrate(c) => {
            let run = RunResult::load(&c.results)?;
            let writing = stop_on_signals_outside_writes();
            let _lock = BaselineLock::acquire(&c.baseline)?;
            let mut baseline = Baseline::load(&c.baseline)?;
            let commit = c
                .commit
                .clone()
                .or_else(|| std::env::var("GITHUB_SHA").ok())
                .or_else(|| crate::gate::gitref::head_commit(&c.baseline));
            let rows = calibration_rows(&baseline, &run, commit)?;
            let added = rows.len();
            baseline.add_calibration(rows);
            {
                let _writing = writing.lock().unwrap_or_else(|e| e.into_inner());
                baseline.save(&c.baseline)?;
            }
            println!(
                "calibrated {}: {added} A/A block row(s) added ({} in the file)",
                c.baseline.display(),
                baseline.calibration.len()
            );
            for level in baseline.levels() {
                let newest = baseline.calibration.last();
                let query = CalibrationFor {
                    at: newest.map(|r| r.measured_at.as_str()),
                    engine_version: newest.and_then(|r| r.engine_version.as_deref()),
                    runner: newest.and_then(|r| r.runner.as_deref()),
                    any_runner: false,
                };
                if let Some(cal) = baseline.slot_calibration(level, &query) {
                    println!(
                        "  C={level}: slot 1 over slot 0 {:+.2}%, sd of an A/A block difference {:.2}% ({} \
                         blocks in use: the newest, at most {CALIBRATION_MAX_BLOCKS} a level and \
                         {CALIBRATION_MAX_AGE_DAYS} days old)",
                        (cal.bias.exp() - 1.0) * 100.0,
                        cal.variance.sqrt() * 100.0,
                        cal.blocks
                    );
                }
            }
            Ok(Exit::Pass)
        }
        BaselineCommand::Bless(b) => {
            let runs = b
                .results
                .iter()
                .map(|p| RunResult::load(p))
                .collect::<Result<Vec<_>>>()?;
            let writing = stop_on_signals_outside_writes();
            let _lock = BaselineLock::acquire(&b.baseline)?;
            let existing = if b.baseline.exists() && !b.replace {
                Some(Baseline::load(&b.baseline)?)
            } else {
                None
            };
            let name = b.name.clone().unwrap_or_else(|| {
                b.baseline
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_else(|| runs[0].profile_name.clone())
            });
            let commit = b
                .commit
                .clone()
                .or_else(|| std::env::var("GITHUB_SHA").ok())
                .or_else(|| crate::gate::gitref::head_commit(&b.baseline));
            let mode = if b.replace {
                BlessMode::Replace
            } else {
                BlessMode::Append
            };
            let sessions_before = existing.as_ref().map_or(0, |e| e.sessions.len());
            let baseline = bless(
                existing,
                &runs,
                mode,
                &name,
                b.profile.clone(),
                commit,
                b.allow_client_bound,
            )?;
            for (i, run) in runs.iter().enumerate() {
                for line in crate::gate::client_bound::lines(run) {
                    let why = if b.allow_client_bound {
                        "with --allow-client-bound: their figures may describe the client"
                    } else {
                        "the client held too little to bias tok/s (late reads blur ITL only)"
                    };
                    eprintln!(
                        "warning: results #{}: client-bound blessed ({why}): {}",
                        i + 1,
                        crate::untrusted::for_terminal(&line)
                    );
                }
            }
            {
                // A signal now waits until the file is replaced and its temporary gone.
                let _writing = writing.lock().unwrap_or_else(|e| e.into_inner());
                baseline.save(&b.baseline)?;
            }
            println!(
                "blessed {} session(s) into {} ({} session(s) now, levels {:?})",
                baseline.sessions.len() - sessions_before,
                b.baseline.display(),
                baseline.sessions.len(),
                baseline.levels()
            );
            Ok(Exit::Pass)
        }
    }
}

/// SIGINT, SIGTERM and SIGHUP end a bless at once (exit 128 + the signal), except while the
/// returned lock is held: a write in progress finishes first, so a stopped bless leaves no
/// temporary file and no half-written baseline (its lock dies with the process).
fn stop_on_signals_outside_writes() -> std::sync::Arc<std::sync::Mutex<()>> {
    use tokio::signal::unix::{signal, SignalKind};
    let writing = std::sync::Arc::new(std::sync::Mutex::new(()));
    let mut streams = Vec::new();
    for (kind, number) in [
        (SignalKind::interrupt(), libc::SIGINT),
        (SignalKind::terminate(), libc::SIGTERM),
        (SignalKind::hangup(), libc::SIGHUP),
    ] {
        if let Ok(s) = signal(kind) {
            streams.push((s, number));
        }
    }
    if streams.is_empty() {
        return writing;
    }
    let guard = std::sync::Arc::clone(&writing);
    tokio::spawn(async move {
        let waits = streams.iter_mut().map(|(s, n)| {
            let n = *n;
            Box::pin(async move {
                s.recv().await;
                n
            })
        });
        let (number, _, _) = futures::future::select_all(waits).await;
        let _writing = guard.lock().unwrap_or_else(|e| e.into_inner());
        eprintln!("bless stopped by signal {number}");
        std::process::exit(128 + number);
    });
    writing
}
