//! Hostile names and warnings in results and a baseline, gated inside Actions (the rest of
//! issue 29's text rules are in tests/it/untrusted_text.rs): the console, the annotations,
//! the job summary, verdict.md and pr-comment.md render nothing of them. Here because the
//! gate's relative run measures.

use crate::common::*;
use crate::untrusted_text::{assert_renders_no_markup, assert_runs_nothing, command, HOSTILE};

/// Results and a baseline whose names and warnings are hostile, gated inside Actions: the
/// console, the annotations, the job summary, verdict.md and pr-comment.md.
#[test]
fn hostile_names_and_warnings_render_nothing_in_the_gates_outputs() {
    let _turn = timing_lock();
    let dir = tempfile::tempdir().unwrap();
    let sim = Sim::start(1, &["--preset", "fixed", "--token-delay-ms", "1"]);
    let profile = write_profile(
        dir.path(),
        "p",
        &sim.urls,
        "[workload]\ninput_tokens = 8\nmax_tokens = 16\nignore_eos = true\n[sweep]\n\
         concurrency = [1, 2]\nrequests_per_level = 4\nwarmup_requests = 0\ntrials = 3\n\
         [gate]\nmin_trials = 3\n",
    );
    let out = dir.path().join("run");
    bench_ok(&profile, &out);
    let clean = without_client_flags(&out.join("results.json"));
    let baseline = dir.path().join("base.toml");
    let name = format!("b`{HOSTILE}");
    let o = bless(&clean, &baseline, &["--name", &name]);
    assert_eq!(code(&o), 0, "{}", text(&o));
    let mut results = read_json(&clean);
    results["profile_name"] = format!("p``{HOSTILE}").into();
    results["warnings"] = serde_json::json!([HOSTILE, format!("| x | {HOSTILE}")]);
    let hostile = dir.path().join("hostile.json");
    std::fs::write(&hostile, results.to_string()).unwrap();
    let md = dir.path().join("verdict").join("verdict.md");
    std::fs::create_dir_all(md.parent().unwrap()).unwrap();
    let o = command(dir.path(), true)
        .args(["gate", "--allow-client-bound", "--results"])
        .arg(&hostile)
        .arg("--baseline")
        .arg(&baseline)
        .arg("--markdown")
        .arg(&md)
        .arg("--json")
        .arg(md.with_file_name("verdict.json"))
        .output()
        .unwrap();
    assert!([0, 1, 3].contains(&code(&o)), "{}", text(&o));
    assert_runs_nothing(&o);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.lines().filter(|l| l.starts_with("::")).count() > 0,
        "the gate's own warnings are annotations: {stdout}"
    );
    let summary = std::fs::read_to_string(dir.path().join("summary.md")).unwrap();
    assert_renders_no_markup(&summary, "the job summary");
    assert_renders_no_markup(&std::fs::read_to_string(&md).unwrap(), "verdict.md");
    let comment = std::fs::read_to_string(md.with_file_name("pr-comment.md")).unwrap();
    assert_renders_no_markup(&comment, "pr-comment.md");
    // The names are shown, in their code spans, whole.
    assert!(summary.contains("Approved by throughline"), "{summary}");

    // `merge` of the hostile run, its verdict and an unfinished leg with a hostile model id.
    let mut stopped = results.clone();
    stopped["complete"] = false.into();
    stopped["environment"]["model"] = HOSTILE.into();
    let stopped_path = dir.path().join("stopped.json");
    std::fs::write(&stopped_path, stopped.to_string()).unwrap();
    let _ = std::fs::remove_file(dir.path().join("summary.md"));
    let merged = dir.path().join("merged");
    let o = command(dir.path(), true)
        .args(["merge", "--results"])
        .arg(&hostile)
        .arg("--results")
        .arg(&stopped_path)
        .arg("--verdict")
        .arg(md.with_file_name("verdict.json"))
        .arg("--out")
        .arg(&merged)
        .output()
        .unwrap();
    assert!([0, 1, 2, 3].contains(&code(&o)), "{}", text(&o));
    assert_runs_nothing(&o);
    let summary = std::fs::read_to_string(dir.path().join("summary.md")).unwrap();
    assert!(summary.contains("Approved by throughline"), "{summary}");
    assert_renders_no_markup(&summary, "merge's job summary");
    let report = std::fs::read_to_string(merged.join("report.md")).unwrap();
    assert_renders_no_markup(&report, "merge's report.md");
}
