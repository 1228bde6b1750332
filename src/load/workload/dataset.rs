//! Datasets of real requests, read from files the user points to (nothing is downloaded):
//!
//! * **ShareGPT** JSON (an array of `{"conversations": [{"from": "human", "value": ...},
//!   {"from": "gpt", "value": ...}, ...]}`, as vLLM's and SGLang's benchmarks read it): the
//!   first human turn is the prompt, the answer after it sets the request's output length.
//!   With `turns` above 1 a conversation keeps its later human turns and their reference
//!   answers too (up to `turns` pairs, stopping where the turns stop alternating), for
//!   multi-turn runs (load/workload/conversation.rs).
//! * **JSONL**, one request per line: `prompt` (text) or `messages` (chat), and optionally
//!   `max_tokens` (this request's output length) and `output` (a reference answer whose
//!   length sets it instead).
//!
//! Output lengths are token counts from a [`TokenCounter`]: the model's tokenizer where the
//! profile names one, else an estimate that says it is one.

use std::path::Path;

use anyhow::{anyhow, bail, Context, Result};
use serde::Deserialize;
use serde_json::Value;

use super::prompts::Prompt;

/// The largest dataset file read (ShareGPT V3 is about 650 MB; a bound, not a target).
pub const DATASET_FILE_BYTES: u64 = 2 * 1024 * 1024 * 1024;

/// The longest output a dataset row may ask for (a row asking for more is an error in the
/// file, not a request to send).
pub const MAX_ROW_OUTPUT_TOKENS: u64 = 1 << 20;

/// One request of a dataset.
#[derive(Debug, Clone, PartialEq)]
pub struct DatasetRow {
    pub prompt: Prompt,
    /// The output length this request asks for; None leaves the profile's `max_tokens`.
    pub max_tokens: Option<u32>,
    /// Multi-turn datasets: the conversation's turns, the first included (empty otherwise).
    pub turns: Vec<ChatTurn>,
}

/// One turn of a conversation: what the user says and the dataset's answer to it.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatTurn {
    pub user: String,
    pub answer: String,
    /// The answer's length in tokens: the output length this turn asks for.
    pub answer_tokens: u32,
}

/// Counts tokens in text.
pub trait TokenCounter {
    fn count(&self, text: &str) -> usize;
    /// "exact (tokenizer.json)" or "estimated (...)", for the run's notes.
    fn describe(&self) -> String;
}

/// The estimate used when no tokenizer is given: about 4 characters per token for English
/// text under the common BPE vocabularies (OpenAI's rule of thumb), at least one token per
/// word. Stated as an estimate wherever it is used.
pub struct EstimatedTokens;

impl TokenCounter for EstimatedTokens {
    fn count(&self, text: &str) -> usize {
        let words = text.split_whitespace().count();
        (text.chars().count().div_ceil(4)).max(words)
    }
    fn describe(&self) -> String {
        "estimated (about 4 characters per token; name the model's tokenizer for exact counts)"
            .into()
    }
}

pub use crate::profile::DatasetFormat;

/// Reads a dataset; `max_rows` keeps the first rows only (a bound on memory and on the run);
/// `turns` above 1 keeps that many turns of each ShareGPT conversation.
pub fn load(
    path: &Path,
    format: DatasetFormat,
    max_rows: usize,
    turns: usize,
    counter: &dyn TokenCounter,
) -> Result<Vec<DatasetRow>> {
    let text = crate::fsutil::read_bounded(path, DATASET_FILE_BYTES)
        .with_context(|| format!("cannot read dataset {}", path.display()))?;
    let rows = match format {
        DatasetFormat::Sharegpt => sharegpt(&text, max_rows, turns, counter),
        DatasetFormat::Jsonl => jsonl(&text, max_rows, counter),
    }
    .with_context(|| format!("dataset {}", path.display()))?;
    if rows.is_empty() {
        bail!("dataset {} holds no usable request", path.display());
    }
    Ok(rows)
}

#[derive(Deserialize)]
struct Conversation {
    #[serde(default)]
    conversations: Vec<Turn>,
}

#[derive(Deserialize)]
struct Turn {
    from: String,
    value: String,
}

/// ShareGPT: conversations whose first turn is a human's and whose second answers it; the
/// others (system-first, empty, one-sided) are skipped, as the reference benchmarks do.
/// With `turns` above 1, the following human/answer pairs are kept too, up to `turns`.
fn sharegpt(
    text: &str,
    max_rows: usize,
    turns: usize,
    counter: &dyn TokenCounter,
) -> Result<Vec<DatasetRow>> {
    let conversations: Vec<Conversation> = serde_json::from_str(text).map_err(|e| {
        anyhow!(
            "line {}, column {}: {}; expected ShareGPT JSON: an array of objects, each with \
             `conversations`, an array of {{\"from\": \"human\" or \"gpt\", \"value\": \
             text}}",
            e.line(),
            e.column(),
            super::data_error::json_problem(&e)
        )
    })?;
    let mut rows = Vec::new();
    for c in conversations {
        if rows.len() >= max_rows {
            break;
        }
        let pairs = answered_pairs(&c.conversations, turns.max(1), counter);
        let Some(first) = pairs.first() else {
            continue;
        };
        rows.push(DatasetRow {
            prompt: Prompt::Text(first.user.clone()),
            max_tokens: Some(first.answer_tokens),
            turns: if turns > 1 { pairs } else { Vec::new() },
        });
    }
    Ok(rows)
}

/// The leading (human, answer) pairs of a conversation, at most `most`: it stops at a turn
/// out of alternation, an empty question or an empty answer.
fn answered_pairs(turns: &[Turn], most: usize, counter: &dyn TokenCounter) -> Vec<ChatTurn> {
    let mut pairs = Vec::new();
    for pair in turns.chunks_exact(2).take(most) {
        let [question, answer] = pair else { break };
        if !is_human(&question.from) || is_human(&answer.from) || question.value.trim().is_empty() {
            break;
        }
        let tokens = counter.count(&answer.value);
        if tokens == 0 {
            break;
        }
        pairs.push(ChatTurn {
            user: question.value.clone(),
            answer: answer.value.clone(),
            answer_tokens: tokens.min(MAX_ROW_OUTPUT_TOKENS as usize) as u32,
        });
    }
    pairs
}

fn is_human(from: &str) -> bool {
    matches!(from, "human" | "user")
}

/// JSONL: one request per line; errors name the line and the field.
fn jsonl(text: &str, max_rows: usize, counter: &dyn TokenCounter) -> Result<Vec<DatasetRow>> {
    let shape = "`prompt` (text) or `messages` (an array)";
    super::jsonl::rows(text, max_rows, shape, |value, line_no| {
        let prompt = if let Some(p) = value.get("prompt").and_then(Value::as_str) {
            Prompt::Text(p.to_string())
        } else if let Some(m) = value.get("messages").and_then(Value::as_array) {
            if m.is_empty()
                || m.iter()
                    .any(|msg| msg.get("role").and_then(Value::as_str).is_none())
            {
                bail!("line {line_no}: field `messages`: a non-empty array, each with a `role`");
            }
            Prompt::Messages(m.clone())
        } else {
            bail!("line {line_no}: expected a field `prompt` (string) or `messages` (array)");
        };
        let max_tokens = match (value.get("max_tokens"), value.get("output")) {
            (Some(v), _) => Some(row_tokens(v, line_no)?),
            (None, Some(Value::String(answer))) => match counter.count(answer) {
                0 => bail!("line {line_no}: field `output` is empty"),
                n => Some(n.min(MAX_ROW_OUTPUT_TOKENS as usize) as u32),
            },
            (None, Some(_)) => bail!("line {line_no}: field `output`: expected a string"),
            (None, None) => None,
        };
        Ok(DatasetRow {
            prompt,
            max_tokens,
            turns: Vec::new(),
        })
    })
}

fn row_tokens(v: &Value, line_no: usize) -> Result<u32> {
    match v.as_u64() {
        Some(n) if (1..=MAX_ROW_OUTPUT_TOKENS).contains(&n) => Ok(n as u32),
        _ => bail!(
            "line {line_no}: field `max_tokens`: expected a whole number from 1 to \
             {MAX_ROW_OUTPUT_TOKENS}, got {}",
            json_kind(v)
        ),
    }
}

/// The kind of a JSON value, for a message that must not quote it.
fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_u64() => "a whole number out of range",
        Value::Number(_) => "a number that is not a positive whole number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Words;
    impl TokenCounter for Words {
        fn count(&self, text: &str) -> usize {
            text.split_whitespace().count()
        }
        fn describe(&self) -> String {
            "words".into()
        }
    }

    #[test]
    fn sharegpt_takes_first_human_turn_and_the_answers_length() {
        let text = r#"[
          {"id": "a", "conversations": [
             {"from": "human", "value": "What is a KV cache?"},
             {"from": "gpt", "value": "It keeps the keys and values of past tokens."},
             {"from": "human", "value": "And paging?"}]},
          {"id": "b", "conversations": [{"from": "gpt", "value": "starts with the model"},
                                        {"from": "human", "value": "skipped"}]},
          {"id": "c", "conversations": [{"from": "human", "value": "one-sided"}]},
          {"id": "d", "conversations": []},
          {"id": "e", "conversations": [
             {"from": "human", "value": "Say hi"}, {"from": "gpt", "value": "hi"}]}
        ]"#;
        let rows = sharegpt(text, 100, 1, &Words).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].prompt, Prompt::Text("What is a KV cache?".into()));
        assert_eq!(rows[0].max_tokens, Some(9));
        assert_eq!(rows[1].max_tokens, Some(1));
        assert_eq!(sharegpt(text, 1, 1, &Words).unwrap().len(), 1);
        assert!(
            rows.iter().all(|r| r.turns.is_empty()),
            "one turn keeps no history"
        );
    }

    /// Multi-turn: the leading answered pairs, up to `turns`, stopping where they stop.
    #[test]
    fn sharegpt_keeps_the_answered_turns_for_multi_turn_runs() {
        let text = r#"[
          {"conversations": [
             {"from": "human", "value": "q1"}, {"from": "gpt", "value": "a b"},
             {"from": "human", "value": "q2"}, {"from": "gpt", "value": "c d e"},
             {"from": "human", "value": "q3"}, {"from": "gpt", "value": "f"}]},
          {"conversations": [
             {"from": "human", "value": "r1"}, {"from": "gpt", "value": "x"},
             {"from": "human", "value": "r2"}, {"from": "human", "value": "out of turn"}]},
          {"conversations": [
             {"from": "human", "value": "s1"}, {"from": "gpt", "value": "y"},
             {"from": "human", "value": "unanswered"}]}
        ]"#;
        let rows = sharegpt(text, 10, 2, &Words).unwrap();
        let shape: Vec<Vec<(&str, &str, u32)>> = (rows.iter())
            .map(|r| {
                (r.turns.iter())
                    .map(|t| (t.user.as_str(), t.answer.as_str(), t.answer_tokens))
                    .collect()
            })
            .collect();
        assert_eq!(
            shape,
            vec![
                vec![("q1", "a b", 2), ("q2", "c d e", 3)],
                vec![("r1", "x", 1)],
                vec![("s1", "y", 1)],
            ]
        );
        assert_eq!(rows[0].prompt, Prompt::Text("q1".into()));
        assert_eq!(rows[0].max_tokens, Some(2));
        assert_eq!(sharegpt(text, 10, 3, &Words).unwrap()[0].turns.len(), 3);
    }

    #[test]
    fn sharegpt_errors_say_where() {
        let err = format!(
            "{:#}",
            sharegpt("[{\"conversations\": [}]", 10, 1, &Words).unwrap_err()
        );
        assert!(err.contains("line 1, column"), "{err}");
        let err = format!(
            "{:#}",
            sharegpt("{\"not\": \"an array\"}", 10, 1, &Words).unwrap_err()
        );
        assert!(err.contains("ShareGPT"), "{err}");
        // The file's text is never quoted: a file of secrets named as a dataset.
        let secret = "sk-secret-value";
        for (text, found) in [
            (format!("[\"{secret}\"]"), "a string"),
            (
                format!("[{{\"conversations\": [{{\"from\": \"{secret}\"}}]}}]"),
                "`value`",
            ),
            (format!("[{{\"conversations\": \"{secret}\"}}]"), "a string"),
            (
                format!("[{{\"conversations\": [{{\"from\": 1, \"value\": \"{secret}\"}}]}}]"),
                "an integer",
            ),
            (
                format!("[{{\"conversations\": []}} \"{secret}\"]"),
                "not valid JSON (expected `,` or `]`)",
            ),
        ] {
            let err = format!("{:#}", sharegpt(&text, 10, 1, &Words).unwrap_err());
            assert!(!err.contains("secret"), "{err}");
            assert!(
                err.contains(found) && err.contains("line 1, column"),
                "{err}"
            );
            assert!(err.contains("expected ShareGPT JSON"), "{err}");
        }
    }

    #[test]
    fn jsonl_rows_with_lengths_and_their_errors() {
        let text = "{\"prompt\": \"a b\", \"max_tokens\": 64}\n\n\
                    {\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"output\": \"one two three\"}\n\
                    {\"prompt\": \"no length\"}\n";
        let rows = jsonl(text, 10, &Words).unwrap();
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[0].max_tokens, Some(64));
        assert_eq!(rows[1].max_tokens, Some(3));
        assert_eq!(rows[2].max_tokens, None);
        for (bad, expect) in [
            (
                "{\"prompt\": \"p\", \"max_tokens\": 0}",
                "line 1: field `max_tokens`",
            ),
            (
                "{\"prompt\": \"p\", \"max_tokens\": -3}",
                "line 1: field `max_tokens`",
            ),
            (
                "{\"prompt\": \"p\", \"max_tokens\": 1e12}",
                "line 1: field `max_tokens`",
            ),
            (
                "{\"prompt\": \"p\", \"output\": 7}",
                "line 1: field `output`",
            ),
            ("{\"messages\": []}", "line 1: field `messages`"),
            ("{\"text\": \"p\"}", "line 1: expected a field `prompt`"),
            (
                "{\"prompt\": \"p\"}\nnot json",
                "line 2, column 2: not valid JSON",
            ),
        ] {
            let err = format!("{:#}", jsonl(bad, 10, &Words).unwrap_err());
            assert!(err.contains(expect), "{bad}: {err}");
        }
    }

    #[test]
    fn the_estimate_is_about_four_characters_and_at_least_a_word() {
        assert_eq!(EstimatedTokens.count("abcdefgh"), 2);
        assert_eq!(EstimatedTokens.count("a b c d e"), 5);
        assert_eq!(EstimatedTokens.count(""), 0);
        assert!(EstimatedTokens.describe().starts_with("estimated"));
    }

    #[test]
    fn files_are_bounded_and_empty_datasets_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.jsonl");
        std::fs::write(&path, "\n\n").unwrap();
        let err = format!(
            "{:#}",
            load(&path, DatasetFormat::Jsonl, 10, 1, &Words).unwrap_err()
        );
        assert!(err.contains("holds no usable request"), "{err}");
        let err = format!(
            "{:#}",
            load(dir.path(), DatasetFormat::Jsonl, 10, 1, &Words).unwrap_err()
        );
        assert!(err.contains("not a regular file"), "{err}");
    }
}
