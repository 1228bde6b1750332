use super::super::{crossover_level, decide, DecisionSettings, LevelOutcome};
use super::*;

/// n trials around `centre` (ln), a fixed spread pattern (sd about 0.5%).
fn trials(centre: f64, n: usize) -> Vec<f64> {
    let pattern = [-0.006, 0.004, -0.002, 0.006, 0.0, -0.004];
    (0..n)
        .map(|i| centre + pattern[i % pattern.len()])
        .collect()
}

/// A block on (runner, pair): head on `head_slot`, the pair's slot effect `slot` (slot 1
/// faster), the true change `delta`, a start offset `u`.
fn block(runner: u32, pair: u32, head_slot: u32, slot: f64, delta: f64, u: f64) -> GroupedBlock {
    let o = if head_slot == 1 { 0.5 } else { -0.5 };
    GroupedBlock {
        block: Block {
            base: trials(5.0 - o * slot, 4),
            head: trials(5.0 + o * slot + delta + u, 4),
            head_slot,
        },
        runner,
        pair,
    }
}

/// Four blocks per group, two each way round, on the groups' own slot effects.
fn design(slots: &[(u32, u32, f64)], delta: f64, gaps: &[f64]) -> Vec<GroupedBlock> {
    let wobble = [0.003, -0.002, -0.003, 0.002];
    let mut out = Vec::new();
    for (g, &(runner, pair, slot)) in slots.iter().enumerate() {
        for (i, w) in wobble.iter().enumerate() {
            let extra = gaps.get(g).copied().unwrap_or(0.0);
            out.push(block(runner, pair, (i % 2) as u32, slot, delta + extra, *w));
        }
    }
    out
}

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol
}

#[test]
fn each_group_takes_out_its_own_slot_effect() {
    // Three runners whose pairs favour slot 1 by -3%, +5% and +2%: the common model keeps
    // their differences in its spread, the grouped one does not.
    let slots = [(0, 0, -0.03), (1, 0, 0.05), (2, 0, 0.02)];
    let blocks = design(&slots, 0.0, &[]);
    let lv = grouped_level(&blocks, None, 0.25);
    let info = lv.crossover.as_ref().unwrap();
    let groups = info.groups.as_ref().unwrap();
    assert_eq!(groups.slots.len(), 3);
    for (g, want) in groups.slots.iter().zip([-0.03, 0.05, 0.02]) {
        assert!(close(g.slot_effect, want, 0.004), "{g:?}");
    }
    assert!(close(lv.d.unwrap(), 0.0, 1e-9), "{:?}", lv.d);
    assert_eq!(info.blocks, 12);
    // Within 3 * 2 df + between 2 df; the slot effects differ, their spread is not pooled.
    assert!(!groups.slots_pooled, "{groups:?}");
    assert_eq!(lv.df, 8.0);
    let plain: Vec<Block> = blocks.iter().map(|b| b.block.clone()).collect();
    let common = crossover_level(&plain, None, 0.25);
    assert!(
        lv.se.unwrap() < 0.5 * common.se.unwrap(),
        "grouped {:?} common {:?}",
        lv.se,
        common.se
    );
}

#[test]
fn runners_whose_gaps_differ_are_judged_on_their_spread() {
    let slots = [(0, 0, 0.02), (1, 0, 0.02), (2, 0, 0.02), (3, 0, 0.02)];
    // One runner's head is 6% slower than the others': beyond the blocks' spread.
    let blocks = design(&slots, 0.0, &[0.0, 0.0, 0.0, -0.06]);
    let lv = grouped_level(&blocks, None, 0.25);
    let groups = lv.crossover.as_ref().unwrap().groups.clone().unwrap();
    assert!(groups.between_judged, "{groups:?}");
    assert!(groups.agreement_p.unwrap() < GROUPS_AGREEMENT_P);
    // The pass bound reads the between-runner spread with its own G - 1 df; the fail test
    // the pool's average on the within-group spread (4 x 2 within + 3 for the alike slots).
    assert_eq!(
        lv.pass_df,
        Some(3.0),
        "the between-runner spread's own G - 1 df"
    );
    assert_eq!(lv.df, 11.0);
    assert!(lv.pass_se.unwrap() > lv.se.unwrap());
    assert!(close(lv.d.unwrap(), -0.015, 1e-9));
    assert!(groups.between_spread.unwrap() > 0.02);
    // Alike runners pool: their gaps, and their alike slot effects (4 x 2 within, 3 for the
    // slot effects, 3 for the gaps).
    let alike = grouped_level(&design(&slots, 0.0, &[]), None, 0.25);
    let groups = alike.crossover.as_ref().unwrap().groups.clone().unwrap();
    assert!(!groups.between_judged && groups.slots_pooled, "{groups:?}");
    assert_eq!(alike.df, 14.0);
    assert_eq!((alike.pass_se, alike.pass_df), (None, None));
}

#[test]
fn gaps_that_differ_widen_the_pass_bound_not_the_fail_test() {
    // Two runners, the head 3% faster on one and 3% slower on the other: on average
    // unchanged. The pass bound must not rule out the 3% drop runner 1 shows.
    let slots = [(0, 0, 0.02), (1, 0, -0.01)];
    let mut levels = [grouped_level(
        &design(&slots, 0.0, &[0.03, -0.03]),
        None,
        0.25,
    )];
    let settings = DecisionSettings::default();
    let outcome = decide(&mut levels, &settings);
    let lv = &levels[0];
    assert!(
        lv.crossover
            .as_ref()
            .unwrap()
            .groups
            .as_ref()
            .unwrap()
            .between_judged
    );
    assert_eq!(outcome, LevelOutcome::Inconclusive);
    assert!(lv.pass_lower < 0.97, "{}", lv.pass_lower);
    // Read with the fail test's se on both sides it would have passed, ruling 3% out.
    let (se, df) = (lv.se.unwrap(), lv.df);
    let pooled_lower = (lv.d.unwrap() - super::super::t_ppf(0.95, df) * se).exp();
    assert!(pooled_lower > 0.97, "{pooled_lower}");
    // A 6% drop on both runners with the same +/-3% split is still caught: the fail test
    // reads the pool's average on the within-group spread.
    let mut levels = [grouped_level(
        &design(&slots, -0.06, &[0.03, -0.03]),
        None,
        0.25,
    )];
    assert_eq!(decide(&mut levels, &settings), LevelOutcome::Regression);
    assert!(levels[0].pass_df == Some(1.0) && levels[0].df > 1.0);
}

#[test]
fn pairs_of_one_node_whose_gaps_differ_are_judged_on_the_nodes_average() {
    // The previous test's blocks on two pairs of one runner: the head 3% faster on one pair
    // and 3% slower on the other, the node's sum unchanged. The gaps test apart as before,
    // but both sides judge the node's average on the spread within pairs: a pass.
    let slots = [(0, 0, 0.02), (0, 1, -0.01)];
    let settings = DecisionSettings::default();
    let mut levels = [grouped_level(
        &design(&slots, 0.0, &[0.03, -0.03]),
        None,
        0.25,
    )];
    let groups = (levels[0].crossover.as_ref().unwrap().groups.clone()).unwrap();
    assert!(
        groups.agreement_p.unwrap() < GROUPS_AGREEMENT_P,
        "{groups:?}"
    );
    assert!(groups.node_average && !groups.between_judged, "{groups:?}");
    assert_eq!((levels[0].pass_se, levels[0].pass_df), (None, None));
    // The gaps' spread on their own scale: +3% and -3% have an sd of 4.2%.
    let spread = groups.between_spread.unwrap();
    assert!(close(spread, 0.0424, 0.003), "{spread}");
    assert_eq!(decide(&mut levels, &settings), LevelOutcome::NoRegression);
    // A 6% drop on both pairs with the same split is caught, on the same reading.
    let mut levels = [grouped_level(
        &design(&slots, -0.06, &[0.03, -0.03]),
        None,
        0.25,
    )];
    assert_eq!(decide(&mut levels, &settings), LevelOutcome::Regression);
    // Where the pairs' gaps agree nothing changes: pooled as before.
    let alike = grouped_level(&design(&slots, 0.0, &[]), None, 0.25);
    let groups = alike.crossover.as_ref().unwrap().groups.clone().unwrap();
    assert!(!groups.node_average && !groups.between_judged, "{groups:?}");
}

#[test]
fn one_node_is_every_block_on_one_runner_not_only_the_groups_kept() {
    let slots = [(0, 0, 0.02), (0, 1, -0.01)];
    let apart = design(&slots, 0.0, &[0.03, -0.03]);
    // Two more pairs of the same runner with one block each, read together with one slot
    // effect (a group keyed (0, MAX)): still one node.
    let mut shared = apart.clone();
    shared.push(block(0, 2, 1, 0.01, 0.0, 0.002));
    shared.push(block(0, 3, 0, 0.04, 0.0, -0.002));
    let lv = grouped_level(&shared, None, 0.25);
    let groups = lv.crossover.as_ref().unwrap().groups.clone().unwrap();
    assert_eq!(groups.shared_slot_blocks, 2, "{groups:?}");
    assert!(
        groups.agreement_p.unwrap() < GROUPS_AGREEMENT_P,
        "{groups:?}"
    );
    assert!(groups.node_average && !groups.between_judged, "{groups:?}");
    // A merge whose second runner's one block is set aside at this level: the groups kept
    // are runner 0's pairs, but the pool is two runners and keeps their rule.
    let mut merged = apart;
    merged.push(block(1, 0, 1, 0.01, 0.0, 0.0));
    let lv = grouped_level(&merged, None, 0.25);
    let groups = lv.crossover.as_ref().unwrap().groups.clone().unwrap();
    assert_eq!(groups.set_aside, 1, "{groups:?}");
    assert!(!groups.node_average && groups.between_judged, "{groups:?}");
    assert_eq!(lv.pass_df, Some(1.0));
}

#[test]
fn one_block_per_pair_is_read_with_one_slot_effect() {
    // A first look of one block per pair: no pair can tell its slot effect from the change,
    // so the blocks are read as one crossover, exactly as crossover_level reads them.
    let blocks: Vec<GroupedBlock> = (0..4)
        .map(|p| block(0, p, p % 2, 0.02 * p as f64, 0.0, 0.001 * p as f64))
        .collect();
    let lv = grouped_level(&blocks, None, 0.25);
    let plain: Vec<Block> = blocks.iter().map(|b| b.block.clone()).collect();
    let common = crossover_level(&plain, None, 0.25);
    assert_eq!(lv.d, common.d);
    assert_eq!(lv.se, common.se);
    assert!(lv.crossover.as_ref().unwrap().groups.is_none());
}

#[test]
fn partial_groups_share_a_slot_effect_beside_full_ones() {
    // Two pairs ran both ways round; two ran one block each (one each way): those two are
    // read together with one slot effect, as one more group.
    let mut blocks = design(&[(0, 0, 0.03), (0, 1, -0.02)], -0.05, &[]);
    blocks.push(block(0, 2, 1, 0.01, -0.05, 0.002));
    blocks.push(block(0, 3, 0, 0.04, -0.05, -0.002));
    let lv = grouped_level(&blocks, None, 0.25);
    let groups = lv.crossover.as_ref().unwrap().groups.clone().unwrap();
    assert_eq!((groups.slots.len(), groups.shared_slot_blocks), (2, 2));
    assert_eq!(groups.set_aside, 0);
    let mut levels = [lv];
    assert_eq!(
        decide(&mut levels, &DecisionSettings::default()),
        LevelOutcome::Regression
    );
    // A lone block with nothing of the other way round is set aside and counted.
    let mut blocks = design(&[(0, 0, 0.03), (0, 1, -0.02)], 0.0, &[]);
    blocks.push(block(1, 0, 1, 0.01, 0.0, 0.0));
    let lv = grouped_level(&blocks, None, 0.25);
    let groups = lv.crossover.as_ref().unwrap().groups.clone().unwrap();
    assert_eq!(groups.set_aside, 1);
    assert_eq!(lv.crossover.as_ref().unwrap().blocks, 8);
}

#[test]
fn hostile_blocks_do_not_panic() {
    let odd = GroupedBlock {
        block: Block {
            base: vec![f64::NAN],
            head: vec![],
            head_slot: 9,
        },
        runner: u32::MAX,
        pair: u32::MAX,
    };
    let lv = grouped_level(&[odd.clone(), odd], None, 0.25);
    assert!(lv.d.is_none() && lv.p == 1.0);
    assert!(grouped_level(&[], None, 0.25).d.is_none());
}
