//! The look shared by every chart: the embedded font, colours, text sizes, and the frame
//! (title, legend strip, notes, footer) that each chart's plotting area sits in.

use std::sync::OnceLock;

use anyhow::{anyhow, Result};
use plotters::chart::MeshStyle;
use plotters::coord::ranged1d::{AsRangedCoord, Ranged};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use plotters::style::{register_font, FontStyle};

/// DejaVu Sans (Bitstream Vera license, see `assets/fonts/LICENSE-DejaVu.txt`), embedded so
/// that text renders on a machine with no system fonts at all.
static FONT: &[u8] = include_bytes!("../../../assets/fonts/DejaVuSans.ttf");

/// The family name every text style uses; the embedded font is registered under it.
pub(crate) const FAMILY: &str = "sans-serif";

pub(crate) const TITLE_SIZE: f64 = 26.0;
pub(crate) const AXIS_DESC_SIZE: f64 = 18.0;
pub(crate) const TICK_SIZE: f64 = 15.0;
pub(crate) const LEGEND_SIZE: f64 = 15.0;
pub(crate) const NOTE_SIZE: f64 = 15.0;
pub(crate) const FOOTER_SIZE: f64 = 14.0;
pub(crate) const PANEL_TITLE_SIZE: f64 = 18.0;

pub(crate) const INK: RGBColor = RGBColor(30, 30, 30);
pub(crate) const MUTED: RGBColor = RGBColor(100, 100, 100);
pub(crate) const NOTE_INK: RGBColor = RGBColor(170, 30, 30);
pub(crate) const GRID_BOLD: RGBColor = RGBColor(215, 215, 215);
pub(crate) const GRID_LIGHT: RGBColor = RGBColor(238, 238, 238);

/// The candidate run.
pub(crate) const BLUE: RGBColor = RGBColor(31, 119, 180);
/// The baseline.
pub(crate) const ORANGE: RGBColor = RGBColor(230, 115, 0);
/// A fitted model.
pub(crate) const GREEN: RGBColor = RGBColor(44, 150, 44);
pub(crate) const RED: RGBColor = RGBColor(214, 39, 40);

/// Colours for one line per series (node types on the capacity chart), in order; beyond
/// these, [`series_color`] makes new ones, so that no colour repeats within a chart.
pub(crate) const PALETTE: [RGBColor; 10] = [
    BLUE,
    ORANGE,
    GREEN,
    RED,
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// The colour of the `i`-th series: the palette, then hues a golden angle apart at three
/// lightnesses, each kept only when it is unlike every colour before it (so none repeats).
pub(crate) fn series_color(i: usize) -> RGBColor {
    if let Some(c) = PALETTE.get(i) {
        return *c;
    }
    let mut colours: Vec<RGBColor> = PALETTE.to_vec();
    let (mut k, mut tries, mut apart) = (0usize, 0usize, MIN_COLOUR_DISTANCE);
    while colours.len() <= i {
        let hue = (k as f64 * 137.507_764 + 15.0) % 360.0;
        let (s, v) = [(0.85, 0.55), (0.45, 0.8), (0.9, 0.85)][k % 3];
        let c = hsv(hue, s, v);
        k += 1;
        tries += 1;
        if colours.iter().all(|d| distance(c, *d) >= apart) {
            colours.push(c);
            tries = 0;
        } else if tries > 400 {
            // The space is full at this distance: ask for less (a chart with hundreds of
            // series still draws, with colours as unlike as can be).
            apart = (apart - 10).max(0);
            tries = 0;
        }
    }
    colours[i]
}

/// How unlike two series colours must be: summed over R, G and B.
const MIN_COLOUR_DISTANCE: i32 = 100;

fn distance(a: RGBColor, b: RGBColor) -> i32 {
    (a.0 as i32 - b.0 as i32).abs()
        + (a.1 as i32 - b.1 as i32).abs()
        + (a.2 as i32 - b.2 as i32).abs()
}

fn hsv(h: f64, s: f64, v: f64) -> RGBColor {
    let c = v * s;
    let x = c * (1.0 - ((h / 60.0) % 2.0 - 1.0).abs());
    let m = v - c;
    let (r, g, b) = match (h / 60.0) as u32 {
        0 => (c, x, 0.0),
        1 => (x, c, 0.0),
        2 => (0.0, c, x),
        3 => (0.0, x, c),
        4 => (x, 0.0, c),
        _ => (c, 0.0, x),
    };
    let byte = |u: f64| ((u + m) * 255.0).round().clamp(0.0, 255.0) as u8;
    RGBColor(byte(r), byte(g), byte(b))
}

/// Registers the embedded font with plotters once per process.
pub(crate) fn ensure_font() -> Result<()> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let ok = *REGISTERED.get_or_init(|| register_font(FAMILY, FontStyle::Normal, FONT).is_ok());
    if ok {
        Ok(())
    } else {
        Err(anyhow!("the embedded font could not be loaded"))
    }
}

pub(crate) fn text(size: f64, color: &'static RGBColor) -> TextStyle<'static> {
    TextStyle::from((FAMILY, size).into_font()).color(color)
}

/// The house look of a chart's axes, the same on every chart: tick labels, axis captions
/// and the grid (bold at the labelled ticks, `light_lines` light lines between them).
pub(crate) fn mesh<'m, 'a, 'b, X, Y, DB>(
    mesh: &'m mut MeshStyle<'a, 'b, X, Y, DB>,
    light_lines: usize,
) -> &'m mut MeshStyle<'a, 'b, X, Y, DB>
where
    X: Ranged<ValueType: std::fmt::Debug>,
    Y: Ranged<ValueType: std::fmt::Debug>,
    DB: DrawingBackend,
{
    mesh.label_style(text(TICK_SIZE, &INK))
        .axis_desc_style(text(AXIS_DESC_SIZE, &INK))
        .bold_line_style(GRID_BOLD)
        .light_line_style(GRID_LIGHT)
        .max_light_lines(light_lines)
}

/// The caption above one panel of a two-panel chart.
pub(crate) fn panel_caption() -> TextStyle<'static> {
    text(PANEL_TITLE_SIZE, &INK)
}

/// How a legend entry is drawn.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Mark {
    /// A small translucent dot: one trial.
    Dot,
    /// A marker on a line with an interval bar: a mean and its confidence interval.
    MeanBar,
    /// A marker on a solid line.
    MarkerLine,
    /// A solid line.
    Line,
    /// A dashed line.
    Dashed,
    /// A translucent band.
    Band,
    /// A crossed-out line: something the chart would draw and does not (a refused fit).
    Crossed,
}

#[derive(Debug, Clone)]
pub(crate) struct LegendEntry {
    pub label: String,
    pub mark: Mark,
    pub color: RGBColor,
}

impl LegendEntry {
    pub fn new(label: impl Into<String>, mark: Mark, color: RGBColor) -> LegendEntry {
        LegendEntry {
            label: label.into(),
            mark,
            color,
        }
    }
}

/// Everything around a chart's plotting area.
pub(crate) struct Frame<'a> {
    pub title: &'a str,
    pub legend: &'a [LegendEntry],
    /// Remarks about the data ("level C=64: no successful request"), at most a few lines.
    pub notes: &'a [String],
    pub footer_left: &'a str,
    pub footer_right: &'a str,
}

/// The most note lines drawn; the rest are summarised in the last line.
pub(crate) const MAX_NOTE_LINES: usize = 3;

const SIDE: i32 = 24;
const LEGEND_ROW: i32 = 24;
const NOTE_ROW: i32 = 20;
const MARK_W: i32 = 30;

type Area<'b> = DrawingArea<BitMapBackend<'b>, Shift>;

/// A chart's plotting area on a bitmap, x and y as given.
pub(crate) type Panel<'a, 'b, X, Y> = ChartContext<
    'a,
    BitMapBackend<'b>,
    Cartesian2d<<X as AsRangedCoord>::CoordDescType, <Y as AsRangedCoord>::CoordDescType>,
>;

/// A one-panel chart's plotting area inside its frame: the margins and label room the
/// scaling and ratio charts share, so their axes line up in a report.
pub(crate) fn one_panel<'a, 'b, X: AsRangedCoord, Y: AsRangedCoord>(
    area: &'a Area<'b>,
    x: X,
    y: Y,
) -> Result<Panel<'a, 'b, X, Y>> {
    Ok(ChartBuilder::on(area)
        .margin_left(24)
        .margin_right(40)
        .margin_top(6)
        .margin_bottom(6)
        .x_label_area_size(56)
        .y_label_area_size(90)
        .build_cartesian_2d(x, y)?)
}

/// Draws the title, legend, notes and footer on `root`; returns the area left for the chart.
pub(crate) fn draw_frame<'b>(root: &Area<'b>, frame: &Frame<'_>) -> Result<Area<'b>> {
    let (w, h) = root.dim_in_pixel();
    let (w, h) = (w as i32, h as i32);
    // Title, centred.
    let title_style = text(TITLE_SIZE, &INK);
    root.draw(&Text::new(
        fit_text(root, frame.title, &title_style, w - 2 * SIDE)?,
        (w / 2, 14),
        title_style.pos(Pos::new(HPos::Center, VPos::Top)),
    ))?;
    let mut y = 14 + TITLE_SIZE as i32 + 14;

    // Legend strip: entries left to right, wrapping to a new row when the width runs out.
    if !frame.legend.is_empty() {
        let style = text(LEGEND_SIZE, &INK);
        let mut x = SIDE + 40;
        let mut row_y = y;
        for entry in frame.legend {
            let label = fit_text(root, &entry.label, &style, w - 2 * SIDE - 40 - MARK_W - 6)?;
            let (tw, _) = root.estimate_text_size(&label, &style)?;
            let need = MARK_W + 6 + tw as i32;
            if x + need > w - SIDE && x > SIDE + 40 {
                x = SIDE + 40;
                row_y += LEGEND_ROW;
            }
            draw_mark(root, entry, (x, row_y + LEGEND_ROW / 2))?;
            root.draw(&Text::new(
                label,
                (x + MARK_W + 6, row_y + LEGEND_ROW / 2),
                style.pos(Pos::new(HPos::Left, VPos::Center)),
            ))?;
            x += need + 26;
        }
        y = row_y + LEGEND_ROW + 6;
    }

    // Notes, in red, so that a missing level is not mistaken for a gap in the measurements.
    let note_style = text(NOTE_SIZE, &NOTE_INK);
    for note in frame.notes.iter().take(MAX_NOTE_LINES) {
        root.draw(&Text::new(
            fit_text(root, note, &note_style, w - 2 * SIDE - 40)?,
            (SIDE + 40, y + NOTE_ROW / 2),
            note_style.pos(Pos::new(HPos::Left, VPos::Center)),
        ))?;
        y += NOTE_ROW;
    }
    if !frame.notes.is_empty() {
        y += 4;
    }

    // Footer: what was measured and when, from the result itself (never the clock).
    let footer_h = 30;
    let fy = h - footer_h / 2;
    let footer_style = text(FOOTER_SIZE, &MUTED);
    let (right_w, _) = root.estimate_text_size(frame.footer_right, &footer_style)?;
    root.draw(&Text::new(
        fit_text(
            root,
            frame.footer_left,
            &footer_style,
            w - 2 * SIDE - right_w as i32 - 30,
        )?,
        (SIDE, fy),
        footer_style.pos(Pos::new(HPos::Left, VPos::Center)),
    ))?;
    root.draw(&Text::new(
        frame.footer_right.to_string(),
        (w - SIDE, fy),
        text(FOOTER_SIZE, &MUTED).pos(Pos::new(HPos::Right, VPos::Center)),
    ))?;

    let (_, rest) = root.split_vertically(y);
    let chart_h = (h - y - footer_h).max(50);
    let (chart, _) = rest.split_vertically(chart_h);
    Ok(chart)
}

/// `text` shortened with an ellipsis until it is at most `max_w` pixels wide.
fn fit_text(root: &Area<'_>, text: &str, style: &TextStyle<'_>, max_w: i32) -> Result<String> {
    let width = |s: &str| -> Result<i32> { Ok(root.estimate_text_size(s, style)?.0 as i32) };
    if width(text)? <= max_w {
        return Ok(text.to_string());
    }
    // No line of a 1200-pixel chart holds more than a few hundred characters.
    let mut chars: Vec<char> = text.chars().take(300).collect();
    while !chars.is_empty() {
        let keep = chars.len() - 1;
        chars.truncate(keep);
        let candidate: String = chars.iter().collect::<String>() + "…";
        if width(&candidate)? <= max_w {
            return Ok(candidate);
        }
    }
    Ok(String::new())
}

fn draw_mark(root: &Area<'_>, entry: &LegendEntry, (x, y): (i32, i32)) -> Result<()> {
    let c = entry.color;
    let mid = x + MARK_W / 2;
    match entry.mark {
        Mark::Dot => {
            root.draw(&Circle::new((mid, y), 3, c.mix(0.5).filled()))?;
        }
        Mark::MeanBar => {
            root.draw(&PathElement::new(
                vec![(x, y), (x + MARK_W, y)],
                c.stroke_width(2),
            ))?;
            root.draw(&PathElement::new(
                vec![(mid, y - 8), (mid, y + 8)],
                c.stroke_width(2),
            ))?;
            root.draw(&PathElement::new(
                vec![(mid - 4, y - 8), (mid + 4, y - 8)],
                c.stroke_width(2),
            ))?;
            root.draw(&PathElement::new(
                vec![(mid - 4, y + 8), (mid + 4, y + 8)],
                c.stroke_width(2),
            ))?;
            root.draw(&Circle::new((mid, y), 4, c.filled()))?;
        }
        Mark::MarkerLine => {
            root.draw(&PathElement::new(
                vec![(x, y), (x + MARK_W, y)],
                c.stroke_width(2),
            ))?;
            root.draw(&Circle::new((mid, y), 4, c.filled()))?;
        }
        Mark::Line => {
            root.draw(&PathElement::new(
                vec![(x, y), (x + MARK_W, y)],
                c.stroke_width(3),
            ))?;
        }
        Mark::Dashed => {
            for s in [0, 12, 24] {
                root.draw(&PathElement::new(
                    vec![(x + s, y), (x + (s + 7).min(MARK_W), y)],
                    c.stroke_width(2),
                ))?;
            }
        }
        Mark::Crossed => {
            root.draw(&PathElement::new(
                vec![(x, y), (x + MARK_W, y)],
                c.mix(0.5).stroke_width(2),
            ))?;
            for dy in [-6, 6] {
                root.draw(&PathElement::new(
                    vec![(mid - 6, y - dy), (mid + 6, y + dy)],
                    c.stroke_width(2),
                ))?;
            }
        }
        Mark::Band => {
            root.draw(&Rectangle::new(
                [(x, y - 7), (x + MARK_W, y + 7)],
                c.mix(0.2).filled(),
            ))?;
            root.draw(&PathElement::new(
                vec![(x, y), (x + MARK_W, y)],
                c.stroke_width(2),
            ))?;
        }
    }
    Ok(())
}

/// Text for the notes band: the first lines as they are, the rest counted.
pub(crate) fn fold_notes(notes: Vec<String>) -> Vec<String> {
    if notes.len() <= MAX_NOTE_LINES {
        return notes;
    }
    let mut out: Vec<String> = notes[..MAX_NOTE_LINES - 1].to_vec();
    out.push(format!(
        "... and {} more (see report.md)",
        notes.len() - (MAX_NOTE_LINES - 1)
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 20: ten node types gave two blues and two oranges. No two of the first 32
    /// series colours are alike (at least 60 apart, summed over R, G and B).
    #[test]
    fn series_colours_never_repeat() {
        let colours: Vec<RGBColor> = (0..32).map(series_color).collect();
        for (i, a) in colours.iter().enumerate() {
            for (j, b) in colours.iter().enumerate().skip(i + 1) {
                let d = distance(*a, *b);
                assert!(d >= 60, "series {i} {a:?} and {j} {b:?} are {d} apart");
            }
        }
    }
}
