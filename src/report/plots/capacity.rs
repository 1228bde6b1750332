//! `capacity.png` for the capacity planner: days to finish against node count, one line per
//! node type (the P50), with its P10-P90 band.

use std::path::Path;

use anyhow::Result;
use plotters::prelude::*;

use super::axis::{fmt_num, linear_top, wants_log, LogAxis, LogTicks};
use super::style::{self, LegendEntry, Mark, PALETTE};
use super::{render_png, Root};

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
const LOG_RATIO: f64 = 30.0;
/// The x-axis turns logarithmic (powers of two) when node counts span more than this ratio.
const LOG_NODES_RATIO: f64 = 16.0;

/// Draws days to finish against node count, one line per series with its P10-P90 band, and
/// writes it to `path` (a PNG of [`super::WIDTH`] x [`super::HEIGHT`]). `footer` goes in the
/// bottom-left corner (say what the projection is for and the date of its inputs).
pub fn capacity_chart(
    series: &[CapacitySeries],
    title: &str,
    footer: &str,
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
                    .all(|v| v.is_finite() && *v > 0.0)
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
    render_png(path, |root| draw(root, &clean, &title, &footer, notes))
}

fn draw(
    root: &Root<'_>,
    series: &[(&str, Vec<CapacityPoint>)],
    title: &str,
    footer: &str,
    notes: Vec<String>,
) -> Result<()> {
    let legend: Vec<LegendEntry> = series
        .iter()
        .enumerate()
        .map(|(i, (name, _))| {
            LegendEntry::new(
                format!("{name}: P50, band P10-P90"),
                Mark::Band,
                PALETTE[i % PALETTE.len()],
            )
        })
        .collect();
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
    let nodes = || series.iter().flat_map(|(_, p)| p.iter().map(|p| p.nodes));
    let days = || {
        series
            .iter()
            .flat_map(|(_, p)| p.iter().flat_map(|p| [p.days_p10, p.days_p90]))
    };
    let mut builder = ChartBuilder::on(&area);
    builder
        .margin_left(24)
        .margin_right(40)
        .margin_top(6)
        .margin_bottom(6)
        .x_label_area_size(56)
        .y_label_area_size(90);
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
            let mut cc = builder.build_cartesian_2d($x, $y)?;
            cc.configure_mesh()
                .x_desc(x_desc)
                .y_desc(y_desc)
                .x_labels(12)
                .y_labels(8)
                .x_label_formatter(&|v| fmt_num(*v))
                .y_label_formatter(&|v| fmt_num(*v))
                .label_style(style::text(style::TICK_SIZE, &style::INK))
                .axis_desc_style(style::text(style::AXIS_DESC_SIZE, &style::INK))
                .bold_line_style(style::GRID_BOLD)
                .light_line_style(style::GRID_LIGHT)
                .max_light_lines(2)
                .max_light_lines(2)
                .draw()?;
            for (i, (_, pts)) in series.iter().enumerate() {
                let c = PALETTE[i % PALETTE.len()];
                if pts.len() > 1 {
                    let mut band: Vec<(f64, f64)> =
                        pts.iter().map(|p| (p.nodes, p.days_p90)).collect();
                    band.extend(pts.iter().rev().map(|p| (p.nodes, p.days_p10)));
                    cc.draw_series(std::iter::once(Polygon::new(band, c.mix(0.18).filled())))?;
                }
                // The band's edges, and the P10-P90 bar at each point (all a single point has).
                for p in pts {
                    cc.draw_series(std::iter::once(PathElement::new(
                        vec![(p.nodes, p.days_p10), (p.nodes, p.days_p90)],
                        c.mix(0.6).stroke_width(2),
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
    let x_lin = || {
        let top = linear_top(nodes());
        let top = if top < 2.0 { 2.0 } else { top };
        0f64..top
    };
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
            &path,
        )
        .unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(&bytes[1..4], b"PNG");
        capacity_chart(&[], "empty", "", &dir.path().join("empty.png")).unwrap();
        capacity_chart(
            &[series("one point", 3.0, &[2.0])],
            "one point",
            "",
            &dir.path().join("one.png"),
        )
        .unwrap();
    }
}
