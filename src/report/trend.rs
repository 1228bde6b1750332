//! The trend of main's history for people: a Markdown table per level (sessions, first and
//! latest tok/s, the latest shift) under a one-line answer.

use std::fmt::Write;

use crate::gate::trend::{commit_range, LevelTrend, Trend};
use crate::record::files::TREND_PNG;
use crate::untrusted::{fenced_block, inline_text};

/// The one-line answer: "no lasting slowdown" or which levels got slower, by how much, since.
pub fn headline(trend: &Trend) -> String {
    let slower: Vec<String> = trend
        .levels
        .iter()
        .filter(|l| l.slower)
        .filter_map(|l| {
            let s = l.shifts.last()?;
            Some(format!(
                "C={} is {:.1}% slower since {}{}",
                l.concurrency,
                (1.0 - s.ratio) * 100.0,
                s.measured_at,
                commit_text(s.commit.as_deref())
            ))
        })
        .collect();
    if slower.is_empty() {
        format!(
            "TREND OK: no lasting slowdown of {:.0}% or more over {} sessions",
            trend.min_effect * 100.0,
            trend.sessions
        )
    } else {
        format!("TREND SLOWER: {}", slower.join("; "))
    }
}

fn commit_text(commit: Option<&str>) -> String {
    commit.map_or(String::new(), |c| {
        // Ten characters, not bytes: a commit given to `bless --commit` may be any text.
        format!(" (commit {})", c.chars().take(10).collect::<String>())
    })
}

/// Where each slowdown's change lies in main's history, and the `bisect` command that finds
/// its commit: one entry per distinct range (levels that shifted at the same sessions
/// share one). `profile` is the profile path to put in the command, when it is a plain path.
pub fn commit_ranges(trend: &Trend, profile: Option<&str>) -> Vec<(String, String)> {
    let plain = |p: &&str| {
        !p.is_empty()
            && p.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._/-".contains(&b))
    };
    let profile = profile.filter(plain).unwrap_or("PROFILE.toml");
    let mut out: Vec<(String, String)> = Vec::new();
    let mut seen: Vec<(String, String)> = Vec::new();
    for level in trend.levels.iter().filter(|l| l.slower) {
        let Some(shift) = level.shifts.last() else {
            continue;
        };
        let Some((good, bad)) = commit_range(shift) else {
            continue;
        };
        let key = (good.to_string(), bad.to_string());
        if seen.contains(&key) {
            continue;
        }
        seen.push(key);
        let short = |c: &str| c.chars().take(10).collect::<String>();
        out.push((
            format!(
                "C={}: the change lies after commit {} (the last session before the shift) up to \
                 commit {} (the first after it)",
                level.concurrency,
                short(good),
                short(bad)
            ),
            format!(
                "throughline bisect --good {good} --bad {bad} -p {profile} \\\n    \
                 --server-command 'YOUR-SERVER --port {{port}}' --slots '0;1'"
            ),
        ));
    }
    out
}

/// The Markdown report, with the chart linked relative to the report's own folder.
pub fn markdown(trend: &Trend) -> String {
    markdown_with(trend, None)
}

/// [`markdown`], with the profile path the bisect command names.
pub fn markdown_with(trend: &Trend, profile: Option<&str>) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "# Throughput trend: {}\n", inline_text(&trend.name));
    let _ = writeln!(md, "**{}**\n", inline_text(&headline(trend)));
    let _ = writeln!(
        md,
        "| C | sessions | first tok/s | latest tok/s | latest shift | p | status |\n\
         |---:|---:|---:|---:|---|---:|---|"
    );
    for level in &trend.levels {
        let _ = writeln!(md, "{}", row(level));
    }
    let _ = writeln!(
        md,
        "\nEach session is one point: the geometric mean of its trials' tok/s. Shifts are \
         found by E-divisive means with a permutation test; each level is tested at {:.4}, so \
         an unchanged history raises a false alarm with probability at most {} over all \
         levels. A level is SLOWER when its latest shift is a drop of at least the baseline's \
         minimum effect ({:.0}%).\n",
        trend.alpha / trend.levels.len().max(1) as f64,
        trend.alpha,
        trend.min_effect * 100.0
    );
    if trend.windowed() {
        let _ = writeln!(
            md,
            "Shifts were searched in the latest {} of {} sessions of each level; the earlier \
             ones are drawn, not tested.\n",
            trend.window, trend.sessions
        );
    }
    let ranges = commit_ranges(trend, profile);
    if !ranges.is_empty() {
        let _ = writeln!(md, "## Which commit?\n");
        for (said, command) in &ranges {
            let _ = writeln!(md, "{}:\n", inline_text(said));
            let _ = writeln!(md, "{}", fenced_block("sh", command));
        }
    }
    let _ = writeln!(md, "![throughput trend]({TREND_PNG})");
    md
}

fn row(level: &LevelTrend) -> String {
    let first = level.points.first().map(|p| p.tok_per_s);
    let latest = level.points.last().map(|p| p.tok_per_s);
    let tok = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1}"));
    let (shift, p) = match level.shifts.last() {
        Some(s) => (
            format!(
                "{} from {}{}",
                super::numbers::signed_percent((s.ratio - 1.0) * 100.0),
                s.measured_at,
                commit_text(s.commit.as_deref())
            ),
            format!("{:.4}", s.p_value),
        ),
        None => ("none".to_string(), "-".to_string()),
    };
    let status = if level.slower {
        "SLOWER"
    } else if level.points.len() < 6 {
        "too few sessions to tell"
    } else {
        "ok"
    };
    format!(
        "| {} | {} | {} | {} | {shift} | {p} | {status} |",
        level.concurrency,
        level.points.len(),
        tok(first),
        tok(latest)
    )
}
