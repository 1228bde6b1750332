//! Per-request lengths drawn from the profile's distributions (`workload.output_length`,
//! `workload.input_length`), seeded by `workload.seed`: request number n of a run always draws the same
//! lengths for the same profile and seed, so two runs (and a baseline and a candidate) send
//! the same workload, and the profile hash (which holds the distributions and the seed)
//! names it.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use statrs::distribution::{LogNormal, Normal};

use crate::profile::{LengthDist, Workload};

/// The lengths of one request; `None` where the profile draws none.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Drawn {
    /// Length of the synthetic prompt: words, or tokens where the profile names a tokenizer.
    pub input_words: Option<u32>,
    /// The request's `max_tokens` (and minimum, with `ignore_eos`).
    pub output_tokens: Option<u32>,
}

/// The run's length draws.
#[derive(Debug, Clone)]
pub struct Lengths {
    seed: u64,
    input: Option<Sampler>,
    output: Option<Sampler>,
    input_cap: u32,
    output_cap: u32,
    /// Lengths given per request by a dataset or a trace, used round-robin by request number
    /// in place of draws (an output length the row leaves out is drawn, or `max_tokens`).
    rows: Option<std::sync::Arc<[Drawn]>>,
}

impl Lengths {
    pub fn new(workload: &Workload, seed: u64, input_cap: u32) -> Lengths {
        Lengths {
            seed,
            input: workload.input_length.as_ref().map(Sampler::new),
            output: workload.output_length.as_ref().map(Sampler::new),
            input_cap,
            output_cap: workload.max_tokens,
            rows: None,
        }
    }

    /// These lengths with per-request rows (a dataset's or a trace's): request n takes row
    /// n mod rows, each length capped as a draw is (output at `max_tokens`).
    pub fn with_rows(mut self, rows: Vec<Drawn>) -> Lengths {
        self.rows = (!rows.is_empty()).then(|| rows.into());
        self
    }

    /// The number of per-request rows (0 without a dataset or trace).
    pub fn rows(&self) -> usize {
        self.rows.as_ref().map_or(0, |r| r.len())
    }

    /// True when the profile draws any length.
    pub fn draws(&self) -> bool {
        self.input.is_some() || self.output.is_some() || self.rows.is_some()
    }

    /// The lengths of request number `n` of the run (its prompt number).
    pub fn draw(&self, n: u64) -> Drawn {
        let at = |salt: u64, s: &Sampler, cap: u32| {
            let mut rng = ChaCha8Rng::seed_from_u64(mix(self.seed, salt, n));
            whole(s.sample(&mut rng), cap)
        };
        let row =
            (self.rows.as_ref()).map_or(Drawn::default(), |r| r[(n % r.len() as u64) as usize]);
        Drawn {
            input_words: (row.input_words.map(|v| v.clamp(1, self.input_cap.max(1))))
                .or_else(|| self.input.as_ref().map(|s| at(1, s, self.input_cap))),
            output_tokens: (row
                .output_tokens
                .map(|v| v.clamp(1, self.output_cap.max(1))))
            .or_else(|| self.output.as_ref().map(|s| at(2, s, self.output_cap))),
        }
    }
}

/// A length rounded to a whole number in [1, cap].
fn whole(x: f64, cap: u32) -> u32 {
    if x.is_nan() {
        return 1;
    }
    x.round().clamp(1.0, f64::from(cap.max(1))) as u32
}

/// One distribution, ready to draw from.
#[derive(Debug, Clone)]
enum Sampler {
    Fixed(f64),
    /// Whole numbers in [lo, hi].
    Uniform(u64, u64),
    Normal(Normal),
    LogNormal(LogNormal),
    /// Cumulative weights and the bins' whole-number bounds [lo, hi].
    Histogram(Vec<f64>, Vec<(u64, u64)>),
}

impl Sampler {
    fn new(d: &LengthDist) -> Sampler {
        match d {
            LengthDist::Fixed { value } => Sampler::Fixed(f64::from(*value)),
            LengthDist::Uniform { .. } => {
                let (lo, hi) = d.uniform_bounds().unwrap_or((1.0, 1.0));
                Sampler::Uniform(lo as u64, hi as u64)
            }
            LengthDist::Normal { mean, sd } => match Normal::new(*mean, sd.max(1e-12)) {
                Ok(n) => Sampler::Normal(n),
                Err(_) => Sampler::Fixed(*mean),
            },
            LengthDist::Lognormal { mean, sd } => {
                // The log's parameters that give lengths of this mean and sd.
                let s2 = (1.0 + (sd / mean).powi(2)).ln();
                match LogNormal::new(mean.ln() - s2 / 2.0, s2.sqrt().max(1e-12)) {
                    Ok(l) => Sampler::LogNormal(l),
                    Err(_) => Sampler::Fixed(*mean),
                }
            }
            LengthDist::Histogram { bins } => {
                let mut sum = 0.0;
                let cumulative = bins
                    .iter()
                    .map(|b| {
                        sum += b[2];
                        sum
                    })
                    .collect();
                let bounds = bins
                    .iter()
                    .map(|b| {
                        let lo = b[0].ceil().max(1.0) as u64;
                        (lo, ((b[1].ceil() as u64).saturating_sub(1)).max(lo))
                    })
                    .collect();
                Sampler::Histogram(cumulative, bounds)
            }
        }
    }

    fn sample(&self, rng: &mut ChaCha8Rng) -> f64 {
        match self {
            Sampler::Fixed(v) => *v,
            Sampler::Uniform(lo, hi) => rng.gen_range(*lo..=*hi) as f64,
            Sampler::Normal(n) => rng.sample(n),
            Sampler::LogNormal(l) => rng.sample(l),
            Sampler::Histogram(cumulative, bounds) => {
                let total = cumulative.last().copied().unwrap_or(0.0);
                let u = rng.gen::<f64>() * total;
                let i = cumulative
                    .iter()
                    .position(|&c| u < c)
                    .unwrap_or(bounds.len() - 1);
                let (lo, hi) = bounds[i];
                rng.gen_range(lo..=hi) as f64
            }
        }
    }
}

/// The seed of one draw: the run's seed, which length, and the request number (splitmix64).
fn mix(seed: u64, salt: u64, n: u64) -> u64 {
    let mut x = seed ^ salt.rotate_left(56) ^ n.wrapping_mul(0x9e3779b97f4a7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d049bb133111eb);
    x ^ (x >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workload(output: &str) -> Workload {
        let text = format!(
            "name = \"x\"\n[target]\nendpoints = [\"http://127.0.0.1:1\"]\n[workload]\n\
             max_tokens = 100000\n[workload.output_length]\n{output}\n[sweep]\nconcurrency = [1]\n"
        );
        crate::profile::Profile::parse(&text).unwrap().workload
    }

    /// Mean and sample sd of 10,000 drawn lengths.
    fn moments_of(w: &Workload, seed: u64) -> (f64, f64) {
        let l = Lengths::new(w, seed, 100_000);
        let v: Vec<f64> = (0..10_000)
            .map(|n| f64::from(l.draw(n).output_tokens.unwrap()))
            .collect();
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (v.len() - 1) as f64;
        (mean, var.sqrt())
    }

    /// Each distribution's mean and sd over 10,000 draws are within 2% of what it describes.
    #[test]
    fn each_distribution_draws_its_moments_within_two_percent() {
        for spec in [
            "distribution = \"fixed\"\nvalue = 512",
            "distribution = \"uniform\"\nmean = 1024\nrange_ratio = 0.5",
            "distribution = \"normal\"\nmean = 1000\nsd = 200",
            "distribution = \"lognormal\"\nmean = 1818\nsd = 1200",
            "distribution = \"histogram\"\nbins = [[1, 100, 0.2], [100, 1000, 0.5], [1000, 4000, 0.3]]",
        ] {
            let w = workload(spec);
            let (want_mean, want_sd) = w.output_length.as_ref().unwrap().moments();
            let (mean, sd) = moments_of(&w, 7);
            assert!(
                (mean - want_mean).abs() <= 0.02 * want_mean,
                "{spec}: mean {mean} vs {want_mean}"
            );
            if want_sd == 0.0 {
                assert_eq!(sd, 0.0, "{spec}");
            } else {
                assert!(
                    (sd - want_sd).abs() <= 0.02 * want_sd,
                    "{spec}: sd {sd} vs {want_sd}"
                );
            }
        }
    }

    #[test]
    fn draws_are_seeded_capped_and_whole() {
        let w = workload("distribution = \"normal\"\nmean = 50\nsd = 400");
        let a = Lengths::new(&w, 1, 10);
        let b = Lengths::new(&w, 1, 10);
        let c = Lengths::new(&w, 2, 10);
        let draws = |l: &Lengths| (0..200).map(|n| l.draw(n)).collect::<Vec<_>>();
        assert_eq!(draws(&a), draws(&b));
        assert_ne!(draws(&a), draws(&c));
        assert!(draws(&a).iter().all(|d| {
            let n = d.output_tokens.unwrap();
            (1..=100_000).contains(&n) && d.input_words.is_none()
        }));
        assert!(!Lengths::new(&workload_plain(), 1, 10).draws());
    }

    fn workload_plain() -> Workload {
        let text = "name = \"x\"\n[target]\nendpoints = [\"http://127.0.0.1:1\"]\n[workload]\n\
                    max_tokens = 64\n[sweep]\nconcurrency = [1]\n";
        crate::profile::Profile::parse(text).unwrap().workload
    }

    #[test]
    fn bad_parameters_are_refused_with_the_field() {
        let parse = |extra: &str| {
            let text = format!(
                "name = \"x\"\n[target]\nendpoints = [\"http://127.0.0.1:1\"]\n[workload]\n\
                 max_tokens = 64\n[workload.output_length]\n{extra}\n[sweep]\nconcurrency = [1]\n"
            );
            format!("{:#}", crate::profile::Profile::parse(&text).unwrap_err())
        };
        let e = parse("distribution = \"normal\"\nmean = 100\nsd = 5");
        assert!(
            e.contains("workload.output_length") && e.contains("mean 100"),
            "{e}"
        );
        let e = parse("distribution = \"uniform\"\nmean = 10\nrange_ratio = 1.5");
        assert!(e.contains("range_ratio 1.5"), "{e}");
        let e = parse("distribution = \"histogram\"\nbins = [[10, 5, 1]]");
        assert!(e.contains("bins[0]"), "{e}");
        let e = parse("distribution = \"gamma\"\nmean = 10");
        assert!(e.contains("gamma"), "{e}");
        let e = parse("distribution = \"normal\"\nmean = 10\nsd = 1\nsdd = 2");
        assert!(e.contains("sdd"), "{e}");
    }
}
