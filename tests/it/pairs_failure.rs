//! Issue 46: a pair of slots whose server does not start loses its block and the
//! opposite-order partner, named, while the run goes on with the other pairs (the shape of
//! the run, not its timing: beside the other tests, not under `alone`).

use crate::alone::pairs_cli::{bench_pairs, gate_exit, server};
use crate::common::*;
use crate::crossover_cli::profile;

#[test]
fn a_pair_whose_server_does_not_start_is_left_out_and_named() {
    let dir = tempfile::tempdir().unwrap();
    let p = profile(dir.path());
    let out = dir.path().join("out");
    let s = server(1.0, Some("3"));
    bench_pairs(
        &p,
        &out,
        &s,
        &s,
        &["0;1", "2;3"],
        &["--blocks", "2", "--max-blocks", "2"],
    );
    let results = read_json(&out.join("results.json"));
    let dropped: Vec<&str> = (results["servers"]["dropped"].as_array().unwrap().iter())
        .map(|d| d.as_str().unwrap())
        .collect();
    assert_eq!(dropped.len(), 2, "{dropped:?}");
    assert!(dropped[0].contains("on pair 1 (2;3) failed"), "{dropped:?}");
    assert!(dropped[0].contains("opposite-order partner"), "{dropped:?}");
    assert!(
        dropped[1].contains("left out for the rest of the run"),
        "{dropped:?}"
    );
    // The blocks that count ran on pair 0, one each way round.
    let blocks = results["servers"]["blocks"].as_array().unwrap();
    assert_eq!(blocks.len(), 2, "{blocks:?}");
    assert!(blocks.iter().all(|b| b["pair"] == 0), "{blocks:?}");
    let (_, verdict) = gate_exit(&out);
    let warnings = verdict["warnings"].to_string();
    assert!(warnings.contains("pair 1 (2;3) failed"), "{warnings}");
}
