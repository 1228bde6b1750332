//! Where a verdict goes, chosen once from a command's flags (criterion's report fan-out):
//! the run's charts drawn beside what it was compared with, the verdict's own files
//! (console, JSON, Markdown with `ratio.png` and the PR comment, the job summary, outputs,
//! annotations), the exports asked for, and, for `ci`, the job summary's closing paragraph.
//! `gate` and `ci` publish through it, in one order.

use std::path::{Path, PathBuf};

use anyhow::Result;

use super::export::{write_exports, Exporter};
use super::github;
use super::run::{publish_verdict, write_run_files, VerdictCharts, VerdictFiles};
use crate::gate::baseline::{fingerprint_line, Baseline};
use crate::gate::Verdict;
use crate::record::{trials_by_level, RunResult};

/// Everything a verdict is written to.
#[derive(Default)]
pub struct Publish {
    /// verdict.json and verdict.md (with ratio.png and pr-comment.md beside it).
    pub files: VerdictFiles,
    /// Draw the run's charts and report.md into this folder, linked from the verdict.
    pub charts_into: Option<PathBuf>,
    /// Where a workflow publishes the PNGs (`--image-base-url`), for the summary's links.
    pub image_base_url: Option<String>,
    /// The exports asked for (format, file), JUnit among them.
    pub exports: Vec<(&'static dyn Exporter, PathBuf)>,
    /// Close the job summary with what was measured where and the folder holding the files
    /// (`ci`, whose folder is uploaded as the job's artifact).
    pub summary_footer: Option<PathBuf>,
}

impl Publish {
    /// Draws the run (beside the base arm, else `baseline`'s sessions) and publishes
    /// `verdict` everywhere asked.
    pub fn publish(
        &self,
        verdict: &Verdict,
        run: &RunResult,
        baseline: Option<&Baseline>,
    ) -> Result<()> {
        let charts = match &self.charts_into {
            Some(dir) => {
                let (beside, per_request) = beside(run, baseline);
                let written = write_run_files(run, Some(&beside), Some(&per_request), dir)?;
                VerdictCharts::of(&written, self.image_base_url.as_deref())
            }
            None => VerdictCharts::default(),
        };
        publish_verdict(verdict, &self.files, &charts)?;
        // On stderr: a file given as `-` (or `--json -`) owns stdout.
        for path in write_exports(&self.exports, run, Some(verdict))? {
            eprintln!("export: {}", path.display());
        }
        if let Some(out) = &self.summary_footer {
            github::append_step_summary(&footer(run, out))?;
        }
        Ok(())
    }
}

/// What the charts draw beside the run: the base arm of a relative run, else the baseline's
/// sessions (with its per-request figures), else nothing.
type Beside = (Vec<(u32, Vec<f64>)>, Vec<(u32, Vec<f64>)>);

fn beside(run: &RunResult, baseline: Option<&Baseline>) -> Beside {
    match (&run.base, baseline) {
        (Some(base), _) => (trials_by_level(&base.levels), Vec::new()),
        (None, Some(b)) => (b.trials_by_level(), b.per_request_by_level()),
        (None, None) => (Vec::new(), Vec::new()),
    }
}

/// What was measured where, and where the files are: closes the job summary.
fn footer(result: &RunResult, out: &Path) -> String {
    format!(
        "Measured on {} by {}, started {}. Results, per-request records, charts and this \
         report are in the folder {} (uploaded as the job's artifact by the throughput-gate \
         workflow).\n\n",
        // The model id and engine version are the server's words; the rest the file's.
        crate::untrusted::inline_text(&fingerprint_line(&result.environment)),
        crate::untrusted::inline_text(&result.tool),
        crate::untrusted::inline_text(&result.started_at),
        crate::untrusted::code_span(&out.display().to_string())
    )
}

#[cfg(test)]
mod tests {
    use super::*;

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
