//! Several runners, one verdict (issue 46): the legs of one comparison, each a run in blocks
//! on a runner of one pool, pooled into one crossover verdict over all their blocks, the
//! runner a factor of it (`stats::decision::grouped_level`: a slot effect per runner and
//! pair; the fail test on the pool's own average, the pass bound judged on the runners'
//! spread where their gaps differ beyond chance).
//!
//! Legs pool when they are one comparison: the same profile (hash), the same baseline and
//! ref, the same gate settings, the same server commands for head and base, the same head
//! and base commits (`ci` records them; a leg that says none pools only with such legs),
//! and their environment fingerprints agree on GPU model, driver and engine version (each
//! arm's). A leg that differs is named and keeps its own verdict. Each leg's own
//! verdict was decided with its own plan's looks; the pool is one look of the waves the
//! workflow allows (`merge --waves`), both sides' errors split over every look as
//! `compare::per_look` splits them.

use anyhow::Result;

use super::merge::Check;
use super::{evaluate_relative, Verdict};
use crate::profile::GateSettings;
use crate::record::blocks::Commits;
use crate::record::RunResult;
use crate::stats::decision::Design;

/// A check that pools several legs' blocks, or a leg's own check; with the notes for the
/// merge's report (legs not pooled, with why).
pub struct Pooled {
    pub checks: Vec<Check>,
    pub said: Vec<String>,
}

/// A leg that can pool: its check and its run.
struct Leg<'a> {
    check: Check,
    run: &'a RunResult,
}

/// Pools the legs that are one comparison (see the module doc); the rest keep their own
/// checks. `waves`: how many merges the workflow may make (each a look).
pub fn pool(checks: Vec<Check>, runs: &[(String, RunResult)], waves: u32) -> Result<Pooled> {
    let mut alone = Vec::new();
    let mut legs: Vec<Leg> = Vec::new();
    let mut said = Vec::new();
    for check in checks {
        let run = (check.verdict.run_id.as_deref()).and_then(|id| {
            (runs.iter())
                .map(|(_, r)| r)
                .find(|r| r.run_id.as_deref() == Some(id))
        });
        // A run counted twice (one artifact downloaded into two folders) would count its
        // blocks twice: it pools once.
        let twice = run.and_then(|r| {
            (legs.iter()).find(|l| l.run.run_id.is_some() && l.run.run_id == r.run_id)
        });
        if let Some(first) = twice {
            said.push(format!(
                "{}: the same run as {} (run {}): its blocks pooled once",
                crate::untrusted::inline_text(&check.file),
                crate::untrusted::inline_text(&first.check.file),
                first.run.run_id.as_deref().unwrap_or_default()
            ));
            alone.push(check);
            continue;
        }
        match run.filter(|r| poolable(&check.verdict, r)) {
            Some(run) => legs.push(Leg { check, run }),
            None => alone.push(check),
        }
    }
    let mut out = Vec::new();
    // Legs in groups of one comparison, in the merge's order; a group of one stays alone.
    let mut groups: Vec<Vec<Leg>> = Vec::new();
    for leg in legs {
        match groups
            .iter_mut()
            .find(|g| differences(&g[0], &leg).is_empty())
        {
            Some(g) => g.push(leg),
            None => groups.push(vec![leg]),
        }
    }
    // The largest group (the first of equals) is the pool the others are said against.
    let largest = groups.iter().map(Vec::len).max().unwrap_or(0);
    let main = groups.iter().position(|g| g.len() == largest);
    for (i, group) in groups.iter().enumerate() {
        // Said also where no group pooled (two legs of different commits): the reader
        // expected one verdict and sees why there are two.
        if let Some(m) = main.filter(|&m| m != i) {
            for leg in group {
                said.push(format!(
                    "{}: judged on its own, not pooled with the other legs: {}",
                    crate::untrusted::inline_text(&leg.check.file),
                    differences(&groups[m][0], leg).join("; ")
                ));
            }
        }
        match group.len() {
            1 => out.push(group[0].check.clone()),
            _ => out.push(pooled_check(group, waves)?),
        }
    }
    out.extend(alone);
    Ok(Pooled { checks: out, said })
}

/// A leg's verdict and run can pool: a relative verdict that gated levels, over a run in
/// blocks.
fn poolable(verdict: &Verdict, run: &RunResult) -> bool {
    verdict.design == Some(Design::Relative)
        && !verdict.levels.is_empty()
        && run.base.is_some()
        && run.servers.as_ref().is_some_and(|s| !s.blocks.is_empty())
}

/// What keeps two legs from being one comparison, said for the reader (empty: they are).
fn differences(a: &Leg, b: &Leg) -> Vec<String> {
    let (va, vb) = (&a.check.verdict, &b.check.verdict);
    let (ra, rb) = (a.run, b.run);
    let mut out = Vec::new();
    let mut differ = |what: &str, x: String, y: String| {
        if x != y {
            out.push(format!(
                "{what}: {} against {}",
                crate::untrusted::inline_text(&y),
                crate::untrusted::inline_text(&x)
            ));
        }
    };
    differ("profile", ra.profile_hash.clone(), rb.profile_hash.clone());
    differ(
        "baseline",
        format!("{} at {:?}", va.baseline_name, va.baseline_ref),
        format!("{} at {:?}", vb.baseline_name, vb.baseline_ref),
    );
    let settings = |v: &Verdict, r: &RunResult| {
        serde_json::to_string(&whole_plan(&v.settings, looks_of(r))).unwrap_or_default()
    };
    differ("gate settings", settings(va, ra), settings(vb, rb));
    let commands = |r: &RunResult| {
        (r.servers.as_ref()).map(|s| format!("{} | {:?}", s.head_command, s.base_command))
    };
    differ(
        "server commands",
        commands(ra).unwrap_or_default(),
        commands(rb).unwrap_or_default(),
    );
    // The builds compared: a leg of an earlier push (or against an earlier target branch)
    // measured other servers, however alike its commands read.
    let commit = |r: &RunResult, pick: fn(&Commits) -> Option<String>| {
        said(
            &(r.servers.as_ref())
                .and_then(|s| s.commits.as_ref())
                .and_then(pick),
        )
    };
    differ(
        "head commit",
        commit(ra, |c| c.head.clone()),
        commit(rb, |c| c.head.clone()),
    );
    differ(
        "base commit",
        commit(ra, |c| c.base.clone()),
        commit(rb, |c| c.base.clone()),
    );
    let (ea, eb) = (&ra.environment, &rb.environment);
    differ("GPU model", said(&ea.gpu_model), said(&eb.gpu_model));
    differ("driver", said(&ea.driver), said(&eb.driver));
    differ(
        "head engine version",
        said(&ea.engine_version),
        said(&eb.engine_version),
    );
    let base_version =
        |r: &RunResult| said(&r.base.as_ref().and_then(|b| b.engine_version.clone()));
    differ("base engine version", base_version(ra), base_version(rb));
    out
}

fn said(x: &Option<String>) -> String {
    x.clone().unwrap_or_else(|| "not said".into())
}

/// How many looks a leg's own plan allowed.
fn looks_of(run: &RunResult) -> u32 {
    run.servers.as_ref().map_or(1, |s| s.looks.max(1))
}

/// A leg verdict's settings as the whole plan's (before `per_look` split them).
fn whole_plan(settings: &GateSettings, looks: u32) -> GateSettings {
    let looks = f64::from(looks.max(1));
    // Rounded so that legs' settings compare equal after the split and its undoing.
    let round = |x: f64| (x * 1e9).round() / 1e9;
    GateSettings {
        alpha: round(settings.alpha * looks),
        pass_confidence: round(1.0 - (1.0 - settings.pass_confidence) * looks.sqrt()),
        ..settings.clone()
    }
}

/// One check over a group's blocks: the legs' runs as one run, each block renumbered and
/// labelled with its runner, gated with the legs' settings over the waves' looks.
fn pooled_check(group: &[Leg], waves: u32) -> Result<Check> {
    let first = group[0].run;
    let leg_looks = group.iter().map(|l| looks_of(l.run)).max().unwrap_or(1);
    let settings = whole_plan(&group[0].check.verdict.settings, looks_of(first));
    let runs: Vec<&RunResult> = group.iter().map(|l| l.run).collect();
    let Some(mut run) = crate::record::blocks::pool(&runs) else {
        anyhow::bail!("the legs to pool ran no blocks");
    };
    if let Some(s) = run.servers.as_mut() {
        s.looks = leg_looks.saturating_mul(waves.max(1));
    }
    let mut verdict = evaluate_relative(&run, &settings)?;
    let first_verdict = &group[0].check.verdict;
    verdict.baseline_name = first_verdict.baseline_name.clone();
    verdict.baseline_ref = first_verdict.baseline_ref.clone();
    verdict.settings_from = first_verdict.settings_from.clone();
    verdict.overridden = first_verdict.overridden.clone();
    let names: Vec<String> = group.iter().map(|l| l.check.file.clone()).collect();
    verdict.notes.insert(0, blocks_line(group));
    for (i, leg) in group.iter().enumerate() {
        verdict.notes.push(format!(
            "runner {i}: {} said {} on its own",
            crate::untrusted::inline_text(&leg.check.file),
            leg.check.verdict.outcome.word()
        ));
    }
    Ok(Check {
        file: format!("pooled: {}", names.join(" + ")),
        verdict,
        pooled: names,
    })
}

/// "blocks per runner and pair: 12 in all; runner 0 (legs/a/verdict.json): 4 (pair 0: 4);
/// ..." for the verdict.
fn blocks_line(group: &[Leg]) -> String {
    let mut total = 0;
    let per_runner: Vec<String> = (group.iter().enumerate())
        .map(|(i, leg)| {
            let blocks = leg.run.servers.as_ref().map_or(&[][..], |s| &s.blocks[..]);
            total += blocks.len();
            let mut pairs: Vec<u32> = blocks.iter().map(|b| b.pair.unwrap_or(0)).collect();
            pairs.sort_unstable();
            pairs.dedup();
            let per_pair: Vec<String> = (pairs.iter())
                .map(|p| {
                    let n = blocks.iter().filter(|b| b.pair.unwrap_or(0) == *p).count();
                    format!("pair {p}: {n}")
                })
                .collect();
            format!(
                "runner {i} ({}): {} ({})",
                crate::untrusted::inline_text(&leg.check.file),
                blocks.len(),
                per_pair.join(", ")
            )
        })
        .collect();
    format!(
        "{}{total} in all over {} runners; {}",
        super::verdict::POOL_COST_NOTE,
        group.len(),
        per_runner.join("; ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_legs_settings_are_read_back_as_the_whole_plans() {
        let whole = GateSettings::default();
        for looks in [1, 2, 5, 9] {
            let split = super::super::compare::per_look(&whole, looks);
            let back = whole_plan(&split, looks);
            assert!((back.alpha - whole.alpha).abs() < 1e-9, "{looks}");
            assert!((back.pass_confidence - whole.pass_confidence).abs() < 1e-9);
            // Legs of plans with different looks compare equal once read back.
            let other = whole_plan(&super::super::compare::per_look(&whole, 3), 3);
            assert_eq!(
                serde_json::to_string(&back).unwrap(),
                serde_json::to_string(&other).unwrap()
            );
        }
    }
}
