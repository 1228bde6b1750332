//! `throughline bench`: run a profile (a file, or a default one built from the flags) and
//! report.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;

use super::flags::{ExportArgs, RunFlags};
use crate::exit::Exit;
use crate::fsutil::write_atomic;
use crate::gate::{Against, Check};
use crate::profile::{ModelChoice, Profile, QuickStart};
use crate::record::RunResult;
use crate::report::console;
use crate::runner::{check_base_endpoints, conclude, write_plots, wrote_line};

/// The examples `bench --help` ends with (tests/it/help_examples.rs runs each).
pub const EXAMPLES: &str = "\
Examples:
  # A first number: C = 1,8,32, 5 trials, 256 tokens; the model is the server's first
  throughline bench -e http://127.0.0.1:8000
  # Your own levels and lengths, and keep the profile it used for next time
  throughline bench -e http://127.0.0.1:8000 -c 1,4 --max-tokens 64 --trials 2 \\
      --save-profile quick.toml -o quick
  # A profile file, its server beside another (A/B in one job, trials interleaved)
  throughline bench -p throughline.toml --base-endpoint http://127.0.0.1:8001 -o ab";

/// Run a benchmark: a profile file, or a default profile built from the flags.
#[derive(Debug, Args)]
#[command(group(
    clap::ArgGroup::new("what")
        .args(["profile", "endpoints"])
        .required(true)
        .multiple(true)
))]
pub struct BenchArgs {
    /// The benchmark profile (TOML). Without it, --endpoint builds a default profile from the
    /// flags (see `throughline init` for one to edit).
    #[arg(long, short = 'p', value_name = "FILE")]
    pub profile: Option<PathBuf>,
    /// The server's base URL, without /v1 (repeat for several replicas). Replaces the
    /// profile's endpoints; without --profile, runs a default profile against it.
    #[arg(long = "endpoint", short = 'e', value_name = "URL")]
    pub endpoints: Vec<String>,
    /// The model id to request [default: the profile's; without a profile, the first model
    /// the server lists at /v1/models].
    #[arg(long, short = 'm')]
    pub model: Option<String>,
    /// Concurrency levels, comma-separated, e.g. 1,8,32 [default: the profile's, else 1,8,32].
    #[arg(long, short = 'c', value_delimiter = ',', value_name = "C,C,...")]
    pub concurrency: Vec<u32>,
    /// Output tokens asked of each request [default: the profile's, else 256, with
    /// ignore_eos so that every request generates all of them].
    #[arg(long, value_name = "N")]
    pub max_tokens: Option<u32>,
    /// Independent trials per level [default: the profile's, else 5, the fewest the gate
    /// takes].
    #[arg(long, value_name = "N")]
    pub trials: Option<u32>,
    /// The name of the environment variable holding the API key (replaces the profile's;
    /// an unset variable means no key).
    #[arg(long, value_name = "VAR")]
    pub api_key_env: Option<String>,
    /// Write the profile this run uses (flags applied) to FILE as commented TOML, before
    /// it starts: the next run can be `bench --profile FILE`.
    #[arg(long, value_name = "FILE")]
    pub save_profile: Option<PathBuf>,
    /// A relative (A/B) run: also measure this server (the target branch's, "base"; repeat
    /// for several replicas) in the same job, its trials interleaved with the profile's
    /// server's ("head"), so that `gate` compares the two arms of one session.
    #[arg(long = "base-endpoint", value_name = "URL")]
    pub base_endpoints: Vec<String>,
    #[command(flatten)]
    pub run: RunFlags,
    /// Skip the PNG plots and report.md.
    #[arg(long)]
    pub no_plots: bool,
    #[command(flatten)]
    pub export: ExportArgs,
}

pub async fn run(args: BenchArgs) -> Result<Exit> {
    let out = &args.run.out;
    args.export
        .refuse_stdout("bench prints its tables on standard output")?;
    // The folder then holds only what this run writes.
    crate::runner::take_output(out)?;
    let (profile, saved_text) = match &args.profile {
        Some(path) => {
            let mut profile = Profile::load(path)?;
            apply_flags(&mut profile, &args)?;
            let text = saved_profile_text(&profile, path)?;
            (profile, text)
        }
        None => quick_profile(&args).await?,
    };
    check_base_endpoints(&profile, &args.base_endpoints)?;
    if let Some(path) = &args.save_profile {
        write_atomic(path, saved_text.as_bytes())
            .with_context(|| format!("--save-profile {}", path.display()))?;
        println!(
            "profile saved to {} (run it again with: throughline bench --profile {})",
            path.display(),
            path.display()
        );
    }
    if args.run.servers.managed() && args.profile.is_none() {
        bail!("--server-command needs --profile: the profile says what to measure");
    }
    let setup = args.run.to_run(profile, args.base_endpoints.clone())?;
    // Sequential looks read the profile's gate settings (as `gate` without --baseline).
    let check = Check::new(Against::OwnArms, setup.bench.profile.gate.clone());
    let decide = |run: &RunResult| check.decide(run);
    let sequential = setup.looks_ahead().then_some(&decide as _);
    let outcome = crate::runner::run(setup, sequential).await?;
    let exit = conclude(&outcome, out);
    if outcome.interrupted.is_none() {
        args.export.write(&outcome.result, None)?;
    }
    // An interrupted run exits promptly (SIGTERM usually has a kill deadline behind it).
    if !args.no_plots && outcome.interrupted.is_none() {
        let base = outcome
            .result
            .base
            .as_ref()
            .map(|b| crate::record::trials_by_level(&b.levels));
        write_plots(&outcome.result, base.as_deref(), out);
    }
    println!("{}", wrote_line(out));
    println!("{}", console::closing_line(&outcome.result));
    // A signal while the charts were drawn: they are whole, the run was asked to stop.
    let late = crate::runner::signal_received();
    if let (Some(sig), None) = (late, outcome.interrupted) {
        return Ok(Exit::Interrupted(sig));
    }
    Ok(exit)
}

/// Puts the flags given beside a profile file in place of its values, checked as the file is.
fn apply_flags(profile: &mut Profile, args: &BenchArgs) -> Result<()> {
    if !args.endpoints.is_empty() {
        profile.target.endpoints = args.endpoints.clone();
    }
    if let Some(m) = &args.model {
        profile.target.model = ModelChoice::parse(m);
    }
    if !args.concurrency.is_empty() {
        profile.sweep.concurrency = args.concurrency.clone();
    }
    if let Some(n) = args.max_tokens {
        profile.workload.max_tokens = n;
    }
    if let Some(n) = args.trials {
        profile.sweep.trials = n;
    }
    if let Some(v) = &args.api_key_env {
        profile.target.api_key_env = Some(v.clone());
    }
    profile
        .validate()
        .context("the profile with the flags applied")
}

/// A loaded profile (flags applied) as TOML for --save-profile: its own text when no flag
/// changed it, else the values, under a comment saying where they came from.
fn saved_profile_text(profile: &Profile, path: &Path) -> Result<String> {
    let own = std::fs::read_to_string(path).unwrap_or_default();
    if Profile::parse(&own).is_ok_and(|p| p == *profile) {
        return Ok(own);
    }
    let body = toml::to_string(profile).context("cannot write the profile as TOML")?;
    Ok(format!(
        "# A throughline benchmark profile: {} with the command line's flags applied.\n\
         # Run it with: throughline bench --profile THIS_FILE\n\
         # Every key is described in docs/profile.md.\n\n{body}",
        path.display()
    ))
}

/// The default profile from the flags (no profile file), with the model asked of the server
/// when not given, so the profile names what it measured. Returns it with its TOML text.
async fn quick_profile(args: &BenchArgs) -> Result<(Profile, String)> {
    let mut quick = QuickStart::new(&args.endpoints[0]);
    quick.endpoints = args.endpoints.clone();
    if !args.concurrency.is_empty() {
        quick.concurrency = args.concurrency.clone();
    }
    if let Some(n) = args.max_tokens {
        quick.max_tokens = n;
    }
    if let Some(n) = args.trials {
        quick.trials = n;
    }
    quick.api_key_env = args.api_key_env.clone();
    let profile = quick
        .profile()
        .context("the default profile from the flags")?;
    quick.model = match &args.model {
        Some(m) => ModelChoice::parse(m),
        None => {
            let found = crate::load::discover::discover(&profile).await?;
            let Some(model) = found.models.first() else {
                bail!(
                    "the server at {} lists no models at /v1/models; name one with --model",
                    profile.target.endpoints[0]
                );
            };
            println!(
                "model: {} (the first of {} listed at {}/v1/models; --model picks another)",
                crate::untrusted::for_terminal(model),
                found.models.len(),
                profile.target.endpoints[0].trim_end_matches('/')
            );
            ModelChoice::Named(model.clone())
        }
    };
    quick.notes.push(format!(
        "Written by `throughline bench --endpoint {}`{}.",
        quick.endpoints.join(" --endpoint "),
        if args.model.is_some() {
            ""
        } else {
            "; the model is the first the server listed"
        }
    ));
    let profile = quick.profile()?;
    Ok((profile, quick.toml()))
}
