//! `[target]`: which server(s) to measure, with which API, model and engine.

use std::fmt;

use anyhow::{bail, Result};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::engine::Engine;

/// The word that asks the server (`model`) or its `/metrics` (`engine`) at every run. Read
/// and written here only: the rest of the crate sees [`ModelChoice`] and [`EngineChoice`].
const AUTO: &str = "auto";

/// Which server(s) to measure.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Target {
    /// Base URLs (without `/v1`); requests are spread over all of them in turn.
    pub endpoints: Vec<String>,
    /// The model id to request, or "auto" to ask the server's `/v1/models`.
    #[serde(default)]
    pub model: ModelChoice,
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
    /// The engine behind the endpoints: "auto" (recognised from `/metrics`) or one of the
    /// names in src/engine/. It decides the request fields that fix output lengths and how
    /// `/metrics` is read. Left out of the saved profile when "auto".
    #[serde(default, skip_serializing_if = "EngineChoice::is_auto")]
    pub engine: EngineChoice,
}

/// `target.model`: asked of the server's `/v1/models` at every run, or named.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ModelChoice {
    #[default]
    Auto,
    Named(String),
}

impl ModelChoice {
    /// "auto" or a model id, as a profile or `--model` gives it.
    pub fn parse(text: &str) -> ModelChoice {
        match text {
            AUTO => ModelChoice::Auto,
            id => ModelChoice::Named(id.to_string()),
        }
    }

    /// The model id, when the profile names one.
    pub fn named(&self) -> Option<&str> {
        match self {
            ModelChoice::Auto => None,
            ModelChoice::Named(id) => Some(id),
        }
    }
}

/// As the profile writes it (the profile hash reads this text: it must not change).
impl fmt::Display for ModelChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.named().unwrap_or(AUTO))
    }
}

impl Serialize for ModelChoice {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ModelChoice {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        String::deserialize(d).map(|text| ModelChoice::parse(&text))
    }
}

/// `target.engine`: recognised from the server's `/metrics` at every run, or named.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EngineChoice {
    #[default]
    Auto,
    Named(Engine),
}

impl EngineChoice {
    /// "auto" or an engine's name; an unknown name is an error that lists the known ones.
    pub fn parse(text: &str) -> Result<EngineChoice> {
        match text {
            AUTO => Ok(EngineChoice::Auto),
            name => match Engine::from_name(name) {
                Some(e) => Ok(EngineChoice::Named(e)),
                None => bail!(
                    "field `target.engine`: {name:?} is not one of {AUTO:?}, {}",
                    Engine::names_quoted()
                ),
            },
        }
    }

    pub fn is_auto(&self) -> bool {
        *self == EngineChoice::Auto
    }

    /// The engine a run speaks to: the named one, else the one the probe recognised.
    pub fn or_detected(self, detected: Option<Engine>) -> Option<Engine> {
        match self {
            EngineChoice::Auto => detected,
            EngineChoice::Named(e) => Some(e),
        }
    }
}

impl Serialize for EngineChoice {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            EngineChoice::Auto => s.serialize_str(AUTO),
            EngineChoice::Named(e) => s.serialize_str(e.name()),
        }
    }
}

impl<'de> Deserialize<'de> for EngineChoice {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        EngineChoice::parse(&text).map_err(serde::de::Error::custom)
    }
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
    /// required, the model is not empty (the engine is checked as it is read).
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
        if self.model.named().is_some_and(|id| id.trim().is_empty()) {
            bail!("field `target.model`: must not be empty (use \"auto\" to ask the server)");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// "auto" is read here and nowhere else; both choices write back the text they were read
    /// from (the profile hash and saved profiles depend on it).
    #[test]
    fn choices_read_and_write_the_profile_text() {
        assert_eq!(ModelChoice::parse("auto"), ModelChoice::Auto);
        let named = ModelChoice::parse("Qwen/Qwen3-8B");
        assert_eq!(named.named(), Some("Qwen/Qwen3-8B"));
        for m in [ModelChoice::Auto, named] {
            let json = serde_json::to_value(&m).unwrap();
            assert_eq!(json, serde_json::json!(m.to_string()));
            assert_eq!(serde_json::from_value::<ModelChoice>(json).unwrap(), m);
        }
        assert_eq!(EngineChoice::parse("auto").unwrap(), EngineChoice::Auto);
        for e in Engine::ALL {
            let choice = EngineChoice::parse(e.name()).unwrap();
            assert_eq!(choice, EngineChoice::Named(*e));
            assert_eq!(serde_json::to_value(choice).unwrap(), e.name());
        }
        let err = EngineChoice::parse("vLLM").unwrap_err().to_string();
        assert!(
            err.contains("target.engine") && err.contains("\"auto\", \"vllm\""),
            "{err}"
        );
        assert_eq!(
            EngineChoice::Auto.or_detected(Some(Engine::Tgi)),
            Some(Engine::Tgi)
        );
        assert_eq!(
            EngineChoice::Named(Engine::Vllm).or_detected(Some(Engine::Tgi)),
            Some(Engine::Vllm)
        );
    }
}
