//! A run's files: the result JSON (read with its schema version and every figure checked,
//! written atomically with credentials masked) and the summary CSV.

use std::path::Path;

use anyhow::{bail, Context, Result};

use super::text::figure_text;
use super::{redact, RunResult, FIGURE_MAX};
use crate::fsutil::write_atomic;

/// The largest results file read (bytes): per-trial figures, not per-request ones.
pub const RESULTS_FILE_BYTES: u64 = 256 * 1024 * 1024;

/// Version of the result JSON schema written by this build.
pub const SCHEMA_VERSION: u32 = 2;
/// The oldest schema this build still reads (version 1 stored trial flags as bare sentences).
pub const OLDEST_SCHEMA_VERSION: u32 = 1;

impl RunResult {
    /// Reads a result file, refusing schema versions this build does not know.
    pub fn load(path: &Path) -> Result<RunResult> {
        let text = crate::fsutil::read_bounded(path, RESULTS_FILE_BYTES)
            .with_context(|| format!("cannot read results {}", path.display()))?;
        RunResult::from_text(&text, &path.display().to_string())
    }

    /// A results file's text, read as [`RunResult::load`] reads a file (schema version,
    /// figures, accounting, then the analysis computed afresh); `origin` names it in errors.
    pub fn from_text(text: &str, origin: &str) -> Result<RunResult> {
        let value: serde_json::Value = serde_json::from_str(text)
            .with_context(|| format!("results {} is not valid JSON", origin))?;
        match value.get("schema_version").and_then(|v| v.as_u64()) {
            Some(v) if (OLDEST_SCHEMA_VERSION as u64..=SCHEMA_VERSION as u64).contains(&v) => {}
            Some(v) => bail!(
                "results {}: field `schema_version` is {v}, this build reads versions \
                 {OLDEST_SCHEMA_VERSION} to {SCHEMA_VERSION}; use a matching throughline version",
                origin
            ),
            None => bail!(
                "results {}: field `schema_version` is missing; is this a throughline results file?",
                origin
            ),
        }
        let mut de = serde_json::Deserializer::from_str(text);
        let mut result: RunResult = serde_path_to_error::deserialize(&mut de).map_err(|e| {
            anyhow::anyhow!("results {}: field `{}`: {}", origin, e.path(), e.inner())
        })?;
        let base_levels = result.base.iter().flat_map(|b| &b.levels);
        for (arm, level) in
            (result.levels.iter().map(|l| ("", l))).chain(base_levels.map(|l| ("base arm ", l)))
        {
            for t in &level.trials {
                if let Some((field, v)) = t.bad_figure() {
                    bail!(
                        "results {}: {arm}level {} trial {}: field `{field}` is {}, not a \
                         number from 0 to {FIGURE_MAX:e}",
                        origin,
                        level.label(),
                        t.trial,
                        figure_text(v)
                    );
                }
            }
        }
        // Telemetry values no server could have had (a negative gauge, a cache over 100%)
        // are dropped and counted, as they are when scraped: never shown from a file.
        let base_levels = result.base.iter_mut().flat_map(|b| b.levels.iter_mut());
        for level in result.levels.iter_mut().chain(base_levels) {
            for t in &mut level.trials {
                for e in t.telemetry.iter_mut().flat_map(|t| t.endpoints.iter_mut()) {
                    e.drop_impossible();
                }
            }
        }
        for level in &result.levels {
            for t in &level.trials {
                if !t.is_accounted() {
                    bail!(
                        "results {}: level {} trial {}: {} sent but {} succeeded + {} failed",
                        origin,
                        level.label(),
                        t.trial,
                        t.requests_sent,
                        t.succeeded,
                        t.failed_total()
                    );
                }
            }
        }
        // Read into this version's types: saved again, it is a file of this version.
        result.schema_version = SCHEMA_VERSION;
        // Derived from the levels: never trusted over them (a file may be old or edited).
        result.analyse();
        Ok(result)
    }

    /// Writes the result JSON atomically (temporary file, then rename).
    /// Endpoints are stored with their credentials masked (redact.rs).
    pub fn save(&self, path: &Path) -> Result<()> {
        let endpoints = &self.profile.target.endpoints;
        let masked: Vec<String> = endpoints.iter().map(|e| redact::redact_url(e)).collect();
        let text = if masked == *endpoints {
            serde_json::to_string_pretty(self)?
        } else {
            let mut copy = self.clone();
            copy.profile.target.endpoints = masked;
            serde_json::to_string_pretty(&copy)?
        };
        write_atomic(path, text.as_bytes())
    }

    /// Writes `summary_csv` atomically.
    pub fn save_csv(&self, path: &Path) -> Result<()> {
        write_atomic(path, &self.summary_csv()?)
    }

    /// One CSV row per trial (report/export/csv.rs lists the format).
    pub fn summary_csv(&self) -> Result<Vec<u8>> {
        let mut w = csv::Writer::from_writer(Vec::new());
        w.write_record([
            "concurrency",
            "rate",
            "trial",
            "requests_sent",
            "succeeded",
            "failed",
            "error_rate",
            "output_tokens",
            "window_s",
            "output_tok_per_s",
            "requests_per_s",
            "per_request_tok_per_s",
            "ttft_p50_ms",
            "ttft_p99_ms",
            "itl_p50_ms",
            "itl_p99_ms",
            "tpot_p50_ms",
            "e2e_p50_ms",
            "e2e_p99_ms",
        ])?;
        let opt = |v: Option<f64>| v.map(|x| format!("{x:.3}")).unwrap_or_default();
        for level in &self.levels {
            for t in &level.trials {
                w.write_record([
                    level.concurrency.to_string(),
                    level.rate.map(|r| format!("{r}")).unwrap_or_default(),
                    t.trial.to_string(),
                    t.requests_sent.to_string(),
                    t.succeeded.to_string(),
                    t.failed_total().to_string(),
                    format!("{:.4}", t.error_rate),
                    t.output_tokens.to_string(),
                    format!("{:.3}", t.window_s),
                    format!("{:.3}", t.output_tok_per_s),
                    format!("{:.4}", t.requests_per_s),
                    opt(t.per_request_tok_per_s),
                    opt(t.ttft_ms.as_ref().map(|p| p.p50)),
                    opt(t.ttft_ms.as_ref().map(|p| p.p99)),
                    opt(t.itl_ms.as_ref().map(|p| p.p50)),
                    opt(t.itl_ms.as_ref().map(|p| p.p99)),
                    opt(t.tpot_ms.as_ref().map(|p| p.p50)),
                    opt(t.e2e_ms.as_ref().map(|p| p.p50)),
                    opt(t.e2e_ms.as_ref().map(|p| p.p99)),
                ])?;
            }
        }
        w.into_inner().map_err(|e| anyhow::anyhow!("{e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::telemetry::{Counting, EndpointSeries, Sample, TrialTelemetry};

    /// A results file whose telemetry holds a cache 200% full below zero is read with that
    /// value dropped and counted, not refused (the figures the gate reads are elsewhere).
    #[test]
    fn impossible_telemetry_in_a_file_is_dropped_and_counted() {
        let mut run = crate::record::fake::run(&[(1, &[100.0, 101.0])]);
        let sample = |cache: f64| Sample {
            t: 1.0,
            running: Some(2.0),
            waiting: Some(-4.0),
            cache_usage: Some(cache),
            cache_usage_ranks: None,
            generated_tokens_total: None,
            preemptions_total: None,
        };
        run.levels[0].trials[0].telemetry = Some(TrialTelemetry {
            engine: "vllm".into(),
            counting: Counting::PerToken,
            endpoints: vec![EndpointSeries {
                endpoint: 0,
                samples: vec![sample(-2.0), sample(0.5)],
                failed_scrapes: 0,
                cut_scrapes: 0,
                invalid_values: 0,
                dropped_samples: 0,
            }],
            server_tokens: None,
            client_tokens: None,
            window_s: None,
            disagreement: None,
            saturation: Vec::new(),
        });
        let text = serde_json::to_string(&run).unwrap();
        let read = RunResult::from_text(&text, "test").unwrap();
        let e = &read.levels[0].trials[0]
            .telemetry
            .as_ref()
            .unwrap()
            .endpoints[0];
        assert_eq!(e.invalid_values, 3, "two waiting, one cache");
        assert_eq!(e.samples[0].cache_usage, None);
        assert_eq!(e.samples[1].cache_usage, Some(0.5));
        assert_eq!(e.samples[1].running, Some(2.0));
    }
}
