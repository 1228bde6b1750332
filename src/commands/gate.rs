//! `throughline gate`: compare a run with a baseline and decide.

use std::path::Path;

use anyhow::Result;

use crate::baseline::Baseline;
use crate::cli::GateArgs;
use crate::exit::Exit;
use crate::fsutil::write_atomic;
use crate::gate::{evaluate, Verdict};
use crate::record::RunResult;
use crate::report::{github, junit, verdict as text};

pub async fn run(args: GateArgs) -> Result<Exit> {
    let candidate = RunResult::load(&args.results)?;
    let baseline = match &args.baseline_ref {
        Some(r) => Baseline::load_at_ref(&args.baseline, r)?,
        None => Baseline::load(&args.baseline)?,
    };
    let settings = baseline
        .gate
        .overridden(args.alpha, args.min_effect, args.min_trials)?;
    let mut verdict = evaluate(&baseline, &candidate, &settings)?;
    verdict.baseline_ref = args.baseline_ref.clone();
    let images = match &args.out {
        Some(out) => draw(&candidate, &baseline, out, args.markdown.as_deref())?,
        None => Vec::new(),
    };
    publish(&verdict, &args, &images)?;
    Ok(verdict.outcome.exit())
}

/// Writes the charts (baseline trials beside the run, the USL curve with 3+ levels) and
/// report.md into `out`; returns the chart links for the Markdown summary: file names when
/// the summary is written into `out` too, else paths as given.
fn draw(
    run: &RunResult,
    baseline: &Baseline,
    out: &Path,
    markdown: Option<&Path>,
) -> Result<Vec<String>> {
    let trials = baseline.trials_by_level();
    let fit = super::plot::usl_of(run);
    let curve = fit.as_ref().map(|f| move |n: f64| f.throughput(n));
    let written = super::plot::write_plots_and_report(
        run,
        Some(&trials),
        curve.as_ref().map(|c| c as &dyn Fn(f64) -> f64),
        out,
    )?;
    let same_dir = markdown
        .and_then(|m| m.parent())
        .map(|p| {
            if p.as_os_str().is_empty() {
                Path::new(".")
            } else {
                p
            }
        })
        .and_then(|p| p.canonicalize().ok())
        .is_some_and(|p| out.canonicalize().is_ok_and(|o| o == p));
    Ok(written
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "png"))
        .map(|p| {
            if same_dir {
                p.file_name()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .into_owned()
            } else {
                p.display().to_string()
            }
        })
        .collect())
}

/// Prints the verdict and writes every requested or expected output.
pub fn publish(verdict: &Verdict, args: &GateArgs, images: &[String]) -> Result<()> {
    print!("{}", text::console(verdict));
    if let Some(path) = &args.json {
        write_atomic(path, serde_json::to_string_pretty(verdict)?.as_bytes())?;
    }
    if let Some(path) = &args.junit {
        write_atomic(path, junit::junit(verdict).as_bytes())?;
    }
    let markdown = text::markdown(verdict, images);
    if let Some(path) = &args.markdown {
        write_atomic(path, markdown.as_bytes())?;
    }
    github::append_step_summary(&markdown)?;
    github::write_outputs(verdict)?;
    if github::in_actions() {
        for line in github::annotations(verdict) {
            println!("{line}");
        }
    }
    Ok(())
}
