//! Exports for the dashboards teams already run: Bencher Metric Format (BMF) JSON and
//! github-action-benchmark's `customBiggerIsBetter` / `customSmallerIsBetter` JSON.
//!
//! Every figure is a mean over the level's trials that measured something (as the gate
//! compares them), with its two-sided 95% Student-t interval across trials where there are
//! two or more: trials are the replicates, never requests. A figure the run does not have is
//! left out, never written as zero.
//!
//! Formats, as published (examples in `fixtures/exports/`):
//! - BMF: `{ "<benchmark>": { "<measure slug>": { "value", "lower_value"?, "upper_value"? } } }`
//!   (bencher.dev/docs/reference/bencher-metric-format, schema bencher.dev/bmf.json).
//! - github-action-benchmark custom tools: `[ { "name", "unit", "value", "range"?, "extra"? } ]`,
//!   with `value` a number and `range`/`extra` strings (README, "Examples", and
//!   `BenchmarkResult` in its src/extract.ts). One file per direction: the action takes one
//!   `tool` per step.

use std::path::Path;

use anyhow::Result;
use serde::Serialize;
use serde_json::{json, Map, Value};

use crate::fsutil::write_atomic;
use crate::gate::Verdict;
use crate::record::{LevelResult, RunResult, TrialMetric, TrialResult};
use crate::stats::mean_ci95;

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
struct Stat {
    mean: f64,
    ci: Option<(f64, f64)>,
    n: usize,
}

fn stat(level: &LevelResult, figure: &Figure) -> Option<Stat> {
    let values: Vec<f64> = (level.trials.iter())
        .filter(|t| t.succeeded > 0)
        .filter_map(figure.trial)
        .filter(|v| v.is_finite())
        .collect();
    let m = mean_ci95(&values)?;
    Some(Stat {
        mean: m.mean,
        ci: m.ci.filter(|(lo, hi)| lo.is_finite() && hi.is_finite()),
        n: values.len(),
    })
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

/// BMF JSON of a run (and of the verdict's throughput ratios, from `gate`).
pub fn bmf(run: &RunResult, verdict: Option<&Verdict>) -> Value {
    let mut out = Map::new();
    for level in &run.levels {
        let mut measures = Map::new();
        for f in &FIGURES {
            let Some(s) = stat(level, f) else { continue };
            let mut m = Map::new();
            m.insert("value".into(), json!(s.mean));
            if let Some((lo, hi)) = s.ci {
                m.insert("lower_value".into(), json!(lo));
                m.insert("upper_value".into(), json!(hi));
            }
            measures.insert(f.slug.into(), Value::Object(m));
        }
        if let Some((r, lo, hi)) = ratio_of(verdict, level) {
            let mut m = Map::new();
            m.insert("value".into(), json!(r));
            if lo.is_finite() && hi.is_finite() {
                m.insert("lower_value".into(), json!(lo));
                m.insert("upper_value".into(), json!(hi));
            }
            measures.insert("throughput-ratio".into(), Value::Object(m));
        }
        if !measures.is_empty() {
            out.insert(benchmark_name(run, level), Value::Object(measures));
        }
    }
    Value::Object(out)
}

/// One entry of github-action-benchmark's custom JSON.
#[derive(Debug, Serialize, PartialEq)]
pub struct GithubBench {
    pub name: String,
    pub unit: String,
    pub value: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub range: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extra: Option<String>,
}

/// github-action-benchmark entries of one direction: `bigger_is_better` true for
/// `customBiggerIsBetter` (throughputs, and the gate's ratio), false for
/// `customSmallerIsBetter` (latencies, error rate).
pub fn github_benchmark(
    run: &RunResult,
    verdict: Option<&Verdict>,
    bigger_is_better: bool,
) -> Vec<GithubBench> {
    let mut out = Vec::new();
    for level in &run.levels {
        let name = benchmark_name(run, level);
        for f in FIGURES
            .iter()
            .filter(|f| f.bigger_is_better == bigger_is_better)
        {
            let Some(s) = stat(level, f) else { continue };
            out.push(GithubBench {
                name: format!("{name} {}", f.label),
                unit: f.unit.into(),
                value: s.mean,
                range: s.ci.map(|(lo, hi)| format!("± {}", short((hi - lo) / 2.0))),
                extra: Some(match s.ci {
                    Some((lo, hi)) => format!(
                        "mean of {} trials\n95% interval {} to {}",
                        s.n,
                        short(lo),
                        short(hi)
                    ),
                    None => format!("mean of {} trial(s), no interval", s.n),
                }),
            });
        }
        if bigger_is_better {
            if let Some((r, lo, hi)) = ratio_of(verdict, level) {
                let bounds = lo.is_finite() && hi.is_finite();
                out.push(GithubBench {
                    name: format!("{name} throughput ratio (this run / baseline)"),
                    unit: "ratio".into(),
                    value: r,
                    range: None,
                    extra: bounds
                        .then(|| format!("gate's interval {} to {}", short(lo), short(hi))),
                });
            }
        }
    }
    out
}

/// A figure rounded to 4 significant digits for a tooltip.
fn short(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    let digits = (3 - v.abs().log10().floor() as i32).max(0) as usize;
    format!("{v:.digits$}")
}

/// Which exports to write (each `None` is skipped).
#[derive(Debug, Clone, Default)]
pub struct ExportFiles<'a> {
    pub bmf: Option<&'a Path>,
    pub github_bigger: Option<&'a Path>,
    pub github_smaller: Option<&'a Path>,
}

/// Writes the asked-for exports, each atomically (a dashboard job never reads half a file).
pub fn write_exports(
    files: &ExportFiles,
    run: &RunResult,
    verdict: Option<&Verdict>,
) -> Result<Vec<std::path::PathBuf>> {
    let mut written = Vec::new();
    let mut put = |path: Option<&Path>, value: Value| -> Result<()> {
        if let Some(p) = path {
            let mut bytes = serde_json::to_vec_pretty(&value)?;
            bytes.push(b'\n');
            write_atomic(p, &bytes)?;
            written.push(p.to_path_buf());
        }
        Ok(())
    };
    put(files.bmf, bmf(run, verdict))?;
    put(
        files.github_bigger,
        serde_json::to_value(github_benchmark(run, verdict, true))?,
    )?;
    put(
        files.github_smaller,
        serde_json::to_value(github_benchmark(run, verdict, false))?,
    )?;
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::fake;

    /// The published BMF example (fixtures/exports/bmf-example.json) against the schema's
    /// rules, so the checker below is known to accept what Bencher accepts.
    fn check_bmf(v: &Value) -> Result<(), String> {
        let benchmarks = v.as_object().ok_or("top level is not an object")?;
        for (name, measures) in benchmarks {
            if name.is_empty() || name.len() > 1024 {
                return Err(format!("benchmark name {name:?} length"));
            }
            let measures = measures
                .as_object()
                .ok_or(format!("{name}: not an object"))?;
            for (slug, metric) in measures {
                if slug.is_empty() || slug.len() > 64 {
                    return Err(format!("measure {slug:?} length"));
                }
                let metric = metric.as_object().ok_or(format!("{slug}: not an object"))?;
                if !metric.get("value").is_some_and(Value::is_number) {
                    return Err(format!("{name}/{slug}: value missing or not a number"));
                }
                for (k, x) in metric {
                    if !["value", "lower_value", "upper_value"].contains(&k.as_str()) {
                        continue;
                    }
                    if !x.is_number() {
                        return Err(format!("{name}/{slug}/{k}: not a number"));
                    }
                }
            }
        }
        Ok(())
    }

    /// github-action-benchmark's `BenchmarkResult`: name, unit strings; value a number;
    /// range, extra optional strings; a non-empty array.
    fn check_github(v: &Value) -> Result<(), String> {
        let list = v.as_array().ok_or("top level is not an array")?;
        if list.is_empty() {
            return Err("no benchmark".into());
        }
        for e in list {
            let o = e.as_object().ok_or("entry is not an object")?;
            for k in ["name", "unit"] {
                if !o.get(k).is_some_and(Value::is_string) {
                    return Err(format!("{k} missing or not a string: {e}"));
                }
            }
            if !o.get("value").is_some_and(Value::is_number) {
                return Err(format!("value missing or not a number: {e}"));
            }
            for k in ["range", "extra"] {
                if o.get(k).is_some_and(|x| !x.is_string()) {
                    return Err(format!("{k} not a string: {e}"));
                }
            }
        }
        Ok(())
    }

    fn fixture(name: &str) -> Value {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures/exports")
            .join(name);
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    #[test]
    fn the_checkers_accept_the_published_examples_and_refuse_broken_ones() {
        check_bmf(&fixture("bmf-example.json")).unwrap();
        check_github(&fixture("github-action-benchmark-example.json")).unwrap();
        assert!(check_bmf(&json!({"b": {"latency": {"lower_value": 1.0}}})).is_err());
        assert!(check_bmf(&json!({"b": {"latency": {"value": "1"}}})).is_err());
        assert!(check_github(&json!([{"name": "a", "unit": "x", "value": "1"}])).is_err());
        assert!(check_github(&json!([{"name": "a", "value": 1}])).is_err());
    }

    #[test]
    fn bmf_has_the_mean_and_interval_of_the_trials() {
        let run = fake::run(&[(1, &[100.0, 110.0, 90.0]), (4, &[300.0])]);
        let v = bmf(&run, None);
        check_bmf(&v).unwrap();
        let tput = &v["fake C=1"]["output-tokens-per-second"];
        assert_eq!(tput["value"], json!(100.0));
        // t(0.975, 2) = 4.3027; sd 10; half-width 4.3027 * 10 / sqrt(3) = 24.84.
        let lo = tput["lower_value"].as_f64().unwrap();
        assert!((lo - (100.0 - 24.842)).abs() < 0.01, "{lo}");
        // One trial: a value without an interval, never a made-up one.
        let one = &v["fake C=4"]["output-tokens-per-second"];
        assert_eq!(one["value"], json!(300.0));
        assert!(one.get("lower_value").is_none());
        // The fake trials have no latencies: left out, never zero.
        assert!(v["fake C=1"].get("ttft-p99-ms").is_none());
    }

    #[test]
    fn github_benchmark_splits_by_direction() {
        let run = fake::run(&[(2, &[10.0, 12.0])]);
        let bigger = serde_json::to_value(github_benchmark(&run, None, true)).unwrap();
        let smaller = serde_json::to_value(github_benchmark(&run, None, false)).unwrap();
        check_github(&bigger).unwrap();
        check_github(&smaller).unwrap();
        let names: Vec<&str> = (bigger.as_array().unwrap().iter())
            .map(|e| e["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            ["fake C=2 output throughput", "fake C=2 request throughput"]
        );
        assert_eq!(bigger[0]["value"], json!(11.0));
        assert!(smaller
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["name"].as_str().unwrap().ends_with("error rate")));
    }

    #[test]
    fn exports_are_written_atomically_where_asked() {
        let dir = tempfile::tempdir().unwrap();
        let run = fake::run(&[(1, &[5.0, 6.0])]);
        let b = dir.path().join("bmf.json");
        let written = write_exports(
            &ExportFiles {
                bmf: Some(&b),
                ..Default::default()
            },
            &run,
            None,
        )
        .unwrap();
        assert_eq!(written, vec![b.clone()]);
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&b).unwrap()).unwrap();
        check_bmf(&v).unwrap();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
