//! Reading one OpenAI-style stream chunk (or a whole non-streaming response): how much
//! content it carries, its usage, its finish reason, or the error it reports.
//!
//! Content means generated text of any kind: `delta.content`, `delta.reasoning_content`
//! (vLLM, SGLang) and `delta.reasoning`, or `text` for the completions API. A role-only
//! chunk carries no content, so it does not end TTFT.

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
}

/// Parses a stream chunk's JSON. Errors describe what is wrong, for the `protocol` class.
pub fn parse_chunk(data: &str) -> Result<ChunkInfo, String> {
    let value: Value = serde_json::from_str(data)
        .map_err(|e| format!("chunk is not JSON ({e}): {}", clip(data)))?;
    let obj = value
        .as_object()
        .ok_or_else(|| format!("chunk is not a JSON object: {}", clip(data)))?;
    let mut info = ChunkInfo {
        error: obj.get("error").map(describe_error),
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
pub fn clip(text: &str) -> String {
    const MAX: usize = 200;
    if text.chars().count() <= MAX {
        text.to_string()
    } else {
        let head: String = text.chars().take(MAX).collect();
        format!("{head}...")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
                completion_tokens: 1115
            })
        );
    }

    #[test]
    fn completions_text_and_finish_reason() {
        let c = parse_chunk(r#"{"choices":[{"text":"ab c","finish_reason":"length"}]}"#).unwrap();
        assert_eq!(c.text_chars, 4);
        assert_eq!(c.finish_reason.as_deref(), Some("length"));
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
