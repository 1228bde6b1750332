//! Several runners, one verdict (issue 46 item 2): `merge` pools the legs of one comparison
//! (each a run in blocks on its own runner, here the real simulator started by throughline)
//! into one crossover verdict over all their blocks, the runner a factor; a leg whose
//! fingerprint differs is named and judged on its own; a leg that left only logs fails the
//! whole (exit 2).

use std::path::Path;

use crate::common::*;
use crate::crossover_cli::{bench_blocks, profile, server};

/// One leg: 4 blocks on one pair (`--slots "0;1"`), gated on its own with `gate --json`.
fn leg(p: &Path, legs: &Path, name: &str, head_slowdown: f64) {
    leg_rewritten(p, legs, name, head_slowdown, |_| {});
}

/// [`leg`], its results.json given to `rewrite` before the gate reads it (tests that write
/// the trials' values themselves).
pub(crate) fn leg_rewritten(
    p: &Path,
    legs: &Path,
    name: &str,
    head_slowdown: f64,
    rewrite: impl FnOnce(&Path),
) {
    let out = legs.join(name);
    let (head, base) = (server(head_slowdown), server(1.0));
    let o = bench_blocks(
        p,
        &out,
        &head,
        &base,
        &["--blocks", "4", "--max-blocks", "4"],
    );
    assert_eq!(code(&o), 0, "{name}: {}", text(&o));
    let results = out.join("results.json");
    rewrite(&results);
    let verdict = out.join("verdict.json");
    let o = gate_own_arms(&results, &verdict);
    assert!(verdict.is_file(), "{name}: {}", text(&o));
}

/// `throughline merge --from LEGS --expect N -o OUT`.
pub(crate) fn merge(legs: &Path, out: &Path, expect: &str) -> std::process::Output {
    run(&[
        "merge",
        "--from",
        legs.to_str().unwrap(),
        "--expect",
        expect,
        "-o",
        out.to_str().unwrap(),
    ])
}

#[test]
fn three_legs_of_four_blocks_give_one_verdict_of_twelve() {
    let dir = tempfile::tempdir().unwrap();
    let p = profile(dir.path());
    let legs = dir.path().join("legs");
    for name in ["a", "b", "c"] {
        leg(&p, &legs, name, 1.0);
    }
    let out = dir.path().join("merged");
    let o = merge(&legs, &out, "3");
    assert!([0, 1].contains(&code(&o)), "{}", text(&o));
    let v = read_json(&out.join("verdict.json"));
    let checks = v["checks"].as_array().unwrap();
    assert_eq!(checks.len(), 1, "one pooled check: {v:#}");
    assert_eq!(checks[0]["pooled"].as_array().unwrap().len(), 3, "{v:#}");
    let levels = checks[0]["verdict"]["levels"].as_array().unwrap();
    assert!(!levels.is_empty());
    for l in levels {
        let cross = &l["test"]["crossover"];
        assert_eq!(cross["blocks"], 12, "{l:#}");
        // Three runners, each with its own slot effect (the template makes slot 1 5% faster).
        let slots = cross["groups"]["slots"].as_array().unwrap();
        assert_eq!(slots.len(), 3, "{cross:#}");
    }
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        report.contains("blocks per runner and pair: 12 in all over 3 runners"),
        "{report}"
    );
    assert!(text(&o).contains("check: pooled:"), "{}", text(&o));

    // One leg's artifact twice (its run id the same): one leg, its blocks pooled once; it
    // cannot stand in for a fourth leg that never uploaded.
    let copy = dir.path().join("legs/e");
    std::fs::create_dir_all(&copy).unwrap();
    for f in ["results.json", "verdict.json"] {
        std::fs::copy(legs.join("a").join(f), copy.join(f)).unwrap();
    }
    let o = merge(&legs, &out, "4");
    assert_eq!(code(&o), 2, "{}", text(&o));
    assert!(
        text(&o).contains("--expect 4: 3 leg(s) found")
            && text(&o).contains("folders holding the same run count once"),
        "{}",
        text(&o)
    );
    let o = merge(&legs, &out, "3");
    assert!([0, 1].contains(&code(&o)), "{}", text(&o));
    assert!(text(&o).contains("the same run as"), "{}", text(&o));
    let v = read_json(&out.join("verdict.json"));
    let pooled = &v["checks"][0];
    assert_eq!(pooled["pooled"].as_array().unwrap().len(), 3, "{v:#}");
    assert_eq!(
        pooled["verdict"]["levels"][0]["test"]["crossover"]["blocks"],
        12
    );
    std::fs::remove_dir_all(&copy).unwrap();

    // A leg whose GPU driver differs is named and judged on its own.
    let c = legs.join("c/results.json");
    let mut run_c = read_json(&c);
    run_c["environment"]["driver"] = serde_json::json!("999.1");
    std::fs::write(&c, serde_json::to_string(&run_c).unwrap()).unwrap();
    let o = merge(&legs, &out, "3");
    assert!([0, 1].contains(&code(&o)), "{}", text(&o));
    let v = read_json(&out.join("verdict.json"));
    assert_eq!(v["checks"].as_array().unwrap().len(), 2, "{v:#}");
    assert!(
        text(&o).contains("judged on its own") && text(&o).contains("driver: 999.1"),
        "{}",
        text(&o)
    );

    // A leg folder holding only logs fails the whole, naming it.
    let d = legs.join("d");
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("server.log"), "loading").unwrap();
    let o = merge(&legs, &out, "4");
    assert_eq!(code(&o), 2, "{}", text(&o));
    assert!(text(&o).contains("server.log"), "{}", text(&o));
}
