//! Client-bound trials, judged by what they could do to the verdict, not by their presence:
//! one rule for `gate`, `ci`, `bisect` and `baseline bless`.
//!
//! A load generator that falls behind distorts figures in two ways. Late *reads* (data that
//! waited in the socket, chunks read together) mistime tokens: they blur ITL and TTFT, but
//! the output tokens and the window of a trial are timed by the kernel's receive stamps, so
//! they do not move tok/s. Requests *held* in the client (from a worker's previous response
//! to its next request's first byte out, `held_share`) leave the server short of the asked
//! concurrency: tok/s is short by about that share, a figure the trial measured. Only a
//! *saturated* client (a backlog in its runtime, its threads' CPU used up) distorts by an
//! amount nothing bounds.
//!
//! So the gate decides as measured, then again with every trial put back by what its client
//! held (tok/s / (1 - held share); latency p99s less the client's read delay p99): where both
//! decisions agree, and no trial was saturated, the client could not have moved the verdict,
//! and the verdict stands with a line saying how much the client held. Otherwise it is not
//! comparable (exit 3), unless `--allow-client-bound`; the verdict is still written whole
//! (table, charts, PR comment), with which arm, which level, how much, and the way on.
//! In a relative run both arms are measured by the same client, interleaved: an equal share
//! held in both cancels in the corrected decision, as it does in the measured one.

use anyhow::{bail, Result};

use crate::record::trial_flags::FlagKind;
use crate::record::{LevelResult, RunResult, TrialResult};

use super::verdict::{ArmHeld, ClientReview, Outcome, Verdict};

/// The flag every command takes to decide on client-bound trials anyway.
pub const ALLOW_FLAG: &str = "--allow-client-bound";

/// What to do about a client that limited the run, said in every refusal.
pub const ADVICE: &str = "give the client room and run again: fewer concurrent streams per \
     client core (lower the sweep's top levels, or run on a machine with more cores), the \
     client on cores of its own, away from the server's (e.g. `taskset`, or another machine); \
     `throughline selfbench --client-threads N` measures what N client cores sustain. Or accept \
     the trials knowingly with --allow-client-bound (`baseline bless`, `gate` and `ci` all take \
     it, and the verdict says so)";

/// A held share past this is not a measurement of the server at all (over half of the
/// trial's time in the client): it is treated as a saturated client.
const HELD_SHARE_CEILING: f64 = 0.5;

/// What the client's lateness could do to one trial's figures.
#[derive(Debug, Clone, Copy, PartialEq)]
enum TrialEffect {
    /// Nothing the client measured of itself.
    None,
    /// tok/s short by this share at most (requests held in the client); latencies late by
    /// at most this many ms (the read delay p99 of a trial flagged client-bound).
    Bounded { held: f64, late_ms: f64 },
    /// A saturated client: no bound.
    Unbounded,
}

fn effect(t: &TrialResult) -> TrialEffect {
    let Some(h) = &t.client else {
        return TrialEffect::None;
    };
    let flagged = h.client_bound || t.flags.iter().any(|f| f.kind == FlagKind::ClientBound);
    // Results of older builds do not say whether the client was saturated: a flagged trial
    // of theirs keeps the old rule (refused), since its cause cannot be told apart.
    let saturated = h.saturated.unwrap_or(flagged);
    let held = h.held_share.unwrap_or(0.0);
    if saturated || !held.is_finite() || held > HELD_SHARE_CEILING {
        return TrialEffect::Unbounded;
    }
    let late_ms = if flagged {
        let read = h.read_delay_p99_ms.filter(|v| v.is_finite()).unwrap_or(0.0);
        read.max(h.lag_p99_ms.max(0.0))
    } else {
        0.0
    };
    if !flagged && held <= 0.0 {
        return TrialEffect::None;
    }
    TrialEffect::Bounded {
        held: held.max(0.0),
        late_ms: if late_ms.is_finite() { late_ms } else { 0.0 },
    }
}

/// One arm's levels and how the review names it.
fn arms(run: &RunResult) -> Vec<(&'static str, &[LevelResult])> {
    let mut out = vec![(
        if run.base.is_some() {
            "head"
        } else {
            "the run"
        },
        run.levels.as_slice(),
    )];
    if let Some(b) = &run.base {
        out.push(("base arm", b.levels.as_slice()));
    }
    out
}

fn mean_held(level: &LevelResult) -> f64 {
    let held: Vec<f64> = (level.trials.iter())
        .filter(|t| t.measured())
        .map(|t| match effect(t) {
            TrialEffect::Bounded { held, .. } => held,
            _ => 0.0,
        })
        .collect();
    crate::stats::mean(&held)
}

/// What the client did in `run`, before any verdict: None when no trial was flagged
/// client-bound or held requests (nothing to review).
fn survey(run: &RunResult) -> Option<ClientReview> {
    let mut review = ClientReview::default();
    let mut any = false;
    for (arm, levels) in arms(run) {
        let mut worst: Option<ArmHeld> = None;
        for level in levels {
            for t in &level.trials {
                match effect(t) {
                    TrialEffect::None => {}
                    TrialEffect::Unbounded => {
                        any = true;
                        review
                            .saturated
                            .push(format!("{arm} {} trial {}", level.label(), t.trial));
                    }
                    TrialEffect::Bounded { held, .. } => {
                        let flagged = t.flags.iter().any(|f| f.kind == FlagKind::ClientBound);
                        any |= flagged;
                        if flagged && held <= 0.0 {
                            review.late_read_trials += 1;
                        }
                    }
                }
            }
            let share = mean_held(level);
            if share > 0.0 && worst.as_ref().is_none_or(|w| share > w.share) {
                worst = Some(ArmHeld {
                    arm: arm.to_string(),
                    concurrency: level.concurrency,
                    share,
                });
            }
        }
        review.held.extend(worst);
    }
    any.then_some(review)
}

/// `run` with every trial put back by what its client measured of itself: tok/s divided by
/// (1 - held share), latency p99s less the client's late ms (at least half kept). The
/// server could have done at most this well; the gate decides on it as on the measured run.
pub fn corrected(run: &RunResult) -> RunResult {
    let mut out = run.clone();
    let fix = |levels: &mut Vec<LevelResult>| {
        for t in levels.iter_mut().flat_map(|l| l.trials.iter_mut()) {
            let TrialEffect::Bounded { held, late_ms } = effect(t) else {
                continue;
            };
            t.output_tok_per_s /= 1.0 - held;
            for p in [&mut t.ttft_ms, &mut t.itl_ms, &mut t.e2e_ms]
                .into_iter()
                .flatten()
            {
                p.p99 = (p.p99 - late_ms).max(0.5 * p.p99);
            }
        }
    };
    fix(&mut out.levels);
    if let Some(b) = out.base.as_mut() {
        fix(&mut b.levels);
    }
    out
}

impl ClientReview {
    /// "head: up to 0.4% of request time held in the client (C=64); base arm: up to 1.5%
    /// (C=64)", or None when no arm held any.
    fn held_text(&self) -> Option<String> {
        let parts: Vec<String> = (self.held.iter())
            .map(|h| {
                format!(
                    "{}: up to {:.1}% of request time held in the client (C={})",
                    h.arm,
                    h.share * 100.0,
                    h.concurrency
                )
            })
            .collect();
        (!parts.is_empty()).then(|| parts.join("; "))
    }

    /// What the review says when the verdict stands (or was accepted).
    fn standing_line(&self, outcome: Outcome) -> String {
        let mut parts = Vec::new();
        if let Some(h) = self.held_text() {
            parts.push(h);
        }
        if self.late_read_trials > 0 {
            parts.push(format!(
                "{} trial(s) read some responses late: their ITL and TTFT are blurred by up to \
                 their read delay, tok/s is not",
                self.late_read_trials
            ));
        }
        let said = parts.join("; ");
        if self.accepted {
            return format!(
                "client-bound trials decided on with {ALLOW_FLAG}: {said}{}; corrected for the \
                 client the verdict would be {}",
                self.saturated_text(),
                self.corrected_outcome.map_or("unknown", |o| o.word())
            );
        }
        format!(
            "client: {said}; put back by what the client held, the verdict is the same ({}), \
             so the client did not decide it",
            outcome.word()
        )
    }

    /// "base arm C=64 trial 3", or "3 trials (base arm C=64 trial 3 and 2 more)"; None when
    /// no trial was saturated.
    fn saturated_where(&self) -> Option<String> {
        match self.saturated.as_slice() {
            [] => None,
            [one] => Some(one.clone()),
            [first, rest @ ..] => Some(format!(
                "{} trials ({first} and {} more)",
                rest.len() + 1,
                rest.len()
            )),
        }
    }

    fn saturated_text(&self) -> String {
        self.saturated_where()
            .map(|w| format!("; the client was saturated in {w}"))
            .unwrap_or_default()
    }

    /// The refusal's sentence: which arm, how much, what would change, and the way on.
    fn refusal(&self, outcome: Outcome, results: &str) -> String {
        let what = if let Some(at) = self.saturated_where() {
            format!(
                "the client could not keep up in {at} (its runtime lagged or its CPU was used \
                 up), so what it did to the figures cannot be bounded"
            )
        } else {
            format!(
                "{}; put back by that, the verdict would be {} instead of {}",
                self.held_text().unwrap_or_default(),
                self.corrected_outcome.map_or("unknown", |o| o.word()),
                outcome.word()
            )
        };
        format!(
            "not comparable: the load generator, not the server, may have decided this verdict: \
             {what}. The table holds the figures as measured. To decide on them anyway, gate the \
             saved results again: `throughline gate --results {results} {ALLOW_FLAG}` (ci, \
             bench and bisect take {ALLOW_FLAG} too). To measure the server, {ADVICE}"
        )
    }
}

/// Reviews `verdict` (decided on `run`) for the client's part: `regate` decides on a run
/// as the verdict was decided. The verdict stands, with a line, where the client could not
/// have moved it; else it becomes not comparable (exit 3), its table kept, unless `allow`.
/// `results` names the saved results.json for the way on.
pub fn review(
    verdict: &mut Verdict,
    run: &RunResult,
    allow: bool,
    results: &str,
    regate: &dyn Fn(&RunResult) -> Result<Verdict>,
) -> Result<()> {
    let Some(mut review) = survey(run) else {
        return Ok(());
    };
    // A saturated trial cannot be put back; the corrected decision is still said.
    review.corrected_outcome = Some(regate(&corrected(run))?.outcome);
    review.could_move =
        !review.saturated.is_empty() || review.corrected_outcome != Some(verdict.outcome);
    review.accepted = review.could_move && allow;
    if review.could_move && !allow {
        let refusal = review.refusal(verdict.outcome, results);
        verdict.warnings.insert(0, refusal.clone());
        verdict.refusal = Some(refusal);
        verdict.outcome = Outcome::NotComparable;
    } else if review.accepted {
        // Decided on although the client could have moved it: the reviewer must know.
        verdict
            .warnings
            .insert(0, review.standing_line(verdict.outcome));
    } else {
        // The client did not decide it: information.
        verdict
            .notes
            .insert(0, review.standing_line(verdict.outcome));
    }
    verdict.client = Some(review);
    Ok(())
}

/// `baseline bless`'s rule (exit 2 unless `allow`): a baseline is what later heads are
/// compared with, so a client that held requests longer than a third of the gate's minimum
/// effect at some level (the bias a history gate would then carry), or that was saturated,
/// keeps the run out. Late reads alone do not: the baseline keeps tok/s per trial, and TTFT
/// p99, whose reads the kernel stamps.
pub fn check(which: &str, run: &RunResult, allow: bool) -> Result<()> {
    if allow {
        return Ok(());
    }
    let Some(review) = survey(run) else {
        return Ok(());
    };
    let limit = run.profile.gate.min_effect / 3.0;
    let held: Vec<&ArmHeld> = review.held.iter().filter(|h| h.share > limit).collect();
    if review.saturated.is_empty() && held.is_empty() {
        return Ok(());
    }
    let why = if let Some(at) = review.saturated_where() {
        format!("the client could not keep up in {at} (its runtime lagged or its CPU was used up)")
    } else {
        let h = held[0];
        format!(
            "{} held requests in the client for {:.1}% of their time at C={}, more than a third \
             of the gate's minimum effect ({:.1}%): a baseline that low would let a slower head \
             pass",
            h.arm,
            h.share * 100.0,
            h.concurrency,
            limit * 100.0
        )
    };
    bail!(
        "{which} was limited by the client, not the server (client-bound: {why}): its figures \
         describe the load generator. To fix it, {ADVICE}"
    );
}

/// The client-bound trials of a run, one summary line per arm (for bless's message).
pub fn lines(run: &RunResult) -> Vec<String> {
    arms(run)
        .into_iter()
        .flat_map(|(arm, levels)| {
            crate::record::flag_summary(levels, Some(FlagKind::ClientBound))
                .into_iter()
                .map(move |l| format!("{arm}: {l}"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::fake;
    use crate::record::trial_flags::TrialFlag;
    use crate::record::ClientHeadroom;

    fn flag(t: &mut TrialResult, h: ClientHeadroom) {
        t.flags.push(TrialFlag::new(
            FlagKind::ClientBound,
            "client-bound: test".to_string(),
        ));
        t.client = Some(ClientHeadroom {
            client_bound: true,
            ..h
        });
    }

    fn late_reads() -> ClientHeadroom {
        ClientHeadroom {
            reads: Some(1000),
            late_reads: Some(30),
            read_delay_p99_ms: Some(4.0),
            saturated: Some(false),
            held_share: Some(0.0),
            ..Default::default()
        }
    }

    #[test]
    fn late_reads_do_not_move_throughput_and_held_requests_are_put_back() {
        let mut run = fake::run(&[(1, &[100.0, 101.0, 99.0])]);
        flag(&mut run.levels[0].trials[0], late_reads());
        let review = survey(&run).unwrap();
        assert_eq!(review.late_read_trials, 1);
        assert!(review.saturated.is_empty() && review.held.is_empty());
        let fixed = corrected(&run);
        assert_eq!(fixed.levels[0].trials[0].output_tok_per_s, 100.0);

        let mut held = late_reads();
        held.held_share = Some(0.02);
        flag(&mut run.levels[0].trials[1], held);
        let fixed = corrected(&run);
        assert!((fixed.levels[0].trials[1].output_tok_per_s - 101.0 / 0.98).abs() < 1e-9);
        let review = survey(&run).unwrap();
        assert_eq!(review.held.len(), 1);
        assert!((review.held[0].share - 0.02 / 3.0).abs() < 1e-12);
    }

    #[test]
    fn a_saturated_client_is_unbounded_and_old_files_keep_the_old_rule() {
        let mut run = fake::run(&[(1, &[100.0, 101.0, 99.0])]);
        flag(
            &mut run.levels[0].trials[2],
            ClientHeadroom {
                cpu_fraction: 0.97,
                saturated: Some(true),
                ..Default::default()
            },
        );
        let review = survey(&run).unwrap();
        assert_eq!(review.saturated, vec!["the run C=1 trial 3"]);
        let err = check("the run", &run, false).unwrap_err().to_string();
        for said in ["client-bound", "fewer concurrent streams", ALLOW_FLAG] {
            assert!(err.contains(said), "{said}: {err}");
        }
        check("the run", &run, true).unwrap();
        // An older file: flagged, nothing said of saturation.
        let mut old = fake::run(&[(1, &[100.0, 101.0, 99.0])]);
        flag(
            &mut old.levels[0].trials[0],
            ClientHeadroom {
                lag_p50_ms: 5.0,
                ..Default::default()
            },
        );
        assert_eq!(survey(&old).unwrap().saturated.len(), 1);
        // Nothing flagged, nothing to review.
        assert!(survey(&fake::run(&[(1, &[100.0, 101.0, 99.0])])).is_none());
    }

    #[test]
    fn bless_refuses_held_requests_past_a_third_of_the_minimum_effect_only() {
        let mut run = fake::run(&[(1, &[100.0, 101.0, 99.0])]);
        for t in &mut run.levels[0].trials {
            flag(t, late_reads());
        }
        check("the run", &run, false).unwrap();
        for t in &mut run.levels[0].trials {
            t.client.as_mut().unwrap().held_share = Some(0.015);
        }
        let err = check("the run", &run, false).unwrap_err().to_string();
        assert!(err.contains("1.5% of their time at C=1"), "{err}");
    }
}
