//! The gate's verdict for people: a console table and a Markdown summary, each saying what
//! the decision used (the design, the within- and between-session spread, the bounds at the
//! pass confidence, the smallest drop the data could see, slot and start effects in blocks).

use std::fmt::Write;

use super::console::{paint, use_color, Tone};
use super::tables;
use crate::gate::history_need::POWER_DROP;
use crate::gate::{LevelStatus, Outcome, Verdict};
use crate::stats::decision::{CalibrationUnused, DecisionSettings, Design};
use crate::untrusted::code_span;

/// A name as the headline quotes it: in double quotes, control characters escaped
/// (Debug's escapes) and nothing a log runner (or, `markdown`, Markdown) would act on
/// (src/untrusted.rs).
fn quoted(name: &str, markdown: bool) -> String {
    let text = crate::untrusted::for_terminal(&format!("{name:?}")).into_owned();
    match markdown {
        true => crate::untrusted::inline_text(&text),
        false => text,
    }
}

/// A one-line headline.
pub fn headline(verdict: &Verdict) -> String {
    headline_with(verdict, false)
}

/// [`headline`] for a Markdown heading: the baseline's name escaped for Markdown.
pub(super) fn headline_md(verdict: &Verdict) -> String {
    headline_with(verdict, true)
}

/// The widest a ratio shown or written may lie from 1: a throughput ratio a measurement can
/// give is far inside; one outside (a hand-edited verdict's 1e308) is not shown as a number.
const RATIO_BOUNDS: (f64, f64) = (1e-6, 1e6);

/// A ratio fit to show or write as a number: finite and inside [`RATIO_BOUNDS`].
pub fn shown_ratio(r: f64) -> Option<f64> {
    (r.is_finite() && (RATIO_BOUNDS.0..=RATIO_BOUNDS.1).contains(&r)).then_some(r)
}

/// "; worst ratio 0.912 (-8.8%)" for a worst ratio, "; worst ratio not finite" for one that
/// [`shown_ratio`] refuses, nothing when there is none.
pub fn worst_ratio_said(worst: Option<f64>) -> String {
    match worst.map(shown_ratio) {
        None => String::new(),
        Some(Some(r)) => format!(
            "; worst ratio {r:.3} ({})",
            super::numbers::signed_percent((r - 1.0) * 100.0)
        ),
        Some(None) => "; worst ratio not finite".to_string(),
    }
}

fn headline_with(verdict: &Verdict, markdown: bool) -> String {
    let worst = worst_ratio_said(verdict.worst_ratio);
    let against = match verdict.design {
        Some(Design::Relative) => "against the base server measured in the same job".to_string(),
        _ => format!(
            "against baseline {}",
            quoted(&verdict.baseline_name, markdown)
        ),
    };
    let failed: Vec<String> = verdict
        .levels
        .iter()
        .filter(|l| l.status == LevelStatus::Regression)
        .map(|l| match l.metric.is_throughput() {
            true => format!("C={}", l.concurrency),
            false => format!("C={} {}", l.concurrency, l.metric.label()),
        })
        .collect();
    // A pass or an undecided check of a history that misses 10% drops says so at once.
    let weak = weak_history(verdict)
        .map(|w| format!("; {w}"))
        .unwrap_or_default();
    match verdict.outcome {
        Outcome::Pass => format!(
            "PASS: no regression {against}{worst}{}{weak}",
            ruled_out(verdict)
                .map(|r| format!("; {r}"))
                .unwrap_or_default()
        ),
        // "(not a pass)": it exits 0, and a green check must not read as one.
        Outcome::Inconclusive => format!(
            "INCONCLUSIVE (not a pass): the data cannot tell whether this change is slower \
             {against}{worst}; not failed{}{weak}",
            if verdict.settings.fail_on_inconclusive {
                " ... except that gate.fail_on_inconclusive is set: exit 3"
            } else {
                ""
            }
        ),
        Outcome::Regression => format!(
            "REGRESSION: slower at {} {against}{worst}{}",
            failed.join(", "),
            match verdict.regression_accepted() {
                true => format!("; {ACCEPTED}"),
                false => String::new(),
            }
        ),
        Outcome::NotComparable if verdict.refusal.is_some() => format!(
            "NOT COMPARABLE: measured {against}{worst}, but the load generator may have decided \
             it, not the server (why and the way on below)"
        ),
        Outcome::NotComparable => {
            format!("NOT COMPARABLE: some levels could not be gated {against}{worst}")
        }
    }
}

/// A history verdict whose baseline cannot be trusted to catch a 10% drop, in a few words
/// for the headline and the annotation's title: "this baseline cannot catch a 10% drop (1
/// session)" while it cannot fail a drop under the guard at all (`history_need`), "this
/// baseline catches a 10% drop at its weakest level only 35% of the time" where its power is low
/// (`history_power`); None otherwise. The whole sentence, with what to do, is a notice.
pub fn weak_history(verdict: &Verdict) -> Option<String> {
    let sessions = |n: usize| match n {
        1 => "1 session".to_string(),
        n => format!("{n} sessions"),
    };
    if let Some(need) = &verdict.history_need {
        return Some(format!(
            "this baseline cannot catch a {:.0}% drop ({})",
            POWER_DROP * 100.0,
            sessions(need.sessions)
        ));
    }
    let power = verdict.history_power.as_ref()?;
    Some(format!(
        "this baseline catches a {:.0}% drop at its weakest level only {:.0}% of the time",
        power.drop * 100.0,
        power.power * 100.0
    ))
}

/// What a pass rules out, from the throughput levels' lower bounds at the pass confidence:
/// "no drop larger than 4.1% at any level (95% one-sided)". None when no level has a bound.
pub fn ruled_out(verdict: &Verdict) -> Option<String> {
    let lowest = (verdict.levels.iter())
        .filter(|l| l.metric.is_throughput() && l.p_slower.is_some())
        .filter_map(|l| l.ci_low)
        .reduce(f64::min)?;
    let confidence = verdict.settings.pass_confidence * 100.0;
    Some(if lowest >= 1.0 {
        format!("no drop at any level ({confidence:.0}% one-sided)")
    } else {
        format!(
            "no drop larger than {:.1}% at any level ({confidence:.0}% one-sided)",
            (1.0 - lowest) * 100.0
        )
    })
}

/// A relative run of one start per arm, in one line: what it cannot tell apart, and the way
/// to cover it (README "Relative runs in blocks" says more).
pub const UNSWAPPED_SLOTS: &str = "slots: one start per arm, so a GPU or start difference \
     would read as a change (cover it: --server-command with --base-server-command, or baseline calibrate)";

/// What a relative verdict knows of slot and start effects, one line each: the slot effect
/// and start spread the blocks measured (or the calibration gave), or plainly that they are
/// not covered. Empty for history verdicts.
pub fn slot_lines(verdict: &Verdict) -> Vec<String> {
    if verdict.design != Some(Design::Relative) {
        return Vec::new();
    }
    let tests: Vec<(u32, &crate::stats::decision::LevelTest)> = (verdict.levels.iter())
        .filter(|l| l.metric.is_throughput())
        .filter_map(|l| l.test.as_ref().map(|t| (l.concurrency, t)))
        .collect();
    let blocks: Vec<LevelBlocks<'_>> = (tests.iter())
        .filter_map(|(c, t)| t.crossover.as_ref().map(|x| (*c, x)))
        .collect();
    if blocks.is_empty() {
        if tests.is_empty() {
            return Vec::new();
        }
        return vec![UNSWAPPED_SLOTS.into()];
    }
    [
        slot_effect_line(&blocks),
        super::slot_groups::groups_line(&blocks),
        blocks_per_level_line(&blocks),
        start_spread_line(&blocks),
        calibration_line(&blocks),
        uncovered_line(&blocks),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// A gated level's concurrency and what its blocks said.
type LevelBlocks<'a> = (u32, &'a crate::stats::decision::CrossoverInfo);

/// The most blocks any level ran.
fn most_blocks(blocks: &[LevelBlocks<'_>]) -> usize {
    blocks.iter().map(|(_, x)| x.blocks).max().unwrap_or(0)
}

/// "slots: C=8: slot 1 2.1% faster than slot 0 (blocks); it falls on both arms (swapped
/// between 4 blocks) and cancels", where any level knows its slot effect.
fn slot_effect_line(blocks: &[LevelBlocks<'_>]) -> Option<String> {
    let effects: Vec<String> = (blocks.iter())
        .filter_map(|(c, x)| {
            let s = x.slot_effect?;
            let pct = (s.exp() - 1.0) * 100.0;
            let (fast, slow) = if pct >= 0.0 { (1, 0) } else { (0, 1) };
            let from = x.slot_effect_from.as_deref().unwrap_or("blocks");
            // Not "0.0% faster": below what one decimal shows, the slots are alike.
            Some(match pct.abs() < 0.05 {
                true => format!("C={c}: slots 0 and 1 within 0.05% of each other ({from})"),
                false => format!(
                    "C={c}: slot {fast} {:.1}% faster than slot {slow} ({from})",
                    pct.abs()
                ),
            })
        })
        .collect();
    if effects.is_empty() {
        return None;
    }
    let n = most_blocks(blocks);
    Some(format!(
        "slots: {}; it falls on both arms{}",
        effects.join(", "),
        if blocks
            .iter()
            .all(|(_, x)| x.head_on_slot0 > 0 && x.head_on_slot1 > 0)
        {
            format!(" (swapped between {n} blocks) and cancels")
        } else {
            " (taken out with the calibration's estimate)".into()
        }
    ))
}

/// The blocks of each level, where levels ran different numbers of them.
fn blocks_per_level_line(blocks: &[LevelBlocks<'_>]) -> Option<String> {
    let counts: Vec<usize> = blocks.iter().map(|(_, x)| x.blocks).collect();
    if !counts.iter().any(|&c| c != counts[0]) {
        return None;
    }
    let per: Vec<String> = (blocks.iter())
        .map(|(c, x)| format!("C={c} {}", x.blocks))
        .collect();
    Some(format!(
        "blocks per level (an undecided level got more): {}",
        per.join(", ")
    ))
}

/// The start spread each level measured, with its degrees of freedom.
fn start_spread_line(blocks: &[LevelBlocks<'_>]) -> Option<String> {
    let spreads: Vec<String> = (blocks.iter())
        .filter_map(|(c, x)| {
            let sd = x.start_spread?;
            Some(format!(
                "C={c} {:.1}% ({:.0} df{})",
                sd * 100.0,
                x.start_spread_df,
                if x.calibrated {
                    ", with calibration"
                } else {
                    ""
                }
            ))
        })
        .collect();
    (!spreads.is_empty()).then(|| {
        format!(
            "start spread (sd of a block's difference beyond its trials' noise): {}",
            spreads.join(", ")
        )
    })
}

/// The calibration's spread beside the run's, and which one decided (or why none was used).
fn calibration_line(blocks: &[LevelBlocks<'_>]) -> Option<String> {
    let calibrations: Vec<String> = (blocks.iter())
        .filter_map(|(c, x)| {
            let cal = x.calibration_spread?;
            let n = x.calibration_blocks.unwrap_or(0);
            let head = format!("C={c} calibration {:.1}% ({n} blocks)", cal * 100.0);
            if let Some(why) = x.calibration_unused {
                return Some(format!("{head} not used: {}", unused_reason(why, x.blocks)));
            }
            let own = x
                .own_spread
                .map_or("no degrees of freedom of its own".to_string(), |o| {
                    format!("{:.1}%", o * 100.0)
                });
            let slot = x.calibration_slot_contrast.map_or(String::new(), |r| {
                format!(
                    ", slot effect {:+.1} points from the calibration's",
                    r * 100.0
                )
            });
            let used = match (x.calibration_disagreed, x.calibration_weight) {
                (true, _) => "the run's own spread used".to_string(),
                (false, Some(w)) => format!("pooled at {w:.1} df"),
                (false, None) => "pooled".to_string(),
            };
            let run = x.calibration_run_check.map_or(String::new(), |r| {
                format!(
                    " (the run's {} levels checked together: p {:.3})",
                    r.levels, r.p
                )
            });
            Some(format!("{head} vs this run {own}{slot}: {used}{run}"))
        })
        .collect();
    (!calibrations.is_empty()).then(|| format!("calibration: {}", calibrations.join(", ")))
}

/// Why a level did not use the calibration it held, in words.
fn unused_reason(why: CalibrationUnused, blocks: usize) -> String {
    match why {
        CalibrationUnused::NothingToCheck => format!(
            "{blocks} block(s) of this run give nothing to check it with (2+ blocks, one each \
             way round, do)"
        ),
        CalibrationUnused::SlotSpreadUnknown => "one slot orientation only, and the \
            calibration's slot effect was measured in one job, so how far it moves is unknown \
            (calibrate in two or more jobs)"
            .into(),
    }
}

/// The levels whose start effects no degrees of freedom cover, and what would cover them.
fn uncovered_line(blocks: &[LevelBlocks<'_>]) -> Option<String> {
    let uncovered: Vec<u32> = (blocks.iter())
        .filter(|(_, x)| !x.starts_covered)
        .map(|(c, _)| *c)
        .collect();
    if uncovered.is_empty() {
        return None;
    }
    let n = most_blocks(blocks);
    Some(format!(
        "start effects not covered at {}: {n} block(s) and no calibration it could check leave no degrees of \
         freedom for the start spread, so only a drop beyond the guard can fail and nothing \
         can pass (4+ blocks, or 2+ with `baseline calibrate` on main, cover it)",
        crate::record::levels_text(&uncovered)
    ))
}

/// Where the settings came from and what the command line overrode, one line each.
pub fn settings_lines(verdict: &Verdict) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(from) = &verdict.settings_from {
        out.push(format!("settings: from {from}"));
    }
    out.extend(verdict.overrides_line());
    out
}

/// What a regression accepted as intended says after the headline, in every place the
/// headline goes (console, verdict.md, job summary, PR comment) and in its annotation.
pub const ACCEPTED: &str = "accepted as intended (allow-slowdown, --allow-regression): \
    not failed; bless the target branch's baseline after merging";

/// A probability in at most 4 significant digits ("0.003333", "0.01").
fn short(x: f64) -> String {
    let text = format!("{x:.4e}");
    text.parse::<f64>().map_or(text, |v| v.to_string())
}

/// Whether a relative verdict was measured in blocks.
fn in_blocks(verdict: &Verdict) -> bool {
    (verdict.levels.iter()).any(|l| l.test.as_ref().is_some_and(|t| t.crossover.is_some()))
}

/// How the decision was made, in one or two lines.
fn method(verdict: &Verdict) -> String {
    let s = &verdict.settings;
    let gated = verdict
        .levels
        .iter()
        .filter(|l| l.p_slower.is_some())
        .count();
    let design = match verdict.design {
        Some(Design::Relative) if in_blocks(verdict) => {
            "relative in blocks: both servers started fresh in each block, slots swapped between \
             blocks, trials interleaved within; the change is the mean of the two orientations' \
             block differences (slot effect cancels), its spread from the blocks (df from the \
             blocks) or an A/A calibration; outlier rule within each block"
        }
        Some(Design::Relative) => {
            "relative: base and head in one job, trials interleaved; Welch on ln(tok/s) after the \
             outlier rule (trials 5 robust sds and 5% from both arms' medians set aside)"
        }
        Some(Design::History) => {
            "history: this run against the baseline's session means, the between-session spread \
             with k-1 df (a restart is not a regression)"
        }
        None => "refused before comparing",
    };
    let split = DecisionSettings {
        alpha: s.alpha,
        ..DecisionSettings::default()
    };
    format!(
        "gate: {design}; Holm across {gated} levels, alpha {} ({} for the test, {} for the {:.0}% \
         guard); a level fails when significant and at least {:.1}% slower, or beyond the guard; \
         it passes when its one-sided {:.0}% bound rules out a drop of {:.1}% (every level on its \
         own: no multiplicity correction); bounds shown at {:.0}%; at least {} trials a side",
        short(s.alpha),
        short(split.main_alpha()),
        short(split.guard_alpha()),
        s.guard * 100.0,
        s.min_effect * 100.0,
        s.pass_confidence * 100.0,
        s.tolerance * 100.0,
        s.pass_confidence * 100.0,
        s.min_trials
    )
}

/// The verdict's last line: the worst gated level as a ratio, in words a reviewer reads at a
/// glance ("candidate is 0.91x the baseline at C = 1 (9.0% slower)"); None when no level
/// has a throughput ratio.
pub fn closing_line(verdict: &Verdict) -> Option<String> {
    let worst = (verdict.levels.iter())
        .filter(|l| l.metric.is_throughput())
        .filter_map(|l| l.ratio.map(|r| (l, r)))
        .min_by(|a, b| a.1.total_cmp(&b.1))?;
    let (level, ratio) = worst;
    let (who, whom) = match verdict.design {
        Some(Design::Relative) => ("head", "the base"),
        _ => ("candidate", "the baseline"),
    };
    let change = (ratio - 1.0) * 100.0;
    let how = match change {
        c if c.abs() < 0.05 => "the same speed".to_string(),
        c if c < 0.0 => format!("{:.1}% slower", -c),
        c => format!("{c:.1}% faster"),
    };
    let worst = if verdict.levels.len() > 1 {
        ", its worst level"
    } else {
        ""
    };
    Some(format!(
        "{who} is {ratio:.2}x {whom} at C = {} ({how}){worst}",
        level.concurrency
    ))
}

/// The headline with its first word ("PASS", "REGRESSION", ...) coloured when `color`.
fn painted_headline(verdict: &Verdict, color: bool) -> String {
    let text = headline(verdict);
    let tone = match verdict.outcome {
        Outcome::Pass => Tone::Good,
        Outcome::Regression => Tone::Bad,
        Outcome::Inconclusive | Outcome::NotComparable => Tone::Unsure,
    };
    match text.split_once(':') {
        Some((word, rest)) => format!("{}:{rest}", paint(word, tone, color)),
        None => text,
    }
}

/// The console table, coloured on a terminal only (report/console.rs `use_color`).
pub fn console(verdict: &Verdict) -> String {
    console_with(verdict, use_color())
}

/// The console table; verdict words in colour when `color`.
pub fn console_with(verdict: &Verdict, color: bool) -> String {
    let mut out = String::new();
    out.push_str(&tables::terminal(tables::FULL, verdict, color));
    let _ = writeln!(out, "{}", method(verdict));
    for line in slot_lines(verdict)
        .into_iter()
        .chain(settings_lines(verdict))
    {
        // Names in the settings line come from the baseline and results files.
        let _ = writeln!(out, "{}", crate::untrusted::for_terminal(&line));
    }
    let notices = verdict.notices();
    for line in &notices {
        let _ = writeln!(out, "note: {}", crate::untrusted::for_terminal(line));
    }
    for line in super::explain::console_lines(verdict) {
        let _ = writeln!(out, "{line}");
    }
    // Information (the plan, why the blocks stopped, the client's notes), then what to act on.
    for n in &verdict.notes {
        let _ = writeln!(
            out,
            "note: {}",
            super::console::short_warning(n, "verdict.md")
        );
    }
    for w in verdict.warnings.iter().filter(|w| !notices.contains(w)) {
        // A refusal is said whole: it holds the way on, which a cut would hide.
        let said = match verdict.refusal.as_ref() == Some(w) {
            true => crate::untrusted::for_terminal(w).into_owned(),
            false => super::console::short_warning(w, "verdict.md"),
        };
        let _ = writeln!(out, "warning: {said}");
    }
    let _ = writeln!(out, "{}", painted_headline(verdict, color));
    if let Some(line) = closing_line(verdict) {
        let _ = writeln!(out, "{line}");
    }
    out
}

/// The verdict in a few lines, for a screen that shows more than the verdict (the demo): the
/// compact table, what the slots say, the headline and the worst level. The whole verdict is
/// in verdict.md.
pub fn console_brief(verdict: &Verdict) -> String {
    let color = use_color();
    let mut out = tables::terminal(tables::COMPACT, verdict, color);
    for line in slot_lines(verdict) {
        let _ = writeln!(out, "{}", crate::untrusted::for_terminal(&line));
    }
    let _ = writeln!(out, "{}", painted_headline(verdict, color));
    if let Some(line) = closing_line(verdict) {
        let _ = writeln!(out, "{line}");
    }
    out
}

/// The outcome at a glance, for Markdown headings: green only for a pass, red only for a
/// check that failed (a regression let through on purpose exits 0: orange).
pub(super) fn icon(verdict: &Verdict) -> &'static str {
    outcome_icon(verdict.outcome, verdict.regression_accepted())
}

/// The icon of an outcome (a regression let through by `allow_regression`: its own), for
/// one verdict and for a merge's combined one alike.
pub(super) fn outcome_icon(outcome: Outcome, regression_accepted: bool) -> &'static str {
    match outcome {
        Outcome::Pass => "✅",
        Outcome::Inconclusive => "🟡",
        Outcome::Regression if regression_accepted => "🟠",
        Outcome::Regression => "❌",
        Outcome::NotComparable => "⚠️",
    }
}

/// "Profile `p`, baseline `b` at `ref`."
pub(super) fn against_line(verdict: &Verdict) -> String {
    let at = verdict
        .baseline_ref
        .as_ref()
        .map(|r| format!(" at {}", code_span(r)))
        .unwrap_or_default();
    format!(
        "Profile {}, baseline {}{at}.",
        code_span(&verdict.profile_name),
        code_span(&verdict.baseline_name)
    )
}

/// A Markdown summary (for `$GITHUB_STEP_SUMMARY` or a report file). `images` are paths
/// relative to where the Markdown will be read.
pub fn markdown(verdict: &Verdict, images: &[String]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "## {} throughline gate: {}\n",
        icon(verdict),
        headline_md(verdict)
    );
    let _ = writeln!(out, "{}\n", against_line(verdict));
    for line in verdict.notices() {
        let _ = writeln!(out, "**{}**\n", crate::untrusted::inline_text(&line));
    }
    out.push_str(&tables::markdown(tables::FULL, verdict));
    let _ = writeln!(
        out,
        "\n{}\n\nThree outcomes: **regression** (exit 1), **pass** (every level's one-sided \
         {:.0}% bound lies above {:.0}%: no drop larger than {:.0}% at any level), \
         **inconclusive** (the data cannot tell; exit 0 unless `fail_on_inconclusive`).\n",
        method(verdict),
        verdict.settings.pass_confidence * 100.0,
        (1.0 - verdict.settings.tolerance) * 100.0,
        verdict.settings.tolerance * 100.0,
    );
    for line in slot_lines(verdict)
        .into_iter()
        .chain(settings_lines(verdict))
    {
        let _ = writeln!(out, "{}\n", crate::untrusted::inline_text(&line));
    }
    out.push_str(&super::explain::markdown(verdict));
    let notices = verdict.notices();
    let warnings: Vec<&String> = (verdict.warnings.iter())
        .filter(|w| !notices.contains(w))
        .collect();
    if !warnings.is_empty() {
        let _ = writeln!(out, "**Warnings**\n");
        for w in warnings {
            let _ = writeln!(out, "- {}", crate::untrusted::inline_text(w));
        }
        let _ = writeln!(out);
    }
    if !verdict.notes.is_empty() {
        let _ = writeln!(out, "**Notes**\n");
        for n in &verdict.notes {
            let _ = writeln!(out, "- {}", crate::untrusted::inline_text(n));
        }
        let _ = writeln!(out);
    }
    for image in images {
        let _ = writeln!(out, "![{image}]({image})\n");
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::gate::history_need::{HistoryNeed, HistoryPower};
    use crate::gate::SettingOverride;
    use crate::report::plots::ratio_tests::mixed;

    /// A history verdict against a baseline of one session (which cannot fail a drop under
    /// the guard), its need said among the warnings as `evaluate` says it.
    pub(crate) fn one_session(outcome: Outcome) -> Verdict {
        let mut v = mixed();
        v.design = Some(Design::History);
        v.outcome = outcome;
        let need = HistoryNeed {
            sessions: 1,
            needed: Some(3),
            guard: 0.25,
        };
        v.warnings = vec![need.line()];
        v.history_need = Some(need);
        v
    }

    /// A history verdict whose baseline catches a 10% drop 35% of the time.
    pub(crate) fn weak_power(outcome: Outcome) -> Verdict {
        let mut v = mixed();
        v.design = Some(Design::History);
        v.outcome = outcome;
        let power = HistoryPower {
            sessions: 3,
            spread: Some(0.03),
            drop: 0.10,
            power: 0.35,
            concurrency: 8,
            per_level: vec![(8, 0.35), (1, 0.6)],
        };
        v.warnings = vec![power.line()];
        v.history_power = Some(power);
        v
    }

    /// Issue 50 item 3: an inconclusive verdict exits 0, so where a reviewer looks (the job
    /// summary's heading; the comment's is the same headline) it must not look like a pass,
    /// and a history whose baseline cannot catch a 10% drop says so in the headline.
    #[test]
    fn an_inconclusive_heading_is_not_a_pass_and_names_a_weak_history() {
        let v = one_session(Outcome::Inconclusive);
        let md = markdown(&v, &[]);
        let heading = md.lines().next().unwrap();
        assert!(
            heading.starts_with("## 🟡 throughline gate: INCONCLUSIVE (not a pass): "),
            "{heading}"
        );
        assert!(
            heading.ends_with("; this baseline cannot catch a 10% drop (1 session)"),
            "{heading}"
        );
        // A pass against a baseline that misses most 10% drops says so too; a regression
        // (it caught one) and a relative verdict say nothing of it.
        let pass = headline(&weak_power(Outcome::Pass));
        assert!(pass.starts_with("PASS: "), "{pass}");
        assert!(
            pass.ends_with(
                "; this baseline catches a 10% drop at its weakest level only 35% of the time"
            ),
            "{pass}"
        );
        let caught = headline(&weak_power(Outcome::Regression));
        assert!(!caught.contains("10% drop"), "{caught}");
        assert!(!headline(&mixed()).contains("10% drop"));
    }

    /// Issue 50 item 7: a regression let through on purpose exits 0: its heading shows no
    /// red cross, and still says REGRESSION.
    #[test]
    fn an_accepted_regression_shows_no_red_cross() {
        let mut v = mixed();
        v.overridden.push(SettingOverride::allow_regression());
        assert!(v.regression_accepted());
        let md = markdown(&v, &[]);
        let heading = md.lines().next().unwrap();
        assert!(!heading.contains('❌'), "{heading}");
        assert!(heading.contains("REGRESSION: slower at C=1"), "{heading}");
        assert!(markdown(&mixed(), &[]).starts_with("## ❌ "));
    }

    #[test]
    fn only_ratios_a_measurement_can_give_are_shown_as_numbers() {
        assert_eq!(worst_ratio_said(Some(0.912)), "; worst ratio 0.912 (-8.8%)");
        assert_eq!(worst_ratio_said(None), "");
        for absurd in [1e308, f64::INFINITY, f64::NAN, 0.0, -1.0, 1e-9, 2e6] {
            assert_eq!(shown_ratio(absurd), None, "{absurd}");
            assert_eq!(worst_ratio_said(Some(absurd)), "; worst ratio not finite");
        }
    }
}
