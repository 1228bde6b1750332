//! A check that stopped without a verdict still says why where people look: the job
//! summary, the step outputs, an annotation, verdict.md, and (when refused as not comparable)
//! a verdict.json with no level gated, for `merge` to count.

use std::path::Path;

use anyhow::Result;

use super::github;
use crate::exit::{exit_for, Exit};
use crate::fsutil::write_atomic;
use crate::gate::baseline::{resolve_ref, Baseline};
use crate::gate::{Outcome, Verdict};
use crate::record::files::{VERDICT_JSON, VERDICT_MD};

/// The check that was refused: its output folder, and the baseline it named.
pub struct RefusedCheck<'a> {
    pub out: &'a Path,
    pub baseline: &'a Path,
    /// `--baseline-ref` as given (else the pull request's target branch).
    pub baseline_ref: Option<&'a str>,
}

impl RefusedCheck<'_> {
    /// Writes the job summary, outputs, annotation and files for `error`: not comparable
    /// (exit 3) or could not measure (exit 2).
    pub fn report(&self, error: &anyhow::Error) -> Result<()> {
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
            "The check did not produce a verdict. Look at the message above; the server's log \
             is often where the cause is."
        } else {
            "Nothing was gated. A new engine version can be gated in relative mode \
             (--base-endpoint: each arm reports its own engine). When the change is meant \
             (other hardware, an edited profile), bless a new baseline on the default branch \
             (the bless-baseline workflow) and merge its pull request."
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
        if crate::fsutil::ensure_output_dir(self.out).is_ok() {
            write_atomic(&self.out.join(VERDICT_MD), file_text.as_bytes())?;
            if !unmeasured {
                let verdict = self.verdict(&message);
                write_atomic(
                    &self.out.join(VERDICT_JSON),
                    serde_json::to_string_pretty(&verdict)?.as_bytes(),
                )?;
            }
        }
        Ok(())
    }

    /// A verdict with no level gated, for `throughline merge` to count a refused check.
    fn verdict(&self, message: &str) -> Verdict {
        let github_base = std::env::var("GITHUB_BASE_REF").ok();
        let reference = resolve_ref(self.baseline_ref, github_base.as_deref()).ok();
        let baseline = reference
            .as_deref()
            .and_then(|r| Baseline::load_at_ref(self.baseline, r).ok());
        let name = baseline.as_ref().map_or_else(
            || {
                (self.baseline.file_stem())
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
}
