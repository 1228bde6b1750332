//! PLACEHOLDER (replaced by the stats branch): percentiles and spreads.
use serde::{Deserialize, Serialize};

pub fn percentile(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let pos = q / 100.0 * (sorted.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    Some(sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64))
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Percentiles {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub mean: f64,
    pub min: f64,
    pub max: f64,
    pub count: u64,
}

impl Percentiles {
    pub fn from_values(values: &mut Vec<f64>) -> Option<Percentiles> {
        values.retain(|v| !v.is_nan());
        values.sort_by(|a, b| a.partial_cmp(b).unwrap());
        Some(Percentiles {
            p50: percentile(values, 50.0)?,
            p90: percentile(values, 90.0)?,
            p99: percentile(values, 99.0)?,
            mean: values.iter().sum::<f64>() / values.len() as f64,
            min: values[0],
            max: values[values.len() - 1],
            count: values.len() as u64,
        })
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Spread {
    pub n: usize,
    pub mean: f64,
    pub sd: f64,
    pub cv: f64,
    pub min: f64,
    pub max: f64,
    pub geo_mean: f64,
}

impl Spread {
    pub fn of(values: &[f64]) -> Option<Spread> {
        if values.is_empty() {
            return None;
        }
        let n = values.len();
        let mean = values.iter().sum::<f64>() / n as f64;
        let sd = if n > 1 {
            (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
        } else {
            0.0
        };
        Some(Spread {
            n,
            mean,
            sd,
            cv: if mean != 0.0 { sd / mean } else { 0.0 },
            min: values.iter().cloned().fold(f64::INFINITY, f64::min),
            max: values.iter().cloned().fold(f64::NEG_INFINITY, f64::max),
            geo_mean: (values.iter().map(|v| v.ln()).sum::<f64>() / n as f64).exp(),
        })
    }
}
