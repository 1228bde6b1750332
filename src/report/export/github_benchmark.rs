//! github-action-benchmark's custom JSON, one file per direction (the action takes one
//! `tool` per step): `customBiggerIsBetter` (throughputs, and the gate's ratio) and
//! `customSmallerIsBetter` (latencies, error rate).

use anyhow::Result;
use serde::Serialize;

use super::{benchmark_name, json_bytes, ratio_of, short, stat, Exporter, FIGURES};
use crate::gate::Verdict;
use crate::record::RunResult;

/// One direction's file.
pub struct GithubBenchmark {
    bigger_is_better: bool,
}

/// `--export-github-benchmark-bigger FILE`.
pub const BIGGER_IS_BETTER: GithubBenchmark = GithubBenchmark {
    bigger_is_better: true,
};
/// `--export-github-benchmark-smaller FILE`.
pub const SMALLER_IS_BETTER: GithubBenchmark = GithubBenchmark {
    bigger_is_better: false,
};

impl Exporter for GithubBenchmark {
    fn name(&self) -> &'static str {
        match self.bigger_is_better {
            true => "github-action-benchmark customBiggerIsBetter JSON",
            false => "github-action-benchmark customSmallerIsBetter JSON",
        }
    }
    fn flag(&self) -> Option<&'static str> {
        Some(match self.bigger_is_better {
            true => "export-github-benchmark-bigger",
            false => "export-github-benchmark-smaller",
        })
    }
    fn help(&self) -> &'static str {
        match self.bigger_is_better {
            true => {
                "Write throughputs (and the gate's ratio) as github-action-benchmark \
                 `customBiggerIsBetter` JSON"
            }
            false => {
                "Write latencies and the error rate as github-action-benchmark \
                 `customSmallerIsBetter` JSON"
            }
        }
    }
    fn extension(&self) -> &'static str {
        "json"
    }
    fn render(&self, run: &RunResult, verdict: Option<&Verdict>) -> Result<Vec<u8>> {
        json_bytes(&serde_json::to_value(github_benchmark(
            run,
            verdict,
            self.bigger_is_better,
        ))?)
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::fake;
    use crate::report::export::tests::fixture;
    use serde_json::{json, Value};

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

    #[test]
    fn the_checker_accepts_the_published_example_and_refuses_broken_ones() {
        check_github(&fixture("github-action-benchmark-example.json")).unwrap();
        assert!(check_github(&json!([{"name": "a", "unit": "x", "value": "1"}])).is_err());
        assert!(check_github(&json!([{"name": "a", "value": 1}])).is_err());
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
}
