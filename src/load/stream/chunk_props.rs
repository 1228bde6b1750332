//! Property tests of the chunk parser: no input makes it panic; a bad chunk is an error that
//! quotes what it got.

use proptest::prelude::*;
use serde_json::{json, Value};

use super::{parse_chunk, parse_chunk_generic, parse_response};

/// Arbitrary JSON values, nested a few levels, with the keys the parser looks at.
pub fn arb_json() -> impl Strategy<Value = Value> {
    let key = prop_oneof![
        Just("choices".to_string()),
        Just("delta".to_string()),
        Just("message".to_string()),
        Just("content".to_string()),
        Just("reasoning_content".to_string()),
        Just("text".to_string()),
        Just("usage".to_string()),
        Just("completion_tokens".to_string()),
        Just("prompt_tokens".to_string()),
        Just("prompt_tokens_details".to_string()),
        Just("cached_tokens".to_string()),
        Just("finish_reason".to_string()),
        Just("error".to_string()),
        "[a-z]{1,6}",
    ];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<u64>().prop_map(|n| json!(n)),
        any::<f64>().prop_map(|f| json!(f)),
        ".{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec((key.clone(), inner), 0..5)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

const VALID: &str = r#"{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"ab "},"finish_reason":null}],"usage":{"prompt_tokens":3,"completion_tokens":1}}"#;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn arbitrary_text_never_panics(text in ".{0,200}") {
        if let Err(msg) = parse_chunk(&text) {
            prop_assert!(msg.contains("chunk is not"), "{}", msg);
        }
        let _ = parse_response(&text);
    }

    #[test]
    fn arbitrary_json_never_panics(v in arb_json()) {
        let text = v.to_string();
        match parse_chunk(&text) {
            Ok(_) => prop_assert!(v.is_object(), "accepted a non-object: {}", text),
            Err(msg) => prop_assert!(!v.is_object() && msg.contains("not a JSON object"), "{}", msg),
        }
    }

    /// The typed fast path and the generic reading agree on every object.
    #[test]
    fn fast_path_agrees_with_the_generic_reading(v in arb_json()) {
        let text = v.to_string();
        prop_assert_eq!(parse_chunk(&text), parse_chunk_generic(&text), "{}", text);
    }

    /// The same for chunks of the usual shapes, with any text, usage and finish reason.
    #[test]
    fn fast_path_agrees_on_usual_chunks(
        content in proptest::option::of(".{0,8}"),
        reasoning in proptest::option::of(".{0,8}"),
        finish in proptest::option::of("stop|length"),
        completion in proptest::option::of(0u64..5000),
        prompt in proptest::option::of(0u64..5000),
        cached in proptest::option::of(0u64..5000),
        legacy in any::<bool>(),
    ) {
        let choice = if legacy {
            json!({"index": 0, "text": content, "finish_reason": finish})
        } else {
            json!({"index": 0, "delta": {"content": content, "reasoning_content": reasoning}, "finish_reason": finish})
        };
        let mut v = json!({"id": "x", "choices": [choice]});
        if completion.is_some() || prompt.is_some() {
            v["usage"] = json!({"prompt_tokens": prompt, "completion_tokens": completion});
            if let Some(c) = cached {
                v["usage"]["prompt_tokens_details"] = json!({"cached_tokens": c});
            }
        }
        let text = v.to_string();
        prop_assert_eq!(parse_chunk(&text), parse_chunk_generic(&text), "{}", text);
    }

    #[test]
    fn mutated_valid_chunk_never_panics(pos in 0usize..200, byte in any::<u8>(), cut in any::<bool>()) {
        let mut bytes = VALID.as_bytes().to_vec();
        let pos = pos % bytes.len();
        if cut { bytes.truncate(pos) } else { bytes[pos] = byte }
        let text = String::from_utf8_lossy(&bytes);
        let _ = parse_chunk(&text);
    }
}
