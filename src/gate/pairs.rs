//! Pairs of slots that disagree: in a run whose blocks ran on several pairs at once, each
//! pair's own head/base gap, after the run's slot effect, against the other pairs'. A pair's
//! own speed falls on both arms of its block and cancels; a gap that differs by pair does not
//! (a GPU that favours one build, a pair across NUMA nodes), and the verdict names it.

use crate::record::{RunResult, TrialResult};

/// How far a pair's mean gap must lie from the others', in standard errors of the blocks'
/// own spread, to be named (a screen over a few pairs: chance alone rarely reaches it).
const DISAGREES_Z: f64 = 3.0;

/// A block's gap at one level with the level's slot effect and centre taken out, by pair.
type Adjusted = (u32, f64);

/// One block's gap at one level: its pair, orientation (+1: head on slot 1) and
/// mean ln head - mean ln base.
struct Gap {
    pair: u32,
    orient: f64,
    d: f64,
}

/// "pair 3 (6;7): its blocks' head/base gap -2.9% against +0.4% on the other pairs, beyond
/// the blocks' spread (z 3.4): look at that pair's GPUs", for each pair that disagrees; none
/// for a run on one pair.
pub fn disagreeing(run: &RunResult) -> Vec<String> {
    let (Some(base), Some(servers)) = (&run.base, &run.servers) else {
        return Vec::new();
    };
    if servers.pairs.len() < 2 {
        return Vec::new();
    }
    let pair_of = |block: u32| {
        (servers.blocks.iter())
            .find(|b| b.number == block)
            .and_then(|b| b.pair)
    };
    // Per level: the blocks' gaps with the level's slot effect taken out.
    let mut adjusted: Vec<Adjusted> = Vec::new();
    for head in &run.levels {
        let Some(base) = base
            .levels
            .iter()
            .find(|l| l.concurrency == head.concurrency)
        else {
            continue;
        };
        let gaps = gaps(&base.trials, &head.trials, &pair_of);
        let mean_of = |sign: f64| {
            let v: Vec<f64> = gaps
                .iter()
                .filter(|g| g.orient == sign)
                .map(|g| g.d)
                .collect();
            (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
        };
        let (Some(plus), Some(minus)) = (mean_of(1.0), mean_of(-1.0)) else {
            continue;
        };
        let slot = 0.5 * (plus - minus);
        let centre = 0.5 * (plus + minus);
        for g in &gaps {
            adjusted.push((g.pair, g.d - g.orient * slot - centre));
        }
    }
    let mut said = Vec::new();
    for (p, gpus) in servers.pairs.iter().enumerate() {
        let (own, rest): (Vec<Adjusted>, Vec<Adjusted>) =
            adjusted.iter().partition(|(pair, _)| *pair == p as u32);
        // The other pairs' own spread (the pair tested would widen it by its own offset).
        if own.is_empty() || rest.len() < 3 {
            continue;
        }
        let mean = |v: &[Adjusted]| v.iter().map(|x| x.1).sum::<f64>() / v.len() as f64;
        let m = mean(&rest);
        let var = rest.iter().map(|x| (x.1 - m) * (x.1 - m)).sum::<f64>() / (rest.len() - 1) as f64;
        let se = var.sqrt() * (1.0 / own.len() as f64 + 1.0 / rest.len() as f64).sqrt();
        let z = (mean(&own) - mean(&rest)) / se;
        if z.is_finite() && z.abs() > DISAGREES_Z {
            said.push(format!(
                "pairs: pair {p} ({}): its blocks' head/base gap {:+.1}% against {:+.1}% on \
                 the other pairs (after the run's slot effect), beyond the blocks' spread \
                 (z {:.1}): look at that pair's GPUs",
                gpus.join(";"),
                100.0 * mean(&own).exp_m1(),
                100.0 * mean(&rest).exp_m1(),
                z.abs()
            ));
        }
    }
    said
}

/// Each block's gap at one level, from its measured trials' tok/s (ln), grouped as the gate
/// groups them (`block_groups`), where both arms ran in it.
fn gaps(
    base: &[TrialResult],
    head: &[TrialResult],
    pair_of: &dyn Fn(u32) -> Option<u32>,
) -> Vec<Gap> {
    let ln = |t: &TrialResult| {
        let v = t.output_tok_per_s;
        (t.measured() && v.is_finite() && v > 0.0).then(|| v.ln())
    };
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    (super::block_groups::numbered_blocks_of(base, head, ln).into_iter())
        .filter(|(_, b)| !b.base.is_empty() && !b.head.is_empty())
        .filter_map(|(n, b)| {
            Some(Gap {
                pair: pair_of(n)?,
                orient: if b.head_slot == 1 { 1.0 } else { -1.0 },
                d: mean(&b.head) - mean(&b.base),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::blocks::{BlockRecord, ServerSetup};
    use crate::record::{fake, BaseArm};

    /// A run of 8 blocks on 4 pairs, two each way round per pair, whose head/base gap is
    /// `gaps[pair]` (ln) with a small wobble by block, and a common slot effect of 4%.
    fn run(gaps: [f64; 4]) -> RunResult {
        run_on(&gaps, 2)
    }

    /// As [`run`], on `gaps.len()` pairs with `rounds` blocks each (a round is one block on
    /// every pair, each pair the other way round from the last).
    fn run_on(gaps: &[f64], rounds: u32) -> RunResult {
        let mut head = fake::run(&[(1, &[])]);
        let mut base = fake::run(&[(1, &[])]);
        let mut blocks = Vec::new();
        let pairs = gaps.len() as u32;
        for n in 1..=pairs * rounds {
            let pair = (n - 1) % pairs;
            let head_slot = ((n - 1) / pairs + pair) % 2;
            let o = if head_slot == 1 { 1.0 } else { -1.0 };
            let wobble = [
                0.002, -0.001, 0.0015, -0.002, 0.001, -0.0015, 0.0005, -0.0005,
            ];
            let d = gaps[pair as usize] + o * 0.02 + wobble[(n as usize - 1) % 8];
            let mut h = fake::trial(n, 1000.0 * d.exp());
            (h.block, h.slot) = (Some(n), Some(head_slot));
            head.levels[0].trials.push(h);
            let mut b = fake::trial(n, 1000.0);
            (b.block, b.slot) = (Some(n), Some(1 - head_slot));
            base.levels[0].trials.push(b);
            blocks.push(BlockRecord {
                number: n,
                head_slot,
                base_slot: Some(1 - head_slot),
                head_log: String::new(),
                base_log: None,
                head_log_cut_bytes: None,
                base_log_cut_bytes: None,
                levels: vec![1],
                pair: Some(pair),
                runner: None,
                seconds: None,
            });
        }
        head.base = Some(BaseArm {
            endpoints: 1,
            model: None,
            engine: None,
            engine_version: None,
            levels: base.levels,
        });
        head.servers = Some(ServerSetup {
            head_command: String::new(),
            base_command: None,
            slots: vec!["0".into(), "1".into()],
            pairs: (0..pairs)
                .map(|p| vec![format!("{}", 2 * p), format!("{}", 2 * p + 1)])
                .collect(),
            blocks,
            looks: 1,
            stopped: None,
            dropped: Vec::new(),
            commits: None,
            only_levels: Vec::new(),
        });
        head
    }

    #[test]
    fn a_pair_whose_gap_differs_is_named_and_alike_pairs_are_not() {
        assert!(disagreeing(&run([0.0; 4])).is_empty());
        let said = disagreeing(&run([0.0, 0.0, 0.0, -0.04]));
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(said[0].starts_with("pairs: pair 3 (6;7)"), "{said:?}");
        // One pair: nothing to compare.
        let mut one = run([-0.04, 0.0, 0.0, 0.0]);
        one.servers.as_mut().unwrap().pairs.truncate(1);
        assert!(disagreeing(&one).is_empty());
    }

    #[test]
    fn a_nodes_pairs_pass_on_its_average_and_the_pair_that_differs_is_named() {
        // Two pairs of one node, 4 blocks each: the head 3% faster on pair 0 and 3% slower on
        // pair 1, the node unchanged on average. The gaps test apart; the gate judges the
        // node's average (a pass), and the verdict still names pair 1's drop.
        let node = run_on(&[0.03, -0.03], 4);
        let settings = crate::profile::GateSettings::default();
        let v = crate::gate::compare::evaluate_relative(&node, &settings).unwrap();
        assert_eq!(v.outcome, crate::gate::verdict::Outcome::Pass, "{v:?}");
        let groups = (v.levels[0].test.as_ref())
            .and_then(|t| t.crossover.as_ref())
            .and_then(|x| x.groups.as_ref())
            .unwrap();
        assert!(groups.node_average, "{groups:?}");
        // With two pairs each differs from the other: both are named, pair 1 with its drop.
        let said = disagreeing(&node);
        assert!(
            (said.iter())
                .any(|l| l.starts_with("pairs: pair 1 (2;3): its blocks' head/base gap -3.1%")),
            "{said:?}"
        );
    }
}
