//! Runs with servers that throughline starts itself (`--server-command`), shared by `bench`
//! and `ci`. A relative run becomes a sequence of blocks: each block starts both servers
//! fresh, the arms' slots swapped from the block before (base on slot 0 in block 1, on slot
//! 1 in block 2, ...), runs the profile's interleaved rounds, and stops them. Slot and start
//! effects then fall on both arms in the mean, and the blocks estimate their spread
//! (`stats::decision::crossover_level`).
//!
//! Sequential: after the planned blocks the gate looks; while a level is undecided (and the
//! block and time budgets allow) two more blocks, one per orientation, measure only the
//! undecided levels. The fail side's alpha is split evenly over the looks the budget allows,
//! so false failures stay within the family alpha however many looks are taken.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;

use crate::gate::{LevelStatus, Verdict};
use crate::load::run::interrupt::Interrupt;
use crate::load::servers::{free_port, parse_slots, render, ManagedServer, Slot, Stopped};
use crate::load::{BenchOutcome, BenchSetup};
use crate::record::blocks::{combine, BlockRecord, BlockRun, ServerSetup};
use crate::record::files::REQUESTS_FILE;
use crate::record::RunResult;

/// The server flags of `bench` and `ci`.
#[derive(Debug, Args, Clone, Default)]
pub struct ServerArgs {
    /// Start the server under test (the head) yourself: a shell command in which {port} is
    /// replaced by a free port, {slot} by the slot number (0, 1) and {gpus} by the slot's
    /// GPUs (--slots). It runs in its own process group, its output in
    /// OUT/servers/block-N-head.log; throughline waits until it answers, measures, and stops
    /// it (SIGTERM, then SIGKILL after 30 s). Replaces the profile's endpoints.
    #[arg(long, value_name = "COMMAND", conflicts_with_all = ["endpoints", "base_endpoints"])]
    pub server_command: Option<String>,
    /// The target branch's server (the base), started the same way: a relative run in
    /// blocks, both servers started fresh in each block, their slots swapped from one block
    /// to the next so that a faster GPU or a luckier start falls on both arms.
    #[arg(long, value_name = "COMMAND", requires = "server_command")]
    pub base_server_command: Option<String>,
    #[command(flatten)]
    pub blocks: BlockArgs,
    /// No block is added once this much time has passed (e.g. 45m).
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    pub max_duration: Option<Duration>,
}

/// Where the servers run and how many blocks a run takes: the flags `bench`, `ci` and
/// `bisect` (whose every step is such a run) share.
#[derive(Debug, Args, Clone, Default)]
pub struct BlockArgs {
    /// The slots the servers run on, `;` between slots, e.g. "0;1" (GPU 0 and GPU 1) or
    /// "0,1;2,3" (two tensor-parallel pairs). With one slot ("0") both servers share it and
    /// the swap is of which starts first.
    #[arg(long, value_name = "GPUS;GPUS", default_value = "0;1")]
    pub slots: String,
    /// Blocks to run before the gate looks [default: 4 in a relative run, else 1].
    #[arg(long = "blocks", value_name = "N")]
    pub first: Option<u32>,
    /// The most blocks in all: while a level is undecided after a look, two more blocks run
    /// for the undecided levels [default: --blocks + 8 in a relative run: with a start
    /// spread near 3% (a real llama-server here) 8 blocks passed an unchanged server 64% of
    /// the time, 12 blocks 94% (benches/gate_crossover.rs)].
    #[arg(long = "max-blocks", value_name = "N")]
    pub max: Option<u32>,
    /// How long a started server may take to answer (GET /health or /v1/models).
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = humantime::parse_duration)]
    pub server_timeout: Duration,
}

/// The most blocks one run may take (each starts two servers).
const MAX_BLOCKS: u32 = 64;

/// The block plan a run follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockPlan {
    /// Blocks before the first look.
    pub first: u32,
    /// Blocks in all, at most.
    pub max: u32,
}

impl BlockPlan {
    /// How many times the gate may look: after the first blocks, then after each pair.
    pub fn looks(&self) -> u32 {
        1 + (self.max - self.first).div_ceil(2)
    }
}

impl ServerArgs {
    /// Whether throughline starts the servers.
    pub fn managed(&self) -> bool {
        self.server_command.is_some()
    }

    /// The block plan, checked.
    pub fn plan(&self) -> Result<BlockPlan> {
        let relative = self.base_server_command.is_some();
        let first = self.blocks.first.unwrap_or(if relative { 4 } else { 1 });
        if first == 0 || first > MAX_BLOCKS {
            bail!("--blocks: {first} is outside 1..={MAX_BLOCKS}");
        }
        let max = self
            .blocks
            .max
            .unwrap_or(if relative { first + 8 } else { first });
        if max < first || max > MAX_BLOCKS {
            bail!("--max-blocks: {max} is outside {first}..={MAX_BLOCKS} (at least --blocks)");
        }
        if !relative && max > first {
            bail!("--max-blocks needs --base-server-command: only a relative run adds blocks");
        }
        Ok(BlockPlan { first, max })
    }

    /// Checks the templates and slots before anything starts (a typo fails at once).
    pub fn check(&self) -> Result<Vec<Slot>> {
        let slots = parse_slots(&self.blocks.slots).context("--slots")?;
        for (flag, command) in [
            ("--server-command", &self.server_command),
            ("--base-server-command", &self.base_server_command),
        ] {
            if let Some(c) = command {
                render(c, 1, &slots[0]).with_context(|| flag.to_string())?;
            }
        }
        self.plan()?;
        Ok(slots)
    }
}

/// The levels a verdict left undecided (any metric): where another pair of blocks may
/// decide. None once a level regressed: the verdict is then a regression whatever the
/// others say (and benches/gate_crossover.rs calibrated the plan stopping there).
pub fn undecided_levels(verdict: &Verdict) -> Vec<u32> {
    if verdict
        .levels
        .iter()
        .any(|l| l.status == LevelStatus::Regression)
    {
        return Vec::new();
    }
    let mut levels: Vec<u32> = (verdict.levels.iter())
        .filter(|l| l.status == LevelStatus::Inconclusive)
        .map(|l| l.concurrency)
        .collect();
    levels.sort_unstable();
    levels.dedup();
    levels
}

/// Which levels a look left undecided (empty: stop), given the run so far (whose
/// `servers.looks` tells the gate how many looks to split alpha over).
pub type Undecided<'a> = dyn Fn(&RunResult) -> Result<Vec<u32>> + 'a;

/// Runs the blocks and returns the combined run, written to `template.out_dir`. `undecided`
/// (None: no sequential looks) names the levels to measure again after a look.
pub async fn run_in_blocks(
    template: BenchSetup,
    args: &ServerArgs,
    undecided: Option<&Undecided<'_>>,
) -> Result<BenchOutcome> {
    let slots = args.check()?;
    let plan = args.plan()?;
    let Some(head_command) = args.server_command.clone() else {
        bail!("--server-command is needed to start servers");
    };
    let out = template.out_dir.clone();
    // Nothing is written through a link: the folder, its servers/ and blocks/ (a checkout
    // can commit `servers -> ~/`).
    crate::fsutil::ensure_output_dir(&out)?;
    for dir in ["servers", "blocks"] {
        crate::fsutil::refuse_linked_dir(&out.join(dir))?;
    }
    // From here a signal stops the run rather than the process: every phase below looks.
    let interrupt = Interrupt::from_signals();
    // A server's helper that daemonises (parent exits, child calls setsid) becomes this
    // process's child rather than init's: it can be found and stopped with its server.
    crate::load::servers::tree::become_subreaper();
    crate::locks::hold_output(&out)?;
    crate::locks::hold_gpus(&slots, args.blocks.server_timeout, &interrupt).await?;
    if let Some((kept, names)) = super::earlier::keep_earlier_run(&out)? {
        for dir in ["blocks", "servers"] {
            if out.join(dir).is_dir() {
                std::fs::rename(out.join(dir), kept.join(dir)).with_context(|| {
                    format!("cannot move the earlier run's {dir}/ to {}", kept.display())
                })?;
            }
        }
        println!(
            "the earlier run's files in {} ({}) are kept: moved to {}",
            out.display(),
            names.join(", "),
            kept.display()
        );
    }
    print_plan(&template, args)?;
    let mut levels: Vec<u32> = template.profile.sweep.concurrency.clone();
    let started = Instant::now();
    let mut runs: Vec<BlockRun> = Vec::new();
    let mut why_stopped = String::from("the planned blocks ran");
    let mut look_took = Duration::ZERO;
    let mut stopped_by: Option<(i32, u32, String)> = None;
    'looks: loop {
        let n = runs.len() as u32;
        let chunk = if n == 0 {
            plan.first
        } else {
            2.min(plan.max - n)
        };
        let look_started = Instant::now();
        for k in 1..=chunk {
            let block = n + k;
            if let Some(sig) = interrupt.signal() {
                stopped_by = Some((sig, block, format!("before block {block} started")));
                break 'looks;
            }
            match run_block(&template, args, &head_command, &slots, block, &levels).await {
                Ok(run) => runs.push(run),
                // Stopped by a signal, whatever the block said about it (a server the
                // signal reached first may have failed the block before the run saw it).
                Err(e) => match interrupt.signal() {
                    Some(sig) => {
                        let coded =
                            matches!(crate::exit::exit_for(&e), crate::exit::Exit::Interrupted(_));
                        if !coded {
                            let said = crate::record::redact::redact_error(&format!("{e:#}"));
                            eprintln!(
                                "note: block {block} stopped: {}",
                                crate::untrusted::for_terminal_lines(&said)
                            );
                        }
                        let what = match coded {
                            true => e.to_string(),
                            false => format!("in block {block}"),
                        };
                        stopped_by = Some((sig, block, what));
                        break 'looks;
                    }
                    None => return Err(e),
                },
            }
        }
        look_took = look_took.max(look_started.elapsed());
        let Some(undecided) = undecided else { break };
        let so_far = combined(&runs, &head_command, args, &slots, plan)?;
        let open = undecided(&so_far)?;
        if open.is_empty() {
            why_stopped = format!("decided after {} block(s)", runs.len());
            break;
        }
        if runs.len() as u32 >= plan.max {
            why_stopped = format!(
                "--max-blocks {} reached with C={} undecided",
                plan.max,
                list(&open)
            );
            break;
        }
        if let Some(budget) = args.max_duration {
            if started.elapsed() + look_took > budget {
                why_stopped = format!(
                    "--max-duration {} would be passed by two more blocks (C={} undecided)",
                    humantime::format_duration(budget),
                    list(&open)
                );
                break;
            }
        }
        println!(
            "throughline: C={} undecided after {} block(s): two more blocks (one each way round) for {}",
            list(&open),
            runs.len(),
            if open.len() == 1 { "it" } else { "them" }
        );
        levels = open;
    }
    if let Some((sig, block, what)) = &stopped_by {
        let name = crate::load::run::interrupt::signal_name(*sig);
        if runs.is_empty() {
            return Err(crate::exit::CodedError {
                exit: crate::exit::Exit::Interrupted(*sig),
                message: format!(
                    "{what}; no block is complete: its servers are stopped, and what it \
                     measured (if anything) is in {}",
                    out.join(format!("blocks/block-{block}")).display()
                ),
            }
            .into());
        }
        why_stopped = format!(
            "interrupted by {name} in block {block}, whose servers were stopped (what it \
             measured is in blocks/block-{block}/, outside these results)"
        );
    }
    let mut result = combined(&runs, &head_command, args, &slots, plan)?;
    if let Some(servers) = result.servers.as_mut() {
        servers.stopped = Some(format!(
            "{} block(s) run ({} planned, at most {}); stopped: {why_stopped}",
            runs.len(),
            plan.first,
            plan.max
        ));
    }
    if stopped_by.is_some() {
        result.complete = false;
    }
    crate::load::write_results(&result, &out)?;
    join_journals(&runs, &out)?;
    print_table(&result);
    Ok(BenchOutcome {
        problems: Vec::new(),
        interrupted: stopped_by.map(|(sig, _, _)| sig),
        result,
    })
}

/// "1,8": levels for messages.
fn list(levels: &[u32]) -> String {
    levels
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// The blocks so far as one run.
fn combined(
    runs: &[BlockRun],
    head_command: &str,
    args: &ServerArgs,
    slots: &[Slot],
    plan: BlockPlan,
) -> Result<RunResult> {
    let redact = |c: &str| crate::record::redact::redact(c).into_owned();
    let setup = ServerSetup {
        head_command: redact(head_command),
        base_command: args.base_server_command.as_deref().map(redact),
        slots: slots.iter().map(|s| s.gpus.clone()).collect(),
        blocks: runs.iter().map(|r| r.record.clone()).collect(),
        looks: plan.looks(),
        stopped: None,
    };
    let copies = runs
        .iter()
        .map(|r| BlockRun {
            record: r.record.clone(),
            result: r.result.clone(),
        })
        .collect();
    combine(copies, setup).context("no block ran")
}

/// The slot index each arm runs on in block `n` (1-based): base on 0 and head on 1 in odd
/// blocks, the other way round in even ones; one server alone stays on slot 0.
fn slot_indices(n: u32, relative: bool) -> (u32, u32) {
    match (relative, n % 2) {
        (false, _) => (0, 0),
        (true, 1) => (1, 0),
        (true, _) => (0, 1),
    }
}

/// One block: start the servers (slot 0's first), measure `levels`, stop them.
async fn run_block(
    template: &BenchSetup,
    args: &ServerArgs,
    head_command: &str,
    slots: &[Slot],
    n: u32,
    levels: &[u32],
) -> Result<BlockRun> {
    let relative = args.base_server_command.is_some();
    let (head_slot, base_slot) = slot_indices(n, relative);
    let out = &template.out_dir;
    let slot = |i: u32| Slot {
        index: i as usize,
        gpus: slots[i as usize % slots.len()].gpus.clone(),
    };
    let log = |arm: &str| format!("servers/block-{n}-{arm}.log");
    // (arm, command, slot): started in slot order, so slot 0's server always starts first.
    let mut arms: Vec<(&str, &str, u32)> = vec![("head", head_command, head_slot)];
    if let Some(base) = &args.base_server_command {
        arms.push(("base", base, base_slot));
    }
    arms.sort_by_key(|a| a.2);
    let interrupt = Interrupt::from_signals();
    let mut servers: Vec<(&str, ManagedServer)> = Vec::new();
    for (arm, command, i) in &arms {
        let port = free_port()?;
        let line = render(command, port, &slot(*i))?;
        let label = format!("block {n} {arm} server (slot {i})");
        let mut server = ManagedServer::start(&label, &line, port, &slot(*i), &out.join(log(arm)))
            .await
            .with_context(|| format!("cannot start the {label}"))?;
        super::cleanup::record_start(out, server.pid(), &label)?;
        let up = tokio::select! {
            up = server.wait_healthy(args.blocks.server_timeout, None) => Some(up),
            () = interrupt.stopping() => None,
        };
        servers.push((arm, server));
        let failed = match up {
            Some(Ok(())) => continue,
            Some(Err(e)) => e.context(format!("block {n}: the {arm} server did not come up")),
            None => interrupt
                .error(format_args!("block {n}'s {arm} server was loading"))
                .unwrap_or_else(|| anyhow::anyhow!("interrupted")),
        };
        // The servers started so far are stopped, not merely dropped (SIGTERM first).
        let _ = stop_all(servers).await;
        return Err(failed);
    }
    let url = |arm: &str| {
        servers
            .iter()
            .find(|(a, _)| *a == arm)
            .map(|(_, s)| s.url())
    };
    let mut profile = template.profile.clone();
    profile.target.endpoints = url("head").into_iter().collect();
    profile.sweep.concurrency = levels.to_vec();
    let setup = BenchSetup {
        profile,
        environment: template.environment.clone(),
        out_dir: out.join(format!("blocks/block-{n}")),
        show_progress: template.show_progress,
        base_endpoints: url("base").into_iter().collect(),
    };
    crate::fsutil::ensure_output_dir(&out.join("blocks"))?;
    crate::fsutil::ensure_output_dir(&setup.out_dir)?;
    let slots_said = if relative {
        format!("head on slot {head_slot}, base on slot {base_slot}")
    } else {
        format!("slot {head_slot}")
    };
    let measured = crate::load::run_bench(setup, |_, _| {}).await;
    // Stop both whatever happened; a server that died mid-run is named with its log.
    let mut died = Vec::new();
    for (arm, server) in servers.iter_mut() {
        if let Some(status) = server.exited() {
            died.push(format!(
                "the {arm} server exited during block {n} ({status}); the end of its log:\n{}",
                server.log_tail(40)
            ));
        }
    }
    let (mut head_cut, mut base_cut) = (None, None);
    for (arm, stopped) in stop_all(servers).await? {
        let cut = (stopped.log_cut_bytes > 0).then_some(stopped.log_cut_bytes);
        match arm {
            "base" => base_cut = cut,
            _ => head_cut = cut,
        }
    }
    let mut outcome = measured?;
    if !died.is_empty() {
        bail!("{}", died.join("\n"));
    }
    if outcome.interrupted.is_some() {
        // Carries its exit code (130/143), so that callers tell a stop from a failure.
        return Err(interrupt
            .error(format_args!(
                "block {n} was interrupted; the blocks before it are in {}",
                out.display()
            ))
            .unwrap_or_else(|| anyhow::anyhow!("block {n} was interrupted")));
    }
    if !outcome.problems.is_empty() {
        bail!(
            "block {n} could not measure every level: {}",
            outcome.problems.join("; ")
        );
    }
    for (arm, cut) in [("head", head_cut), ("base", base_cut)] {
        if let Some(cut) = cut {
            outcome.result.warnings.push(format!(
                "the {arm} server's log {} keeps its first {} and last {} bytes: {cut} bytes of \
                 server output cut",
                log(arm),
                crate::load::servers::LOG_HEAD_BYTES,
                crate::load::servers::LOG_TAIL_BYTES
            ));
        }
    }
    println!("block {n}: {slots_said}: {}", block_line(&outcome.result));
    Ok(BlockRun {
        record: BlockRecord {
            number: n,
            head_slot,
            base_slot: relative.then_some(base_slot),
            head_log: log("head"),
            base_log: relative.then(|| log("base")),
            head_log_cut_bytes: head_cut,
            base_log_cut_bytes: base_cut,
            levels: levels.to_vec(),
        },
        result: outcome.result,
    })
}

/// Stops every server at once (SIGTERM to all, then each one's grace in parallel, so that
/// the whole stop stays within one grace period): what each stop said, by arm, or the
/// first error once all were stopped.
async fn stop_all(servers: Vec<(&str, ManagedServer)>) -> Result<Vec<(&str, Stopped)>> {
    let stops =
        (servers.into_iter()).map(|(arm, server)| async move { (arm, server.stop().await) });
    let mut said = Vec::new();
    for (arm, stopped) in futures::future::join_all(stops).await {
        said.push((arm, stopped?));
    }
    Ok(said)
}

/// A block in one line: each level's mean tok/s per arm ("C=1 head 492, base 501").
fn block_line(result: &RunResult) -> String {
    let mean = |l: &crate::record::LevelResult| {
        l.trial_mean(|t| Some(t.output_tok_per_s))
            .map_or("-".to_string(), |m| format!("{m:.1}"))
    };
    (result.levels.iter())
        .map(|h| {
            let base = (result.base.iter())
                .flat_map(|b| &b.levels)
                .find(|b| b.concurrency == h.concurrency);
            match base {
                Some(b) => format!(
                    "C={} head {}, base {} tok/s",
                    h.concurrency,
                    mean(h),
                    mean(b)
                ),
                None => format!("C={} {} tok/s", h.concurrency, mean(h)),
            }
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Prints the run's plan and, at the end, the combined table (every block's trials).
pub fn print_plan(template: &BenchSetup, args: &ServerArgs) -> Result<()> {
    let plan = args.plan()?;
    let p = &template.profile;
    let relative = args.base_server_command.is_some();
    println!(
        "throughline bench: profile {}, {} level(s) x {} trial(s) per block, {} block(s) \
         first{}, servers started by throughline on slots {:?}{}",
        crate::untrusted::for_terminal(&format!("{:?}", p.name)),
        p.sweep.level_count(),
        p.sweep.trials,
        plan.first,
        if plan.max > plan.first {
            format!(" (up to {} while a level is undecided)", plan.max)
        } else {
            String::new()
        },
        args.blocks.slots,
        if relative {
            "; relative: both servers started fresh in each block, slots swapped between blocks"
        } else {
            ""
        }
    );
    println!(
        "{} (each block)",
        crate::report::console::planned(p, if relative { 2 } else { 1 })
    );
    Ok(())
}

/// The combined table of a run in blocks, both arms.
pub fn print_table(result: &RunResult) {
    use crate::report::console;
    println!("all blocks together:");
    println!("{}", console::level_header());
    println!("{}", "-".repeat(console::level_header().len()));
    let arms: Vec<(Option<crate::record::Arm>, &[crate::record::LevelResult])> = match &result.base
    {
        Some(b) => vec![
            (Some(crate::record::Arm::Base), b.levels.as_slice()),
            (Some(crate::record::Arm::Head), result.levels.as_slice()),
        ],
        None => vec![(None, result.levels.as_slice())],
    };
    for (arm, levels) in arms {
        if arm.is_some() {
            println!("{}", console::arm_heading(arm));
        }
        for level in levels {
            println!("{}", console::level_row(level));
        }
    }
}

/// The blocks' requests.jsonl, one after the other, each line with its block first:
/// OUT/requests.jsonl holds every request of the run.
fn join_journals(runs: &[BlockRun], out: &Path) -> Result<()> {
    let path = out.join(REQUESTS_FILE);
    let mut writer = std::io::BufWriter::new(crate::fsutil::create_output(&path)?);
    for run in runs {
        let n = run.record.number;
        let from: PathBuf = out.join(format!("blocks/block-{n}")).join(REQUESTS_FILE);
        let file = std::fs::File::open(&from)
            .with_context(|| format!("cannot read {}", from.display()))?;
        for line in std::io::BufReader::new(file).lines() {
            let line = line.with_context(|| format!("cannot read {}", from.display()))?;
            match line.strip_prefix('{') {
                Some(rest) => writeln!(writer, "{{\"block\":{n},{rest}")?,
                None if line.trim().is_empty() => {}
                None => writeln!(writer, "{line}")?,
            }
        }
    }
    writer
        .flush()
        .with_context(|| format!("cannot write {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_swap_between_blocks() {
        assert_eq!(slot_indices(1, true), (1, 0));
        assert_eq!(slot_indices(2, true), (0, 1));
        assert_eq!(slot_indices(3, true), (1, 0));
        assert_eq!(slot_indices(2, false), (0, 0));
    }

    #[test]
    fn the_plan_counts_its_looks() {
        let args = ServerArgs {
            server_command: Some("s {port}".into()),
            base_server_command: Some("s {port}".into()),
            ..Default::default()
        };
        let plan = args.plan().unwrap();
        assert_eq!((plan.first, plan.max, plan.looks()), (4, 12, 5));
        let one = ServerArgs {
            server_command: Some("s {port}".into()),
            ..Default::default()
        };
        assert_eq!(one.plan().unwrap().looks(), 1);
        let bad = ServerArgs {
            blocks: BlockArgs {
                max: Some(2),
                ..args.blocks.clone()
            },
            ..args.clone()
        };
        assert!(bad.plan().unwrap_err().to_string().contains("--max-blocks"));
    }
}
