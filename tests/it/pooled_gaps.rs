//! Runners whose head/base gaps differ (issue 46 item 6): `merge` pools two legs whose heads
//! are 9% and 5% slower. The fail test reads the pool's own average on the blocks' spread
//! within each runner, so the pool is a REGRESSION (before, the gaps' F test sent both sides to the runners' spread
//! with 1 df and the pool was INCONCLUSIVE); the pass bound still reads that spread: legs
//! whose gaps are +3% and -3% never PASS with a bound that rules out runner b's 3% drop.
//! The trials' tok/s are written here (one real run in blocks per leg gives the records'
//! shape), so what the pool sees is known.

use std::path::Path;

use crate::common::*;
use crate::crossover_cli::profile;

/// `results.json`'s trials rewritten ([`rewrite_block_trials`]): the head's gap `gap` and
/// a block wobble.
fn rewrite(results: &Path, gap: f64) {
    let wobble = [0.003, -0.002, -0.003, 0.002];
    rewrite_block_trials(results, results, |_, block| gap + wobble[(block - 1) % 4]);
}

/// One real leg of 4 blocks on one pair, its trials rewritten to the head's `gap`, gated on
/// its own with `gate --json` (what the workflow's leg leaves).
fn leg(p: &Path, legs: &Path, name: &str, gap: f64) {
    crate::pooled_legs::leg_rewritten(p, legs, name, 1.0, |results| rewrite(results, gap));
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
