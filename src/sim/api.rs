//! OpenAI request parsing and response shapes, kept apart from the HTTP plumbing.
//!
//! Prompt tokens are counted as whitespace-separated words of the prompt (or of every
//! message's text), or as the length of a token-id array: simple and deterministic, so a
//! test knows the count without a tokenizer. With `--tokenizer`, text is counted with that
//! tokenizer instead (message contents each, no chat template: the template's few tokens
//! are the engine's, not the prompt's). Each output token is one short word followed
//! by a space, so a chunk carrying k tokens carries k words.

use serde_json::{json, Value};

use super::prefix_cache::{chain, Candidates, Prefix};
use super::sched::{FinishReason, GenParams};
use crate::tokenize::ModelTokenizer;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Chat,
    Completion,
}

/// A validated request.
#[derive(Debug, Clone, PartialEq)]
pub struct Parsed {
    pub params: GenParams,
    pub stream: bool,
    pub include_usage: bool,
    pub continuous_usage: bool,
    /// The OpenAI `user` field, when it is a string.
    pub user: Option<String>,
}

/// Parses and validates a request body; the error is the message for a 400.
pub fn parse(
    kind: Kind,
    body: &[u8],
    default_max_tokens: u32,
    tokenizer: Option<&ModelTokenizer>,
) -> Result<Parsed, String> {
    let v: Value = serde_json::from_slice(body).map_err(|e| format!("invalid JSON body: {e}"))?;
    let obj = v.as_object().ok_or("request body must be a JSON object")?;
    let count = |s: &str| match tokenizer {
        Some(t) => u32::try_from(t.count(s)).unwrap_or(u32::MAX),
        None => words(s),
    };
    let (prompt_tokens, prefixes, conversation) = match kind {
        Kind::Chat => count_messages(obj.get("messages"), &count)?,
        Kind::Completion => (count_prompt(obj.get("prompt"), &count)?, [None; 3], None),
    };
    let uint = |key: &str| -> Result<Option<u32>, String> {
        match obj.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(x) => x
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .map(Some)
                .ok_or_else(|| format!("`{key}` must be a non-negative integer")),
        }
    };
    let flag = |o: &serde_json::Map<String, Value>, key: &str| -> Result<bool, String> {
        match o.get(key) {
            None | Some(Value::Null) => Ok(false),
            Some(Value::Bool(b)) => Ok(*b),
            Some(_) => Err(format!("`{key}` must be a boolean")),
        }
    };
    let max_tokens = match (uint("max_tokens")?, uint("max_completion_tokens")?) {
        (Some(m), _) | (None, Some(m)) => m,
        (None, None) => default_max_tokens,
    };
    if max_tokens == 0 {
        return Err("`max_tokens` must be at least 1".into());
    }
    let min_tokens = uint("min_tokens")?.unwrap_or(0);
    if min_tokens > max_tokens {
        return Err(format!(
            "`min_tokens` ({min_tokens}) must not exceed `max_tokens` ({max_tokens})"
        ));
    }
    if let Some(n) = uint("n")? {
        if n != 1 {
            return Err("only `n` = 1 is supported".into());
        }
    }
    let empty = serde_json::Map::new();
    let opts = match obj.get("stream_options") {
        None | Some(Value::Null) => &empty,
        Some(Value::Object(o)) => o,
        Some(_) => return Err("`stream_options` must be an object".into()),
    };
    Ok(Parsed {
        params: GenParams {
            prompt_tokens,
            max_tokens,
            min_tokens,
            ignore_eos: flag(obj, "ignore_eos")?,
            prefixes,
            conversation,
        },
        stream: flag(obj, "stream")?,
        include_usage: flag(opts, "include_usage")?,
        continuous_usage: flag(opts, "continuous_usage_stats")?,
        user: obj.get("user").and_then(Value::as_str).map(str::to_string),
    })
}

fn words(s: &str) -> u32 {
    s.split_whitespace().count() as u32
}

/// The messages' prompt tokens, their cacheable prefixes, and the whole prompt as a prefix
/// (which the request's answer extends when it finishes).
fn count_messages(
    messages: Option<&Value>,
    count: &dyn Fn(&str) -> u32,
) -> Result<(u32, Candidates, Option<Prefix>), String> {
    let list = match messages {
        Some(Value::Array(l)) if !l.is_empty() => l,
        Some(Value::Array(_)) => return Err("`messages` must not be empty".into()),
        Some(_) => return Err("`messages` must be an array".into()),
        None => return Err("missing `messages`".into()),
    };
    // The prefix after each message (its chained hash and the tokens so far).
    let mut after = Vec::with_capacity(list.len());
    let (mut n, mut hash) = (0u32, 0u64);
    for m in list {
        let texts: Vec<&str> = match m.get("content") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::String(s)) => vec![s],
            Some(Value::Array(parts)) => parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect(),
            Some(_) => return Err("message `content` must be a string or an array".into()),
        };
        n = (texts.iter().map(|t| count(t))).fold(n, u32::saturating_add);
        hash = chain(hash, texts);
        after.push(Prefix { hash, tokens: n });
    }
    let last = after.len() - 1;
    let mut candidates: Candidates = [None; 3];
    let picks = [
        last.checked_sub(1),
        last.checked_sub(2),
        (last > 0).then_some(0),
    ];
    let mut taken = 0;
    for i in picks.into_iter().flatten() {
        let p = after[i];
        if p.tokens > 0 && !candidates.contains(&Some(p)) {
            candidates[taken] = Some(p);
            taken += 1;
        }
    }
    Ok((n, candidates, Some(after[last]).filter(|p| p.tokens > 0)))
}

fn count_prompt(prompt: Option<&Value>, count: &dyn Fn(&str) -> u32) -> Result<u32, String> {
    match prompt {
        Some(Value::String(s)) => Ok(count(s)),
        Some(Value::Array(items)) => items.iter().try_fold(0u32, |n, item| match item {
            Value::String(s) => Ok(n.saturating_add(count(s))),
            Value::Number(_) => Ok(n + 1), // a token id
            Value::Array(ids) => Ok(n + ids.len() as u32),
            _ => Err("`prompt` array items must be strings or token ids".to_string()),
        }),
        Some(_) => Err("`prompt` must be a string or an array".into()),
        None => Err("missing `prompt`".into()),
    }
}

/// The usage object; with the prefix cache on (`cached` is Some), the prompt tokens found
/// cached as `prompt_tokens_details.cached_tokens`, as vLLM and OpenAI report them.
pub fn usage(prompt: u32, completion: u32, cached: Option<u32>) -> Value {
    let mut v = json!({
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    });
    if let Some(c) = cached {
        v["prompt_tokens_details"] = json!({ "cached_tokens": c });
    }
    v
}

/// Fields every response object carries.
pub struct Envelope<'a> {
    pub id: &'a str,
    pub created: u64,
    pub model: &'a str,
    pub kind: Kind,
}

impl Envelope<'_> {
    fn with(&self, object: &str, choices: Value) -> Value {
        json!({
            "id": self.id,
            "object": object,
            "created": self.created,
            "model": self.model,
            "choices": choices,
        })
    }

    /// Chat streams open with a role-only chunk (sent on acceptance, so it is not TTFT).
    pub fn role_chunk(&self) -> Value {
        self.chunk_choice(json!({"role": "assistant", "content": ""}), None)
    }

    /// A chunk carrying `text` (one or more tokens); the last one has `finish`.
    pub fn content_chunk(&self, text: &str, finish: Option<FinishReason>) -> Value {
        match self.kind {
            Kind::Chat => self.chunk_choice(json!({ "content": text }), finish),
            Kind::Completion => self.with(
                "text_completion",
                json!([{
                    "index": 0, "text": text, "logprobs": null,
                    "finish_reason": finish.map(FinishReason::as_str),
                }]),
            ),
        }
    }

    fn chunk_choice(&self, delta: Value, finish: Option<FinishReason>) -> Value {
        self.with(
            "chat.completion.chunk",
            json!([{
                "index": 0, "delta": delta, "logprobs": null,
                "finish_reason": finish.map(FinishReason::as_str),
            }]),
        )
    }

    /// The `include_usage` chunk: no choices, just the totals.
    pub fn usage_chunk(&self, usage: Value) -> Value {
        let object = match self.kind {
            Kind::Chat => "chat.completion.chunk",
            Kind::Completion => "text_completion",
        };
        let mut v = self.with(object, json!([]));
        v["usage"] = usage;
        v
    }

    /// The whole non-streaming response.
    pub fn full(&self, text: String, finish: FinishReason, usage: Value) -> Value {
        let mut v = match self.kind {
            Kind::Chat => self.with(
                "chat.completion",
                json!([{
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "logprobs": null,
                    "finish_reason": finish.as_str(),
                }]),
            ),
            Kind::Completion => self.with(
                "text_completion",
                json!([{
                    "index": 0, "text": text, "logprobs": null,
                    "finish_reason": finish.as_str(),
                }]),
            ),
        };
        v["usage"] = usage;
        v
    }
}

/// `GET /version`, as vLLM answers it: the simulator's version (or `--engine-version`), so
/// the probe's engine version detection can be tested against it.
pub fn version_body(version: &str) -> Value {
    json!({ "version": version })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_words_of_messages_and_prompts() {
        let body = br#"{"messages":[{"role":"system","content":"be  brief"},
            {"role":"user","content":[{"type":"text","text":"hi there you"}]}],
            "max_completion_tokens": 7, "stream": true,
            "stream_options": {"include_usage": true}}"#;
        let p = parse(Kind::Chat, body, 100, None).unwrap();
        assert_eq!((p.params.prompt_tokens, p.params.max_tokens), (5, 7));
        assert!(p.stream && p.include_usage && !p.continuous_usage);
        let p = parse(Kind::Completion, br#"{"prompt":[1,2,3]}"#, 100, None).unwrap();
        assert_eq!((p.params.prompt_tokens, p.params.max_tokens), (3, 100));
    }

    /// The cacheable prefixes, counted like the prompt: the messages before the last (a
    /// shared system message, or a conversation's history), before the last two, and the
    /// opening message; the whole prompt is kept apart.
    #[test]
    fn the_messages_before_the_last_are_the_prefixes() {
        let chat = |messages: &str| {
            let body = format!("{{\"messages\": {messages}}}");
            parse(Kind::Chat, body.as_bytes(), 16, None).unwrap().params
        };
        let a =
            chat(r#"[{"role":"system","content":"be brief now"},{"role":"user","content":"hi"}]"#);
        assert_eq!(a.prompt_tokens, 4);
        let system = Prefix {
            hash: chain(0, ["be brief now"]),
            tokens: 3,
        };
        assert_eq!(a.prefixes, [Some(system), None, None]);
        assert_eq!(a.conversation.unwrap().tokens, 4);
        let b = chat(
            r#"[{"role":"system","content":[{"type":"text","text":"be brief now"}]},{"role":"user","content":"other words"}]"#,
        );
        assert_eq!(b.prefixes, a.prefixes, "the same text as parts");
        let c =
            chat(r#"[{"role":"system","content":"be terse now"},{"role":"user","content":"hi"}]"#);
        assert_ne!(c.prefixes, a.prefixes);
        let alone = chat(r#"[{"role":"user","content":"be brief now"}]"#);
        assert_eq!(alone.prefixes, [None; 3], "one message has no history");
        assert_eq!(alone.conversation, Some(system));
        let turn2 = chat(
            r#"[{"role":"system","content":"be brief now"},{"role":"user","content":"q"},{"role":"assistant","content":"the quick "},{"role":"user","content":"and"}]"#,
        );
        let question = chain(system.hash, ["q"]);
        let history = chain(question, ["the quick "]);
        let at = |hash, tokens| Some(Prefix { hash, tokens });
        assert_eq!(
            turn2.prefixes,
            [at(history, 6), at(question, 4), Some(system)]
        );
        assert_eq!(turn2.conversation, at(chain(history, ["and"]), 7));
        let p = parse(Kind::Completion, br#"{"prompt":"be brief now"}"#, 16, None).unwrap();
        assert_eq!(
            (p.params.prefixes, p.params.conversation),
            ([None; 3], None)
        );
        assert_eq!(usage(4, 2, None).get("prompt_tokens_details"), None);
        assert_eq!(
            usage(4, 2, Some(3))["prompt_tokens_details"]["cached_tokens"],
            3
        );
    }

    /// With a tokenizer, text is counted in its tokens (the fixture's count of this text is
    /// 17, from the Python `tokenizers` package); token-id arrays stay one per id.
    #[test]
    fn counts_tokens_with_a_tokenizer() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/tokenizer");
        let t = ModelTokenizer::load(&path).unwrap();
        let text = "Run 1234abcd request 7: the model server token batch memory";
        let body = serde_json::json!({"prompt": text}).to_string();
        let p = parse(Kind::Completion, body.as_bytes(), 100, Some(&t)).unwrap();
        assert_eq!(p.params.prompt_tokens, 17);
        let body = serde_json::json!({"messages": [{"role": "user", "content": text}]}).to_string();
        let p = parse(Kind::Chat, body.as_bytes(), 100, Some(&t)).unwrap();
        assert_eq!(p.params.prompt_tokens, 17);
        let p = parse(Kind::Completion, br#"{"prompt":[1,2,3]}"#, 100, Some(&t)).unwrap();
        assert_eq!(p.params.prompt_tokens, 3);
    }

    #[test]
    fn rejects_bad_requests() {
        for (kind, body) in [
            (Kind::Chat, &b"{not json"[..]),
            (Kind::Chat, br#"{"prompt":"x"}"#),
            (Kind::Chat, br#"{"messages":[]}"#),
            (Kind::Completion, br#"{"messages":[]}"#),
            (Kind::Completion, br#"{"prompt":"x","max_tokens":0}"#),
            (Kind::Completion, br#"{"prompt":"x","max_tokens":-3}"#),
            (
                Kind::Completion,
                br#"{"prompt":"x","max_tokens":2,"min_tokens":3}"#,
            ),
        ] {
            assert!(
                parse(kind, body, 16, None).is_err(),
                "{}",
                String::from_utf8_lossy(body)
            );
        }
    }
}
