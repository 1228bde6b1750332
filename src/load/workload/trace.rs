//! Timestamped request traces for open-loop replay: when each request arrives and how long its
//! input and output are.
//!
//! * **Azure LLM inference trace** CSV (the 2023/2024 public traces): columns `TIMESTAMP`
//!   (`2023-11-16 18:15:46.6805900`), `ContextTokens`, `GeneratedTokens`.
//! * **JSONL**: `{"timestamp": 12.5, "input_tokens": 512, "output_tokens": 128}` per line, the
//!   timestamp in seconds (any origin).
//!
//! Arrival times are kept relative to the first request; a trace out of time order is sorted
//! (stably) and says how many rows were out of order.

use std::path::Path;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use serde_json::Value;

use super::dataset::MAX_ROW_OUTPUT_TOKENS;

/// The largest trace file read (the Azure 2024 week-long code trace is about 1 GB).
pub const TRACE_FILE_BYTES: u64 = 2 * 1024 * 1024 * 1024;
/// The longest prompt a trace row may give.
pub const MAX_ROW_INPUT_TOKENS: u64 = 1 << 22;

/// One request of a trace.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TraceEntry {
    /// When it arrives, from the trace's first request.
    pub at: Duration,
    pub input_tokens: u32,
    pub output_tokens: u32,
}

/// A trace, in time order.
#[derive(Debug, Clone, PartialEq)]
pub struct Trace {
    pub entries: Vec<TraceEntry>,
    /// Rows that came before an earlier-stamped row (sorted into place).
    pub out_of_order: usize,
}

impl Trace {
    /// The span from the first arrival to the last.
    pub fn span(&self) -> Duration {
        self.entries.last().map_or(Duration::ZERO, |e| e.at)
    }
}

/// Reads a trace; the format follows the extension (`.csv`: Azure, else JSONL), and at most
/// `max_rows` rows are kept (the first ones, in file order).
pub fn load(path: &Path, max_rows: usize) -> Result<Trace> {
    let text = crate::fsutil::read_bounded(path, TRACE_FILE_BYTES)
        .with_context(|| format!("cannot read trace {}", path.display()))?;
    let csv = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("csv"));
    let rows = if csv {
        azure_csv(&text, max_rows)
    } else {
        jsonl(&text, max_rows)
    }
    .with_context(|| format!("trace {}", path.display()))?;
    if rows.is_empty() {
        bail!("trace {} holds no request", path.display());
    }
    Ok(order(rows))
}

/// (seconds, input, output) rows into a sorted trace relative to the first arrival.
fn order(mut rows: Vec<(f64, u32, u32)>) -> Trace {
    let out_of_order = rows.windows(2).filter(|w| w[1].0 < w[0].0).count();
    rows.sort_by(|a, b| a.0.total_cmp(&b.0));
    let origin = rows.first().map_or(0.0, |r| r.0);
    let entries = rows
        .into_iter()
        .map(|(t, input_tokens, output_tokens)| TraceEntry {
            at: Duration::from_secs_f64(t - origin),
            input_tokens,
            output_tokens,
        })
        .collect();
    Trace {
        entries,
        out_of_order,
    }
}

fn azure_csv(text: &str, max_rows: usize) -> Result<Vec<(f64, u32, u32)>> {
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let headers = reader
        .headers()
        .context("cannot read the CSV header")?
        .clone();
    let column = |name: &str| {
        headers
            .iter()
            .position(|h| h.trim().eq_ignore_ascii_case(name))
            .ok_or_else(|| {
                anyhow!(
                    "line 1: no column `{name}` (an Azure LLM inference trace has TIMESTAMP, \
                     ContextTokens, GeneratedTokens)"
                )
            })
    };
    let (ts, input, output) = (
        column("TIMESTAMP")?,
        column("ContextTokens")?,
        column("GeneratedTokens")?,
    );
    let mut rows = Vec::new();
    for (i, record) in reader.records().enumerate() {
        if rows.len() >= max_rows {
            break;
        }
        let line_no = i + 2;
        let record = record.map_err(|e| anyhow!("line {line_no}: {e}"))?;
        let field = |at: usize, name: &str| {
            record
                .get(at)
                .map(str::trim)
                .ok_or_else(|| anyhow!("line {line_no}: column `{name}` is missing"))
        };
        // The file's text is not quoted (a profile may name any file as its trace).
        let seconds = azure_timestamp(field(ts, "TIMESTAMP")?).ok_or_else(|| {
            anyhow!(
                "line {line_no}: column `TIMESTAMP`: expected a time like \
                 2023-11-16 18:15:46.6805900"
            )
        })?;
        let count = |at: usize, name: &str, max: u64, min: u64| -> Result<u32> {
            let raw = field(at, name)?;
            match raw.parse::<u64>() {
                Ok(n) if (min..=max).contains(&n) => Ok(n as u32),
                _ => bail!(
                    "line {line_no}: column `{name}`: expected a whole number from {min} to \
                     {max}"
                ),
            }
        };
        rows.push((
            seconds,
            count(input, "ContextTokens", MAX_ROW_INPUT_TOKENS, 1)?,
            count(output, "GeneratedTokens", MAX_ROW_OUTPUT_TOKENS, 1)?,
        ));
    }
    Ok(rows)
}

/// Seconds since the epoch of "2023-11-16 18:15:46.6805900" (UTC; fraction optional).
fn azure_timestamp(raw: &str) -> Option<f64> {
    use time::macros::format_description;
    let (whole, fraction) = match raw.split_once('.') {
        Some((w, f)) if !f.is_empty() && f.len() <= 9 && f.bytes().all(|b| b.is_ascii_digit()) => {
            (w, format!("0.{f}").parse::<f64>().ok()?)
        }
        Some(_) => return None,
        None => (raw, 0.0),
    };
    let format = format_description!("[year]-[month]-[day] [hour]:[minute]:[second]");
    let t = time::PrimitiveDateTime::parse(whole, &format).ok()?;
    Some(t.assume_utc().unix_timestamp() as f64 + fraction)
}

fn jsonl(text: &str, max_rows: usize) -> Result<Vec<(f64, u32, u32)>> {
    let shape = "`timestamp`, `input_tokens` and `output_tokens`";
    super::jsonl::rows(text, max_rows, shape, |value, line_no| {
        let seconds = match value.get("timestamp").and_then(Value::as_f64) {
            Some(t) if t.is_finite() && t.abs() < 1e12 => t,
            _ => bail!("line {line_no}: field `timestamp`: expected a number of seconds"),
        };
        let count = |name: &str, max: u64| -> Result<u32> {
            match value.get(name).and_then(Value::as_u64) {
                Some(n) if (1..=max).contains(&n) => Ok(n as u32),
                _ => {
                    bail!("line {line_no}: field `{name}`: expected a whole number from 1 to {max}")
                }
            }
        };
        Ok((
            seconds,
            count("input_tokens", MAX_ROW_INPUT_TOKENS)?,
            count("output_tokens", MAX_ROW_OUTPUT_TOKENS)?,
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const AZURE: &str = "TIMESTAMP,ContextTokens,GeneratedTokens\n\
        2023-11-16 18:15:46.6805900,374,44\n\
        2023-11-16 18:15:50.9951690,396,109\n\
        2023-11-16 18:15:51.2000000,879,65\n";

    #[test]
    fn azure_rows_are_relative_to_the_first_arrival() {
        let trace = order(azure_csv(AZURE, 100).unwrap());
        assert_eq!(trace.entries.len(), 3);
        assert_eq!(trace.entries[0].at, Duration::ZERO);
        let second = trace.entries[1].at.as_secs_f64();
        assert!((second - 4.314579).abs() < 1e-5, "{second}");
        assert_eq!(trace.entries[2].input_tokens, 879);
        assert_eq!(trace.entries[2].output_tokens, 65);
        assert_eq!(trace.out_of_order, 0);
        assert_eq!(order(azure_csv(AZURE, 2).unwrap()).entries.len(), 2);
    }

    #[test]
    fn azure_errors_name_line_and_column() {
        for (bad, expect) in [
            ("TIME,ContextTokens,GeneratedTokens\n", "no column `TIMESTAMP`"),
            (
                "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,12,x\n",
                "line 2: column `GeneratedTokens`",
            ),
            (
                "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,1,1\nyesterday,1,1\n",
                "line 3: column `TIMESTAMP`",
            ),
            (
                "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,0,1\n",
                "line 2: column `ContextTokens`",
            ),
            (
                "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,1\n",
                "line 2",
            ),
        ] {
            let err = format!("{:#}", azure_csv(bad, 10).unwrap_err());
            assert!(err.contains(expect), "{bad:?}: {err}");
        }
    }

    #[test]
    fn jsonl_rows_sorted_with_out_of_order_counted() {
        let text = "{\"timestamp\": 100.5, \"input_tokens\": 10, \"output_tokens\": 5}\n\
                    {\"timestamp\": 100.0, \"input_tokens\": 20, \"output_tokens\": 6}\n\
                    \n{\"timestamp\": 103.0, \"input_tokens\": 30, \"output_tokens\": 7}\n";
        let trace = order(jsonl(text, 10).unwrap());
        assert_eq!(trace.out_of_order, 1);
        let at: Vec<f64> = trace.entries.iter().map(|e| e.at.as_secs_f64()).collect();
        assert_eq!(at, vec![0.0, 0.5, 3.0]);
        assert_eq!(trace.entries[0].input_tokens, 20);
        assert_eq!(trace.span(), Duration::from_secs(3));
        for (bad, expect) in [
            (
                "{\"input_tokens\": 1, \"output_tokens\": 1}",
                "line 1: field `timestamp`",
            ),
            (
                "{\"timestamp\": 1, \"output_tokens\": 1}",
                "line 1: field `input_tokens`",
            ),
            (
                "{\"timestamp\": 1, \"input_tokens\": 1, \"output_tokens\": 0}",
                "field `output_tokens`",
            ),
            (
                "{\"timestamp\": 1e300, \"input_tokens\": 1, \"output_tokens\": 1}",
                "field `timestamp`",
            ),
            ("nope", "line 1, column 2: not valid JSON"),
        ] {
            let err = format!("{:#}", jsonl(bad, 10).unwrap_err());
            assert!(err.contains(expect), "{bad}: {err}");
        }
    }

    #[test]
    fn files_pick_the_format_by_extension() {
        let dir = tempfile::tempdir().unwrap();
        let csv = dir.path().join("azure.csv");
        std::fs::write(&csv, AZURE).unwrap();
        assert_eq!(load(&csv, 10).unwrap().entries.len(), 3);
        let empty = dir.path().join("t.jsonl");
        std::fs::write(&empty, "\n").unwrap();
        let err = format!("{:#}", load(&empty, 10).unwrap_err());
        assert!(err.contains("holds no request"), "{err}");
    }
}
