//! The "what changed besides tok/s" section of a relative verdict (gate/explain/), for the
//! console, verdict.md and the pull-request comment. Every word here is the tool's own
//! (figure names and numbers), never a server's.

use std::fmt::Write;

use crate::gate::explain::{Changes, Moved, Reading};
use crate::gate::Verdict;

/// "0.69 [0.64, 0.75]" for a ratio, "+0.21 [+0.18, +0.24]" for a difference.
fn change(m: &Moved) -> String {
    if m.ratio_scale {
        format!("{:.2} [{:.2}, {:.2}]", m.change, m.low, m.high)
    } else {
        format!("{:+.3} [{:+.3}, {:+.3}]", m.change, m.low, m.high)
    }
}

/// The heading line, saying how the figures were tested (the family's size where known:
/// verdicts written before it was counted say 0).
fn heading(c: &Changes) -> String {
    let family = match (c.levels_together, c.figures_varied, c.comparisons) {
        (true, 0, _) => String::new(),
        (true, 1, _) => " over the 1 figure that varied, its levels read together,".to_string(),
        (true, n, _) => {
            format!(" over the {n} figures that varied, each one's levels read together,")
        }
        (false, _, 0) => String::new(),
        (false, _, 1) => " over the 1 comparison that varied,".to_string(),
        (false, _, n) => format!(" over the {n} comparisons that varied,"),
    };
    format!(
        "what changed besides tok/s (head vs base; {} figures per level, listed only beyond \
         noise at a 5% family level{family} and beyond their floor)",
        c.figures_compared
    )
}

/// What the bounds do not cover, where something is left out: one start per arm, or
/// figures the blocks could not compare (per level).
fn caveats(c: &Changes) -> Vec<String> {
    let mut out = Vec::new();
    if !c.starts_covered {
        out.push(
            "one server start per arm: a start effect (two starts of one server differ) is not \
             covered by these bounds and can be listed as a change; a run in blocks \
             (--server-command, --base-server-command) covers it"
                .to_string(),
        );
    }
    for level in c.levels.iter().filter(|l| !l.not_estimable.is_empty()) {
        let names: Vec<&str> = level.not_estimable.iter().map(|f| f.name()).collect();
        out.push(format!(
            "C={}: not compared, too few blocks of each slot orientation to bound them: {}",
            level.concurrency,
            names.join(", ")
        ));
    }
    out
}

/// Console lines: per level its readings, then the other figures that moved; one line
/// when nothing did; then what the bounds do not cover. Empty for a verdict without the
/// section (history mode).
pub fn console_lines(verdict: &Verdict) -> Vec<String> {
    let Some(c) = &verdict.changes else {
        return Vec::new();
    };
    let mut out = lines(c);
    out.extend(caveats(c).into_iter().map(|l| format!("  ({l})")));
    out
}

fn lines(c: &Changes) -> Vec<String> {
    let groups = groups(c);
    if groups.is_empty() {
        return vec![format!("{}: nothing moved", heading(c))];
    }
    let mut out = vec![format!("{}:", heading(c))];
    for (label, moved, readings) in groups {
        for r in readings {
            out.push(format!("  {label}: {}", r.said));
        }
        let other: Vec<String> = (moved.iter())
            .filter(|m| !readings.iter().any(|r| r.said.contains(&m.said())))
            .map(|m| m.said())
            .collect();
        if !other.is_empty() {
            let lead = if readings.is_empty() {
                "moved"
            } else {
                "also moved"
            };
            out.push(format!("  {label}: {lead}: {}", other.join(", ")));
        }
    }
    out
}

/// What moved, as (label, figures, readings): averaged over the levels first ("C=1, 4, 16
/// averaged"), then each level ("C=4"); only those where something moved.
fn groups(c: &Changes) -> Vec<(String, &[Moved], &[Reading])> {
    let mut out = Vec::new();
    if let Some(o) = c.over_levels.as_ref().filter(|o| !o.moved.is_empty()) {
        let levels: Vec<String> = o.concurrency.iter().map(u32::to_string).collect();
        out.push((
            format!("C={} averaged", levels.join(", ")),
            &o.moved[..],
            &o.readings[..],
        ));
    }
    for level in c.levels.iter().filter(|l| !l.moved.is_empty()) {
        out.push((
            format!("C={}", level.concurrency),
            &level.moved[..],
            &level.readings[..],
        ));
    }
    out
}

/// The Markdown section: readings as a list, every moved figure in a table.
pub fn markdown(verdict: &Verdict) -> String {
    let Some(c) = &verdict.changes else {
        return String::new();
    };
    let mut md = String::from("#### What changed besides tok/s\n\n");
    let notes: String = caveats(c)
        .iter()
        .map(|l| format!("_Note: {l}._\n\n"))
        .collect();
    let groups = groups(c);
    if groups.is_empty() {
        let _ = writeln!(
            md,
            "Nothing moved beyond noise ({} figures per level: latencies, lengths, chunking, \
             errors and the server's own gauges where it exports them).\n",
            c.figures_compared
        );
        md.push_str(&notes);
        return md;
    }
    for (label, _, readings) in &groups {
        for r in *readings {
            let _ = writeln!(md, "- **{label}**: {}", r.said);
        }
    }
    let _ = writeln!(
        md,
        "\n| C | figure | base | head | change [bounds] |\n|---:|---|---:|---:|---|"
    );
    for (label, moved, _) in &groups {
        let level = label.trim_start_matches("C=");
        for m in *moved {
            let _ = writeln!(
                md,
                "| {level} | {} | {} | {} | {} |",
                m.figure.name(),
                m.figure.show(m.base),
                m.figure.show(m.head),
                change(m)
            );
        }
    }
    let family = if c.levels_together {
        "5% over the figures that varied; a level is listed where a closed test over the \
         figure's levels finds it moved"
    } else {
        "5% over the figures and levels that varied"
    };
    let _ = writeln!(
        md,
        "\nRatios for latencies, lengths and batch size, differences for rates and gauges; \
         bounds at {:.4} each ({family}), from the same trials as the verdict.\n",
        c.per_test_alpha
    );
    md.push_str(&notes);
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
            comparisons: 28,
            per_test_alpha: 0.05 / 28.0,
            levels_together: false,
            figures_varied: 0,
            over_levels: None,
            starts_covered: true,
            levels: vec![LevelChanges {
                concurrency: 8,
                not_estimable: Vec::new(),
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
        assert!(!markdown(&quiet).contains("start effect"));
    }

    #[test]
    fn what_the_bounds_do_not_cover_is_said() {
        let mut v = verdict(Vec::new(), Vec::new());
        let c = v.changes.as_mut().unwrap();
        c.starts_covered = false;
        c.levels[0].not_estimable = vec![Figure::ItlP50, Figure::BatchSize];
        let lines = console_lines(&v);
        assert!(lines[1].contains("one server start per arm"), "{lines:?}");
        assert_eq!(
            lines[2],
            "  (C=8: not compared, too few blocks of each slot orientation to bound them: \
             ITL p50, batch size)"
        );
        let md = markdown(&v);
        assert!(md.contains("_Note: one server start per arm"), "{md}");
    }

    /// In blocks the family is the figures, each one's levels read together: the heading and
    /// the table's note say so.
    #[test]
    fn levels_read_together_are_said() {
        let mut v = verdict(Vec::new(), Vec::new());
        let c = v.changes.as_mut().unwrap();
        (c.levels_together, c.figures_varied, c.per_test_alpha) = (true, 7, 0.05 / 7.0);
        let lines = console_lines(&v);
        assert!(
            lines[0].contains("over the 7 figures that varied, each one's levels read together"),
            "{lines:?}"
        );
        let moved = Moved {
            figure: Figure::ItlP50,
            base: 10.0,
            head: 11.0,
            change: 1.1,
            low: 1.05,
            high: 1.15,
            ratio_scale: true,
        };
        let mut v = verdict(vec![moved], Vec::new());
        let c = v.changes.as_mut().unwrap();
        (c.levels_together, c.figures_varied, c.per_test_alpha) = (true, 7, 0.05 / 7.0);
        assert!(markdown(&v)
            .contains("bounds at 0.0071 each (5% over the figures that varied; a level"));
    }
}
