//! Issue 46: every slot pair of the node at once. `--slots` once per pair: a round runs one
//! block on each pair at the same time, orientations balanced over the look; each block
//! records its pair, and a pair whose server does not start loses its block and the
//! opposite-order partner, named, while the run goes on with the other pairs.

use std::path::Path;

use crate::common::*;
use crate::crossover_cli::profile;

/// A simulator whose slot 1 of each pair is faster by its own amount (GPU 1 by 2%, 3 by 4%,
/// 5 by 5%, 7 by 6%), times `slowdown`; `broken`: a GPU on which the server never starts.
pub(crate) fn server(slowdown: f64, broken: Option<&str>) -> String {
    let fail = broken.map_or(String::new(), |g| {
        format!("if [ {{gpus}} = {g} ]; then echo no GPU >&2; exit 1; fi; ")
    });
    format!(
        "{fail}exec {} serve-sim --port {{port}} --preset fast --slowdown \
         $(case {{gpus}} in 1) echo {};; 3) echo {};; 5) echo {};; 7) echo {};; *) echo {};; esac)",
        bin(),
        slowdown * 0.98,
        slowdown * 0.96,
        slowdown * 0.95,
        slowdown * 0.94,
        slowdown
    )
}

pub(crate) fn bench_pairs(
    p: &Path,
    out: &Path,
    head: &str,
    base: &str,
    pairs: &[&str],
    extra: &[&str],
) -> std::process::Output {
    let mut args = vec![
        "--no-progress",
        "--no-plots",
        "--server-command",
        head,
        "--base-server-command",
        base,
    ];
    for pair in pairs {
        args.extend(["--slots", pair]);
    }
    args.extend_from_slice(extra);
    let o = run_bench_cli(p, out, &args);
    assert_eq!(code(&o), 0, "{}", text(&o));
    o
}

pub(crate) fn gate_exit(out: &Path) -> (i32, serde_json::Value) {
    let o = gate_own_arms(&out.join("results.json"), &out.join("verdict.json"));
    (code(&o), read_json(&out.join("verdict.json")))
}

const NODE: [&str; 4] = ["0;1", "2;3", "4;5", "6;7"];

#[test]
fn four_pairs_run_the_first_look_in_one_round_and_catch_a_slower_head() {
    let _turn = timing_lock();
    let dir = tempfile::tempdir().unwrap();
    let p = profile(dir.path());
    // Unchanged: the first look's 4 blocks, one on each pair, each way round twice.
    let same = dir.path().join("same");
    let s = server(1.0, None);
    bench_pairs(
        &p,
        &same,
        &s,
        &s,
        &NODE,
        &["--blocks", "4", "--max-blocks", "4"],
    );
    let results = read_json(&same.join("results.json"));
    let blocks = results["servers"]["blocks"].as_array().unwrap();
    let pairs: Vec<u64> = blocks.iter().map(|b| b["pair"].as_u64().unwrap()).collect();
    assert_eq!(pairs, [0, 1, 2, 3]);
    let head_on_1 = blocks.iter().filter(|b| b["head_slot"] == 1).count();
    assert_eq!(
        head_on_1, 2,
        "orientations balanced over the look: {blocks:?}"
    );
    assert_eq!(results["servers"]["pairs"].as_array().unwrap().len(), 4);
    let (exit, verdict) = gate_exit(&same);
    assert_eq!(exit, 0, "{verdict}");
    assert!(
        !verdict["warnings"].to_string().contains("pairs:"),
        "{verdict}"
    );
    // 10% slower head: a regression, whatever each pair's own slot effect. Room for more
    // than one round: the first look waits until every pair has run both ways round (8
    // blocks in 2 rounds, said before the run), so that each pair's own slot effect is taken
    // out of its blocks. Before, it looked after 4 blocks (one a pair) and every later look
    // ran 2 blocks on pairs 0 and 1 only: pairs 2 and 3 never ran the other way round.
    let slow = dir.path().join("slow");
    let head = server(1.0 / 0.9, None);
    let o = bench_pairs(
        &p,
        &slow,
        &head,
        &s,
        &NODE,
        &["--blocks", "4", "--max-blocks", "8"],
    );
    let results = read_json(&slow.join("results.json"));
    let blocks = results["servers"]["blocks"].as_array().unwrap();
    assert_eq!(blocks.len(), 8, "{blocks:?}");
    for pair in 0..4 {
        let ways: Vec<u64> = (blocks.iter())
            .filter(|b| b["pair"] == pair)
            .map(|b| b["head_slot"].as_u64().unwrap())
            .collect();
        assert!(
            ways.contains(&0) && ways.contains(&1),
            "pair {pair} ran one way round only: {blocks:?}"
        );
    }
    assert!(
        text(&o).contains(
            "4 pairs: the first look waits for 8 block(s), 2 round(s), so that every pair has \
             run both ways round"
        ),
        "{}",
        text(&o)
    );
    let (exit, verdict) = gate_exit(&slow);
    assert_eq!(exit, 1, "{verdict}");
    assert_eq!(verdict["outcome"], "regression");
    let slots = &verdict["levels"][0]["test"]["crossover"]["groups"]["slots"];
    assert_eq!(slots.as_array().map(Vec::len), Some(4), "{verdict}");
    // A head 8% slower on pair 3 alone: over two rounds (each pair both ways round) the
    // verdict names the pair whose gap differs. At one block per pair a pair's gap cannot be
    // told from the slot effect (docs/gate-calibration.md, table 8).
    let odd = dir.path().join("odd");
    let head = format!(
        "exec {} serve-sim --port {{port}} --preset fast --slowdown $(case {{gpus}} in \
         1) echo 0.98;; 3) echo 0.96;; 5) echo 0.95;; 6) echo 1.08;; 7) echo {};; \
         *) echo 1;; esac)",
        bin(),
        0.94 * 1.08
    );
    bench_pairs(
        &p,
        &odd,
        &head,
        &s,
        &NODE,
        &["--blocks", "8", "--max-blocks", "8"],
    );
    let (_, verdict) = gate_exit(&odd);
    let warnings = verdict["warnings"].to_string();
    assert!(warnings.contains("pairs: pair 3 (6;7)"), "{warnings}");
}
