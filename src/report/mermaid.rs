//! The gate's charts as Mermaid `xychart-beta` blocks: GitHub draws them itself in pull-request
//! comments and job summaries, where a PNG on the runner's disk would be a broken image.
//!
//! xychart-beta has no legend, so each title says which mark is which; the colours follow the
//! PNGs (base or baseline orange, head blue).

use std::fmt::Write;

use crate::gate::{LevelVerdict, Verdict};

/// Base (or baseline) orange, head blue: the colours of `throughput.png`.
const TOKS_PALETTE: &str = "#e67300, #1f77b4";
/// Ratio grey, its lower bound red-brown, the minimum-effect line red.
const RATIO_PALETTE: &str = "#7f7f7f, #8c564b, #d62728";

/// Throughput levels with both means: the ones a chart can show.
fn measured(verdict: &Verdict) -> Vec<&LevelVerdict> {
    verdict
        .levels
        .iter()
        .filter(|l| l.metric.is_throughput())
        .filter(|l| {
            [l.baseline_mean, l.candidate_mean]
                .iter()
                .all(|v| v.is_some_and(|x| x.is_finite() && x >= 0.0))
        })
        .collect()
}

fn header(out: &mut String, palette: &str, title: &str, levels: &[&LevelVerdict]) {
    let _ = writeln!(out, "```mermaid");
    let _ = writeln!(
        out,
        "%%{{init: {{\"themeVariables\": {{\"xyChart\": {{\"plotColorPalette\": \"{palette}\"}}}}}}}}%%"
    );
    let _ = writeln!(out, "xychart-beta");
    let _ = writeln!(out, "    title \"{}\"", title.replace('"', "'"));
    let names: Vec<String> = levels
        .iter()
        .map(|l| format!("\"{}\"", l.concurrency))
        .collect();
    let _ = writeln!(out, "    x-axis \"concurrency\" [{}]", names.join(", "));
}

fn series(values: impl Iterator<Item = f64>, digits: usize) -> String {
    let v: Vec<String> = values.map(|x| format!("{x:.digits$}")).collect();
    format!("[{}]", v.join(", "))
}

/// Base or baseline (bars) against head (line), output tok/s per level, the y-axis from zero so
/// that heights read as ratios. `None` when no level has both means.
pub fn throughput_block(verdict: &Verdict) -> Option<String> {
    let levels = measured(verdict);
    if levels.is_empty() {
        return None;
    }
    let base = || levels.iter().map(|l| l.baseline_mean.unwrap_or(0.0));
    let cand = || levels.iter().map(|l| l.candidate_mean.unwrap_or(0.0));
    let top = base().chain(cand()).fold(0.0f64, f64::max);
    let (reference, head) = super::tables::sides(verdict);
    let mut out = String::new();
    header(
        &mut out,
        TOKS_PALETTE,
        &format!("Output tok/s per level: {reference} (orange bars) vs {head} (blue line)"),
        &levels,
    );
    let _ = writeln!(
        out,
        "    y-axis \"output tok/s\" 0 --> {}",
        nice_top(top * 1.1)
    );
    let _ = writeln!(out, "    bar {}", series(base(), 1));
    let _ = writeln!(out, "    line {}", series(cand(), 1));
    let _ = writeln!(out, "```");
    Some(out)
}

/// Head / base (or baseline) per level (grey bars), the lower bound at the pass confidence (brown
/// line) and the pass limit 1 - tolerance (red, flat): a level passes when its brown point
/// lies above the red line (and it did not fail). `None` when no level has a ratio with
/// bounds that say something (report/tables.rs `known_bounds`: one session's [0, ∞] does not).
pub fn ratio_block(verdict: &Verdict) -> Option<String> {
    let levels: Vec<&LevelVerdict> = measured(verdict)
        .into_iter()
        .filter(|l| l.ratio.is_some_and(f64::is_finite) && super::tables::known_bounds(l).is_some())
        .collect();
    if levels.is_empty() {
        return None;
    }
    let floor = 1.0 - verdict.settings.tolerance;
    let ratio = || levels.iter().map(|l| l.ratio.unwrap_or(1.0));
    let low = || levels.iter().map(|l| l.ci_low.unwrap_or(1.0));
    let lo = ratio()
        .chain(low())
        .chain([floor])
        .fold(f64::INFINITY, f64::min);
    let hi = ratio().chain([1.0]).fold(f64::NEG_INFINITY, f64::max);
    let (reference, head) = super::tables::sides(verdict);
    let mut out = String::new();
    header(
        &mut out,
        RATIO_PALETTE,
        &format!(
            "{} / {reference} (grey bars), {:.0}% lower bound (brown), {floor:.2} pass limit \
             (red): a level passes when brown is above red",
            capitalised(head),
            verdict.settings.pass_confidence * 100.0
        ),
        &levels,
    );
    let _ = writeln!(
        out,
        "    y-axis \"{head} / {reference}\" {:.2} --> {:.2}",
        ((lo - 0.02) * 50.0).floor() / 50.0,
        ((hi + 0.02) * 50.0).ceil() / 50.0
    );
    let _ = writeln!(out, "    bar {}", series(ratio(), 3));
    let _ = writeln!(out, "    line {}", series(low(), 3));
    let _ = writeln!(out, "    line {}", series(levels.iter().map(|_| floor), 3));
    let _ = writeln!(out, "```");
    Some(out)
}

/// A round axis top: 1, 2, 2.5, 5 or 7.5 times a power of ten, at least `v`.
fn nice_top(v: f64) -> String {
    if !crate::stats::is_positive(v) {
        return "1".into();
    }
    let p = 10f64.powf(v.log10().floor());
    let top = [1.0, 2.0, 2.5, 5.0, 7.5, 10.0]
        .iter()
        .map(|m| m * p)
        .find(|t| *t >= v)
        .unwrap_or(10.0 * p);
    format!("{}", top.round().max(1.0))
}

/// "Head" for a chart title.
fn capitalised(word: &str) -> String {
    let mut c = word.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::plots::ratio_tests::mixed;

    /// Golden: the Mermaid blocks as GitHub receives them. A change of format fails here.
    #[test]
    fn blocks_are_golden() {
        let v = mixed();
        assert_eq!(
            throughput_block(&v).unwrap(),
            r##"```mermaid
%%{init: {"themeVariables": {"xyChart": {"plotColorPalette": "#e67300, #1f77b4"}}}}%%
xychart-beta
    title "Output tok/s per level: base (orange bars) vs head (blue line)"
    x-axis "concurrency" ["1", "4", "8", "32", "64"]
    y-axis "output tok/s" 0 --> 75000
    bar [1000.0, 4000.0, 8000.0, 32000.0, 64000.0]
    line [910.0, 3648.0, 8016.0, 31520.0, 64640.0]
```
"##
        );
        assert_eq!(
            ratio_block(&v).unwrap(),
            r##"```mermaid
%%{init: {"themeVariables": {"xyChart": {"plotColorPalette": "#7f7f7f, #8c564b, #d62728"}}}}%%
xychart-beta
    title "Head / base (grey bars), 95% lower bound (brown), 0.95 pass limit (red): a level passes when brown is above red"
    x-axis "concurrency" ["1", "4", "8", "32", "64"]
    y-axis "head / base" 0.86 --> 1.04
    bar [0.910, 0.912, 1.002, 0.985, 1.010]
    line [0.890, 0.895, 0.985, 0.950, 0.990]
    line [0.950, 0.950, 0.950, 0.950, 0.950]
```
"##
        );
    }

    #[test]
    fn nothing_to_draw_gives_no_block() {
        let mut v = mixed();
        for l in &mut v.levels {
            l.candidate_mean = None;
        }
        assert!(throughput_block(&v).is_none() && ratio_block(&v).is_none());
        assert_eq!(nice_top(7150.0), "7500");
        assert_eq!(nice_top(1900.0), "2000");
        assert_eq!(nice_top(f64::NAN), "1");
    }

    #[test]
    fn bounds_that_say_nothing_are_not_drawn() {
        let mut v = mixed();
        v.levels[0].ci_low = Some(0.0);
        v.levels[0].ci_high = None;
        let block = ratio_block(&v).unwrap();
        assert!(!block.contains("0.000"), "{block}");
        assert!(block.contains("0.912"), "{block}");
        for l in &mut v.levels {
            (l.ci_low, l.ci_high) = (Some(0.0), None);
        }
        assert!(ratio_block(&v).is_none());
    }
}
