//! `throughline bench`: run a profile and report.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
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
    /// A relative (A/B) run: also measure this server (the target branch's, "base"; repeat
    /// for several replicas) in the same job, its trials interleaved with the profile's
    /// server's ("head"), so that `gate` compares the two arms of one session.
    #[arg(long = "base-endpoint", value_name = "URL")]
    pub base_endpoints: Vec<String>,
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
    check_base_endpoints(&profile, &args.base_endpoints)?;
    let setup = BenchSetup {
        profile,
        environment: args.environment.to_environment(),
        out_dir: args.out.clone(),
        show_progress: !args.no_progress,
        base_endpoints: args.base_endpoints.clone(),
    };
    let outcome = measure(setup).await?;
    let exit = conclude(&outcome, &args.out);
    // An interrupted run exits promptly (SIGTERM usually has a kill deadline behind it).
    if !args.no_plots && outcome.interrupted.is_none() {
        let base = outcome
            .result
            .base
            .as_ref()
            .map(|b| crate::record::trials_by_level(&b.levels));
        write_plots(&outcome.result, base.as_deref(), &args.out);
    }
    Ok(exit)
}

/// Checks base endpoints as the profile's own are checked (errors name the flag).
pub fn check_base_endpoints(profile: &Profile, base: &[String]) -> Result<()> {
    if base.is_empty() {
        return Ok(());
    }
    let mut probe = profile.clone();
    probe.target.endpoints = base.to_vec();
    probe.validate().context("--base-endpoint")?;
    Ok(())
}

/// Runs the sweep, printing each level's row as it finishes.
pub async fn measure(setup: BenchSetup) -> Result<BenchOutcome> {
    let p = &setup.profile;
    println!(
        "throughline bench: profile {:?}, {} level(s) x {} trial(s), {} endpoint(s){}",
        p.name,
        p.sweep.concurrency.len() + p.sweep.rates.len(),
        p.sweep.trials,
        p.target.endpoints.len(),
        match setup.base_endpoints.len() {
            0 => String::new(),
            n => format!("; relative run against {n} base endpoint(s), trials interleaved (ABBA)"),
        }
    );
    println!("{}", console::level_header());
    println!("{}", "-".repeat(console::level_header().len()));
    let mut last_arm = None;
    run_bench(setup, |arm, level| {
        if arm.is_some() && arm != last_arm {
            last_arm = arm;
            println!("{}", console::arm_heading(arm));
        }
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
