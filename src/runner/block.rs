//! One block of a run in blocks: both servers started fresh on the block's pair of slots
//! (the arms' orientation given), the profile measured against them, the servers stopped,
//! and the block's record; a server that died or did not answer on its own port fails it.

use std::path::Path;

use anyhow::{bail, Result};

use super::setup::BlocksSetup;
use crate::load::run::interrupt::Interrupt;
use crate::load::servers::{Launch, ManagedServer, Slot, Stopped};
use crate::load::BenchSetup;
use crate::record::blocks::{BlockRecord, BlockRun};
use crate::record::RunResult;

/// Where a block runs: its number (1-based), the pair of slots it takes (one `--slots`
/// each), and which way round the arms sit on them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Placement {
    pub number: u32,
    pub pair: usize,
    /// Head on slot 0 and base on slot 1 (else the other way round, as in block 1).
    pub flipped: bool,
}

/// The slot index each arm runs on: base on 0 and head on 1, or the other way round when
/// `flipped`; one server alone stays on slot 0.
fn slot_indices(flipped: bool, relative: bool) -> (u32, u32) {
    match (relative, flipped) {
        (false, _) => (0, 0),
        (true, false) => (1, 0),
        (true, true) => (0, 1),
    }
}

/// One block: start the servers (slot 0's first), measure `levels`, stop them.
pub(super) async fn run_block(
    template: &BenchSetup,
    setup: &BlocksSetup,
    place: Placement,
    levels: &[u32],
) -> Result<BlockRun> {
    let relative = setup.relative();
    let n = place.number;
    let held = std::time::Instant::now();
    let (head_slot, base_slot) = slot_indices(place.flipped, relative);
    let out = &template.out_dir;
    let mut servers = start_servers(setup, out, place, (head_slot, base_slot)).await?;
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
    let pair = match setup.pairs.len() {
        1 => String::new(),
        _ => format!("pair {} ({}), ", place.pair, setup.pair_text(place.pair)),
    };
    println!(
        "block {n}: {pair}{slots_said}: {}",
        block_line(&outcome.result)
    );
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
            pair: (setup.pairs.len() > 1).then_some(place.pair as u32),
            runner: None,
            seconds: Some((held.elapsed().as_secs_f64() * 10.0).round() / 10.0),
        },
        result: outcome.result,
    })
}

/// An arm's server log in block `n`, relative to the output folder.
pub(super) fn log_name(n: u32, arm: &str) -> String {
    format!("servers/block-{n}-{arm}.log")
}

/// Starts block `n`'s servers in slot order (slot 0's first), each recorded for `cleanup`
/// before it is waited for, and waits until each answers. A server that does not come up,
/// or a signal while one loads, stops those started so far (SIGTERM first) and is the error.
async fn start_servers<'a>(
    setup: &'a BlocksSetup,
    out: &Path,
    place: Placement,
    (head_slot, base_slot): (u32, u32),
) -> Result<Vec<(&'a str, ManagedServer)>> {
    let n = place.number;
    let slots = &setup.pairs[place.pair];
    let slot = |i: u32| Slot {
        index: i as usize,
        gpus: slots[i as usize % slots.len()].gpus.clone(),
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
        let label = match slots.len() {
            // One slot: both arms share its GPUs, and the swap is of which starts first.
            1 => format!(
                "block {n} {arm} server (started {} on the one slot)",
                if i == 0 { "first" } else { "second" }
            ),
            _ => format!("block {n} {arm} server (slot {i})"),
        };
        let label = match setup.pairs.len() {
            1 => label,
            _ => format!("{label} on pair {}", place.pair),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arms_swap_slots_with_the_orientation() {
        assert_eq!(slot_indices(false, true), (1, 0));
        assert_eq!(slot_indices(true, true), (0, 1));
        assert_eq!(slot_indices(true, false), (0, 0));
    }
}
