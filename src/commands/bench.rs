//! `throughline bench`: run a profile (a file, or a default one built from the flags) and
//! report.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;

use super::environment::EnvironmentArgs;
use crate::exit::Exit;
use crate::fsutil::write_atomic;
use crate::load::{run_bench, BenchOutcome, BenchSetup};
use crate::profile::{ModelChoice, Profile, QuickStart};
use crate::record::files::{DERIVED_FILES, REQUESTS_FILE, RESULTS_FILE};
use crate::report::console;
use crate::report::export::{write_exports, Exporter, EXPORTERS};

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
    /// Folder for results.json, requests.jsonl and summary.csv. An earlier run's files found
    /// there are moved into DIR/earlier/<its start time>/, never overwritten.
    #[arg(
        long,
        short = 'o',
        value_name = "DIR",
        default_value = "throughline-results"
    )]
    pub out: PathBuf,
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
    pub environment: EnvironmentArgs,
    #[command(flatten)]
    pub servers: super::blocks::ServerArgs,
    /// Never draw a progress bar (it is drawn only on a terminal anyway).
    #[arg(long)]
    pub no_progress: bool,
    /// Skip the PNG plots and report.md.
    #[arg(long)]
    pub no_plots: bool,
    #[command(flatten)]
    pub export: ExportArgs,
}

/// Exports for dashboards and CI, each written atomically: one `--<flag> FILE` per format in
/// report/export's registry, with its help, generated from it (a new format needs no line
/// here). `VERDICT` offers the formats made from a verdict too (`gate`); `bench` has none.
#[derive(Clone, Default)]
pub struct ExportArgs<const VERDICT: bool = false> {
    /// (format, file) in the registry's order.
    asked: Vec<(&'static dyn Exporter, PathBuf)>,
}

impl<const VERDICT: bool> std::fmt::Debug for ExportArgs<VERDICT> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let asked: Vec<(Option<&str>, &PathBuf)> =
            self.asked.iter().map(|(e, p)| (e.flag(), p)).collect();
        f.debug_struct("ExportArgs").field("asked", &asked).finish()
    }
}

impl<const VERDICT: bool> ExportArgs<VERDICT> {
    /// The formats offered, with their flags.
    fn offered() -> impl Iterator<Item = (&'static dyn Exporter, &'static str)> {
        (EXPORTERS.iter().copied())
            .filter(|e| VERDICT || !e.needs_verdict())
            .filter_map(|e| Some((e, e.flag()?)))
    }

    /// The files asked for, with their flags (`--export-bmf`, ...).
    pub fn files(&self) -> impl Iterator<Item = (String, &PathBuf)> {
        (self.asked.iter()).map(|(e, p)| (format!("--{}", e.flag().unwrap_or("?")), p))
    }

    /// Refuses `-` (standard output) for an export where the command's own output is there:
    /// the two would mix and neither would parse.
    pub fn refuse_stdout(&self, why: &str) -> Result<()> {
        for (flag, path) in self.files() {
            if crate::fsutil::is_stdout(path) {
                bail!("{flag} cannot be `-` here: {why}; give a file name");
            }
        }
        Ok(())
    }

    /// Writes the exports asked for; a failure is an error (the job asked for the file).
    pub fn write(
        &self,
        run: &crate::record::RunResult,
        verdict: Option<&crate::gate::Verdict>,
    ) -> Result<()> {
        // On stderr: a file given as `-` (or another command's `--json -`) owns stdout.
        for p in write_exports(&self.asked, run, verdict)? {
            eprintln!("export: {}", p.display());
        }
        Ok(())
    }
}

impl<const VERDICT: bool> clap::FromArgMatches for ExportArgs<VERDICT> {
    fn from_arg_matches(matches: &clap::ArgMatches) -> Result<Self, clap::Error> {
        let mut args = Self::default();
        args.update_from_arg_matches(matches)?;
        Ok(args)
    }

    fn update_from_arg_matches(&mut self, matches: &clap::ArgMatches) -> Result<(), clap::Error> {
        for (exporter, flag) in Self::offered() {
            if let Some(path) = matches.get_one::<PathBuf>(flag) {
                self.asked.retain(|(e, _)| e.flag() != Some(flag));
                self.asked.push((exporter, path.clone()));
            }
        }
        Ok(())
    }
}

impl<const VERDICT: bool> clap::Args for ExportArgs<VERDICT> {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        Self::offered().fold(cmd, |cmd, (exporter, flag)| {
            cmd.arg(
                clap::Arg::new(flag)
                    .long(flag)
                    .value_name("FILE")
                    .value_parser(clap::value_parser!(PathBuf))
                    .action(clap::ArgAction::Set)
                    .help(exporter.help()),
            )
        })
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_args(cmd)
    }
}

pub async fn run(args: BenchArgs) -> Result<Exit> {
    args.export
        .refuse_stdout("bench prints its tables on standard output")?;
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
    let setup = BenchSetup {
        profile,
        environment: args.environment.to_environment(),
        out_dir: args.out.clone(),
        show_progress: !args.no_progress,
        base_endpoints: args.base_endpoints.clone(),
    };
    let outcome = if args.servers.managed() {
        if args.profile.is_none() {
            bail!("--server-command needs --profile: the profile says what to measure");
        }
        // Sequential looks read the profile's gate settings (as `gate` without --baseline).
        let settings = setup.profile.gate.clone();
        let undecided = |run: &crate::record::RunResult| -> Result<Vec<u32>> {
            let verdict = crate::gate::evaluate_relative(run, &settings)?;
            Ok(super::blocks::undecided_levels(&verdict))
        };
        let sequential = args.servers.base_server_command.is_some();
        super::blocks::run_in_blocks(setup, &args.servers, sequential.then_some(&undecided as _))
            .await?
    } else {
        measure(setup).await?
    };
    let exit = conclude(&outcome, &args.out);
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
        write_plots(&outcome.result, base.as_deref(), &args.out);
    }
    println!("{}", wrote_line(&args.out));
    println!("{}", console::closing_line(&outcome.result));
    // A signal while the charts were drawn: they are whole, the run was asked to stop.
    let late = crate::load::run::interrupt::Interrupt::installed().and_then(|i| i.signal());
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
         # Every key is described in the README (\"The profile\").\n\n{body}",
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
            let found = super::init::discover(&profile).await?;
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

/// "wrote DIR/: results.json, ..." with the run's files that are there.
pub fn wrote_line(out: &Path) -> String {
    let there: Vec<&str> = std::iter::once(REQUESTS_FILE)
        .chain(DERIVED_FILES)
        .filter(|n| out.join(n).is_file())
        .collect();
    let earlier = out.join(super::earlier::EARLIER_DIR);
    format!(
        "wrote {}: {}{}",
        out.display(),
        if there.is_empty() {
            "nothing".to_string()
        } else {
            there.join(", ")
        },
        if earlier.is_dir() {
            format!("; earlier runs are in {}", earlier.display())
        } else {
            String::new()
        }
    )
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
    crate::locks::hold_output(&setup.out_dir)?;
    if let Some((kept, names)) = super::earlier::keep_earlier_run(&setup.out_dir)? {
        println!(
            "the earlier run's files in {} ({}) are kept: moved to {}",
            setup.out_dir.display(),
            names.join(", "),
            kept.display()
        );
    }
    let p = &setup.profile;
    println!(
        "throughline bench: profile {}, {} level(s) x {} trial(s), {} endpoint(s){}",
        crate::untrusted::for_terminal(&format!("{:?}", p.name)),
        p.sweep.level_count(),
        p.sweep.trials,
        p.target.endpoints.len(),
        match setup.base_endpoints.len() {
            0 => String::new(),
            n => format!("; relative run against {n} base endpoint(s), trials interleaved (ABBA)"),
        }
    );
    let arms = if setup.base_endpoints.is_empty() {
        1
    } else {
        2
    };
    println!("{}", console::planned(p, arms));
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
            println!("{}", crate::untrusted::for_terminal_lines(&note));
        }
    })
    .await
}

/// Prints warnings and problems; returns 2 when a level could not be measured.
pub fn conclude(outcome: &BenchOutcome, out: &Path) -> Exit {
    for w in &outcome.result.warnings {
        eprintln!("warning: {}", console::short_warning(w, "report.md"));
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
        eprintln!("  {}", crate::untrusted::for_terminal(p));
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
    match crate::report::run::write_run_files(result, baseline, None, out) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct OnBench {
        #[command(flatten)]
        export: ExportArgs,
    }

    #[derive(Debug, Parser)]
    struct OnGate {
        #[command(flatten)]
        export: ExportArgs<true>,
    }

    fn flags<const V: bool>(args: &ExportArgs<V>) -> Vec<(&'static str, String)> {
        (args.asked.iter())
            .map(|(e, p)| (e.flag().unwrap(), p.display().to_string()))
            .collect()
    }

    #[test]
    fn export_flags_come_from_the_registry() {
        let bench = OnBench::try_parse_from([
            "bench",
            "--export-github-benchmark-smaller",
            "s.json",
            "--export-bmf",
            "b.json",
        ])
        .unwrap();
        // In the registry's order, whatever the command line's.
        assert_eq!(
            flags(&bench.export),
            [
                ("export-bmf", "b.json".to_string()),
                ("export-github-benchmark-smaller", "s.json".to_string())
            ]
        );
        // JUnit needs a verdict: `gate` offers it, `bench` does not.
        assert!(OnBench::try_parse_from(["bench", "--junit", "j.xml"]).is_err());
        let gate = OnGate::try_parse_from(["gate", "--junit", "j.xml"]).unwrap();
        assert_eq!(flags(&gate.export), [("junit", "j.xml".to_string())]);
        assert!(flags(&OnGate::try_parse_from(["gate"]).unwrap().export).is_empty());
    }
}
