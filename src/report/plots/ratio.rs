//! `ratio.png` for the gate: head / base (or baseline) output tok/s at each level, with its
//! one-sided bounds at the pass confidence, the no-change line and the minimum-effect line, and each level's
//! verdict written above it in its colour. The verdict should be readable in five seconds.
//!
//! Levels are evenly spaced (one column each), so a drop at C = 1 is as visible as one at 64.

use std::path::Path;

use anyhow::Result;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::style::{self, LegendEntry, Mark, GREEN, INK, MUTED, RED};
use super::{render_png, Root};
use crate::gate::{LevelStatus, LevelVerdict, Outcome, Verdict};
use crate::stats::is_positive;

/// Amber: the data cannot tell.
const AMBER: RGBColor = RGBColor(215, 140, 0);

/// The colour a level's verdict is drawn in.
pub(crate) fn status_color(status: LevelStatus) -> RGBColor {
    match status {
        LevelStatus::Pass | LevelStatus::Improvement => GREEN,
        LevelStatus::Regression => RED,
        LevelStatus::Inconclusive => AMBER,
        LevelStatus::InsufficientTrials | LevelStatus::NotGated => MUTED,
    }
}

/// The throughput levels, in order (a latency gate's ratios point the other way).
fn throughput_levels(verdict: &Verdict) -> Vec<&LevelVerdict> {
    verdict
        .levels
        .iter()
        .filter(|l| l.metric.is_throughput())
        .collect()
}

/// The chart's title: the outcome first, then what is drawn.
pub(crate) fn title(verdict: &Verdict) -> String {
    let failed: Vec<String> = throughput_levels(verdict)
        .iter()
        .filter(|l| l.status == LevelStatus::Regression)
        .map(|l| l.concurrency.to_string())
        .collect();
    let outcome = match verdict.outcome {
        Outcome::Pass => "PASS".to_string(),
        Outcome::Regression if !failed.is_empty() => {
            format!("REGRESSION at C = {}", failed.join(", "))
        }
        Outcome::Regression => "REGRESSION".to_string(),
        Outcome::Inconclusive => "INCONCLUSIVE".to_string(),
        Outcome::NotComparable => "NOT COMPARABLE".to_string(),
    };
    let (reference, head) = crate::report::tables::sides(verdict);
    format!("{outcome}: {head} / {reference} output tok/s per level")
}

/// Draws the chart to `path`.
pub fn ratio_chart(verdict: &Verdict, path: &Path) -> Result<()> {
    render_png(path, |root| draw(root, verdict))
}

/// A ratio or bound worth drawing: positive and finite.
fn finite(v: Option<f64>) -> Option<f64> {
    v.filter(|x| is_positive(*x))
}

fn draw(root: &Root<'_>, verdict: &Verdict) -> Result<()> {
    let levels = throughput_levels(verdict);
    let floor = 1.0 - verdict.settings.min_effect;
    let notes = style::fold_notes(notes(verdict, &levels));
    let (y_lo, y_hi) = y_range(&levels, floor);
    let legend = legend_entries(verdict, &levels, floor);
    let footer = footer(verdict);
    let right = format!("throughline {}", env!("CARGO_PKG_VERSION"));
    let title = title(verdict);
    let area = style::draw_frame(
        root,
        &style::Frame {
            title: &title,
            legend: &legend,
            notes: &notes,
            footer_left: &footer,
            footer_right: &right,
        },
    )?;

    let n = levels.len().max(1);
    let x_range = -0.5f64..(n as f64 - 0.5);
    let labels: Vec<String> = levels
        .iter()
        .map(|l| format!("C={}", l.concurrency))
        .collect();
    let mut cc = style::one_panel(&area, x_range, y_lo..y_hi)?;
    let label_of = |v: &f64| {
        let i = v.round();
        if (v - i).abs() > 1e-6 || i < 0.0 {
            return String::new();
        }
        labels.get(i as usize).cloned().unwrap_or_default()
    };
    style::mesh(&mut cc.configure_mesh(), 1)
        .disable_x_mesh()
        .x_desc("concurrency level")
        .y_desc({
            let (reference, head) = crate::report::tables::sides(verdict);
            format!("{head} / {reference} output tok/s")
        })
        .x_labels(n.min(24) + 1)
        .y_labels(8)
        .x_label_formatter(&label_of)
        .y_label_formatter(&|v| fmt_ratio(*v))
        .draw()?;

    let (x0, x1) = (-0.5, n as f64 - 0.5);
    cc.draw_series(LineSeries::new(
        vec![(x0, 1.0), (x1, 1.0)],
        MUTED.stroke_width(2),
    ))?;
    cc.draw_series(DashedLineSeries::new(
        vec![(x0, floor), (x1, floor)],
        10,
        6,
        RED.stroke_width(2),
    ))?;
    draw_levels(&mut cc, &levels, (y_lo, y_hi), &[floor, 1.0])
}

/// What the chart cannot show, said under it: no level, levels without a ratio, latency gates.
fn notes(verdict: &Verdict, levels: &[&LevelVerdict]) -> Vec<String> {
    let mut notes = Vec::new();
    if levels.is_empty() {
        notes.push("no throughput level was compared".to_string());
    }
    let unmeasured: Vec<String> = levels
        .iter()
        .filter(|l| finite(l.ratio).is_none())
        .map(|l| format!("C={}", l.concurrency))
        .collect();
    if !unmeasured.is_empty() {
        notes.push(format!("no ratio at {}", unmeasured.join(", ")));
    }
    if verdict.levels.len() > levels.len() {
        notes.push("latency gates are not drawn here: see verdict.md".to_string());
    }
    notes
}

/// The y-range holds every ratio and bound, 1.0 and the minimum-effect line, with room above
/// the highest value for the verdict labels.
fn y_range(levels: &[&LevelVerdict], floor: f64) -> (f64, f64) {
    let values: Vec<f64> = levels
        .iter()
        .flat_map(|l| [l.ratio, l.ci_low, l.ci_high])
        .filter_map(finite)
        .chain([1.0, floor])
        .collect();
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let pad = ((hi - lo) * 0.12).max(0.01);
    ((lo - pad).max(0.0), hi + 2.0 * pad)
}

/// The legend: each status drawn (worst first), the no-change and minimum-effect lines, and
/// what a bar is.
fn legend_entries(verdict: &Verdict, levels: &[&LevelVerdict], floor: f64) -> Vec<LegendEntry> {
    let mut legend = Vec::new();
    let mut seen = Vec::new();
    for l in levels {
        if !seen.contains(&l.status) {
            seen.push(l.status);
        }
    }
    seen.sort_by_key(|s| status_rank(*s));
    for s in &seen {
        legend.push(LegendEntry::new(
            status_legend(*s, verdict.settings.min_effect),
            Mark::MeanBar,
            status_color(*s),
        ));
    }
    legend.push(LegendEntry::new("1.0: no change", Mark::Line, MUTED));
    legend.push(LegendEntry::new(
        format!(
            "{}: the minimum effect ({:.0}% slower)",
            fmt_ratio(floor),
            verdict.settings.min_effect * 100.0
        ),
        Mark::Dashed,
        RED,
    ));
    legend.push(LegendEntry::new(
        format!(
            "bar: one-sided {:.0}% bounds (a pass needs every bar's bottom above {})",
            verdict.settings.pass_confidence * 100.0,
            fmt_ratio(1.0 - verdict.settings.tolerance)
        ),
        Mark::MeanBar,
        INK,
    ));
    legend
}

/// The footer: the profile, the baseline (at its ref) and the design.
fn footer(verdict: &Verdict) -> String {
    format!(
        "profile {} · baseline {}{} · design {}",
        verdict.profile_name,
        verdict.baseline_name,
        verdict
            .baseline_ref
            .as_deref()
            .map(|r| format!(" at {r}"))
            .unwrap_or_default(),
        match verdict.design {
            Some(d) => format!("{d:?}").to_lowercase(),
            None => "none".to_string(),
        }
    )
}

/// Each level in its column: the bounds as a bar (an open bound runs to the edge of the
/// chart), the ratio as a dot, and the verdict written above it in its colour, clear of the
/// reference `lines` (ratios, lowest first).
fn draw_levels(
    cc: &mut ChartContext<'_, BitMapBackend<'_>, Cartesian2d<RangedCoordf64, RangedCoordf64>>,
    levels: &[&LevelVerdict],
    (y_lo, y_hi): (f64, f64),
    lines: &[f64],
) -> Result<()> {
    let dense = levels.len() > 16;
    let (cap_w, dot_r) = if dense { (3, 4) } else { (10, 7) };
    let label_size = if dense { 12.0 } else { 16.0 };
    for (i, l) in levels.iter().enumerate() {
        let x = i as f64;
        let c = status_color(l.status);
        let Some(r) = finite(l.ratio) else {
            continue;
        };
        // An open bound runs to the edge of the chart.
        let low = finite(l.ci_low).unwrap_or(y_lo).clamp(y_lo, y_hi);
        let high = finite(l.ci_high).unwrap_or(y_hi).clamp(y_lo, y_hi);
        if l.ci_low.is_some() || l.ci_high.is_some() || l.p_slower.is_some() {
            let bar = c.stroke_width(3);
            cc.draw_series(std::iter::once(PathElement::new(
                vec![(x, low), (x, high)],
                bar,
            )))?;
            for (y, present) in [(low, l.ci_low.is_some()), (high, l.ci_high.is_some())] {
                if present {
                    cc.draw_series(std::iter::once(
                        EmptyElement::at((x, y))
                            + PathElement::new(vec![(-cap_w, 0), (cap_w, 0)], bar),
                    ))?;
                }
            }
        }
        cc.draw_series(std::iter::once(Circle::new((x, r), dot_r, c.filled())))?;
        if !dense || l.status != LevelStatus::Pass {
            let text = format!("{} {}", level_word(l.status), percent_change(r));
            let top = high.max(r);
            let line_rows: Vec<i32> = (lines.iter())
                .filter(|v| (y_lo..=y_hi).contains(*v))
                .map(|v| cc.backend_coord(&(x, *v)).1)
                .collect();
            let top_row = cc.backend_coord(&(x, top)).1;
            let lift = label_lift(top_row, label_size as i32, &line_rows);
            cc.draw_series(std::iter::once(
                EmptyElement::at((x, top))
                    + Text::new(
                        text,
                        (0, -LABEL_GAP - lift),
                        style::text(label_size, &INK)
                            .color(&c)
                            .pos(Pos::new(HPos::Center, VPos::Bottom)),
                    ),
            ))?;
        }
    }
    Ok(())
}

/// Pixels between a bar's top and its label.
const LABEL_GAP: i32 = 8;

/// How many pixels higher than [`LABEL_GAP`] above `top_row` a label `height` pixels tall
/// sits so that no reference line (pixel rows in `line_rows`, lowest ratio first, that is
/// largest row first) runs through it: a "cannot tell" struck through by the 0.97 line
/// reads as crossed out. The label moves just above each line it would cross.
fn label_lift(top_row: i32, height: i32, line_rows: &[i32]) -> i32 {
    let mut bottom = top_row - LABEL_GAP;
    for &row in line_rows {
        // Rows grow downwards: the label spans bottom - height ..= bottom.
        if row >= bottom - height - 2 && row <= bottom + 2 {
            bottom = row - 4;
        }
    }
    top_row - LABEL_GAP - bottom
}

fn status_rank(s: LevelStatus) -> u8 {
    match s {
        LevelStatus::Regression => 0,
        LevelStatus::Inconclusive => 1,
        LevelStatus::Pass => 2,
        LevelStatus::Improvement => 3,
        LevelStatus::InsufficientTrials => 4,
        LevelStatus::NotGated => 5,
    }
}

fn status_legend(s: LevelStatus, min_effect: f64) -> String {
    match s {
        LevelStatus::Regression => format!(
            "FAIL: significantly slower, by at least {:.0}%",
            min_effect * 100.0
        ),
        LevelStatus::Inconclusive => {
            "cannot tell: neither slower beyond doubt nor a drop ruled out".into()
        }
        LevelStatus::Pass => "pass: the bar's bottom rules out a larger drop than allowed".into(),
        LevelStatus::Improvement => "faster".into(),
        LevelStatus::InsufficientTrials => "too few trials".into(),
        LevelStatus::NotGated => "not gated".into(),
    }
}

fn level_word(s: LevelStatus) -> &'static str {
    match s {
        LevelStatus::Regression => "FAIL",
        LevelStatus::Inconclusive => "cannot tell",
        LevelStatus::Pass => "pass",
        LevelStatus::Improvement => "faster",
        LevelStatus::InsufficientTrials => "few trials",
        LevelStatus::NotGated => "not gated",
    }
}

/// "-9.1%" from a ratio of 0.909.
fn percent_change(r: f64) -> String {
    crate::report::numbers::signed_percent((r - 1.0) * 100.0)
}

fn fmt_ratio(v: f64) -> String {
    format!("{v:.2}")
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::gate::{LevelVerdict, Verdict};
    use crate::profile::GateSettings;
    use crate::stats::decision::Design;

    pub(crate) fn level(c: u32, status: LevelStatus, r: f64, lo: f64, hi: f64) -> LevelVerdict {
        LevelVerdict {
            concurrency: c,
            metric: Default::default(),
            status,
            baseline_mean: Some(1000.0 * c as f64),
            candidate_mean: Some(1000.0 * c as f64 * r),
            ratio: Some(r),
            ci_low: Some(lo),
            ci_high: Some(hi),
            p_slower: Some(0.01),
            p_adjusted: Some(0.02),
            n_baseline: 5,
            n_candidate: 5,
            baseline_sessions: 1,
            min_detectable_drop: Some(0.02),
            test: None,
            note: None,
        }
    }

    pub(crate) fn verdict(levels: Vec<LevelVerdict>, outcome: Outcome) -> Verdict {
        let refused = Verdict::refused(
            "demo",
            "demo",
            Some("origin/main".into()),
            GateSettings::default(),
            "",
        );
        Verdict {
            outcome,
            design: Some(Design::Relative),
            levels,
            worst_ratio: Some(0.91),
            warnings: vec![],
            ..refused
        }
    }

    /// The example of issue 20: a 9% drop at C = 1 and 4, the rest passing or unclear.
    pub(crate) fn mixed() -> Verdict {
        verdict(
            vec![
                level(1, LevelStatus::Regression, 0.91, 0.89, 0.93),
                level(4, LevelStatus::Regression, 0.912, 0.895, 0.93),
                level(8, LevelStatus::Pass, 1.002, 0.985, 1.02),
                level(32, LevelStatus::Inconclusive, 0.985, 0.95, 1.02),
                level(64, LevelStatus::Pass, 1.01, 0.99, 1.03),
            ],
            Outcome::Regression,
        )
    }

    /// Pixels of `rgb` (1200 x 750) within a few units of `c`.
    fn count_color(rgb: &[u8], c: RGBColor) -> usize {
        rgb.chunks(3)
            .filter(|p| {
                (p[0] as i32 - c.0 as i32).abs() < 6
                    && (p[1] as i32 - c.1 as i32).abs() < 6
                    && (p[2] as i32 - c.2 as i32).abs() < 6
            })
            .count()
    }

    fn decode(path: &Path) -> Vec<u8> {
        let bytes = std::fs::read(path).unwrap();
        let decoder = png::Decoder::new(bytes.as_slice());
        let mut reader = decoder.read_info().unwrap();
        let mut buf = vec![0; reader.output_buffer_size()];
        let info = reader.next_frame(&mut buf).unwrap();
        buf.truncate(info.buffer_size());
        buf
    }

    #[test]
    fn failed_levels_are_red_and_named_in_the_title() {
        let v = mixed();
        assert_eq!(
            title(&v),
            "REGRESSION at C = 1, 4: head / base output tok/s per level"
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ratio.png");
        ratio_chart(&v, &path).unwrap();
        let rgb = decode(&path);
        let red = count_color(&rgb, RED);
        let amber = count_color(&rgb, AMBER);
        // One inconclusive level: amber marker, bar and label.
        assert!(amber > 300, "amber pixels: {amber}");
        // The two failed levels are red beyond the dashed line and the legend: a passing
        // verdict has far less red.
        let mut pass = mixed();
        for l in &mut pass.levels {
            l.status = LevelStatus::Pass;
            l.ratio = Some(1.0);
            l.ci_low = Some(0.98);
            l.ci_high = Some(1.02);
        }
        pass.outcome = Outcome::Pass;
        ratio_chart(&pass, &path).unwrap();
        let red_pass = count_color(&decode(&path), RED);
        assert!(red > red_pass + 1000, "pass {red_pass} vs fail {red}");
    }

    #[test]
    fn a_label_clears_the_reference_lines() {
        // A bar's top at row 300: its label, 16 rows tall, spans rows 276-292.
        assert_eq!(label_lift(300, 16, &[200]), 0, "a line far above: no move");
        assert_eq!(label_lift(300, 16, &[320]), 0, "a line below the bar's top");
        // The 0.97 line through the label: it moves to just above it (bottom at row 286).
        assert_eq!(label_lift(300, 16, &[290]), 6);
        // And above the 1.0 line too when that one runs through it there.
        assert_eq!(label_lift(300, 16, &[290, 280]), 16);
        assert_eq!(label_lift(300, 16, &[290, 240]), 6);
    }

    #[test]
    fn open_bounds_no_levels_and_many_levels_draw() {
        let dir = tempfile::tempdir().unwrap();
        let mut v = mixed();
        v.levels[0].ci_high = None;
        v.levels[1].ratio = None;
        v.levels[2].ci_low = Some(f64::NAN);
        ratio_chart(&v, &dir.path().join("a.png")).unwrap();
        ratio_chart(
            &verdict(vec![], Outcome::NotComparable),
            &dir.path().join("b.png"),
        )
        .unwrap();
        let many = (1..=64)
            .map(|c| level(c, LevelStatus::Pass, 1.0, 0.98, 1.02))
            .collect();
        ratio_chart(&verdict(many, Outcome::Pass), &dir.path().join("c.png")).unwrap();
    }
}
