//! The probe's HTTP client (`/v1/models`, `/health`, `/metrics`), the API key header every
//! request carries, and capped reads of the probe's answers.

use std::time::Duration;

use reqwest::header::{HeaderValue, AUTHORIZATION};

use super::observed::error_chain;
use crate::profile::Profile;
use crate::record::redact;

/// The HTTP client of the probe (`/v1/models`, `/health`, `/metrics`): reqwest, rustls TLS
/// (Cargo.toml: reqwest `rustls-tls`, no OpenSSL). The load has its own client (http.rs). The
/// API key, when given, goes on every request (vLLM's `--api-key` guards all of `/v1`),
/// marked sensitive so it never shows in Debug output. reqwest's default redirect policy
/// removes `Authorization` when a redirect leads to another host or port (see the test
/// `probe_redirect_to_another_port_drops_the_key`).
pub fn build_probe_client(api_key: Option<&HeaderValue>) -> anyhow::Result<reqwest::Client> {
    let mut headers = reqwest::header::HeaderMap::new();
    if let Some(key) = api_key {
        headers.insert(AUTHORIZATION, key.clone());
    }
    reqwest::Client::builder()
        .tcp_nodelay(true)
        .connect_timeout(Duration::from_secs(10))
        .default_headers(headers)
        .build()
        .map_err(|e| anyhow::anyhow!("cannot build the HTTP client: {e}"))
}

/// The `Authorization` header for the profile's API key (`target.api_key_env` names the
/// variable), marked sensitive; the key is registered for redaction (record/redact.rs) so a
/// server that echoes it back cannot put it into a file or the console. The load, the probe
/// and `ci`'s checks all send this one header.
///
/// An unset variable means "no key" (a vLLM started without `--api-key` needs none, and the
/// README's example names OPENAI_API_KEY), said once on stderr; with
/// `target.api_key_required = true` it is an error before anything is sent.
pub fn api_key_header(profile: &Profile) -> anyhow::Result<Option<HeaderValue>> {
    let Some(var) = &profile.target.api_key_env else {
        return Ok(None);
    };
    let Ok(key) = std::env::var(var) else {
        if profile.target.api_key_required {
            anyhow::bail!(
                "target.api_key_env names the environment variable {var}, but it is not set \
                 (target.api_key_required = true)"
            );
        }
        static SAID: std::sync::Once = std::sync::Once::new();
        SAID.call_once(|| {
            eprintln!(
                "note: {var} (target.api_key_env) is not set: sending no API key (set \
                 target.api_key_required = true to stop instead)"
            )
        });
        return Ok(None);
    };
    redact::register_secret(&key);
    let mut value = HeaderValue::from_str(&format!("Bearer {key}")).map_err(|_| {
        anyhow::anyhow!("the API key in {var} holds characters not allowed in an HTTP header")
    })?;
    value.set_sensitive(true);
    Ok(Some(value))
}

/// The most of a `/v1/models` or `/health` answer the probe reads.
pub const MAX_PROBE_BODY: usize = 4 << 20;

/// Why a capped read gave up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CappedReadError {
    /// The body is longer than the cap; what was read is dropped.
    TooLong(usize),
    /// The connection broke.
    Broken(String),
}

impl std::fmt::Display for CappedReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CappedReadError::TooLong(cap) => write!(f, "the answer is longer than {cap} bytes"),
            CappedReadError::Broken(why) => write!(f, "the answer broke off: {why}"),
        }
    }
}

/// Reads a probe response's body, at most `cap` bytes (reqwest's `.text()`
/// would read a body that never ends into memory).
pub async fn read_capped(
    mut response: reqwest::Response,
    cap: usize,
) -> Result<Vec<u8>, CappedReadError> {
    let mut body = Vec::new();
    loop {
        match response.chunk().await {
            Ok(Some(piece)) => {
                if body.len() + piece.len() > cap {
                    return Err(CappedReadError::TooLong(cap));
                }
                body.extend_from_slice(&piece);
            }
            Ok(None) => return Ok(body),
            Err(e) => return Err(CappedReadError::Broken(error_chain(&e))),
        }
    }
}
