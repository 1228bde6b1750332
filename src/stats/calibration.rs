//! The gate's promise, checked by simulation with a fixed seed: the decision procedure
//! (one-sided Welch per level on ln(tokens/s), Holm across levels, [`level_fails`] with
//! family alpha 0.01 and a 3% minimum effect) rarely fails an unchanged server and usually
//! catches a real 6% drop at one level. An independent SciPy/statsmodels version of the same
//! simulation is in `reference/calibration_sim.py`.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::{compare_log_ratio, holm, level_fails};

const LEVELS: usize = 5;
const CV: f64 = 0.02;
const ALPHA: f64 = 0.01;
const MIN_EFFECT: f64 = 0.03;
const MIN_TRIALS: usize = 3;

fn std_normal(rng: &mut ChaCha8Rng) -> f64 {
    let u1: f64 = 1.0 - rng.gen::<f64>(); // (0, 1]
    let u2: f64 = rng.gen();
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

/// Trials of tokens/s with lognormal noise of the given CV around `level`.
fn trials(rng: &mut ChaCha8Rng, level: f64, n: usize) -> Vec<f64> {
    let sd = (1.0 + CV * CV).ln().sqrt();
    (0..n)
        .map(|_| level * (sd * std_normal(rng)).exp())
        .collect()
}

/// One gate comparison over five levels; returns which levels FAIL. `factor[i]` multiplies
/// the candidate's true throughput at level i.
fn gate_once(rng: &mut ChaCha8Rng, factor: [f64; LEVELS], n: usize) -> [bool; LEVELS] {
    // Different true throughput per level, as in a real sweep.
    let truth = [120.0, 400.0, 1200.0, 1500.0, 1580.0];
    let mut p = [0.0; LEVELS];
    let mut ratio = [0.0; LEVELS];
    for i in 0..LEVELS {
        let b = trials(rng, truth[i], n);
        let c = trials(rng, truth[i] * factor[i], n);
        let r = compare_log_ratio(&b, &c, 0.95, 0.0).unwrap();
        p[i] = r.p_slower;
        ratio[i] = r.ratio;
    }
    let adj = holm(&p);
    let mut out = [false; LEVELS];
    for i in 0..LEVELS {
        out[i] = level_fails(adj[i], ratio[i], ALPHA, MIN_EFFECT, n, n, MIN_TRIALS);
    }
    out
}

/// Fraction of `sims` comparisons in which the regressed level fails, and the number of
/// comparisons in which some unchanged level failed.
fn detection(rng: &mut ChaCha8Rng, sims: usize, n: usize, regressed: usize) -> (f64, usize) {
    let mut factor = [1.0; LEVELS];
    factor[regressed] = 0.94;
    let (mut caught, mut other) = (0, 0);
    for _ in 0..sims {
        let fails = gate_once(rng, factor, n);
        caught += usize::from(fails[regressed]);
        other += usize::from(fails.iter().enumerate().any(|(i, &f)| f && i != regressed));
    }
    (caught as f64 / sims as f64, other)
}

/// The gate's promise. Measured with this seed: A/A false failures 0.50%; a 6% drop at one of
/// five levels caught 68.8% of the time with 5 vs 5 trials (the independent SciPy simulation,
/// reference/calibration_sim.py, 20,000 comparisons: A/A 0.465%; its 6%-drop half was not run to completion).
/// That is *below* the 70% target: with 5 trials a side, Holm's first step needs a one-sided
/// p < 0.002, and Welch's estimated df (at most 8, often fewer) costs power; Student's t with
/// its exact 8 df would reach about 77% (scipy.stats.nct). The bound asserted for 5 vs 5 is
/// therefore what the procedure delivers (>= 65%, so a loss of power still fails this test);
/// with 6 trials a side the 70% promise holds and is asserted.
#[test]
fn gate_is_calibrated_on_aa_and_catches_a_six_percent_drop() {
    let mut rng = ChaCha8Rng::seed_from_u64(0x7468_726f_7567_6800);
    let sims = 3000;

    let false_failures = (0..sims)
        .filter(|_| gate_once(&mut rng, [1.0; LEVELS], 5).iter().any(|&f| f))
        .count();
    let aa_rate = false_failures as f64 / sims as f64;
    let (det5, other5) = detection(&mut rng, sims, 5, 2);
    let (det6, other6) = detection(&mut rng, sims, 6, 2);
    eprintln!(
        "gate calibration ({sims} comparisons each, {LEVELS} levels, lognormal CV {CV}, Holm alpha {ALPHA}, \
         min effect {MIN_EFFECT}): A/A false-failure rate {aa_rate:.4} ({false_failures}/{sims}, 5 vs 5 trials); \
         6% drop at one level caught {det5:.4} with 5 vs 5 trials, {det6:.4} with 6 vs 6; \
         an unchanged level failed in {other5} and {other6} of those comparisons"
    );
    assert!(aa_rate <= 0.015, "A/A false-failure rate {aa_rate} > 1.5%");
    assert!(
        det5 >= 0.65,
        "6% drop detected only {det5} of the time with 5 vs 5 trials"
    );
    assert!(
        det6 >= 0.70,
        "6% drop detected only {det6} of the time with 6 vs 6 trials"
    );
    // Unchanged levels beside a regressed one fail no more often than in the A/A case.
    assert!(other5 as f64 / sims as f64 <= 0.015 && other6 as f64 / sims as f64 <= 0.015);
}
