//! JUnit XML for the verdict: one test case per level, so CI systems that read JUnit show
//! which level regressed.

use std::fmt::Write;

use crate::gate::{LevelStatus, Verdict};

/// Text for an XML attribute or element: markup characters as entities, and control
/// characters (which XML 1.0 forbids, so one in a hostile name made the file unreadable)
/// written as visible escapes, as on the terminal.
fn escape(text: &str) -> String {
    crate::untrusted::for_terminal(text)
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&apos;")
}

pub fn junit(verdict: &Verdict) -> String {
    let failures = verdict
        .levels
        .iter()
        .filter(|l| l.status == LevelStatus::Regression)
        .count();
    let skipped = verdict
        .levels
        .iter()
        .filter(|l| {
            matches!(
                l.status,
                LevelStatus::NotGated | LevelStatus::InsufficientTrials
            )
        })
        .count();
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuite name=\"throughline gate: {}\" tests=\"{}\" failures=\"{failures}\" skipped=\"{skipped}\">",
        escape(&verdict.baseline_name),
        verdict.levels.len()
    );
    for v in &verdict.levels {
        let name = format!("throughput at concurrency {}", v.concurrency);
        let detail = format!(
            "ratio {} (one-sided {:.0}% bounds {} and {}), Holm p {}, trials {}/{}",
            v.ratio.map(|r| format!("{r:.4}")).unwrap_or("-".into()),
            verdict.settings.pass_confidence * 100.0,
            v.ci_low.map(|r| format!("{r:.4}")).unwrap_or("-".into()),
            v.ci_high.map(|r| format!("{r:.4}")).unwrap_or("-".into()),
            v.p_adjusted
                .map(|p| format!("{p:.5}"))
                .unwrap_or("-".into()),
            v.n_baseline,
            v.n_candidate
        );
        let _ = write!(
            out,
            "  <testcase classname=\"{}\" name=\"{}\">",
            escape(&verdict.profile_name),
            escape(&name)
        );
        match v.status {
            LevelStatus::Regression => {
                let _ = write!(
                    out,
                    "<failure message=\"throughput regressed: {}\"/>",
                    escape(&detail)
                );
            }
            LevelStatus::NotGated | LevelStatus::InsufficientTrials => {
                let why = v.note.clone().unwrap_or_else(|| v.status.word().into());
                let _ = write!(out, "<skipped message=\"{}\"/>", escape(&why));
            }
            _ => {
                let _ = write!(out, "<system-out>{}</system-out>", escape(&detail));
            }
        }
        let _ = writeln!(out, "</testcase>");
    }
    out.push_str("</testsuite>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_never_reach_the_xml() {
        let said = escape("name\u{1b}[31m\u{0}<x>\n::error::y");
        assert!(!said.chars().any(|c| c.is_control()), "{said}");
        assert!(said.contains("&lt;x&gt;"), "{said}");
    }
}
