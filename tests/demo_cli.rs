//! The README's first promise: `throughline demo` runs the main job on the embedded default.

mod common;

use common::*;

#[test]
fn demo_measures_gates_plots_and_plans() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("demo");
    let out = run(&["demo", "--out", out_dir.to_str().unwrap()]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("agg tok/s"), "{stdout}");
    assert!(
        stdout.contains("gating head against base, measured in the same job"),
        "{stdout}"
    );
    // The head is 10% slower than the base: the relative gate catches it at every level.
    assert!(
        stdout.contains("REGRESSION: slower at C=1, C=8, C=32, C=64"),
        "{stdout}"
    );
    assert!(stdout.contains("902,087 completions"), "{stdout}");
    for file in [
        "results.json",
        "requests.jsonl",
        "summary.csv",
        "verdict.md",
        "throughput.png",
        "report.md",
        "ratio.png",
        "pr-comment.md",
        "capacity.png",
        "plan.json",
    ] {
        assert!(out_dir.join(file).is_file(), "{file} missing");
    }
    let result = read_json(&out_dir.join("results.json"));
    assert_eq!(result["levels"].as_array().unwrap().len(), 4);
    assert_eq!(result["base"]["levels"].as_array().unwrap().len(), 4);
    assert_eq!(result["complete"], true);
}
