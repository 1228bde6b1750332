//! `throughline plan` end to end: the real binary on the fixtures, from another folder (the
//! catalog and the facts are built in).

use std::path::{Path, PathBuf};
use std::process::Output;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

fn seed(name: &str) -> String {
    fixtures().join("seeds").join(name).display().to_string()
}

/// The seeds' question: 902,087 completions of 1,818 tokens on average, Qwen3.6-27B.
const SEEDS_QUESTION: [&str; 6] = [
    "--completions",
    "902087",
    "--avg-output-tokens",
    "1818",
    "--model",
    "Qwen3.6-27B",
];

fn plan(args: &[&str]) -> Output {
    let dir = std::env::temp_dir();
    crate::common::command()
        .arg("plan")
        // The whole plan (each node's details, the notes): what these tests read.
        .arg("-v")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("the binary runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", stdout(o)))
}

fn node<'a>(plan: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    plan["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["node"] == name)
        .unwrap_or_else(|| panic!("no row {name}"))
}

fn f(v: &serde_json::Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// Issue 37: `plan` printed 104-150 lines. By default it fits one screen (the job, the node
/// table, the summary, the warnings); each node's details and the notes come with -v, and
/// plan.json has everything either way.
#[test]
fn the_default_table_fits_one_screen_and_says_where_the_rest_is() {
    let args = [&["plan"][..], &SEEDS_QUESTION, &["--deadline", "2d"]].concat();
    let run = |extra: &[&str]| {
        crate::common::command()
            .args(&args)
            .args(extra)
            .current_dir(std::env::temp_dir())
            .output()
            .unwrap()
    };
    let (short, whole) = (run(&[]), run(&["-v"]));
    assert_eq!(short.status.code(), Some(0), "{}", stderr(&short));
    let (short, whole) = (stdout(&short), stdout(&whole));
    let lines = short.lines().count();
    assert!(lines <= 50, "{lines} lines:\n{short}");
    assert!(
        whole.lines().count() > lines,
        "-v adds the details:\n{whole}"
    );
    assert!(short.contains("fastest on one node:"), "{short}");
    assert!(short.contains("plan -v (or plan.json)"), "{short}");
    assert!(!short.contains("\nnotes:"), "{short}");
    assert!(whole.contains("\nnotes:"), "{whole}");
}

#[test]
fn the_seed_decision_from_the_catalog() {
    // 1.64e9 tokens at 1,600 tok/s: 11.9 days; the seeds' 16.5 days is explained.
    let o = plan(&[
        "--completions",
        "902087",
        "--output-tokens",
        "1.64e9",
        "--model",
        "Qwen3.6-27B",
        "--node",
        "rtxpro6000-4x-dp-mtp",
        "--compare-days",
        "16.5",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("11.9 days"), "{out}");
    assert!(out.contains("implies 1150 tok/s"), "{out}");
    assert!(out.contains("peak vs sustained"), "{out}");
    assert!(out.contains("--sustained 0.72"), "{out}");

    // The B200 estimate, 15,000-30,000 tok/s, marked stated: 1.27 days at its low end (P90),
    // 0.84 at its middle (P50), and its interval is a claim's, not a measured one.
    let o = plan(&[
        "--output-tokens",
        "1.64e9",
        "--model",
        "qwen3.6-27b",
        "--deadline",
        "2d",
        "--format",
        "json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let p = json(&o);
    let b200 = node(&p, "b200-7x");
    assert_eq!(b200["basis"], "stated");
    assert!((f(&b200["days"]["p90"]) - 1.265).abs() < 0.001);
    assert!((f(&b200["days"]["p50"]) - 0.8436).abs() < 0.001);
    assert_eq!(b200["interval"]["known"], false);
    assert_eq!(b200["deadline"]["nodes_p50"], 1);
    let rtx4 = node(&p, "rtxpro6000-4x-dp-mtp");
    assert!((f(&rtx4["days"]["p50"]) - 11.86).abs() < 0.01);
    assert_eq!(rtx4["deadline"]["nodes_p50"], 6);
    // The batch-1 figure on the 8-GPU node is 80% of the datasheet roofline.
    let rtx8 = node(&p, "rtxpro6000-8x-dp");
    let check = &rtx8["roofline"]["checks"][0];
    assert!((f(&check["bound"]) - 33.09).abs() < 0.05, "{check}");
    assert!((f(&check["efficiency"]) - 0.80).abs() < 0.01, "{check}");
    assert_eq!(node(&p, "h200-8x")["basis"], "scaled");
}

#[test]
fn the_27b_data_expansion_takes_15_hours() {
    // 523 million tokens at 9,440 tok/s: 15.4 hours.
    let o = plan(&[
        "--output-tokens",
        "523e6",
        "--model",
        "Qwen3.6-27B",
        "--node",
        "rtxpro6000-8x-dp",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("15.4 hours"), "{out}");
    assert!(out.contains("9,440"), "{out}");
}

#[test]
fn the_seed_curve_is_fitted_and_written() {
    let dir = tempfile::tempdir().unwrap();
    let json_file = dir.path().join("p.json");
    let o = plan(&[
        "--results",
        &seed("rtxpro6000-4x-tp4-qwen3.5-122b.json"),
        "--node",
        "rtxpro6000-4x-tp4",
        "--completions",
        "902087",
        "--avg-output-tokens",
        "1818",
        "--deadline",
        "36h",
        "--json",
        json_file.to_str().unwrap(),
        "--out",
        dir.path().to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("USL fit"), "{out}");
    assert!(out.contains("fitted"), "{out}");
    assert!(out.contains("transcribed from a report"), "{out}");
    let p: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json_file).unwrap()).unwrap();
    // sigma ~0.034, kappa ~4.2e-4, lambda ~119 tok/s, peak near 48 at ~1,610 tok/s (10%).
    let fit = &p["fit"];
    let near = |v: &serde_json::Value, x: f64| (f(v) - x).abs() <= 0.1 * x;
    assert!(near(&fit["sigma"], 0.034), "{fit}");
    assert!(near(&fit["kappa"], 4.2e-4), "{fit}");
    assert!(near(&fit["lambda"], 119.0), "{fit}");
    assert!(near(&fit["peak_concurrency"], 48.0), "{fit}");
    assert!(near(&fit["peak_throughput"], 1610.0), "{fit}");
    let row = node(&p, "rtxpro6000-4x-tp4");
    assert_eq!(row["basis"], "fitted");
    let days = &row["days"];
    assert!(f(&days["p10"]) < f(&days["p50"]) && f(&days["p50"]) < f(&days["p90"]));
    assert!(near(&days["p50"], 11.8), "{days}");
    // Little's law: about 49 x 1818 / 1612 = 55 s per request.
    assert!(near(&row["latency_s"], 55.0), "{row}");
    assert!(f(&row["usd_per_million_tokens"]) > 0.0);
    assert!(dir.path().join("plan.json").exists());
    let png = std::fs::read(dir.path().join("capacity.png")).unwrap();
    assert_eq!(&png[1..4], b"PNG");

    // Deterministic: the same seed gives the same plan.
    let again = plan(&[
        "--results",
        &seed("rtxpro6000-4x-tp4-qwen3.5-122b.json"),
        "--node",
        "rtxpro6000-4x-tp4",
        "--completions",
        "902087",
        "--avg-output-tokens",
        "1818",
        "--deadline",
        "36h",
        "--format",
        "json",
    ]);
    let q = json(&again);
    assert_eq!(p["nodes"][0]["days"], q["nodes"][0]["days"]);
}

#[test]
fn one_level_plans_from_the_measured_point() {
    let o = plan(&[
        "--results",
        &seed("rtxpro6000-8x-dp-qwen3.6-27b-batch1.json"),
        "--node",
        "rtxpro6000-8x-dp",
        "--output-tokens",
        "1.64e9",
        "--format",
        "json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let p = json(&o);
    let row = node(&p, "rtxpro6000-8x-dp");
    assert_eq!(row["basis"], "measured");
    // 26.5 tok/s per GPU x 8 replicas = 212 tok/s: 89.6 days at batch 1.
    assert!((f(&row["tok_s_per_node"]["p50"]) - 211.8).abs() < 0.1);
    assert!((f(&row["days"]["p50"]) - 89.6).abs() < 0.1);
    let notes = p["notes"].to_string();
    assert!(notes.contains("no curve to fit"), "{notes}");
}

#[test]
fn a_claim_above_the_roofline_is_flagged() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = dir.path().join("c.toml");
    std::fs::write(
        &catalog,
        r#"
[[node]]
name = "too-good"
gpu = "RTX PRO 6000 Blackwell"
gpus_per_node = 1
model = "Qwen3.6-27B"
basis = "stated"
tok_s_per_node = 100
concurrency_per_replica = 1
batch1_tok_s_per_replica = 100
source = "a slide"
"#,
    )
    .unwrap();
    let o = plan(&[
        "--output-tokens",
        "1e9",
        "--catalog",
        catalog.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("impossible"), "{out}");
    assert!(out.contains("302%"), "{out}");
}

#[test]
fn bad_input_exits_2_with_a_clear_message() {
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["--output-tokens", "0"], "--output-tokens"),
        (vec!["--output-tokens", "-5"], "--output-tokens"),
        (
            vec!["--completions", "-3", "--avg-output-tokens", "100"],
            "--completions",
        ),
        (vec![], "--output-tokens"),
        (vec!["--output-tokens", "1e9", "--node", "tpu-v9"], "tpu-v9"),
        (
            vec!["--output-tokens", "1e9", "--deadline", "soon"],
            "--deadline",
        ),
        (
            vec!["--output-tokens", "1e9", "--max-latency", "1 fortnight"],
            "--max-latency",
        ),
        (
            vec!["--output-tokens", "1e9", "--model", "gpt-9"],
            "--model",
        ),
    ];
    for (args, needle) in cases {
        let o = plan(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stdout(&o));
        let err = stderr(&o);
        assert!(err.contains(needle), "{args:?}: {err}");
    }

    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(
        &bad,
        "[[node]]\nname = \"a\"\ngpu = \"H100\"\ngpus_per_node = 8\n\n[[node]]\nname = \"b\"\ngpu = \"Voodoo 2\"\ngpus_per_node = 1\n",
    )
    .unwrap();
    let o = plan(&["--output-tokens", "1e9", "--catalog", bad.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(
        err.contains("bad.toml") && err.contains("line 8") && err.contains("`gpu`"),
        "{err}"
    );

    let missing = dir.path().join("nope.json");
    let o = plan(&[
        "--output-tokens",
        "1e9",
        "--results",
        missing.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("nope.json"), "{}", stderr(&o));
}

#[test]
fn limits_and_a_node_described_by_flags() {
    let o = plan(&[
        "--results",
        &seed("rtxpro6000-4x-tp4-qwen3.5-122b.json"),
        "--gpu",
        "RTX PRO 6000",
        "--gpus-per-node",
        "4",
        "--usd-per-node-hour",
        "8",
        "--output-tokens",
        "1.64e9",
        "--max-concurrency",
        "32",
        "--resamples",
        "200",
        "--format",
        "json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let p = json(&o);
    let row = &p["nodes"][0];
    assert_eq!(row["node"], "4x RTX PRO 6000 Blackwell (run)");
    assert_eq!(f(&row["concurrency_per_replica"]), 32.0);
    assert!(row["how"]
        .as_str()
        .unwrap()
        .contains("--max-concurrency 32"));
    assert_eq!(f(&row["usd_per_node_hour"]), 8.0);
    // The fitted throughput at 32 is close to the 1,515.1 measured there.
    assert!((f(&row["tok_s_per_node"]["p50"]) - 1515.1).abs() < 0.05 * 1515.1);
}

#[test]
fn model_facts_from_a_hugging_face_config() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.json");
    std::fs::write(
        &config,
        r#"{"architectures": ["LlamaForCausalLM"], "hidden_size": 4096,
            "intermediate_size": 14336, "num_attention_heads": 32, "num_hidden_layers": 32,
            "num_key_value_heads": 8, "torch_dtype": "bfloat16", "vocab_size": 128256}"#,
    )
    .unwrap();
    let catalog = dir.path().join("c.toml");
    std::fs::write(
        &catalog,
        r#"
[[node]]
name = "h100-1x"
gpu = "H100 SXM"
gpus_per_node = 1
model = "my-llama"
basis = "measured"
tok_s_per_node = 2500
concurrency_per_replica = 64
source = "our own run"
usd_per_node_hour = 2.5
"#,
    )
    .unwrap();
    let o = plan(&[
        "--output-tokens",
        "1e9",
        "--avg-output-tokens",
        "1000",
        "--completions",
        "1000000",
        "--model",
        "my-llama",
        "--model-config",
        config.to_str().unwrap(),
        "--catalog",
        catalog.to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let p = json(&o);
    assert!(
        (f(&p["model"]["params_b"]) - 8.03).abs() < 0.01,
        "{}",
        p["model"]
    );
    assert_eq!(f(&p["model"]["kv_bytes_per_token"]), 131_072.0);
    let row = node(&p, "h100-1x");
    // 16.06 GB of weights per step; Little's law: 64 x 1000 / 2500 = 25.6 s per request.
    assert!((f(&row["roofline"]["weight_gb_per_step"]) - 16.06).abs() < 0.01);
    assert!((f(&row["latency_s"]) - 25.6).abs() < 0.01);
    assert!((f(&row["usd_per_million_tokens"]) - 2.5 / (2500.0 * 3600.0) * 1e6).abs() < 1e-9);

    // A MoE config without --params is refused with the flag named.
    std::fs::write(
        &config,
        r#"{"num_hidden_layers": 48, "num_attention_heads": 32, "num_key_value_heads": 4,
            "head_dim": 128, "num_experts": 128, "torch_dtype": "bfloat16"}"#,
    )
    .unwrap();
    let o = plan(&[
        "--output-tokens",
        "1e9",
        "--model-config",
        config.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--params"), "{}", stderr(&o));
}

/// Issue 30 item 9, in one run of the seeds' job on the built-in catalog: rows of two models
/// without --model are refused (naming both and the flag); with --model, `--json -` puts the
/// JSON alone on stdout (the table on stderr), the scaled H100 row is capped at the 66
/// sequences its memory holds (the measured RTX node holds 119), unknown intervals are null,
/// and the input length nobody gave is said to count as 0 tokens.
#[test]
fn the_planner_asks_for_the_model_caps_scaled_rows_at_memory_and_writes_null() {
    let o = plan(&["--completions", "902087", "--avg-output-tokens", "1818"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    for said in [
        "Qwen3.6-27B",
        "Qwen3.5-122B-A10B",
        "rtxpro6000-4x-tp4",
        "--model",
    ] {
        assert!(stderr(&o).contains(said), "{said}: {}", stderr(&o));
    }

    let o = plan(&[&SEEDS_QUESTION[..], &["--json", "-"]].concat());
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let p = json(&o);
    assert!(stderr(&o).contains("h100-8x"), "the table goes to stderr");
    let h100 = node(&p, "h100-8x");
    assert_eq!(h100["basis"], "scaled");
    assert_eq!(f(&h100["concurrency_per_replica"]), 66.0, "{h100}");
    let notes = h100["notes"].to_string();
    assert!(notes.contains("capped at the 66 sequences"), "{notes}");
    // The same share of the bound as the measured node, not 68% of it at 66 sequences.
    let share = |n: &serde_json::Value| f(&n["roofline"]["efficiency"]);
    let rtx8 = node(&p, "rtxpro6000-8x-dp");
    assert!((share(h100) - share(rtx8)).abs() < 0.01, "{h100}");
    assert!(f(&h100["tok_s_per_node"]["p50"]) < 0.7 * 17_647.0);
    // Unknown intervals: no p10/p90 that look like a zero-width measured one.
    assert!(h100["tok_s_per_node"]["p10"].is_null(), "{h100}");
    assert!(h100["days"]["p90"].is_null(), "{h100}");
    assert!(f(&h100["days"]["p50"]) > 0.0);
    // A claim's range stays: P10 and P90 are its ends.
    assert!(f(&node(&p, "b200-7x")["days"]["p90"]) > f(&node(&p, "b200-7x")["days"]["p50"]));
    assert!(
        p["notes"].to_string().contains("input length unknown"),
        "{}",
        p["notes"]
    );
}

/// "How long for 902,087 completions on 8 nodes?" answered directly: the job on exactly 8
/// nodes of each type, the work shared and the end-of-job tail not, with its cost; plan.json
/// tabulates 1 to 128 nodes as well.
#[test]
fn nodes_gives_the_job_on_exactly_that_many_nodes() {
    let o = plan(&[
        "-r",
        &seed("rtxpro6000-4x-tp4-qwen3.5-122b.json"),
        "--completions",
        "902087",
        "--avg-output-tokens",
        "1818",
        "--nodes",
        "8",
        "--json",
        "-",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let plan: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let table = stderr(&o);
    assert!(table.contains("on 8 nodes"), "{table}");
    assert!(table.contains("fastest on 8 nodes: "), "{table}");
    let rows = plan["nodes"].as_array().unwrap();
    assert!(rows.len() >= 3);
    for row in rows {
        let one_node_s = row["days"]["p50"].as_f64().unwrap() * 86_400.0;
        let on = &row["on_nodes"];
        assert_eq!(on["nodes"], 8, "{row}");
        let job = on["job_s"]["p50"].as_f64().unwrap();
        let tail = on["tail_s"].as_f64().unwrap();
        assert!(tail >= 0.0 && tail < job, "{row}");
        assert!(
            (job - (one_node_s / 8.0 + tail)).abs() < 1e-6 * job,
            "{row}"
        );
        // P10 and P90 are null where the row has no spread (a catalog figure).
        assert!(
            on["job_s"]["p10"].as_f64().is_none_or(|t| t <= job),
            "{row}"
        );
        assert!(
            on["job_s"]["p90"].as_f64().is_none_or(|t| t >= job),
            "{row}"
        );
        if let Some(price) = row["usd_per_node_hour"].as_f64() {
            let cost = on["cost_usd"]["p50"].as_f64().unwrap();
            assert!(
                (cost - job * 8.0 * price / 3600.0).abs() < 1e-6 * cost,
                "{row}"
            );
        }
        let counts: Vec<u64> = (row["by_node_count"].as_array().unwrap().iter())
            .map(|f| f["nodes"].as_u64().unwrap())
            .collect();
        assert_eq!(counts, vec![1, 2, 4, 8, 16, 32, 64, 128]);
        // More nodes never take longer, and never less than the tail.
        let times: Vec<f64> = (row["by_node_count"].as_array().unwrap().iter())
            .map(|f| f["job_s"]["p50"].as_f64().unwrap())
            .collect();
        assert!(times.windows(2).all(|w| w[1] <= w[0]), "{times:?}");
        assert!(times.iter().all(|t| *t >= tail));
    }
    // The measured run's row: 8 nodes of 4 x RTX PRO 6000 take a little over an eighth of
    // the one-node 11.8 days.
    let run = &rows[0];
    let days = run["on_nodes"]["days"]["p50"].as_f64().unwrap();
    assert!((1.4..1.6).contains(&days), "{run}");
}

#[test]
fn prices_of_ones_own_catalog_are_not_called_illustrative() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = dir.path().join("ours.toml");
    // The built-in catalog with our own prices' notes in place of its "illustrative" ones.
    let text = std::fs::read_to_string(fixtures().join("catalog.toml")).unwrap();
    std::fs::write(&catalog, text.replace("illustrative", "our contract")).unwrap();
    let args = |c: Option<&str>| {
        let mut a = SEEDS_QUESTION.to_vec();
        if let Some(c) = c {
            a.extend(["--catalog", c]);
        }
        plan(&a)
    };
    let builtin = stdout(&args(None));
    assert!(builtin.contains("illustrative prices"), "{builtin}");
    let ours = stdout(&args(Some(catalog.to_str().unwrap())));
    assert!(!ours.contains("illustrative"), "{ours}");
    assert!(ours.contains("your catalog's prices"), "{ours}");
}

/// Issue 37: a run of one session gave a "+-0.1%" interval that read as the whole truth. The
/// interval's figure now carries its caveat (a `*` the legend explains), and plan.json says
/// `one_session`.
#[test]
fn one_sessions_interval_is_marked_in_the_figure_itself() {
    use crate::common::*;
    let dir = tempfile::tempdir().unwrap();
    let sim = Sim::start(1, &["--preset", "instant"]);
    let profile = write_profile(dir.path(), "one", &sim.urls, QUICK_BODY);
    let out = dir.path().join("run");
    let o = run_bench_cli(&profile, &out, &["--no-plots", "--no-progress"]);
    assert_eq!(code(&o), 0, "{}", text(&o));
    let results = out.join("results.json");
    let o = plan(&[
        "-r",
        results.to_str().unwrap(),
        "--completions",
        "100000",
        "--avg-output-tokens",
        "10",
        "--json",
        "-",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let table = stderr(&o);
    let row = (table.lines())
        .find(|l| l.contains("(run)") && l.contains("measured"))
        .unwrap_or_else(|| panic!("no measured row:\n{table}"));
    assert!(
        row.split_whitespace().any(|cell| cell.ends_with('*')),
        "{row}"
    );
    assert!(table.contains("*: one session's trials"), "{table}");
    let plan: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let measured = (plan["nodes"].as_array().unwrap().iter())
        .find(|n| n["basis"] == "measured")
        .unwrap();
    assert_eq!(measured["interval"]["one_session"], true, "{measured}");
}
