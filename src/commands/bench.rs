//! `throughline bench`: run a profile and report.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use anyhow::Result;
use clap::Args;

use super::environment::EnvironmentArgs;
use crate::exit::Exit;
use crate::load::{run_bench, BenchOutcome, BenchSetup};
use crate::profile::Profile;
use crate::record::files::RESULTS_FILE;
use crate::report::console;

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// The benchmark profile (TOML).
    #[arg(long, short = 'p')]
    pub profile: PathBuf,
    /// Folder for results.json, requests.jsonl and summary.csv.
    #[arg(long, short = 'o', default_value = "throughline-results")]
    pub out: PathBuf,
    /// Replace the profile's endpoints (repeat for several replicas).
    #[arg(long = "endpoint")]
    pub endpoints: Vec<String>,
    #[command(flatten)]
    pub environment: EnvironmentArgs,
    /// Never draw a progress bar (it is drawn only on a terminal anyway).
    #[arg(long)]
    pub no_progress: bool,
    /// Skip the PNG plots and report.md.
    #[arg(long)]
    pub no_plots: bool,
}

pub async fn run(args: BenchArgs) -> Result<Exit> {
    let mut profile = Profile::load(&args.profile)?;
    if !args.endpoints.is_empty() {
        profile.target.endpoints = args.endpoints.clone();
        profile.validate()?;
    }
    let setup = BenchSetup {
        profile,
        environment: args.environment.to_environment(),
        out_dir: args.out.clone(),
        show_progress: !args.no_progress && std::io::stderr().is_terminal(),
    };
    let outcome = measure(setup).await?;
    let exit = conclude(&outcome, &args.out);
    // An interrupted run exits promptly (SIGTERM usually has a kill deadline behind it).
    if !args.no_plots && outcome.interrupted.is_none() {
        write_plots(&outcome.result, None, &args.out);
    }
    Ok(exit)
}

/// Runs the sweep, printing each level's row as it finishes.
pub async fn measure(setup: BenchSetup) -> Result<BenchOutcome> {
    let p = &setup.profile;
    println!(
        "throughline bench: profile {:?}, {} level(s) x {} trial(s), {} endpoint(s)",
        p.name,
        p.sweep.concurrency.len() + p.sweep.rates.len(),
        p.sweep.trials,
        p.target.endpoints.len()
    );
    println!("{}", console::level_header());
    println!("{}", "-".repeat(console::level_header().len()));
    run_bench(setup, |level| {
        println!("{}", console::level_row(level));
        if let Some(note) = console::server_note(level) {
            println!("{}", note);
        }
    })
    .await
}

/// Prints warnings and problems; returns 2 when a level could not be measured.
pub fn conclude(outcome: &BenchOutcome, out: &Path) -> Exit {
    for w in &outcome.result.warnings {
        eprintln!("warning: {w}");
    }
    println!("results: {}", out.join(RESULTS_FILE).display());
    if let Some(sig) = outcome.interrupted {
        let name = if sig == 15 { "SIGTERM" } else { "SIGINT" };
        let t = outcome.result.levels.iter().flat_map(|l| &l.trials);
        let (sent, cancelled): (u64, u64) = t.fold((0, 0), |(s, c), t| {
            let n = t.failed.get(&crate::record::ErrorClass::Cancelled);
            (s + t.requests_sent, c + n.copied().unwrap_or(0))
        });
        eprintln!(
            "interrupted by {name}: stopped sending; {sent} requests written ({cancelled} abandoned in flight, counted as cancelled); results marked incomplete"
        );
        return Exit::Interrupted(sig);
    }
    if outcome.problems.is_empty() {
        return Exit::Pass;
    }
    eprintln!("error: the run could not measure every level:");
    for p in &outcome.problems {
        eprintln!("  {p}");
    }
    Exit::Failure
}

/// Draws the PNGs and report.md beside the results (with the USL curve when it fits, and the
/// baseline's trials when given). A plot that cannot be drawn is a warning: the measurement
/// stands without it.
pub fn write_plots(
    result: &crate::record::RunResult,
    baseline: Option<&[(u32, Vec<f64>)]>,
    out: &Path,
) {
    match crate::report::run::write_run_files(result, baseline, out) {
        Ok(paths) => println!(
            "plots: {}",
            paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Err(e) => eprintln!("warning: plots not written: {e:#}"),
    }
}
