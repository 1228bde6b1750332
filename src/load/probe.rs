//! Looking at the server(s) before measuring: reachable, which model, which engine.
//!
//! A sweep against a server that is not there would only produce a table of connection
//! errors; the probe stops it up front with a message that says which endpoint and why.

use std::time::Duration;

use anyhow::{bail, Result};
use serde_json::Value;

use super::body::base_url;
use super::client::error_chain;

/// What the probe learned.
#[derive(Debug, Clone, Default)]
pub struct ProbeReport {
    /// The model ids the first endpoint serves.
    pub models: Vec<String>,
    /// The engine recognised from `/metrics`, when there is one.
    pub engine: Option<String>,
}

/// Checks every endpoint answers `/v1/models`; reads the model list and the engine.
pub async fn probe(client: &reqwest::Client, endpoints: &[String]) -> Result<ProbeReport> {
    let mut report = ProbeReport::default();
    for (i, endpoint) in endpoints.iter().enumerate() {
        let url = format!("{}/v1/models", base_url(endpoint));
        let response = client
            .get(&url)
            .timeout(Duration::from_secs(10))
            .send()
            .await;
        let response = match response {
            Ok(r) => r,
            Err(e) => bail!(
                "cannot reach the server at {endpoint} ({url}): {}",
                error_chain(&e)
            ),
        };
        if !response.status().is_success() {
            bail!(
                "the server at {endpoint} answered {} to GET {url}",
                response.status()
            );
        }
        if i == 0 {
            let body: Value = response.json().await.unwrap_or(Value::Null);
            report.models = body
                .get("data")
                .and_then(Value::as_array)
                .map(|list| {
                    list.iter()
                        .filter_map(|m| m.get("id").and_then(Value::as_str).map(str::to_string))
                        .collect()
                })
                .unwrap_or_default();
            report.engine = detect_engine(client, endpoint).await;
        }
    }
    Ok(report)
}

async fn detect_engine(client: &reqwest::Client, endpoint: &str) -> Option<String> {
    let url = format!("{}/metrics", base_url(endpoint));
    let text = client
        .get(url)
        .timeout(Duration::from_secs(5))
        .send()
        .await
        .ok()?
        .text()
        .await
        .ok()?;
    engine_from_metrics(&text).map(str::to_string)
}

/// Recognises an engine by the metric names it exports.
pub fn engine_from_metrics(text: &str) -> Option<&'static str> {
    [
        ("vllm:", "vllm"),
        ("sglang:", "sglang"),
        ("llamacpp:", "llama.cpp"),
        ("tgi_", "tgi"),
        ("throughline_sim_", "throughline-sim"),
    ]
    .into_iter()
    .find(|(prefix, _)| {
        text.lines()
            .any(|l| !l.starts_with('#') && l.starts_with(prefix))
    })
    .map(|(_, name)| name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_engines() {
        assert_eq!(
            engine_from_metrics("# HELP x\nvllm:num_requests_running 3\n"),
            Some("vllm")
        );
        assert_eq!(
            engine_from_metrics("sglang:num_queue_reqs 0"),
            Some("sglang")
        );
        assert_eq!(
            engine_from_metrics("# vllm: only in a comment\nfoo 1"),
            None
        );
    }
}
