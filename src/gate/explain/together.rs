//! Several levels of one figure read together, in a run in blocks: the mean over the levels of
//! each block's difference, paired by slot orientation as `crossover_level` pairs one level.
//!
//! A server start shifts its levels alike or apart; either way the mean difference of a block
//! over the levels carries it, so the spread of those block means about their orientation's
//! mean is an honest variance for the mean over levels whatever the levels share (no
//! independence between levels is assumed; only the degrees of freedom of one level, B - 2).
//! What the levels gain together is a smaller variance where their starts and trials do not
//! move together; for one level this is `crossover_level` without a calibration (a unit test
//! holds them equal).

use std::collections::BTreeMap;

use statrs::distribution::{ContinuousCDF, StudentsT};

use crate::stats::decision::{trimmed_block, Block};

/// One level's blocks as the comparison reads them: per block number, the difference of the
/// arms' means, the orientation (+1: the head on slot 1) and 1/n_base + 1/n_head; and the
/// trials' pooled within-block variance (NaN without a df).
#[derive(Debug, Clone)]
pub struct LevelBlocks {
    blocks: BTreeMap<u32, (f64, f64, f64)>,
    within: f64,
}

impl LevelBlocks {
    /// Each block trimmed as the gate trims it (`trimmed_block`: non-finite values and
    /// outliers set aside); a block left with an empty arm is not kept.
    pub fn of(numbered: &[(u32, Block)]) -> LevelBlocks {
        let (mut ss, mut df) = (0.0, 0usize);
        let mut blocks = BTreeMap::new();
        for (n, b) in numbered {
            let t = trimmed_block(&b.base, &b.head);
            if t.base.is_empty() || t.head.is_empty() {
                continue;
            }
            for cell in [&t.base, &t.head].into_iter().filter(|c| c.len() >= 2) {
                let m = mean(cell);
                ss += cell.iter().map(|v| (v - m) * (v - m)).sum::<f64>();
                df += cell.len() - 1;
            }
            let o = if b.head_slot == 1 { 1.0 } else { -1.0 };
            let inv_n = 1.0 / t.base.len() as f64 + 1.0 / t.head.len() as f64;
            blocks.insert(*n, (mean(&t.head) - mean(&t.base), o, inv_n));
        }
        LevelBlocks {
            blocks,
            within: if df > 0 { ss / df as f64 } else { f64::NAN },
        }
    }
}

/// The test of "unchanged at every level of the set" by the mean over the levels: the
/// estimate, its standard error and df, and the two-sided p-value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Together {
    pub d: f64,
    pub se: f64,
    pub df: f64,
    pub p: f64,
}

/// The levels read together over the blocks every one of them measured (a sequential plan
/// measures only undecided levels in later blocks); None where those blocks cannot bound the
/// mean (fewer than 3, or one orientation: the slot effect and the start spread unknown).
pub fn together(levels: &[&LevelBlocks]) -> Option<Together> {
    let first = levels.first()?;
    let common: Vec<u32> = (first.blocks.keys())
        .filter(|n| levels.iter().all(|l| l.blocks.contains_key(n)))
        .copied()
        .collect();
    let k = levels.len() as f64;
    let (mut diffs, mut orient) = (Vec::new(), Vec::new());
    for n in &common {
        let d = levels.iter().map(|l| l.blocks[n].0).sum::<f64>() / k;
        diffs.push(d);
        orient.push(first.blocks[n].1);
    }
    let side = |sign: f64| -> Vec<f64> {
        (diffs.iter().zip(&orient))
            .filter(|(_, &o)| o == sign)
            .map(|(&d, _)| d)
            .collect()
    };
    let (plus, minus) = (side(1.0), side(-1.0));
    if plus.is_empty() || minus.is_empty() || common.len() < 3 {
        return None;
    }
    let (m_plus, m_minus) = (mean(&plus), mean(&minus));
    let ss: f64 = (plus.iter().map(|x| (x - m_plus).powi(2)))
        .chain(minus.iter().map(|x| (x - m_minus).powi(2)))
        .sum();
    let df = common.len() as f64 - 2.0;
    // The trials' noise in a block's mean over levels, on average over the blocks: a floor,
    // as for one level (a few blocks can spread less than their trials by chance).
    let within: f64 = (levels.iter())
        .filter(|l| l.within.is_finite())
        .map(|l| {
            let inv_n = common.iter().map(|n| l.blocks[n].2).sum::<f64>() / common.len() as f64;
            l.within * inv_n
        })
        .sum::<f64>()
        / (k * k);
    let block_var = (ss / df).max(within);
    let factor = 0.25 * (1.0 / plus.len() as f64 + 1.0 / minus.len() as f64);
    let d = 0.5 * (m_plus + m_minus);
    let se = (block_var * factor).sqrt();
    let p = two_sided_p(d, se, df)?;
    Some(Together { d, se, df, p })
}

/// Two-sided p-value of d / se on Student's t with `df` (at least 1, as explain's bounds).
pub fn two_sided_p(d: f64, se: f64, df: f64) -> Option<f64> {
    if !(d.is_finite() && se.is_finite()) {
        return None;
    }
    if se <= 0.0 {
        return Some(if d == 0.0 { 1.0 } else { 0.0 });
    }
    let t = StudentsT::new(0.0, 1.0, df.max(1.0)).ok()?;
    Some((2.0 * (1.0 - t.cdf((d / se).abs()))).clamp(0.0, 1.0))
}

fn mean(x: &[f64]) -> f64 {
    x.iter().sum::<f64>() / x.len() as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::decision::crossover_level;
    use rand::{Rng, SeedableRng};

    fn random_blocks(rng: &mut impl Rng, count: u32, shift: f64) -> Vec<(u32, Block)> {
        (1..=count)
            .map(|n| {
                let arm = |rng: &mut dyn rand::RngCore, at: f64| -> Vec<f64> {
                    (0..3)
                        .map(|_| at + 0.02 * rng.gen_range(-1.0..1.0))
                        .collect()
                };
                let start = 0.01 * rng.gen_range(-1.0..1.0);
                (
                    n,
                    Block {
                        base: arm(rng, 0.0),
                        head: arm(rng, shift + start),
                        head_slot: n % 2,
                    },
                )
            })
            .collect()
    }

    /// One level read "together" is the gate's own estimator: `crossover_level` without a
    /// calibration gives the same estimate, standard error and df (a few spreads, some
    /// below the trials' floor).
    #[test]
    fn one_level_is_crossover_level() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(48);
        for count in [3, 4, 5, 6, 9] {
            for _ in 0..20 {
                let numbered = random_blocks(&mut rng, count, 0.05);
                let blocks: Vec<Block> = numbered.iter().map(|(_, b)| b.clone()).collect();
                let gate = crossover_level(&blocks, None, 0.0);
                let t = together(&[&LevelBlocks::of(&numbered)]).unwrap();
                assert!((gate.d.unwrap() - t.d).abs() < 1e-12, "{gate:?} {t:?}");
                assert!((gate.se.unwrap() - t.se).abs() < 1e-12, "{gate:?} {t:?}");
                assert_eq!(gate.df, t.df);
            }
        }
    }

    /// Levels read together use only the blocks all of them measured, and need both
    /// orientations among those.
    #[test]
    fn only_the_blocks_every_level_measured_count() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let six = LevelBlocks::of(&random_blocks(&mut rng, 6, 0.0));
        let four = LevelBlocks::of(&random_blocks(&mut rng, 4, 0.0));
        let t = together(&[&six, &four]).unwrap();
        assert_eq!(t.df, 2.0);
        let two = LevelBlocks::of(&random_blocks(&mut rng, 2, 0.0));
        assert_eq!(together(&[&six, &two]), None);
        let mut one_side = random_blocks(&mut rng, 4, 0.0);
        one_side.iter_mut().for_each(|(_, b)| b.head_slot = 1);
        assert_eq!(together(&[&LevelBlocks::of(&one_side)]), None);
    }

    #[test]
    fn p_values_at_their_edges() {
        assert_eq!(two_sided_p(0.0, 0.0, 2.0), Some(1.0));
        assert_eq!(two_sided_p(0.1, 0.0, 2.0), Some(0.0));
        assert_eq!(two_sided_p(f64::NAN, 1.0, 2.0), None);
        let p = two_sided_p(31.6, 1.0, 2.0).unwrap();
        assert!((p - 0.001).abs() < 1e-4, "{p}");
    }
}
