//! The one way a run becomes files people read: the charts (with the USL curve when it fits
//! and the baseline's trials beside the run when given) and report.md, for `bench`, `gate`,
//! `ci`, `plot` and `demo` alike; and the one way a verdict is published (console, JSON,
//! JUnit, Markdown, the job summary, step outputs and annotations).

use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::fsutil::write_atomic;
use crate::gate::Verdict;
use crate::record::files::REPORT_MD;
use crate::record::RunResult;
use crate::stats::usl::UslFit;

use super::markdown::run_report_markdown;
use super::plots::write_run_plots;
use super::{github, junit, verdict as text};

/// The Universal Scalability Law fitted to a run's trials, when it has the 3 levels a fit
/// needs and the fit converges (the curve drawn through the throughput plot). Not for an
/// open-loop run: its levels are rates, and the law is about concurrency.
pub fn usl_of(result: &RunResult) -> Option<UslFit> {
    if result.levels.iter().any(|l| l.rate.is_some()) {
        return None;
    }
    let levels = result
        .levels
        .iter()
        .filter(|l| !l.throughputs().is_empty())
        .count();
    if levels < 3 {
        return None;
    }
    crate::stats::fit_usl(&result.throughput_points()).ok()
}

/// Writes the PNGs and `report.md` into `out`; returns every path written, the report last.
/// `baseline` holds (concurrency, trial tok/s) pairs to draw beside the run.
pub fn write_run_files(
    result: &RunResult,
    baseline: Option<&[(u32, Vec<f64>)]>,
    out: &Path,
) -> Result<Vec<PathBuf>> {
    let fit = usl_of(result);
    let curve = fit.as_ref().map(|f| move |n: f64| f.throughput(n));
    let mut written = write_run_plots(
        result,
        baseline,
        curve.as_ref().map(|c| c as &dyn Fn(f64) -> f64),
        out,
    )?;
    let report = out.join(REPORT_MD);
    write_atomic(&report, run_report_markdown(result, &written).as_bytes())?;
    written.push(report);
    Ok(written)
}

/// Where a verdict's files go; `None` writes none of that kind.
#[derive(Debug, Clone, Default)]
pub struct VerdictFiles {
    pub json: Option<PathBuf>,
    pub junit: Option<PathBuf>,
    pub markdown: Option<PathBuf>,
}

/// Prints the verdict and writes every requested file, the job summary, the step outputs
/// and (inside GitHub Actions) the annotations. `images` are chart links for the Markdown.
pub fn publish_verdict(verdict: &Verdict, files: &VerdictFiles, images: &[String]) -> Result<()> {
    print!("{}", text::console(verdict));
    if let Some(path) = &files.json {
        write_atomic(path, serde_json::to_string_pretty(verdict)?.as_bytes())?;
    }
    if let Some(path) = &files.junit {
        write_atomic(path, junit::junit(verdict).as_bytes())?;
    }
    let markdown = text::markdown(verdict, images);
    if let Some(path) = &files.markdown {
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
