//! What a server says about itself, for a profile: the models it lists, its engine (from
//! the names of its `/metrics`) and the context length it reports. `init` writes it into
//! the profile; `bench` without a profile measures the first model listed.

use anyhow::Result;
use serde_json::Value;

use crate::load::probe;
use crate::load::stream::client::{self, read_capped, MAX_PROBE_BODY};
use crate::load::wire::body::base_url;
use crate::profile::Profile;

/// What the probe learned of a server, for a profile.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Discovery {
    pub models: Vec<String>,
    /// Recognised from the names of its `/metrics` (load/probe.rs).
    pub engine: Option<String>,
    /// The context length the server reports for the first model, with the field it came
    /// from.
    pub max_context: Option<(u64, &'static str)>,
}

/// Probes the profile's first endpoint (with the profile's API key, if any).
pub async fn discover(profile: &Profile) -> Result<Discovery> {
    let key = client::api_key_header(profile)?;
    let http = client::build_probe_client(key.as_ref())?;
    let endpoint = &profile.target.endpoints[0];
    let report = probe::probe(
        &http,
        std::slice::from_ref(endpoint),
        profile.target.api_key_env.as_deref(),
    )
    .await?;
    let max_context = match report.models.first() {
        Some(model) => models_body(&http, endpoint)
            .await
            .and_then(|body| max_context(&body, model)),
        None => None,
    };
    Ok(Discovery {
        models: report.models,
        engine: report.engine.map(|e| e.name().to_string()),
        max_context,
    })
}

/// `/v1/models` as JSON (the probe reads only the ids).
async fn models_body(http: &reqwest::Client, endpoint: &str) -> Option<Value> {
    let url = format!("{}/v1/models", base_url(endpoint));
    let response = http
        .get(url)
        .timeout(std::time::Duration::from_secs(10))
        .send()
        .await
        .ok()?;
    let bytes = read_capped(response, MAX_PROBE_BODY).await.ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// The context length of `model` in a `/v1/models` answer, where the engine says it: vLLM and
/// SGLang `max_model_len`, llama.cpp `meta.n_ctx_train`, some servers `context_length`.
pub fn max_context(body: &Value, model: &str) -> Option<(u64, &'static str)> {
    let entry = (body.get("data")?.as_array()?.iter())
        .find(|m| m.get("id").and_then(Value::as_str) == Some(model))?;
    [
        ("max_model_len", entry.get("max_model_len")),
        ("meta.n_ctx_train", entry.pointer("/meta/n_ctx_train")),
        ("context_length", entry.get("context_length")),
    ]
    .into_iter()
    .find_map(|(field, v)| v.and_then(Value::as_u64).map(|n| (n, field)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_length_is_read_where_each_engine_puts_it() {
        let vllm = serde_json::json!({"data": [
            {"id": "other", "max_model_len": 1},
            {"id": "Qwen/Qwen3-8B", "max_model_len": 32768}
        ]});
        assert_eq!(
            max_context(&vllm, "Qwen/Qwen3-8B"),
            Some((32768, "max_model_len"))
        );
        let llama =
            serde_json::json!({"data": [{"id": "m.gguf", "meta": {"n_ctx_train": 131072}}]});
        assert_eq!(
            max_context(&llama, "m.gguf"),
            Some((131072, "meta.n_ctx_train"))
        );
        let bare = serde_json::json!({"data": [{"id": "sim-model"}]});
        assert_eq!(max_context(&bare, "sim-model"), None);
        assert_eq!(max_context(&serde_json::json!([]), "x"), None);
    }
}
