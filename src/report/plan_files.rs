//! The plan's files: plan.json (bounds that say nothing written as null) and the capacity
//! chart (days on one node, days against node count, the deadline). Apart from the console
//! text (report/plan.rs), which only reads the plan.

use std::path::Path;

use anyhow::Result;

use crate::plan::answer::Plan;
use crate::plan::figures::SECONDS_PER_DAY;
use crate::plan::workload::human_duration;

use super::plots::{capacity_chart, CapacityPoint, CapacitySeries};

/// `1234567.8` as `1,234,568`.
pub fn thousands(x: f64) -> String {
    if !x.is_finite() {
        return "-".to_string();
    }
    let s = format!("{:.0}", x.abs());
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if x < 0.0 {
        format!("-{out}")
    } else {
        out
    }
}

/// Whose prices: the built-in catalog's are illustrative; a catalog of one's own is not.
pub(super) fn prices_said(plan: &Plan) -> &'static str {
    match plan.catalog == crate::plan::catalog::BUILTIN_NAME {
        true => "illustrative prices",
        false => "your catalog's prices",
    }
}

/// The plan as JSON.
pub fn render_json(plan: &Plan) -> String {
    let mut value = serde_json::to_value(plan).expect("a plan serializes");
    if let Some(nodes) = value.get_mut("nodes").and_then(|n| n.as_array_mut()) {
        for node in nodes {
            let unknown = node.pointer("/interval/known") == Some(&serde_json::Value::Bool(false));
            if unknown {
                null_degenerate_bounds(node);
            }
        }
    }
    serde_json::to_string_pretty(&value).expect("a plan serializes")
}

/// In a row whose interval is unknown, every {p10, p50, p90} with p10 = p50 = p90 carries
/// no spread: its p10 and p90 become null, so that no reader takes them for a measured
/// interval of zero width. A claim's range (p10 and p90 at its ends) stays.
fn null_degenerate_bounds(value: &mut serde_json::Value) {
    use serde_json::Value;
    match value {
        Value::Object(map) => {
            let q = |k: &str| map.get(k).and_then(Value::as_f64);
            if let (Some(a), Some(b), Some(c)) = (q("p10"), q("p50"), q("p90")) {
                if a == b && b == c {
                    map.insert("p10".into(), Value::Null);
                    map.insert("p90".into(), Value::Null);
                }
            }
            for v in map.values_mut() {
                null_degenerate_bounds(v);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(null_degenerate_bounds),
        _ => {}
    }
}

/// Node counts the chart shows: 1 up to at least 8, and past the deadline's need.
fn node_counts(plan: &Plan) -> Vec<f64> {
    let need = plan
        .nodes
        .iter()
        .filter_map(|n| n.deadline.as_ref().map(|d| d.nodes_p90))
        .max()
        .unwrap_or(1);
    let top = need.clamp(8, 256);
    let mut counts: Vec<u32> = vec![1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256];
    counts.retain(|c| *c <= top);
    if !counts.contains(&top) {
        counts.push(top);
    }
    counts.into_iter().map(f64::from).collect()
}

/// One series per node type: days with n nodes = days on one node / n (the job splits into
/// independent requests, so nodes add throughput).
pub fn capacity_series(plan: &Plan) -> Vec<CapacitySeries> {
    let counts = node_counts(plan);
    plan.nodes
        .iter()
        .map(|n| {
            // An unknown interval draws no band (and says so in the legend) rather than one
            // that looks like a measured spread.
            let days = if n.interval.known {
                n.days
            } else {
                crate::plan::figures::Quantiles::single(n.days.p50)
            };
            CapacitySeries {
                name: if n.interval.known {
                    n.label()
                } else {
                    format!("{}, {}", n.label(), crate::report::plots::UNKNOWN_INTERVAL)
                },
                points: counts
                    .iter()
                    .map(|&k| CapacityPoint {
                        nodes: k,
                        days_p10: days.p10 / k,
                        days_p50: days.p50 / k,
                        days_p90: days.p90 / k,
                    })
                    .collect(),
            }
        })
        .collect()
}

/// A count in words a reader takes in at once: "1.64 billion", "902,087", "512".
pub fn plain_count(x: f64) -> String {
    if !x.is_finite() {
        return "-".to_string();
    }
    for (scale, word) in [(1e12, "trillion"), (1e9, "billion"), (1e6, "million")] {
        if x.abs() >= scale {
            let v = x / scale;
            let digits = if v.abs() >= 100.0 {
                0
            } else if v.abs() >= 10.0 {
                1
            } else {
                2
            };
            return format!("{v:.digits$} {word}");
        }
    }
    thousands(x)
}

/// The chart's title: what is projected, in plain words.
pub fn capacity_title(plan: &Plan) -> String {
    let w = &plan.workload;
    let completions = w
        .completions
        .map(|c| format!(" ({} completions)", thousands(c)))
        .unwrap_or_default();
    format!(
        "Days to generate {} output tokens{completions}",
        plain_count(w.output_tokens)
    )
}

/// Writes `capacity.png` for `plan`: the title in plain words, the deadline when set.
pub fn write_capacity_chart(plan: &Plan, png: &Path) -> Result<()> {
    let footer = format!(
        "throughline plan; {}{}; {}",
        plan.results
            .as_deref()
            .map(|r| format!("from {r} and "))
            .unwrap_or_default(),
        plan.catalog,
        prices_said(plan)
    );
    let deadline = plan.limits.deadline_s.map(|s| s / SECONDS_PER_DAY);
    capacity_chart(
        &capacity_series(plan),
        &capacity_title(plan),
        &footer,
        deadline,
        png,
    )
}

/// Writes plan.json (`json`, the plan rendered) and capacity.png into `dir`, saying so on
/// stderr (standard output may be the plan's JSON).
pub fn write_plan_files(plan: &Plan, json: &str, dir: &Path) -> Result<()> {
    crate::fsutil::ensure_output_dir(dir)?;
    let json_path = dir.join("plan.json");
    crate::fsutil::write_atomic(&json_path, json.as_bytes())?;
    let png = dir.join(crate::report::plots::CAPACITY_PNG);
    write_capacity_chart(plan, &png)?;
    eprintln!(
        "plan: {} and {}{}",
        json_path.display(),
        png.display(),
        plan.limits
            .deadline_s
            .map(|d| format!(" (deadline {})", human_duration(d)))
            .unwrap_or_default()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_in_words() {
        assert_eq!(plain_count(1_640_000_000.0), "1.64 billion");
        assert_eq!(plain_count(1_639_994_166.0), "1.64 billion");
        assert_eq!(plain_count(12_500_000.0), "12.5 million");
        assert_eq!(plain_count(902_087.0), "902,087");
        assert_eq!(plain_count(3.2e12), "3.20 trillion");
    }
}
