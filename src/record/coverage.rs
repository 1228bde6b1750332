//! Whether a run holds what its own plan measured, no more and no less: every level of its
//! profile (or of its `--levels`) in each arm, once, and every level with the trials the
//! profile asks for (in blocks: in each block that measured it). A run writes exactly that;
//! a file that holds less was cut (by hand, or by a tool that lost part of it), and a gate
//! that judged the levels left would pass a pull request on the levels someone kept.

use std::collections::BTreeMap;

use super::{levels_text, LevelResult, RunResult};

/// What the run's levels and trials lack or hold beyond its plan; empty when they match.
/// Closed-loop runs only (an open-loop run is refused by the gate before this).
pub fn coverage_problems(run: &RunResult) -> Vec<String> {
    let sweep = &run.profile.sweep;
    let servers = run.servers.as_ref();
    let only = servers.map_or(&[][..], |s| s.only_levels.as_slice());
    let mut problems = Vec::new();
    let stray: Vec<u32> = (only.iter().copied())
        .filter(|c| !sweep.concurrency.contains(c))
        .collect();
    if !stray.is_empty() {
        problems.push(format!(
            "its --levels {} are not levels of its profile ({})",
            levels_text(&stray),
            levels_text(&sweep.concurrency)
        ));
    }
    let planned: &[u32] = if only.is_empty() {
        &sweep.concurrency
    } else {
        only
    };
    let blocks = servers.map_or(&[][..], |s| s.blocks.as_slice());
    let mut arms = vec![("head arm", &run.levels)];
    if let Some(base) = &run.base {
        arms.push(("base arm", &base.levels));
    }
    for (arm, levels) in arms {
        problems.extend(arm_problems(arm, levels, planned, &sweep.concurrency));
        for level in levels {
            problems.extend(trial_problems(arm, level, sweep.trials, blocks));
        }
    }
    problems
}

/// Levels missing, repeated, or outside the profile, in one arm.
fn arm_problems(
    arm: &str,
    levels: &[LevelResult],
    planned: &[u32],
    profile: &[u32],
) -> Vec<String> {
    let mut problems = Vec::new();
    let mut seen = BTreeMap::<u32, usize>::new();
    for l in levels {
        *seen.entry(l.concurrency).or_default() += 1;
    }
    let missing: Vec<u32> = (planned.iter().copied())
        .filter(|c| !seen.contains_key(c))
        .collect();
    if !missing.is_empty() {
        problems.push(format!(
            "the {arm} holds no {} of the {} it planned",
            levels_text(&missing),
            levels_text(planned)
        ));
    }
    let twice: Vec<u32> = (seen.iter())
        .filter(|(_, n)| **n > 1)
        .map(|(c, _)| *c)
        .collect();
    if !twice.is_empty() {
        problems.push(format!(
            "the {arm} holds {} more than once",
            levels_text(&twice)
        ));
    }
    let stray: Vec<u32> = (seen.keys().copied())
        .filter(|c| !profile.is_empty() && !profile.contains(c))
        .collect();
    if !stray.is_empty() {
        problems.push(format!(
            "the {arm} holds {}, not a level of its profile ({})",
            levels_text(&stray),
            levels_text(profile)
        ));
    }
    problems
}

/// A level's trials against the plan: `trials` of them, or `trials` in each block that
/// measured the level (and none from a block that did not, or from no block).
fn trial_problems(
    arm: &str,
    level: &LevelResult,
    trials: u32,
    blocks: &[super::blocks::BlockRecord],
) -> Vec<String> {
    let c = level.concurrency;
    if blocks.is_empty() {
        let n = level.trials.len();
        return match n == trials as usize {
            true => Vec::new(),
            false => vec![format!(
                "the {arm}'s C={c} holds {n} trials; its profile asks for {trials}"
            )],
        };
    }
    let mut counted = BTreeMap::<Option<u32>, usize>::new();
    for t in &level.trials {
        *counted.entry(t.block).or_default() += 1;
    }
    let mut problems = Vec::new();
    for b in blocks.iter().filter(|b| b.levels.contains(&c)) {
        let n = counted.remove(&Some(b.number)).unwrap_or(0);
        if n != trials as usize {
            problems.push(format!(
                "the {arm}'s C={c} holds {n} trials of block {}; its profile asks for {trials}",
                b.number
            ));
        }
    }
    for (block, n) in counted {
        let from = match block {
            Some(b) => format!("block {b}, which did not measure it"),
            None => "no block".to_string(),
        };
        problems.push(format!("the {arm}'s C={c} holds {n} trials of {from}"));
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::fake;

    /// Levels 1 and 4 in 3 blocks, the third measuring C=4 only (a later look measures the
    /// undecided levels): 2 trials a level and block.
    fn in_blocks() -> RunResult {
        let mut run = fake::run(&[(1, &[1.0; 4]), (4, &[2.0; 6])]);
        run.profile.sweep.trials = 2;
        for level in &mut run.levels {
            for (i, t) in level.trials.iter_mut().enumerate() {
                t.block = Some(i as u32 / 2 + 1);
            }
        }
        let block = |n: u32, levels: &[u32]| {
            serde_json::json!({"number": n, "head_slot": n % 2, "base_slot": 1 - n % 2,
                "head_log": "h", "levels": levels})
        };
        run.servers = Some(
            serde_json::from_value(serde_json::json!({
                "head_command": "h", "slots": ["0", "1"],
                "blocks": [block(1, &[1, 4]), block(2, &[1, 4]), block(3, &[4])],
            }))
            .unwrap(),
        );
        run
    }

    #[test]
    fn a_run_as_written_holds_its_plan_and_a_later_block_may_measure_fewer_levels() {
        assert_eq!(coverage_problems(&in_blocks()), Vec::<String>::new());
        let plain = fake::run(&[(1, &[1.0; 3]), (8, &[2.0; 3])]);
        assert_eq!(coverage_problems(&plain), Vec::<String>::new());
    }

    #[test]
    fn a_trial_of_a_block_that_did_not_measure_its_level_is_named() {
        let mut run = in_blocks();
        run.levels[0].trials[3].block = Some(3);
        assert_eq!(
            coverage_problems(&run),
            [
                "the head arm's C=1 holds 1 trials of block 2; its profile asks for 2",
                "the head arm's C=1 holds 1 trials of block 3, which did not measure it",
            ]
        );
    }

    #[test]
    fn levels_outside_the_plan_and_a_plain_levels_cut_trials_are_named() {
        let mut run = fake::run(&[(1, &[1.0; 3]), (8, &[2.0; 3])]);
        run.profile.sweep.concurrency = vec![1, 8, 32];
        run.levels[1].trials.pop();
        run.servers = in_blocks().servers;
        run.servers.as_mut().unwrap().blocks.clear();
        run.servers.as_mut().unwrap().only_levels = vec![8, 64];
        assert_eq!(
            coverage_problems(&run),
            [
                "its --levels C=64 are not levels of its profile (C=1, C=8, C=32)",
                "the head arm holds no C=64 of the C=8, C=64 it planned",
                "the head arm's C=8 holds 2 trials; its profile asks for 3",
            ]
        );
    }
}
