//! The prompts requests carry: synthetic text of a given length, or lines of a JSONL file.
//!
//! Synthetic prompts are deterministic apart from a per-run tag in their first words (request i
//! always gets the same words), and differ from
//! one request to the next, so a server's prefix cache cannot turn the sweep into a cache test.

use std::path::Path;

use anyhow::{bail, Context, Result};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use serde_json::Value;

use crate::tokenize::{ModelTokenizer, SharedTokenizer};

/// One prompt, in the shape the chosen API wants.
#[derive(Debug, Clone, PartialEq)]
pub enum Prompt {
    Text(String),
    /// Chat messages as given in a prompts file.
    Messages(Vec<Value>),
}

impl Prompt {
    /// The prompt as chat messages.
    pub fn to_messages(&self) -> Value {
        match self {
            Prompt::Text(t) => serde_json::json!([{"role": "user", "content": t}]),
            Prompt::Messages(m) => Value::Array(m.clone()),
        }
    }

    /// The prompt as plain text (messages joined by blank lines).
    pub fn to_text(&self) -> String {
        match self {
            Prompt::Text(t) => t.clone(),
            Prompt::Messages(m) => m
                .iter()
                .filter_map(|msg| msg.get("content").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n\n"),
        }
    }
}

/// The prompts of a run.
#[derive(Debug, Clone)]
pub enum Prompts {
    /// `run_tag` opens every prompt of a run: a server kept running between runs (a CI runner
    /// that keeps its engine up) would otherwise serve the second run's prompts from its
    /// prefix cache and make it look faster than the first.
    Synthetic {
        words: u32,
        run_tag: u32,
        /// With the model's tokenizer, `words` (and a drawn length) is a number of tokens,
        /// made exact by cutting the text at that many tokens.
        tokenizer: Option<SharedTokenizer>,
        /// `workload.shared_prefix_tokens`: the groups' system prompts (request n takes
        /// prefix n mod their number) and their length.
        prefixes: Option<(std::sync::Arc<[String]>, u32)>,
    },
    /// A prompts file's or a dataset's prompts, used round-robin.
    File(Vec<Prompt>),
}

const WORDS: &[&str] = &[
    "the",
    "model",
    "server",
    "token",
    "batch",
    "memory",
    "latency",
    "request",
    "queue",
    "kernel",
    "cache",
    "decode",
    "prefill",
    "tensor",
    "layer",
    "weight",
    "stream",
    "answer",
    "question",
    "write",
    "explain",
    "function",
    "python",
    "binary",
    "search",
    "sorted",
    "array",
    "merge",
    "list",
    "efficient",
    "example",
    "detail",
    "network",
    "protocol",
    "garbage",
    "collection",
    "docker",
    "build",
    "stage",
    "modal",
    "dialog",
    "animation",
    "tree",
    "insert",
    "delete",
    "proof",
    "complexity",
    "monitor",
    "disk",
    "alert",
];

impl Prompts {
    /// Synthetic prompts of `words` words, or the prompts of a JSONL file.
    pub fn load(words: u32, file: Option<&Path>) -> Result<Prompts> {
        match file {
            None => Ok(Prompts::Synthetic {
                words,
                run_tag: rand::random(),
                tokenizer: None,
                prefixes: None,
            }),
            Some(path) => Ok(Prompts::File(read_jsonl(path)?)),
        }
    }

    /// The prompt for request number `index` (files are used round-robin).
    pub fn get(&self, index: u64) -> Prompt {
        match self {
            Prompts::Synthetic { words, .. } => self.get_sized(index, Some(*words)),
            Prompts::File(list) => list[(index % list.len() as u64) as usize].clone(),
        }
    }

    /// The prompt for request number `index`, of `words` words (tokens, with a tokenizer)
    /// when given (a drawn length; synthetic prompts only).
    pub fn get_sized(&self, index: u64, words: Option<u32>) -> Prompt {
        match (self, words) {
            (
                Prompts::Synthetic {
                    run_tag,
                    tokenizer,
                    prefixes,
                    ..
                },
                Some(w),
            ) => {
                let text = match tokenizer {
                    Some(t) => exact(&t.0, *run_tag, index, w),
                    None => synthetic(*run_tag, index, w),
                };
                match prefixes {
                    Some((list, _)) => Prompt::Messages(vec![
                        serde_json::json!({
                            "role": "system",
                            "content": list[(index % list.len() as u64) as usize],
                        }),
                        serde_json::json!({"role": "user", "content": text}),
                    ]),
                    None => Prompt::Text(text),
                }
            }
            _ => self.get(index),
        }
    }

    /// Synthetic prompts opened by one of `groups` shared system prompts of `tokens` tokens
    /// (words without a tokenizer; set the tokenizer first). Each prefix opens with the
    /// run's tag, so a later run does not find the last run's prefixes cached either.
    pub fn with_prefixes(mut self, tokens: u32, groups: u32) -> Prompts {
        if let Prompts::Synthetic {
            run_tag,
            tokenizer,
            prefixes,
            ..
        } = &mut self
        {
            let list: Vec<String> = (0..u64::from(groups.max(1)))
                .map(|g| {
                    // Seeds far from the requests' own (request numbers count up from 0).
                    let seed = u64::MAX - g;
                    match tokenizer {
                        Some(t) => exact(&t.0, *run_tag, seed, tokens),
                        None => synthetic(*run_tag, seed, tokens),
                    }
                })
                .collect();
            *prefixes = Some((list.into(), tokens));
        }
        self
    }

    /// The shared prefix's length in tokens (words without a tokenizer), 0 without one.
    pub fn prefix_tokens(&self) -> u32 {
        match self {
            Prompts::Synthetic {
                prefixes: Some((_, n)),
                ..
            } => *n,
            _ => 0,
        }
    }

    /// True when synthetic lengths are tokens of the model's tokenizer, not words.
    pub fn exact(&self) -> bool {
        matches!(
            self,
            Prompts::Synthetic {
                tokenizer: Some(_),
                ..
            }
        )
    }
}

/// A synthetic prompt of exactly `tokens` tokens: the words of [`synthetic`] (run tag first,
/// so a prefix cache still cannot help) cut at that many tokens. The source is made longer
/// until it holds enough tokens; the cut is the closest the tokenizer allows (exact for
/// every length tested; a miss shows in the trial's input-length check).
fn exact(tokenizer: &ModelTokenizer, run_tag: u32, index: u64, tokens: u32) -> String {
    let mut words = tokens.saturating_add(8);
    loop {
        let source = synthetic(run_tag, index, words);
        match tokenizer.fit(&source, tokens as usize) {
            Ok((text, _)) => return text,
            Err(_) if words < tokens.saturating_mul(4).saturating_add(64) => {
                words = words.saturating_mul(2)
            }
            Err(_) => return source,
        }
    }
}

fn synthetic(run_tag: u32, index: u64, words: u32) -> String {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(index);
    let mut text = format!("Run {run_tag:08x} request {index}:");
    for _ in 0..words.saturating_sub(4) {
        text.push(' ');
        text.push_str(WORDS.choose(&mut rng).unwrap_or(&"token"));
    }
    text
}

/// The largest prompts file read: every prompt is held in memory for the run.
pub const PROMPTS_FILE_BYTES: u64 = 1024 * 1024 * 1024;

fn read_jsonl(path: &Path) -> Result<Vec<Prompt>> {
    let text = crate::fsutil::read_bounded(path, PROMPTS_FILE_BYTES)
        .with_context(|| format!("cannot read prompts file {}", path.display()))?;
    let mut prompts = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line_no = i + 1;
        if line.trim().is_empty() {
            continue;
        }
        let value: Value = serde_json::from_str(line).map_err(|e| {
            anyhow::anyhow!(
                "{}:{line_no}, column {}: {}; expected one JSON object per line, with `prompt` \
                 (text) or `messages` (an array)",
                path.display(),
                e.column(),
                super::data_error::json_problem(&e)
            )
        })?;
        let prompt = if let Some(p) = value.get("prompt").and_then(Value::as_str) {
            Prompt::Text(p.to_string())
        } else if let Some(m) = value.get("messages").and_then(Value::as_array) {
            if m.iter()
                .any(|msg| msg.get("role").and_then(Value::as_str).is_none())
            {
                bail!(
                    "{}:{line_no}: field `messages`: every message needs a `role`",
                    path.display()
                );
            }
            Prompt::Messages(m.clone())
        } else {
            bail!(
                "{}:{line_no}: expected a field `prompt` (string) or `messages` (array)",
                path.display()
            );
        };
        prompts.push(prompt);
    }
    if prompts.is_empty() {
        bail!("prompts file {} holds no prompts", path.display());
    }
    Ok(prompts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn synthetic_prompts_are_deterministic_distinct_and_sized() {
        let p = Prompts::Synthetic {
            words: 50,
            run_tag: 7,
            tokenizer: None,
            prefixes: None,
        };
        assert_eq!(p.get(3), p.get(3));
        assert_ne!(p.get(3), p.get(4));
        assert_eq!(p.get(7).to_text().split_whitespace().count(), 50);
        // Another run: same words, but a different opening, so no prefix is shared.
        let other = Prompts::Synthetic {
            words: 50,
            run_tag: 8,
            tokenizer: None,
            prefixes: None,
        };
        let (a, b) = (p.get(3).to_text(), other.get(3).to_text());
        assert_ne!(a.split(' ').nth(1), b.split(' ').nth(1));
        assert_eq!(
            a.split(' ').skip(4).collect::<Vec<_>>(),
            b.split(' ').skip(4).collect::<Vec<_>>()
        );
    }

    /// With the model's tokenizer, a synthetic prompt is exactly the asked number of tokens,
    /// still opens with the run's tag, and differs from request to request.
    #[test]
    fn tokenizer_prompts_are_exact_in_tokens() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/tokenizer");
        let t = std::sync::Arc::new(ModelTokenizer::load(&path).unwrap());
        let p = Prompts::Synthetic {
            words: 100,
            run_tag: 0xabcd,
            tokenizer: Some(SharedTokenizer(t.clone())),
            prefixes: None,
        };
        assert!(p.exact());
        for (i, n) in [(0, 100), (1, 100), (2, 7), (3, 1000), (4, 1), (5, 33)] {
            let text = p.get_sized(i, Some(n)).to_text();
            assert_eq!(
                t.count(&text),
                n as usize,
                "request {i}, {n} tokens: {text:?}"
            );
            if n >= 7 {
                assert!(text.starts_with("Run 0000abcd"), "{text}");
            }
        }
        assert_ne!(p.get(0), p.get(1));
        assert_eq!(t.count(&p.get(9).to_text()), 100);
    }

    /// Requests of a group share their system prompt exactly; groups and runs do not.
    #[test]
    fn shared_prefixes_are_shared_within_a_group_only() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/tokenizer");
        let t = std::sync::Arc::new(ModelTokenizer::load(&path).unwrap());
        let run = |tag: u32| {
            Prompts::Synthetic {
                words: 30,
                run_tag: tag,
                tokenizer: Some(SharedTokenizer(t.clone())),
                prefixes: None,
            }
            .with_prefixes(64, 3)
        };
        let p = run(1);
        let system = |p: &Prompts, i: u64| match p.get(i) {
            Prompt::Messages(m) => {
                assert_eq!(t.count(m[1]["content"].as_str().unwrap()), 30);
                m[0]["content"].as_str().unwrap().to_string()
            }
            other => panic!("{other:?}"),
        };
        assert_eq!(system(&p, 0), system(&p, 3));
        assert_ne!(system(&p, 0), system(&p, 1));
        assert_ne!(system(&p, 0), system(&run(2), 0));
        assert_eq!(t.count(&system(&p, 2)), 64);
        assert_eq!(p.prefix_tokens(), 64);
    }

    #[test]
    fn jsonl_errors_name_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.jsonl");
        std::fs::write(
            &path,
            "{\"prompt\":\"hi\"}\n{\"messages\":[{\"content\":\"x\"}]}\n",
        )
        .unwrap();
        let err = format!("{:#}", Prompts::load(10, Some(&path)).unwrap_err());
        assert!(err.contains("p.jsonl:2") && err.contains("role"), "{err}");
        std::fs::write(
            &path,
            "{\"prompt\":\"hi\"}\n\n{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}\n",
        )
        .unwrap();
        let p = Prompts::load(10, Some(&path)).unwrap();
        assert_eq!(p.get(1).to_text(), "x");
        assert_eq!(p.get(2).to_text(), "hi");
    }
}
