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

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;
use reqwest::header::HeaderValue;

use super::flags::{EnvironmentArgs, GateOverrides, ServerArgs};
use crate::exit::{exit_for, not_comparable, Exit};
use crate::fsutil::write_atomic;
use crate::gate::baseline::{fingerprint_differences_except, Baseline, ARM_FIELDS};
use crate::gate::{evaluate, Outcome, Verdict};
use crate::load::probe::{self, wait_healthy};
use crate::load::BenchSetup;
use crate::profile::{GateSettings, Profile};
use crate::record::files::{JUNIT_XML, VERDICT_JSON, VERDICT_MD};
use crate::record::fingerprint::FingerprintField;
use crate::record::{Environment, RunResult};
use crate::report::github;
use crate::report::run::{publish_verdict, write_run_files, VerdictCharts, VerdictFiles};

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
    /// Folder for every file of the check (results, PNGs, report.md, verdict.json, junit.xml).
    #[arg(
        long,
        short = 'o',
        value_name = "DIR",
        default_value = "throughline-results"
    )]
    pub out: PathBuf,
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
    #[arg(long, env = "THROUGHLINE_ALLOW_REGRESSION")]
    pub allow_regression: bool,
    #[command(flatten)]
    pub servers: ServerArgs,
    /// Prefix for the chart links in the job summary, e.g. where your workflow publishes
    /// the PNGs (default: the file names, as they sit in the artifacts folder).
    #[arg(long, value_name = "URL")]
    pub image_base_url: Option<String>,
    #[command(flatten)]
    pub environment: EnvironmentArgs,
    /// Never draw a progress bar (it is drawn only on a terminal anyway).
    #[arg(long)]
    pub no_progress: bool,
}

pub async fn run(args: CiArgs) -> Result<Exit> {
    match check(&args).await {
        Ok(exit) => Ok(exit),
        Err(error) => {
            // Leave a trace in the job summary, the outputs and the annotations too: a red
            // check that does not say why sends people to the raw log.
            if let Err(e) = report_refusal(&args, &error) {
                let said = format!("{e:#}");
                let said = crate::untrusted::for_terminal_lines(&said);
                eprintln!("warning: cannot write the CI report: {said}");
            }
            Err(error)
        }
    }
}

/// The git ref to read the baseline at: the flag, else the pull request's target branch.
pub fn resolve_ref(flag: Option<&str>, github_base_ref: Option<&str>) -> Result<String> {
    if let Some(r) = flag {
        return Ok(r.to_string());
    }
    match github_base_ref.map(str::trim).filter(|s| !s.is_empty()) {
        Some(branch) => Ok(format!("origin/{branch}")),
        None => bail!(
            "--baseline-ref is needed: GITHUB_BASE_REF is not set (this is not a pull_request \
             event); pass the branch the baseline lives on, e.g. --baseline-ref origin/main"
        ),
    }
}

/// Reads the profile the baseline names, at `reference`. Returns it with its working-tree path.
fn profile_at_ref(
    baseline: &Baseline,
    baseline_path: &Path,
    reference: &str,
) -> Result<(Profile, PathBuf, String)> {
    let Some(relative) = &baseline.profile else {
        bail!(
            "baseline {} at {reference} has no `profile` field, so `throughline ci` cannot tell \
             what to run; bless it again with --profile FILE (relative to the baseline)",
            baseline_path.display()
        );
    };
    let dir = baseline_path.parent().unwrap_or_else(|| Path::new(""));
    let path = dir.join(relative);
    let text = crate::gate::gitref::read_at_ref(&path, reference)
        .with_context(|| format!("the profile named by baseline {}", baseline_path.display()))?;
    let mut profile = Profile::parse(&text)
        .with_context(|| format!("invalid profile {} at {reference}", path.display()))?;
    // Its files relative to it, as bench and bless take them (one function for all).
    profile.resolve_files(&path)?;
    Ok((profile, path, text))
}

/// What the check measures and how it decides, read at the target branch's ref: the
/// baseline, its settings (with the flags over them), and its profile (with --endpoint).
struct AtRef {
    reference: String,
    baseline: Baseline,
    settings: GateSettings,
    profile: Profile,
    /// Said first in the verdict (an edited profile is measured as it is at the ref).
    warnings: Vec<String>,
}

/// Reads the baseline and its profile at the target branch's ref, and refuses before
/// anything is measured what could never be compared (GPU time is dear).
fn read_at_ref(args: &CiArgs) -> Result<AtRef> {
    let reference = resolve_ref(
        args.baseline_ref.as_deref(),
        std::env::var("GITHUB_BASE_REF").ok().as_deref(),
    )?;
    let baseline = Baseline::load_at_ref(&args.baseline, &reference).with_context(|| {
        format!(
            "cannot read the baseline at {reference} (in GitHub Actions, check out with \
             `fetch-depth: 0` so that the target branch is there)"
        )
    })?;
    // Checked before measuring: a bad flag must not cost a whole run on the GPU.
    let settings = args.overrides.apply(&baseline.gate)?;
    let (mut profile, profile_path, profile_text) =
        profile_at_ref(&baseline, &args.baseline, &reference)?;
    let endpoints: Vec<String> = args
        .endpoints
        .iter()
        .map(|e| e.trim().to_string())
        .filter(|e| !e.is_empty())
        .collect();
    if !endpoints.is_empty() {
        profile.target.endpoints = endpoints;
        profile.validate().context("--endpoint")?;
    }
    println!(
        "throughline ci: baseline {} and profile {} as at {reference}",
        args.baseline.display(),
        profile_path.display()
    );
    let mut warnings = Vec::new();
    if let Ok(here) =
        crate::fsutil::read_bounded(&profile_path, crate::profile::limits::PROFILE_FILE_BYTES)
    {
        if here != profile_text {
            warnings.push(format!(
                "this change edits {}; the check measures the profile as it is at {reference}, \
                 which the baseline was measured with. Bless a new baseline after merging.",
                profile_path.display()
            ));
        }
    }

    let hash = profile.canonical_hash()?;
    if hash != baseline.profile_hash {
        return Err(not_comparable(format!(
            "the profile {} at {reference} ({hash}) is not the one baseline {} was measured with \
             ({}): the profile was edited without blessing a new baseline",
            profile_path.display(),
            baseline.name,
            baseline.profile_hash
        )));
    }
    Ok(AtRef {
        reference,
        baseline,
        settings,
        profile,
        warnings,
    })
}

async fn check(args: &CiArgs) -> Result<Exit> {
    // Before anything that can refuse: the folder then holds only what this check writes
    // (a pull request can commit OUT/verdict.json saying "pass").
    crate::runner::earlier::start_fresh(&args.out)?;
    let AtRef {
        reference,
        baseline,
        settings,
        profile,
        mut warnings,
    } = read_at_ref(args)?;
    let base_endpoints: Vec<String> = args
        .base_endpoints
        .iter()
        .map(|e| e.trim().to_string())
        .filter(|e| !e.is_empty())
        .collect();
    crate::runner::check_base_endpoints(&profile, &base_endpoints)?;
    let environment = args.environment.to_environment();
    // The servers start inside the blocks; the fingerprint is then checked after measuring.
    let blocks = args.servers.to_setup()?;
    if blocks.is_none() {
        let servers = (profile.target.endpoints.iter()).chain(&base_endpoints);
        let all: Vec<String> = servers.cloned().collect();
        // The same key header the load sends: a server that guards /v1 (vLLM's --api-key)
        // answers 401 to a check without it.
        let api_key = crate::load::stream::client::api_key_header(&profile)?;
        wait_healthy(&all, args.wait_healthy, api_key.as_ref()).await?;
        let relative = !base_endpoints.is_empty();
        let key = api_key.as_ref();
        precheck_environment(&baseline, &profile, &environment, key, relative).await?;
    }
    crate::fsutil::ensure_output_dir(&args.out)?;
    crate::locks::hold_output(&args.out)?;
    let setup = BenchSetup {
        profile,
        environment,
        out_dir: args.out.clone(),
        show_progress: !args.no_progress,
        base_endpoints,
    };
    let decide = |run: &RunResult| evaluate(&baseline, run, &settings);
    let outcome = match &blocks {
        Some(blocks) => crate::runner::run_in_blocks(setup, blocks, Some(&decide)).await?,
        None => crate::runner::measure(setup).await?,
    };
    let measured = crate::runner::conclude(&outcome, &args.out);
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

    // The charts draw the run beside what it is compared with: the base arm, or the baseline.
    let (beside, per_request) = match &result.base {
        Some(base) => (crate::record::trials_by_level(&base.levels), Vec::new()),
        None => (baseline.trials_by_level(), baseline.per_request_by_level()),
    };
    let written = write_run_files(result, Some(&beside), Some(&per_request), &args.out)?;
    let charts = VerdictCharts::of(&written, args.image_base_url.as_deref());

    let mut verdict = decide(result)?;
    let saved = args.out.join(crate::record::files::RESULTS_FILE);
    crate::gate::client_bound::review(
        &mut verdict,
        result,
        args.allow_client_bound,
        &saved.display().to_string(),
        &decide,
    )?;
    verdict.overridden = args.overrides.listed(&baseline.gate);
    if args.allow_regression {
        verdict
            .overridden
            .push(crate::gate::SettingOverride::allow_regression());
    }
    verdict.settings_from = Some(format!("baseline {} at {reference}", baseline.name));
    verdict.baseline_ref = Some(reference);
    // Ours first: annotations show only the first few warnings.
    warnings.append(&mut verdict.warnings);
    verdict.warnings = warnings;
    let files = VerdictFiles {
        json: Some(args.out.join(VERDICT_JSON)),
        markdown: Some(args.out.join(VERDICT_MD)),
        stdout_elsewhere: false,
    };
    publish_verdict(&verdict, &files, &charts)?;
    // JUnit as every export is written: through the registry.
    let junit = crate::report::export::by_flag("junit").context("the JUnit export")?;
    crate::report::export::write_one(junit, &args.out.join(JUNIT_XML), result, Some(&verdict))?;
    github::append_step_summary(&footer(result, &args.out))?;
    println!("files: {}", args.out.display());
    // A signal while the gate decided or the charts were drawn: the files are whole (each
    // written atomically), the job was asked to stop, and its exit says so.
    if let Some(sig) = crate::runner::measure::signal_received() {
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

/// What was measured where, and where the files are: closes the job summary.
fn footer(result: &RunResult, out: &Path) -> String {
    format!(
        "Measured on {} by {}, started {}. Results, per-request records, charts and this \
         report are in the folder {} (uploaded as the job's artifact by the throughput-gate \
         workflow).\n\n",
        // The model id and engine version are the server's words; the rest the file's.
        crate::untrusted::inline_text(&fingerprint_text(&result.environment)),
        crate::untrusted::inline_text(&result.tool),
        crate::untrusted::inline_text(&result.started_at),
        crate::untrusted::code_span(&out.display().to_string())
    )
}

/// The fingerprint in one line, for logs and summaries.
pub fn fingerprint_text(env: &Environment) -> String {
    let mut parts = Vec::new();
    let mut push = |k: &str, v: Option<String>| {
        if let Some(v) = v {
            parts.push(format!("{k} {v}"));
        }
    };
    for field in FingerprintField::ALL {
        push(field.label(), field.read(env));
    }
    push("runner", env.runner.clone());
    parts.push(format!("endpoints {}", env.endpoints));
    parts.join(", ")
}

/// Compares what is known of the fingerprint before measuring (the flags and variables, the
/// model and engine the server reports) with the baseline's: exit 3 without spending the run.
/// In relative mode the engine and its version are each arm's own (the change may be an
/// engine upgrade), so only the rest is checked.
async fn precheck_environment(
    baseline: &Baseline,
    profile: &Profile,
    given: &Environment,
    api_key: Option<&HeaderValue>,
    relative: bool,
) -> Result<()> {
    let client = crate::load::stream::client::build_probe_client(api_key)?;
    let report = probe::probe(
        &client,
        &profile.target.endpoints,
        profile.target.api_key_env.as_deref(),
    )
    .await?;
    let mut env = given.clone();
    env.endpoints = profile.target.endpoints.len();
    let Ok(model) = report.model(&profile.target.model, &profile.target.endpoints[0]) else {
        return Ok(()); // the run itself explains this
    };
    env.model = Some(model);
    // What the run will detect (engine, its version, the GPUs), detected the same way.
    probe::fill_environment(&mut env, &report, &profile.target.endpoints);
    let said = fingerprint_text(&env);
    println!("environment: {}", crate::untrusted::for_terminal(&said));
    let skip: &[&str] = if relative { &ARM_FIELDS } else { &[] };
    let (differ, _) = fingerprint_differences_except(&baseline.environment, &env, skip);
    if !differ.is_empty() {
        return Err(not_comparable(format!(
            "the environment differs from baseline {}'s: {} (nothing was measured; bless a new \
             baseline for this environment)",
            baseline.name,
            differ.join("; ")
        )));
    }
    Ok(())
}

/// The job summary, outputs, annotations and files for a check that stopped without a
/// verdict: not comparable (exit 3) or could not measure (exit 2).
fn report_refusal(args: &CiArgs, error: &anyhow::Error) -> Result<()> {
    let message = crate::record::redact::redact_error(&format!("{error:#}"));
    let unmeasured = exit_for(error) != Exit::NotComparable;
    let (word, title, heading) = if unmeasured {
        (
            "error",
            "throughline could not measure",
            "❌ throughline: could not measure",
        )
    } else {
        (
            Outcome::NotComparable.word(),
            "Throughput not comparable",
            "⚠️ throughline: not comparable with the baseline",
        )
    };
    let advice = if unmeasured {
        "The check did not produce a verdict. Look at the message above; the server's log is \
         often where the cause is."
    } else {
        "Nothing was gated. A new engine version can be gated in relative mode \
         (--base-endpoint: each arm reports its own engine). When the change is meant (other \
         hardware, an edited profile), bless a new baseline on the default branch (the \
         bless-baseline workflow) and merge its pull request."
    };
    let block = crate::untrusted::fenced_block("text", &message);
    let markdown = format!("## {heading}\n\n{block}\n{advice}\n\n");
    github::append_step_summary(&markdown)?;
    // verdict.md names the run, as every file a run derives does (record::run_id).
    let run_id = crate::record::run_id::run_id();
    let file_text = format!("{markdown}{}\n", crate::record::run_id::marker_line(run_id));
    github::write_verdict_outputs(word, None, false, Some(run_id))?;
    if github::in_actions() {
        println!("{}", github::error_annotation(title, &message));
    }
    // An output folder that is a link gets nothing (the refusal above says why).
    if crate::fsutil::ensure_output_dir(&args.out).is_ok() {
        write_atomic(&args.out.join(VERDICT_MD), file_text.as_bytes())?;
        if !unmeasured {
            let verdict = refused_verdict(args, &message);
            write_atomic(
                &args.out.join(VERDICT_JSON),
                serde_json::to_string_pretty(&verdict)?.as_bytes(),
            )?;
        }
    }
    Ok(())
}

/// A verdict with no level gated, for `throughline merge` to count a refused check.
fn refused_verdict(args: &CiArgs, message: &str) -> Verdict {
    let reference = args
        .baseline_ref
        .clone()
        .or_else(|| resolve_ref(None, std::env::var("GITHUB_BASE_REF").ok().as_deref()).ok());
    let baseline = reference
        .as_deref()
        .and_then(|r| Baseline::load_at_ref(&args.baseline, r).ok());
    let name = baseline.as_ref().map_or_else(
        || {
            args.baseline
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default()
        },
        |b| b.name.clone(),
    );
    let settings = baseline.map(|b| b.gate).unwrap_or_default();
    Verdict {
        run_id: Some(crate::record::run_id::run_id().to_string()),
        ..Verdict::refused(&name, &name, reference, settings, message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ref_comes_from_the_flag_or_the_pull_requests_target() {
        assert_eq!(resolve_ref(Some("v1"), Some("main")).unwrap(), "v1");
        assert_eq!(resolve_ref(None, Some("main")).unwrap(), "origin/main");
        let err = resolve_ref(None, Some("")).unwrap_err().to_string();
        assert!(err.contains("--baseline-ref"), "{err}");
        assert!(resolve_ref(None, None).is_err());
    }

    #[test]
    fn the_job_summarys_footer_keeps_the_servers_words_inline() {
        let mut result = crate::record::fake::run(&[(1, &[100.0])]);
        result.environment.model = Some("m\n::error::forged\n```\n##[group]x".into());
        result.environment.engine_version = Some("1.0 <img src=x>".into());
        let text = footer(&result, Path::new("out`\n::warning::x"));
        // One paragraph: no line of it can be a runner command or close a fence.
        assert_eq!(text.trim_end().lines().count(), 1, "{text}");
        assert!(!text.contains("<img"), "{text}");
        assert!(!text.contains("```"), "{text}");
        assert!(!text.contains("##["), "{text}");
    }
}
