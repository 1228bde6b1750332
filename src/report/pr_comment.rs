//! What a reviewer sees on GitHub without opening the artifact: the pull-request comment body
//! (`pr-comment.md`) and the job summary. Both carry the verdict, the per-level table and the
//! Mermaid charts GitHub draws itself; the PNGs stay in the artifact (a local path in Markdown
//! on GitHub is a broken image).

use std::fmt::Write;

use crate::gate::Verdict;
use crate::record::files::{PR_COMMENT_MARKER, VERDICT_MD};

use super::github::RunContext;
use super::verdict::{against_line, headline_md, icon};
use super::{mermaid, tables};

/// The comment body: the marker line first (a workflow finds and updates its one comment by
/// it), the verdict, a compact table, the charts, and where the rest is. `pngs` are the chart
/// file names in the artifact.
pub fn pr_comment(verdict: &Verdict, pngs: &[String], context: &RunContext) -> String {
    comment_naming(verdict, pngs, context, VERDICT_MD)
}

/// A comment's first lines: the marker (a workflow finds and updates its one comment by it),
/// the run's id on the second line (the comment step posts a body only when its id is the
/// one the gate job's run said: scripts/gate-server.sh comment), and the headline.
pub(super) fn comment_head(run_id: Option<&str>, icon: &str, headline: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{PR_COMMENT_MARKER}");
    if let Some(id) = run_id {
        let _ = writeln!(out, "{}", crate::record::run_id::marker_line(id));
    }
    let _ = writeln!(out, "### {icon} throughline: {headline}\n");
    out
}

/// [`pr_comment`], its last line naming `full` as the artifact's file with the whole verdict
/// (`merge` writes report.md, not verdict.md).
pub(super) fn comment_naming(
    verdict: &Verdict,
    pngs: &[String],
    context: &RunContext,
    full: &str,
) -> String {
    let mut out = comment_head(
        verdict.run_id.as_deref(),
        icon(verdict),
        &headline_md(verdict),
    );
    let _ = writeln!(out, "{}\n", against_line(verdict));
    if let Some(line) = verdict.overrides_line() {
        let _ = writeln!(out, "**{line}**\n");
    }
    // Why a measured verdict was not decided, with the way on: a reviewer must see it here.
    for line in verdict.refusal.iter().cloned().chain(verdict.notices()) {
        let _ = writeln!(out, "**{}**\n", crate::untrusted::inline_text(&line));
    }
    out.push_str(&tables::markdown(tables::COMPACT, verdict));
    let _ = writeln!(out);
    // Below the table: the reader looks for the verdict and the ratios first.
    for line in super::verdict::slot_lines(verdict) {
        let _ = writeln!(out, "{line}\n");
    }
    // What the verdict cost: blocks per pair and runner, wall time and GPU-hours.
    for note in verdict.cost_notes() {
        let _ = writeln!(out, "{}\n", crate::untrusted::inline_text(note));
    }
    out.push_str(&super::explain::markdown(verdict));
    out.push_str(&charts(verdict));
    if !verdict.warnings.is_empty() {
        let _ = writeln!(
            out,
            "{} warning(s): see `{full}` in the artifact.\n",
            verdict.warnings.len()
        );
    }
    // A failed required check cannot be merged: the way through is the label, which the
    // recipes read as the action's allow-slowdown input.
    if verdict.regression_accepted() {
        let _ = writeln!(out, "{ACCEPTED_NEXT}\n");
    } else if verdict.outcome == crate::gate::Outcome::Regression {
        let _ = writeln!(out, "{INTENDED}\n");
    }
    out.push_str(&artifact_line_naming(pngs, full));
    if let Some(line) = context_line(context) {
        let _ = writeln!(out, "{line}");
    }
    // GitHub refuses a comment over 65,536 characters: a verdict of many levels is cut,
    // saying so (src/untrusted.rs).
    crate::untrusted::bound_summary(&out, COMMENT_LIMIT, "in verdict.md in the artifact")
}

/// What a regression's comment says to the author of an intended slowdown.
pub const INTENDED: &str = "If this slowdown is intended, add the label \
    `throughput: intended-slowdown` to the pull request and push again (a re-run does not see \
    a label added since): the check then reports the regression without failing. After \
    merging, bless the target branch's baseline (docs/github-actions.md, \"An intended \
    slowdown\").";

/// What an accepted regression's comment says is left to do.
pub const ACCEPTED_NEXT: &str = "Accepted as intended (`throughput: intended-slowdown`). After \
    merging, bless the target branch's baseline so that it follows (docs/github-actions.md, \
    \"An intended slowdown\").";

/// The most of a comment body kept, in bytes: under GitHub's 65,536 characters.
pub const COMMENT_LIMIT: usize = 60_000;

/// The Mermaid charts, each followed by a blank line; empty when there is nothing to draw.
pub fn charts(verdict: &Verdict) -> String {
    [
        mermaid::throughput_block(verdict),
        mermaid::ratio_block(verdict),
    ]
    .into_iter()
    .flatten()
    .map(|b| b + "\n")
    .collect()
}

/// "<sub>[The run](URL) · head `abc1234567` · base `def4567890`</sub>", where known.
pub(super) fn context_line(c: &RunContext) -> Option<String> {
    let short = |s: &str| s.chars().take(10).collect::<String>();
    let parts: Vec<String> = [
        c.run_url
            .as_ref()
            .map(|u| format!("[the run and its artifact]({u})")),
        c.head_sha.as_ref().map(|s| format!("head `{}`", short(s))),
        c.base_sha.as_ref().map(|s| format!("base `{}`", short(s))),
    ]
    .into_iter()
    .flatten()
    .collect();
    (!parts.is_empty()).then(|| format!("<sub>{}</sub>", parts.join(" · ")))
}

/// Where the full report and the PNGs are.
pub fn artifact_line(pngs: &[String]) -> String {
    artifact_line_naming(pngs, VERDICT_MD)
}

fn artifact_line_naming(pngs: &[String], full: &str) -> String {
    let charts = if pngs.is_empty() {
        String::new()
    } else {
        let names: Vec<String> = pngs.iter().map(|p| format!("`{p}`")).collect();
        format!(", the charts as PNG ({})", names.join(", "))
    };
    format!(
        "<sub>The full verdict (`{full}`, with the method){charts} and the raw results \
         are in the job's artifact.</sub>\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::plots::ratio_tests::mixed;

    #[test]
    fn the_comment_links_the_run_and_names_the_commits() {
        let c = RunContext::from_values(
            Some("https://github.com"),
            Some("acme/serving"),
            Some("123456"),
            Some(&"a".repeat(40)),
            Some("b1b2b3b4b5b6"),
        );
        let body = pr_comment(&mixed(), &[], &c);
        assert!(
            body.contains(
                "<sub>[the run and its artifact](https://github.com/acme/serving/actions/runs/123456) \
                 · head `aaaaaaaaaa` · base `b1b2b3b4b5`</sub>"
            ),
            "{body}"
        );
        assert!(body.contains("If this slowdown is intended"), "{body}");
        // Values of the wrong shape never reach a link.
        let odd = RunContext::from_values(
            Some("javascript:alert(1)"),
            Some("acme/serving"),
            Some("1"),
            Some("not a sha"),
            None,
        );
        assert_eq!(odd, RunContext::default());
        let odd = RunContext::from_values(
            Some("https://github.com"),
            Some("acme/serving) [x](http://evil"),
            Some("1"),
            None,
            None,
        );
        assert_eq!(odd.run_url, None);
    }

    /// In a relative run of one start per arm, the slots line is one line, below the table:
    /// the reader looks for the verdict and the ratios first.
    #[test]
    fn the_slots_line_is_one_line_below_the_table() {
        let mut v = mixed();
        let (base, head) = ([100.0, 101.0, 99.0, 100.5], [91.0, 92.0, 90.5, 91.5]);
        for l in &mut v.levels {
            l.test = Some(crate::stats::decision::relative_level(
                &base,
                &head,
                &[],
                &[],
                0.25,
            ));
        }
        let body = pr_comment(&v, &[], &RunContext::default());
        let slots = body.find("slots:").expect("a slots line");
        let table = body.find("\n| ").expect("a table");
        assert!(table < slots, "{body}");
        let line = body[slots..].lines().next().unwrap();
        assert_eq!(line, super::super::verdict::UNSWAPPED_SLOTS);
        assert!(line.chars().count() <= 160, "{line}");
    }

    /// Issue 46 item 4: the comment says what the verdict cost (a run in blocks, or legs
    /// pooled), on one line of its own, the rest of the notes left to verdict.md.
    #[test]
    fn the_comment_says_what_the_verdict_cost() {
        let mut v = mixed();
        v.notes = vec![
            "sequential: up to 5 looks".into(),
            "blocks: 4 block(s) run in 55s on 4 pairs (blocks per pair 1, 1, 1, 1), 0.12 \
             GPU-hours; stopped: decided after 4 block(s)"
                .into(),
            "blocks per runner and pair: 12 in all\n::error::x".into(),
        ];
        let body = pr_comment(&v, &[], &RunContext::default());
        assert!(
            body.contains("\nblocks: 4 block(s) run in 55s on 4 pairs"),
            "{body}"
        );
        assert!(body.contains("0.12 GPU-hours"), "{body}");
        assert!(
            body.contains("blocks per runner and pair: 12 in all"),
            "{body}"
        );
        assert!(!body.contains("sequential: up to"), "{body}");
        assert!(!body.lines().any(|l| l.starts_with("::")), "{body}");
    }

    /// Issue 50 item 4: a red required check cannot be merged, so the regression comment
    /// names what lets an intended slowdown through (the label), not "merge it"; an accepted
    /// one says what is left to do (bless after merging).
    #[test]
    fn a_regression_comment_names_the_intended_slowdown_label() {
        let body = pr_comment(&mixed(), &[], &RunContext::default());
        assert!(body.contains("`throughput: intended-slowdown`"), "{body}");
        assert!(!body.contains("merge it"), "{body}");
        let mut accepted = mixed();
        accepted
            .overridden
            .push(crate::gate::SettingOverride::allow_regression());
        let body = pr_comment(&accepted, &[], &RunContext::default());
        assert!(body.contains("After merging, bless"), "{body}");
        assert!(!body.contains("add the label"), "{body}");
    }

    /// Golden: the comment body as posted. A change of format fails here (the Mermaid blocks
    /// have their own golden test in `mermaid.rs`).
    #[test]
    fn comment_body_is_golden() {
        let body = pr_comment(
            &mixed(),
            &["ratio.png".into(), "throughput.png".into()],
            &RunContext::default(),
        );
        let (top, rest) = body.split_once("```mermaid").unwrap();
        assert_eq!(
            top,
            "<!-- throughline-verdict -->
### ❌ throughline: REGRESSION: slower at C=1, C=4 against the base server measured in the same job; worst ratio 0.910 (-9.0%)

Profile `demo`, baseline `demo` at `origin/main`.

| C | base (geo. mean) | head (geo. mean) | ratio [bounds] | trials base/head | detectable drop | verdict |
|---:|---:|---:|---:|---:|---:|:---|
| 1 | 1000.0 | 910.0 | 0.910 [0.890, 0.930] | 5/5 | 2.0% | FAIL |
| 4 | 4000.0 | 3648.0 | 0.912 [0.895, 0.930] | 5/5 | 2.0% | FAIL |
| 8 | 8000.0 | 8016.0 | 1.002 [0.985, 1.020] | 5/5 | 2.0% | pass |
| 32 | 32000.0 | 31520.0 | 0.985 [0.950, 1.020] | 5/5 | 2.0% | cannot tell |
| 64 | 64000.0 | 64640.0 | 1.010 [0.990, 1.030] | 5/5 | 2.0% | pass |

"
        );
        assert_eq!(rest.matches("```mermaid").count(), 1, "two charts");
        assert!(rest.ends_with(
            "```\n\nIf this slowdown is intended, add the label `throughput: intended-slowdown` \
             to the pull request and push again (a re-run does not see a label added since): the \
             check then reports the regression without failing. After merging, bless the target \
             branch's baseline (docs/github-actions.md, \"An intended slowdown\").\n\n<sub>The full verdict (`verdict.md`, with the method), the charts as PNG \
             (`ratio.png`, `throughput.png`) and the raw results are in the job's artifact.</sub>\n"
        ));
        assert!(
            !body.contains("]("),
            "no image or link a comment cannot show: {body}"
        );
    }
}
