//! Several legs' runs in blocks as one run (`merge` pooling the legs of one comparison,
//! issue 46): blocks renumbered and labelled with their runner, the analysis of the whole.

use super::blocks::ServerSetup;
use super::{LevelResult, RunResult};

/// The legs' runs as one: the first's profile and environment, every block renumbered after
/// the legs before it and labelled with its runner, warnings prefixed with their runner.
pub fn pooled_run(group: &[&RunResult]) -> Option<RunResult> {
    let first = *group.first()?;
    let mut out = RunResult {
        levels: Vec::new(),
        warnings: Vec::new(),
        drift: None,
        analysis: None,
        run_id: Some(crate::record::run_id::run_id().to_string()),
        ..first.clone()
    };
    if let Some(b) = out.base.as_mut() {
        b.levels.clear();
    }
    let mut setup = ServerSetup {
        blocks: Vec::new(),
        dropped: Vec::new(),
        stopped: None,
        ..first.servers.clone()?
    };
    let mut offset = 0;
    for (i, run) in group.iter().enumerate() {
        let Some(servers) = &run.servers else {
            continue;
        };
        let renumber = |n: u32| n.saturating_add(offset);
        append(&mut out.levels, &run.levels, &renumber);
        if let (Some(into), Some(from)) = (out.base.as_mut(), run.base.as_ref()) {
            append(&mut into.levels, &from.levels, &renumber);
        }
        for b in &servers.blocks {
            let mut b = b.clone();
            b.number = renumber(b.number);
            b.runner = Some(i as u32);
            setup.blocks.push(b);
        }
        let prefix = |w: &String| format!("runner {i}: {w}");
        setup.dropped.extend(servers.dropped.iter().map(prefix));
        out.warnings.extend(run.warnings.iter().map(prefix));
        out.complete &= run.complete;
        offset = offset.saturating_add(servers.blocks.iter().map(|b| b.number).max().unwrap_or(0));
    }
    out.servers = Some(setup);
    out.analyse();
    // Each leg's own trend was said in its own verdict; the pool's trials are not one
    // sequence in time.
    out.drift = None;
    Some(out)
}

/// Adds a leg's levels' trials, their blocks renumbered, to `into` (levels matched by
/// concurrency).
fn append(into: &mut Vec<LevelResult>, from: &[LevelResult], renumber: &dyn Fn(u32) -> u32) {
    for level in from {
        let at = match into.iter().position(|l| l.concurrency == level.concurrency) {
            Some(i) => i,
            None => {
                into.push(LevelResult {
                    trials: Vec::new(),
                    ..level.clone()
                });
                into.len() - 1
            }
        };
        into[at]
            .trials
            .extend(level.trials.iter().cloned().map(|mut t| {
                t.block = t.block.map(renumber);
                t
            }));
    }
}
