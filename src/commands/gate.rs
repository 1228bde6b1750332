//! `throughline gate`: compare a run with a baseline and decide.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;

use super::flags::{ExportArgs, GateOverrides};
use crate::exit::Exit;
use crate::gate::baseline::Baseline;
use crate::gate::{Against, Check, SettingOverride};
use crate::record::RunResult;
use crate::report::publish::Publish;
use crate::report::run::VerdictFiles;

/// The examples `gate --help` ends with (tests/it/help_examples.rs runs each).
pub const EXAMPLES: &str = "\
Examples:
  # A run against a baseline file (exit 1 on a regression, 3 when not comparable)
  throughline gate -r throughline-results/results.json -b baselines/main.toml
  # Against the baseline as it is on main, with a JUnit report for CI
  throughline gate -r throughline-results/results.json -b baselines/main.toml \\
      --baseline-ref origin/main --junit junit.xml
  # An A/B run (bench --base-endpoint) gated on its own, with charts and a Markdown verdict
  throughline gate -r ab/results.json -o ab --markdown ab/verdict.md";

#[derive(Debug, Args, Clone)]
pub struct GateArgs {
    /// The candidate run's results.json.
    #[arg(long, short = 'r', value_name = "RUN.json")]
    pub results: PathBuf,
    /// The baseline file (TOML), e.g. baselines/NAME.toml. Optional for a relative run
    /// (measured with --base-endpoint): its two arms are compared with each other, and a
    /// baseline given too vouches for the profile and environment and gives the settings.
    #[arg(long, short = 'b', value_name = "FILE")]
    pub baseline: Option<PathBuf>,
    /// Read the baseline as it is at this git ref (e.g. origin/main), not from the working tree.
    #[arg(long)]
    pub baseline_ref: Option<String>,
    #[command(flatten)]
    pub overrides: GateOverrides,
    /// Decide on a run whose load generator could have moved the verdict (a saturated
    /// client, or requests it held long enough to change the outcome): without it such a
    /// verdict is not comparable (exit 3), its table still written.
    #[arg(long)]
    pub allow_client_bound: bool,
    /// A slowdown on purpose, as `ci --allow-regression`: a regression is reported as one
    /// (the verdict, its files, the job summary, `verdict=regression` with `accepted=true`)
    /// but exits 0. Refusals (exit 2, 3) stay. For re-gating a saved `ci` run that was let
    /// through so.
    #[arg(long)]
    pub allow_regression: bool,
    /// Write the verdict as JSON (`-`: standard output, the table then goes to stderr).
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write the Markdown summary.
    #[arg(long)]
    pub markdown: Option<PathBuf>,
    /// Also draw the run against the baseline: PNGs and report.md in this folder, with the
    /// charts linked from the Markdown summary.
    #[arg(long, short = 'o', value_name = "DIR")]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    // The exports, `--junit` among them (report/export's registry).
    pub export: ExportArgs<true>,
}

pub async fn run(args: GateArgs) -> Result<Exit> {
    // `-` is standard output, for one file only; the table then goes to stderr.
    let exports: Vec<(String, &std::path::PathBuf)> = args.export.files().collect();
    let mut outputs: Vec<(&str, Option<&std::path::Path>)> = vec![("--json", args.json.as_deref())];
    outputs.extend(exports.iter().map(|(f, p)| (f.as_str(), Some(p.as_path()))));
    let stdout_taken = crate::fsutil::check_one_stdout(&outputs)?;
    if args
        .markdown
        .as_deref()
        .is_some_and(crate::fsutil::is_stdout)
    {
        bail!(
            "--markdown cannot be `-`: ratio.png and pr-comment.md are written beside it; give \
             a file name (or --json - for the verdict on stdout)"
        );
    }
    let candidate = RunResult::load(&args.results)?;
    let baseline = match (&args.baseline, &args.baseline_ref) {
        (Some(path), Some(r)) => Some(Baseline::load_at_ref(path, r)?),
        (Some(path), None) => Some(Baseline::load(path)?),
        (None, _) if candidate.base.is_some() => None,
        (None, _) => bail!(
            "--baseline is needed: {} measured one server (a relative run, measured with \
             --base-endpoint, can be gated on its own)",
            args.results.display()
        ),
    };
    // The settings are the baseline's (as on the target branch), else the run's profile's.
    let given = baseline
        .as_ref()
        .map_or(&candidate.profile.gate, |b| &b.gate);
    let settings = args.overrides.apply(given)?;
    let mut overridden = args.overrides.listed(given);
    if args.allow_regression {
        overridden.push(SettingOverride::allow_regression());
    }
    let settings_from = match (&baseline, &args.baseline_ref) {
        (Some(b), Some(r)) => format!("baseline {} at {r}", b.name),
        (Some(b), None) => format!("baseline {} (working tree)", b.name),
        (None, _) => format!(
            "the run's own profile {} (no --baseline: nothing outside the run vouches for them)",
            candidate.profile_name
        ),
    };
    let check = Check {
        overridden,
        allow_client_bound: args.allow_client_bound,
        settings_from: Some(settings_from),
        baseline_ref: args.baseline_ref.clone(),
        ..Check::new(
            baseline.map_or(Against::OwnArms, Against::Baseline),
            settings,
        )
    };
    let verdict = check
        .judge(&candidate, &args.results.display().to_string())
        .with_context(|| format!("cannot gate {}", args.results.display()))?;
    let publish = Publish {
        files: VerdictFiles {
            json: args.json.clone(),
            markdown: args.markdown.clone(),
            stdout_elsewhere: stdout_taken,
        },
        charts_into: args.out.clone(),
        exports: args.export.asked(),
        ..Publish::default()
    };
    publish.publish(&verdict, &candidate, check.baseline())?;
    // Accepted as intended (--allow-regression): 0, and the headline, outputs and annotation
    // say so.
    Ok(verdict.exit())
}
