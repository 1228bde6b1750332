//! How the planner's TOML files (catalog, GPU and model facts) report a parse error.

use anyhow::anyhow;

/// A TOML parse error as a message that names the file (the parser's text carries the line,
/// the column and the field).
pub fn toml_error(origin: &str, e: toml::de::Error) -> anyhow::Error {
    anyhow!("{origin}: {}", e.to_string().trim_end())
}
