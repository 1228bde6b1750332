//! `selfbench --trial-lengths`: a row of peak RSS per trial length, from child processes.

use crate::common::*;

#[test]
fn trial_lengths_report_peak_rss_per_length() {
    let _turn = timing_lock();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("memory.json");
    let out = run(&[
        "selfbench",
        "--trial-lengths",
        "300ms,600ms",
        "--memory-preset",
        "instant",
        "--memory-streams",
        "2",
        "--memory-tokens",
        "16",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    assert!(text(&out).contains("peak MiB"), "{}", text(&out));
    let rows = read_json(&json);
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 2);
    for r in rows {
        assert!(r["rss_peak_bytes"].as_u64().unwrap() >= r["rss_idle_bytes"].as_u64().unwrap());
        assert!(r["output_tokens"].as_u64().unwrap() > 0, "{r}");
        assert_eq!(r["failed"], 0);
    }
    assert!(rows[1]["trial_s"].as_f64().unwrap() > rows[0]["trial_s"].as_f64().unwrap());
}
