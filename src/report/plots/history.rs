//! `trend.png`: main's history, one line per level, each session's tok/s as a percentage of
//! that level's median over the history (so levels of very different throughput share one
//! axis); a shift found by the change-point check is a dashed vertical line in the level's
//! colour, labelled with its size.

use std::path::Path;

use anyhow::Result;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

use super::axis::fmt_num;
use super::render_png;
use super::style::{self, LegendEntry, Mark, PALETTE};
use crate::gate::trend::Trend;

/// One line per level: its concurrency and (session number, tok/s as % of its median).
type Line = (u32, Vec<(f64, f64)>);

/// The colour of the `i`th level.
fn color(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

pub fn trend_chart(trend: &Trend, tool: &str, path: &Path) -> Result<()> {
    let sessions = trend.sessions.max(1);
    let lines = lines(trend);
    let ys = lines.iter().flat_map(|(_, l)| l.iter().map(|p| p.1));
    let (lo, hi) = ys.fold((100.0f64, 100.0f64), |(lo, hi), y| (lo.min(y), hi.max(y)));
    let pad = ((hi - lo) * 0.15).max(1.0);
    let (y0, y1) = (lo - pad, hi + pad);

    let title = title(trend);
    let legend: Vec<LegendEntry> = lines
        .iter()
        .enumerate()
        .map(|(i, (c, _))| LegendEntry::new(format!("C={c}"), Mark::MarkerLine, color(i)))
        .chain([LegendEntry::new(
            "a shift (change point)",
            Mark::Dashed,
            style::MUTED,
        )])
        .collect();
    let notes = vec![format!(
        "each point: one session's geometric-mean tok/s as % of the level's median; shifts by \
         E-divisive means, permutation test, false-alarm rate {} over all levels",
        fmt_num(trend.alpha)
    )];
    let footer_left = footer(trend);
    render_png(path, |root| {
        let area = style::draw_frame(
            root,
            &style::Frame {
                title: &title,
                legend: &legend,
                notes: &notes,
                footer_left: &footer_left,
                footer_right: tool,
            },
        )?;
        let mut cc = ChartBuilder::on(&area)
            .margin_left(16)
            .margin_right(28)
            .margin_top(4)
            .margin_bottom(6)
            .x_label_area_size(56)
            .y_label_area_size(84)
            .build_cartesian_2d(0.5f64..(sessions as f64 + 0.5), y0..y1)?;
        style::mesh(&mut cc.configure_mesh(), 2)
            .x_desc("session (oldest to newest)")
            .y_desc("tok/s, % of the level's median")
            .x_labels(sessions.min(12))
            .y_labels(8)
            .x_label_formatter(&|v| format!("{v:.0}"))
            .y_label_formatter(&|v| fmt_num(*v))
            .draw()?;
        for (i, (_, line)) in lines.iter().enumerate() {
            let c = color(i);
            cc.draw_series(LineSeries::new(line.clone(), c.stroke_width(2)))?;
            cc.draw_series(line.iter().map(|p| Circle::new(*p, 4, c.filled())))?;
        }
        draw_shifts(&mut cc, trend, (y0, y1))
    })
}

/// Each level's sessions as a percentage of the level's median tok/s over the history.
fn lines(trend: &Trend) -> Vec<Line> {
    trend
        .levels
        .iter()
        .map(|level| {
            let values: Vec<f64> = level.points.iter().map(|p| p.tok_per_s).collect();
            // Empty only when the level has no points, and then nothing is divided by it.
            let median = crate::stats::median(&values);
            let line = level
                .points
                .iter()
                .enumerate()
                .map(|(i, p)| ((i + 1) as f64, 100.0 * p.tok_per_s / median))
                .collect();
            (level.concurrency, line)
        })
        .collect()
}

/// The title says the outcome: no lasting slowdown, or the levels that became slower.
fn title(trend: &Trend) -> String {
    let slower = trend.slower_levels();
    if slower.is_empty() {
        format!("Throughput trend: {}: no lasting slowdown", trend.name)
    } else {
        format!(
            "Throughput trend: {}: SLOWER at {}",
            trend.name,
            crate::record::levels_text(&slower)
        )
    }
}

/// The footer: how many sessions, from the first date to the last.
fn footer(trend: &Trend) -> String {
    let dates: Vec<&str> = trend
        .levels
        .iter()
        .flat_map(|l| l.points.iter().map(|p| p.measured_at.as_str()))
        .collect();
    match (dates.iter().min(), dates.iter().max()) {
        (Some(first), Some(last)) => format!(
            "{} sessions, {} to {}",
            trend.sessions,
            super::display_date(first),
            super::display_date(last)
        ),
        _ => format!("{} sessions", trend.sessions),
    }
}

/// Each shift the change-point check found: a dashed vertical line between the sessions in
/// the level's colour, labelled with the level and its size.
fn draw_shifts(
    cc: &mut ChartContext<'_, BitMapBackend<'_>, Cartesian2d<RangedCoordf64, RangedCoordf64>>,
    trend: &Trend,
    (y0, y1): (f64, f64),
) -> Result<()> {
    for (i, level) in trend.levels.iter().enumerate() {
        let c = color(i);
        for shift in &level.shifts {
            let Some(at) = level
                .points
                .iter()
                .position(|p| p.measured_at == shift.measured_at)
            else {
                continue;
            };
            let x = at as f64 + 0.5;
            cc.draw_series(DashedLineSeries::new(
                [(x, y0), (x, y1)],
                8,
                5,
                c.stroke_width(2),
            ))?;
            let label = format!(
                "C={} {}",
                level.concurrency,
                crate::report::numbers::signed_percent((shift.ratio - 1.0) * 100.0)
            );
            cc.draw_series([Text::new(
                label,
                (x + 0.15, y1 - (y1 - y0) * (0.04 + 0.06 * i as f64)),
                style::text(style::NOTE_SIZE, &style::INK),
            )])?;
        }
    }
    Ok(())
}
