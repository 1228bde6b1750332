//! A calibration pooled by evidence over the run's levels (issue 48 item 4). The trials'
//! tok/s are written here (one real run in blocks gives the records' shape), so what each
//! check sees is known: a calibration whose starts spread 1%, then a run of that night whose
//! C=1 blocks spread more by chance (3.5% from 4 blocks; the level's own F test alone set the
//! calibration aside there, and the level stayed INCONCLUSIVE), and a run that spreads 4%
//! at every level (the levels together set it aside everywhere).

use std::path::Path;

use crate::common::*;
use crate::crossover_cli::{bench_blocks, server};

/// `src`'s trials rewritten: ln tok/s = slot effect (+2.5% on slot 1, -2.5% on slot 0) +
/// the head's start offset `head_start[level][block - 1]` + a fixed trial pattern (+-0.5%).
fn synthetic(src: &Path, dst: &Path, head_start: &[[f64; 4]; 4]) {
    let mut run = read_json(src);
    let pattern = [-0.005, 0.0, 0.005];
    for arm in ["head", "base"] {
        let levels = match arm {
            "head" => &mut run["levels"],
            _ => &mut run["base"]["levels"],
        };
        for (li, level) in levels.as_array_mut().unwrap().iter_mut().enumerate() {
            for t in level["trials"].as_array_mut().unwrap() {
                let block = t["block"].as_u64().unwrap() as usize;
                let slot = if t["slot"].as_u64().unwrap() == 1 {
                    0.025
                } else {
                    -0.025
                };
                let start = if arm == "head" {
                    head_start[li][block - 1]
                } else {
                    0.0
                };
                let trial = t["trial"].as_u64().unwrap() as usize;
                let ln = slot + start + pattern[(trial + 2) % 3];
                t["output_tok_per_s"] = serde_json::json!(1000.0 * ln.exp());
            }
        }
    }
    std::fs::write(dst, serde_json::to_string(&run).unwrap()).unwrap();
}

/// Blocks 1-4 with the head's start `u` up, down, down, up (the head on slot 1 in odd
/// blocks): a start spread of about `u` that no orientation explains.
fn spread(u: f64) -> [f64; 4] {
    [u, -u, -u, u]
}

#[test]
fn a_same_night_calibration_is_pooled_by_the_levels_evidence() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let p = write_profile(
        d,
        "xo4",
        &["http://127.0.0.1:1".to_string()],
        "[workload]\nmax_tokens = 16\nignore_eos = true\n[sweep]\nconcurrency = [1, 2, 4, 8]\n\
         requests_per_level = 8\nwarmup_requests = 2\ntrials = 3\n[gate]\nmin_trials = 3\n",
    );
    let sim = Sim::start(1, &["--preset", "fast"]);
    let plain = d.join("plain");
    let o = run_bench_cli(
        &p,
        &plain,
        &["--no-progress", "--no-plots", "-e", &sim.urls[0]],
    );
    assert_eq!(code(&o), 0, "{}", text(&o));
    let baseline = d.join("b.toml");
    let o = bless(
        &without_client_flags(&plain.join("results.json")),
        &baseline,
        &[],
    );
    assert_eq!(code(&o), 0, "{}", text(&o));
    let blocks = d.join("blocks");
    let same = server(1.0);
    let o = bench_blocks(
        &p,
        &blocks,
        &same,
        &same,
        &["--blocks", "4", "--max-blocks", "4"],
    );
    assert_eq!(code(&o), 0, "{}", text(&o));
    let measured = blocks.join("results.json");

    // The calibrating night: starts spread about 1% at every level.
    let cal = d.join("cal.json");
    synthetic(&measured, &cal, &[spread(0.01); 4]);
    let o = run(&[
        "baseline",
        "calibrate",
        "-r",
        cal.to_str().unwrap(),
        "-b",
        baseline.to_str().unwrap(),
    ]);
    assert_eq!(code(&o), 0, "{}", text(&o));

    // A run of that night whose C=1 blocks spread 2.5 times more: its own 3 degrees of
    // freedom put the calibration below the old p 0.25 (own spread used, 2 df: INCONCLUSIVE
    // before issue 48 item 4); the four levels' 12 together agree, so C=1 pools it too.
    let same_night = d.join("same_night.json");
    let mut starts = [spread(0.01); 4];
    starts[0] = spread(0.025);
    synthetic(&measured, &same_night, &starts);
    let o = gate(&same_night, &baseline, &[]);
    let said = text(&o);
    assert_eq!(code(&o), 0, "{said}");
    assert!(said.contains("PASS: no regression"), "{said}");
    assert!(!said.contains("the run's own spread used"), "{said}");
    assert!(
        said.contains("pooled at 2.0 df (the run's 4 levels checked together: p 0.0"),
        "{said}"
    );

    // A night noisier at every level (4% against 1%): the levels together set the
    // calibration aside everywhere, and 4 blocks of their own cannot decide.
    let noisy = d.join("noisy.json");
    synthetic(&measured, &noisy, &[spread(0.03); 4]);
    let o = gate(&noisy, &baseline, &[]);
    let said = text(&o);
    assert_eq!(code(&o), 0, "{said}");
    assert!(said.contains("INCONCLUSIVE"), "{said}");
    assert_eq!(
        said.matches("the run's own spread used (the run's 4 levels checked together: p 0.000)")
            .count(),
        4,
        "{said}"
    );
}
