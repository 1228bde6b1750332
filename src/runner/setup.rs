//! A run in blocks, typed and checked once from the flags: which servers to start, on which
//! pairs of slots, how many blocks, within what time; and the blocks so far read as one run.

use std::time::Duration;

use anyhow::{bail, Context, Result};

use crate::gate::{BlockPlan, Verdict};
use crate::load::servers::{parse_slots, render, Slot};
use crate::profile::Profile;
use crate::record::blocks::{combine, BlockRun, Commits, ServerSetup};
use crate::record::RunResult;

/// A run in blocks, typed and checked once from the flags (`commands::flags::ServerArgs`,
/// or bisect's and demo's own): which servers to start, on which slots, how many blocks.
/// Immutable once built: its variants (a deadline, more blocks, no GPU lock, no table) are
/// made by the constructors below, before the run is given it.
#[derive(Debug, Clone)]
pub struct BlocksSetup {
    /// The head's server command template ({port}, {slot}, {gpus}).
    pub(super) head_command: String,
    /// The base's, for a relative run.
    pub(super) base_command: Option<String>,
    /// The slots as given (`--slots`, once per pair), for messages.
    pub(super) slots_text: String,
    /// Each pair's slots, parsed (one `--slots` each): a round runs one block on every pair
    /// at once. A pair is two slots (its arms swap between them) or one shared slot.
    pub(super) pairs: Vec<Vec<Slot>>,
    /// Blocks before the first look, and at most.
    pub(super) plan: BlockPlan,
    /// How long a started server may take to answer.
    pub(super) server_timeout: Duration,
    /// One deadline for the whole job (`--max-duration`).
    pub(super) max_duration: Option<Duration>,
    /// Print every block's trials together at the end (the demo leaves them to its files).
    pub(super) print_table: bool,
    /// Take the machine-wide locks of the slots' GPUs (commands/flags.rs decides: not when
    /// no GPU was named, neither by --slots nor through {gpus}).
    pub(super) lock_gpus: bool,
    /// The commits compared, recorded in the results (legs pool only when they agree).
    pub(super) commits: Option<Commits>,
    /// Measure only these levels of the profile (`--levels`); empty: all of them.
    pub(super) only_levels: Vec<u32>,
}

impl BlocksSetup {
    /// Checks the templates, slots and plan before anything starts (a typo fails at once);
    /// `slots`: one `--slots` value per pair; `blocks`: `--blocks` and `--max-blocks` (None:
    /// the defaults).
    pub fn new(
        head: &str,
        base: Option<&str>,
        slots: &[String],
        blocks: (Option<u32>, Option<u32>),
        server_timeout: Duration,
    ) -> Result<BlocksSetup> {
        let pairs = parse_pairs(slots)?;
        for (flag, command) in [
            ("--server-command", Some(head)),
            ("--base-server-command", base),
        ] {
            if let Some(c) = command {
                render(c, 1, &pairs[0][0]).with_context(|| flag.to_string())?;
            }
        }
        let quoted: Vec<String> = slots.iter().map(|s| format!("{s:?}")).collect();
        let plan = BlockPlan::of_run(blocks.0, blocks.1, base.is_some(), pairs.len())?;
        Ok(BlocksSetup {
            head_command: head.to_string(),
            base_command: base.map(str::to_string),
            slots_text: quoted.join(" "),
            pairs,
            plan,
            server_timeout,
            max_duration: None,
            print_table: true,
            lock_gpus: true,
            commits: None,
            only_levels: Vec::new(),
        })
    }

    /// The same run within one deadline for the whole job (`--max-duration`; None: none).
    pub fn with_deadline(self, max_duration: Option<Duration>) -> BlocksSetup {
        BlocksSetup {
            max_duration,
            ..self
        }
    }

    /// The same run with up to `max` blocks in all (bisect measures a commit the gate could
    /// not tell again with more); the first look's blocks kept.
    pub fn with_max_blocks(self, max: u32) -> Result<BlocksSetup> {
        let first = Some(self.plan.first);
        let plan = BlockPlan::of_run(first, Some(max), self.relative(), self.pairs.len())?;
        Ok(BlocksSetup { plan, ..self })
    }

    /// The same run taking the GPUs' machine-wide locks or not (`lock`: the run named its
    /// GPUs; simulators on no GPU only play slots).
    pub fn locking_gpus(self, lock: bool) -> BlocksSetup {
        BlocksSetup {
            lock_gpus: lock,
            ..self
        }
    }

    /// The same run printing the blocks' combined table at the end or not.
    pub fn printing_table(self, print_table: bool) -> BlocksSetup {
        BlocksSetup {
            print_table,
            ..self
        }
    }

    /// The same run recording the commits it compares (the results carry them, and `merge`
    /// pools only legs that agree).
    pub fn comparing(self, commits: Commits) -> BlocksSetup {
        BlocksSetup {
            commits: Some(commits),
            ..self
        }
    }

    /// The same run measuring only `levels` of the profile (a later wave's leg: the levels an
    /// earlier merge left undecided); empty: every level. Each must be one of the profile's
    /// (the runner checks before anything starts).
    pub fn measuring_only(self, mut levels: Vec<u32>) -> BlocksSetup {
        levels.sort_unstable();
        levels.dedup();
        BlocksSetup {
            only_levels: levels,
            ..self
        }
    }

    /// What this run measures of `profile`, worked out once before anything starts: the
    /// first look's levels (`--levels` where given, each checked to be one of the
    /// profile's, else all of them, in the profile's order), and where `--levels` asked for
    /// fewer, the whole profile's levels and hash that every look's combined run keeps.
    pub fn measured(&self, profile: &Profile) -> Result<Measured> {
        let all = &profile.sweep.concurrency;
        if self.only_levels.is_empty() {
            return Ok(Measured {
                first: all.clone(),
                whole: None,
            });
        }
        if let Some(odd) = self.only_levels.iter().find(|c| !all.contains(c)) {
            let known: Vec<String> = all.iter().map(u32::to_string).collect();
            bail!(
                "--levels: C={odd} is not a level of the profile (its levels: {})",
                known.join(", ")
            );
        }
        Ok(Measured {
            first: (all.iter().copied())
                .filter(|c| self.only_levels.contains(c))
                .collect(),
            whole: Some((all.clone(), profile.canonical_hash()?)),
        })
    }

    /// Blocks before the first look, and at most.
    pub fn plan(&self) -> BlockPlan {
        self.plan
    }

    /// Whether the run takes the GPUs' machine-wide locks.
    pub fn locks_gpus(&self) -> bool {
        self.lock_gpus
    }

    /// Whether both arms are started (a relative run).
    pub fn relative(&self) -> bool {
        self.base_command.is_some()
    }

    /// Every slot of every pair (their GPUs are locked for the run).
    pub fn all_slots(&self) -> Vec<Slot> {
        self.pairs.iter().flatten().cloned().collect()
    }

    /// How many GPUs pair `pair` holds (each slot at least one: "0,1;2,3" holds 4).
    pub fn gpus_in(&self, pair: usize) -> usize {
        (self.pairs[pair].iter())
            .map(|s| {
                s.gpus
                    .split(',')
                    .filter(|g| !g.trim().is_empty())
                    .count()
                    .max(1)
            })
            .sum()
    }

    /// Pair `pair`'s GPUs as given, for messages ("0;1").
    pub fn pair_text(&self, pair: usize) -> String {
        let gpus: Vec<&str> = self.pairs[pair].iter().map(|s| s.gpus.as_str()).collect();
        gpus.join(";")
    }
}

/// The pairs of slots, one per `--slots`, checked: all of one shape (two slots each, or one
/// shared slot each), and no GPU in two of them (two blocks at once on one GPU would
/// measure each other).
fn parse_pairs(slots: &[String]) -> Result<Vec<Vec<Slot>>> {
    if slots.is_empty() {
        bail!("--slots: give at least one, e.g. --slots \"0;1\"");
    }
    let mut pairs = Vec::new();
    for text in slots {
        pairs.push(parse_slots(text).with_context(|| format!("--slots {text:?}"))?);
    }
    let shape = pairs[0].len();
    if let Some(odd) = pairs.iter().position(|p| p.len() != shape) {
        bail!(
            "--slots {:?} has {} slot(s) and --slots {:?} {shape}: every pair is two slots \
             (\"0;1\") or every pair one shared slot (\"0\")",
            slots[odd],
            pairs[odd].len(),
            slots[0]
        );
    }
    let mut seen: Vec<&str> = Vec::new();
    for gpu in pairs.iter().flatten().flat_map(|s| s.gpus.split(',')) {
        let gpu = gpu.trim();
        if !gpu.is_empty() && seen.contains(&gpu) {
            bail!(
                "--slots: GPU {gpu} is in two slots: blocks run on every pair at once, and \
                 two servers on one GPU would measure each other"
            );
        }
        seen.push(gpu);
    }
    Ok(pairs)
}

/// The gate's verdict on the run so far, at each look: the levels it leaves undecided are
/// measured again (`gate::undecided_levels`); its `servers.looks` tells the gate how many
/// looks to split alpha over.
pub type Decide<'a> = dyn Fn(&RunResult) -> Result<Verdict> + 'a;

/// What a run in blocks measures of its profile ([`BlocksSetup::measured`]).
pub struct Measured {
    /// The levels of the first look.
    pub first: Vec<u32>,
    /// The whole profile's levels and hash, where the run measures fewer (`--levels`).
    whole: Option<(Vec<u32>, String)>,
}

/// The blocks so far as one run, of the profile as asked: a run measuring fewer of its
/// levels (`--levels`) is still of that profile and its hash (`measured`);
/// `servers.only_levels` says which it measured.
pub fn combined(runs: &[BlockRun], setup: &BlocksSetup, measured: &Measured) -> Result<RunResult> {
    let redact = |c: &str| crate::record::redact::redact(c).into_owned();
    let gpus = |pair: &Vec<Slot>| pair.iter().map(|s| s.gpus.clone()).collect::<Vec<_>>();
    let servers = ServerSetup {
        head_command: redact(&setup.head_command),
        base_command: setup.base_command.as_deref().map(redact),
        slots: gpus(&setup.pairs[0]),
        pairs: match setup.pairs.len() {
            1 => Vec::new(),
            _ => setup.pairs.iter().map(gpus).collect(),
        },
        blocks: runs.iter().map(|r| r.record.clone()).collect(),
        looks: setup.plan.looks(),
        stopped: None,
        dropped: Vec::new(),
        commits: setup.commits.clone(),
        only_levels: setup.only_levels.clone(),
    };
    let copies = runs
        .iter()
        .map(|r| BlockRun {
            record: r.record.clone(),
            result: r.result.clone(),
        })
        .collect();
    let mut run = combine(copies, servers).context("no block ran")?;
    if let Some((levels, hash)) = &measured.whole {
        run.profile.sweep.concurrency = levels.clone();
        run.profile_hash = hash.clone();
    }
    Ok(run)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_setup_checks_templates_slots_and_plan_before_anything_starts() {
        let timeout = Duration::from_secs(1);
        let slots = |s: &[&str]| s.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let ab = BlocksSetup::new(
            "s {port}",
            Some("s {port}"),
            &slots(&["0;1"]),
            (None, None),
            timeout,
        );
        let ab = ab.unwrap();
        assert_eq!((ab.plan.first, ab.plan.max, ab.pairs[0].len()), (4, 16, 2));
        assert!(ab.relative());
        let one =
            BlocksSetup::new("s {port}", None, &slots(&["0"]), (None, None), timeout).unwrap();
        assert_eq!((one.plan.looks(), one.relative()), (1, false));
        let bad =
            BlocksSetup::new("s {prot}", None, &slots(&["0"]), (None, None), timeout).unwrap_err();
        assert!(format!("{bad:#}").contains("--server-command"), "{bad:#}");
        let bad = BlocksSetup::new(
            "s {port}",
            Some("s {port}"),
            &slots(&["0;1"]),
            (None, Some(2)),
            timeout,
        );
        assert!(bad.unwrap_err().to_string().contains("--max-blocks"));
        assert!(BlocksSetup::new("s {port}", None, &slots(&[""]), (None, None), timeout).is_err());
        // Pairs: one shape, no GPU twice.
        let four = slots(&["0;1", "2;3", "4;5", "6;7"]);
        let node = BlocksSetup::new("s {port}", Some("s {port}"), &four, (None, None), timeout);
        assert_eq!(node.unwrap().all_slots().len(), 8);
        let mixed = BlocksSetup::new(
            "s {port}",
            None,
            &slots(&["0;1", "2"]),
            (None, None),
            timeout,
        );
        assert!(format!("{:#}", mixed.unwrap_err()).contains("every pair"));
        let twice = BlocksSetup::new(
            "s {port}",
            None,
            &slots(&["0;1", "1;2"]),
            (None, None),
            timeout,
        );
        assert!(format!("{:#}", twice.unwrap_err()).contains("GPU 1 is in two slots"));
    }
}
