//! The "what changed besides tok/s" section of a relative verdict (gate/explain.rs), for the
//! console, verdict.md and the pull-request comment. Every word here is the tool's own
//! (figure names and numbers), never a server's.

use std::fmt::Write;

use crate::gate::explain::{Changes, Moved};
use crate::gate::Verdict;

/// "0.69 [0.64, 0.75]" for a ratio, "+0.21 [+0.18, +0.24]" for a difference.
fn change(m: &Moved) -> String {
    if m.ratio_scale {
        format!("{:.2} [{:.2}, {:.2}]", m.change, m.low, m.high)
    } else {
        format!("{:+.3} [{:+.3}, {:+.3}]", m.change, m.low, m.high)
    }
}

/// The heading line, saying how the figures were tested.
fn heading(c: &Changes) -> String {
    format!(
        "what changed besides tok/s (head vs base; {} figures per level, listed only beyond \
         noise at a 5% family level and beyond their floor)",
        c.figures_compared
    )
}

/// Console lines: per level its readings, then the other figures that moved; one line
/// when nothing did. Empty for a verdict without the section (history mode).
pub fn console_lines(verdict: &Verdict) -> Vec<String> {
    let Some(c) = &verdict.changes else {
        return Vec::new();
    };
    if c.levels.iter().all(|l| l.moved.is_empty()) {
        return vec![format!("{}: nothing moved", heading(c))];
    }
    let mut out = vec![format!("{}:", heading(c))];
    for level in c.levels.iter().filter(|l| !l.moved.is_empty()) {
        for r in &level.readings {
            out.push(format!("  C={}: {}", level.concurrency, r.said));
        }
        let other: Vec<String> = (level.moved.iter())
            .filter(|m| !level.readings.iter().any(|r| r.said.contains(&m.said())))
            .map(|m| m.said())
            .collect();
        if !other.is_empty() {
            let lead = if level.readings.is_empty() {
                "moved"
            } else {
                "also moved"
            };
            out.push(format!(
                "  C={}: {lead}: {}",
                level.concurrency,
                other.join(", ")
            ));
        }
    }
    out
}

/// The Markdown section: readings as a list, every moved figure in a table.
pub fn markdown(verdict: &Verdict) -> String {
    let Some(c) = &verdict.changes else {
        return String::new();
    };
    let mut md = String::from("#### What changed besides tok/s\n\n");
    if c.levels.iter().all(|l| l.moved.is_empty()) {
        let _ = writeln!(
            md,
            "Nothing moved beyond noise ({} figures per level: latencies, lengths, chunking, \
             errors and the server's own gauges where it exports them).\n",
            c.figures_compared
        );
        return md;
    }
    for level in &c.levels {
        for r in &level.readings {
            let _ = writeln!(md, "- **C={}**: {}", level.concurrency, r.said);
        }
    }
    let _ = writeln!(
        md,
        "\n| C | figure | base | head | change [bounds] |\n|---:|---|---:|---:|---|"
    );
    for level in &c.levels {
        for m in &level.moved {
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} |",
                level.concurrency,
                m.figure.name(),
                m.figure.show(m.base),
                m.figure.show(m.head),
                change(m)
            );
        }
    }
    let _ = writeln!(
        md,
        "\nRatios for latencies, lengths and batch size, differences for rates and gauges; \
         bounds at {:.4} each (5% over all figures and levels), from the same trials as the \
         verdict.\n",
        c.per_test_alpha
    );
    md
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::explain::{Cause, Figure, LevelChanges, Reading};

    fn verdict(moved: Vec<Moved>, readings: Vec<Reading>) -> Verdict {
        let mut v = crate::report::plots::ratio_tests::mixed();
        v.changes = Some(Changes {
            figures_compared: 14,
            per_test_alpha: 0.05 / 28.0,
            levels: vec![LevelChanges {
                concurrency: 8,
                moved,
                readings,
            }],
        });
        v
    }

    #[test]
    fn readings_lead_and_other_figures_follow() {
        let batch = Moved {
            figure: Figure::BatchSize,
            base: 8.0,
            head: 4.0,
            change: 0.5,
            low: 0.45,
            high: 0.55,
            ratio_scale: true,
        };
        let ttft = Moved {
            figure: Figure::TtftP50,
            base: 10.0,
            head: 30.0,
            change: 3.0,
            low: 2.5,
            high: 3.5,
            ratio_scale: true,
        };
        let reading = Reading {
            cause: Cause::FewerRunAtOnce,
            said: format!("{}: fewer", batch.said()),
        };
        let v = verdict(vec![ttft.clone(), batch.clone()], vec![reading]);
        let lines = console_lines(&v);
        assert_eq!(lines[1], "  C=8: batch size 8.0 -> 4.0 (-50%): fewer");
        assert_eq!(
            lines[2],
            "  C=8: also moved: TTFT p50 10.0 ms -> 30.0 ms (+200%)"
        );
        let md = markdown(&v);
        assert!(
            md.contains("| 8 | batch size | 8.0 | 4.0 | 0.50 [0.45, 0.55] |"),
            "{md}"
        );
        let quiet = verdict(Vec::new(), Vec::new());
        assert!(console_lines(&quiet)[0].ends_with("nothing moved"));
        assert!(markdown(&quiet).contains("Nothing moved beyond noise"));
    }
}
