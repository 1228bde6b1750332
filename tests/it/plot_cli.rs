//! `throughline plot` run as a user would: a results file written to a temporary folder, the
//! real binary, and the PNGs decoded and inspected.

use std::path::{Path, PathBuf};
use std::process::Output;

use throughline::profile::Profile;
use throughline::record::{
    Environment, ErrorClass, LevelResult, RunResult, TrialResult, SCHEMA_VERSION,
};
use throughline::stats::Percentiles;

const WIDTH: u32 = 1200;
const HEIGHT: u32 = 750;
const CHARTS: [&str; 3] = ["throughput.png", "per_request.png", "latency.png"];

fn pct(p50: f64, p99: f64) -> Percentiles {
    Percentiles {
        p50,
        p90: (p50 + p99) / 2.0,
        p99,
        mean: p50,
        min: p50 / 2.0,
        max: p99,
        count: 32,
        relative_error: None,
    }
}

fn trial(n: u32, c: u32, ok: u64, sent: u64) -> TrialResult {
    let cf = c as f64;
    let tps = 80.0 * cf / (1.0 + 0.03 * (cf - 1.0)) * (1.0 + 0.015 * n as f64);
    TrialResult {
        requests_sent: sent,
        succeeded: ok,
        failed: if ok < sent {
            [(ErrorClass::Http, sent - ok)].into()
        } else {
            Default::default()
        },
        output_tokens: if ok > 0 { 64 * ok } else { 0 },
        input_tokens: 128 * sent,
        window_s: 10.0,
        output_tok_per_s: if ok > 0 { tps } else { 0.0 },
        requests_per_s: ok as f64 / 10.0,
        error_rate: (sent - ok) as f64 / sent as f64,
        per_request_tok_per_s: (ok > 0).then(|| tps / cf),
        ttft_ms: (ok > 0).then(|| pct(15.0 + 2.0 * cf, 40.0 + 6.0 * cf)),
        itl_ms: (ok > 0).then(|| pct(9.0 + cf / 8.0, 18.0 + cf / 3.0)),
        ..TrialResult::new(n)
    }
}

fn result(levels: Vec<LevelResult>) -> RunResult {
    let profile = Profile::parse(
        r#"
name = "ci-small"
[target]
endpoints = ["http://127.0.0.1:9"]
[workload]
max_tokens = 64
[sweep]
concurrency = [1, 2, 4]
trials = 3
"#,
    )
    .unwrap();
    RunResult {
        schema_version: SCHEMA_VERSION,
        tool: "throughline 0.1.0".into(),
        profile_name: "ci-small".into(),
        profile_hash: "sha256:9f2c4e1d0b7a".into(),
        profile,
        environment: Environment {
            gpu_model: Some("RTX PRO 6000".into()),
            gpu_count: Some(4),
            model: Some("sim-model".into()),
            engine: Some("throughline-sim".into()),
            endpoints: 1,
            ..Default::default()
        },
        started_at: "2026-11-29T10:00:00Z".into(),
        finished_at: "2026-11-29T10:05:00Z".into(),
        complete: true,
        levels,
        warnings: vec![],
        base: None,
        drift: None,
        notes: Vec::new(),
        servers: None,
        // Computed when `plot` loads the file.
        analysis: None,
        run_id: None,
    }
}

fn sweep(cs: &[u32], trials: u32) -> RunResult {
    let mut run = result(
        cs.iter()
            .map(|&c| LevelResult {
                concurrency: c,
                rate: None,
                trials: (1..=trials).map(|n| trial(n, c, 16, 16)).collect(),
            })
            .collect(),
    );
    // The plan these levels came from, as a run records it (the gate checks the file
    // holds what its plan measured).
    run.profile.sweep.concurrency = cs.to_vec();
    run.profile.sweep.trials = trials;
    run
}

fn plot(dir: &Path, run: &RunResult, extra: &[&str]) -> (Output, PathBuf) {
    let results = dir.join("results.json");
    run.save(&results).unwrap();
    let out = dir.join("plots");
    let output = crate::common::command()
        .arg("plot")
        .arg("--results")
        .arg(&results)
        .arg("--out")
        .arg(&out)
        .args(extra)
        .output()
        .unwrap();
    (output, out)
}

fn ok(output: &Output) {
    assert!(
        output.status.success(),
        "exit {:?}\nstdout: {}\nstderr: {}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Decodes a PNG into (width, height, RGB bytes).
fn decode(path: &Path) -> (u32, u32, Vec<u8>) {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(
        &bytes[..8],
        b"\x89PNG\r\n\x1a\n",
        "{} is not a PNG",
        path.display()
    );
    let decoder = png::Decoder::new(bytes.as_slice());
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert_eq!(info.color_type, png::ColorType::Rgb);
    buf.truncate(info.buffer_size());
    (info.width, info.height, buf)
}

fn dark_pixels(rgb: &[u8], width: u32, rows: std::ops::Range<u32>) -> usize {
    rows.flat_map(|y| (0..width).map(move |x| ((y * width + x) * 3) as usize))
        .filter(|&i| rgb[i] < 110 && rgb[i + 1] < 110 && rgb[i + 2] < 110)
        .count()
}

/// Size, content, and text where the title and the footer are.
fn check_chart(path: &Path) {
    let (w, h, rgb) = decode(path);
    assert_eq!((w, h), (WIDTH, HEIGHT), "{}", path.display());
    let first = &rgb[..3];
    assert!(
        rgb.chunks(3).any(|px| px != first),
        "{} is one colour",
        path.display()
    );
    let title = dark_pixels(&rgb, w, 10..45);
    assert!(
        title > 300,
        "{}: no title text ({title} dark pixels)",
        path.display()
    );
    let footer = (h - 25..h - 5)
        .flat_map(|y| (0..w).map(move |x| ((y * w + x) * 3) as usize))
        .filter(|&i| rgb[i] < 160)
        .count();
    assert!(footer > 100, "{}: no footer text", path.display());
    // Colour: the data are drawn in blue, not only black on white.
    assert!(
        rgb.chunks(3).any(|px| px[2] > 150 && px[0] < 80),
        "{}: no data drawn",
        path.display()
    );
}

#[test]
fn writes_charts_and_report_and_prints_paths() {
    let dir = tempfile::tempdir().unwrap();
    let (output, out) = plot(dir.path(), &sweep(&[1, 2, 4, 8, 16, 32], 3), &[]);
    ok(&output);
    let stdout = String::from_utf8_lossy(&output.stdout);
    for name in CHARTS.iter().chain(&["report.md"]) {
        assert!(stdout.contains(name), "{name} not printed: {stdout}");
    }
    for name in CHARTS {
        check_chart(&out.join(name));
    }
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("# throughline run: ci-small"), "{md}");
    assert!(md.contains("| C | output tok/s (mean ± sd)"), "{md}");
    assert!(
        md.contains("![Output throughput vs concurrency](throughput.png)"),
        "{md}"
    );
    assert!(
        md.contains("(latency.png)") && md.contains("(per_request.png)"),
        "{md}"
    );
}

#[test]
fn same_input_gives_the_same_bytes() {
    let run = sweep(&[1, 4, 16, 64], 4);
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    let (oa, da) = plot(a.path(), &run, &[]);
    let (ob, db) = plot(b.path(), &run, &[]);
    ok(&oa);
    ok(&ob);
    for name in CHARTS.iter().chain(&["report.md"]) {
        let x = std::fs::read(da.join(name)).unwrap();
        let y = std::fs::read(db.join(name)).unwrap();
        assert!(x == y, "{name} differs between two runs on the same input");
    }
}

#[test]
fn failed_level_single_level_single_trial_and_1024_levels_do_not_panic() {
    let mut failed = sweep(&[1, 2, 4, 8, 16, 32, 64], 3);
    failed.levels[6].trials = (1..=3).map(|n| trial(n, 64, 0, 16)).collect();
    failed.levels[2].trials[1] = trial(2, 4, 10, 16);
    let many: Vec<u32> = (1..=1024).collect();
    let mut zeros = sweep(&[1, 2, 4], 2);
    // JSON has no NaN (the library's unit tests feed NaN directly); zeros and negatives here.
    zeros.levels[1].trials[0].itl_ms = Some(pct(0.0, -1.0));
    zeros.levels[0].trials[1].ttft_ms = Some(pct(0.0, 0.0));
    zeros.levels[1].trials[0].per_request_tok_per_s = Some(0.0);
    let cases = [
        ("failed level", failed),
        ("single level, single trial", sweep(&[8], 1)),
        ("all levels failed", {
            let mut r = sweep(&[1, 2], 2);
            for l in &mut r.levels {
                l.trials = vec![trial(1, l.concurrency, 0, 8)];
            }
            r
        }),
        ("no levels", result(vec![])),
        ("1024 levels", sweep(&many, 2)),
        ("zeros and negatives", zeros),
    ];
    for (what, run) in cases {
        let dir = tempfile::tempdir().unwrap();
        let (output, out) = plot(dir.path(), &run, &[]);
        ok(&output);
        for name in CHARTS {
            let (w, h, rgb) = decode(&out.join(name));
            assert_eq!((w, h), (WIDTH, HEIGHT), "{what}: {name}");
            assert!(
                dark_pixels(&rgb, w, 10..45) > 300,
                "{what}: {name}: no title"
            );
        }
        let md = std::fs::read_to_string(out.join("report.md")).unwrap();
        assert!(md.contains("# throughline run"), "{what}");
    }
}

#[test]
fn failed_level_is_named_on_the_chart_and_in_the_report() {
    let mut run = sweep(&[1, 2, 4, 64], 2);
    run.levels[3].trials = (1..=2).map(|n| trial(n, 64, 0, 16)).collect();
    let dir = tempfile::tempdir().unwrap();
    let (output, out) = plot(dir.path(), &run, &[]);
    ok(&output);
    // The note is drawn in red under the legend.
    let (w, _, rgb) = decode(&out.join("throughput.png"));
    let red = (80..120u32)
        .flat_map(|y| (0..w).map(move |x| ((y * w + x) * 3) as usize))
        .filter(|&i| rgb[i] > 140 && rgb[i + 1] < 90 && rgb[i + 2] < 90)
        .count();
    assert!(red > 50, "no note drawn ({red} red pixels)");
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("| 64 | no success |"), "{md}");
    assert!(md.contains("level C=64: no successful request"), "{md}");
}

#[test]
fn baseline_trials_from_a_csv_are_drawn_in_a_second_colour() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("baseline.csv");
    std::fs::write(
        &csv,
        "concurrency,output_tok_per_s\n1,85\n1,88\n2,160\n2,170\n4,300\n4,310\n",
    )
    .unwrap();
    let csv_arg = csv.to_str().unwrap();
    let (output, out) = plot(
        dir.path(),
        &sweep(&[1, 2, 4], 3),
        &["--baseline-trials", csv_arg],
    );
    ok(&output);
    let (_, _, rgb) = decode(&out.join("throughput.png"));
    let orange = rgb
        .chunks(3)
        .filter(|px| px[0] > 200 && px[1] > 90 && px[1] < 150 && px[2] < 60)
        .count();
    assert!(orange > 200, "baseline not drawn ({orange} orange pixels)");
}

/// Issue 20 item 4: per_request.png draws a baseline given as another run's results.json (its
/// trials' per-request speeds); a CSV baseline holds none, and the chart says so instead.
#[test]
fn per_request_chart_draws_a_baseline_run_beside_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let baseline = dir.path().join("baseline-results.json");
    let mut slower = sweep(&[1, 2, 4], 3);
    for l in &mut slower.levels {
        for t in &mut l.trials {
            t.per_request_tok_per_s = t.per_request_tok_per_s.map(|x| x * 1.1);
        }
    }
    slower.save(&baseline).unwrap();
    let (output, out) = plot(
        dir.path(),
        &sweep(&[1, 2, 4], 3),
        &["--baseline-trials", baseline.to_str().unwrap()],
    );
    ok(&output);
    let (_, _, rgb) = decode(&out.join("per_request.png"));
    let with_baseline = orange_pixels(&rgb);
    let (output, out) = plot(dir.path(), &sweep(&[1, 2, 4], 3), &[]);
    ok(&output);
    let (_, _, rgb) = decode(&out.join("per_request.png"));
    let alone = orange_pixels(&rgb);
    assert!(
        with_baseline > alone + 200,
        "baseline on per_request.png: {with_baseline} orange pixels, run alone {alone}"
    );
}

#[test]
fn bad_input_exits_2_with_a_message() {
    let dir = tempfile::tempdir().unwrap();
    let output = crate::common::command()
        .args(["plot", "--results"])
        .arg(dir.path().join("missing.json"))
        .arg("--out")
        .arg(dir.path().join("out"))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("missing.json"), "{stderr}");
}

/// A relative run: the base arm as measured, the head 9% slower at C = 1 and 4.
fn relative_run() -> RunResult {
    let base = sweep(&[1, 4, 16], 6);
    let mut head = base.clone();
    for l in &mut head.levels {
        if l.concurrency <= 4 {
            for t in &mut l.trials {
                t.output_tok_per_s *= 0.91;
                t.per_request_tok_per_s = t.per_request_tok_per_s.map(|x| x * 0.91);
            }
        }
    }
    head.base = Some(throughline::record::BaseArm {
        endpoints: 1,
        model: Some("sim-model".into()),
        engine: None,
        engine_version: None,
        levels: base.levels,
    });
    head
}

fn orange_pixels(rgb: &[u8]) -> usize {
    rgb.chunks(3)
        .filter(|px| px[0] > 200 && px[1] > 90 && px[1] < 150 && px[2] < 60)
        .count()
}

/// Issue 20 items 4-5 and issue 16 item 1, through the real binary: `gate --out plots
/// --markdown reports/verdict.md` links the charts from reports/ (not from the working
/// directory), writes ratio.png and pr-comment.md beside verdict.md, and the job summary shows
/// Mermaid charts and links no PNG; per_request.png draws the base arm.
#[test]
fn gate_links_from_the_markdown_folder_and_writes_the_comment() {
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("results.json");
    relative_run().save(&results).unwrap();
    let summary = dir.path().join("summary.md");
    let output = crate::common::command()
        .current_dir(dir.path())
        .args([
            "gate",
            "--allow-client-bound",
            "--results",
            "results.json",
            "--out",
            "plots",
            "--markdown",
            "reports/verdict.md",
        ])
        .env("GITHUB_STEP_SUMMARY", &summary)
        .output()
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(1),
        "a 9% drop at C=1 and 4 is a regression: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let reports = dir.path().join("reports");
    let md = std::fs::read_to_string(reports.join("verdict.md")).unwrap();
    assert!(md.contains("](ratio.png)"), "{md}");
    assert!(md.contains("](../plots/throughput.png)"), "{md}");
    assert!(md.contains("](../plots/per_request.png)"), "{md}");
    let (w, h, ratio) = decode(&reports.join("ratio.png"));
    assert_eq!((w, h), (WIDTH, HEIGHT));
    assert!(
        dark_pixels(&ratio, w, 10..45) > 300,
        "no title on ratio.png"
    );
    let red = ratio
        .chunks(3)
        .filter(|px| px[0] > 190 && px[1] < 70 && px[2] < 70)
        .count();
    assert!(red > 1500, "failed levels not drawn in red ({red} pixels)");

    let comment = std::fs::read_to_string(reports.join("pr-comment.md")).unwrap();
    assert!(
        comment.starts_with("<!-- throughline-verdict -->\n### ❌ throughline: REGRESSION"),
        "{comment}"
    );
    assert!(comment.contains("\nxychart-beta\n"), "{comment}");
    assert!(!comment.contains(".png)"), "{comment}");

    let summary = std::fs::read_to_string(&summary).unwrap();
    assert!(summary.contains("\nxychart-beta\n"), "{summary}");
    assert!(!summary.contains(".png)"), "a local PNG linked: {summary}");
    assert!(summary.contains("`ratio.png`"), "{summary}");

    // The base arm is drawn beside the run on per_request.png; a run alone has no orange.
    let (_, _, rgb) = decode(&dir.path().join("plots/per_request.png"));
    let with_base = orange_pixels(&rgb);
    let (output, out) = plot(dir.path(), &sweep(&[1, 4, 16], 6), &[]);
    ok(&output);
    let (_, _, rgb) = decode(&out.join("per_request.png"));
    let alone = orange_pixels(&rgb);
    assert!(
        with_base > 300 && alone < 20,
        "base arm on per_request.png: {with_base} orange pixels, run alone {alone}"
    );
}
