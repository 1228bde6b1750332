//! Files for the dashboards and CI systems teams already run, one file per format behind one
//! trait ([`Exporter`]), all listed in [`EXPORTERS`]: Bencher Metric Format JSON (`bmf.rs`),
//! github-action-benchmark JSON (`github_benchmark.rs`), JUnit XML of a verdict (`junit.rs`)
//! and the per-trial `summary.csv` (`csv.rs`).
//!
//! **Adding a format** = one new file here implementing [`Exporter`] + one line in
//! [`EXPORTERS`]: the command line's flag (`--<flag> FILE`, on `bench` and `gate`, or on `gate`
//! alone for a format that reads a verdict) and its help are generated from that list
//! (commands/flags/export.rs `ExportArgs`), and the file is written atomically by [`write_exports`].
//! A format file uses record/ and gate/ (and the leaves), never another format's file.
//!
//! Every run figure is a mean over the level's trials that measured something (as the gate
//! compares them), with its two-sided 95% Student-t interval across trials where there are
//! two or more: trials are the replicates, never requests. A figure the run does not have is
//! left out, never written as zero.
//!
//! Published formats, with examples in `fixtures/exports/`:
//! - BMF: `{ "<benchmark>": { "<measure slug>": { "value", "lower_value"?, "upper_value"? } } }`
//!   (bencher.dev/docs/reference/bencher-metric-format, schema bencher.dev/bmf.json).
//! - github-action-benchmark custom tools: `[ { "name", "unit", "value", "range"?, "extra"? } ]`,
//!   with `value` a number and `range`/`extra` strings (README, "Examples", and
//!   `BenchmarkResult` in its src/extract.ts). One file per direction: the action takes one
//!   `tool` per step.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde_json::Value;

use crate::fsutil::write_atomic;
use crate::gate::Verdict;
use crate::record::{LevelResult, RunResult, TrialMetric, TrialResult};
use crate::report::numbers::{level_interval, LevelInterval};

pub mod bmf;
pub mod csv;
pub mod github_benchmark;
pub mod junit;

/// One export format: a file another tool reads, made from a run (and, from `gate`, its
/// verdict).
pub trait Exporter: Sync {
    /// What the file is, for messages ("Bencher Metric Format JSON").
    fn name(&self) -> &'static str;
    /// The long flag that asks for the file (`--<flag> FILE`); None for a file that is always
    /// written (`summary.csv`, beside `results.json`).
    fn flag(&self) -> Option<&'static str>;
    /// The flag's help, one line without a final period (as clap shows a doc comment).
    fn help(&self) -> &'static str;
    /// The file name's usual extension, without the dot.
    fn extension(&self) -> &'static str;
    /// Whether the file is made from a verdict: its flag is offered by `gate` only.
    fn needs_verdict(&self) -> bool {
        false
    }
    /// The file's bytes.
    fn render(&self, run: &RunResult, verdict: Option<&Verdict>) -> Result<Vec<u8>>;
}

/// Every format, in the order their flags are listed and their files written.
pub static EXPORTERS: &[&dyn Exporter] = &[
    &bmf::Bmf,
    &github_benchmark::BIGGER_IS_BETTER,
    &github_benchmark::SMALLER_IS_BETTER,
    &junit::Junit,
    &csv::SummaryCsv,
];

/// The format asked for by `--<flag>`.
pub fn by_flag(flag: &str) -> Option<&'static dyn Exporter> {
    EXPORTERS.iter().copied().find(|e| e.flag() == Some(flag))
}

/// Writes each asked-for export (format, file) atomically (a dashboard job never reads half
/// a file), in the order asked; returns the files written. The one way a run's export files
/// are written: `bench` and `gate` ask for what their flags name.
pub fn write_exports(
    asked: &[(&'static dyn Exporter, PathBuf)],
    run: &RunResult,
    verdict: Option<&Verdict>,
) -> Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    for (exporter, path) in asked {
        write_one(*exporter, path, run, verdict)?;
        written.push(path.clone());
    }
    Ok(written)
}

/// Writes one export atomically; an error names the flag and the file.
pub fn write_one(
    exporter: &dyn Exporter,
    path: &Path,
    run: &RunResult,
    verdict: Option<&Verdict>,
) -> Result<()> {
    let what = match exporter.flag() {
        Some(flag) => format!("--{flag} {}", path.display()),
        None => path.display().to_string(),
    };
    let bytes = exporter
        .render(run, verdict)
        .with_context(|| format!("{what}: cannot make the {}", exporter.name()))?;
    write_atomic(path, &bytes).with_context(|| format!("{what}: cannot write the file"))
}

/// JSON as every JSON export writes it: pretty, with a final newline.
fn json_bytes(value: &Value) -> Result<Vec<u8>> {
    let mut bytes = serde_json::to_vec_pretty(value)?;
    bytes.push(b'\n');
    Ok(bytes)
}

/// One exported figure of one level.
struct Figure {
    /// BMF measure slug (kebab case, at most 64 characters).
    slug: &'static str,
    /// github-action-benchmark name suffix and unit.
    label: &'static str,
    unit: &'static str,
    bigger_is_better: bool,
    trial: fn(&TrialResult) -> Option<f64>,
}

const FIGURES: [Figure; 6] = [
    Figure {
        slug: "output-tokens-per-second",
        label: "output throughput",
        unit: "tok/s",
        bigger_is_better: true,
        trial: |t| TrialMetric::OutputTokPerS.of(t),
    },
    Figure {
        slug: "requests-per-second",
        label: "request throughput",
        unit: "req/s",
        bigger_is_better: true,
        trial: |t| Some(t.requests_per_s),
    },
    Figure {
        slug: "ttft-p99-ms",
        label: "TTFT p99",
        unit: "ms",
        bigger_is_better: false,
        trial: |t| TrialMetric::TtftP99.of(t),
    },
    Figure {
        slug: "itl-p99-ms",
        label: "ITL p99",
        unit: "ms",
        bigger_is_better: false,
        trial: |t| TrialMetric::ItlP99.of(t),
    },
    Figure {
        slug: "e2e-p99-ms",
        label: "E2E p99",
        unit: "ms",
        bigger_is_better: false,
        trial: |t| TrialMetric::E2eP99.of(t),
    },
    Figure {
        slug: "error-rate",
        label: "error rate",
        unit: "fraction",
        bigger_is_better: false,
        trial: |t| Some(t.error_rate),
    },
];

/// The mean of one figure over a level's measuring trials and its 95% interval.
fn stat(level: &LevelResult, figure: &Figure) -> Option<LevelInterval> {
    let values: Vec<f64> = (level.trials.iter())
        .filter(|t| t.measured())
        .filter_map(figure.trial)
        .filter(|v| v.is_finite())
        .collect();
    level_interval(&values)
}

/// The benchmark's name: the profile and the level, e.g. "chat-short C=16".
fn benchmark_name(run: &RunResult, level: &LevelResult) -> String {
    format!("{} {}", run.profile_name, level.label())
}

/// The gate's throughput ratio (candidate / baseline) of a level, with its bounds.
fn ratio_of(verdict: Option<&Verdict>, level: &LevelResult) -> Option<(f64, f64, f64)> {
    let v = verdict?.levels.iter().find(|l| {
        l.concurrency == level.concurrency && l.metric.is_throughput() && level.rate.is_none()
    })?;
    let r = v.ratio.filter(|r| r.is_finite())?;
    Some((
        r,
        v.ci_low.unwrap_or(f64::NAN),
        v.ci_high.unwrap_or(f64::NAN),
    ))
}

/// A figure rounded to 4 significant digits for a tooltip.
fn short(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    let digits = (3 - v.abs().log10().floor() as i32).max(0) as usize;
    format!("{v:.digits$}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::fake;

    pub(super) fn fixture(name: &str) -> Value {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures/exports")
            .join(name);
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    #[test]
    fn exports_are_written_atomically_where_asked() {
        let dir = tempfile::tempdir().unwrap();
        let run = fake::run(&[(1, &[5.0, 6.0])]);
        let b = dir.path().join("bmf.json");
        let bmf = by_flag("export-bmf").unwrap();
        let written = write_exports(&[(bmf, b.clone())], &run, None).unwrap();
        assert_eq!(written, vec![b.clone()]);
        // Pretty JSON with a final newline, as before the registry.
        let mut want = serde_json::to_vec_pretty(&bmf::bmf(&run, None)).unwrap();
        want.push(b'\n');
        assert_eq!(std::fs::read(&b).unwrap(), want);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn the_registry_has_one_flag_per_format_and_help_for_each() {
        let mut flags: Vec<&str> = EXPORTERS.iter().filter_map(|e| e.flag()).collect();
        assert_eq!(
            flags,
            [
                "export-bmf",
                "export-github-benchmark-bigger",
                "export-github-benchmark-smaller",
                "junit"
            ]
        );
        flags.sort();
        flags.dedup();
        assert_eq!(flags.len(), 4, "a flag names one format");
        for e in EXPORTERS {
            assert!(!e.name().is_empty() && !e.extension().is_empty());
            assert!(
                e.flag().is_none() || !e.help().ends_with('.'),
                "{}",
                e.name()
            );
        }
        // Only JUnit reads a verdict: `bench` offers the others.
        let verdict_only: Vec<&str> = (EXPORTERS.iter())
            .filter(|e| e.needs_verdict())
            .map(|e| e.name())
            .collect();
        assert_eq!(verdict_only, ["JUnit XML"]);
    }

    #[test]
    fn a_format_that_needs_a_verdict_says_so_without_one() {
        let dir = tempfile::tempdir().unwrap();
        let run = fake::run(&[(1, &[5.0, 6.0])]);
        let path = dir.path().join("junit.xml");
        let err = write_one(by_flag("junit").unwrap(), &path, &run, None).unwrap_err();
        let said = format!("{err:#}");
        assert!(
            said.contains("--junit") && said.contains("verdict"),
            "{said}"
        );
        assert!(!path.exists());
    }
}
