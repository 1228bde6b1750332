//! JSON Lines, as the dataset and trace files hold them: one object per line, each turned
//! into a row by the caller; blank lines skipped; an error names the line (and column), never
//! the file's text (data_error.rs).

use anyhow::{anyhow, Result};
use serde_json::Value;

/// The rows of `text`'s first `max_rows` objects, each made by `row` from the object and its
/// line number (from 1). `shape` says what a line holds, for the error of one that is not JSON
/// ("`timestamp`, `input_tokens` and `output_tokens`").
pub fn rows<T>(
    text: &str,
    max_rows: usize,
    shape: &str,
    mut row: impl FnMut(Value, usize) -> Result<T>,
) -> Result<Vec<T>> {
    let mut rows = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if rows.len() >= max_rows {
            break;
        }
        let line_no = i + 1;
        if line.trim().is_empty() {
            continue;
        }
        let value: Value = serde_json::from_str(line).map_err(|e| {
            anyhow!(
                "line {line_no}, column {}: {}; expected one JSON object per line, with {shape}",
                e.column(),
                super::data_error::json_problem(&e)
            )
        })?;
        rows.push(row(value, line_no)?);
    }
    Ok(rows)
}
