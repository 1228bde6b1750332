//! Several runs in one report: one table per run (e.g. one per GPU runner of a workflow
//! matrix), keyed by profile and environment, with the combined verdict (`gate::merge`).

use std::fmt::Write;

use crate::gate::merge::MergedVerdict;
use crate::record::{LevelResult, RunResult};
use crate::report::markdown::mean_cell;
use crate::report::verdict;
use crate::stats::Spread;

/// The key a run is shown under: profile and environment.
pub fn run_label(run: &RunResult) -> String {
    let env = &run.environment;
    let mut parts = vec![format!("profile {}", run.profile_name)];
    if let Some(g) = &env.gpu_model {
        let n = env.gpu_count.map(|n| format!("{n}x ")).unwrap_or_default();
        parts.push(format!("{n}{g}"));
    }
    let engine: Vec<&str> = [env.engine.as_deref(), env.engine_version.as_deref()]
        .into_iter()
        .flatten()
        .collect();
    if !engine.is_empty() {
        parts.push(engine.join(" "));
    }
    if let Some(m) = &env.model {
        parts.push(m.clone());
    }
    if let Some(r) = &env.runner {
        parts.push(format!("runner {r}"));
    }
    parts.join(" · ")
}

fn cell(text: &str) -> String {
    crate::untrusted::inline_text(text)
}

fn level_row(level: &LevelResult) -> String {
    let tput = match Spread::of(&level.throughputs()) {
        Some(s) if s.n > 1 => format!("{:.1} ± {:.1}", s.mean, s.sd),
        Some(s) => format!("{:.1}", s.mean),
        None => "no success".into(),
    };
    format!(
        "| {} | {} | {} | {} | {} | {} | {} | {:.1} |",
        level.concurrency,
        level.throughputs().len(),
        tput,
        mean_cell(level.trial_mean(|t| Some(t.requests_per_s))),
        mean_cell(level.trial_mean(|t| t.ttft_ms.as_ref().map(|p| p.p50))),
        mean_cell(level.trial_mean(|t| t.itl_ms.as_ref().map(|p| p.p50))),
        mean_cell(level.trial_mean(|t| t.e2e_ms.as_ref().map(|p| p.p50))),
        level.error_rate() * 100.0
    )
}

/// "REGRESSION (the worst of 2 check(s); worst ratio 0.912 (-8.8%))", with the acceptance
/// where every regressed check let it through: the combined verdict's headline (report.md,
/// the merge's comment).
pub fn merged_headline(m: &MergedVerdict) -> String {
    let accepted = match m.regression_accepted() {
        true => format!("; {}", super::verdict::ACCEPTED),
        false => String::new(),
    };
    format!(
        "{} (the worst of {} check(s){}){accepted}",
        m.outcome.word().replace('_', " ").to_uppercase(),
        m.checks.len(),
        super::verdict::worst_ratio_said(m.worst_ratio),
    )
}

/// The combined verdict's icon, as a single verdict's (an accepted regression orange).
pub fn merged_icon(m: &MergedVerdict) -> &'static str {
    super::verdict::outcome_icon(m.outcome, m.regression_accepted())
}

/// The combined Markdown report. `runs` are (file, result) pairs.
pub fn markdown(runs: &[(String, RunResult)], merged: Option<&MergedVerdict>) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# throughline: {} run(s) combined\n", runs.len());
    if let Some(m) = merged {
        let _ = writeln!(out, "## {} {}\n", merged_icon(m), merged_headline(m));
        let _ = writeln!(
            out,
            "| check | profile | baseline | verdict | worst ratio |"
        );
        let _ = writeln!(out, "|---|---|---|:---|---:|");
        for c in &m.checks {
            let v = &c.verdict;
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} |",
                crate::untrusted::code_span_in_table(&c.file),
                cell(&v.profile_name),
                cell(&v.baseline_name),
                v.outcome.word(),
                match v.worst_ratio.map(super::verdict::shown_ratio) {
                    None => "-".to_string(),
                    Some(Some(r)) => format!("{r:.3}"),
                    Some(None) => "not finite".to_string(),
                }
            );
        }
        let _ = writeln!(out);
    }
    for (file, run) in runs {
        let _ = writeln!(out, "## {}\n", cell(&run_label(run)));
        let _ = writeln!(
            out,
            "From {}, started {}{}.\n",
            crate::untrusted::code_span(file),
            cell(&run.started_at),
            if run.complete { "" } else { " (INCOMPLETE)" }
        );
        let _ = writeln!(
            out,
            "| C | trials | output tok/s (mean ± sd) | requests/s | TTFT p50 ms | ITL p50 ms | E2E p50 ms | error % |"
        );
        let _ = writeln!(out, "|---:|---:|---:|---:|---:|---:|---:|---:|");
        for level in &run.levels {
            let _ = writeln!(out, "{}", level_row(level));
        }
        let _ = writeln!(out);
    }
    if let Some(m) = merged {
        for c in &m.checks {
            let _ = writeln!(out, "<!-- {} -->", cell(&c.file));
            out.push_str(&verdict::markdown(&c.verdict, &[]));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::merge::{combine, Check};
    use crate::gate::{Outcome, Verdict};
    use crate::profile::GateSettings;

    fn v(outcome: Outcome, worst: Option<f64>) -> Check {
        Check {
            file: format!("{outcome:?}.json"),
            verdict: Verdict {
                outcome,
                worst_ratio: worst,
                warnings: vec![],
                ..Verdict::refused("b", "p", None, GateSettings::default(), "")
            },
            pooled: Vec::new(),
        }
    }

    #[test]
    fn the_worst_outcome_wins() {
        assert!(combine(vec![]).is_none());
        let m = combine(vec![v(Outcome::Pass, Some(0.99))]).unwrap();
        assert_eq!(m.outcome, Outcome::Pass);
        let m = combine(vec![
            v(Outcome::Pass, Some(0.99)),
            v(Outcome::NotComparable, None),
        ])
        .unwrap();
        assert_eq!(m.outcome, Outcome::NotComparable);
        let m = combine(vec![
            v(Outcome::NotComparable, None),
            v(Outcome::Regression, Some(0.8)),
            v(Outcome::Pass, Some(1.01)),
        ])
        .unwrap();
        assert_eq!(m.outcome, Outcome::Regression);
        assert_eq!(m.worst_ratio, Some(0.8));
        let text = markdown(&[], Some(&m));
        assert!(
            text.contains("REGRESSION (the worst of 3 check(s)"),
            "{text}"
        );
    }
}
