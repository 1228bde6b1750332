//! The gate's verdict for people: a console table and a Markdown summary.

use std::fmt::Write;

use crate::gate::{LevelVerdict, Outcome, Verdict};

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map(|x| format!("{x:.digits$}"))
        .unwrap_or_else(|| "-".into())
}

fn ratio_text(v: &LevelVerdict) -> String {
    match (v.ratio, v.ci_low, v.ci_high) {
        (Some(r), Some(lo), Some(hi)) => format!("{r:.3} [{lo:.3}, {hi:.3}]"),
        _ => "-".into(),
    }
}

fn p_text(p: Option<f64>) -> String {
    match p {
        Some(p) if p < 1e-4 => "<0.0001".into(),
        Some(p) => format!("{p:.4}"),
        None => "-".into(),
    }
}

/// A one-line headline.
pub fn headline(verdict: &Verdict) -> String {
    let worst = verdict
        .worst_ratio
        .map(|r| format!("; worst ratio {r:.3} ({:+.1}%)", (r - 1.0) * 100.0))
        .unwrap_or_default();
    let failed: Vec<String> = verdict
        .levels
        .iter()
        .filter(|l| l.status == crate::gate::LevelStatus::Regression)
        .map(|l| format!("C={}", l.concurrency))
        .collect();
    match verdict.outcome {
        Outcome::Pass => format!(
            "PASS: no throughput regression against baseline {:?}{worst}",
            verdict.baseline_name
        ),
        Outcome::Regression => format!(
            "REGRESSION: throughput dropped at {} against baseline {:?}{worst}",
            failed.join(", "),
            verdict.baseline_name
        ),
        Outcome::NotComparable => format!(
            "NOT COMPARABLE: some levels could not be gated against baseline {:?}{worst}",
            verdict.baseline_name
        ),
    }
}

/// The console table.
pub fn console(verdict: &Verdict) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:>6} | {:>12} | {:>12} | {:>24} | {:>8} | {:>8} | {:>7} | verdict",
        "C", "baseline", "candidate", "ratio [95% CI]", "p", "p (Holm)", "n b/c"
    );
    let _ = writeln!(out, "{}", "-".repeat(104));
    for v in &verdict.levels {
        let _ = writeln!(
            out,
            "{:>6} | {:>12} | {:>12} | {:>24} | {:>8} | {:>8} | {:>7} | {}{}",
            v.concurrency,
            opt(v.baseline_mean, 1),
            opt(v.candidate_mean, 1),
            ratio_text(v),
            p_text(v.p_slower),
            p_text(v.p_adjusted),
            format!("{}/{}", v.n_baseline, v.n_candidate),
            v.status.word(),
            v.note
                .as_ref()
                .map(|n| format!(" ({n})"))
                .unwrap_or_default(),
        );
    }
    let s = &verdict.settings;
    let _ = writeln!(
        out,
        "gate: one-sided Welch t-test on ln(tok/s), Holm across {} levels, alpha {}, minimum effect {:.1}%, at least {} trials to fail",
        verdict.levels.iter().filter(|l| l.p_slower.is_some()).count(),
        s.alpha,
        s.min_effect * 100.0,
        s.min_trials
    );
    for w in &verdict.warnings {
        let _ = writeln!(out, "warning: {w}");
    }
    let _ = writeln!(out, "{}", headline(verdict));
    out
}

/// A Markdown summary (for `$GITHUB_STEP_SUMMARY` or a report file). `images` are paths
/// relative to where the Markdown will be read.
pub fn markdown(verdict: &Verdict, images: &[String]) -> String {
    let mut out = String::new();
    let icon = match verdict.outcome {
        Outcome::Pass => "✅",
        Outcome::Regression => "❌",
        Outcome::NotComparable => "⚠️",
    };
    let _ = writeln!(out, "## {icon} throughline gate: {}\n", headline(verdict));
    let at = verdict
        .baseline_ref
        .as_ref()
        .map(|r| format!(" at `{r}`"))
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "Profile `{}`, baseline `{}`{at}.\n",
        verdict.profile_name, verdict.baseline_name
    );
    let _ = writeln!(out, "| C | baseline tok/s | candidate tok/s | ratio [95% CI] | p (Holm) | trials b/c | verdict |");
    let _ = writeln!(out, "|---:|---:|---:|---:|---:|---:|:---|");
    for v in &verdict.levels {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {}/{} | {}{} |",
            v.concurrency,
            opt(v.baseline_mean, 1),
            opt(v.candidate_mean, 1),
            ratio_text(v),
            p_text(v.p_adjusted),
            v.n_baseline,
            v.n_candidate,
            v.status.word(),
            v.note
                .as_ref()
                .map(|n| format!(" ({n})"))
                .unwrap_or_default(),
        );
    }
    let s = &verdict.settings;
    let _ = writeln!(
        out,
        "\nA level fails only when the one-sided Welch test on ln(tok/s), Holm-corrected, is below alpha = {} \
         **and** the estimated drop is at least {:.1}% **and** both sides have at least {} trials.\n",
        s.alpha,
        s.min_effect * 100.0,
        s.min_trials
    );
    if !verdict.warnings.is_empty() {
        let _ = writeln!(out, "**Warnings**\n");
        for w in &verdict.warnings {
            let _ = writeln!(out, "- {w}");
        }
        let _ = writeln!(out);
    }
    for image in images {
        let _ = writeln!(out, "![{image}]({image})\n");
    }
    out
}
