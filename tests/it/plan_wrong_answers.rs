//! Issue 17's wrong answers, each asked of the real binary: a run over several endpoints, a
//! node without a figure, ambiguous numbers, infeasible setups, the estimate's node, a run's
//! hardware or model replaced, a deadline shorter than a request, bad curves, and intervals
//! that looked precise. Every test here failed on the planner before the fix.

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

fn seed(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/seeds")
        .join(name)
}

const CURVE_122B: &str = "rtxpro6000-4x-tp4-qwen3.5-122b.json";
const BATCH1_27B: &str = "rtxpro6000-8x-dp-qwen3.6-27b-batch1.json";

fn plan(args: &[&str]) -> Output {
    crate::common::command()
        .arg("plan")
        // The whole plan (each node's details, the notes): what these tests read.
        .arg("-v")
        .args(args)
        .current_dir(std::env::temp_dir())
        .output()
        .expect("the binary runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn json(o: &Output) -> Value {
    assert_eq!(o.status.code(), Some(0), "{}", stderr(o));
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", stdout(o)))
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// Exit 2, and standard error says `needle`.
fn refused(o: &Output, needle: &str) {
    assert_eq!(o.status.code(), Some(2), "{}{}", stdout(o), stderr(o));
    assert!(
        stderr(o).contains(needle),
        "{needle:?} not in: {}",
        stderr(o)
    );
}

/// A copy of a seed results file, changed by `edit`, in `dir`.
fn edited(dir: &Path, name: &str, edit: impl FnOnce(&mut Value)) -> String {
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(seed(name)).unwrap()).unwrap();
    edit(&mut v);
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_string_pretty(&v).unwrap()).unwrap();
    path.display().to_string()
}

/// Item 1: a run spread over 8 endpoints measured 8 replicas: without --node, the node it
/// describes has 8 replicas (212 tok/s, 89.6 days), not one (26.5 tok/s, 717 days).
#[test]
fn a_run_over_several_endpoints_is_planned_per_node() {
    let s = seed(BATCH1_27B);
    let p = json(&plan(&[
        "--results",
        s.to_str().unwrap(),
        "--output-tokens",
        "1.64e9",
        "--format",
        "json",
    ]));
    let row = &p["nodes"][0];
    assert_eq!(row["replicas_per_node"], 8, "{row}");
    assert!(
        (f(&row["tok_s_per_node"]["p50"]) - 211.77).abs() < 0.01,
        "{row}"
    );
    assert!((f(&row["days"]["p50"]) - 89.63).abs() < 0.01, "{row}");
}

/// Item 8: `--node` without a figure and without a run is scaled from the catalog's measured
/// reference for the model, not refused.
#[test]
fn a_node_without_a_figure_is_scaled_not_refused() {
    let p = json(&plan(&[
        "--node",
        "h100-8x",
        "--model",
        "Qwen3.6-27B",
        "--output-tokens",
        "1.64e9",
        "--format",
        "json",
    ]));
    let rows = p["nodes"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["node"], "h100-8x");
    assert_eq!(rows[0]["basis"], "scaled");
    // 9,440 / 8 per GPU x 3.35 / 1.792 x 8 GPUs = 17,647 tok/s by bandwidth alone, but an
    // H100 replica holds 119 sequences where the RTX node's holds 214 (issue 30): capped at
    // the reference's share of its bound applied to the H100's bound at 119, 11,769 tok/s:
    // 1.61 days, not 1.08.
    assert!(
        (f(&rows[0]["days"]["p50"]) - 1.6128).abs() < 0.001,
        "{}",
        rows[0]
    );
    assert!(rows[0]["notes"]
        .to_string()
        .contains("capped at the 119 sequences"));
}

/// Item 6: `1,64e9` is not guessed (it was read as 1.64e11), and half a completion is not a
/// count.
#[test]
fn ambiguous_numbers_are_refused() {
    refused(
        &plan(&["--output-tokens", "1,64e9", "--model", "Qwen3.6-27B"]),
        "ambiguous",
    );
    refused(
        &plan(&["--output-tokens", "1,5", "--model", "Qwen3.6-27B"]),
        "ambiguous",
    );
    refused(
        &plan(&["--completions", "0.5", "--avg-output-tokens", "1000"]),
        "whole number",
    );
    // Thousands separators stay fine.
    let p = json(&plan(&[
        "--output-tokens",
        "1,640,000,000",
        "--model",
        "Qwen3.6-27B",
        "--format",
        "json",
    ]));
    assert_eq!(f(&p["workload"]["output_tokens"]), 1.64e9);
}

/// Item 7: a 244 GB model on one 96 GB GPU, contexts no GPU holds, 4e9 GPUs: exit 2 with the
/// reason, not a number.
#[test]
fn infeasible_setups_exit_2_with_the_reason() {
    let s = seed(CURVE_122B);
    let s = s.to_str().unwrap();
    refused(
        &plan(&[
            "--results",
            s,
            "--gpus-per-node",
            "1",
            "--output-tokens",
            "1e9",
        ]),
        "244 GB of weights",
    );
    refused(
        &plan(&[
            "--model",
            "Qwen3.6-27B",
            "--completions",
            "100",
            "--avg-output-tokens",
            "1000",
            "--avg-input-tokens",
            "1e7",
        ]),
        "KV cache",
    );
    refused(
        &plan(&[
            "--results",
            s,
            "--gpus-per-node",
            "4000000000",
            "--output-tokens",
            "1e9",
        ]),
        "--gpus-per-node",
    );
}

/// Item 3: the estimate is explained against the node it is for, named; with several rows
/// and none named, the plan asks.
#[test]
fn compare_days_names_its_node() {
    let base = [
        "--output-tokens",
        "1.64e9",
        "--model",
        "Qwen3.6-27B",
        "--compare-days",
        "16.5",
    ];
    refused(&plan(&base), "--compare-node");
    let mut args = base.to_vec();
    args.extend(["--compare-node", "rtxpro6000-4x-dp-mtp", "--format", "json"]);
    let p = json(&plan(&args));
    assert_eq!(p["comparison"]["node"], "rtxpro6000-4x-dp-mtp");
    assert!((f(&p["comparison"]["plan_days_p50"]) - 11.86).abs() < 0.01);
}

/// Item 5: `--node` must be the hardware the run measured, and a run of one model is not
/// another model's throughput.
#[test]
fn a_runs_hardware_and_model_are_not_replaced() {
    let s = seed(CURVE_122B);
    let s = s.to_str().unwrap();
    refused(
        &plan(&[
            "--results",
            s,
            "--node",
            "h100-8x",
            "--output-tokens",
            "1e9",
        ]),
        "the run measured RTX PRO 6000",
    );
    refused(
        &plan(&[
            "--results",
            s,
            "--model",
            "Qwen3.6-27B",
            "--output-tokens",
            "1e9",
        ]),
        "but the plan is for Qwen3.6-27B",
    );
    // An explicit --gpu that differs from the recorded one is said loudly.
    let p = json(&plan(&[
        "--results",
        s,
        "--gpu",
        "H200",
        "--output-tokens",
        "1e9",
        "--format",
        "json",
    ]));
    assert!(
        p["warnings"]
            .to_string()
            .contains("overrides the run's recorded GPU"),
        "{}",
        p["warnings"]
    );
}

/// Item 4: one request takes about 55 s at the planned concurrency: a 30 s deadline cannot be
/// met by any number of nodes; a long deadline keeps one request's time for the tail.
#[test]
fn a_deadline_shorter_than_a_request_is_refused() {
    let s = seed(CURVE_122B);
    let s = s.to_str().unwrap();
    let job = [
        "--results",
        s,
        "--node",
        "rtxpro6000-4x-tp4",
        "--completions",
        "902087",
        "--avg-output-tokens",
        "1818",
    ];
    let mut args = job.to_vec();
    args.extend(["--deadline", "30s"]);
    refused(&plan(&args), "--deadline");
    let mut args = job.to_vec();
    args.extend(["--deadline", "2h", "--format", "json"]);
    let p = json(&plan(&args));
    let row = &p["nodes"][0];
    let d = &row["deadline"];
    assert!(
        (f(&d["tail_s"]) - f(&row["latency_s"])).abs() < 1e-9,
        "{row}"
    );
    // Steady phase = 2 h - the tail: more nodes than tokens / (X x 2 h).
    let x = f(&row["tok_s_per_node"]["p50"]);
    let expected = (1.64e9 / (x * (7200.0 - f(&d["tail_s"])))).ceil();
    assert_eq!(f(&d["nodes_p50"]), expected, "{row}");
}

/// Item 10: an unfinished run and a negative throughput are refused; a top level that lost
/// half its requests is not capacity; a fit with a low R^2 is not used.
#[test]
fn bad_curves_are_refused_or_flagged() {
    let dir = tempfile::tempdir().unwrap();
    let job = ["--output-tokens", "1e9", "--format", "json"];
    let incomplete = edited(dir.path(), CURVE_122B, |v| v["complete"] = false.into());
    let mut args = vec!["--results", incomplete.as_str()];
    args.extend(job);
    refused(&plan(&args), "complete: false");

    let negative = edited(dir.path(), CURVE_122B, |v| {
        v["levels"][2]["trials"][0]["output_tok_per_s"] = (-1213.5).into()
    });
    let mut args = vec!["--results", negative.as_str()];
    args.extend(job);
    refused(&plan(&args), "output_tok_per_s");

    // Level 64 lost half its requests: it is left out, and said so.
    let lossy = edited(dir.path(), CURVE_122B, |v| {
        let t = &mut v["levels"][4]["trials"][0];
        t["requests_sent"] = 256.into();
        t["failed"] = serde_json::json!({"timeout": 128});
        t["error_rate"] = 0.5.into();
    });
    let mut args = vec!["--results", lossy.as_str()];
    args.extend(job);
    let p = json(&plan(&args));
    let warnings = p["warnings"].to_string();
    assert!(warnings.contains("left out of the plan"), "{warnings}");
    assert!(
        f(&p["nodes"][0]["concurrency_per_replica"]) <= 32.0,
        "{}",
        p["nodes"][0]
    );

    // A zig-zag curve: the fit (R^2 far below 0.9) is not used.
    let zigzag = edited(dir.path(), CURVE_122B, |v| {
        for (i, x) in [121.6, 1400.0, 300.0, 1500.0, 250.0].iter().enumerate() {
            v["levels"][i]["trials"][0]["output_tok_per_s"] = (*x).into();
        }
    });
    let mut args = vec!["--results", zigzag.as_str()];
    args.extend(job);
    let p = json(&plan(&args));
    assert!(
        p["warnings"].to_string().contains("R^2"),
        "{}",
        p["warnings"]
    );
    let row = &p["nodes"][0];
    assert_eq!(row["basis"], "measured", "{row}");
    assert_eq!(f(&row["tok_s_per_node"]["p50"]), 1500.0, "{row}");
}

/// Item 9: where the planned concurrency was measured, the plan uses the measurement (not
/// the fit); one trial, a 3-point fit, a scaled row and a stated claim say their interval is
/// unknown; a fitted row's interval includes the points' scatter about the curve.
#[test]
fn intervals_are_honest_or_unknown() {
    let s = seed(CURVE_122B);
    let s = s.to_str().unwrap();
    let p = json(&plan(&[
        "--results",
        s,
        "--max-concurrency",
        "16",
        "--output-tokens",
        "1e9",
        "--format",
        "json",
    ]));
    let row = &p["nodes"][0];
    assert_eq!(row["basis"], "measured", "{row}");
    assert_eq!(f(&row["tok_s_per_node"]["p50"]), 1213.5, "{row}");
    assert_eq!(row["interval"]["known"], false, "{row}");

    let p = json(&plan(&[
        "--results",
        s,
        "--output-tokens",
        "1e9",
        "--format",
        "json",
    ]));
    let row = &p["nodes"][0];
    assert_eq!(row["basis"], "fitted");
    assert_eq!(row["interval"]["known"], true);
    assert!(row["interval"]["how"].as_str().unwrap().contains("scatter"));
    // The band is at least the scatter term: 1.2816 x relative RMSE on each side.
    let rmse = f(&p["fit"]["rmse_rel"]);
    let q = &row["tok_s_per_node"];
    assert!(
        f(&q["p50"]) - f(&q["p10"]) >= 1.28 * rmse * f(&q["p50"]) - 1e-6,
        "{q} rmse {rmse}"
    );

    // Three levels, one trial each: the USL passes through them, no spread is measured.
    let dir = tempfile::tempdir().unwrap();
    let three = edited(dir.path(), CURVE_122B, |v| {
        let levels = v["levels"].as_array().unwrap().clone();
        v["levels"] = Value::Array(vec![
            levels[0].clone(),
            levels[2].clone(),
            levels[4].clone(),
        ]);
    });
    let p = json(&plan(&[
        "--results",
        &three,
        "--output-tokens",
        "1e9",
        "--format",
        "json",
    ]));
    let row = &p["nodes"][0];
    assert_eq!(row["interval"]["known"], false, "{row}");

    let p = json(&plan(&[
        "--output-tokens",
        "1.64e9",
        "--model",
        "Qwen3.6-27B",
        "--format",
        "json",
    ]));
    for n in p["nodes"].as_array().unwrap() {
        if n["basis"] == "scaled" || n["basis"] == "stated" {
            assert_eq!(n["interval"]["known"], false, "{n}");
        }
    }
}

/// Item 2: a job with 100k-token prompts pays their prefill (the run measured 1,000-token
/// prompts); before, such prompts changed the answer by about 1%.
#[test]
fn long_prompts_pay_their_prefill() {
    let s = seed(CURVE_122B);
    let s = s.to_str().unwrap();
    let days = |input: &str| {
        let p = json(&plan(&[
            "--results",
            s,
            "--completions",
            "902087",
            "--avg-output-tokens",
            "1818",
            "--avg-input-tokens",
            input,
            "--format",
            "json",
        ]));
        (f(&p["nodes"][0]["days"]["p50"]), p)
    };
    let (short, _) = days("1000");
    let (long, p) = days("100000");
    assert!(long > 2.0 * short, "{short} -> {long}");
    let row = &p["nodes"][0];
    assert!(row["how"].as_str().unwrap().contains("prefill"), "{row}");
    assert!(
        p["warnings"].to_string().contains("input averages 100000"),
        "{}",
        p["warnings"]
    );
}

/// Item 11: quantized weights are not 2 bytes per parameter, and the KV dtype can be said.
#[test]
fn quantized_weights_and_kv_dtype() {
    let p = json(&plan(&[
        "--model",
        "Qwen3.5-122B-A10B",
        "--quantization",
        "int4",
        "--kv-cache-dtype",
        "fp8",
        "--output-tokens",
        "1e9",
        "--format",
        "json",
    ]));
    assert_eq!(f(&p["model"]["bytes_per_param"]), 0.515625);
    // 2 x 12 KV layers x 2 heads x 256 x 1 byte.
    assert_eq!(f(&p["model"]["kv_bytes_per_token"]), 12_288.0);
    refused(
        &plan(&[
            "--model",
            "Qwen3.6-27B",
            "--quantization",
            "int3",
            "--output-tokens",
            "1e9",
        ]),
        "--quantization",
    );
}

/// Latency percentiles (ms) for a trial: p99 as given, the rest below it.
fn pct(p99_ms: f64) -> Value {
    serde_json::json!({"p50": p99_ms / 2.0, "p90": p99_ms * 0.8, "p99": p99_ms,
        "mean": p99_ms / 2.0, "min": 1.0, "max": p99_ms, "count": 100})
}

/// Item 12: SLOs cap the load at the highest concurrency whose measured p99 meets them,
/// linear between levels, and say which binds; an SLO no level meets is refused, and so is one
/// on a run without latency percentiles.
#[test]
fn slos_cap_the_load_between_levels() {
    let dir = tempfile::tempdir().unwrap();
    // TTFT p99 0.2, 0.5, 1.0, 2.5, 5.0 s and ITL p99 20 ms at every level (1/4/16/32/64).
    let timed = edited(dir.path(), CURVE_122B, |v| {
        for (i, ttft) in [200.0, 500.0, 1000.0, 2500.0, 5000.0].iter().enumerate() {
            let t = &mut v["levels"][i]["trials"][0];
            t["ttft_ms"] = pct(*ttft);
            t["itl_ms"] = pct(20.0);
        }
    });
    let p = json(&plan(&[
        "--results",
        &timed,
        "--output-tokens",
        "1e9",
        "--max-ttft-p99",
        "2s",
        "--max-itl-p99",
        "50ms",
        "--format",
        "json",
    ]));
    let slo = &p["slo"];
    // Between 16 (1.0 s) and 32 (2.5 s): 16 + (2 - 1) / 1.5 x 16 = 26.7.
    assert!(
        (f(&slo["cap"]["concurrency"]) - 26.667).abs() < 0.01,
        "{slo}"
    );
    assert_eq!(slo["cap"]["binding"], "TTFT p99", "{slo}");
    let planned = f(&p["nodes"][0]["concurrency_per_replica"]);
    assert!(planned <= 26.0, "{planned}");
    assert_eq!(f(&slo["planned_concurrency_per_replica"]), planned);

    let mut args = vec!["--results", timed.as_str(), "--output-tokens", "1e9"];
    args.extend(["--max-ttft-p99", "100ms"]);
    refused(&plan(&args), "even the lowest level");

    let s = seed(CURVE_122B);
    refused(
        &plan(&[
            "--results",
            s.to_str().unwrap(),
            "--output-tokens",
            "1e9",
            "--max-ttft-p99",
            "2s",
        ]),
        "no TTFT p99",
    );
}

/// Item 11: with the reference's batch known, scaled rows keep the reference's share of the
/// roofline at the batch each node holds (before, the shares ran from a few % to tens of %).
#[test]
fn scaled_rows_keep_the_references_roofline_share() {
    let s = seed(CURVE_122B);
    let p = json(&plan(&[
        "--results",
        s.to_str().unwrap(),
        "--node",
        "rtxpro6000-4x-tp4",
        "--completions",
        "902087",
        "--avg-output-tokens",
        "1818",
        "--avg-input-tokens",
        "100000",
        "--format",
        "json",
    ]));
    let rows = p["nodes"].as_array().unwrap();
    let share = f(&rows[0]["roofline"]["efficiency"]);
    let scaled: Vec<&Value> = rows.iter().filter(|r| r["basis"] == "scaled").collect();
    assert!(scaled.len() >= 3, "{rows:?}");
    for r in scaled {
        let e = f(&r["roofline"]["efficiency"]);
        assert!((e - share).abs() < 1e-6, "{} {e} vs {share}", r["node"]);
        // Never above the measured batch, and within what the node's memory holds.
        let b = f(&r["concurrency_per_replica"]);
        assert!(b <= f(&rows[0]["concurrency_per_replica"]), "{r}");
        assert!(b <= f(&r["roofline"]["memory_max_concurrency"]), "{r}");
    }
}
