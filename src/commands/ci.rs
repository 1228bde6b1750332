//! `throughline ci`: the whole pull-request check in one command, for one step of a workflow
//! on a self-hosted GPU runner.
//!
//! It reads the baseline *and the profile beside it* as they are on the target branch (so a
//! pull request can neither approve itself nor change what is measured), waits for the
//! server(s) to be healthy, refuses up front what cannot be compared (profile hash,
//! fingerprint) before spending GPU time, measures, gates, draws, and writes everything a
//! workflow wants: the job summary, step outputs, annotations and an artifacts folder. Every
//! outcome, including "could not measure", leaves a summary and an output behind, so a red
//! check always says why.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;

use super::flags::{GateOverrides, RunFlags};
use crate::exit::Exit;
use crate::gate::baseline::{fingerprint_line, refuse_another_environment, resolve_ref, AtRef};
use crate::gate::gitref::{commit_at, head_commit};
use crate::gate::{Against, Check, SettingOverride};
use crate::record::blocks::Commits;
use crate::record::files::{JUNIT_XML, RESULTS_FILE, VERDICT_JSON, VERDICT_MD};
use crate::report::publish::Publish;
use crate::report::refusal::RefusedCheck;
use crate::report::run::VerdictFiles;

/// The examples `ci --help` ends with (tests/it/help_examples.rs runs each).
pub const EXAMPLES: &str = "\
Examples:
  # The check against the baseline as it is on main (what a pull_request job runs)
  throughline ci -b baselines/main.toml --baseline-ref origin/main \\
      -e http://127.0.0.1:8000 -o ci-out
  # Relative mode: main's server beside this change's, in one job
  throughline ci -b baselines/main.toml --baseline-ref origin/main \\
      -e http://127.0.0.1:8000 --base-endpoint http://127.0.0.1:8001 -o ci-ab
  # Relative mode in blocks: throughline starts both servers, slots swapped between blocks
  throughline ci -b baselines/main.toml --baseline-ref origin/main \\
      --server-command 'throughline serve-sim --port {port}' \\
      --base-server-command 'throughline serve-sim --port {port}' --slots '0;1' -o ci-blocks";

/// Run the profile beside a baseline, gate it against the baseline on the target branch,
/// and report for GitHub Actions (job summary, outputs, annotations, artifacts folder).
#[derive(Debug, Args)]
pub struct CiArgs {
    /// The baseline file (TOML), e.g. baselines/NAME.toml. Its `profile` field names the
    /// profile to run, relative to the baseline file.
    #[arg(long, short = 'b', value_name = "FILE")]
    pub baseline: PathBuf,
    /// Read the baseline and its profile as they are at this git ref
    /// [default: origin/$GITHUB_BASE_REF, the pull request's target branch].
    #[arg(long)]
    pub baseline_ref: Option<String>,
    /// Replace the profile's endpoints (repeat for several replicas; the variable takes a
    /// comma-separated list).
    #[arg(
        long = "endpoint",
        short = 'e',
        value_name = "URL",
        env = "THROUGHLINE_ENDPOINTS",
        value_delimiter = ','
    )]
    pub endpoints: Vec<String>,
    /// Relative mode (the recommended one): the target branch's server, measured in the
    /// same job as the pull request's (--endpoint), trials interleaved, so that what shifts a
    /// whole run (a restart, clocks, a neighbour) shifts both and cancels. The baseline
    /// file then vouches for the profile and the environment and gives the settings.
    #[arg(
        long = "base-endpoint",
        value_name = "URL",
        env = "THROUGHLINE_BASE_ENDPOINTS",
        value_delimiter = ','
    )]
    pub base_endpoints: Vec<String>,
    #[command(flatten)]
    pub run: RunFlags,
    /// How long to wait for every server to answer GET /health (or /v1/models) before
    /// measuring, e.g. 10m, 90s; 0s checks once.
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = humantime::parse_duration)]
    pub wait_healthy: Duration,
    #[command(flatten)]
    pub overrides: GateOverrides,
    /// Decide on a run whose load generator could have moved the verdict (a saturated
    /// client, or requests it held long enough to change the outcome): without it such a
    /// verdict is not comparable (exit 3), written whole with what to do.
    #[arg(long)]
    pub allow_client_bound: bool,
    /// A slowdown on purpose: a regression is reported as one (the verdict, its files, the
    /// job summary, the PR comment and `verdict=regression` say so, with `accepted=true`)
    /// but does not fail the check (exit 0). Refusals (exit 2, 3) stay. Bless the target
    /// branch's baseline after merging (docs/github-actions.md, "An intended slowdown").
    /// The variable takes true/false (yes/no, on/off, 1/0; empty is false); anything else is
    /// an error, never a yes (a typo must not let a slowdown through).
    #[arg(long, env = "THROUGHLINE_ALLOW_REGRESSION", value_parser = yes_or_no)]
    pub allow_regression: bool,
    /// Prefix for the chart links in the job summary, e.g. where your workflow publishes
    /// the PNGs (default: the file names, as they sit in the artifacts folder).
    #[arg(long, value_name = "URL")]
    pub image_base_url: Option<String>,
}

pub async fn run(args: CiArgs) -> Result<Exit> {
    match check(&args).await {
        Ok(exit) => Ok(exit),
        Err(error) => {
            // Leave a trace in the job summary, the outputs and the annotations too: a red
            // check that does not say why sends people to the raw log.
            let refused = RefusedCheck {
                out: &args.run.out,
                baseline: &args.baseline,
                baseline_ref: args.baseline_ref.as_deref(),
            };
            if let Err(e) = refused.report(&error) {
                let said = format!("{e:#}");
                let said = crate::untrusted::for_terminal_lines(&said);
                eprintln!("warning: cannot write the CI report: {said}");
            }
            Err(error)
        }
    }
}

/// THROUGHLINE_ALLOW_REGRESSION's value: a yes or a no, or an error naming what it got
/// (clap's default reads every value but a few as a yes).
fn yes_or_no(value: &str) -> Result<bool, String> {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" | "yes" | "on" | "1" | "y" | "t" => Ok(true),
        "" | "false" | "no" | "off" | "0" | "n" | "f" => Ok(false),
        _ => Err(format!(
            "expected true or false (yes/no, on/off, 1/0), got {:?}",
            crate::untrusted::for_terminal(value)
        )),
    }
}

/// The endpoints given, trimmed, empty ones left out.
fn given(endpoints: &[String]) -> Vec<String> {
    (endpoints.iter())
        .map(|e| e.trim().to_string())
        .filter(|e| !e.is_empty())
        .collect()
}

async fn check(args: &CiArgs) -> Result<Exit> {
    let out = &args.run.out;
    // Before anything that can refuse: the folder then holds only what this check writes
    // (a pull request can commit OUT/verdict.json saying "pass").
    crate::runner::take_output(out)?;
    let github_base = std::env::var("GITHUB_BASE_REF").ok();
    let reference = resolve_ref(args.baseline_ref.as_deref(), github_base.as_deref())?;
    let mut at = AtRef::read(&args.baseline, &reference)?;
    // Checked before measuring: a bad flag must not cost a whole run on the GPU.
    let settings = args.overrides.apply(&at.baseline.gate)?;
    let endpoints = given(&args.endpoints);
    if !endpoints.is_empty() {
        at.profile.target.endpoints = endpoints;
        at.profile.validate().context("--endpoint")?;
    }
    println!(
        "throughline ci: baseline {} and profile {} as at {reference}",
        args.baseline.display(),
        at.profile_path.display()
    );
    let said_first: Vec<String> = at.edited_here().into_iter().collect();
    at.refuse_another_profile()?;
    let base_endpoints = given(&args.base_endpoints);
    crate::runner::check_base_endpoints(&at.profile, &base_endpoints)?;
    let relative = !base_endpoints.is_empty();
    let commits = Commits {
        head: head_commit(&args.baseline),
        base: commit_at(&args.baseline, &reference),
    };
    let setup = args
        .run
        .to_run(at.profile, base_endpoints)?
        .comparing(commits);
    // Servers that are up are checked now; those throughline starts, after measuring.
    if !setup.starts_servers() {
        let env = &setup.bench.environment;
        let ready = crate::runner::ready::servers_ready(
            &setup.bench.profile,
            &setup.bench.base_endpoints,
            args.wait_healthy,
            env,
        );
        if let Some(env) = ready.await? {
            let said = fingerprint_line(&env);
            println!("environment: {}", crate::untrusted::for_terminal(&said));
            refuse_another_environment(&at.baseline, &env, relative)?;
        }
    }
    let mut overridden = args.overrides.listed(&at.baseline.gate);
    if args.allow_regression {
        overridden.push(SettingOverride::allow_regression());
    }
    let check = Check {
        overridden,
        allow_client_bound: args.allow_client_bound,
        settings_from: Some(format!("baseline {} at {reference}", at.baseline.name)),
        baseline_ref: Some(reference),
        said_first,
        ..Check::new(Against::Baseline(at.baseline), settings)
    };
    let decide = |run: &crate::record::RunResult| check.decide(run);
    let outcome = crate::runner::run(setup, Some(&decide)).await?;
    let measured = crate::runner::conclude(&outcome, out);
    println!("{}", crate::report::console::closing_line(&outcome.result));
    // Stopped by a signal: what was measured is on disk, marked incomplete; no verdict.
    if let Exit::Interrupted(_) = measured {
        return Ok(measured);
    }
    if measured != Exit::Pass {
        bail!(
            "the run could not measure every level: {}",
            outcome.problems.join("; ")
        );
    }
    let result = &outcome.result;
    let verdict = check.judge(result, &out.join(RESULTS_FILE).display().to_string())?;
    let junit = crate::report::export::by_flag("junit").context("the JUnit export")?;
    let publish = Publish {
        files: VerdictFiles {
            json: Some(out.join(VERDICT_JSON)),
            markdown: Some(out.join(VERDICT_MD)),
            stdout_elsewhere: false,
        },
        charts_into: Some(out.clone()),
        image_base_url: args.image_base_url.clone(),
        exports: vec![(junit, out.join(JUNIT_XML))],
        summary_footer: Some(out.clone()),
    };
    publish.publish(&verdict, result, check.baseline())?;
    println!("files: {}", out.display());
    // A signal while the gate decided or the charts were drawn: the files are whole (each
    // written atomically), the job was asked to stop, and its exit says so.
    if let Some(sig) = crate::runner::signal_received() {
        eprintln!(
            "interrupted by {} after the run was measured; the verdict's files are written",
            crate::load::run::interrupt::signal_name(sig)
        );
        return Ok(Exit::Interrupted(sig));
    }
    // Accepted as intended (--allow-regression): 0, and the headline, outputs and annotation
    // say so.
    Ok(verdict.exit())
}
