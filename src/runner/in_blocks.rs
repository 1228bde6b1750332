//! Runs with servers that throughline starts itself (`--server-command`), for `bench`, `ci`,
//! `bisect` and `demo`. A relative run becomes a sequence of blocks: each block starts both
//! servers fresh, the arms' slots swapped from the block before (base on slot 0 in block 1,
//! on slot 1 in block 2, ...), runs the profile's interleaved rounds, and stops them. Slot and start
//! effects then fall on both arms in the mean, and the blocks estimate their spread
//! (`stats::decision::crossover_level`).
//!
//! Sequential: after the planned blocks the gate looks; while a level is undecided (and the
//! block and time budgets allow) two more blocks, one per orientation (on several pairs a
//! round, one on each), measure only the undecided levels (the plan and the rule are the
//! gate's: `gate::sequential`).

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use super::looks::{run_looks, Looked};
use super::setup::{combined, BlocksSetup, Decide};
use crate::load::run::interrupt::Interrupt;
use crate::load::{BenchOutcome, BenchSetup};
use crate::record::blocks::BlockRun;
use crate::record::files::REQUESTS_FILE;
use crate::record::RunResult;

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
    // A level the profile does not have is refused before any GPU is waited for.
    let measured = setup.measured(&template.profile)?;
    let interrupt = take_the_folder_and_slots(&out, setup).await?;
    print_plan(&template, setup);
    let looked = run_looks(&template, setup, &measured, decide, &interrupt, started).await?;
    let Looked {
        runs,
        mut why_stopped,
        dropped,
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
    let mut result = combined(&runs, setup, &measured)?;
    if let Some(servers) = result.servers.as_mut() {
        servers.dropped = dropped;
        servers.stopped = Some(format!(
            "{} block(s) run ({} planned, at most {}){}; stopped: {why_stopped}",
            runs.len(),
            setup.plan.first,
            setup.plan.max,
            spent(&runs, setup, started.elapsed())
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
    if setup.lock_gpus {
        crate::locks::hold_gpus(&setup.all_slots(), wait, &interrupt).await?;
    }
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
            "removed {}: a process record without a run of its own (this run writes its \
             own)",
            record.display()
        );
    }
    Ok(interrupt)
}

/// What the blocks cost: " in 41m on 4 pair(s) (blocks per pair 1, 1, 1, 1), 5.2 GPU-hours"
/// (a block holds its pair's GPUs from its first server's start to its last one's stop).
fn spent(runs: &[BlockRun], setup: &BlocksSetup, wall: Duration) -> String {
    let pair_of = |r: &BlockRun| r.record.pair.unwrap_or(0) as usize;
    let gpu_seconds: f64 = (runs.iter())
        .map(|r| r.record.seconds.unwrap_or(0.0) * setup.gpus_in(pair_of(r)) as f64)
        .sum();
    let per_pair: Vec<String> = (0..setup.pairs.len())
        .map(|p| runs.iter().filter(|r| pair_of(r) == p).count().to_string())
        .collect();
    let pairs = match setup.pairs.len() {
        1 => String::new(),
        n => format!(" on {n} pairs (blocks per pair {})", per_pair.join(", ")),
    };
    let wall = Duration::from_secs(wall.as_secs());
    format!(
        " in {}{pairs}, {:.2} GPU-hours",
        humantime::format_duration(wall),
        gpu_seconds / 3600.0
    )
}

/// Prints the run's plan and, at the end, the combined table (every block's trials).
pub fn print_plan(template: &BenchSetup, setup: &BlocksSetup) {
    let plan = setup.plan;
    let p = &template.profile;
    let relative = setup.relative();
    println!(
        "throughline bench: profile {}, {} level(s) x {} trial(s) per block, {} block(s) \
         first{}, servers started by throughline on slots {}{}",
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
    let pairs = setup.pairs.len() as u32;
    if relative && pairs > 1 {
        println!(
            "{pairs} pairs: the first look waits for {} block(s), {} round(s){}; each later \
             look adds a round of {} block(s)",
            plan.first,
            plan.first.div_ceil(pairs),
            match plan.first >= 2 * pairs {
                true => ", so that every pair has run both ways round",
                false =>
                    " (--max-blocks: some pairs will have run one way round only, \
                           and their slot effects cannot be taken out of their blocks)",
            },
            plan.step
        );
    }
    for line in super::cost::plan_lines(template, setup) {
        println!("{}", crate::untrusted::for_terminal(&line));
    }
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
