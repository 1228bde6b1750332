//! The one way a run becomes files people read: the charts (with the planner's USL curve from
//! the run's analysis, or why it has none, and the baseline's trials beside the run when given) and report.md, for `bench`, `gate`,
//! `ci`, `plot` and `demo` alike; and the one way a verdict is published (console, JSON,
//! JUnit, Markdown with `ratio.png` and the pull-request comment beside it, the job summary,
//! step outputs and annotations).

use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::fsutil::write_atomic;
use crate::gate::Verdict;
use crate::record::analysis::Scaling;
use crate::record::files::{PR_COMMENT_MD, RATIO_PNG, REPORT_MD};
use crate::record::RunResult;

use super::markdown::run_report_markdown;
use super::plots::{ratio_chart, write_run_plots};
use super::{github, links, pr_comment, tables, verdict as text};

/// Writes the PNGs and `report.md` into `out`; returns every path written, the report last.
/// `baseline` holds (concurrency, trial tok/s) pairs to draw beside the run, and
/// `per_request_baseline` (concurrency, trial per-request tok/s) pairs where known.
pub fn write_run_files(
    result: &RunResult,
    baseline: Option<&[(u32, Vec<f64>)]>,
    per_request_baseline: Option<&[(u32, Vec<f64>)]>,
    out: &Path,
) -> Result<Vec<PathBuf>> {
    // The record's analysis, computed with the run: the same fit `plan` uses.
    let scaling = (result.analysis.as_ref()).map_or(Scaling::NotFitted, |a| a.scaling.clone());
    let mut written = write_run_plots(result, baseline, per_request_baseline, &scaling, out)?;
    let report = out.join(REPORT_MD);
    write_atomic(&report, run_report_markdown(result, &written).as_bytes())?;
    written.push(report);
    Ok(written)
}

/// Where a verdict's files go; `None` writes none of that kind.
#[derive(Debug, Clone, Default)]
pub struct VerdictFiles {
    pub json: Option<PathBuf>,
    /// `verdict.md`; `ratio.png` and `pr-comment.md` are written beside it.
    pub markdown: Option<PathBuf>,
    /// Another file of the same command (an export: `gate --junit -`) is standard output.
    pub stdout_elsewhere: bool,
}

impl VerdictFiles {
    /// Whether one of the files is standard output (`-`): the console table and annotations
    /// then go to stderr, so that stdout holds that file alone.
    pub fn stdout_taken(&self) -> bool {
        self.stdout_elsewhere
            || [&self.json, &self.markdown]
                .into_iter()
                .flatten()
                .any(|p| crate::fsutil::is_stdout(p))
    }
}

/// The run's charts for a verdict to show: the PNGs as written, and where a workflow publishes
/// them (`--image-base-url`), if anywhere.
#[derive(Debug, Clone, Default)]
pub struct VerdictCharts {
    pub pngs: Vec<PathBuf>,
    pub base_url: Option<String>,
}

impl VerdictCharts {
    /// The PNGs among the files `write_run_files` wrote.
    pub fn of(written: &[PathBuf], base_url: Option<&str>) -> VerdictCharts {
        VerdictCharts {
            pngs: written
                .iter()
                .filter(|p| p.extension().is_some_and(|e| e == "png"))
                .cloned()
                .collect(),
            base_url: base_url.map(|b| b.trim_end_matches('/').to_string()),
        }
    }

    /// The link to `png` from a Markdown file in `dir`: under the base URL when there is one,
    /// else relative to `dir`.
    fn link(&self, dir: &Path, png: &Path) -> String {
        match &self.base_url {
            Some(base) => format!("{base}/{}", links::escape(&file_name(png))),
            None => links::relative(dir, png),
        }
    }
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Prints the verdict and writes every requested file, the job summary, the step outputs
/// and (inside GitHub Actions) the annotations. `ratio.png` goes beside the Markdown (else
/// beside the run's charts); the job summary shows the Mermaid charts and names the PNGs,
/// linking them only where `charts.base_url` says they can be seen.
pub fn publish_verdict(
    verdict: &Verdict,
    files: &VerdictFiles,
    charts: &VerdictCharts,
) -> Result<()> {
    let console = text::console(verdict);
    let table = crate::untrusted::for_terminal_lines(&console);
    let quiet = files.stdout_taken();
    match quiet {
        true => eprint!("{table}"),
        false => print!("{table}"),
    }
    if let Some(path) = &files.json {
        write_atomic(path, tables::verdict_json(verdict)?.as_bytes())?;
    }
    let charts = match &files.markdown {
        Some(md) => write_verdict_markdown(verdict, md, charts)?,
        None => match charts.pngs.first() {
            Some(png) => with_ratio(verdict, &links::folder_of(png), charts)?,
            None => charts.clone(),
        },
    };
    let wrote_files = files.markdown.is_some() || !charts.pngs.is_empty();
    github::append_step_summary(&step_summary(verdict, &charts, wrote_files))?;
    github::write_outputs(verdict)?;
    if github::in_actions() {
        for line in github::annotations(verdict) {
            match quiet {
                true => eprintln!("{line}"),
                false => println!("{line}"),
            }
        }
    }
    Ok(())
}

/// Draws `ratio.png` into `dir` and returns the charts with it first.
fn with_ratio(verdict: &Verdict, dir: &Path, charts: &VerdictCharts) -> Result<VerdictCharts> {
    crate::fsutil::ensure_output_dir(dir)?;
    let ratio = dir.join(RATIO_PNG);
    ratio_chart(verdict, &ratio)?;
    let mut out = charts.clone();
    out.pngs.retain(|p| p.file_name() != ratio.file_name());
    out.pngs.insert(0, ratio);
    Ok(out)
}

/// Writes `markdown` (the verdict, with its chart links relative to its own folder), and
/// beside it `ratio.png` and `pr-comment.md`; returns the charts with `ratio.png` first.
pub fn write_verdict_markdown(
    verdict: &Verdict,
    markdown: &Path,
    charts: &VerdictCharts,
) -> Result<VerdictCharts> {
    let dir = links::folder_of(markdown);
    let charts = with_ratio(verdict, &dir, charts)?;
    let images: Vec<String> = charts.pngs.iter().map(|p| charts.link(&dir, p)).collect();
    let mut text = text::markdown(verdict, &images);
    // The run's id, hidden: merge and the comment step match it with verdict.json's.
    if let Some(id) = &verdict.run_id {
        text.push_str(&crate::record::run_id::marker_line(id));
        text.push('\n');
    }
    write_atomic(markdown, text.as_bytes())?;
    let names: Vec<String> = charts.pngs.iter().map(|p| file_name(p)).collect();
    write_atomic(
        &dir.join(PR_COMMENT_MD),
        pr_comment::pr_comment(verdict, &names, &super::github::RunContext::from_env()).as_bytes(),
    )?;
    Ok(charts)
}

/// The job summary: the verdict and the Mermaid charts. A PNG is linked only under a base
/// URL; a path on the runner's disk renders as a broken image, so those are only named (and
/// the artifact pointed to only when `wrote_files`).
pub fn step_summary(verdict: &Verdict, charts: &VerdictCharts, wrote_files: bool) -> String {
    let remote: Vec<String> = match &charts.base_url {
        Some(_) => charts
            .pngs
            .iter()
            .map(|p| charts.link(Path::new("."), p))
            .collect(),
        None => Vec::new(),
    };
    let mut out = text::markdown(verdict, &remote);
    out.push_str(&pr_comment::charts(verdict));
    if wrote_files {
        let names: Vec<String> = charts.pngs.iter().map(|p| file_name(p)).collect();
        out.push_str(&pr_comment::artifact_line(&names));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::plots::ratio_tests::mixed;

    #[test]
    fn only_pngs_are_charts_and_the_base_url_is_trimmed() {
        let written = vec![
            PathBuf::from("out/throughput.png"),
            PathBuf::from("out/report.md"),
        ];
        let charts = VerdictCharts::of(&written, Some("https://x/y/"));
        assert_eq!(charts.pngs, vec![PathBuf::from("out/throughput.png")]);
        assert_eq!(
            charts.link(Path::new("anywhere"), &charts.pngs[0]),
            "https://x/y/throughput.png"
        );
    }

    /// Issue 20 item 5: verdict.md in another folder than the charts links them from its own
    /// folder; ratio.png and pr-comment.md sit beside it; the job summary links no local PNG.
    #[test]
    fn links_are_relative_to_verdict_md_and_the_summary_shows_mermaid() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        std::fs::create_dir_all(&out).unwrap();
        let png = out.join("throughput.png");
        std::fs::write(&png, b"png").unwrap();
        let md = dir.path().join("reports/verdict.md");
        let v = mixed();
        let charts = VerdictCharts::of(&[png], None);
        let charts = write_verdict_markdown(&v, &md, &charts).unwrap();
        let text = std::fs::read_to_string(&md).unwrap();
        assert!(text.contains("(ratio.png)"), "{text}");
        assert!(text.contains("(../out/throughput.png)"), "{text}");
        assert!(dir.path().join("reports/ratio.png").is_file());
        let comment = std::fs::read_to_string(dir.path().join("reports/pr-comment.md")).unwrap();
        assert!(
            comment.starts_with("<!-- throughline-verdict -->\n"),
            "{comment}"
        );
        let summary = step_summary(&v, &charts, true);
        assert!(!summary.contains(".png)"), "{summary}");
        assert!(summary.contains("```mermaid\n"), "{summary}");
        assert!(
            summary.contains("`ratio.png`, `throughput.png`"),
            "{summary}"
        );
        let remote = VerdictCharts {
            base_url: Some("https://example.com/run/1".into()),
            ..charts
        };
        let summary = step_summary(&v, &remote, true);
        assert!(!step_summary(&v, &VerdictCharts::default(), false).contains("artifact"));
        assert!(
            summary.contains("(https://example.com/run/1/ratio.png)"),
            "{summary}"
        );
    }
}
