//! The blocks of a run, look by look: the planned blocks, then while the gate leaves a level
//! undecided (and the block and time budgets allow) two more for the undecided levels.
//!
//! Blocks run in rounds, one on each pair of slots at once (`--slots` once per pair): on 4
//! pairs the first look's 8 blocks are two rounds (every pair both ways round) and each later
//! look is one round (`gate::BlockPlan::on_pairs`). A block's orientation alternates over
//! the pairs and from round to round (pair p in round r is flipped when p + r is odd), so
//! the orientations stay balanced over a look and, round after round, within each pair:
//! a pair's own slot effect falls on both arms of its blocks. A pair whose server does not
//! start loses its block and one finished block of the other orientation from the same
//! round (its partner, so the look stays balanced), both named; a pair that fails twice is
//! left out for the rest of the run. With one pair a failed block fails the run, as before.

use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use futures::stream::{FuturesUnordered, StreamExt};

use super::block::{run_block, Placement};
use super::setup::{combined, BlocksSetup, Decide, Measured};
use crate::load::run::interrupt::Interrupt;
use crate::load::BenchSetup;
use crate::record::blocks::BlockRun;

/// The blocks measured, why they stopped, the blocks left out (with why), and the signal
/// that stopped them (with the block it came in and what was happening), if one did.
pub(super) struct Looked {
    pub runs: Vec<BlockRun>,
    pub why_stopped: String,
    pub dropped: Vec<String>,
    pub stopped_by: Option<(i32, u32, String)>,
}

/// How many times a pair may fail to give a block before it is left out.
const PAIR_FAILURES: u32 = 2;

/// The state of the rounds: the blocks so far, the next block's number, the rounds run, each
/// pair's failures, and what was left out.
struct Rounds {
    runs: Vec<BlockRun>,
    next: u32,
    round: usize,
    failures: Vec<u32>,
    dropped: Vec<String>,
}

impl Rounds {
    /// The pairs still in use, in order.
    fn pairs(&self) -> Vec<usize> {
        (0..self.failures.len())
            .filter(|&p| self.failures[p] < PAIR_FAILURES)
            .collect()
    }

    /// The next round's placements: up to `count` blocks, one per pair in use.
    fn place(&mut self, count: u32) -> Vec<Placement> {
        let pairs = self.pairs();
        let take = (count as usize).min(pairs.len());
        let placed = (pairs.into_iter().take(take).enumerate())
            .map(|(i, pair)| Placement {
                number: self.next + i as u32,
                pair,
                flipped: (pair + self.round) % 2 == 1,
            })
            .collect();
        self.next += take as u32;
        self.round += 1;
        placed
    }
}

/// The planned blocks, then while the gate leaves a level undecided (and the block and time
/// budgets allow) a pair more for those levels, until a signal stops them. `--max-duration`
/// is one deadline for the whole job, counted from `started`: no round starts that the last
/// one's time says would pass it, and blocks still running at it (a slow server's start or
/// answers) are stopped there and left out: the run concludes from the blocks it finished.
pub(super) async fn run_looks(
    template: &BenchSetup,
    setup: &BlocksSetup,
    measured: &Measured,
    decide: Option<&Decide<'_>>,
    interrupt: &Interrupt,
    started: Instant,
) -> Result<Looked> {
    let plan = setup.plan;
    let mut levels: Vec<u32> = measured.first.clone();
    let deadline = setup.max_duration.map(|budget| (started + budget, budget));
    let mut state = Rounds {
        runs: Vec::new(),
        next: 1,
        round: 0,
        failures: vec![0; setup.pairs.len()],
        dropped: Vec::new(),
    };
    let mut last_round: Option<Duration> = None;
    let why_stopped = 'looks: loop {
        let chunk = plan.next_chunk(state.runs.len() as u32);
        let mut left = chunk;
        while left > 0 {
            let next = state.next;
            if let Some(sig) = interrupt.signal() {
                let what = format!("before block {next} started");
                return Ok(stopped(state, (sig, next, what)));
            }
            if state.pairs().is_empty() {
                bail!(
                    "every pair of slots failed {PAIR_FAILURES} times: {}",
                    state.dropped.join("; ")
                );
            }
            if let (Some((at, budget)), Some(took)) = (deadline, last_round) {
                if Instant::now() + took > at {
                    break 'looks format!(
                        "--max-duration {} would be passed by block {next} (the last round \
                         took {})",
                        humantime::format_duration(budget),
                        humantime::format_duration(round_secs(took))
                    );
                }
            }
            let placed = state.place(left);
            left -= placed.len() as u32;
            let round = Round {
                template,
                setup,
                levels: &levels,
                deadline,
                interrupt,
            };
            match round.run(&mut state, &placed).await? {
                RoundEnd::Ran(took) => last_round = Some(took),
                RoundEnd::Cut(why) => break 'looks why,
                RoundEnd::Stopped(by) => return Ok(stopped(state, by)),
            }
        }
        let Some(decide) = decide else {
            break String::from("the planned blocks ran");
        };
        if state.runs.is_empty() {
            continue;
        }
        let open =
            crate::gate::undecided_levels(&decide(&combined(&state.runs, setup, measured)?)?);
        if open.is_empty() {
            break format!("decided after {} block(s)", state.runs.len());
        }
        if state.runs.len() as u32 >= plan.max {
            break format!(
                "--max-blocks {} reached with C={} undecided",
                plan.max,
                list(&open)
            );
        }
        // Blocks left out count against the budget too: a run never starts more than twice
        // its most blocks.
        if state.next > plan.max * 2 {
            break format!(
                "{} blocks started, {} of them left out, with C={} undecided",
                state.next - 1,
                state.dropped.len(),
                list(&open)
            );
        }
        let next = plan.next_chunk(state.runs.len() as u32);
        if let (Some((_, budget)), Some(took)) = (deadline, last_round) {
            let rounds = next.div_ceil(state.pairs().len().max(1) as u32);
            if started.elapsed() + took * rounds > budget {
                break format!(
                    "--max-duration {} would be passed by {next} more block(s) (C={} undecided)",
                    humantime::format_duration(budget),
                    list(&open)
                );
            }
        }
        println!(
            "throughline: C={} undecided after {} block(s): {next} more block(s) ({}) for {}",
            list(&open),
            state.runs.len(),
            match state.pairs().len() {
                1 => "on the one pair, each way round in turn".to_string(),
                n if next as usize >= n => format!("a round on the {n} pairs in use"),
                n => format!("on {next} of the {n} pairs in use"),
            },
            if open.len() == 1 { "it" } else { "them" }
        );
        levels = open;
    };
    Ok(Looked {
        runs: state.runs,
        why_stopped,
        dropped: state.dropped,
        stopped_by: None,
    })
}

/// How a round ended: it ran (in this long), the deadline cut it (why), or a signal stopped
/// it (the signal, the block, what was happening).
enum RoundEnd {
    Ran(Duration),
    Cut(String),
    Stopped((i32, u32, String)),
}

/// What a round runs with.
struct Round<'a> {
    template: &'a BenchSetup,
    setup: &'a BlocksSetup,
    levels: &'a [u32],
    deadline: Option<(Instant, Duration)>,
    interrupt: &'a Interrupt,
}

impl Round<'_> {
    /// Runs `placed` at once and adds what finished to `state`: a failed block (several
    /// pairs) is left out with its partner, a signal stops the run, the deadline cuts it.
    async fn run(&self, state: &mut Rounds, placed: &[Placement]) -> Result<RoundEnd> {
        let started = Instant::now();
        let (done, cut) = self.blocks(placed).await;
        let mut finished: Vec<(Placement, BlockRun)> = Vec::new();
        let mut failed: Vec<(Placement, anyhow::Error)> = Vec::new();
        for (place, measured) in done {
            match measured {
                Ok(run) => finished.push((place, run)),
                // Stopped by a signal, whatever the block said about it (a server the
                // signal reached first may have failed the block before the run saw it).
                Err(e) => match self.interrupt.signal() {
                    Some(sig) => {
                        state.runs.extend(finished.into_iter().map(|(_, r)| r));
                        return Ok(RoundEnd::Stopped(stopped_in(sig, place.number, &e)));
                    }
                    None if self.setup.pairs.len() == 1 => return Err(e),
                    None => failed.push((place, e)),
                },
            }
        }
        drop_failed(state, self.setup, &mut finished, failed);
        state.runs.extend(finished.into_iter().map(|(_, r)| r));
        state.runs.sort_by_key(|r| r.record.number);
        if !cut {
            return Ok(RoundEnd::Ran(started.elapsed()));
        }
        let budget = self.deadline.map_or(Duration::ZERO, |d| d.1);
        let stopped: Vec<u32> = (placed.iter())
            .map(|p| p.number)
            .filter(|n| !state.runs.iter().any(|r| r.record.number == *n))
            .filter(|n| {
                !state
                    .dropped
                    .iter()
                    .any(|d| d.starts_with(&format!("block {n} ")))
            })
            .collect();
        Ok(RoundEnd::Cut(format!(
            "--max-duration {} reached during block(s) {}, stopped there after {} (their \
             trials are left out)",
            humantime::format_duration(budget),
            list(&stopped),
            humantime::format_duration(round_secs(started.elapsed()))
        )))
    }

    /// Runs `placed` at once, one block per pair; returns each finished block's outcome, and
    /// whether the deadline cut the round (the blocks still running then are dropped: their
    /// servers are killed with them).
    async fn blocks(&self, placed: &[Placement]) -> (Vec<(Placement, Result<BlockRun>)>, bool) {
        let (template, setup, levels) = (self.template, self.setup, self.levels);
        let mut running: FuturesUnordered<_> = (placed.iter())
            .map(|&place| async move { (place, run_block(template, setup, place, levels).await) })
            .collect();
        let mut done = Vec::new();
        loop {
            let next = match self.deadline {
                Some((at, _)) => match tokio::time::timeout_at(at.into(), running.next()).await {
                    Ok(next) => next,
                    Err(_) => return (done, true),
                },
                None => running.next().await,
            };
            match next {
                Some(outcome) => done.push(outcome),
                None => return (done, false),
            }
        }
    }
}

/// Leaves out each failed block and, to keep the round's orientations balanced, one finished
/// block of the other orientation (its partner), naming both; counts the pair's failure.
fn drop_failed(
    state: &mut Rounds,
    setup: &BlocksSetup,
    finished: &mut Vec<(Placement, BlockRun)>,
    failed: Vec<(Placement, anyhow::Error)>,
) {
    for (place, e) in failed {
        state.failures[place.pair] += 1;
        let said = crate::record::redact::redact_error(&format!("{e:#}"));
        let said = said.lines().next().unwrap_or_default().to_string();
        let partner = (finished.iter())
            .rposition(|(p, _)| p.flipped != place.flipped)
            .map(|i| finished.remove(i).0);
        let mut line = format!(
            "block {} on pair {} ({}) failed and is left out: {said}",
            place.number,
            place.pair,
            setup.pair_text(place.pair)
        );
        if let Some(p) = partner {
            line.push_str(&format!(
                "; its opposite-order partner, block {} on pair {}, is left out with it",
                p.number, p.pair
            ));
        }
        if state.failures[place.pair] >= PAIR_FAILURES {
            line.push_str(&format!(
                "; pair {} failed {PAIR_FAILURES} times and is left out for the rest of the run",
                place.pair
            ));
        }
        eprintln!("warning: {}", crate::untrusted::for_terminal(&line));
        state.dropped.push(line);
    }
}

fn stopped(state: Rounds, by: (i32, u32, String)) -> Looked {
    Looked {
        runs: state.runs,
        why_stopped: String::new(),
        dropped: state.dropped,
        stopped_by: Some(by),
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

/// "1,8": levels (or blocks) for messages.
fn list(items: &[u32]) -> String {
    items
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rounds(pairs: usize) -> Rounds {
        Rounds {
            runs: Vec::new(),
            next: 1,
            round: 0,
            failures: vec![0; pairs],
            dropped: Vec::new(),
        }
    }

    fn flips(placed: &[Placement]) -> Vec<(u32, usize, bool)> {
        placed
            .iter()
            .map(|p| (p.number, p.pair, p.flipped))
            .collect()
    }

    #[test]
    fn one_pair_alternates_block_by_block_as_before() {
        let mut r = rounds(1);
        let all: Vec<_> = (0..4).flat_map(|_| flips(&r.place(4))).collect();
        assert_eq!(
            all,
            [(1, 0, false), (2, 0, true), (3, 0, false), (4, 0, true)]
        );
    }

    #[test]
    fn four_pairs_run_a_look_in_one_round_balanced() {
        let mut r = rounds(4);
        let first = r.place(4);
        assert_eq!(
            flips(&first),
            [(1, 0, false), (2, 1, true), (3, 2, false), (4, 3, true)]
        );
        // The next round turns each pair the other way.
        let second = r.place(2);
        assert_eq!(flips(&second), [(5, 0, true), (6, 1, false)]);
    }

    #[test]
    fn two_pairs_are_balanced_within_each_pair_over_two_rounds() {
        let mut r = rounds(2);
        let a = r.place(2);
        let b = r.place(2);
        assert_eq!(flips(&a), [(1, 0, false), (2, 1, true)]);
        assert_eq!(flips(&b), [(3, 0, true), (4, 1, false)]);
        // A pair that failed twice gets no more blocks.
        r.failures[1] = PAIR_FAILURES;
        assert_eq!(flips(&r.place(2)), [(5, 0, false)]);
    }
}
