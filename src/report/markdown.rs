//! The Markdown run report (`report.md`): what was measured, where, the per-level table, the
//! warnings, and the charts. Written to sit beside the PNGs, so images are linked by file name;
//! it reads well as a GitHub job summary or as an artifact.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::PathBuf;

use crate::record::{ErrorClass, LevelResult, RunResult, TrialResult};
use crate::stats::Spread;
use crate::untrusted::code_span_in_table;

use super::links;

/// The whole report. `images` are linked by file name (they sit beside the report).
pub fn run_report_markdown(result: &RunResult, images: &[PathBuf]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# throughline run: {}\n", cell(&result.profile_name));
    if !result.complete {
        let _ = writeln!(
            out,
            "> **Incomplete run**: it was stopped early; the levels below hold what was measured.\n"
        );
    }
    let _ = writeln!(out, "| | |\n| --- | --- |");
    for (k, v) in facts(result) {
        let _ = writeln!(out, "| {k} | {v} |");
    }
    levels_section(&mut out, result);

    let warnings = warnings(result);
    if !warnings.is_empty() {
        let _ = writeln!(out, "\n## Warnings\n");
        for w in warnings {
            let _ = writeln!(out, "- {w}");
        }
    }

    if !images.is_empty() {
        let _ = writeln!(out, "\n## Charts\n");
        for image in images {
            let Some(name) = image.file_name().and_then(|n| n.to_str()) else {
                continue;
            };
            let _ = writeln!(out, "![{}]({})\n", alt_text(name), links::escape(name));
        }
    }
    out
}

/// What was measured and where, one row each: the profile, the tool, the times, what the
/// environment says of itself (only what it recorded), the workload and the sweep.
fn facts(result: &RunResult) -> Vec<(&'static str, String)> {
    let env = &result.environment;
    let p = &result.profile;
    let mut facts: Vec<(&str, String)> = vec![
        (
            "profile",
            format!(
                "{} (hash {})",
                code_span_in_table(&result.profile_name),
                code_span_in_table(&result.profile_hash)
            ),
        ),
        ("measured by", cell(&result.tool)),
        ("started", cell(&result.started_at)),
        ("finished", cell(&result.finished_at)),
    ];
    if let Some(id) = &result.run_id {
        facts.push(("run id", code_span_in_table(id)));
    }
    let opt = |v: &Option<String>| v.as_deref().map(cell);
    if let Some(m) = opt(&env.model) {
        facts.push(("model", m));
    }
    let engine = [opt(&env.engine), opt(&env.engine_version)]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join(" ");
    if !engine.is_empty() {
        facts.push(("engine", engine));
    }
    if let Some(g) = opt(&env.gpu_model) {
        let count = env.gpu_count.map(|n| format!(" x {n}")).unwrap_or_default();
        facts.push(("GPU", format!("{g}{count}")));
    }
    if let Some(d) = opt(&env.driver) {
        facts.push(("driver", d));
    }
    if let Some(x) = opt(&env.precision) {
        facts.push(("precision", x));
    }
    if let Some(r) = opt(&env.runner) {
        facts.push(("runner", r));
    }
    facts.push(("endpoints", env.endpoints.to_string()));
    facts.push((
        "workload",
        format!(
            "{} input words, max_tokens {}{}{}",
            p.workload.input_tokens,
            p.workload.max_tokens,
            if p.workload.ignore_eos {
                ", ignore_eos"
            } else {
                ""
            },
            if p.workload.stream {
                ", streamed"
            } else {
                ", not streamed"
            }
        ),
    ));
    facts.push(("sweep", sweep_text(result)));
    facts
}

/// The results per level (concurrency, or request rate in an open-loop run): what a level
/// is, how the columns are computed, a row per level, the prefix-cache notes and which
/// latency percentiles were read from a histogram.
fn levels_section(out: &mut String, result: &RunResult) {
    let open_loop = result.levels.iter().any(|l| l.rate.is_some());
    let (heading, first_column, what_levels_are) = if open_loop {
        (
            "request rate",
            "rate",
            "Each level sends requests at a fixed rate (open loop); TTFT and latency are from \
             the send time, and `open_loop` in results.json also has them from the scheduled time.",
        )
    } else {
        (
            "concurrency level",
            "C",
            "C is the number of requests in flight.",
        )
    };
    let _ = writeln!(out, "\n## Results per {heading}\n");
    let _ = writeln!(
        out,
        "{what_levels_are} Statistics are across trials (each trial an \
         independent replicate): output tok/s is the mean ± sd of the trials' throughput, \
         counting successful requests only; the other columns are means over trials of each \
         trial's figure. ok and failed are totals over trials.\n"
    );
    let _ = writeln!(
        out,
        "| {first_column} | output tok/s (mean ± sd) | per-request tok/s | TTFT p50 ms | \
         TTFT p99 ms | ITL p50 ms | ITL p99 ms | ok | failed (by class) | error % |"
    );
    let _ = writeln!(
        out,
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: |"
    );
    for level in &result.levels {
        let _ = writeln!(out, "{}", level_row(level));
    }
    if result.levels.is_empty() {
        let _ = writeln!(out, "\n_No level was measured._");
    }
    let cache: Vec<String> = (result.levels.iter())
        .flat_map(|l| {
            let estimated = crate::record::estimated_percentiles_note(l);
            [super::console::cache_note(l), estimated]
                .into_iter()
                .flatten()
                .map(move |n| format!("- {}: {n}", l.label()))
        })
        .collect();
    if !cache.is_empty() {
        let _ = writeln!(out, "\n{}", cache.join("\n"));
    }
}

/// Levels and trials as measured (and as planned, where they differ).
fn sweep_text(result: &RunResult) -> String {
    let counts: Vec<usize> = result.levels.iter().map(|l| l.trials.len()).collect();
    let (lo, hi) = (
        counts.iter().copied().min().unwrap_or(0),
        counts.iter().copied().max().unwrap_or(0),
    );
    let trials = if lo == hi {
        format!("{lo} trial(s) per level")
    } else {
        format!("{lo} to {hi} trials per level")
    };
    let planned = result.profile.sweep.trials as usize;
    let plan = if hi != planned || lo != planned {
        format!(" (the profile asks for {planned})")
    } else {
        String::new()
    };
    format!(
        "closed loop, {} level(s), {trials}{plan}",
        result.levels.len()
    )
}

fn level_row(level: &LevelResult) -> String {
    let trials = &level.trials;
    let tput = match Spread::of(&level.throughputs()) {
        Some(s) if s.n > 1 => format!("{:.1} ± {:.1} (n={})", s.mean, s.sd, s.n),
        Some(s) => format!("{:.1} (n=1)", s.mean),
        None => "no success".to_string(),
    };
    let mean = |f: &dyn Fn(&TrialResult) -> Option<f64>| mean_cell(level.trial_mean(f));
    let ok: u64 = trials.iter().map(|t| t.succeeded).sum();
    let mut by_class: BTreeMap<ErrorClass, u64> = BTreeMap::new();
    for t in trials {
        for (class, n) in &t.failed {
            *by_class.entry(*class).or_default() += n;
        }
    }
    let failed_total: u64 = by_class.values().sum();
    let failed = if failed_total == 0 {
        "0".to_string()
    } else {
        let parts: Vec<String> = by_class
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(c, n)| format!("{c} {n}"))
            .collect();
        format!("{failed_total}: {}", parts.join(", "))
    };
    format!(
        "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.1} |",
        match level.rate {
            Some(r) => format!("{r}/s"),
            None => level.concurrency.to_string(),
        },
        tput,
        mean(&|t| t.per_request_tok_per_s),
        mean(&|t| t.ttft_ms.as_ref().map(|p| p.p50)),
        mean(&|t| t.ttft_ms.as_ref().map(|p| p.p99)),
        mean(&|t| t.itl_ms.as_ref().map(|p| p.p50)),
        mean(&|t| t.itl_ms.as_ref().map(|p| p.p99)),
        ok,
        failed,
        level.error_rate() * 100.0
    )
}

/// A mean over trials in a table cell: whole numbers from 100 up, one decimal below, "-"
/// when no trial measured it.
pub fn mean_cell(mean: Option<f64>) -> String {
    match mean {
        None => "-".to_string(),
        Some(m) if m.abs() >= 100.0 => format!("{m:.0}"),
        Some(m) => format!("{m:.1}"),
    }
}

/// The run's warnings, each trial's flags, and the first error message of each failure class.
fn warnings(result: &RunResult) -> Vec<String> {
    let mut out: Vec<String> = result.warnings.iter().map(|w| cell(w)).collect();
    let mut examples: BTreeMap<ErrorClass, (String, String)> = BTreeMap::new();
    for level in &result.levels {
        if !level.trials.is_empty() && level.trials.iter().all(|t| !t.measured()) {
            out.push(format!(
                "level {}: no successful request in any trial",
                level.label()
            ));
        }
        for t in &level.trials {
            for flag in &t.flags {
                out.push(format!(
                    "level {} trial {}: {}",
                    level.label(),
                    t.trial,
                    cell(&flag.message)
                ));
            }
            for (class, msg) in &t.error_examples {
                examples
                    .entry(*class)
                    .or_insert_with(|| (level.label(), msg.clone()));
            }
        }
    }
    for (class, (level, msg)) in examples {
        out.push(format!(
            "first `{class}` failure (level {level}): {}",
            cell(&truncate(&msg, 300))
        ));
    }
    out
}

fn alt_text(file: &str) -> &str {
    match file {
        "throughput.png" => "Output throughput vs concurrency",
        "per_request.png" => "Per-request speed vs concurrency",
        "latency.png" => "TTFT and ITL vs concurrency",
        "capacity.png" => "Days to finish vs node count",
        "ratio.png" => "Candidate / baseline per level",
        other => other,
    }
}

/// Untrusted text inside a table cell or a list item: no link, image, HTML or cell break
/// (src/untrusted.rs).
fn cell(text: &str) -> String {
    crate::untrusted::inline_text(text)
}

fn truncate(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_string()
    } else {
        let mut s: String = text.chars().take(max).collect();
        s.push('…');
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::plots::tests::{sweep, trial};

    #[test]
    fn report_has_table_warnings_and_images() {
        let mut r = sweep(&[1, 4, 64], 3);
        r.levels[2].trials = vec![trial(1, 64, 0.0, 0), trial(2, 64, 0.0, 0)];
        r.levels[2].trials[0].error_examples.insert(
            ErrorClass::Timeout,
            "request | timed out\nafter 300 s".into(),
        );
        r.warnings.push("server gave no usage".into());
        r.environment.gpu_model = Some("H100".into());
        r.environment.gpu_count = Some(8);
        let md = run_report_markdown(
            &r,
            &[
                PathBuf::from("/tmp/x/throughput.png"),
                PathBuf::from("latency.png"),
            ],
        );
        assert!(md.starts_with("# throughline run: unit\n"), "{md}");
        assert!(md.contains("hash `0123456789abcdef0123`"), "{md}");
        assert!(md.contains("| GPU | H100 x 8 |"), "{md}");
        assert!(md.contains("| 64 | no success | - |"), "{md}");
        assert!(md.contains("| 32: timeout 32 | 100.0 |"), "{md}");
        assert!(md.contains("- server gave no usage"), "{md}");
        // Untrusted text stays on its line: the newline shown as `\n` (src/untrusted.rs).
        assert!(md.contains("request \\| timed out\\\\nafter 300 s"), "{md}");
        assert!(
            md.contains("![Output throughput vs concurrency](throughput.png)"),
            "{md}"
        );
        assert!(
            md.contains("![TTFT and ITL vs concurrency](latency.png)"),
            "{md}"
        );
        // Every table row has the header's number of cells.
        let rows: Vec<&str> = md
            .lines()
            .filter(|l| l.starts_with("| C |") || l.starts_with("| 1 |"))
            .collect();
        assert_eq!(rows.len(), 2);
        assert_eq!(
            rows[0].matches(" | ").count(),
            rows[1].matches(" | ").count()
        );
    }

    #[test]
    fn single_trial_and_no_levels() {
        let md = run_report_markdown(&sweep(&[8], 1), &[]);
        assert!(md.contains("(n=1)"), "{md}");
        assert!(!md.contains("## Charts"));
        let mut empty = sweep(&[], 1);
        empty.complete = false;
        let md = run_report_markdown(&empty, &[]);
        assert!(
            md.contains("Incomplete run") && md.contains("No level was measured"),
            "{md}"
        );
    }
}
