//! `latency.png`: time to first token and inter-token latency, p50 and p99, against
//! concurrency (or the request rate of an open-loop run, where TTFT is counted from the send
//! time); two panels side by side, each on a log y-axis when its values spread wide.
//!
//! A line joins each level's mean over trials of the trial percentile; the trials' own values
//! are the faint dots around it.

use std::path::Path;

use anyhow::Result;
use plotters::coord::ranged1d::ValueFormatter;
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::axis::{fmt_num, linear_top, wants_log, LogAxis, LogTicks};
use super::style::{self, LegendEntry, Mark, BLUE, RED};
use super::{render_png, samples, Footer, LevelSamples, Levels};
use crate::record::{RunResult, TrialResult};
use crate::stats::Percentiles;

/// A panel uses a log y-axis when its largest value is this many times its smallest.
const LOG_RATIO: f64 = 20.0;

fn ttft(t: &TrialResult) -> Option<&Percentiles> {
    t.ttft_ms.as_ref()
}

fn itl(t: &TrialResult) -> Option<&Percentiles> {
    t.itl_ms.as_ref()
}

struct Panel {
    kind: Levels,
    title: &'static str,
    p50: Vec<LevelSamples>,
    p99: Vec<LevelSamples>,
}

pub(crate) fn latency_chart(result: &RunResult, footer: &Footer, path: &Path) -> Result<()> {
    let pick = |get: fn(&TrialResult) -> Option<&Percentiles>, p99: bool| {
        move |t: &TrialResult| get(t).map(|p| if p99 { p.p99 } else { p.p50 })
    };
    let kind = Levels::of(result);
    let levels = &result.levels;
    let (ttft50, mut notes) = samples(levels, kind, pick(ttft, false), "TTFT (streamed runs only)");
    let (ttft99, _) = samples(levels, kind, pick(ttft, true), "TTFT");
    let (itl50, itl_notes) = samples(levels, kind, pick(itl, false), "ITL (streamed runs only)");
    let (itl99, _) = samples(levels, kind, pick(itl, true), "ITL");
    for n in itl_notes {
        if !notes.contains(&n) {
            notes.push(n);
        }
    }
    // Percentiles read from a histogram say so here too (within 0.1%, by far under a dot).
    notes.extend(levels.iter().filter_map(|l| {
        crate::record::estimated_percentiles_note(l).map(|n| format!("{}: {n}", l.label()))
    }));
    let panels = [
        Panel {
            kind,
            title: "Time to first token (TTFT)",
            p50: ttft50,
            p99: ttft99,
        },
        Panel {
            kind,
            title: "Inter-token latency (ITL, per token)",
            p50: itl50,
            p99: itl99,
        },
    ];
    let title = format!("Latency vs {}: {}", kind.noun(), result.profile_name);
    render_png(path, |root| {
        let legend = [
            LegendEntry::new("p50: mean over trials", Mark::MarkerLine, BLUE),
            LegendEntry::new("p99: mean over trials", Mark::Dashed, RED),
            LegendEntry::new("one trial's p50", Mark::Dot, BLUE),
            LegendEntry::new("one trial's p99", Mark::Dot, RED),
        ];
        let notes = style::fold_notes(notes);
        let area = style::draw_frame(
            root,
            &style::Frame {
                title: &title,
                legend: &legend,
                notes: &notes,
                footer_left: &footer.left,
                footer_right: &footer.right,
            },
        )?;
        let (w, _) = area.dim_in_pixel();
        let (left, right) = area.split_horizontally(w / 2);
        draw_panel(&left, &panels[0])?;
        draw_panel(&right, &panels[1])?;
        Ok(())
    })
}

fn draw_panel(area: &DrawingArea<BitMapBackend<'_>, Shift>, panel: &Panel) -> Result<()> {
    let dense = panel.p50.len() > 48;
    let x = LogAxis::around(panel.p50.iter().map(|l| l.x), 1.35, panel.kind.ticks());
    let all = || {
        panel
            .p50
            .iter()
            .chain(&panel.p99)
            .flat_map(|l| l.values.iter().copied())
    };
    let (w, _) = area.dim_in_pixel();
    area.draw(&Text::new(
        panel.title,
        (w as i32 / 2, 2),
        style::panel_caption().pos(Pos::new(HPos::Center, VPos::Top)),
    ))?;
    let (_, body) = area.split_vertically(30);
    let log = wants_log(all(), LOG_RATIO);
    let y_desc = if log {
        "milliseconds (log scale)"
    } else {
        "milliseconds"
    };
    if log {
        let y = LogAxis::around(all(), 1.25, LogTicks::Decades);
        let mut cc = builder(&body).build_cartesian_2d(x, y)?;
        mesh(&mut cc, panel.kind.short_caption(), y_desc)?;
        series(&mut cc, panel, dense, &|v| v)?;
    } else {
        let top = linear_top(all());
        let mut cc = builder(&body).build_cartesian_2d(x, 0f64..top)?;
        mesh(&mut cc, panel.kind.short_caption(), y_desc)?;
        series(&mut cc, panel, dense, &|v: f64| v.clamp(0.0, top))?;
    }
    Ok(())
}

fn builder<'a, 'b>(
    area: &'a DrawingArea<BitMapBackend<'b>, Shift>,
) -> ChartBuilder<'a, 'b, BitMapBackend<'b>> {
    let mut b = ChartBuilder::on(area);
    b.margin_left(16)
        .margin_right(28)
        .margin_top(4)
        .margin_bottom(6)
        .x_label_area_size(56)
        .y_label_area_size(84);
    b
}

trait YAxis: Ranged<ValueType = f64> + ValueFormatter<f64> {}
impl YAxis for LogAxis {}
impl YAxis for RangedCoordf64 {}

fn mesh<Y: YAxis>(
    cc: &mut ChartContext<'_, BitMapBackend<'_>, Cartesian2d<LogAxis, Y>>,
    x_desc: &str,
    y_desc: &str,
) -> Result<()> {
    style::mesh(&mut cc.configure_mesh(), 2)
        .x_desc(x_desc)
        .y_desc(y_desc)
        .x_labels(8)
        .y_labels(8)
        .x_label_formatter(&|v| fmt_num(*v))
        .y_label_formatter(&|v| fmt_num(*v))
        .draw()?;
    Ok(())
}

fn series<Y: YAxis>(
    cc: &mut ChartContext<'_, BitMapBackend<'_>, Cartesian2d<LogAxis, Y>>,
    panel: &Panel,
    dense: bool,
    to_y: &dyn Fn(f64) -> f64,
) -> Result<()> {
    let dot_r = if dense { 1 } else { 3 };
    for (levels, color, dashed) in [(&panel.p99, RED, true), (&panel.p50, BLUE, false)] {
        cc.draw_series(levels.iter().flat_map(|l| {
            l.values
                .iter()
                .map(move |v| Circle::new((l.x, to_y(*v)), dot_r, color.mix(0.35).filled()))
        }))?;
        let mut means: Vec<(f64, f64)> = levels
            .iter()
            .filter(|l| !l.values.is_empty())
            .map(|l| {
                let m = crate::stats::mean(&l.values);
                (l.x, to_y(m))
            })
            .collect();
        means.sort_by(|a, b| a.0.total_cmp(&b.0));
        if dashed {
            cc.draw_series(DashedLineSeries::new(
                means.clone(),
                8,
                5,
                color.stroke_width(2),
            ))?;
        } else {
            cc.draw_series(LineSeries::new(means.clone(), color.stroke_width(2)))?;
        }
        if !dense {
            cc.draw_series(means.iter().map(|p| Circle::new(*p, 4, color.filled())))?;
        }
    }
    Ok(())
}
