//! Gate calibration: how often do the gate's decision rules (`throughline::stats::decision`)
//! fail an unchanged server (A/A), and how often do they catch a 6% and a 10% drop?
//!
//! Seeded simulation, not a timed test. It repeats the grid of the statistician's
//! `src/stats/reference/calibrate.py` with the Rust functions: 5 levels, within-session CV 2%
//! (lognormal), per-level session offsets with standard deviation sigma_b 0 / 3 / 8%, AR(1)
//! correlation 0 / 0.5 between consecutive trials in the order they ran, and
//!
//! - relative mode, 6 v 6 trials per level: one session (no restart; the session offset is
//!   shared by the arms and cancels) or servers restarted between ABBA blocks (3 blocks x 2,
//!   6 x 1, 2 x 3: each start of each arm draws its own offset). Round r runs every level in a
//!   fresh random order, the arms' halves AB when r is even and BA when odd;
//! - history mode, k = 1 / 2 / 4 / 10 baseline sessions of 5 trials against a candidate
//!   session of 5 (each session its own offset per level and its own AR(1) series).
//!
//! The oracle is the known-variance z test (Holm over 5 levels at 0.008, every level dropped):
//! the most any test could catch with these data.
//!
//! Run: `cargo bench --bench gate_calibration` (20,000 replications per cell, under a minute on
//! one core; the table in `docs/gate-calibration.md`) or `cargo bench --bench gate_calibration
//! -- 4000` (or `GATE_CALIBRATION_REPS=4000`) for a quicker look. With
//! `GATE_CROSSOVER_OUT=benches/tables/gate_crossover` the two tables are also written there as
//! `table-relative.md` and `table-history.md` (tests/it/bench_tables.rs checks the docs against
//! them). Prints Markdown tables; exits 1 when an acceptance bar is
//! missed beyond Monte Carlo error (A/A above 1% by more than 3 standard errors in any cell,
//! or relative 6 v 6 with sigma_b 8% catching a 6% drop less than 85% of the time).

#[path = "common/table_file.rs"]
mod table_file;

use std::time::Instant;

use rand::distributions::Distribution;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use statrs::distribution::{ContinuousCDF, Normal};

use table_file::TableFile;
use throughline::stats::decision::{
    decide, history_level, relative_level, DecisionSettings, LevelOutcome, LevelTest,
};

const L: usize = 5;
const SEED: u64 = 20240614;
const DROPS: [f64; 3] = [0.0, 0.06, 0.10];
const SIGMA_B: [f64; 3] = [0.0, 0.03, 0.08];
const RHO: [f64; 2] = [0.0, 0.5];

/// Within-session sd of ln tok/s for a CV of 2%.
fn sw() -> f64 {
    (1.0_f64 + 0.02 * 0.02).ln().sqrt()
}

struct Sim {
    rng: ChaCha8Rng,
    z: Normal,
}

impl Sim {
    fn new(cell: u64) -> Sim {
        Sim {
            rng: ChaCha8Rng::seed_from_u64(SEED ^ cell.wrapping_mul(0x9E37_79B9_7F4A_7C15)),
            z: Normal::new(0.0, 1.0).unwrap(),
        }
    }

    fn z(&mut self) -> f64 {
        self.z.sample(&mut self.rng)
    }

    /// AR(1) noise with marginal sd SW over `n` consecutive trials.
    fn ar1(&mut self, n: usize, rho: f64) -> Vec<f64> {
        let c = (1.0 - rho * rho).sqrt();
        let mut e = Vec::with_capacity(n);
        let mut prev = self.z();
        e.push(prev * sw());
        for _ in 1..n {
            prev = rho * prev + c * self.z();
            e.push(prev * sw());
        }
        e
    }

    /// Position of each level inside a round (a fresh random order per round).
    fn positions(&mut self) -> [usize; L] {
        let mut order: [usize; L] = std::array::from_fn(|i| i);
        order.shuffle(&mut self.rng);
        let mut pos = [0; L];
        for (p, &l) in order.iter().enumerate() {
            pos[l] = p;
        }
        pos
    }
}

/// One relative job: y[arm][level][round], 6 rounds, ABBA halves, restarts between `blocks`.
fn relative_rep(
    sim: &mut Sim,
    n: usize,
    sb: f64,
    rho: f64,
    drop: f64,
    blocks: Option<usize>,
) -> Vec<LevelTest> {
    let e = sim.ar1(n * 2 * L, rho);
    let mut y = vec![vec![vec![0.0; n]; L]; 2];
    for r in 0..n {
        let pos = sim.positions();
        for (arm, y_arm) in y.iter_mut().enumerate() {
            let half = arm ^ (r % 2);
            for l in 0..L {
                y_arm[l][r] = e[r * 2 * L + half * L + pos[l]];
            }
        }
    }
    let labels: Vec<u32> = match blocks {
        None => {
            for l in 0..L {
                let off = sb * sim.z();
                y.iter_mut()
                    .for_each(|arm| arm[l].iter_mut().for_each(|v| *v += off));
            }
            Vec::new()
        }
        Some(b) => {
            let m = n / b;
            for arm in y.iter_mut() {
                for lv in arm.iter_mut() {
                    for blk in 0..b {
                        let off = sb * sim.z();
                        lv[blk * m..(blk + 1) * m]
                            .iter_mut()
                            .for_each(|v| *v += off);
                    }
                }
            }
            (0..n).map(|r| (r / m) as u32).collect()
        }
    };
    let shift = (1.0 - drop).ln();
    y[1].iter_mut().flatten().for_each(|v| *v += shift);
    (0..L)
        .map(|l| relative_level(&y[0][l], &y[1][l], &labels, &labels, 0.25))
        .collect()
}

/// One history comparison: k baseline sessions and a candidate, 5 trials per level each.
fn history_rep(sim: &mut Sim, k: usize, n: usize, sb: f64, rho: f64, drop: f64) -> Vec<LevelTest> {
    let mut sessions: Vec<Vec<Vec<f64>>> = Vec::with_capacity(k + 1); // [session][level][trial]
    for s in 0..=k {
        let e = sim.ar1(n * L, rho);
        let mut y = vec![vec![0.0; n]; L];
        for r in 0..n {
            let pos = sim.positions();
            for l in 0..L {
                y[l][r] = e[r * L + pos[l]];
            }
        }
        let shift = if s == k { (1.0 - drop).ln() } else { 0.0 };
        for lv in y.iter_mut() {
            let off = sb * sim.z() + shift;
            lv.iter_mut().for_each(|v| *v += off);
        }
        sessions.push(y);
    }
    let cand = sessions.pop().unwrap();
    (0..L)
        .map(|l| {
            let base: Vec<Vec<f64>> = sessions.iter().map(|s| s[l].clone()).collect();
            history_level(&base, &cand[l], 0.25)
        })
        .collect()
}

#[derive(Default, Clone)]
struct Tally {
    reps: usize,
    reg: usize,
    nor: usize,
    inc: usize,
    mdd0: Vec<f64>,
    sb2_sum: f64,
    sb2_n: usize,
}

impl Tally {
    fn add(&mut self, mut levels: Vec<LevelTest>, settings: &DecisionSettings) {
        match decide(&mut levels, settings) {
            LevelOutcome::Regression => self.reg += 1,
            LevelOutcome::NoRegression => self.nor += 1,
            LevelOutcome::Inconclusive => self.inc += 1,
        }
        self.reps += 1;
        self.mdd0.push(levels[0].mdd.unwrap_or(f64::INFINITY));
        for raw in levels.iter().filter_map(|l| l.sigma_b2_raw) {
            self.sb2_sum += raw;
            self.sb2_n += 1;
        }
    }
    fn share(&self, x: usize) -> f64 {
        x as f64 / self.reps as f64
    }
    fn median_mdd(&mut self) -> f64 {
        self.mdd0.sort_by(f64::total_cmp);
        self.mdd0[self.mdd0.len() / 2]
    }
}

/// Known-variance z test, Holm over L levels at 0.008, every level dropped: P(min p < a/L).
fn oracle(drop: f64, se: f64) -> f64 {
    let n = Normal::new(0.0, 1.0).unwrap();
    let z = -(1.0 - drop).ln() / se - n.inverse_cdf(1.0 - 0.008 / L as f64);
    1.0 - (1.0 - n.cdf(z)).powi(L as i32)
}

fn pc(x: f64) -> String {
    if x.is_infinite() {
        "∞".into()
    } else if x == 0.0 || x >= 0.02 {
        format!("{:.1}%", 100.0 * x)
    } else {
        format!("{:.2}%", 100.0 * x)
    }
}

fn main() {
    let reps: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .or_else(|| std::env::var("GATE_CALIBRATION_REPS").ok()?.parse().ok())
        .unwrap_or(20_000);
    let settings = DecisionSettings::default();
    let t0 = Instant::now();
    let mc = |p: f64| (p * (1.0 - p) / reps as f64).sqrt();
    let mut worst_aa: Vec<(String, f64)> = Vec::new();
    let mut misses: Vec<String> = Vec::new();
    let mut cell: u64 = 0;
    let w = sw();

    println!("## relative mode ({reps} replications per cell); A/A = false REGRESSION; power = REGRESSION rate; inc = INCONCLUSIVE\n");
    let mut rows = TableFile::new("relative");
    rows.line("| design | sigma_b | AR | A/A fail | A/A no-reg / inc | 6%: power (oracle) | 6%: inc | 10%: power (oracle) | 10%: inc | median MDD |");
    rows.line("|---|---|---|---|---|---|---|---|---|---|");
    let designs: [(&str, Option<usize>); 4] = [
        ("no restart, 6v6", None),
        ("restart 3 blocks x 2", Some(3)),
        ("restart 6 blocks x 1", Some(6)),
        ("restart 2 blocks x 3", Some(2)),
    ];
    let n = 6;
    let mut max_rel = 0.0_f64;
    for (name, blocks) in designs {
        for sb in SIGMA_B {
            for rho in RHO {
                let mut t: Vec<Tally> = Vec::new();
                for drop in DROPS {
                    cell += 1;
                    let mut sim = Sim::new(cell);
                    let mut tally = Tally::default();
                    for _ in 0..reps {
                        tally.add(relative_rep(&mut sim, n, sb, rho, drop, blocks), &settings);
                    }
                    t.push(tally);
                }
                let se_o = match blocks {
                    None => w * (2.0 / n as f64).sqrt(),
                    Some(b) => (2.0 * (sb * sb + w * w / (n / b) as f64) / b as f64).sqrt(),
                };
                let aa = t[0].share(t[0].reg);
                max_rel = max_rel.max(aa);
                worst_aa.push((format!("relative {name}, sigma_b {sb}, AR {rho}"), aa));
                if blocks.is_none() && sb == 0.08 && t[1].share(t[1].reg) < 0.85 {
                    misses.push(format!(
                        "relative 6v6 sigma_b 8% AR {rho}: 6% caught {}",
                        pc(t[1].share(t[1].reg))
                    ));
                }
                let mdd = t[0].median_mdd();
                rows.line(format!(
                    "| {name} | {:.0}% | {rho:.1} | {} | {} / {} | {} ({}) | {} | {} ({}) | {} | {} |",
                    sb * 100.0,
                    pc(aa),
                    pc(t[0].share(t[0].nor)),
                    pc(t[0].share(t[0].inc)),
                    pc(t[1].share(t[1].reg)),
                    pc(oracle(0.06, se_o)),
                    pc(t[1].share(t[1].inc)),
                    pc(t[2].share(t[2].reg)),
                    pc(oracle(0.10, se_o)),
                    pc(t[2].share(t[2].inc)),
                    pc(mdd),
                ));
            }
        }
    }
    rows.write();
    eprintln!("relative done in {:.0} s", t0.elapsed().as_secs_f64());

    println!(
        "\n## history mode (5 trials per level in every session; {reps} replications per cell)\n"
    );
    let mut rows = TableFile::new("history");
    rows.line("| k | sigma_b | AR | A/A fail | A/A no-reg / inc | 6%: power (oracle) | 6%: inc | 10%: power (oracle) | 10%: inc | median MDD | mean est. sigma_b^2 / true |");
    rows.line("|---|---|---|---|---|---|---|---|---|---|---|");
    let mut max_hist = 0.0_f64;
    for k in [1usize, 2, 4, 10] {
        for sb in SIGMA_B {
            for rho in RHO {
                let mut t: Vec<Tally> = Vec::new();
                for drop in DROPS {
                    cell += 1;
                    let mut sim = Sim::new(cell);
                    let mut tally = Tally::default();
                    for _ in 0..reps {
                        tally.add(history_rep(&mut sim, k, 5, sb, rho, drop), &settings);
                    }
                    t.push(tally);
                }
                let kf = k as f64;
                let se_o =
                    (sb * sb * (1.0 + 1.0 / kf) + w * w * (1.0 / 5.0 + 1.0 / (5.0 * kf))).sqrt();
                let aa = t[0].share(t[0].reg);
                max_hist = max_hist.max(aa);
                worst_aa.push((format!("history k {k}, sigma_b {sb}, AR {rho}"), aa));
                let est = if t[0].sb2_n > 0 {
                    format!("{:.2e} / {:.2e}", t[0].sb2_sum / t[0].sb2_n as f64, sb * sb)
                } else {
                    "–".into()
                };
                let mdd = t[0].median_mdd();
                rows.line(format!(
                    "| {k} | {:.0}% | {rho:.1} | {} | {} / {} | {} ({}) | {} | {} ({}) | {} | {} | {est} |",
                    sb * 100.0,
                    pc(aa),
                    pc(t[0].share(t[0].nor)),
                    pc(t[0].share(t[0].inc)),
                    pc(t[1].share(t[1].reg)),
                    pc(oracle(0.06, se_o)),
                    pc(t[1].share(t[1].inc)),
                    pc(t[2].share(t[2].reg)),
                    pc(oracle(0.10, se_o)),
                    pc(t[2].share(t[2].inc)),
                    pc(mdd),
                ));
            }
        }
    }

    rows.write();

    println!(
        "\nMax A/A false-failure rate: relative {}, history {} (Monte Carlo s.e. at 1%: {:.2} points).",
        pc(max_rel),
        pc(max_hist),
        100.0 * mc(0.01)
    );
    for (what, aa) in &worst_aa {
        if *aa > 0.01 {
            println!("- A/A above 1%: {what}: {}", pc(*aa));
            if *aa > 0.01 + 3.0 * mc(0.01) {
                misses.push(format!("A/A {what}: {}", pc(*aa)));
            }
        }
    }
    eprintln!("total {:.0} s", t0.elapsed().as_secs_f64());
    if misses.is_empty() {
        println!("\nAcceptance: met (A/A <= 1% in every cell within Monte Carlo error; relative 6v6, sigma_b 8% shared: 6% drop caught >= 85%).");
    } else {
        println!("\nAcceptance MISSED:");
        for m in &misses {
            println!("- {m}");
        }
        std::process::exit(1);
    }
}
