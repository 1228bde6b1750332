//! The JSON body of a request, in the OpenAI chat or completions shape.

use serde_json::{json, Value};

use crate::load::workload::prompts::Prompt;
use crate::profile::{Api, Workload};

/// Builds the request body. Usage is always asked for (`include_usage`), and per-chunk usage
/// too (`continuous_usage_stats`, a vLLM extension other servers ignore) so that chunks
/// carrying several tokens are counted exactly.
pub fn request_body(api: Api, model: &str, workload: &Workload, prompt: &Prompt) -> Value {
    let mut body = json!({
        "model": model,
        "max_tokens": workload.max_tokens,
        "stream": workload.stream,
    });
    match api {
        Api::Chat => body["messages"] = prompt.to_messages(),
        Api::Completions => body["prompt"] = Value::String(prompt.to_text()),
    }
    if workload.stream {
        body["stream_options"] = json!({"include_usage": true, "continuous_usage_stats": true});
    }
    if workload.ignore_eos {
        body["ignore_eos"] = Value::Bool(true);
    }
    if let Some(min) = workload.min_tokens {
        body["min_tokens"] = json!(min);
    }
    if let Some(t) = workload.temperature {
        body["temperature"] = json!(t);
    }
    if let Some(p) = workload.top_p {
        body["top_p"] = json!(p);
    }
    body
}

/// The URL of the API on a base endpoint (with or without a trailing `/v1`).
pub fn api_url(base: &str, api: Api) -> String {
    let base = base_url(base);
    match api {
        Api::Chat => format!("{base}/v1/chat/completions"),
        Api::Completions => format!("{base}/v1/completions"),
    }
}

/// The server root of an endpoint: trailing slashes and `/v1` removed.
pub fn base_url(endpoint: &str) -> &str {
    let trimmed = endpoint.trim_end_matches('/');
    trimmed.strip_suffix("/v1").unwrap_or(trimmed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_accept_v1_suffix() {
        assert_eq!(
            api_url("http://h:1/v1/", Api::Chat),
            "http://h:1/v1/chat/completions"
        );
        assert_eq!(
            api_url("http://h:1", Api::Completions),
            "http://h:1/v1/completions"
        );
    }
}
