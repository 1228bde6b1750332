//! PNG charts of a run: throughput and per-request speed against concurrency (or against the
//! request rate, for an open-loop run), latency percentiles, the gate's candidate / baseline
//! ratio per level, and (for the capacity planner) days to finish against node count.
//!
//! Every chart is drawn into memory at [`WIDTH`] x [`HEIGHT`] with the embedded font, then
//! encoded and written atomically. Nothing comes from the clock: the same input gives the same
//! bytes. Degenerate input (a failed level, one level, one trial, a thousand levels, zeros and
//! NaNs) gives a readable chart with a note on it, never a panic.

mod axis;
mod capacity;
mod history;
mod latency;
mod ratio;
mod style;
mod throughput;

use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::fsutil::write_atomic;
use crate::record::analysis::Scaling;
use crate::record::{LevelResult, RunResult, TrialResult};
use crate::stats::is_positive;
use axis::LogTicks;

pub use capacity::{capacity_chart, CapacityPoint, CapacitySeries, UNKNOWN_INTERVAL};
pub use history::trend_chart;
pub use ratio::ratio_chart;
#[cfg(test)]
pub(crate) use ratio::tests as ratio_tests;

/// Width of every chart, in pixels.
pub const WIDTH: u32 = 1200;
/// Height of every chart, in pixels.
pub const HEIGHT: u32 = 750;

pub use crate::record::files::{
    CAPACITY_PNG, LATENCY_PNG, PER_REQUEST_PNG, RATIO_PNG, THROUGHPUT_PNG,
};

/// Writes `throughput.png`, `per_request.png` and `latency.png` into `out_dir` and returns
/// their paths in that order.
///
/// `baseline` holds the baseline's trials as (concurrency, output tok/s of each trial),
/// `per_request_baseline` its trials' per-request tok/s where known; `scaling` is the
/// planner's scaling fit of the run (`record::analysis`), drawn as a smooth line over the
/// concurrency range, or named in the legend as refused. The chart fits nothing itself.
pub fn write_run_plots(
    result: &RunResult,
    baseline: Option<&[(u32, Vec<f64>)]>,
    per_request_baseline: Option<&[(u32, Vec<f64>)]>,
    scaling: &Scaling,
    out_dir: &Path,
) -> Result<Vec<PathBuf>> {
    crate::fsutil::ensure_output_dir(out_dir)?;
    let footer = Footer::of(result);
    let mut paths = Vec::new();

    let path = out_dir.join(THROUGHPUT_PNG);
    throughput::throughput_chart(result, baseline, scaling, &footer, &path)?;
    paths.push(path);

    let path = out_dir.join(PER_REQUEST_PNG);
    throughput::per_request_chart(
        result,
        baseline.is_some(),
        per_request_baseline,
        &footer,
        &path,
    )?;
    paths.push(path);

    let path = out_dir.join(LATENCY_PNG);
    latency::latency_chart(result, &footer, &path)?;
    paths.push(path);

    Ok(paths)
}

/// The corner text of a run's charts: what was measured, where and when.
pub(crate) struct Footer {
    pub left: String,
    pub right: String,
}

impl Footer {
    pub fn of(result: &RunResult) -> Footer {
        let hash: String = result.profile_hash.chars().take(12).collect();
        let mut left = format!("profile {} ({hash})", result.profile_name);
        let env = &result.environment;
        let what: Vec<&str> = [
            env.model.as_deref(),
            env.engine.as_deref(),
            env.gpu_model.as_deref(),
        ]
        .into_iter()
        .flatten()
        .collect();
        if !what.is_empty() {
            left.push_str(" · ");
            left.push_str(&what.join(" · "));
        }
        left.push_str(" · started ");
        left.push_str(&display_date(&result.started_at));
        if !result.complete {
            left.push_str(" · INCOMPLETE run");
        }
        Footer {
            left,
            right: result.tool.clone(),
        }
    }
}

/// "2026-11-29 11:22 UTC" from an RFC 3339 timestamp; the text as it is when it does not parse.
pub(crate) fn display_date(rfc3339: &str) -> String {
    use time::format_description::well_known::Rfc3339;
    match time::OffsetDateTime::parse(rfc3339, &Rfc3339) {
        Ok(t) => {
            let t = t.to_offset(time::UtcOffset::UTC);
            format!(
                "{:04}-{:02}-{:02} {:02}:{:02} UTC",
                t.year(),
                t.month() as u8,
                t.day(),
                t.hour(),
                t.minute()
            )
        }
        Err(_) => rfc3339.to_string(),
    }
}

/// What a run's levels are, and so what the x-axis of its charts shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Levels {
    /// Closed loop: requests in flight.
    Concurrency,
    /// Open loop: requests sent per second.
    Rate,
}

impl Levels {
    pub fn of(result: &RunResult) -> Levels {
        if result.levels.iter().any(|l| l.rate.is_some()) {
            Levels::Rate
        } else {
            Levels::Concurrency
        }
    }

    /// Where a level sits on the x-axis (0 when it has no place there).
    pub fn x(self, level: &LevelResult) -> f64 {
        match self {
            Levels::Concurrency => f64::from(level.concurrency),
            Levels::Rate => level.rate.unwrap_or(0.0),
        }
    }

    /// "concurrency" or "request rate", for titles.
    pub fn noun(self) -> &'static str {
        match self {
            Levels::Concurrency => "concurrency",
            Levels::Rate => "request rate",
        }
    }

    pub fn ticks(self) -> LogTicks {
        match self {
            Levels::Concurrency => LogTicks::Base2,
            Levels::Rate => LogTicks::Decades,
        }
    }

    /// The x-axis caption.
    pub fn axis_caption(self) -> &'static str {
        match self {
            Levels::Concurrency => "concurrency: requests in flight (log2 scale)",
            Levels::Rate => "request rate: requests sent per second (open loop, log scale)",
        }
    }

    /// The x-axis caption of a half-width panel.
    pub fn short_caption(self) -> &'static str {
        match self {
            Levels::Concurrency => "concurrency (log2 scale)",
            Levels::Rate => "request rate, req/s (log scale)",
        }
    }
}

/// One level's values (one per trial that measured something), at its place on the x-axis.
#[derive(Debug, Clone)]
pub(crate) struct LevelSamples {
    pub x: f64,
    pub values: Vec<f64>,
}

/// The values of `metric` for each level, in the order of the levels; only positive finite
/// values of trials with at least one success are kept. Also returns the notes for levels
/// that have none.
pub(crate) fn samples(
    levels: &[LevelResult],
    kind: Levels,
    metric: impl Fn(&TrialResult) -> Option<f64>,
    what: &str,
) -> (Vec<LevelSamples>, Vec<String>) {
    let mut out = Vec::new();
    let mut failed = Vec::new();
    let mut missing = Vec::new();
    for level in levels {
        let values: Vec<f64> = level
            .trials
            .iter()
            .filter(|t| t.measured())
            .filter_map(&metric)
            .filter(|v| is_positive(*v))
            .collect();
        let x = kind.x(level);
        if !is_positive(x) {
            missing.push(x);
            continue;
        }
        if values.is_empty() {
            if level.trials.iter().all(|t| !t.measured()) {
                failed.push(x);
            } else {
                missing.push(x);
            }
        }
        out.push(LevelSamples { x, values });
    }
    let mut notes = Vec::new();
    if levels.is_empty() {
        notes.push("this result has no levels: nothing was measured".to_string());
    }
    if !failed.is_empty() {
        notes.push(format!(
            "{}: no successful request (nothing plotted there)",
            level_list(kind, &failed)
        ));
    }
    if !missing.is_empty() {
        notes.push(format!("{}: no usable {what}", level_list(kind, &missing)));
    }
    (out, notes)
}

/// "level C=64", "levels C=64, 128, 256 and 5 more", or for rates "levels 10, 50 req/s".
pub(crate) fn level_list(kind: Levels, xs: &[f64]) -> String {
    const SHOWN: usize = 8;
    let list: Vec<String> = xs.iter().take(SHOWN).map(|x| format!("{x}")).collect();
    let more = if xs.len() > SHOWN {
        format!(" and {} more", xs.len() - SHOWN)
    } else {
        String::new()
    };
    let s = if xs.len() == 1 { "" } else { "s" };
    match kind {
        Levels::Concurrency => format!("level{s} C={}{more}", list.join(", ")),
        Levels::Rate => format!("level{s} {}{more} req/s", list.join(", ")),
    }
}

pub(crate) type Root<'b> = DrawingArea<BitMapBackend<'b>, Shift>;

/// Draws a chart into memory with `draw` and writes it to `path` as a PNG.
pub(crate) fn render_png(path: &Path, draw: impl FnOnce(&Root<'_>) -> Result<()>) -> Result<()> {
    style::ensure_font()?;
    let (w, h) = (WIDTH as usize, HEIGHT as usize);
    let mut rgb = vec![255u8; w * h * 3];
    {
        let root = BitMapBackend::with_buffer(&mut rgb, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE)?;
        draw(&root).with_context(|| format!("cannot draw {}", path.display()))?;
        root.present()?;
    }
    let png = encode_png(&rgb, WIDTH, HEIGHT)?;
    write_atomic(path, &png)
}

fn encode_png(rgb: &[u8], width: u32, height: u32) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    {
        let mut encoder = png::Encoder::new(&mut out, width, height);
        encoder.set_color(png::ColorType::Rgb);
        encoder.set_depth(png::BitDepth::Eight);
        let mut writer = encoder.write_header()?;
        writer.write_image_data(rgb)?;
        writer.finish()?;
    }
    out.flush()?;
    Ok(out)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::record::{Environment, TrialResult};
    use crate::stats::Percentiles;

    pub(crate) fn pct(p50: f64, p99: f64) -> Percentiles {
        Percentiles {
            p50,
            p90: (p50 + p99) / 2.0,
            p99,
            mean: p50,
            min: p50 / 2.0,
            max: p99,
            count: 10,
            relative_error: None,
        }
    }

    pub(crate) fn trial(n: u32, c: u32, tps: f64, ok: u64) -> TrialResult {
        TrialResult {
            requests_sent: 16,
            succeeded: ok,
            failed: if ok < 16 {
                [(crate::record::ErrorClass::Timeout, 16 - ok)].into()
            } else {
                Default::default()
            },
            output_tokens: 1000,
            window_s: 10.0,
            output_tok_per_s: tps,
            requests_per_s: 1.0,
            error_rate: (16 - ok) as f64 / 16.0,
            per_request_tok_per_s: (ok > 0).then(|| tps / c as f64),
            ttft_ms: (ok > 0).then(|| pct(20.0 + c as f64, 60.0 + 3.0 * c as f64)),
            itl_ms: (ok > 0).then(|| pct(8.0 + c as f64 / 10.0, 20.0 + c as f64 / 4.0)),
            ..TrialResult::new(n)
        }
    }

    pub(crate) fn run(levels: Vec<LevelResult>) -> RunResult {
        let profile = crate::profile::Profile::parse(
            r#"
name = "unit"
[target]
endpoints = ["http://127.0.0.1:1"]
[workload]
max_tokens = 64
[sweep]
concurrency = [1]
"#,
        )
        .unwrap();
        let mut run = RunResult {
            schema_version: crate::record::SCHEMA_VERSION,
            tool: "throughline 0.1.0".into(),
            profile_name: "unit".into(),
            profile_hash: "0123456789abcdef0123".into(),
            profile,
            environment: Environment {
                model: Some("sim-7b".into()),
                engine: Some("throughline-sim".into()),
                ..Default::default()
            },
            started_at: "2026-11-29T11:22:06Z".into(),
            finished_at: "2026-11-29T11:30:00Z".into(),
            complete: true,
            levels,
            warnings: vec![],
            base: None,
            drift: None,
            notes: Vec::new(),
            servers: None,
            analysis: None,
            run_id: None,
        };
        run.analyse();
        run
    }

    /// No scaling curve (the chart's fit is the record's analysis; these tests give it).
    const NONE: Scaling = Scaling::NotFitted;

    /// A scaling curve over one replica, as the analysis would store it.
    fn curve(lambda: f64, sigma: f64, kappa: f64) -> Scaling {
        Scaling::Fitted(crate::record::analysis::ScalingCurve {
            lambda,
            sigma,
            kappa,
            r_squared: 0.99,
            replicas: 1,
            wave_corrected: false,
        })
    }

    pub(crate) fn sweep(cs: &[u32], trials: u32) -> RunResult {
        let levels = cs
            .iter()
            .map(|&c| LevelResult {
                concurrency: c,
                rate: None,
                trials: (1..=trials)
                    .map(|n| {
                        let x = 90.0 * c as f64 / (1.0 + 0.02 * (c as f64 - 1.0));
                        trial(n, c, x * (1.0 + 0.01 * n as f64), 16)
                    })
                    .collect(),
            })
            .collect();
        run(levels)
    }

    #[test]
    fn failed_levels_become_one_note() {
        let mut r = sweep(&[1, 2, 4], 2);
        r.levels[2].trials = vec![trial(1, 4, 0.0, 0), trial(2, 4, 0.0, 0)];
        let kind = Levels::Concurrency;
        let (s, notes) = samples(&r.levels, kind, |t| Some(t.output_tok_per_s), "throughput");
        assert_eq!(s.len(), 3);
        assert!(s[2].values.is_empty());
        assert_eq!(
            notes,
            vec!["level C=4: no successful request (nothing plotted there)"]
        );
        assert_eq!(level_list(kind, &[1.0, 2.0]), "levels C=1, 2");
    }

    /// An open-loop run, uncapped (concurrency 0 on every level): its levels sit at their
    /// rates, no scaling curve is drawn, and the charts are written.
    pub(crate) fn open_loop_run() -> RunResult {
        let mut r = sweep(&[1, 2, 3], 3);
        for (l, rate) in r.levels.iter_mut().zip([5.0, 10.0, 12.5]) {
            l.concurrency = 0;
            l.rate = Some(rate);
        }
        r
    }

    #[test]
    fn open_loop_levels_are_placed_at_their_rates() {
        let r = open_loop_run();
        assert_eq!(Levels::of(&r), Levels::Rate);
        let (s, notes) = samples(&r.levels, Levels::of(&r), |t| Some(t.output_tok_per_s), "x");
        assert_eq!(
            s.iter().map(|l| l.x).collect::<Vec<_>>(),
            vec![5.0, 10.0, 12.5]
        );
        assert!(notes.is_empty(), "{notes:?}");
        assert_eq!(level_list(Levels::Rate, &[12.5]), "level 12.5 req/s");
        let dir = tempfile::tempdir().unwrap();
        let fit = curve(1.0, 0.0, 0.0);
        let paths = write_run_plots(&r, None, None, &fit, dir.path()).unwrap();
        assert_eq!(paths.len(), 3);
        // The same run read as a closed loop would have had no level to draw at all.
        let (closed, notes) = samples(
            &r.levels,
            Levels::Concurrency,
            |t| Some(t.output_tok_per_s),
            "x",
        );
        assert!(closed.is_empty() && !notes.is_empty());
    }

    /// Writes example charts to `$THROUGHLINE_PLOT_EXAMPLES` for a person to look at:
    /// `THROUGHLINE_PLOT_EXAMPLES=/tmp/ex cargo test --lib plots -- --ignored`.
    #[test]
    #[ignore]
    fn write_examples() {
        let Ok(dir) = std::env::var("THROUGHLINE_PLOT_EXAMPLES") else {
            return;
        };
        let dir = Path::new(&dir);
        std::fs::create_dir_all(dir).unwrap();
        ratio_chart(&ratio_tests::mixed(), &dir.join("ratio.png")).unwrap();
        let mut open = ratio_tests::mixed();
        open.levels[2].ci_high = None;
        open.levels[4].ratio = None;
        ratio_chart(&open, &dir.join("ratio_open.png")).unwrap();
        let usl = |c: f64| 90.0 * c / (1.0 + 0.02 * (c - 1.0) + 0.0001 * c * (c - 1.0));
        let base: Vec<(u32, Vec<f64>)> = [1u32, 2, 4, 8, 16, 32, 64]
            .iter()
            .map(|&c| {
                (
                    c,
                    vec![
                        usl(c as f64) * 1.05,
                        usl(c as f64) * 1.08,
                        usl(c as f64) * 1.02,
                    ],
                )
            })
            .collect();
        let mut typical = sweep(&[1, 2, 4, 8, 16, 32, 64], 5);
        for l in &mut typical.levels {
            for (i, t) in l.trials.iter_mut().enumerate() {
                t.output_tok_per_s = usl(l.concurrency as f64) * (0.96 + 0.02 * i as f64);
            }
        }
        typical.analyse();
        let fitted = typical.analysis.clone().unwrap().scaling;
        write_run_plots(&typical, Some(&base), None, &fitted, &dir.join("typical")).unwrap();
        // A curve the USL cannot describe: the legend says why no curve is drawn.
        let mut zigzag = sweep(&[1, 2, 4, 8, 16], 3);
        for (l, k) in zigzag.levels.iter_mut().zip([1.0, 9.0, 1.5, 10.0, 1.2]) {
            for t in &mut l.trials {
                t.output_tok_per_s *= k / l.concurrency as f64;
            }
        }
        zigzag.analyse();
        let refused = zigzag.analysis.clone().unwrap().scaling;
        write_run_plots(&zigzag, None, None, &refused, &dir.join("refused")).unwrap();
        let mut failed = sweep(&[1, 2, 4, 8, 16, 32, 64], 3);
        failed.levels[6].trials = (1..=3).map(|n| trial(n, 64, 0.0, 0)).collect();
        write_run_plots(&failed, None, None, &NONE, &dir.join("failed")).unwrap();
        failed.save(&dir.join("failed/results.json")).unwrap();
        write_run_plots(&sweep(&[8], 1), None, None, &NONE, &dir.join("single")).unwrap();
        let many: Vec<u32> = (1..=1024).collect();
        let usl_curve = curve(90.0, 0.02, 0.0001);
        write_run_plots(&sweep(&many, 2), None, None, &usl_curve, &dir.join("many")).unwrap();
        write_run_plots(&run(vec![]), None, None, &NONE, &dir.join("empty")).unwrap();
        let mut long = sweep(&[1, 2, 4], 2);
        long.profile_name = "a-very-long-profile-name-".repeat(8);
        long.environment.model = Some("org/".to_string() + &"model-name-".repeat(10));
        write_run_plots(&long, None, None, &NONE, &dir.join("long")).unwrap();
        let mut unstreamed = sweep(&[1, 2, 4, 8], 3);
        for l in &mut unstreamed.levels {
            for t in &mut l.trials {
                t.ttft_ms = None;
                t.itl_ms = None;
            }
        }
        write_run_plots(&unstreamed, None, None, &NONE, &dir.join("unstreamed")).unwrap();
        write_run_plots(&open_loop_run(), None, None, &NONE, &dir.join("open-loop")).unwrap();
        let series = |name: &str, days: f64, nodes: &[f64]| CapacitySeries {
            name: name.into(),
            points: nodes
                .iter()
                .map(|&k| CapacityPoint {
                    nodes: k,
                    days_p10: days / k * 0.85,
                    days_p50: days / k,
                    days_p90: days / k * 1.25,
                })
                .collect(),
        };
        capacity_chart(
            &[
                series("4x RTX PRO 6000", 16.0, &[1.0, 2.0, 3.0, 4.0, 6.0, 8.0]),
                series("7x B200", 1.6, &[1.0, 2.0, 4.0, 8.0]),
            ],
            "Days to generate 1.64 B output tokens (902,087 completions)",
            "plan demo · measured 2026-11-29",
            Some(2.0),
            &dir.join("capacity.png"),
        )
        .unwrap();
        capacity_chart(
            &[series("4x RTX PRO 6000", 16.0, &[1.0, 2.0, 4.0])],
            "Days to finish: one node type",
            "plan demo",
            None,
            &dir.join("capacity_narrow.png"),
        )
        .unwrap();
        let wide: Vec<CapacitySeries> = (0..12)
            .map(|i| {
                series(
                    &format!("node type {i}"),
                    100.0 * (i + 1) as f64,
                    &[1.0, 4.0, 16.0, 64.0, 256.0],
                )
            })
            .collect();
        capacity_chart(
            &wide,
            "Twelve node types, 1 to 256 nodes",
            "plan demo",
            Some(30.0),
            &dir.join("capacity_wide.png"),
        )
        .unwrap();
    }

    #[test]
    fn nan_infinity_and_zero_do_not_panic_and_output_is_deterministic() {
        let dir = tempfile::tempdir().unwrap();
        let mut r = sweep(&[1, 2, 4, 8], 3);
        r.levels[0].trials[0].output_tok_per_s = f64::NAN;
        r.levels[1].trials[1].output_tok_per_s = f64::INFINITY;
        r.levels[1].trials[0].ttft_ms = Some(pct(f64::NAN, 0.0));
        r.levels[2].trials[0].itl_ms = Some(pct(0.0, f64::NEG_INFINITY));
        r.levels[3].trials[0].per_request_tok_per_s = Some(f64::NAN);
        let base = vec![(1, vec![f64::NAN, 0.0]), (0, vec![5.0]), (4, vec![])];
        for bad_fit in [
            curve(1e30, 0.0, 0.0),
            curve(f64::NAN, 0.0, 0.0),
            curve(1.0, -5.0, 0.5),
        ] {
            write_run_plots(&r, Some(&base), None, &bad_fit, &dir.path().join("c")).unwrap();
        }
        let bad_fit = curve(1e30, 0.0, 0.0);
        let a = write_run_plots(&r, Some(&base), None, &bad_fit, &dir.path().join("a")).unwrap();
        let b = write_run_plots(&r, Some(&base), None, &bad_fit, &dir.path().join("b")).unwrap();
        assert_eq!(a.len(), 3);
        for (x, y) in a.iter().zip(&b) {
            assert_eq!(std::fs::read(x).unwrap(), std::fs::read(y).unwrap());
        }
    }

    /// throughput.png draws the scaling it is given (the record's analysis) and nothing of
    /// its own: no curve, the planner's curve and a refused fit named in the legend are three
    /// different charts of the same trials.
    #[test]
    fn the_chart_draws_the_scaling_it_is_given() {
        let dir = tempfile::tempdir().unwrap();
        let r = sweep(&[1, 2, 4, 8], 3);
        let refused = Scaling::Refused { r_squared: 0.42 };
        let fitted = r.analysis.clone().unwrap().scaling;
        assert!(matches!(fitted, Scaling::Fitted(_)), "{fitted:?}");
        let png = |scaling: &Scaling, name: &str| {
            let out = dir.path().join(name);
            write_run_plots(&r, None, None, scaling, &out).unwrap();
            std::fs::read(out.join(THROUGHPUT_PNG)).unwrap()
        };
        let (none, curve, why) = (png(&NONE, "none"), png(&fitted, "fit"), png(&refused, "no"));
        assert_ne!(none, curve);
        assert_ne!(none, why);
        assert_ne!(curve, why);
    }

    #[test]
    fn dates_come_from_the_result() {
        assert_eq!(display_date("2026-11-29T11:22:06Z"), "2026-11-29 11:22 UTC");
        assert_eq!(display_date("yesterday"), "yesterday");
    }
}
