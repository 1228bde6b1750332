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
    /// The telemetry metrics of that engine the first endpoint exports (see telemetry.rs).
    pub metrics: Vec<&'static str>,
}

/// Checks every endpoint answers `/v1/models`; reads the model list and the engine.
pub async fn probe(client: &reqwest::Client, endpoints: &[String]) -> Result<ProbeReport> {
    let mut report = ProbeReport::default();
    for (i, endpoint) in endpoints.iter().enumerate() {
        check_health(client, endpoint).await?;
        let url = format!("{}/v1/models", base_url(endpoint));
        let response = client
            .get(&url)
            .timeout(Duration::from_secs(10))
            .send()
            .await;
        let response = match response {
            Ok(r) => r,
            Err(e) => {
                let why = error_chain(&e);
                // rustls says "invalid peer certificate: UnknownIssuer" and no more.
                let hint = if why.contains("certificate") {
                    "; if its certificate is signed by a private CA, name the CA's PEM file in \
                     SSL_CERT_FILE"
                } else {
                    ""
                };
                bail!("cannot reach the server at {endpoint} ({url}): {why}{hint}")
            }
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
            if let Some(text) = metrics_text(client, endpoint).await {
                report.engine = engine_from_metrics(&text).map(str::to_string);
                if let Some(a) = report.engine.as_deref().and_then(super::telemetry::adapter) {
                    report.metrics = a.present(&text);
                }
            }
        }
    }
    Ok(report)
}

/// `GET /health`: a server that says it is not ready (llama.cpp answers 503 while it loads
/// the model) is refused up front. Servers without the route (404) or unreachable ones are
/// left to the `/v1/models` check, which names the problem.
async fn check_health(client: &reqwest::Client, endpoint: &str) -> Result<()> {
    let url = format!("{}/health", base_url(endpoint));
    let Ok(response) = client
        .get(&url)
        .timeout(Duration::from_secs(10))
        .send()
        .await
    else {
        return Ok(());
    };
    let status = response.status();
    if status.is_server_error() {
        let body = response.text().await.unwrap_or_default();
        bail!(
            "the server at {endpoint} is not ready: GET {url} answered {status} {}",
            super::chunk::clip(body.trim())
        );
    }
    Ok(())
}

async fn metrics_text(client: &reqwest::Client, endpoint: &str) -> Option<String> {
    let url = format!("{}/metrics", base_url(endpoint));
    let response = client
        .get(url)
        .timeout(Duration::from_secs(5))
        .send()
        .await
        .ok()?;
    if !response.status().is_success() {
        return None;
    }
    response.text().await.ok()
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
