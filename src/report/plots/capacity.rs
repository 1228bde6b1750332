//! `capacity.png` for the capacity planner: days on one node per node type (bars with P10-P90
//! whiskers) beside days to finish against node count (a P50 line per node type with its
//! P10-P90 band), the deadline drawn on both.

use std::path::Path;

use anyhow::Result;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::axis::{fmt_num, linear_top, wants_log, LogAxis, LogTicks, TickedAxis};
use super::style::{self, series_color, LegendEntry, Mark, RED};
use super::{render_png, Root};
use crate::stats::is_positive;

/// One node type's projection.
#[derive(Debug, Clone, PartialEq)]
pub struct CapacitySeries {
    /// The node type, e.g. "4x RTX PRO 6000".
    pub name: String,
    pub points: Vec<CapacityPoint>,
}

/// Days to finish with `nodes` nodes: the median and the P10-P90 range.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CapacityPoint {
    pub nodes: f64,
    pub days_p10: f64,
    pub days_p50: f64,
    pub days_p90: f64,
}

/// The y-axis turns logarithmic when the days span more than this ratio.
/// How a series whose P10-P90 is unknown ends its name (it draws no band).
pub const UNKNOWN_INTERVAL: &str = "interval unknown";
const LOG_RATIO: f64 = 30.0;
/// The x-axis turns logarithmic (powers of two) when node counts span more than this ratio.
const LOG_NODES_RATIO: f64 = 16.0;

/// Below this relative P10-P90 spread a band would be thinner than the line: the legend then
/// says so instead of promising a band.
const THIN_BAND: f64 = 0.04;

/// Draws two panels: on the left, days on one node for each node type (the P50 as a bar, the
/// P10-P90 as a whisker); on the right, days to finish against node count (the P50 as a line,
/// the P10-P90 as a band where it is wide enough to see). `deadline_days` is drawn on both.
/// `footer` goes in the bottom-left corner (what the projection is for, the date of its inputs).
pub fn capacity_chart(
    series: &[CapacitySeries],
    title: &str,
    footer: &str,
    deadline_days: Option<f64>,
    path: &Path,
) -> Result<()> {
    // Keep points that can be drawn: positive finite nodes and days, sorted by nodes.
    let mut notes = Vec::new();
    let mut clean: Vec<(&str, Vec<CapacityPoint>)> = Vec::new();
    for s in series {
        let mut pts: Vec<CapacityPoint> = s
            .points
            .iter()
            .filter(|p| {
                [p.nodes, p.days_p10, p.days_p50, p.days_p90]
                    .iter()
                    .all(|v| is_positive(*v))
            })
            .map(|p| {
                // A band drawn the wrong way round is still the range between the two.
                let (lo, hi) = if p.days_p10 <= p.days_p90 {
                    (p.days_p10, p.days_p90)
                } else {
                    (p.days_p90, p.days_p10)
                };
                CapacityPoint {
                    days_p10: lo,
                    days_p90: hi,
                    ..*p
                }
            })
            .collect();
        pts.sort_by(|a, b| a.nodes.total_cmp(&b.nodes));
        let dropped = s.points.len() - pts.len();
        if pts.is_empty() {
            notes.push(format!("{}: no projection could be made", s.name));
        } else if dropped > 0 {
            notes.push(format!(
                "{}: {dropped} point(s) without a finite positive projection left out",
                s.name
            ));
        }
        clean.push((&s.name, pts));
    }
    if series.is_empty() {
        notes.push("no node types to show".to_string());
    }
    let footer = footer.to_string();
    let title = title.to_string();
    let deadline = deadline_days.filter(|d| is_positive(*d));
    render_png(path, |root| {
        draw(root, &clean, &title, &footer, deadline, notes)
    })
}

/// The widest relative P10-P90 spread of a series.
fn spread(points: &[CapacityPoint]) -> f64 {
    points
        .iter()
        .map(|p| (p.days_p90 - p.days_p10) / p.days_p50)
        .fold(0.0, f64::max)
}

fn draw(
    root: &Root<'_>,
    series: &[(&str, Vec<CapacityPoint>)],
    title: &str,
    footer: &str,
    deadline: Option<f64>,
    notes: Vec<String>,
) -> Result<()> {
    let mut legend: Vec<LegendEntry> = series
        .iter()
        .enumerate()
        .map(|(i, (name, pts))| {
            // A band is promised only where it is wide enough to see; a series whose interval
            // is unknown has none to promise, and says so in its name already.
            let label = if spread(pts) >= THIN_BAND || name.ends_with(UNKNOWN_INTERVAL) {
                name.to_string()
            } else {
                format!(
                    "{name} (P10-P90 within {:.0}%: no band to see)",
                    THIN_BAND * 100.0
                )
            };
            LegendEntry::new(label, Mark::Band, series_color(i))
        })
        .collect();
    if let Some(d) = deadline {
        legend.push(LegendEntry::new(
            format!("deadline: {} days", fmt_num(d)),
            Mark::Dashed,
            RED,
        ));
    }
    let notes = style::fold_notes(notes);
    let area = style::draw_frame(
        root,
        &style::Frame {
            title,
            legend: &legend,
            notes: &notes,
            footer_left: footer,
            footer_right: "",
        },
    )?;
    let (w, _) = area.dim_in_pixel();
    let (left, right) = area.split_horizontally(w * 2 / 5);
    bars(&left, series, deadline)?;
    lines(&right, series, deadline)?;
    Ok(())
}

/// The first point of each series that has one: (series index, name, point).
type First<'a> = (usize, &'a str, CapacityPoint);

/// Days on the fewest nodes drawn (one, as the planner draws it): a bar per node type.
fn bars(
    area: &Root<'_>,
    series: &[(&str, Vec<CapacityPoint>)],
    deadline: Option<f64>,
) -> Result<()> {
    let firsts: Vec<First<'_>> = series
        .iter()
        .enumerate()
        .filter_map(|(i, (name, pts))| pts.first().map(|p| (i, *name, *p)))
        .collect();
    let on = nodes_drawn(&firsts);
    let days = || {
        firsts
            .iter()
            .flat_map(|(_, _, p)| [p.days_p10, p.days_p90])
            .chain(deadline)
    };
    let log_x = wants_log(days(), LOG_RATIO);
    let caption = format!(
        "Days on {on}: P50 {}, P10-P90 whisker",
        if log_x { "dot" } else { "bar" }
    );
    // One row per node type, each at most ROW_MAX_PX tall: a single node type is one bar,
    // not a bar above three empty rows.
    let rows = firsts.len().max(1);
    let label_style = style::text(style::TICK_SIZE, &style::INK);
    let (area, label_w, names) = lay_out_rows(area, &firsts, rows, &label_style);
    let mut builder = ChartBuilder::on(&area);
    builder
        .caption(caption, style::panel_caption())
        .margin_left(12)
        .margin_right(16)
        .margin_top(6)
        .margin_bottom(6)
        .x_label_area_size(56)
        .y_label_area_size(label_w as u32);
    let y_range = -0.5f64..(rows as f64 - 0.5);
    let x_desc = if log_x { "days (log scale)" } else { "days" };
    let rows_drawn = BarRows {
        firsts: &firsts,
        names: &names,
        label_style: &label_style,
        log_x,
        deadline,
    };
    macro_rules! panel {
        ($x:expr, $floor:expr) => {{
            let mut cc = builder.build_cartesian_2d($x, y_range.clone())?;
            style::mesh(&mut cc.configure_mesh(), 1)
                .disable_y_mesh()
                .x_desc(x_desc)
                .x_labels(6)
                .y_labels(0)
                .x_label_formatter(&|v| fmt_num(*v))
                .draw()?;
            rows_drawn.draw(&mut cc, $floor)?;
        }};
    }
    if log_x {
        let axis = LogAxis::around(days(), 1.3, LogTicks::Decades);
        let floor = axis.range().start;
        panel!(axis, floor)
    } else {
        panel!(0f64..linear_top(days()), 0.0)
    }
    Ok(())
}

/// What "days on ..." means on the bar panel: one node, n nodes, or the fewest drawn.
fn nodes_drawn(firsts: &[First<'_>]) -> String {
    let nodes: Vec<f64> = firsts.iter().map(|(_, _, p)| p.nodes).collect();
    match nodes.first() {
        Some(n) if nodes.iter().all(|m| m == n) && *n == 1.0 => "one node".to_string(),
        Some(n) if nodes.iter().all(|m| m == n) => format!("{} nodes", fmt_num(*n)),
        _ => "the fewest nodes drawn".to_string(),
    }
}

/// The bar panel's area (no taller than its rows need), the label column's width and each
/// node type's name in lines. The label column fits the longest name, up to LABEL_SHARE of
/// the panel; a longer name wraps onto more lines at its spaces rather than being cut, and
/// where the rows are too short for the wrapped names, each is one line cut to the column.
fn lay_out_rows<'b>(
    area: &Root<'b>,
    firsts: &[First<'_>],
    rows: usize,
    label_style: &TextStyle<'_>,
) -> (Root<'b>, i32, Vec<Vec<String>>) {
    let (area_w, area_h) = area.dim_in_pixel();
    let width = |t: &str| -> i32 {
        area.estimate_text_size(t, label_style)
            .map_or(0, |(w, _)| w as i32)
    };
    let widest = firsts
        .iter()
        .map(|(_, name, _)| width(name))
        .max()
        .unwrap_or(0);
    let label_w = (widest + LABEL_PAD).clamp(60, (area_w as f64 * LABEL_SHARE) as i32);
    let names: Vec<Vec<String>> = firsts
        .iter()
        .map(|(_, name, _)| wrap(name, label_w - LABEL_PAD, &width))
        .collect();
    let lines = names.iter().map(Vec::len).max().unwrap_or(1) as i32;
    let row_px = ROW_MAX_PX.max(lines * LINE_PX + 12);
    let frame_px = PANEL_CAPTION_PX + 12 + 56;
    let area = if frame_px + rows as i32 * row_px < area_h as i32 {
        area.split_vertically(frame_px + rows as i32 * row_px).0
    } else {
        area.clone()
    };
    // Rows too short for the wrapped names: one line each, cut to the column.
    let plot_row_px = (area.dim_in_pixel().1 as i32 - frame_px) / rows as i32;
    let names: Vec<Vec<String>> = if plot_row_px < lines * LINE_PX {
        firsts
            .iter()
            .map(|(_, name, _)| vec![fit(name, label_w - LABEL_PAD, &width)])
            .collect()
    } else {
        names
    };
    (area, label_w, names)
}

/// What the bar panel draws on its axes, whichever the x-axis is.
struct BarRows<'a> {
    firsts: &'a [First<'a>],
    names: &'a [Vec<String>],
    label_style: &'a TextStyle<'a>,
    log_x: bool,
    deadline: Option<f64>,
}

impl BarRows<'_> {
    /// The names beside their rows, a bar (or a dot on a log axis) per node type with its
    /// whisker, and the deadline; `floor` is where the x-axis starts.
    fn draw<X: Ranged<ValueType = f64>>(
        &self,
        cc: &mut ChartContext<'_, BitMapBackend<'_>, Cartesian2d<X, RangedCoordf64>>,
        floor: f64,
    ) -> Result<()> {
        let rows = self.firsts.len().max(1);
        let half = if self.firsts.len() > 12 { 0.3 } else { 0.35 };
        // The names, right-aligned beside their rows (the first node type at the top).
        for (row, lines) in self.names.iter().enumerate() {
            let y = (rows - 1 - row) as f64;
            let top = -(lines.len() as i32 - 1) * LINE_PX / 2;
            cc.draw_series(lines.iter().enumerate().map(|(k, line)| {
                EmptyElement::at((floor, y))
                    + Text::new(
                        line.clone(),
                        (-8, top + k as i32 * LINE_PX),
                        self.label_style.pos(Pos::new(HPos::Right, VPos::Center)),
                    )
            }))?;
        }
        for (row, (i, _, p)) in self.firsts.iter().enumerate() {
            let y = (rows - 1 - row) as f64;
            let c = series_color(*i);
            // A bar's length reads as a quantity only on a linear axis; on a log axis, a dot.
            if self.log_x {
                cc.draw_series(std::iter::once(Circle::new((p.days_p50, y), 8, c.filled())))?;
            } else {
                cc.draw_series(std::iter::once(Rectangle::new(
                    [(floor, y - half), (p.days_p50, y + half)],
                    c.mix(0.85).filled(),
                )))?;
            }
            let whisker = style::INK.stroke_width(2);
            cc.draw_series(std::iter::once(PathElement::new(
                vec![(p.days_p10, y), (p.days_p90, y)],
                whisker,
            )))?;
            for x in [p.days_p10, p.days_p90] {
                cc.draw_series(std::iter::once(PathElement::new(
                    vec![(x, y - half * 0.6), (x, y + half * 0.6)],
                    whisker,
                )))?;
            }
        }
        if let Some(d) = self.deadline {
            cc.draw_series(DashedLineSeries::new(
                vec![(d, -0.5), (d, rows as f64 - 0.5)],
                10,
                6,
                RED.stroke_width(2),
            ))?;
        }
        Ok(())
    }
}

/// Days to finish against node count: a line per node type with its band.
fn lines(
    area: &Root<'_>,
    series: &[(&str, Vec<CapacityPoint>)],
    deadline: Option<f64>,
) -> Result<()> {
    let nodes = || series.iter().flat_map(|(_, p)| p.iter().map(|p| p.nodes));
    let days = || {
        series
            .iter()
            .flat_map(|(_, p)| p.iter().flat_map(|p| [p.days_p10, p.days_p90]))
            .chain(deadline)
    };
    let mut builder = ChartBuilder::on(area);
    builder
        .caption(
            "Days to finish by node count: P50 line, P10-P90 band",
            style::panel_caption(),
        )
        .margin_left(12)
        .margin_right(40)
        .margin_top(6)
        .margin_bottom(6)
        .x_label_area_size(56)
        .y_label_area_size(70);
    let log_x = wants_log(nodes(), LOG_NODES_RATIO);
    let log_y = wants_log(days(), LOG_RATIO);
    let x_desc = if log_x { "nodes (log2 scale)" } else { "nodes" };
    let y_desc = if log_y {
        "days to finish (log scale)"
    } else {
        "days to finish"
    };
    // Four shapes of chart, one drawing routine.
    macro_rules! chart {
        ($x:expr, $y:expr) => {{
            let x_axis = $x;
            let (x_lo, x_hi) = (x_axis.range().start, x_axis.range().end);
            let mut cc = builder.build_cartesian_2d(x_axis, $y)?;
            style::mesh(&mut cc.configure_mesh(), 2)
                .x_desc(x_desc)
                .y_desc(y_desc)
                .x_labels(10)
                .y_labels(8)
                .x_label_formatter(&|v| fmt_num(*v))
                .y_label_formatter(&|v| fmt_num(*v))
                .draw()?;
            if let Some(d) = deadline {
                cc.draw_series(DashedLineSeries::new(
                    vec![(x_lo, d), (x_hi, d)],
                    10,
                    6,
                    RED.stroke_width(2),
                ))?;
            }
            for (i, (_, pts)) in series.iter().enumerate() {
                let c = series_color(i);
                if pts.len() > 1 && spread(pts) >= THIN_BAND {
                    let mut band: Vec<(f64, f64)> =
                        pts.iter().map(|p| (p.nodes, p.days_p90)).collect();
                    band.extend(pts.iter().rev().map(|p| (p.nodes, p.days_p10)));
                    cc.draw_series(std::iter::once(Polygon::new(band, c.mix(0.25).filled())))?;
                }
                // The P10-P90 bar at each point (all a single point has).
                for p in pts {
                    cc.draw_series(std::iter::once(PathElement::new(
                        vec![(p.nodes, p.days_p10), (p.nodes, p.days_p90)],
                        c.mix(0.7).stroke_width(2),
                    )))?;
                }
                cc.draw_series(LineSeries::new(
                    pts.iter().map(|p| (p.nodes, p.days_p50)),
                    c.stroke_width(3),
                ))?;
                cc.draw_series(
                    pts.iter()
                        .map(|p| Circle::new((p.nodes, p.days_p50), 4, c.filled())),
                )?;
            }
        }};
    }
    // Node counts are whole numbers: ticks at whole numbers only.
    let x_lin = || TickedAxis::whole_numbers(nodes());
    let y_log = || LogAxis::around(days(), 1.2, LogTicks::Decades);
    let y_lin = || 0f64..linear_top(days());
    let x_log = || LogAxis::around(nodes(), 1.3, LogTicks::Base2);
    match (log_x, log_y) {
        (true, true) => chart!(x_log(), y_log()),
        (true, false) => chart!(x_log(), y_lin()),
        (false, true) => chart!(x_lin(), y_log()),
        (false, false) => chart!(x_lin(), y_lin()),
    }
    Ok(())
}

/// The tallest a bar's row is drawn, in pixels.
const ROW_MAX_PX: i32 = 64;
/// One line of a node type's name, in pixels.
const LINE_PX: i32 = 18;
/// Room between a name and the axis, in pixels.
const LABEL_PAD: i32 = 14;
/// The most of the bar panel's width the names may take.
const LABEL_SHARE: f64 = 0.45;
/// The panel caption's height, in pixels.
const PANEL_CAPTION_PX: i32 = 30;

/// `text` in lines at most `max_w` pixels wide, broken at spaces (a word wider than that
/// keeps a line of its own: whole, not cut).
fn wrap(text: &str, max_w: i32, width: &dyn Fn(&str) -> i32) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for word in text.split(' ') {
        match lines.last_mut() {
            Some(line) if width(&format!("{line} {word}")) <= max_w => {
                line.push(' ');
                line.push_str(word);
            }
            _ => lines.push(word.to_string()),
        }
    }
    if lines.is_empty() {
        lines.push(String::new());
    }
    lines
}

/// `text` cut with an ellipsis to at most `max_w` pixels: only where the rows are too short
/// for wrapped names.
fn fit(text: &str, max_w: i32, width: &dyn Fn(&str) -> i32) -> String {
    if width(text) <= max_w {
        return text.to_string();
    }
    let mut chars: Vec<char> = text.chars().collect();
    while chars.pop().is_some() {
        let cut = chars.iter().collect::<String>() + "…";
        if width(&cut) <= max_w {
            return cut;
        }
    }
    String::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(name: &str, per_node_days: f64, n: &[f64]) -> CapacitySeries {
        CapacitySeries {
            name: name.into(),
            points: n
                .iter()
                .map(|&k| CapacityPoint {
                    nodes: k,
                    days_p10: per_node_days / k * 0.85,
                    days_p50: per_node_days / k,
                    days_p90: per_node_days / k * 1.2,
                })
                .collect(),
        }
    }

    /// Issue 30 item 10: a node type's name is wrapped at its spaces, never cut, where the
    /// rows have room; cut with an ellipsis only where they do not.
    #[test]
    fn names_wrap_whole_and_are_cut_only_when_asked() {
        let width = |t: &str| 8 * t.chars().count() as i32;
        let name = "rtxpro6000-4x-tp4 (fitted), interval unknown";
        // 17 characters wide: the longest word just fits, and no two of the rest together.
        let lines = wrap(name, 136, &width);
        assert_eq!(
            lines,
            ["rtxpro6000-4x-tp4", "(fitted),", "interval unknown"]
        );
        assert_eq!(lines.join(" "), name);
        assert!(lines.iter().all(|l| width(l) <= 136));
        assert_eq!(wrap("h100-8x", 120, &width), ["h100-8x"]);
        assert_eq!(fit("h100-8x (scaled)", 80, &width), "h100-8x (…");
        assert_eq!(fit("h100-8x", 80, &width), "h100-8x");
    }

    #[test]
    fn draws_and_survives_bad_points() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("capacity.png");
        let mut bad = series("broken", 10.0, &[1.0, 2.0]);
        bad.points[0].days_p50 = f64::NAN;
        bad.points[1].days_p10 = 0.0;
        capacity_chart(
            &[
                series("4x RTX PRO 6000", 16.0, &[1.0, 2.0, 3.0, 4.0, 6.0, 8.0]),
                series("7x B200", 1.6, &[1.0, 2.0, 4.0, 8.0]),
                bad,
            ],
            "Days to finish 1.64 B output tokens",
            "plan demo · inputs of 2026-11-29",
            Some(2.0),
            &path,
        )
        .unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(&bytes[1..4], b"PNG");
        capacity_chart(&[], "empty", "", None, &dir.path().join("empty.png")).unwrap();
        capacity_chart(
            &[series("one point", 3.0, &[2.0])],
            "one point",
            "",
            Some(f64::NAN),
            &dir.path().join("one.png"),
        )
        .unwrap();
    }
}
