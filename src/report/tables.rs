//! The verdict's per-level table, defined once: each column's heading, alignment and cell
//! (from a level's figures), drawn by the console (padded), `verdict.md` and the pull-request
//! comment (Markdown pipes). The columns say which mean they show: the verdict compares
//! geometric means of the trials (the ratio is one of geometric means), while the run tables
//! show arithmetic means, so the headings name it ("geo. mean").
//!
//! Also the one rule for a level's bounds: where they say nothing (a history of one session
//! gives [0, ∞]), every renderer shows "unknown" and JSON writes null.

use std::fmt::Write;

use crate::gate::{LevelStatus, LevelVerdict, Verdict};
use crate::stats::decision::Design;

/// Where a table is drawn: on a terminal (padded columns, colour when asked) or in Markdown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Medium {
    Terminal { color: bool },
    Markdown,
}

/// How a column's cells line up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
}

/// One column of the verdict table.
pub struct Column {
    pub heading: &'static str,
    pub align: Align,
    pub cell: fn(&LevelVerdict, Medium) -> String,
}

/// The level: "8" for throughput, "8 TTFT p99" for a latency gate.
pub const LEVEL: Column = Column {
    heading: "C",
    align: Align::Right,
    cell: |v, _| level_name(v),
};
pub const BASELINE: Column = Column {
    heading: "base (geo. mean)",
    align: Align::Right,
    cell: |v, _| opt(v.baseline_mean, 1),
};
pub const CANDIDATE: Column = Column {
    heading: "head (geo. mean)",
    align: Align::Right,
    cell: |v, _| opt(v.candidate_mean, 1),
};
pub const RATIO: Column = Column {
    heading: "ratio [bounds]",
    align: Align::Right,
    cell: |v, _| ratio_text(v),
};
pub const P_HOLM: Column = Column {
    heading: "p (Holm)",
    align: Align::Right,
    cell: |v, _| p_text(v.p_adjusted),
};
pub const TRIALS: Column = Column {
    heading: "trials base/head",
    align: Align::Right,
    cell: |v, _| format!("{}/{}", v.n_baseline, v.n_candidate),
};
pub const SD_WITHIN: Column = Column {
    heading: "sd within",
    align: Align::Right,
    cell: |v, _| percent(v.test.as_ref().and_then(|t| t.sigma_w)),
};
pub const SD_BETWEEN: Column = Column {
    heading: "sd between",
    align: Align::Right,
    cell: |v, _| sigma_b_text(v),
};
pub const DETECTABLE: Column = Column {
    heading: "detectable drop",
    align: Align::Right,
    cell: |v, _| percent(v.min_detectable_drop),
};
/// The level's word (coloured on a colour terminal) and its note, escaped for the medium.
pub const VERDICT: Column = Column {
    heading: "verdict",
    align: Align::Left,
    cell: |v, medium| {
        let word = match medium {
            Medium::Terminal { color } => {
                super::console::paint(v.status.word(), status_tone(v.status), color)
            }
            Medium::Markdown => v.status.word().to_string(),
        };
        let note = v.note.as_ref().map(|n| match medium {
            Medium::Terminal { .. } => crate::untrusted::for_terminal(n).into_owned(),
            Medium::Markdown => crate::untrusted::inline_text(n),
        });
        match note {
            Some(n) => format!("{word} ({n})"),
            None => word,
        }
    },
};

/// The console and `verdict.md`: everything the decision used.
pub const FULL: &[Column] = &[
    LEVEL, BASELINE, CANDIDATE, RATIO, P_HOLM, TRIALS, SD_WITHIN, SD_BETWEEN, DETECTABLE, VERDICT,
];
/// The pull-request comment: what a reviewer reads at a glance.
pub const COMPACT: &[Column] = &[
    LEVEL, BASELINE, CANDIDATE, RATIO, TRIALS, DETECTABLE, VERDICT,
];

/// What the two sides are called: ("base", "head") in relative mode, ("baseline", "head") in
/// history mode (see [`heading`]).
pub fn sides(verdict: &Verdict) -> (&'static str, &'static str) {
    match verdict.design {
        Some(Design::Relative) | None => ("base", "head"),
        Some(_) => ("baseline", "head"),
    }
}

/// A column's heading in the verdict's vocabulary, the same everywhere: the change under
/// test is the "head"; what it is measured against is the "base" (the target branch's server,
/// measured in the same job) in relative mode and the "baseline" (main's history in the
/// baseline file) in history mode.
pub fn heading(column: &Column, verdict: &Verdict) -> String {
    match verdict.design {
        Some(Design::Relative) | None => column.heading.to_string(),
        Some(_) => column
            .heading
            .replace("base (", "baseline (")
            .replace("trials base/", "trials baseline/"),
    }
}

/// The table for a terminal: columns padded to their widest cell, a rule under the heading,
/// the last column unpadded.
pub fn terminal(columns: &[Column], verdict: &Verdict, color: bool) -> String {
    let medium = Medium::Terminal { color };
    let rows: Vec<Vec<String>> = (verdict.levels.iter())
        .map(|v| columns.iter().map(|c| (c.cell)(v, medium)).collect())
        .collect();
    // Widths from the plain text: colour codes take no room on the screen.
    let plain: Vec<Vec<String>> = (verdict.levels.iter())
        .map(|v| {
            (columns.iter())
                .map(|c| (c.cell)(v, Medium::Terminal { color: false }))
                .collect()
        })
        .collect();
    let widths: Vec<usize> = (columns.iter().enumerate())
        .map(|(i, c)| {
            (plain.iter().map(|r| r[i].chars().count()))
                .chain([heading(c, verdict).chars().count()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: &[String], plain: &[String]| -> String {
        let last = cells.len().saturating_sub(1);
        let parts: Vec<String> = (cells.iter().enumerate())
            .map(|(i, cell)| {
                let pad = " ".repeat(widths[i].saturating_sub(plain[i].chars().count()));
                match (i == last, columns[i].align) {
                    (true, Align::Left) => cell.clone(),
                    (_, Align::Left) => format!("{cell}{pad}"),
                    (_, Align::Right) => format!("{pad}{cell}"),
                }
            })
            .collect();
        parts.join(" | ")
    };
    let headings: Vec<String> = columns.iter().map(|c| heading(c, verdict)).collect();
    let header = line(&headings, &headings);
    let mut out = String::new();
    let _ = writeln!(out, "{header}");
    let _ = writeln!(out, "{}", "-".repeat(header.chars().count()));
    for (cells, plain) in rows.iter().zip(&plain) {
        let _ = writeln!(out, "{}", line(cells, plain));
    }
    out
}

/// The table in Markdown (pipes, a rule saying each column's alignment).
pub fn markdown(columns: &[Column], verdict: &Verdict) -> String {
    let mut out = String::new();
    let headings: Vec<String> = columns.iter().map(|c| heading(c, verdict)).collect();
    let _ = writeln!(out, "| {} |", headings.join(" | "));
    let rule: Vec<&str> = (columns.iter())
        .map(|c| match c.align {
            Align::Right => "---:",
            Align::Left => ":---",
        })
        .collect();
    let _ = writeln!(out, "|{}|", rule.join("|"));
    for v in &verdict.levels {
        let cells: Vec<String> = (columns.iter())
            .map(|c| (c.cell)(v, Medium::Markdown))
            .collect();
        let _ = writeln!(out, "| {} |", cells.join(" | "));
    }
    out
}

/// A level's bounds on the ratio when they say something: both finite and the lower above
/// zero. A history of one session (no between-session degrees of freedom) gives [0, ∞]:
/// None, shown as "unknown", never as bounds.
pub fn known_bounds(v: &LevelVerdict) -> Option<(f64, f64)> {
    let (low, high) = (v.ci_low?, v.ci_high?);
    (low.is_finite() && high.is_finite() && low > 0.0).then_some((low, high))
}

/// The words every renderer uses for the bounds: one-sided, at the pass confidence.
pub fn bounds_words(verdict: &Verdict) -> String {
    format!(
        "one-sided {:.0}% bounds",
        verdict.settings.pass_confidence * 100.0
    )
}

/// The verdict as JSON: as serialised, with a level's bounds null where they say nothing
/// ([`known_bounds`]).
pub fn verdict_json(verdict: &Verdict) -> serde_json::Result<String> {
    let mut copy = verdict.clone();
    for v in &mut copy.levels {
        if v.p_slower.is_some() && known_bounds(v).is_none() {
            v.ci_low = None;
            v.ci_high = None;
        }
    }
    serde_json::to_string_pretty(&copy)
}

/// "0.910 [0.890, 0.930]"; "1.000 [unknown]" where the bounds say nothing.
pub fn ratio_text(v: &LevelVerdict) -> String {
    match v.ratio {
        Some(r) if v.p_slower.is_some() => match known_bounds(v) {
            Some((low, high)) => format!("{r:.3} [{low:.3}, {high:.3}]"),
            None => format!("{r:.3} [unknown]"),
        },
        Some(r) => format!("{r:.3}"),
        None => "-".into(),
    }
}

pub fn p_text(p: Option<f64>) -> String {
    match p {
        Some(p) if p < 1e-4 => "<0.0001".into(),
        Some(p) => format!("{p:.4}"),
        None => "-".into(),
    }
}

pub fn opt(v: Option<f64>, digits: usize) -> String {
    v.map(|x| format!("{x:.digits$}"))
        .unwrap_or_else(|| "-".into())
}

pub fn percent(v: Option<f64>) -> String {
    v.map_or("-".into(), |x| format!("{:.1}%", x * 100.0))
}

/// The level's name: "8" for throughput, "8 TTFT p99" for a latency gate.
pub fn level_name(v: &LevelVerdict) -> String {
    if v.metric.is_throughput() {
        v.concurrency.to_string()
    } else {
        format!("{} {}", v.concurrency, v.metric.label())
    }
}

/// The between-session spread with its degrees of freedom, e.g. "2.1% (3 df)".
fn sigma_b_text(v: &LevelVerdict) -> String {
    match v.test.as_ref() {
        Some(t) => match (t.sigma_b, t.sigma_b_df, t.crossover.as_ref()) {
            // In blocks: the start spread the blocks (and a calibration) estimated.
            (_, _, Some(x)) => match x.start_spread {
                Some(s) => format!("{:.1}% ({:.0} df)", s * 100.0, x.start_spread_df),
                None => "unknown".into(),
            },
            (Some(s), Some(df), None) => format!("{:.1}% ({df:.0} df)", s * 100.0),
            _ if t.design == Design::Relative => "cancels".into(),
            _ => "unknown".into(),
        },
        None => "-".into(),
    }
}

/// The colour of a level's verdict word.
fn status_tone(status: LevelStatus) -> super::console::Tone {
    use super::console::Tone;
    match status {
        LevelStatus::Pass | LevelStatus::Improvement => Tone::Good,
        LevelStatus::Regression => Tone::Bad,
        _ => Tone::Unsure,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::plots::ratio_tests::mixed;

    /// A history verdict against one session: bounds [0, ∞], p 1.
    fn degenerate() -> Verdict {
        let mut v = mixed();
        let level = &mut v.levels[0];
        level.ci_low = Some(0.0);
        level.ci_high = None;
        level.p_slower = Some(1.0);
        level.p_adjusted = Some(1.0);
        v
    }

    #[test]
    fn degenerate_bounds_read_unknown_everywhere() {
        let v = degenerate();
        assert_eq!(known_bounds(&v.levels[0]), None);
        assert_eq!(ratio_text(&v.levels[0]), "0.910 [unknown]");
        assert_eq!(ratio_text(&v.levels[1]), "0.912 [0.895, 0.930]");
        for text in [
            terminal(FULL, &v, false),
            markdown(FULL, &v),
            markdown(COMPACT, &v),
        ] {
            assert!(text.contains("0.910 [unknown]"), "{text}");
            assert!(!text.contains('∞') && !text.contains("0.000,"), "{text}");
        }
        let json: serde_json::Value = serde_json::from_str(&verdict_json(&v).unwrap()).unwrap();
        assert!(json["levels"][0]["ci_low"].is_null(), "{json}");
        assert!(json["levels"][0]["ci_high"].is_null(), "{json}");
        assert_eq!(json["levels"][1]["ci_low"], serde_json::json!(0.895));
        // A latency gate's inverted bounds follow the same rule.
        let mut inf = v.levels[1].clone();
        inf.ci_low = Some(f64::INFINITY);
        assert_eq!(known_bounds(&inf), None);
    }

    #[test]
    fn terminal_columns_line_up_and_name_the_mean() {
        let text = terminal(FULL, &mixed(), true);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with(" C | base (geo. mean) | head (geo. mean) |"));
        // Every row's pipes at the heading's places (colour codes take no room).
        let pipes = |l: &str| -> Vec<usize> {
            // Colour codes (ESC [ ... m) left out.
            let mut plain = String::new();
            let mut in_code = false;
            for c in l.chars() {
                match (in_code, c) {
                    (false, '\u{1b}') => in_code = true,
                    (true, 'm') => in_code = false,
                    (false, c) => plain.push(c),
                    _ => {}
                }
            }
            (plain.chars().enumerate())
                .filter(|(_, c)| *c == '|')
                .map(|(i, _)| i)
                .collect()
        };
        assert!(text.contains('\u{1b}'), "coloured when asked: {text}");
        for row in &lines[2..] {
            assert_eq!(pipes(row), pipes(lines[0]), "{row}");
        }
        assert_eq!(lines[1].chars().count(), lines[0].chars().count());
    }

    #[test]
    fn markdown_rule_follows_alignment() {
        let text = markdown(COMPACT, &mixed());
        assert!(text.starts_with(
            "| C | base (geo. mean) | head (geo. mean) | ratio [bounds] | trials base/head \
             | detectable drop | verdict |\n|---:|---:|---:|---:|---:|---:|:---|\n"
        ));
        // History mode: measured against the baseline file's sessions, said so.
        let mut history = mixed();
        history.design = Some(Design::History);
        assert!(markdown(COMPACT, &history)
            .starts_with("| C | baseline (geo. mean) | head (geo. mean) | ratio [bounds] | trials baseline/head |"));
    }
}
