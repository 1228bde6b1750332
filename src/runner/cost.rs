//! What a run in blocks will cost, said before it starts: blocks, rounds over the pairs,
//! server starts, the wall time to the first look and to the last, and GPU-hours; measured
//! from the blocks of an earlier run of the same profile in the output folder (each block
//! records how long it held its slots, server starts included) where there is one, and
//! otherwise said as a guess from the profile's own estimate. The deadline (`--max-duration`)
//! is checked against it: a plan that cannot reach its first look in time says so up front.

use std::path::Path;
use std::time::Duration;

use super::setup::BlocksSetup;
use crate::load::BenchSetup;
use crate::record::RunResult;

/// How long a block takes, and where that figure comes from.
pub struct BlockTime {
    pub seconds: f64,
    /// "measured: the median of 4 blocks of the run in OUT/earlier/..." or "a guess: ...".
    pub source: String,
    pub measured: bool,
}

/// The cost lines printed before a run in blocks.
pub fn plan_lines(template: &BenchSetup, setup: &BlocksSetup) -> Vec<String> {
    let time = measured_block(&template.out_dir, &template.profile.canonical_hash().ok())
        .unwrap_or_else(|| guessed_block(template, setup));
    let pairs = setup.pairs.len() as u32;
    let plan = setup.plan;
    let rounds = |blocks: u32| blocks.div_ceil(pairs.max(1));
    let arms = if setup.relative() { 2 } else { 1 };
    let gpus_per_block = (0..setup.pairs.len())
        .map(|p| setup.gpus_in(p))
        .sum::<usize>() as f64
        / f64::from(pairs.max(1));
    // An earlier results.json is a file: a block "seconds" of 1e300 must not panic here.
    let wall = |blocks: u32| {
        Duration::try_from_secs_f64(f64::from(rounds(blocks)) * time.seconds)
            .unwrap_or(Duration::MAX)
    };
    let gpu_hours = |blocks: u32| f64::from(blocks) * time.seconds * gpus_per_block / 3600.0;
    let mut lines = vec![format!(
        "cost: {} block(s) to the first look in {} round(s) on {pairs} pair(s) ({} server \
         starts), about {}, {:.2} GPU-hours; at most {} blocks in {} rounds, about {}, {:.2} \
         GPU-hours ({})",
        plan.first,
        rounds(plan.first),
        plan.first * arms,
        crate::report::console::rough(wall(plan.first)),
        gpu_hours(plan.first),
        plan.max,
        rounds(plan.max),
        crate::report::console::rough(wall(plan.max)),
        gpu_hours(plan.max),
        time.source
    )];
    if let Some(budget) = setup.max_duration {
        let fits = |blocks: u32| wall(blocks) <= budget;
        let said = match (fits(plan.first), fits(plan.max)) {
            (_, true) => "the whole plan fits".to_string(),
            (true, false) => {
                let most = (plan.first..=plan.max)
                    .rev()
                    .find(|b| fits(*b))
                    .unwrap_or(plan.first);
                format!("the first look fits; at most about {most} blocks in all")
            }
            (false, false) => format!(
                "the first look does not fit{}: give more time, more pairs, or a smaller \
                 profile (`init --budget`)",
                match time.measured {
                    true => "",
                    false => " (by the guess)",
                }
            ),
        };
        lines.push(format!(
            "cost: --max-duration {}: {said}",
            humantime::format_duration(budget)
        ));
    }
    lines
}

/// How many earlier runs' results are read, newest first, for a measured block time.
const EARLIER_RUNS_READ: usize = 5;

/// The median time a block of the first look took in the newest earlier run of this profile
/// in `out/earlier/` (where a new run keeps the one before it).
fn measured_block(out: &Path, hash: &Option<String>) -> Option<BlockTime> {
    let earlier = out.join(super::earlier::EARLIER_DIR);
    let mut runs: Vec<_> = std::fs::read_dir(&earlier)
        .ok()?
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .collect();
    // Named by their start time (RFC 3339): the newest last.
    runs.sort();
    for dir in runs.iter().rev().take(EARLIER_RUNS_READ) {
        let Ok(run) = RunResult::load(&dir.join(crate::record::files::RESULTS_FILE)) else {
            continue;
        };
        if hash.as_deref() != Some(run.profile_hash.as_str()) {
            continue;
        }
        let Some(servers) = &run.servers else {
            continue;
        };
        let first = servers.blocks.first().map(|b| b.levels.clone());
        let mut seconds: Vec<f64> = (servers.blocks.iter())
            .filter(|b| Some(&b.levels) == first.as_ref())
            .filter_map(|b| b.seconds)
            .filter(|s| s.is_finite() && *s > 0.0)
            .collect();
        if seconds.is_empty() {
            continue;
        }
        seconds.sort_by(f64::total_cmp);
        let median = seconds[seconds.len() / 2];
        return Some(BlockTime {
            seconds: median,
            source: format!(
                "measured: the median of {} block(s) of the run in {}, server starts included",
                seconds.len(),
                dir.display()
            ),
            measured: true,
        });
    }
    None
}

/// The profile's own estimate at the slower assumed stream speed, both arms in turn, with
/// nothing for the servers' starts: a guess, said so.
fn guessed_block(template: &BenchSetup, setup: &BlocksSetup) -> BlockTime {
    let arms = if setup.relative() { 2 } else { 1 };
    let seconds = crate::report::console::estimate_seconds(&template.profile, arms)
        .unwrap_or(0.0)
        .max(1.0);
    let how = match template.profile.sweep.trial_span() {
        Some(_) => "timed trials, each with one request's tail at 50 tok/s",
        None => "the profile at 50 tok/s a stream",
    };
    BlockTime {
        seconds,
        source: format!(
            "a guess: {how}, server starts not counted; a run into this folder measures them \
             for the next"
        ),
        measured: false,
    }
}
