//! GPU and model facts: what the physical sanity bound is computed from.
//!
//! The built-in tables are `fixtures/gpus.toml` and `fixtures/models.toml`, embedded in the
//! binary. A model can also be read from a Hugging Face `config.json` (`--model-config`).

use std::path::Path;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use super::field::Field;
use super::toml_error::toml_error;

const GPUS_TOML: &str = include_str!("../../fixtures/gpus.toml");
const MODELS_TOML: &str = include_str!("../../fixtures/models.toml");

/// One GPU, per device, from its datasheet.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct GpuFacts {
    pub name: String,
    #[serde(default)]
    pub aliases: Vec<String>,
    /// Decimal GB (1e9 bytes), as the datasheet states it.
    pub memory_gb: f64,
    /// Datasheet peak memory bandwidth, TB/s (1e12 bytes/s).
    pub bandwidth_tb_s: f64,
    /// Dense BF16 tensor TFLOPS.
    pub bf16_tflops: f64,
    /// Dense FP8 tensor TFLOPS (None: no FP8 tensor cores).
    #[serde(default)]
    pub fp8_tflops: Option<f64>,
    pub source: String,
    pub date: String,
}

impl GpuFacts {
    pub fn bandwidth_bytes_s(&self) -> f64 {
        self.bandwidth_tb_s * 1e12
    }
    pub fn memory_bytes(&self) -> f64 {
        self.memory_gb * 1e9
    }
    /// Dense tensor FLOP/s at the weights' precision (FP8 when weights are one byte and the
    /// GPU has FP8; BF16 otherwise).
    pub fn flops(&self, bytes_per_param: f64) -> f64 {
        let tflops = match self.fp8_tflops {
            Some(fp8) if bytes_per_param <= 1.0 => fp8,
            _ => self.bf16_tflops,
        };
        tflops * 1e12
    }
}

/// One model: what decoding a token reads from memory.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ModelFacts {
    pub name: String,
    #[serde(default)]
    pub aliases: Vec<String>,
    /// All parameters, billions (all of them sit in memory).
    pub params_b: f64,
    /// Parameters read per decoded token, billions (MoE: the active ones). Defaults to params_b.
    #[serde(default)]
    pub active_params_b: Option<f64>,
    /// 2 for BF16/FP16, 1 for FP8.
    pub bytes_per_param: f64,
    pub layers: u32,
    /// Layers that keep a KV cache (hybrid models); defaults to `layers`.
    #[serde(default)]
    pub kv_layers: Option<u32>,
    pub kv_heads: u32,
    pub head_dim: u32,
    /// Bytes per KV element; defaults to bytes_per_param.
    #[serde(default)]
    pub kv_bytes: Option<f64>,
    /// Fixed recurrent state per sequence (linear-attention layers), MB (1e6 bytes).
    #[serde(default)]
    pub state_mb_per_seq: f64,
    #[serde(default)]
    pub source: String,
}

impl ModelFacts {
    pub fn active_params_b(&self) -> f64 {
        self.active_params_b.unwrap_or(self.params_b)
    }
    /// All weights, bytes: what must fit in memory.
    pub fn weight_bytes(&self) -> f64 {
        self.params_b * 1e9 * self.bytes_per_param
    }
    /// Weights read per decode step at batch 1, bytes.
    pub fn active_weight_bytes(&self) -> f64 {
        self.active_params_b() * 1e9 * self.bytes_per_param
    }
    /// KV cache bytes per token: 2 (K and V) x kv layers x kv heads x head dim x bytes.
    pub fn kv_bytes_per_token(&self) -> f64 {
        2.0 * self.kv_layers.unwrap_or(self.layers) as f64
            * self.kv_heads as f64
            * self.head_dim as f64
            * self.kv_bytes.unwrap_or(self.bytes_per_param)
    }
    pub fn state_bytes_per_seq(&self) -> f64 {
        self.state_mb_per_seq * 1e6
    }
    /// Memory one sequence of `context_tokens` holds (and reads each decode step).
    pub fn seq_bytes(&self, context_tokens: f64) -> f64 {
        self.kv_bytes_per_token() * context_tokens + self.state_bytes_per_seq()
    }
}

/// Bytes per parameter of a weight format, scales included: int4 (AWQ, GPTQ) keeps a 2-byte
/// scale per group of 128 weights, NVFP4 a 1-byte scale per 16, MXFP4 a 1-byte scale per 32.
/// None for a name it does not know.
pub fn weight_bytes_for(format: &str) -> Option<f64> {
    let f = normalize(format);
    Some(match f.as_str() {
        "bf16" | "bfloat16" | "fp16" | "float16" | "half" | "auto" => 2.0,
        "fp32" | "float32" => 4.0,
        "fp8" | "float8" | "fp8e4m3" | "fp8e5m2" | "int8" | "w8a8" | "w8a16" | "fbgemmfp8" => 1.0,
        "int4" | "awq" | "gptq" | "w4a16" | "awqint4" | "gptqint4" | "awqmarlin" | "gptqmarlin" => {
            0.5 + 2.0 / 128.0
        }
        "nvfp4" | "fp4" => 0.5 + 1.0 / 16.0,
        "mxfp4" => 0.5 + 1.0 / 32.0,
        _ => return None,
    })
}

/// Bytes per KV-cache element for a KV dtype (`--kv-cache-dtype`, as vLLM names them).
pub fn kv_bytes_for(dtype: &str) -> Option<f64> {
    match normalize(dtype).as_str() {
        "bf16" | "bfloat16" | "fp16" | "float16" | "auto" => Some(2.0),
        "fp8" | "fp8e4m3" | "fp8e5m2" | "int8" => Some(1.0),
        "fp32" | "float32" => Some(4.0),
        _ => None,
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct GpuFile {
    gpu: Vec<GpuFacts>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ModelFile {
    model: Vec<ModelFacts>,
}

/// The GPU and model tables.
#[derive(Debug, Clone)]
pub struct Facts {
    pub gpus: Vec<GpuFacts>,
    pub models: Vec<ModelFacts>,
}

/// Lower case, letters and digits only: "RTX PRO 6000" and "rtx-pro-6000" are the same name.
pub fn normalize(name: &str) -> String {
    name.chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

impl Facts {
    /// The built-in tables (fixtures/gpus.toml and fixtures/models.toml).
    pub fn builtin() -> Facts {
        Facts::parse(GPUS_TOML, MODELS_TOML).expect("the built-in GPU and model tables parse")
    }

    pub fn parse(gpus: &str, models: &str) -> Result<Facts> {
        let g: GpuFile = toml::from_str(gpus).map_err(|e| toml_error("gpus.toml", e))?;
        let m: ModelFile = toml::from_str(models).map_err(|e| toml_error("models.toml", e))?;
        Ok(Facts {
            gpus: g.gpu,
            models: m.model,
        })
    }

    /// The GPU a name means: the same name or alias, else the longest alias the name
    /// contains ("NVIDIA RTX PRO 6000 Blackwell Server Edition" is the RTX PRO 6000).
    pub fn gpu(&self, name: &str) -> Option<&GpuFacts> {
        let n = normalize(name);
        if n.is_empty() {
            return None;
        }
        let names = |g: &GpuFacts| -> Vec<String> {
            std::iter::once(&g.name)
                .chain(&g.aliases)
                .map(|a| normalize(a))
                .collect()
        };
        if let Some(g) = self.gpus.iter().find(|g| names(g).contains(&n)) {
            return Some(g);
        }
        self.gpus
            .iter()
            .flat_map(|g| names(g).into_iter().map(move |a| (a, g)))
            .filter(|(a, _)| a.len() >= 4 && n.contains(a.as_str()))
            .max_by_key(|(a, _)| a.len())
            .map(|(_, g)| g)
    }

    /// The model a name means (same name or alias; an "org/" prefix may be left out).
    pub fn model(&self, name: &str) -> Option<&ModelFacts> {
        let n = normalize(name);
        let bare = normalize(name.rsplit('/').next().unwrap_or(name));
        self.models.iter().find(|m| {
            std::iter::once(&m.name)
                .chain(&m.aliases)
                .map(|a| normalize(a))
                .any(|a| a == n || a == bare)
        })
    }

    pub fn gpu_names(&self) -> Vec<&str> {
        self.gpus.iter().map(|g| g.name.as_str()).collect()
    }

    pub fn model_names(&self) -> Vec<&str> {
        self.models.iter().map(|m| m.name.as_str()).collect()
    }
}

/// The largest config.json read (a model's is a few kilobytes).
pub const MODEL_CONFIG_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// Reads model facts from a Hugging Face `config.json`.
///
/// Uses num_hidden_layers, num_key_value_heads (default: num_attention_heads), head_dim (or
/// hidden_size / num_attention_heads), torch_dtype (or dtype), layer_types or
/// full_attention_interval (hybrid models: only full-attention layers keep a KV cache) and,
/// for multimodal configs, the nested `text_config`. The parameter count comes from
/// `params_b` when given; otherwise it is derived for plain dense transformers (embeddings,
/// attention and a gated MLP per layer) and refused for MoE and hybrid models, where a
/// derivation from config.json alone would be a guess.
pub fn model_from_hf_config(
    path: &Path,
    params_b: Option<f64>,
    active_params_b: Option<f64>,
) -> Result<ModelFacts> {
    let text = crate::fsutil::read_bounded(path, MODEL_CONFIG_FILE_BYTES)
        .map_err(|e| Field::ModelConfig.wrap(format!("cannot read {}", path.display()), e))?;
    model_from_hf_config_text(
        &text,
        &path.display().to_string(),
        params_b,
        active_params_b,
    )
}

/// Bytes per parameter from a config.json `quantization_config` (AWQ/GPTQ with `bits` and
/// `group_size`, FP8, bitsandbytes, MXFP4, ModelOpt NVFP4/FP8).
fn quantized_bytes(q: &serde_json::Value) -> Option<f64> {
    let method = q
        .get("quant_method")
        .and_then(|v| v.as_str())?
        .to_ascii_lowercase();
    let bits = q
        .get("bits")
        .or_else(|| q.get("w_bit"))
        .and_then(|v| v.as_f64());
    let group = q
        .get("group_size")
        .or_else(|| q.get("q_group_size"))
        .and_then(|v| v.as_f64())
        .filter(|g| *g > 0.0)
        .unwrap_or(128.0);
    match method.as_str() {
        m if m.contains("awq") || m.contains("gptq") => {
            Some(bits.unwrap_or(4.0) / 8.0 + 2.0 / group)
        }
        m if m.contains("fp8") => Some(1.0),
        "bitsandbytes" => {
            if q.get("load_in_4bit").and_then(|v| v.as_bool()) == Some(true) {
                Some(0.5 + 4.0 / 64.0)
            } else {
                Some(1.0)
            }
        }
        "mxfp4" => Some(0.5 + 1.0 / 32.0),
        "modelopt" => {
            let algo = q
                .get("quant_algo")
                .and_then(|v| v.as_str())?
                .to_ascii_lowercase();
            if algo.contains("fp4") {
                Some(0.5 + 1.0 / 16.0)
            } else if algo.contains("fp8") {
                Some(1.0)
            } else {
                None
            }
        }
        _ => None,
    }
}

/// The facts of `text`, a config.json read from `origin`; a refusal is about the model's
/// config (tagged so, for the command line to name its flag).
pub fn model_from_hf_config_text(
    text: &str,
    origin: &str,
    params_b: Option<f64>,
    active_params_b: Option<f64>,
) -> Result<ModelFacts> {
    hf_config_facts(text, origin, params_b, active_params_b)
        .map_err(|e| Field::ModelConfig.wrap(format!("the model's config {origin}"), e))
}

fn hf_config_facts(
    text: &str,
    origin: &str,
    params_b: Option<f64>,
    active_params_b: Option<f64>,
) -> Result<ModelFacts> {
    let root: serde_json::Value = serde_json::from_str(text).context("not valid JSON")?;
    let cfg = match root.get("num_hidden_layers") {
        Some(_) => &root,
        None => root.get("text_config").unwrap_or(&root),
    };
    let int = |key: &str| cfg.get(key).and_then(|v| v.as_u64());
    let need = |key: &str| -> Result<u64> {
        int(key).with_context(|| format!("field `{key}` is missing or not a whole number"))
    };
    let layers = need("num_hidden_layers")? as u32;
    let heads = int("num_attention_heads");
    let kv_heads = int("num_key_value_heads")
        .or(heads)
        .context("field `num_key_value_heads` (or `num_attention_heads`) is missing")?
        as u32;
    let hidden = int("hidden_size");
    let head_dim = match (int("head_dim"), hidden, heads) {
        (Some(d), _, _) => d as u32,
        (None, Some(h), Some(a)) if a > 0 => (h / a) as u32,
        _ => bail!(
            "field `head_dim` is missing and cannot be derived from \
             `hidden_size` / `num_attention_heads`"
        ),
    };
    let bytes_per_param = bytes_per_param(&root, cfg)?;
    let kv_layers = if let Some(types) = cfg.get("layer_types").and_then(|v| v.as_array()) {
        Some(
            types
                .iter()
                .filter(|t| t.as_str().is_some_and(|s| s.contains("full_attention")))
                .count() as u32,
        )
    } else {
        int("full_attention_interval")
            .filter(|i| *i > 0)
            .map(|i| layers / i as u32)
    };
    let hybrid = kv_layers.is_some_and(|k| k < layers);
    let moe = ["num_experts", "num_local_experts", "n_routed_experts"]
        .iter()
        .any(|k| int(k).is_some_and(|n| n > 1));
    let params_b = match params_b {
        Some(p) => p,
        None if moe || hybrid => bail!(
            "a {} model; its parameter count cannot be derived from \
             config.json alone: pass --params (billions) and --active-params",
            if moe { "mixture-of-experts" } else { "hybrid" }
        ),
        None => dense_params_b(&root, cfg, layers, head_dim, kv_heads)?,
    };
    if moe && active_params_b.is_none() {
        bail!("a mixture-of-experts model: pass --active-params (billions read per token)");
    }
    let name = model_name(&root, origin);
    Ok(ModelFacts {
        name,
        aliases: Vec::new(),
        params_b,
        active_params_b,
        bytes_per_param,
        layers,
        kv_layers: kv_layers.filter(|k| *k < layers),
        kv_heads,
        head_dim,
        // The KV cache holds activations, served in 16 bits unless --kv-cache-dtype says
        // otherwise (vLLM's `auto`): not the weights' quantized format.
        kv_bytes: Some(2.0),
        state_mb_per_seq: 0.0,
        source: format!("{origin} (Hugging Face config.json)"),
    })
}

/// Bytes per weight: the quantization's, else the activations' dtype (16 bits unless
/// config.json says otherwise).
fn bytes_per_param(root: &serde_json::Value, cfg: &serde_json::Value) -> Result<f64> {
    let dtype = cfg
        .get("torch_dtype")
        .or_else(|| cfg.get("dtype"))
        .or_else(|| root.get("torch_dtype"))
        .and_then(|v| v.as_str())
        .unwrap_or("bfloat16");
    let activation_bytes = match dtype {
        "float32" => 4.0,
        "bfloat16" | "float16" => 2.0,
        d if d.contains("float8") => 1.0,
        other => bail!(
            "field `torch_dtype` is {other:?}; expected bfloat16, \
             float16, float32 or a float8 type"
        ),
    };
    let bytes_per_param = match root
        .get("quantization_config")
        .or_else(|| cfg.get("quantization_config"))
    {
        None => activation_bytes,
        Some(q) => quantized_bytes(q).with_context(|| {
            format!(
                "field `quantization_config`: {}; pass \
                 --quantization (bf16, fp8, int8, int4, nvfp4, mxfp4) to say it",
                q
            )
        })?,
    };
    Ok(bytes_per_param)
}

/// A dense model's parameters (billions) from its shape: the embeddings (twice unless tied)
/// and, per layer, the attention and MLP weights.
fn dense_params_b(
    root: &serde_json::Value,
    cfg: &serde_json::Value,
    layers: u32,
    head_dim: u32,
    kv_heads: u32,
) -> Result<f64> {
    let int = |key: &str| cfg.get(key).and_then(|v| v.as_u64());
    let (hidden, heads) = (int("hidden_size"), int("num_attention_heads"));
    let (h, a) = (hidden.unwrap_or(0) as f64, heads.unwrap_or(0) as f64);
    let inter = int("intermediate_size").unwrap_or(0) as f64;
    let vocab = int("vocab_size").unwrap_or(0) as f64;
    if h == 0.0 || inter == 0.0 || vocab == 0.0 {
        bail!(
            "cannot derive the parameter count (needs \
             hidden_size, intermediate_size and vocab_size): pass --params (billions)"
        );
    }
    let tied = cfg
        .get("tie_word_embeddings")
        .or_else(|| root.get("tie_word_embeddings"))
        .and_then(|v| v.as_bool())
        .unwrap_or(false);
    let hd = head_dim as f64;
    let attn = h * a * hd * 2.0 + h * kv_heads as f64 * hd * 2.0;
    let mlp = 3.0 * h * inter;
    let embed = vocab * h * if tied { 1.0 } else { 2.0 };
    Ok((embed + layers as f64 * (attn + mlp)) / 1e9)
}

/// The model's name: config.json's `_name_or_path`, else its folder's name.
fn model_name(root: &serde_json::Value, origin: &str) -> String {
    root.get("_name_or_path")
        .and_then(|v| v.as_str())
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .unwrap_or_else(|| {
            Path::new(origin)
                .parent()
                .and_then(|p| p.file_name())
                .map(|n| n.to_string_lossy().into_owned())
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| "model from config.json".to_string())
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_tables_parse_and_look_up() {
        let f = Facts::builtin();
        for g in [
            "H100 SXM",
            "H200",
            "B200",
            "A100",
            "L40S",
            "RTX PRO 6000",
            "MI300X",
        ] {
            assert!(f.gpu(g).is_some(), "{g}");
        }
        let rtx = f
            .gpu("NVIDIA RTX PRO 6000 Blackwell Server Edition")
            .unwrap();
        assert_eq!(rtx.bandwidth_tb_s, 1.792);
        assert!(f.gpu("Voodoo 2").is_none());
        for m in [
            "Qwen3.6-27B",
            "Qwen/Qwen3.5-122B-A10B",
            "llama-3.1-8b",
            "Llama-3.1-70B",
        ] {
            assert!(f.model(m).is_some(), "{m}");
        }
    }

    #[test]
    fn kv_bytes_per_token() {
        let f = Facts::builtin();
        // Llama-3.1-8B: 2 x 32 layers x 8 heads x 128 x 2 bytes = 131,072 bytes (128 KiB).
        assert_eq!(
            f.model("llama-3.1-8b").unwrap().kv_bytes_per_token(),
            131_072.0
        );
        // Llama-3.1-70B: 2 x 80 x 8 x 128 x 2 = 327,680 bytes (320 KiB).
        assert_eq!(
            f.model("llama-3.1-70b").unwrap().kv_bytes_per_token(),
            327_680.0
        );
        // Qwen3.6-27B keeps a KV cache in 16 of its 64 layers: 2 x 16 x 4 x 256 x 2 = 65,536.
        assert_eq!(
            f.model("qwen3.6-27b").unwrap().kv_bytes_per_token(),
            65_536.0
        );
    }

    const LLAMA_8B: &str = r#"{
      "architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "intermediate_size": 14336,
      "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
      "torch_dtype": "bfloat16", "vocab_size": 128256, "tie_word_embeddings": false
    }"#;

    #[test]
    fn reads_hf_config_and_derives_dense_params() {
        let m = model_from_hf_config_text(LLAMA_8B, "x/config.json", None, None).unwrap();
        assert_eq!(m.layers, 32);
        assert_eq!(m.kv_heads, 8);
        assert_eq!(m.head_dim, 128);
        assert_eq!(m.bytes_per_param, 2.0);
        assert!((m.params_b - 8.03).abs() < 0.01, "{}", m.params_b);
        assert_eq!(m.kv_bytes_per_token(), 131_072.0);
    }

    #[test]
    fn quantized_weights_are_not_two_bytes() {
        let with = |q: &str| {
            let text = LLAMA_8B.replace(
                "\"vocab_size\"",
                &format!("\"quantization_config\": {q}, \"vocab_size\""),
            );
            model_from_hf_config_text(&text, "c.json", None, None)
        };
        let awq = with(r#"{"quant_method": "awq", "bits": 4, "group_size": 128}"#).unwrap();
        assert_eq!(awq.bytes_per_param, 0.5 + 2.0 / 128.0);
        // The KV cache stays in the activations' dtype (bf16), not int4.
        assert_eq!(awq.kv_bytes_per_token(), 131_072.0);
        let nvfp4 = with(r#"{"quant_method": "modelopt", "quant_algo": "NVFP4"}"#).unwrap();
        assert_eq!(nvfp4.bytes_per_param, 0.5625);
        let fp8 = with(r#"{"quant_method": "fp8"}"#).unwrap();
        assert_eq!(fp8.bytes_per_param, 1.0);
        let err = format!("{:#}", with(r#"{"quant_method": "mystery"}"#).unwrap_err());
        assert!(err.contains("--quantization"), "{err}");
        assert_eq!(weight_bytes_for("AWQ"), Some(0.515625));
        assert_eq!(kv_bytes_for("fp8_e4m3"), Some(1.0));
        assert_eq!(weight_bytes_for("int3"), None);
    }

    #[test]
    fn hybrid_and_moe_configs_need_params() {
        let hybrid = r#"{"text_config": {"num_hidden_layers": 48, "num_attention_heads": 32,
            "num_key_value_heads": 2, "head_dim": 256, "hidden_size": 3072,
            "full_attention_interval": 4, "num_experts": 256, "torch_dtype": "bfloat16"}}"#;
        let err = model_from_hf_config_text(hybrid, "c.json", None, None).unwrap_err();
        assert!(format!("{err:#}").contains("--params"), "{err:#}");
        let m = model_from_hf_config_text(hybrid, "c.json", Some(122.0), Some(10.0)).unwrap();
        assert_eq!(m.kv_layers, Some(12));
        assert_eq!(m.active_weight_bytes(), 20e9);
        let bad = r#"{"num_attention_heads": 32}"#;
        let err = model_from_hf_config_text(bad, "c.json", Some(1.0), None).unwrap_err();
        assert!(format!("{err:#}").contains("num_hidden_layers"), "{err:#}");
    }
}
