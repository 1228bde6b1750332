//! JUnit XML for the verdict: one test case per level, so CI systems that read JUnit show
//! which level regressed. Each level's figures are in the verdict table's words (the ratio
//! with its one-sided bounds at the pass confidence, "unknown" where they say nothing).

use std::fmt::Write;

use anyhow::{Context, Result};

use super::Exporter;
use crate::gate::{LevelStatus, Verdict};
use crate::record::RunResult;
use crate::report::tables::{bounds_words, p_text, ratio_text};

/// `--junit FILE` (`gate`; `ci` writes `junit.xml` always).
pub struct Junit;

impl Exporter for Junit {
    fn name(&self) -> &'static str {
        "JUnit XML"
    }
    fn flag(&self) -> Option<&'static str> {
        Some("junit")
    }
    fn help(&self) -> &'static str {
        "Write JUnit XML (one test case per level)"
    }
    fn extension(&self) -> &'static str {
        "xml"
    }
    fn needs_verdict(&self) -> bool {
        true
    }
    fn render(&self, _run: &RunResult, verdict: Option<&Verdict>) -> Result<Vec<u8>> {
        let verdict = verdict.context("JUnit XML is made from a verdict; only `gate` has one")?;
        Ok(junit(verdict).into_bytes())
    }
}

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

fn junit(verdict: &Verdict) -> String {
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
    // The run it judged (record::run_id): the same id as its verdict.json and results.json.
    if let Some(id) = &verdict.run_id {
        let _ = writeln!(
            out,
            "  <properties><property name=\"throughline.run_id\" value=\"{}\"/></properties>",
            escape(id)
        );
    }
    for v in &verdict.levels {
        let name = format!("throughput at concurrency {}", v.concurrency);
        let detail = format!(
            "ratio [bounds] {} ({}), p (Holm) {}, {} {}/{}",
            ratio_text(v),
            bounds_words(verdict),
            p_text(v.p_adjusted),
            crate::report::tables::heading(&crate::report::tables::TRIALS, verdict),
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
    fn levels_say_the_verdict_tables_words() {
        let mut v = crate::report::plots::ratio_tests::mixed();
        v.levels[1].ci_low = Some(0.0);
        v.levels[1].ci_high = None;
        let xml = junit(&v);
        assert!(
            xml.contains("ratio [bounds] 0.910 [0.890, 0.930] (one-sided 95% bounds), p (Holm) "),
            "{xml}"
        );
        assert!(
            xml.contains("0.912 [unknown] (one-sided 95% bounds)"),
            "{xml}"
        );
        assert!(!xml.contains("CI") && !xml.contains('∞'), "{xml}");
    }

    #[test]
    fn control_characters_never_reach_the_xml() {
        let said = escape("name\u{1b}[31m\u{0}<x>\n::error::y");
        assert!(!said.chars().any(|c| c.is_control()), "{said}");
        assert!(said.contains("&lt;x&gt;"), "{said}");
    }
}
