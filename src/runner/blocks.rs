//! Runs with servers that throughline starts itself (`--server-command`), for `bench`, `ci`,
//! `bisect` and `demo`. A relative run becomes a sequence of blocks: each block starts both
//! servers fresh, the arms' slots swapped from the block before (base on slot 0 in block 1,
//! on slot 1 in block 2, ...), runs the profile's interleaved rounds, and stops them. Slot and start
//! effects then fall on both arms in the mean, and the blocks estimate their spread
//! (`stats::decision::crossover_level`).
//!
//! Sequential: after the planned blocks the gate looks; while a level is undecided (and the
//! block and time budgets allow) two more blocks, one per orientation, measure only the
//! undecided levels (the plan and the rule are the gate's: `gate::sequential`).

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::gate::{BlockPlan, Verdict};
use crate::load::run::interrupt::Interrupt;
use crate::load::servers::{parse_slots, render, Launch, ManagedServer, Slot, Stopped};
use crate::load::{BenchOutcome, BenchSetup};
use crate::record::blocks::{combine, BlockRecord, BlockRun, ServerSetup};
use crate::record::files::REQUESTS_FILE;
use crate::record::RunResult;

/// A run in blocks, typed and checked once from the flags (`commands::flags::ServerArgs`,
/// or bisect's and demo's own): which servers to start, on which slots, how many blocks.
#[derive(Debug, Clone)]
pub struct BlocksSetup {
    /// The head's server command template ({port}, {slot}, {gpus}).
    pub head_command: String,
    /// The base's, for a relative run.
    pub base_command: Option<String>,
    /// The slots as given (`--slots`), for messages.
    pub slots_text: String,
    /// The slots, parsed.
    pub slots: Vec<Slot>,
    /// Blocks before the first look, and at most.
    pub plan: BlockPlan,
    /// How long a started server may take to answer.
    pub server_timeout: Duration,
    /// No block is added once this much time has passed.
    pub max_duration: Option<Duration>,
    /// Print every block's trials together at the end (the demo leaves them to its files).
    pub print_table: bool,
}

impl BlocksSetup {
    /// Checks the templates, slots and plan before anything starts (a typo fails at once);
    /// `blocks`: `--blocks` and `--max-blocks` (None: the defaults).
    pub fn new(
        head: &str,
        base: Option<&str>,
        slots: &str,
        blocks: (Option<u32>, Option<u32>),
        server_timeout: Duration,
    ) -> Result<BlocksSetup> {
        let parsed = parse_slots(slots).context("--slots")?;
        for (flag, command) in [
            ("--server-command", Some(head)),
            ("--base-server-command", base),
        ] {
            if let Some(c) = command {
                render(c, 1, &parsed[0]).with_context(|| flag.to_string())?;
            }
        }
        Ok(BlocksSetup {
            head_command: head.to_string(),
            base_command: base.map(str::to_string),
            slots_text: slots.to_string(),
            slots: parsed,
            plan: BlockPlan::new(blocks.0, blocks.1, base.is_some())?,
            server_timeout,
            max_duration: None,
            print_table: true,
        })
    }

    /// Whether both arms are started (a relative run).
    pub fn relative(&self) -> bool {
        self.base_command.is_some()
    }
}

/// The gate's verdict on the run so far, at each look: the levels it leaves undecided are
/// measured again (`gate::undecided_levels`); its `servers.looks` tells the gate how many
/// looks to split alpha over.
pub type Decide<'a> = dyn Fn(&RunResult) -> Result<Verdict> + 'a;

/// Runs the blocks and returns the combined run, written to `template.out_dir`. `decide`
/// (None: no sequential looks) is the gate's verdict at each look.
pub async fn run_in_blocks(
    template: BenchSetup,
    setup: &BlocksSetup,
    decide: Option<&Decide<'_>>,
) -> Result<BenchOutcome> {
    let out = template.out_dir.clone();
    // The job's one clock: --max-duration counts from here, the GPUs' wait included.
    let started = Instant::now();
    let interrupt = take_the_folder_and_slots(&out, setup).await?;
    print_plan(&template, setup);
    let looked = run_looks(&template, setup, decide, &interrupt, started).await?;
    let Looked {
        runs,
        mut why_stopped,
        stopped_by,
    } = looked;
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
    if runs.is_empty() {
        // Only the deadline ends a run before its first block without an error.
        bail!("{why_stopped}: no block finished, so nothing can be judged");
    }
    let mut result = combined(&runs, setup)?;
    if let Some(servers) = result.servers.as_mut() {
        servers.stopped = Some(format!(
            "{} block(s) run ({} planned, at most {}); stopped: {why_stopped}",
            runs.len(),
            setup.plan.first,
            setup.plan.max
        ));
    }
    if stopped_by.is_some() {
        result.complete = false;
    }
    crate::load::write_results(&result, &out)?;
    join_journals(&runs, &out)?;
    if setup.print_table {
        print_table(&result);
    }
    Ok(BenchOutcome {
        problems: Vec::new(),
        interrupted: stopped_by.map(|(sig, _, _)| sig),
        result,
    })
}

/// Makes the output folder the run's and takes the slots' GPUs: nothing is written through
/// a link (a checkout can commit `servers -> ~/`), one run at a time per folder and per GPU,
/// and an earlier run's files are moved aside whole. Returns the stop switch every phase
/// after this looks at.
async fn take_the_folder_and_slots(out: &Path, setup: &BlocksSetup) -> Result<Interrupt> {
    crate::fsutil::ensure_output_dir(out)?;
    for dir in ["servers", "blocks"] {
        crate::fsutil::refuse_linked_dir(&out.join(dir))?;
    }
    // From here a signal stops the run rather than the process: every phase below looks.
    let interrupt = Interrupt::from_signals();
    // A server's helper that daemonises (parent exits, child calls setsid) becomes this
    // process's child rather than init's: it can be found and stopped with its server.
    crate::load::servers::tree::become_subreaper();
    crate::locks::hold_output(out)?;
    // The wait for the GPUs counts against the job's time budget too.
    let wait = match setup.max_duration {
        Some(budget) => budget.min(setup.server_timeout),
        None => setup.server_timeout,
    };
    crate::locks::hold_gpus(&setup.slots, wait, &interrupt).await?;
    if let Some((kept, names)) = super::earlier::keep_earlier_run(out)? {
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
    // A fresh record of this run's servers: a planted or stale one (with a bad line, or
    // over the size `cleanup` reads) must not be appended to.
    let record = out.join(super::processes::PROCESSES_FILE);
    if std::fs::symlink_metadata(&record).is_ok() {
        crate::fsutil::remove_output(&record)?;
        println!(
            "removed {}: a record no run of this folder left beside a result (this run \
             writes its own)",
            record.display()
        );
    }
    Ok(interrupt)
}

/// The blocks measured, why they stopped, and the signal that stopped them (with the block
/// it came in and what was happening), if one did.
struct Looked {
    runs: Vec<BlockRun>,
    why_stopped: String,
    stopped_by: Option<(i32, u32, String)>,
}

/// The planned blocks, then while the gate leaves a level undecided (and the block and time
/// budgets allow) a pair more for those levels, until a signal stops them. `--max-duration`
/// is one deadline for the whole job, counted from `started`: no block starts that the last
/// one's time says would pass it, and a block still running at it (a slow server's start or
/// answers) is stopped there and left out: the run concludes from the blocks it finished.
async fn run_looks(
    template: &BenchSetup,
    setup: &BlocksSetup,
    decide: Option<&Decide<'_>>,
    interrupt: &Interrupt,
    started: Instant,
) -> Result<Looked> {
    let plan = setup.plan;
    let mut levels: Vec<u32> = template.profile.sweep.concurrency.clone();
    let deadline = setup.max_duration.map(|budget| (started + budget, budget));
    let mut runs: Vec<BlockRun> = Vec::new();
    let mut last_block: Option<Duration> = None;
    let why_stopped = 'looks: loop {
        let n = runs.len() as u32;
        let look_started = Instant::now();
        let chunk = plan.next_chunk(n);
        for block in n + 1..=n + chunk {
            if let Some(sig) = interrupt.signal() {
                let what = format!("before block {block} started");
                return Ok(Looked::stopped(runs, (sig, block, what)));
            }
            if let (Some((at, budget)), Some(took)) = (deadline, last_block) {
                if Instant::now() + took > at {
                    break 'looks format!(
                        "--max-duration {} would be passed by block {block} (the last took {})",
                        humantime::format_duration(budget),
                        humantime::format_duration(round_secs(took))
                    );
                }
            }
            let block_started = Instant::now();
            let measured = match deadline {
                Some((at, budget)) => {
                    let running = run_block(template, setup, block, &levels);
                    match tokio::time::timeout_at(at.into(), running).await {
                        Ok(measured) => measured,
                        // Dropped at the deadline: its servers are killed with it.
                        Err(_) => {
                            break 'looks format!(
                                "--max-duration {} reached during block {block}, stopped there \
                                 after {} (its trials are left out)",
                                humantime::format_duration(budget),
                                humantime::format_duration(round_secs(block_started.elapsed()))
                            )
                        }
                    }
                }
                None => run_block(template, setup, block, &levels).await,
            };
            last_block = Some(block_started.elapsed());
            match measured {
                Ok(run) => runs.push(run),
                // Stopped by a signal, whatever the block said about it (a server the
                // signal reached first may have failed the block before the run saw it).
                Err(e) => match interrupt.signal() {
                    Some(sig) => return Ok(Looked::stopped(runs, stopped_in(sig, block, &e))),
                    None => return Err(e),
                },
            }
        }
        // How long this look took per block (its levels: a later look measures as many or
        // fewer), for the time the next look would take.
        let per_block = look_started.elapsed() / chunk.max(1);
        let Some(decide) = decide else {
            break String::from("the planned blocks ran");
        };
        let open = crate::gate::undecided_levels(&decide(&combined(&runs, setup)?)?);
        if open.is_empty() {
            break format!("decided after {} block(s)", runs.len());
        }
        if runs.len() as u32 >= plan.max {
            break format!(
                "--max-blocks {} reached with C={} undecided",
                plan.max,
                list(&open)
            );
        }
        if let Some((_, budget)) = deadline {
            let next = plan.next_chunk(runs.len() as u32);
            if started.elapsed() + per_block * next > budget {
                break format!(
                    "--max-duration {} would be passed by {next} more block(s) (C={} undecided)",
                    humantime::format_duration(budget),
                    list(&open)
                );
            }
        }
        println!(
            "throughline: C={} undecided after {} block(s): two more blocks (one each way round) for {}",
            list(&open),
            runs.len(),
            if open.len() == 1 { "it" } else { "them" }
        );
        levels = open;
    };
    Ok(Looked {
        runs,
        why_stopped,
        stopped_by: None,
    })
}

impl Looked {
    fn stopped(runs: Vec<BlockRun>, by: (i32, u32, String)) -> Looked {
        Looked {
            runs,
            why_stopped: String::new(),
            stopped_by: Some(by),
        }
    }
}

/// The stop of block `block` by signal `sig`, whose error `e` is said unless it is the
/// interruption itself (which carries its exit code).
fn stopped_in(sig: i32, block: u32, e: &anyhow::Error) -> (i32, u32, String) {
    let coded = matches!(crate::exit::exit_for(e), crate::exit::Exit::Interrupted(_));
    if coded {
        return (sig, block, e.to_string());
    }
    let said = crate::record::redact::redact_error(&format!("{e:#}"));
    eprintln!(
        "note: block {block} stopped: {}",
        crate::untrusted::for_terminal_lines(&said)
    );
    (sig, block, format!("in block {block}"))
}

/// A duration to whole seconds, for messages.
fn round_secs(d: Duration) -> Duration {
    Duration::from_secs(d.as_secs_f64().round() as u64)
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
fn combined(runs: &[BlockRun], setup: &BlocksSetup) -> Result<RunResult> {
    let redact = |c: &str| crate::record::redact::redact(c).into_owned();
    let servers = ServerSetup {
        head_command: redact(&setup.head_command),
        base_command: setup.base_command.as_deref().map(redact),
        slots: setup.slots.iter().map(|s| s.gpus.clone()).collect(),
        blocks: runs.iter().map(|r| r.record.clone()).collect(),
        looks: setup.plan.looks(),
        stopped: None,
    };
    let copies = runs
        .iter()
        .map(|r| BlockRun {
            record: r.record.clone(),
            result: r.result.clone(),
        })
        .collect();
    combine(copies, servers).context("no block ran")
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
    setup: &BlocksSetup,
    n: u32,
    levels: &[u32],
) -> Result<BlockRun> {
    let relative = setup.relative();
    let (head_slot, base_slot) = slot_indices(n, relative);
    let out = &template.out_dir;
    let mut servers = start_servers(setup, out, n, (head_slot, base_slot)).await?;
    let url = |arm: &str| {
        servers
            .iter()
            .find(|(a, _)| *a == arm)
            .map(|(_, s)| s.url())
    };
    let mut profile = template.profile.clone();
    profile.target.endpoints = url("head").into_iter().collect();
    profile.sweep.concurrency = levels.to_vec();
    let block_setup = BenchSetup {
        profile,
        environment: template.environment.clone(),
        out_dir: out.join(format!("blocks/block-{n}")),
        show_progress: template.show_progress,
        base_endpoints: url("base").into_iter().collect(),
    };
    crate::fsutil::ensure_output_dir(&out.join("blocks"))?;
    crate::fsutil::ensure_output_dir(&block_setup.out_dir)?;
    let measured = crate::load::run_bench(block_setup, |_, _| {}).await;
    // Stop both whatever happened; a server that died mid-run is named with its log.
    let mut died = Vec::new();
    for (arm, server) in servers.iter_mut() {
        if let Some(status) = server.exited() {
            died.push(format!(
                "the {arm} server exited during block {n} ({status}); the end of its log:\n{}",
                server.log_tail(40)
            ));
        } else if let Err(e) = server.check_port() {
            died.push(format!("block {n}'s trials do not count: {e:#}"));
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
        return Err(Interrupt::from_signals()
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
                log_name(n, arm),
                crate::load::servers::LOG_HEAD_BYTES,
                crate::load::servers::LOG_TAIL_BYTES
            ));
        }
    }
    let slots_said = match relative {
        true => format!("head on slot {head_slot}, base on slot {base_slot}"),
        false => format!("slot {head_slot}"),
    };
    println!("block {n}: {slots_said}: {}", block_line(&outcome.result));
    Ok(BlockRun {
        record: BlockRecord {
            number: n,
            head_slot,
            base_slot: relative.then_some(base_slot),
            head_log: log_name(n, "head"),
            base_log: relative.then(|| log_name(n, "base")),
            head_log_cut_bytes: head_cut,
            base_log_cut_bytes: base_cut,
            levels: levels.to_vec(),
        },
        result: outcome.result,
    })
}

/// An arm's server log in block `n`, relative to the output folder.
fn log_name(n: u32, arm: &str) -> String {
    format!("servers/block-{n}-{arm}.log")
}

/// Starts block `n`'s servers in slot order (slot 0's first), each recorded for `cleanup`
/// before it is waited for, and waits until each answers. A server that does not come up,
/// or a signal while one loads, stops those started so far (SIGTERM first) and is the error.
async fn start_servers<'a>(
    setup: &'a BlocksSetup,
    out: &Path,
    n: u32,
    (head_slot, base_slot): (u32, u32),
) -> Result<Vec<(&'a str, ManagedServer)>> {
    let slot = |i: u32| Slot {
        index: i as usize,
        gpus: setup.slots[i as usize % setup.slots.len()].gpus.clone(),
    };
    // (arm, command, slot): started in slot order, so slot 0's server always starts first.
    let mut arms: Vec<(&str, &str, u32)> = vec![("head", &setup.head_command, head_slot)];
    if let Some(base) = &setup.base_command {
        arms.push(("base", base, base_slot));
    }
    arms.sort_by_key(|a| a.2);
    let interrupt = Interrupt::from_signals();
    let mut servers: Vec<(&str, ManagedServer)> = Vec::new();
    for (arm, command, i) in arms {
        let label = match setup.slots.len() {
            // One slot: both arms share its GPUs, and the swap is of which starts first.
            1 => format!(
                "block {n} {arm} server (started {} on the one slot)",
                if i == 0 { "first" } else { "second" }
            ),
            _ => format!("block {n} {arm} server (slot {i})"),
        };
        let log = out.join(log_name(n, arm));
        let record = |s: &ManagedServer| super::processes::record_start(out, s.pid(), &label);
        let (timeout, place) = (setup.server_timeout, slot(i));
        let up = ManagedServer::launch_checked(
            &label, command, &place, &log, timeout, &interrupt, record,
        );
        let failed = match up.await {
            Launch::Up(server) => {
                servers.push((arm, server));
                continue;
            }
            Launch::Failed(server, e) => {
                servers.extend(server.map(|s| (arm, s)));
                e.context(format!("block {n}: the {arm} server did not come up"))
            }
            Launch::Interrupted(server) => {
                servers.extend(server.map(|s| (arm, s)));
                interrupt
                    .error(format_args!("block {n}'s {arm} server was loading"))
                    .unwrap_or_else(|| anyhow::anyhow!("interrupted"))
            }
        };
        // The servers started so far are stopped, not merely dropped (SIGTERM first).
        let _ = stop_all(servers).await;
        return Err(failed);
    }
    Ok(servers)
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
pub fn print_plan(template: &BenchSetup, setup: &BlocksSetup) {
    let plan = setup.plan;
    let p = &template.profile;
    let relative = setup.relative();
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
        setup.slots_text,
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
    fn the_setup_checks_templates_slots_and_plan_before_anything_starts() {
        let timeout = Duration::from_secs(1);
        let ab = BlocksSetup::new("s {port}", Some("s {port}"), "0;1", (None, None), timeout);
        let ab = ab.unwrap();
        assert_eq!((ab.plan.first, ab.plan.max, ab.slots.len()), (4, 12, 2));
        assert!(ab.relative());
        let one = BlocksSetup::new("s {port}", None, "0", (None, None), timeout).unwrap();
        assert_eq!((one.plan.looks(), one.relative()), (1, false));
        let bad = BlocksSetup::new("s {prot}", None, "0", (None, None), timeout).unwrap_err();
        assert!(format!("{bad:#}").contains("--server-command"), "{bad:#}");
        let bad = BlocksSetup::new(
            "s {port}",
            Some("s {port}"),
            "0;1",
            (None, Some(2)),
            timeout,
        );
        assert!(bad.unwrap_err().to_string().contains("--max-blocks"));
        assert!(BlocksSetup::new("s {port}", None, "", (None, None), timeout).is_err());
    }
}
