//! Reading one OpenAI-style stream chunk (or a whole non-streaming response): how much
//! content it carries, its usage, its finish reason, or the error it reports.
//!
//! Content means generated text of any kind: `delta.content`, `delta.reasoning_content`
//! (vLLM, SGLang) and `delta.reasoning`, or `text` for the completions API. A role-only
//! chunk carries no content, so it does not end TTFT.

use std::borrow::Cow;

use serde_json::Value;

/// What one chunk tells the client.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChunkInfo {
    /// Characters of generated text (content and reasoning) in this chunk.
    pub text_chars: usize,
    pub usage: Option<Usage>,
    pub finish_reason: Option<String>,
    /// An `{"error": ...}` object sent inside the stream.
    pub error: Option<String>,
}

impl ChunkInfo {
    pub fn has_content(&self) -> bool {
        self.text_chars > 0
    }
}

/// Token counts as the server reports them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub prompt_tokens: Option<u64>,
    pub completion_tokens: u64,
    /// `prompt_tokens_details.cached_tokens`: prompt tokens the server's prefix cache served
    /// (vLLM, SGLang and OpenAI report it; absent where the server does not).
    pub cached_tokens: Option<u64>,
}

/// Parses a stream chunk's JSON. Errors describe what is wrong, for the `protocol` class.
///
/// Chunks of the usual shape are read straight into borrowed typed fields (no map, no owned
/// strings: at a thousand streams the generic JSON tree was a tenth of the client's CPU);
/// anything else (an `error` object, a field of an unexpected type, a duplicate key) goes
/// through the generic reading, which gives the same answer for every input (a property
/// test holds the two to it).
pub fn parse_chunk(data: &str) -> Result<ChunkInfo, String> {
    match serde_json::from_str::<Obj<WireChunk>>(data) {
        Ok(Obj(wire)) if wire.error.is_none() => Ok(wire.into_info()),
        _ => parse_chunk_generic(data),
    }
}

/// The usual chunk, as typed fields borrowed from the text.
#[derive(serde::Deserialize)]
struct WireChunk<'a> {
    #[serde(borrow, default)]
    choices: Option<Vec<Obj<WireChoice<'a>>>>,
    #[serde(default)]
    usage: Option<Obj<WireUsage>>,
    #[serde(default)]
    error: Option<serde::de::IgnoredAny>,
}

#[derive(serde::Deserialize)]
struct WireChoice<'a> {
    #[serde(borrow, default)]
    text: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    delta: Option<Obj<WireText<'a>>>,
    #[serde(borrow, default)]
    message: Option<Obj<WireText<'a>>>,
    #[serde(borrow, default)]
    finish_reason: Option<Cow<'a, str>>,
}

#[derive(serde::Deserialize)]
struct WireText<'a> {
    #[serde(borrow, default)]
    content: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    reasoning_content: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    reasoning: Option<Cow<'a, str>>,
}

#[derive(serde::Deserialize)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
    #[serde(default)]
    prompt_tokens_details: Option<Obj<WireDetails>>,
}

#[derive(serde::Deserialize)]
struct WireDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

/// A struct read only from a JSON object: serde would also read one from an array, field by
/// position, which the generic reading does not.
struct Obj<T>(T);

impl<'de, T: serde::Deserialize<'de>> serde::Deserialize<'de> for Obj<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct ObjectVisitor<T>(std::marker::PhantomData<T>);
        impl<'de, T: serde::Deserialize<'de>> serde::de::Visitor<'de> for ObjectVisitor<T> {
            type Value = Obj<T>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<Obj<T>, A::Error> {
                T::deserialize(serde::de::value::MapAccessDeserializer::new(map)).map(Obj)
            }
        }
        d.deserialize_any(ObjectVisitor(std::marker::PhantomData))
    }
}

impl WireChunk<'_> {
    fn into_info(self) -> ChunkInfo {
        let chars = |s: &Option<Cow<str>>| s.as_deref().map_or(0, |s| s.chars().count());
        let text_chars = |t: &Option<Obj<WireText>>| {
            t.as_ref().map_or(0, |Obj(t)| {
                chars(&t.content) + chars(&t.reasoning_content) + chars(&t.reasoning)
            })
        };
        let mut info = ChunkInfo {
            usage: self.usage.and_then(|Obj(u)| {
                Some(Usage {
                    prompt_tokens: u.prompt_tokens,
                    completion_tokens: u.completion_tokens?,
                    cached_tokens: u.prompt_tokens_details.and_then(|Obj(d)| d.cached_tokens),
                })
            }),
            ..ChunkInfo::default()
        };
        for Obj(choice) in self.choices.unwrap_or_default() {
            info.text_chars +=
                chars(&choice.text) + text_chars(&choice.delta) + text_chars(&choice.message);
            if let Some(reason) = choice.finish_reason {
                info.finish_reason = Some(reason.into_owned());
            }
        }
        info
    }
}

/// The generic reading, through a JSON tree: any shape, unknown types ignored.
fn parse_chunk_generic(data: &str) -> Result<ChunkInfo, String> {
    let value: Value = serde_json::from_str(data)
        .map_err(|e| format!("chunk is not JSON ({e}): {}", clip(data)))?;
    let obj = value
        .as_object()
        .ok_or_else(|| format!("chunk is not a JSON object: {}", clip(data)))?;
    let mut info = ChunkInfo {
        error: obj
            .get("error")
            .filter(|e| !e.is_null())
            .map(describe_error),
        usage: obj.get("usage").and_then(parse_usage),
        ..ChunkInfo::default()
    };
    if let Some(choices) = obj.get("choices").and_then(Value::as_array) {
        for choice in choices {
            info.text_chars += choice_text_chars(choice);
            if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
                info.finish_reason = Some(reason.to_string());
            }
        }
    }
    Ok(info)
}

/// Appends a chunk's (or a whole response's) answer text to `out`, up to `cap` bytes in all:
/// `text`, `delta.content` or `message.content` of each choice. Reasoning is left out, as
/// a chat client leaves it out of the history it sends back. A second reading of the chunk,
/// done only for multi-turn runs that carry the server's answers forward.
pub fn append_answer(data: &str, out: &mut String, cap: usize) {
    let Ok(value) = serde_json::from_str::<Value>(data) else {
        return;
    };
    let Some(choices) = value.get("choices").and_then(Value::as_array) else {
        return;
    };
    for choice in choices {
        let text = (choice.get("text").and_then(Value::as_str))
            .or_else(|| choice.pointer("/delta/content").and_then(Value::as_str))
            .or_else(|| choice.pointer("/message/content").and_then(Value::as_str));
        if let Some(text) = text {
            let room = cap.saturating_sub(out.len());
            let mut end = text.len().min(room);
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            out.push_str(&text[..end]);
        }
    }
}

/// Parses a whole non-streaming response body the same way.
pub fn parse_response(data: &str) -> Result<ChunkInfo, String> {
    parse_chunk(data)
}

fn choice_text_chars(choice: &Value) -> usize {
    let field_chars = |v: &Value, key: &str| {
        v.get(key)
            .and_then(Value::as_str)
            .map(|s| s.chars().count())
            .unwrap_or(0)
    };
    let mut n = field_chars(choice, "text");
    for holder in ["delta", "message"] {
        if let Some(d) = choice.get(holder) {
            n += field_chars(d, "content")
                + field_chars(d, "reasoning_content")
                + field_chars(d, "reasoning");
        }
    }
    n
}

fn parse_usage(v: &Value) -> Option<Usage> {
    let completion = v.get("completion_tokens")?.as_u64()?;
    Some(Usage {
        prompt_tokens: v.get("prompt_tokens").and_then(Value::as_u64),
        completion_tokens: completion,
        cached_tokens: v
            .get("prompt_tokens_details")
            .and_then(|d| d.get("cached_tokens"))
            .and_then(Value::as_u64),
    })
}

fn describe_error(v: &Value) -> String {
    let text = v
        .get("message")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| v.to_string());
    clip(&text)
}

/// Shortens server text for error messages.
/// Server text is untrusted: control characters, newlines, a leading `::` and `##[` are
/// escaped (src/untrusted.rs), so an error body cannot start a line of its own in a log.
pub fn clip(text: &str) -> String {
    const MAX: usize = 200;
    if text.chars().count() <= MAX {
        crate::untrusted::for_terminal(text).into_owned()
    } else {
        let head: String = text.chars().take(MAX).collect();
        format!("{}...", crate::untrusted::for_terminal(&head))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_answer_text_is_content_without_reasoning_and_bounded() {
        let mut out = String::new();
        for chunk in [
            r#"{"choices":[{"delta":{"role":"assistant","content":""}}]}"#,
            r#"{"choices":[{"delta":{"reasoning_content":"hmm"}}]}"#,
            r#"{"choices":[{"delta":{"content":"caf\u00e9 "}}]}"#,
            r#"{"choices":[{"text":"ab"}]}"#,
            r#"{"choices":[{"message":{"role":"assistant","content":"!"}}]}"#,
            "not json",
            r#"{"usage":{"completion_tokens":3}}"#,
        ] {
            append_answer(chunk, &mut out, 1000);
        }
        assert_eq!(out, "café ab!");
        let mut out = String::new();
        append_answer(r#"{"choices":[{"text":"éé"}]}"#, &mut out, 3);
        assert_eq!(out, "é", "cut at the cap, on a character boundary");
    }

    #[test]
    fn role_only_chunk_has_no_content() {
        let c =
            parse_chunk(r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}"#)
                .unwrap();
        assert!(!c.has_content());
    }

    #[test]
    fn reasoning_counts_as_content() {
        let c = parse_chunk(r#"{"choices":[{"delta":{"reasoning_content":"hmm"}}]}"#).unwrap();
        assert_eq!(c.text_chars, 3);
    }

    #[test]
    fn usage_chunk_with_empty_choices() {
        let c = parse_chunk(
            r#"{"choices":[],"usage":{"prompt_tokens":26,"completion_tokens":1115,"total_tokens":1141}}"#,
        )
        .unwrap();
        assert_eq!(
            c.usage,
            Some(Usage {
                prompt_tokens: Some(26),
                completion_tokens: 1115,
                cached_tokens: None,
            })
        );
    }

    /// vLLM's and OpenAI's `prompt_tokens_details.cached_tokens`, on both readings; a null or
    /// malformed details object reports nothing cached.
    #[test]
    fn cached_tokens_are_read_from_the_prompt_details() {
        let with = |details: &str| {
            let data = format!(
                r#"{{"choices":[],"usage":{{"prompt_tokens":240,"completion_tokens":8,"prompt_tokens_details":{details}}}}}"#
            );
            let typed = parse_chunk(&data).unwrap();
            assert_eq!(typed, parse_chunk_generic(&data).unwrap(), "{data}");
            typed.usage.unwrap().cached_tokens
        };
        assert_eq!(with(r#"{"cached_tokens":200}"#), Some(200));
        assert_eq!(with("null"), None);
        assert_eq!(with("{}"), None);
        assert_eq!(with(r#"{"cached_tokens":-1}"#), None);
        assert_eq!(with(r#"[200]"#), None);
    }

    #[test]
    fn completions_text_and_finish_reason() {
        let c = parse_chunk(r#"{"choices":[{"text":"ab c","finish_reason":"length"}]}"#).unwrap();
        assert_eq!(c.text_chars, 4);
        assert_eq!(c.finish_reason.as_deref(), Some("length"));
    }

    /// The usual chunks (vLLM with per-chunk usage and a null usage, the completions API)
    /// take the typed path; an error object does not.
    #[test]
    fn usual_chunks_take_the_typed_path() {
        for data in [
            r#"{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"caf\u00e9 "},"logprobs":null,"finish_reason":null}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}"#,
            r#"{"id":"c","choices":[{"index":0,"delta":{"reasoning_content":"hm"},"finish_reason":null}],"usage":null}"#,
            r#"{"id":"c","choices":[{"index":0,"text":"ab","logprobs":null,"finish_reason":"length"}]}"#,
        ] {
            let typed = serde_json::from_str::<Obj<WireChunk>>(data);
            assert!(typed.is_ok_and(|Obj(w)| w.error.is_none()), "{data}");
            assert_eq!(parse_chunk(data), parse_chunk_generic(data));
        }
        let c = parse_chunk(r#"{"choices":[{"delta":{"content":"caf\u00e9 "}}]}"#).unwrap();
        assert_eq!(c.text_chars, 5);
        let err = r#"{"error":{"message":"boom"}}"#;
        assert!(serde_json::from_str::<Obj<WireChunk>>(err).is_ok_and(|Obj(w)| w.error.is_some()));
    }

    #[test]
    fn errors_are_reported() {
        assert!(parse_chunk("{not json").is_err());
        assert!(parse_chunk("[1,2]").is_err());
        let c = parse_chunk(r#"{"error":{"message":"out of memory"}}"#).unwrap();
        assert_eq!(c.error.as_deref(), Some("out of memory"));
    }
}

#[cfg(test)]
#[path = "chunk_props.rs"]
mod props;
