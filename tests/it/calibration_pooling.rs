//! A calibration pooled by evidence over the run's levels (issue 48 item 4). The trials'
//! tok/s are written here (one real run in blocks gives the records' shape), so what each
//! check sees is known: a calibration whose starts spread about 1.2% (sd over 4 blocks), then
//! a run of that night whose C=1 blocks spread more by chance (about 2.9%; the level's own F
//! test alone set the calibration aside there, and the level stayed INCONCLUSIVE), and a run
//! that spreads about 3.5% at every level (the levels together set it aside everywhere).

use std::path::Path;

use crate::common::*;
use crate::crossover_cli::{bench_blocks, server};

/// `src`'s trials rewritten ([`rewrite_block_trials`]) with the head's start offset
/// `head_start[level][block - 1]`.
fn synthetic(src: &Path, dst: &Path, head_start: &[[f64; 4]; 4]) {
    rewrite_block_trials(src, dst, |level, block| head_start[level][block - 1]);
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
    let baseline = baseline_from_a_plain_run(&p, d);
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

    // A night noisier at every level (an sd of about 3.5% against 1.2%): the levels together
    // set the calibration aside everywhere, and 4 blocks of their own cannot decide.
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
