//! A results file that holds less than its run measured (a level of both arms, one trial of
//! one block, a level written twice) is refused by `gate`, `baseline bless` and `merge` with exit 2,
//! naming what it lacks: judged, the levels kept could pass a pull request whose cut level
//! regressed. The run is the real binary's, in blocks on the simulator; traffic stays on
//! 127.0.0.1.

use std::path::Path;

use serde_json::Value;

use crate::common::*;
use crate::crossover_cli::{bench_blocks, profile, server};
use crate::pooled_legs::merge;

/// An edit of a results file's JSON.
type Cut = fn(&mut Value);

/// A copy of `results` at `dir/NAME.json` with `cut` applied.
fn cut_copy(results: &Path, dir: &Path, name: &str, cut: Cut) -> std::path::PathBuf {
    let mut v = read_json(results);
    cut(&mut v);
    let path = dir.join(format!("{name}.json"));
    std::fs::write(&path, v.to_string()).unwrap();
    path
}

/// The level of `levels` at concurrency `c`.
fn level(levels: &mut Value, c: u64) -> &mut Value {
    (levels.as_array_mut().unwrap().iter_mut())
        .find(|l| l["concurrency"] == c)
        .unwrap()
}

fn without_c1(v: &mut Value) {
    for levels in ["/levels", "/base/levels"] {
        let levels = v.pointer_mut(levels).unwrap().as_array_mut().unwrap();
        levels.retain(|l| l["concurrency"] != 1);
    }
}

fn one_trial_of_block_2_gone(v: &mut Value) {
    let trials = level(&mut v["levels"], 4)["trials"].as_array_mut().unwrap();
    let at = trials.iter().position(|t| t["block"] == 2).unwrap();
    trials.remove(at);
}

fn c4_twice(v: &mut Value) {
    let copy = level(&mut v["levels"], 4).clone();
    v["levels"].as_array_mut().unwrap().push(copy);
}

#[test]
fn a_results_file_cut_by_hand_is_refused_naming_what_it_lacks() {
    let dir = tempfile::tempdir().unwrap();
    let p = profile(dir.path());
    let out = dir.path().join("run");
    let same = server(1.0);
    let o = bench_blocks(
        &p,
        &out,
        &same,
        &same,
        &["--blocks", "2", "--max-blocks", "2"],
    );
    assert_eq!(code(&o), 0, "{}", text(&o));
    let results = out.join("results.json");
    let o = gate_own_arms(&results, &out.join("verdict.json"));
    assert_eq!(code(&o), 0, "the run as written is judged: {}", text(&o));
    let cuts: [(&str, Cut, &str); 3] = [
        (
            "level",
            without_c1,
            "the head arm holds no C=1 of the C=1, C=4 it planned; the base arm holds no C=1",
        ),
        (
            "trial",
            one_trial_of_block_2_gone,
            "the head arm's C=4 holds 2 trials of block 2; its profile asks for 3",
        ),
        ("twice", c4_twice, "the head arm holds C=4 more than once"),
    ];
    for (name, cut, said) in cuts {
        let cut_file = cut_copy(&results, dir.path(), name, cut);
        let verdict = dir.path().join(format!("{name}-verdict.json"));
        let o = gate_own_arms(&cut_file, &verdict);
        assert_eq!(code(&o), 2, "{name}: {}", text(&o));
        assert!(text(&o).contains(said), "{name}: {}", text(&o));
        assert!(text(&o).contains(&format!("cannot gate {}", cut_file.display())));
        assert!(!verdict.exists(), "{name}: a verdict was written");
    }
    // The run's folder as a leg of `merge`, its verdict beside it and its results cut after:
    // the leg fails the merge, named.
    let cut_file = cut_copy(&results, dir.path(), "leg", without_c1);
    std::fs::copy(&cut_file, &results).unwrap();
    let o = merge(&out, &dir.path().join("merged"), "1");
    assert_eq!(code(&o), 2, "{}", text(&o));
    assert!(
        text(&o).contains("does not hold what its plan measured: the head arm holds no C=1"),
        "{}",
        text(&o)
    );
}

/// A plain run with one trial cut becomes no baseline: its sessions would be the kept ones.
#[test]
fn a_cut_run_cannot_be_blessed() {
    let dir = tempfile::tempdir().unwrap();
    let sim = Sim::start(1, &["--preset", "fast"]);
    let p = write_profile(dir.path(), "cut", &sim.urls, QUICK_BODY);
    let plain = dir.path().join("plain");
    bench_ok(&p, &plain);
    let clean = without_client_flags(&plain.join("results.json"));
    let cut = cut_copy(&clean, dir.path(), "cut", |v| {
        v["levels"][0]["trials"].as_array_mut().unwrap().pop();
    });
    let baseline = dir.path().join("b.toml");
    let o = bless(&cut, &baseline, &[]);
    assert_eq!(code(&o), 2, "{}", text(&o));
    assert!(
        text(&o).contains("the head arm's C=1 holds 4 trials; its profile asks for 5"),
        "{}",
        text(&o)
    );
    assert!(!baseline.exists());
    let o = bless(&clean, &baseline, &[]);
    assert_eq!(code(&o), 0, "the run as written is blessed: {}", text(&o));
}
