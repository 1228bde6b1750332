//! Several runs in one report: one table per run (e.g. one per GPU runner of a workflow
//! matrix), keyed by profile and environment, and the gate verdicts combined into one, the
//! worst outcome winning (regression > not comparable > pass).

use std::fmt::Write;

use serde::{Deserialize, Serialize};

use crate::gate::{Outcome, Verdict};
use crate::record::{LevelResult, RunResult, TrialResult};
use crate::report::verdict;
use crate::stats::Spread;

/// The combined verdict (`verdict.json` of `throughline merge`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MergedVerdict {
    pub outcome: Outcome,
    /// The lowest candidate/baseline ratio over every check.
    pub worst_ratio: Option<f64>,
    pub checks: Vec<Check>,
}

/// One check that went into the combined verdict.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Check {
    /// The verdict file it was read from.
    pub file: String,
    pub verdict: Verdict,
}

/// How bad an outcome is: the worst one decides the combined verdict.
fn severity(o: Outcome) -> u8 {
    match o {
        Outcome::Pass => 0,
        Outcome::NotComparable => 1,
        Outcome::Regression => 2,
    }
}

/// Combines verdicts; `None` when there are none.
pub fn combine(checks: Vec<Check>) -> Option<MergedVerdict> {
    let outcome = checks
        .iter()
        .map(|c| c.verdict.outcome)
        .max_by_key(|o| severity(*o))?;
    let worst_ratio = checks
        .iter()
        .filter_map(|c| c.verdict.worst_ratio)
        .min_by(f64::total_cmp);
    Some(MergedVerdict {
        outcome,
        worst_ratio,
        checks,
    })
}

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
    text.replace('|', "\\|").replace(['\r', '\n'], " ")
}

fn mean_of(trials: &[TrialResult], f: impl Fn(&TrialResult) -> Option<f64>) -> String {
    let v: Vec<f64> = trials
        .iter()
        .filter(|t| t.succeeded > 0)
        .filter_map(f)
        .filter(|x| x.is_finite())
        .collect();
    if v.is_empty() {
        return "-".into();
    }
    let m = v.iter().sum::<f64>() / v.len() as f64;
    if m.abs() >= 100.0 {
        format!("{m:.0}")
    } else {
        format!("{m:.1}")
    }
}

fn level_row(level: &LevelResult) -> String {
    let t = &level.trials;
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
        mean_of(t, |t| Some(t.requests_per_s)),
        mean_of(t, |t| t.ttft_ms.as_ref().map(|p| p.p50)),
        mean_of(t, |t| t.itl_ms.as_ref().map(|p| p.p50)),
        mean_of(t, |t| t.e2e_ms.as_ref().map(|p| p.p50)),
        level.error_rate() * 100.0
    )
}

/// The combined Markdown report. `runs` are (file, result) pairs.
pub fn markdown(runs: &[(String, RunResult)], merged: Option<&MergedVerdict>) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# throughline: {} run(s) combined\n", runs.len());
    if let Some(m) = merged {
        let icon = match m.outcome {
            Outcome::Pass => "✅",
            Outcome::Regression => "❌",
            Outcome::NotComparable => "⚠️",
        };
        let worst = m
            .worst_ratio
            .map(|r| format!("; worst ratio {r:.3} ({:+.1}%)", (r - 1.0) * 100.0))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "## {icon} {} (the worst of {} check(s){worst})\n",
            m.outcome.word().replace('_', " ").to_uppercase(),
            m.checks.len()
        );
        let _ = writeln!(
            out,
            "| check | profile | baseline | verdict | worst ratio |"
        );
        let _ = writeln!(out, "|---|---|---|:---|---:|");
        for c in &m.checks {
            let v = &c.verdict;
            let _ = writeln!(
                out,
                "| `{}` | {} | {} | {} | {} |",
                cell(&c.file),
                cell(&v.profile_name),
                cell(&v.baseline_name),
                v.outcome.word(),
                v.worst_ratio
                    .map(|r| format!("{r:.3}"))
                    .unwrap_or_else(|| "-".into())
            );
        }
        let _ = writeln!(out);
    }
    for (file, run) in runs {
        let _ = writeln!(out, "## {}\n", cell(&run_label(run)));
        let _ = writeln!(
            out,
            "From `{}`, started {}{}.\n",
            cell(file),
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
    use crate::profile::GateSettings;

    fn v(outcome: Outcome, worst: Option<f64>) -> Check {
        Check {
            file: format!("{outcome:?}.json"),
            verdict: Verdict {
                outcome,
                baseline_name: "b".into(),
                profile_name: "p".into(),
                baseline_ref: None,
                settings: GateSettings::default(),
                levels: vec![],
                worst_ratio: worst,
                warnings: vec![],
            },
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
