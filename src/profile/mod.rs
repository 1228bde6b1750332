//! The benchmark profile: what to measure and how, read from TOML.
//!
//! A profile is strict: unknown keys and out-of-range values are errors that name the file,
//! the line and the field, because a typo that silently falls back to a default would change
//! what is measured without anyone noticing. The canonical hash identifies the measurement
//! procedure (workload and sweep), so that a baseline and a candidate run are only compared
//! when they measured the same thing.

pub mod gate;
pub mod limits;
pub mod quickstart;
pub mod sweep;
pub mod target;
pub mod workload;

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

pub use gate::{GateSettings, LatencyGates};
pub use quickstart::QuickStart;
pub use sweep::{Arrival, Sweep, TraceSpec, TrialOrder};
pub use target::{Api, EngineChoice, ModelChoice, Target};
pub use workload::{DatasetFormat, DatasetSpec, History, LengthDist, Workload};

/// The whole profile file.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// A short name, shown in reports and used to name baselines.
    pub name: String,
    #[serde(default)]
    pub description: String,
    pub target: Target,
    pub workload: Workload,
    pub sweep: Sweep,
    #[serde(default)]
    pub gate: GateSettings,
}

impl Profile {
    /// Reads and validates a profile file. Errors name the file and, for syntax and schema
    /// errors, the line and field (from the TOML parser).
    pub fn load(path: &Path) -> Result<Profile> {
        let text = crate::fsutil::read_bounded(path, limits::PROFILE_FILE_BYTES)
            .with_context(|| format!("cannot read profile {}", path.display()))?;
        let mut profile =
            Profile::parse(&text).with_context(|| format!("invalid profile {}", path.display()))?;
        profile.resolve_files(path)?;
        Ok(profile)
    }

    /// Takes the workload's files (prompts, tokenizer, dataset, trace) relative to the
    /// profile file at `path` (where the profile is read from a git ref too: `ci`), as every
    /// command that reads a profile does.
    pub fn resolve_files(&mut self, path: &Path) -> Result<()> {
        let dir = path.parent().unwrap_or_else(|| Path::new("."));
        let resolve = |p: &mut PathBuf| {
            if p.is_relative() {
                *p = dir.join(&*p);
            }
        };
        let w = &mut self.workload;
        if let Some(p) = w.prompts_file.as_mut() {
            resolve(p);
        }
        if let Some(t) = w.tokenizer.as_mut() {
            *t = crate::tokenize::resolve(dir, t).with_context(|| {
                format!(
                    "invalid profile {}: field `workload.tokenizer`",
                    path.display()
                )
            })?;
        }
        if let Some(d) = w.dataset.as_mut() {
            resolve(&mut d.path);
        }
        if let Some(t) = self.sweep.trace.as_mut() {
            resolve(&mut t.path);
        }
        Ok(())
    }

    /// Parses and validates profile text.
    pub fn parse(text: &str) -> Result<Profile> {
        let profile: Profile = toml::from_str(text).map_err(|e| anyhow::anyhow!("{e}"))?;
        profile
            .validate()
            .map_err(|e| match field_line(text, &e.to_string()) {
                Some(line) => anyhow::anyhow!("line {line}: {e}"),
                None => e,
            })?;
        Ok(profile)
    }

    /// Checks every section, in the order the file reads; errors name the field.
    pub fn validate(&self) -> Result<()> {
        if self.name.trim().is_empty() {
            bail!("field `name`: must not be empty");
        }
        self.target.validate()?;
        self.workload.validate(self.target.api, &self.sweep)?;
        self.sweep.validate()?;
        self.gate.validate()
    }

    /// SHA-256 over the parts of the profile that decide what is measured: the API, the model,
    /// the workload and the sweep. Endpoints, the key variable, the description and the gate
    /// settings are left out: moving a server to another port or tightening the gate does not
    /// change the measurement. Files (prompts, dataset, tokenizer, trace) are hashed by
    /// content, not by path: the same file moved is the same measurement, an edited one is not.
    pub fn canonical_hash(&self) -> Result<String> {
        let w = &self.workload;
        let mut workload = serde_json::to_value(w)?;
        workload["prompts_file"] = match &w.prompts_file {
            Some(path) => serde_json::json!(file_digest(path, "workload.prompts_file")?),
            None => serde_json::Value::Null,
        };
        if let Some(path) = &w.tokenizer {
            let file = if path.is_dir() {
                path.join("tokenizer.json")
            } else {
                path.clone()
            };
            workload["tokenizer"] = serde_json::json!(file_digest(&file, "workload.tokenizer")?);
        }
        if let Some(d) = &w.dataset {
            workload["dataset"]["path"] =
                serde_json::json!(file_digest(&d.path, "workload.dataset.path")?);
        }
        let mut sweep = serde_json::to_value(&self.sweep)?;
        if let Some(t) = &self.sweep.trace {
            sweep["trace"]["path"] = serde_json::json!(file_digest(&t.path, "sweep.trace.path")?);
        }
        let canonical = serde_json::json!({
            "api": self.target.api,
            "model": self.target.model,
            "workload": workload,
            "sweep": sweep,
        });
        // serde_json's Map is ordered by key (no preserve_order feature), so this text is
        // canonical: the same profile always gives the same bytes.
        let text = serde_json::to_string(&canonical)?;
        Ok(sha256_id(text.as_bytes()))
    }
}

/// The SHA-256 of a file's bytes, read in pieces (a dataset can be large). A special file
/// (a FIFO, `/dev/zero`) is refused before it is read, and a file past
/// [`limits::WORKLOAD_FILE_BYTES`] while it is read: hashing must not hang or run forever.
fn file_digest(path: &Path, field: &str) -> Result<String> {
    let mut hasher = Sha256::new();
    crate::fsutil::stream_bounded(path, limits::WORKLOAD_FILE_BYTES, &mut hasher)
        .with_context(|| format!("field `{field}`"))?;
    Ok(hex(&hasher.finalize()))
}

/// The line of the field a validation message names (`field \`table.key\``), if the text
/// has it: validation runs on parsed values, which no longer know their lines.
fn field_line(text: &str, message: &str) -> Option<usize> {
    let start = message.find("field `")? + "field `".len();
    let path = &message[start..start + message[start..].find('`')?];
    let path = path.split('[').next()?;
    let (table, key) = match path.rsplit_once('.') {
        Some((t, k)) => (Some(t), k),
        None => (None, path),
    };
    let mut in_table = table.is_none();
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim();
        if trimmed.starts_with('[') {
            in_table =
                table.is_some_and(|t| trimmed.trim_matches(|c| c == '[' || c == ']').trim() == t);
            continue;
        }
        if in_table {
            if let Some((k, _)) = trimmed.split_once('=') {
                if k.trim() == key {
                    return Some(i + 1);
                }
            }
        }
    }
    None
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `sha256:HEX` of `bytes`: how throughline names the content it checks a file or log
/// against (a profile's hash, a calibration's rows).
pub fn sha256_id(bytes: &[u8]) -> String {
    format!("sha256:{}", hex(&Sha256::digest(bytes)))
}

#[cfg(test)]
mod tests;

#[cfg(test)]
#[path = "profile_props.rs"]
mod props;
