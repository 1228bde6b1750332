//! `[target]`: which server(s) to measure, with which API, model and engine.

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};

/// Engine names `target.engine` accepts (besides "auto"), as the probe names them.
pub const ENGINES: [&str; 6] = [
    "vllm",
    "sglang",
    "llama.cpp",
    "tgi",
    "throughline-sim",
    "openai",
];

/// Which server(s) to measure.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Target {
    /// Base URLs (without `/v1`); requests are spread over all of them in turn.
    pub endpoints: Vec<String>,
    /// The model id to request, or "auto" to ask the server's `/v1/models`.
    #[serde(default = "default_model")]
    pub model: String,
    #[serde(default)]
    pub api: Api,
    /// The *name* of the environment variable that holds the API key (never the key itself).
    /// An unset variable means "no key" (a server without `--api-key` needs none), unless
    /// `api_key_required` says the key must be there.
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// Stop before measuring when `api_key_env`'s variable is not set (a server that needs
    /// the key would otherwise answer every request 401). Left out of the saved profile when
    /// false, so existing profile files and hashes do not change.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub api_key_required: bool,
    /// The engine behind the endpoints: "auto" (recognised from `/metrics`) or one of vllm,
    /// sglang, llama.cpp, tgi, throughline-sim, openai. It decides the request fields that fix
    /// output lengths and how `/metrics` is read. Left out of the saved profile when "auto".
    #[serde(default = "default_model", skip_serializing_if = "is_auto")]
    pub engine: String,
}

fn default_model() -> String {
    "auto".to_string()
}

fn is_auto(s: &str) -> bool {
    s == "auto"
}

/// The OpenAI endpoint to use.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum Api {
    #[default]
    Chat,
    Completions,
}

impl Target {
    /// Checks `[target]`: endpoints are http(s) URLs, the key variable is named where
    /// required, the engine is one throughline knows, the model is not empty.
    pub fn validate(&self) -> Result<()> {
        if self.endpoints.is_empty() {
            bail!("field `target.endpoints`: needs at least one base URL");
        }
        for (i, url) in self.endpoints.iter().enumerate() {
            let parsed = reqwest::Url::parse(url).map_err(|e| {
                anyhow::anyhow!("field `target.endpoints[{i}]`: {url:?} is not a URL ({e})")
            })?;
            if !matches!(parsed.scheme(), "http" | "https") {
                bail!("field `target.endpoints[{i}]`: {url:?} must start with http:// or https://");
            }
        }
        if self.api_key_required && self.api_key_env.is_none() {
            bail!("field `target.api_key_required`: needs `target.api_key_env`, the name of the variable that holds the key");
        }
        let engine = self.engine.as_str();
        if engine != "auto" && !ENGINES.contains(&engine) {
            bail!(
                "field `target.engine`: {engine:?} is not one of \"auto\", {}",
                ENGINES.map(|e| format!("{e:?}")).join(", ")
            );
        }
        if self.model.trim().is_empty() {
            bail!("field `target.model`: must not be empty (use \"auto\" to ask the server)");
        }
        Ok(())
    }
}
