//! The cheapest mix of node types that finishes a job by its deadline.
//!
//! Each node type brings a pessimistic rate (output tok/s per node at the plan's P90 days,
//! so the mix meets the deadline at P90), an hourly price and, where the catalog says so, how
//! many nodes are available. Nodes of a mix share the work and run until the job is done,
//! billed for that time: a mix of counts n costs W * sum(n p) / sum(n r) for W tokens, and
//! finishes in W / sum(n r), which must be within the deadline.
//!
//! The search is exhaustive over counts (a type never needs more nodes than meet the deadline
//! alone), bounded by [`MAX_MIXES`]; past the bound it says so rather than guess.

use anyhow::{bail, Result};
use serde::Serialize;

/// The most mixes evaluated (a small integer program; a bound on time, not a target).
pub const MAX_MIXES: u64 = 5_000_000;

/// One node type, as the mix sees it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeOption {
    pub name: String,
    /// Output tokens per second of one node, at the pessimistic end.
    pub tok_per_s: f64,
    pub usd_per_hour: f64,
    /// Nodes that can be had; None = as many as needed.
    pub available: Option<u32>,
}

/// A mix: how many nodes of each type (zeros left out), its time and cost.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Mix {
    pub counts: Vec<(String, u32)>,
    pub nodes: u32,
    pub hours: f64,
    pub usd: f64,
}

/// The cheapest mix and the next cheapest different one.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MixAnswer {
    pub best: Mix,
    pub runner_up: Option<Mix>,
    pub evaluated: u64,
}

/// What `plan --cheapest-mix` answers: the mixes, what they were chosen from, and the
/// rows left out (no P90, no price).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MixReport {
    pub deadline_s: f64,
    /// The node types the search chose from, with the P90 rates and counts it used.
    pub options: Vec<NodeOption>,
    #[serde(flatten)]
    pub answer: MixAnswer,
    /// Rows that cannot take part, and why.
    pub left_out: Vec<String>,
}

/// The cheapest mixes of `options` that produce `tokens` within `deadline_hours`; None when
/// no mix of the available nodes can. Ties in cost go to fewer nodes.
pub fn cheapest_mix(
    options: &[NodeOption],
    tokens: f64,
    deadline_hours: f64,
) -> Result<Option<MixAnswer>> {
    if !(tokens.is_finite() && tokens > 0.0 && deadline_hours.is_finite() && deadline_hours > 0.0) {
        bail!(
            "the job and the deadline must be positive (got {tokens} tokens, {deadline_hours} h)"
        );
    }
    let usable: Vec<&NodeOption> = options
        .iter()
        .filter(|o| {
            o.tok_per_s.is_finite()
                && o.tok_per_s > 0.0
                && o.usd_per_hour.is_finite()
                && o.usd_per_hour >= 0.0
        })
        .collect();
    let needed_rate = tokens / (deadline_hours * 3600.0);
    // A type never needs more nodes than meet the deadline on their own.
    let caps: Vec<u32> = usable
        .iter()
        .map(|o| {
            let alone = (needed_rate / o.tok_per_s).ceil().min(f64::from(u32::MAX)) as u32;
            o.available.map_or(alone, |a| a.min(alone))
        })
        .collect();
    let combos = caps
        .iter()
        .try_fold(1u64, |acc, c| acc.checked_mul(u64::from(*c) + 1));
    match combos {
        Some(n) if n <= MAX_MIXES => {}
        _ => bail!(
            "too many mixes to search ({} node types, up to {} nodes of one type); \
             give fewer node types or fewer available nodes",
            usable.len(),
            caps.iter().max().copied().unwrap_or(0)
        ),
    }
    let mut counts = vec![0u32; usable.len()];
    let mut best: Vec<(f64, u32, Vec<u32>)> = Vec::new();
    let mut evaluated = 0u64;
    loop {
        evaluated += 1;
        let rate: f64 = counts
            .iter()
            .zip(&usable)
            .map(|(n, o)| f64::from(*n) * o.tok_per_s)
            .sum();
        if rate >= needed_rate * (1.0 - 1e-12) && rate > 0.0 {
            let price: f64 = counts
                .iter()
                .zip(&usable)
                .map(|(n, o)| f64::from(*n) * o.usd_per_hour)
                .sum();
            let usd = tokens / rate / 3600.0 * price;
            let nodes: u32 = counts.iter().sum();
            keep_two(&mut best, (usd, nodes, counts.clone()));
        }
        // Next combination (odometer).
        let mut i = 0;
        loop {
            if i == counts.len() {
                let answer = best.first().map(|b| MixAnswer {
                    best: to_mix(&usable, b, tokens),
                    runner_up: best.get(1).map(|r| to_mix(&usable, r, tokens)),
                    evaluated,
                });
                return Ok(answer);
            }
            if counts[i] < caps[i] {
                counts[i] += 1;
                break;
            }
            counts[i] = 0;
            i += 1;
        }
    }
}

/// Keeps the two cheapest (cost, then fewer nodes).
fn keep_two(best: &mut Vec<(f64, u32, Vec<u32>)>, candidate: (f64, u32, Vec<u32>)) {
    let key = |c: &(f64, u32, Vec<u32>)| (c.0, c.1);
    let position = best
        .iter()
        .position(|b| {
            let (bc, bn) = key(b);
            let (cc, cn) = key(&candidate);
            cc < bc * (1.0 - 1e-9) || ((cc - bc).abs() <= bc * 1e-9 && cn < bn)
        })
        .unwrap_or(best.len());
    if position < 2 {
        best.insert(position, candidate);
        best.truncate(2);
    }
}

fn to_mix(usable: &[&NodeOption], chosen: &(f64, u32, Vec<u32>), tokens: f64) -> Mix {
    let rate: f64 = chosen
        .2
        .iter()
        .zip(usable)
        .map(|(n, o)| f64::from(*n) * o.tok_per_s)
        .sum();
    Mix {
        counts: chosen
            .2
            .iter()
            .zip(usable)
            .filter(|(n, _)| **n > 0)
            .map(|(n, o)| (o.name.clone(), *n))
            .collect(),
        nodes: chosen.1,
        hours: tokens / rate / 3600.0,
        usd: chosen.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn option(name: &str, tok_per_s: f64, usd: f64, available: Option<u32>) -> NodeOption {
        NodeOption {
            name: name.into(),
            tok_per_s,
            usd_per_hour: usd,
            available,
        }
    }

    /// The seeds' job: 1.64e9 tokens. Per million tokens an RTX node (9,440 tok/s,
    /// $14.40/h) costs $0.42 and a B200 node (15,000 tok/s at its low end, $38.50/h) $0.71.
    /// With RTX nodes unlimited the cheapest mix is RTX only, as few as meet a 3-day
    /// deadline: 1.64e9 / (3 * 86400) = 6,327 tok/s, so one node (9,440) does it in 48.26 h
    /// for $694.92.
    #[test]
    fn the_cheapest_per_token_type_alone_when_it_is_available() {
        let options = [
            option("rtxpro6000-8x-dp", 9440.0, 14.40, None),
            option("b200-7x", 15000.0, 38.50, None),
        ];
        let answer = cheapest_mix(&options, 1.64e9, 72.0).unwrap().unwrap();
        assert_eq!(
            answer.best.counts,
            vec![("rtxpro6000-8x-dp".to_string(), 1)]
        );
        let hours = 1.64e9 / 9440.0 / 3600.0;
        assert!((answer.best.hours - hours).abs() < 1e-9);
        assert!((answer.best.usd - hours * 14.40).abs() < 1e-6, "{answer:?}");
        assert!((answer.best.usd - 694.92).abs() < 0.01, "{answer:?}");
        // The runner-up is a different mix and costs at least as much.
        let runner_up = answer.runner_up.unwrap();
        assert_ne!(runner_up.counts, answer.best.counts);
        assert!(runner_up.usd >= answer.best.usd);
    }

    /// Only 2 RTX nodes are available and the deadline needs 30,000 tok/s: the mix takes
    /// both RTX nodes and the fewest B200s that close the gap (18,880 + 1 x 15,000 is not
    /// enough; 2 B200s are), against 2 B200s alone which are dearer per token.
    #[test]
    fn availability_forces_a_mix() {
        let options = [
            option("rtx", 9440.0, 14.40, Some(2)),
            option("b200", 15000.0, 38.50, Some(10)),
        ];
        let tokens = 30_000.0 * 3600.0 * 10.0;
        let answer = cheapest_mix(&options, tokens, 10.0).unwrap().unwrap();
        assert_eq!(
            answer.best.counts,
            vec![("rtx".to_string(), 2), ("b200".to_string(), 1)]
        );
        assert!(answer.best.hours <= 10.0);
        // Checked by hand: rate 33,880, price 28.80 + 38.50 = 67.30/h.
        let usd = tokens / 33_880.0 / 3600.0 * 67.30;
        assert!((answer.best.usd - usd).abs() < 1e-6, "{answer:?}");
    }

    #[test]
    fn impossible_deadlines_have_no_mix_and_bad_inputs_are_refused() {
        let options = [option("rtx", 9440.0, 14.40, Some(1))];
        assert_eq!(cheapest_mix(&options, 1e9, 1.0).unwrap(), None);
        assert!(cheapest_mix(&options, 0.0, 1.0).is_err());
        assert!(cheapest_mix(&options, 1e9, f64::NAN).is_err());
        // Types without a usable rate or price are left out, not used.
        let odd = [
            option("nan", f64::NAN, 1.0, None),
            option("free-but-zero", 0.0, 0.0, None),
            option("rtx", 9440.0, 14.40, None),
        ];
        let answer = cheapest_mix(&odd, 1e9, 100.0).unwrap().unwrap();
        assert_eq!(answer.best.counts, vec![("rtx".to_string(), 1)]);
    }

    #[test]
    fn a_search_too_large_says_so() {
        let options: Vec<NodeOption> = (0..10)
            .map(|i| option(&format!("n{i}"), 1.0, 1.0, None))
            .collect();
        let err = format!("{:#}", cheapest_mix(&options, 1e9, 1.0).unwrap_err());
        assert!(err.contains("too many mixes"), "{err}");
    }
}
