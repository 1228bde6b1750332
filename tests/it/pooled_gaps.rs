//! Runners whose head/base gaps differ (issue 46 item 6): `merge` pools two legs whose heads
//! are 9% and 5% slower. The fail test reads the pool's own average on the blocks' spread
//! within each runner, so the pool is a REGRESSION (before, the gaps' F test sent both sides to the runners' spread
//! with 1 df and the pool was INCONCLUSIVE); the pass bound still reads that spread: legs
//! whose gaps are +3% and -3% never PASS with a bound that rules out runner b's 3% drop.
//! The trials' tok/s are written here (one real run in blocks per leg gives the records'
//! shape), so what the pool sees is known.

use std::path::Path;

use crate::common::*;
use crate::crossover_cli::{bench_blocks, profile, server};

/// `results.json`'s trials rewritten: ln tok/s = slot effect (+2.5% on slot 1, -2.5% on
/// slot 0) + for the head its gap `gap` and a block wobble + a fixed trial pattern (+-0.5%).
fn rewrite(results: &Path, gap: f64) {
    let mut run = read_json(results);
    let pattern = [-0.005, 0.0, 0.005];
    let wobble = [0.003, -0.002, -0.003, 0.002];
    for arm in ["head", "base"] {
        let levels = match arm {
            "head" => &mut run["levels"],
            _ => &mut run["base"]["levels"],
        };
        for level in levels.as_array_mut().unwrap() {
            for t in level["trials"].as_array_mut().unwrap() {
                let block = t["block"].as_u64().unwrap() as usize;
                let slot = if t["slot"].as_u64().unwrap() == 1 {
                    0.025
                } else {
                    -0.025
                };
                let own = if arm == "head" {
                    gap + wobble[(block - 1) % 4]
                } else {
                    0.0
                };
                let trial = t["trial"].as_u64().unwrap() as usize;
                let ln = slot + own + pattern[(trial + 2) % 3];
                t["output_tok_per_s"] = serde_json::json!(1000.0 * ln.exp());
            }
        }
    }
    std::fs::write(results, serde_json::to_string(&run).unwrap()).unwrap();
}

/// One real leg of 4 blocks on one pair, its trials rewritten to the head's `gap`, gated on
/// its own with `gate --json` (what the workflow's leg leaves).
fn leg(p: &Path, legs: &Path, name: &str, gap: f64) {
    let out = legs.join(name);
    let sim = server(1.0);
    let flags = ["--blocks", "4", "--max-blocks", "4"];
    let o = bench_blocks(p, &out, &sim, &sim, &flags);
    assert_eq!(code(&o), 0, "{name}: {}", text(&o));
    let results = out.join("results.json");
    rewrite(&results, gap);
    let verdict = out.join("verdict.json");
    let o = run(&[
        "gate",
        "--allow-client-bound",
        "--results",
        results.to_str().unwrap(),
        "--json",
        verdict.to_str().unwrap(),
    ]);
    assert!(verdict.is_file(), "{name}: {}", text(&o));
}

/// `merge --expect 2` of the two legs; its exit code and verdict.json.
fn merged(dir: &Path, gaps: [f64; 2]) -> (i32, serde_json::Value) {
    let p = profile(dir);
    let legs = dir.join("legs");
    leg(&p, &legs, "a", gaps[0]);
    leg(&p, &legs, "b", gaps[1]);
    let out = dir.join("merged");
    let o = run(&[
        "merge",
        "--from",
        legs.to_str().unwrap(),
        "--expect",
        "2",
        "-o",
        out.to_str().unwrap(),
    ]);
    (code(&o), read_json(&out.join("verdict.json")))
}

#[test]
fn runners_whose_drops_differ_fail_on_their_average() {
    let dir = tempfile::tempdir().unwrap();
    let (code, v) = merged(dir.path(), [(0.91f64).ln(), (0.95f64).ln()]);
    let check = &v["checks"][0];
    assert_eq!(check["pooled"].as_array().unwrap().len(), 2, "{v:#}");
    for l in check["verdict"]["levels"].as_array().unwrap() {
        let test = &l["test"];
        // The fail test reads the pool's average on the within-runner spread: 7% slower ...
        assert_eq!(test["outcome"], "regression", "{l:#}");
        // ... while the gaps differ beyond the blocks' spread: the pass side reads it, 1 df.
        assert_eq!(test["crossover"]["groups"]["between_judged"], true, "{l:#}");
        assert_eq!(test["pass_df"], 1.0, "{l:#}");
    }
    assert_eq!(code, 1, "{v:#}");
}

#[test]
fn runners_whose_gaps_differ_do_not_pass_narrower_than_their_spread() {
    let dir = tempfile::tempdir().unwrap();
    let (code, v) = merged(dir.path(), [(1.03f64).ln(), (0.97f64).ln()]);
    for l in v["checks"][0]["verdict"]["levels"].as_array().unwrap() {
        let test = &l["test"];
        assert_ne!(test["outcome"], "regression", "{l:#}");
        assert_ne!(test["outcome"], "no_regression", "{l:#}");
        assert!(test["pass_lower"].as_f64().unwrap() < 0.97, "{l:#}");
    }
    assert_ne!(code, 1, "{v:#}");
}
