//! Speed against concurrency (or the request rate of an open-loop run): aggregate output tok/s
//! (`throughput.png`, with the baseline and the planner's scaling curve, or why it has none)
//! and per-request
//! tok/s (`per_request.png`, with a relative run's base arm beside it).
//!
//! Each trial is a small dot; each level's mean is a marker with its 95% t-interval across
//! trials; the means are joined by a line. The x-axis is log2 concurrency, the y-axis starts
//! at zero so that the eye reads ratios correctly.

use std::path::Path;

use anyhow::Result;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

use super::axis::{fmt_num, linear_top, LogAxis};
use super::style::{self, LegendEntry, Mark, BLUE, GREEN, ORANGE};
use super::{render_png, samples, Footer, LevelSamples, Levels, Root};
use crate::record::analysis::{Scaling, ScalingCurve};
use crate::record::RunResult;
use crate::report::numbers::{level_interval, LevelInterval};
use crate::stats::is_positive;

/// Above this many levels, markers shrink and interval caps are left out.
const DENSE_LEVELS: usize = 48;

/// How far apart (a factor on the log2 axis) a baseline and a run at the same level are drawn.
const DODGE: f64 = 1.04;

/// A fitted curve is not allowed to stretch the y-axis beyond this multiple of the data.
const FIT_HEADROOM: f64 = 1.5;

/// One set of trials on a chart (the candidate run or the baseline).
struct Sweep<'a> {
    label: &'a str,
    color: RGBColor,
    levels: Vec<LevelSamples>,
    /// Drawn at concurrency x this factor, so that a baseline and a run at the same level sit
    /// side by side instead of on top of each other.
    dodge: f64,
}

struct ScalingChart<'a> {
    kind: Levels,
    title: String,
    y_desc: &'a str,
    runs: Vec<Sweep<'a>>,
    fit: Fit,
    notes: Vec<String>,
    footer: &'a Footer,
}

/// The scaling curve on a chart: drawn, named as refused in the legend, or absent.
enum Fit {
    None,
    Curve(ScalingCurve),
    /// Why the planner uses no curve, for the legend.
    Refused(String),
}

impl Fit {
    /// What the chart shows of the planner's fit (`record::analysis`).
    fn of(scaling: &Scaling) -> Fit {
        match scaling {
            Scaling::NotFitted => Fit::None,
            Scaling::Fitted(c) => Fit::Curve(*c),
            Scaling::Refused { r_squared } => Fit::Refused(format!(
                "no scaling curve: the USL fit has R^2 {r_squared:.2}, below the {} the plan \
                 needs (it plans from the measured levels)",
                crate::record::analysis::MIN_R_SQUARED
            )),
            Scaling::Failed { error } => Fit::Refused(format!(
                "no scaling curve: the USL fit failed ({})",
                crate::untrusted::for_terminal(error)
            )),
        }
    }
}

pub(crate) fn throughput_chart(
    result: &RunResult,
    baseline: Option<&[(u32, Vec<f64>)]>,
    scaling: &Scaling,
    footer: &Footer,
    path: &Path,
) -> Result<()> {
    let kind = Levels::of(result);
    let (levels, mut notes) = samples(
        &result.levels,
        kind,
        |t| Some(t.output_tok_per_s),
        "throughput",
    );
    notes.extend(single_trial_note(kind, &levels));
    // A scaling law is about concurrency; an open-loop run's levels are rates.
    let fit = if kind == Levels::Concurrency {
        Fit::of(scaling)
    } else {
        Fit::None
    };
    let base_levels = baseline.map(baseline_levels);
    if (base_levels.iter()).any(|levels| levels.iter().all(|l| l.values.is_empty())) {
        notes.push("baseline given, but it has no usable trials".to_string());
    }
    let runs = beside_the_base(result, base_levels, levels);
    let chart = ScalingChart {
        kind,
        title: format!(
            "Output throughput vs {}: {}",
            kind.noun(),
            result.profile_name
        ),
        y_desc: "output tokens/s, all requests together",
        runs,
        fit,
        notes,
        footer,
    };
    render_png(path, |root| draw_scaling(root, &chart))
}

/// The sweeps of a chart: the baseline's levels (a relative run's base arm, or the baseline
/// given beside the run), if any, then the run's, dodged apart at each level unless there is
/// no baseline or the levels are too dense to dodge.
fn beside_the_base<'a>(
    result: &RunResult,
    base: Option<Vec<LevelSamples>>,
    levels: Vec<LevelSamples>,
) -> Vec<Sweep<'a>> {
    let relative = result.base.is_some();
    let dodge = if base.is_none() || levels.len() > DENSE_LEVELS {
        1.0
    } else {
        DODGE
    };
    let mut runs = Vec::new();
    if let Some(levels) = base {
        runs.push(Sweep {
            label: if relative { "base" } else { "baseline" },
            color: ORANGE,
            levels,
            dodge: 1.0 / dodge,
        });
    }
    runs.push(Sweep {
        label: if relative { "head" } else { "this run" },
        color: BLUE,
        levels,
        dodge,
    });
    runs
}

/// A baseline's (concurrency, values) pairs as chart levels (usable values only).
fn baseline_levels(pairs: &[(u32, Vec<f64>)]) -> Vec<LevelSamples> {
    pairs
        .iter()
        .filter(|(c, _)| *c > 0)
        .map(|(c, v)| LevelSamples {
            x: f64::from(*c),
            values: v.iter().copied().filter(|x| is_positive(*x)).collect(),
        })
        .collect()
}

/// `baseline_given`: a baseline was drawn on the throughput chart; `baseline` holds its
/// per-request speeds where known (a relative run's base arm has them in the run itself). A
/// baseline without them is said on the chart rather than left out quietly.
pub(crate) fn per_request_chart(
    result: &RunResult,
    baseline_given: bool,
    baseline: Option<&[(u32, Vec<f64>)]>,
    footer: &Footer,
    path: &Path,
) -> Result<()> {
    let kind = Levels::of(result);
    let (levels, mut notes) = samples(
        &result.levels,
        kind,
        |t| t.per_request_tok_per_s,
        "per-request speed",
    );
    notes.extend(single_trial_note(kind, &levels));
    // The baseline of this chart: a relative run's base arm (measured in the same job), else
    // the per-request speeds given beside the run.
    let base_levels = if let Some(base) = &result.base {
        let (base_levels, _) = samples(
            &base.levels,
            kind,
            |t| t.per_request_tok_per_s,
            "per-request speed",
        );
        if base_levels.iter().all(|l| l.values.is_empty()) {
            notes.push("baseline given, but it has no usable per-request speeds".to_string());
        }
        Some(base_levels)
    } else if let Some(pairs) = baseline.filter(|p| p.iter().any(|(_, v)| !v.is_empty())) {
        Some(baseline_levels(pairs))
    } else {
        if baseline_given {
            notes.push(
                "the baseline's per-request speeds are not drawn here: it does not hold them \
                 (its throughput is on throughput.png)"
                    .to_string(),
            );
        }
        None
    };
    let runs = beside_the_base(result, base_levels, levels);
    let chart = ScalingChart {
        kind,
        title: format!(
            "Per-request speed vs {} (what one user sees): {}",
            kind.noun(),
            result.profile_name
        ),
        y_desc: "output tokens/s per request (mean over requests)",
        runs,
        fit: Fit::None,
        notes,
        footer,
    };
    render_png(path, |root| draw_scaling(root, &chart))
}

/// Levels with a single trial get a mean but no interval: say so rather than imply certainty.
fn single_trial_note(kind: Levels, levels: &[LevelSamples]) -> Option<String> {
    let single: Vec<f64> = levels
        .iter()
        .filter(|l| l.values.len() == 1)
        .map(|l| l.x)
        .collect();
    (!single.is_empty()).then(|| {
        format!(
            "{}: one trial only, so no interval (it needs two or more)",
            super::level_list(kind, &single)
        )
    })
}

/// Where a series' marks go on the chart: each level's x (dodged) with its mean and interval.
type Summary = Vec<(f64, Option<LevelInterval>)>;

fn draw_scaling(root: &Root<'_>, chart: &ScalingChart<'_>) -> Result<()> {
    let n_levels = chart.runs.iter().map(|r| r.levels.len()).max().unwrap_or(0);
    let dense = n_levels > DENSE_LEVELS;
    let x = LogAxis::around(
        chart.runs.iter().flat_map(|r| r.levels.iter().map(|l| l.x)),
        1.35,
        chart.kind.ticks(),
    );

    // Summaries first: the y-range must hold the trials and the intervals.
    let summaries = level_summaries(chart);
    let (fit_points, y_top) = fit_points_and_y_top(chart, &x, &summaries);
    let legend = legend_entries(chart, dense);
    let fitted_range = fitted_range(chart);
    let notes = style::fold_notes(chart.notes.clone());
    let area = style::draw_frame(
        root,
        &style::Frame {
            title: &chart.title,
            legend: &legend,
            notes: &notes,
            footer_left: &chart.footer.left,
            footer_right: &chart.footer.right,
        },
    )?;

    let mut cc = style::one_panel(&area, x.clone(), 0f64..y_top)?;
    style::mesh(&mut cc.configure_mesh(), 2)
        .x_desc(chart.kind.axis_caption())
        .y_desc(chart.y_desc)
        .x_labels(12)
        .y_labels(8)
        .x_label_formatter(&|v| fmt_num(*v))
        .y_label_formatter(&|v| fmt_num(*v))
        .draw()?;

    for (solid, piece) in fit_pieces(fit_points, fitted_range, &x, y_top) {
        if solid {
            cc.draw_series(LineSeries::new(piece, GREEN.stroke_width(2)))?;
        } else {
            cc.draw_series(DashedLineSeries::new(piece, 8, 6, GREEN.stroke_width(2)))?;
        }
    }
    for (run, summary) in chart.runs.iter().zip(&summaries) {
        draw_sweep(&mut cc, run, summary, dense, y_top)?;
    }

    Ok(())
}

/// Each series' levels at their dodged x, with the mean and 95% interval across trials.
fn level_summaries(chart: &ScalingChart<'_>) -> Vec<Summary> {
    chart
        .runs
        .iter()
        .map(|r| {
            r.levels
                .iter()
                .map(|l| (l.x * r.dodge, level_interval(&l.values)))
                .collect()
        })
        .collect()
}

/// The fitted curve's points over the x-axis, and the y-axis top that holds the trials, the
/// intervals and the curve, where neither may stretch it past [`FIT_HEADROOM`] x the data.
fn fit_points_and_y_top(
    chart: &ScalingChart<'_>,
    x: &LogAxis,
    summaries: &[Summary],
) -> (Vec<(f64, f64)>, f64) {
    let data_max = chart
        .runs
        .iter()
        .flat_map(|r| r.levels.iter().flat_map(|l| l.values.iter().copied()))
        .fold(0.0f64, f64::max);
    let cap = if data_max > 0.0 {
        data_max * FIT_HEADROOM
    } else {
        f64::INFINITY
    };
    let fit_points: Vec<(f64, f64)> = match &chart.fit {
        Fit::Curve(f) => (x.sample(240).into_iter())
            .map(|c| (c, f.aggregate(c)))
            .collect(),
        _ => vec![],
    };
    let y_top = linear_top(
        summaries
            .iter()
            .flatten()
            .filter_map(|(_, m)| m.and_then(|m| m.ci).map(|(_, hi)| hi.min(cap)))
            .chain(std::iter::once(data_max))
            .chain(fit_points.iter().map(|(_, y)| y.min(cap))),
    );
    (fit_points, y_top)
}

/// The legend: each series' trials and means, then the planner's curve or why it has none.
fn legend_entries(chart: &ScalingChart<'_>, dense: bool) -> Vec<LegendEntry> {
    let mut legend = Vec::new();
    for run in &chart.runs {
        legend.push(LegendEntry::new(
            format!("{}: one trial", run.label),
            Mark::Dot,
            run.color,
        ));
        legend.push(LegendEntry::new(
            format!("{}: mean, 95% t-interval across trials", run.label),
            if dense { Mark::Band } else { Mark::MeanBar },
            run.color,
        ));
    }
    match &chart.fit {
        Fit::Curve(c) => {
            let to = chart.runs.last().map_or("this run", |r| r.label);
            let steady = if c.wave_corrected {
                ", steady rates (above part-empty last waves)"
            } else {
                ""
            };
            let replicas = if c.replicas > 1 {
                format!(" per replica (x{})", c.replicas)
            } else {
                String::new()
            };
            legend.push(LegendEntry::new(
                format!(
                    "USL scaling curve the plan uses, fitted{replicas} to {to}'s trials{steady} \
                     (R^2 {:.2})",
                    c.r_squared
                ),
                Mark::Line,
                GREEN,
            ));
            legend.push(LegendEntry::new(
                "the same curve beyond the measured levels (not measured)",
                Mark::Dashed,
                GREEN,
            ));
        }
        Fit::Refused(why) => legend.push(LegendEntry::new(why.clone(), Mark::Crossed, GREEN)),
        Fit::None => {}
    }
    legend
}

/// The fit's own range: the levels of the run it was fitted to (the last series).
fn fitted_range(chart: &ScalingChart<'_>) -> Option<(f64, f64)> {
    chart.runs.last().and_then(|r| {
        let xs: Vec<f64> = r
            .levels
            .iter()
            .filter(|l| !l.values.is_empty())
            .map(|l| l.x)
            .collect();
        let lo = xs.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        (lo <= hi).then_some((lo, hi))
    })
}

/// The fitted curve cut into pieces to draw, each marked solid (over the levels it was fitted
/// to) or dashed (beyond them, where it is a guess), clipped to the plotting area (plotters
/// does not clip).
fn fit_pieces(
    fit_points: Vec<(f64, f64)>,
    fitted_range: Option<(f64, f64)>,
    x: &LogAxis,
    y_top: f64,
) -> Vec<(bool, Vec<(f64, f64)>)> {
    let inside =
        |cx: f64| fitted_range.is_some_and(|(lo, hi)| cx >= lo * 0.999 && cx <= hi * 1.001);
    let mut segment: Vec<(f64, f64)> = Vec::new();
    let mut segment_inside = true;
    let mut pieces: Vec<(bool, Vec<(f64, f64)>)> = Vec::new();
    for (cx, y) in fit_points {
        let drawable = y.is_finite() && (0.0..=y_top).contains(&y) && x.contains(cx);
        if !drawable || inside(cx) != segment_inside {
            if !segment.is_empty() {
                // Join the pieces: the next one starts where this one ended.
                let last = *segment.last().unwrap_or(&(cx, y));
                pieces.push((segment_inside, std::mem::take(&mut segment)));
                if drawable {
                    segment.push(last);
                }
            }
            segment_inside = inside(cx);
        }
        if drawable {
            segment.push((cx, y));
        }
    }
    if !segment.is_empty() {
        pieces.push((segment_inside, segment));
    }
    pieces
}

/// One series: its trials as dots, its intervals (a band when the levels are too many for
/// bars), and its means joined by a line.
fn draw_sweep(
    cc: &mut ChartContext<'_, BitMapBackend<'_>, Cartesian2d<LogAxis, RangedCoordf64>>,
    run: &Sweep<'_>,
    summary: &Summary,
    dense: bool,
    y_top: f64,
) -> Result<()> {
    let clamp = |v: f64| v.clamp(0.0, y_top);
    let (dot_r, mean_r, cap_w, line_w) = if dense { (2, 2, 0, 1) } else { (3, 5, 5, 2) };
    let c = run.color;
    // Trials.
    cc.draw_series(run.levels.iter().flat_map(|l| {
        let cx = l.x * run.dodge;
        l.values
            .iter()
            .map(move |v| Circle::new((cx, *v), dot_r, c.mix(0.45).filled()))
    }))?;
    // Intervals: a band when the levels are too many for bars.
    let bar = c.stroke_width(2);
    if dense {
        let mut upper: Vec<(f64, f64)> = Vec::new();
        let mut lower: Vec<(f64, f64)> = Vec::new();
        for (cx, m) in summary {
            if let Some((lo, hi)) = m.and_then(|m| m.ci) {
                upper.push((*cx, clamp(hi)));
                lower.push((*cx, clamp(lo)));
            }
        }
        upper.sort_by(|a, b| a.0.total_cmp(&b.0));
        lower.sort_by(|a, b| b.0.total_cmp(&a.0));
        upper.extend(lower);
        if upper.len() > 2 {
            cc.draw_series(std::iter::once(Polygon::new(upper, c.mix(0.2).filled())))?;
        }
    }
    for (cx, m) in summary.iter().filter(|_| !dense) {
        let Some((lo, hi)) = m.and_then(|m| m.ci) else {
            continue;
        };
        let (lo, hi) = (clamp(lo), clamp(hi));
        cc.draw_series(std::iter::once(PathElement::new(
            vec![(*cx, lo), (*cx, hi)],
            bar,
        )))?;
        if cap_w > 0 {
            for y in [lo, hi] {
                cc.draw_series(std::iter::once(
                    EmptyElement::at((*cx, y))
                        + PathElement::new(vec![(-cap_w, 0), (cap_w, 0)], bar),
                ))?;
            }
        }
    }
    // Means, joined where consecutive levels both have one.
    let means: Vec<(f64, f64)> = summary
        .iter()
        .filter_map(|(cx, m)| m.map(|m| (*cx, clamp(m.mean))))
        .collect();
    let mut sorted = means.clone();
    sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
    cc.draw_series(LineSeries::new(sorted, c.stroke_width(line_w)))?;
    cc.draw_series(means.iter().map(|p| Circle::new(*p, mean_r, c.filled())))?;
    Ok(())
}
