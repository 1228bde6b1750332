//! A relative run in blocks: each block is a whole relative run (both servers started fresh,
//! trials interleaved), the arms' slots swapped from one block to the next. This file keeps
//! what the blocks were and puts their results together into one run whose trials carry
//! their block and slot, which the gate reads (`stats::decision::crossover_level`).

use serde::{Deserialize, Serialize};

use super::{BaseArm, LevelResult, RunResult};

/// The servers throughline started: the commands (API key redacted), the slots and the
/// blocks.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ServerSetup {
    pub head_command: String,
    pub base_command: Option<String>,
    /// Each slot's GPUs as given to `{gpus}` (e.g. "0", "2,3"): the first pair's.
    pub slots: Vec<String>,
    /// Every pair's slots, where blocks ran on several pairs at once (`--slots` once per
    /// pair); empty with one pair.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pairs: Vec<Vec<String>>,
    pub blocks: Vec<BlockRecord>,
    /// How many times the gate could look (1 + the pairs of blocks the plan could add): the
    /// gate splits the fail side's alpha over them.
    #[serde(default = "one")]
    pub looks: u32,
    /// Why no further block ran ("decided after 6 block(s)", "--max-blocks 8 reached ...").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<String>,
    /// Blocks left out, each with why (a pair whose server did not start, and the partner
    /// of the other orientation dropped with it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dropped: Vec<String>,
    /// The commits compared, where known: legs of one comparison pool only when they agree
    /// (gate/pool.rs), so a leg of an earlier push is never counted into a later one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commits: Option<Commits>,
    /// The levels the run was asked to measure (`--levels`: a later wave's leg measures only
    /// what an earlier merge left undecided); empty: every level of the profile.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub only_levels: Vec<u32>,
}

/// The commits a relative run compared: the head's (the work tree's HEAD where the run
/// started) and the base's (the commit the baseline's ref named), each where known.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Commits {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<String>,
}

fn one() -> u32 {
    1
}

impl ServerSetup {
    /// One line per server log that had output cut from its middle, for a verdict's
    /// warnings ("block 2: the head server's log servers/block-2-head.log: 191611392 bytes
    /// of server output cut").
    pub fn log_cuts(&self) -> Vec<String> {
        let mut lines = Vec::new();
        for b in &self.blocks {
            let arms = [
                ("head", Some(&b.head_log), b.head_log_cut_bytes),
                ("base", b.base_log.as_ref(), b.base_log_cut_bytes),
            ];
            for (arm, log, cut) in arms {
                if let (Some(log), Some(cut)) = (log, cut) {
                    lines.push(format!(
                        "block {}: the {arm} server's log {log}: {cut} bytes of server output \
                         cut (its first and last bytes kept)",
                        b.number
                    ));
                }
            }
        }
        lines
    }
}

/// One block: which slot each arm's server ran on, and where their logs are.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BlockRecord {
    /// 1-based.
    pub number: u32,
    pub head_slot: u32,
    pub base_slot: Option<u32>,
    /// Logs relative to the run's folder.
    pub head_log: String,
    pub base_log: Option<String>,
    /// Bytes of the head server's output cut from the middle of its log (which keeps the
    /// first and the last of it: load/servers/capture.rs); absent when nothing was cut.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head_log_cut_bytes: Option<u64>,
    /// The same for the base server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_log_cut_bytes: Option<u64>,
    /// The levels this block measured (a later block may measure only undecided ones).
    pub levels: Vec<u32>,
    /// The pair of slots it ran on (0-based, in the order of `--slots`), where blocks ran on
    /// several pairs at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pair: Option<u32>,
    /// The runner (leg, 0-based in the merge's order) it ran on, in blocks `merge` pooled
    /// from several legs (gate/pool.rs); absent in one run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner: Option<u32>,
    /// How long the block held its slots: its first server's start to its last one's stop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds: Option<f64>,
}

/// One block's finished run and its slots.
pub struct BlockRun {
    pub record: BlockRecord,
    pub result: RunResult,
}

/// The blocks as one run: every trial labelled with its block and its arm's slot, levels in
/// the order first seen, warnings prefixed with their block (each said once), the run
/// complete only when every block was. `first` gives the profile, its hash and the
/// fingerprint (a later block measuring fewer levels ran a narrower copy of the profile).
/// `None` for no blocks.
pub fn combine(blocks: Vec<BlockRun>, setup: ServerSetup) -> Option<RunResult> {
    let first = blocks.first()?.result.clone();
    let mut out = RunResult {
        levels: Vec::new(),
        warnings: Vec::new(),
        base: first.base.as_ref().map(|b| BaseArm {
            endpoints: b.endpoints,
            model: b.model.clone(),
            engine: b.engine.clone(),
            engine_version: b.engine_version.clone(),
            levels: Vec::new(),
        }),
        drift: None,
        notes: Vec::new(),
        servers: Some(setup),
        analysis: None,
        run_id: Some(super::run_id::run_id().to_string()),
        ..first
    };
    for block in &blocks {
        let r = &block.result;
        let n = block.record.number;
        append(&mut out.levels, &r.levels, n, block.record.head_slot);
        if let (Some(into), Some(from)) = (out.base.as_mut(), r.base.as_ref()) {
            let slot = block.record.base_slot.unwrap_or(block.record.head_slot);
            append(&mut into.levels, &from.levels, n, slot);
        }
        out.complete &= r.complete;
        out.finished_at = r.finished_at.clone();
        for w in &r.warnings {
            let line = format!("block {n}: {w}");
            if !out.warnings.contains(&line) {
                out.warnings.push(line);
            }
        }
        for note in &r.notes {
            if !out.notes.contains(note) {
                out.notes.push(note.clone());
            }
        }
        if r.environment.engine_version != out.environment.engine_version {
            let line = format!(
                "block {n}: the server reported engine version {:?}, block 1 {:?}",
                r.environment.engine_version, out.environment.engine_version
            );
            out.warnings.push(line);
        }
    }
    out.analyse();
    if let Some(d) = out.drift.as_ref().filter(|d| d.flagged) {
        out.warnings.push(super::drift_warning(d));
    }
    Some(out)
}

/// Adds a block's levels' trials, labelled, to `into` (levels matched by concurrency).
fn append(into: &mut Vec<LevelResult>, from: &[LevelResult], block: u32, slot: u32) {
    for level in from {
        let at = match into.iter().position(|l| l.concurrency == level.concurrency) {
            Some(i) => i,
            None => {
                into.push(LevelResult {
                    concurrency: level.concurrency,
                    rate: level.rate,
                    trials: Vec::new(),
                });
                into.len() - 1
            }
        };
        into[at]
            .trials
            .extend(level.trials.iter().cloned().map(|mut t| {
                t.block = Some(block);
                t.slot = Some(slot);
                t
            }));
    }
}

/// Several legs' runs in blocks as one (`merge` pooling the legs of one comparison,
/// gate/pool.rs): the first's profile and environment, every block renumbered after
/// the legs before it and labelled with its runner, warnings prefixed with their runner.
pub fn pool(legs: &[&RunResult]) -> Option<RunResult> {
    let first = *legs.first()?;
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
    // The legs agree on their commits (gate/pool.rs pools only those); the pool measured
    // the union of their levels.
    let mut setup = ServerSetup {
        blocks: Vec::new(),
        dropped: Vec::new(),
        stopped: None,
        only_levels: Vec::new(),
        ..first.servers.clone()?
    };
    let mut offset = 0;
    for (i, run) in legs.iter().enumerate() {
        let Some(servers) = &run.servers else {
            continue;
        };
        let renumber = |n: u32| n.saturating_add(offset);
        append_renumbered(&mut out.levels, &run.levels, &renumber);
        if let (Some(into), Some(from)) = (out.base.as_mut(), run.base.as_ref()) {
            append_renumbered(&mut into.levels, &from.levels, &renumber);
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
    // No analysis and no drift: the pool is only judged (each leg's own trend was said in
    // its own verdict; the pool's trials are not one sequence in time).
    Some(out)
}

/// Adds a leg's levels' trials, their blocks renumbered, to `into` (levels matched by
/// concurrency).
fn append_renumbered(
    into: &mut Vec<LevelResult>,
    from: &[LevelResult],
    renumber: &dyn Fn(u32) -> u32,
) {
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

#[cfg(test)]
mod tests {
    use super::super::fake;
    use super::*;

    fn block(number: u32, head_slot: u32, head: &[f64], base: &[f64]) -> BlockRun {
        let mut result = fake::run(&[(1, head), (8, head)]);
        result.base = Some(BaseArm {
            endpoints: 1,
            model: None,
            engine: None,
            engine_version: None,
            levels: fake::run(&[(1, base), (8, base)]).levels,
        });
        result.warnings = vec!["same warning".into()];
        BlockRun {
            record: BlockRecord {
                number,
                head_slot,
                base_slot: Some(1 - head_slot),
                head_log: format!("servers/block-{number}-head.log"),
                base_log: Some(format!("servers/block-{number}-base.log")),
                head_log_cut_bytes: None,
                base_log_cut_bytes: None,
                levels: vec![1, 8],
                pair: None,
                runner: None,
                seconds: None,
            },
            result,
        }
    }

    #[test]
    fn cut_logs_are_named_and_old_records_still_read() {
        let mut record = block(2, 0, &[1.0], &[1.0]).record;
        record.base_log_cut_bytes = Some(1234);
        let text = serde_json::to_string(&record).unwrap();
        assert!(!text.contains("head_log_cut_bytes"), "{text}");
        let setup = ServerSetup {
            pairs: Vec::new(),
            dropped: Vec::new(),
            commits: None,
            only_levels: Vec::new(),
            head_command: "s".into(),
            base_command: None,
            slots: vec!["0".into()],
            blocks: vec![serde_json::from_str(&text).unwrap()],
            looks: 1,
            stopped: None,
        };
        assert_eq!(
            setup.log_cuts(),
            [
                "block 2: the base server's log servers/block-2-base.log: 1234 bytes of server \
              output cut (its first and last bytes kept)"
            ]
        );
        // A record from before the field reads as nothing cut.
        let old = text.replace(",\"base_log_cut_bytes\":1234", "");
        let old: BlockRecord = serde_json::from_str(&old).unwrap();
        assert_eq!(old.base_log_cut_bytes, None);
    }

    #[test]
    fn blocks_become_one_run_with_labelled_trials() {
        let setup = ServerSetup {
            pairs: Vec::new(),
            dropped: Vec::new(),
            commits: None,
            only_levels: Vec::new(),
            head_command: "serve {port}".into(),
            base_command: Some("serve {port}".into()),
            slots: vec!["0".into(), "1".into()],
            blocks: Vec::new(),
            looks: 1,
            stopped: None,
        };
        let mut second = block(2, 0, &[110.0, 111.0], &[100.0, 101.0]);
        second.result.complete = false;
        let run = combine(
            vec![block(1, 1, &[100.0, 101.0], &[100.0, 99.0]), second],
            setup,
        )
        .unwrap();
        assert_eq!(run.levels.len(), 2);
        let head = &run.levels[0].trials;
        assert_eq!(head.len(), 4);
        assert_eq!(
            head.iter().map(|t| (t.block, t.slot)).collect::<Vec<_>>(),
            [
                (Some(1), Some(1)),
                (Some(1), Some(1)),
                (Some(2), Some(0)),
                (Some(2), Some(0))
            ]
        );
        let base = &run.base.as_ref().unwrap().levels[0].trials;
        assert_eq!(base[0].slot, Some(0));
        assert_eq!(base[3].slot, Some(1));
        assert!(
            !run.complete,
            "one incomplete block makes the run incomplete"
        );
        assert_eq!(
            run.warnings,
            ["block 1: same warning", "block 2: same warning"]
        );
        assert!(run.servers.is_some());
        assert!(combine(
            Vec::new(),
            ServerSetup {
                pairs: Vec::new(),
                dropped: Vec::new(),
                commits: None,
                only_levels: Vec::new(),
                head_command: String::new(),
                base_command: None,
                slots: Vec::new(),
                blocks: Vec::new(),
                looks: 1,
                stopped: None,
            }
        )
        .is_none());
    }
}
