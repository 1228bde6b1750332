//! The pull-request comment of a merge (`throughline merge`, `pr-comment.md` in its folder):
//! where the legs pooled into one check, that check's comment as `ci` writes it; where
//! several checks stand (legs judged on their own, other profiles), the combined outcome,
//! one line per check, and each check's comment below its name. It carries the merge's run
//! id, which the comment step matches with the merge step's `run_id` output.

use std::fmt::Write;

use crate::gate::merge::MergedVerdict;
use crate::record::files::{PR_COMMENT_MARKER, REPORT_MD};

use super::combined::{merged_headline, merged_icon};
use super::github::RunContext;
use super::pr_comment::{comment_head, comment_naming, COMMENT_LIMIT};

/// The comment body for `merged`, naming `run_id` (the merge's) on its second line.
pub fn merged_comment(merged: &MergedVerdict, run_id: &str, context: &RunContext) -> String {
    if let [one] = &merged.checks[..] {
        let mut verdict = one.verdict.clone();
        verdict.run_id = Some(run_id.to_string());
        return comment_naming(&verdict, &[], context, REPORT_MD);
    }
    let mut out = comment_head(Some(run_id), merged_icon(merged), &merged_headline(merged));
    for check in &merged.checks {
        let _ = writeln!(
            out,
            "- {}: {}",
            crate::untrusted::code_span(&check.file),
            check.verdict.outcome.word()
        );
    }
    let _ = writeln!(out);
    for check in &merged.checks {
        let mut verdict = check.verdict.clone();
        verdict.run_id = None;
        let body = comment_naming(&verdict, &[], &RunContext::default(), REPORT_MD);
        let _ = writeln!(
            out,
            "<details><summary>{}</summary>\n",
            crate::untrusted::code_span(&check.file)
        );
        // Its own marker line left out: the comment step reads the first one only, but a
        // reader of the body sees one comment.
        for line in body.lines().filter(|l| *l != PR_COMMENT_MARKER) {
            let _ = writeln!(out, "{line}");
        }
        let _ = writeln!(out, "\n</details>\n");
    }
    if let Some(line) = super::pr_comment::context_line(context) {
        let _ = writeln!(out, "{line}");
    }
    crate::untrusted::bound_summary(&out, COMMENT_LIMIT, "in report.md in the artifact")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::merge::{combine, Check};
    use crate::gate::{Outcome, Verdict};

    fn check(file: &str, outcome: Outcome) -> Check {
        let mut verdict = Verdict::refused("b", "p", None, Default::default(), "why");
        verdict.outcome = outcome;
        verdict.run_id = Some("00112233445566aa".into());
        Check {
            file: file.into(),
            verdict,
            pooled: Vec::new(),
        }
    }

    const MERGE_ID: &str = "ffeeddccbbaa9988";

    #[test]
    fn one_pooled_check_reads_as_its_own_comment_with_the_merges_id() {
        let merged = combine(vec![check("pooled: a + b", Outcome::Pass)]).unwrap();
        let body = merged_comment(&merged, MERGE_ID, &RunContext::default());
        let mut lines = body.lines();
        assert_eq!(lines.next(), Some(PR_COMMENT_MARKER));
        assert_eq!(
            lines.next(),
            Some(crate::record::run_id::marker_line(MERGE_ID).as_str())
        );
        assert!(!body.contains("00112233445566aa"), "{body}");
        assert!(body.contains("`report.md`"), "{body}");
        assert!(!body.contains("`verdict.md`"), "{body}");
    }

    #[test]
    fn several_checks_give_the_worst_and_each_checks_comment_once_marked() {
        let merged = combine(vec![
            check("legs/a/verdict.json", Outcome::Pass),
            check("legs/b/verdict.json\n::error::x", Outcome::Regression),
        ])
        .unwrap();
        let body = merged_comment(&merged, MERGE_ID, &RunContext::default());
        assert!(body.starts_with(PR_COMMENT_MARKER), "{body}");
        assert_eq!(body.matches(PR_COMMENT_MARKER).count(), 1, "{body}");
        assert_eq!(crate::record::run_id::from_markdown(&body), Some(MERGE_ID));
        assert!(body.contains("❌ throughline: REGRESSION (the worst of 2 check(s)"));
        // A file name is data: no line of the body starts a runner command.
        assert!(!body.lines().any(|l| l.starts_with("::")), "{body}");
    }
}
