//! Bencher Metric Format JSON: per level, each figure's mean and 95% interval over trials,
//! and the gate's throughput ratio with its bounds.

use anyhow::Result;
use serde_json::{json, Map, Value};

use super::{benchmark_name, json_bytes, ratio_of, stat, Exporter, FIGURES};
use crate::gate::Verdict;
use crate::record::RunResult;

/// `--export-bmf FILE`.
pub struct Bmf;

impl Exporter for Bmf {
    fn name(&self) -> &'static str {
        "Bencher Metric Format JSON"
    }
    fn flag(&self) -> Option<&'static str> {
        Some("export-bmf")
    }
    fn help(&self) -> &'static str {
        "Write the per-level means and 95% intervals as Bencher Metric Format JSON"
    }
    fn extension(&self) -> &'static str {
        "json"
    }
    fn render(&self, run: &RunResult, verdict: Option<&Verdict>) -> Result<Vec<u8>> {
        json_bytes(&bmf(run, verdict))
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::fake;
    use crate::report::export::tests::fixture;

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

    #[test]
    fn the_checker_accepts_the_published_example_and_refuses_broken_ones() {
        check_bmf(&fixture("bmf-example.json")).unwrap();
        assert!(check_bmf(&json!({"b": {"latency": {"lower_value": 1.0}}})).is_err());
        assert!(check_bmf(&json!({"b": {"latency": {"value": "1"}}})).is_err());
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
}
