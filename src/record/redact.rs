//! Keeping secrets out of what is written: the API key and credentials in endpoint URLs
//! (`http://user:pass@host`) are replaced by `***` in every text that came from a server or
//! an error chain before it enters a record, a file or the console.
//!
//! A server may echo the `Authorization` header back (in an error body, in an SSE error
//! event), and error chains quote URLs. The secrets are registered once where they are read
//! (the key from its environment variable, credentials from the endpoints), so every later
//! text can be redacted without each caller carrying them.

use std::borrow::Cow;
use std::sync::RwLock;

/// The secrets of this process: each with the forms a server could echo it in.
static SECRETS: RwLock<Vec<String>> = RwLock::new(Vec::new());

/// What replaces a secret.
pub const MASK: &str = "***";

/// The shortest start of a secret that is masked where a clipped text ends with it ("sk-a"
/// of "sk-abc..." cut at 200 characters): shorter starts are not worth hiding and would
/// mask ordinary words.
const MIN_CLIPPED_PREFIX: usize = 4;

/// Registers a secret (an API key, a password): every later [`redact`] masks it, as sent
/// and as JSON-escaped.
pub fn register_secret(secret: &str) {
    if secret.is_empty() {
        return;
    }
    let mut forms = vec![secret.to_string()];
    if let Ok(json) = serde_json::to_string(secret) {
        let escaped = json[1..json.len() - 1].to_string();
        if escaped != secret {
            forms.push(escaped);
        }
    }
    let mut all = SECRETS.write().unwrap_or_else(|e| e.into_inner());
    for f in forms {
        if !all.contains(&f) {
            all.push(f);
        }
    }
    // Longest first: a secret that contains another is masked whole.
    all.sort_by_key(|s| std::cmp::Reverse(s.len()));
}

/// Registers the credentials of an endpoint URL, if it has any: the user information, its
/// password and the Basic authorization value an HTTP client makes of them.
pub fn register_endpoint(url: &str) {
    let Some((_, userinfo, _)) = split_userinfo(url) else {
        return;
    };
    register_secret(userinfo);
    if let Some((_, password)) = userinfo.split_once(':') {
        register_secret(password);
    }
    register_secret(&base64(userinfo.as_bytes()));
}

/// `text` with every registered secret, and the user information of every URL in it,
/// replaced by `***`.
pub fn redact(text: &str) -> Cow<'_, str> {
    let mut out = mask_url_credentials(text);
    let secrets = SECRETS.read().unwrap_or_else(|e| e.into_inner());
    for secret in secrets.iter() {
        if out.contains(secret.as_str()) {
            out = Cow::Owned(out.replace(secret.as_str(), MASK));
        }
        // A text clipped in the middle of a secret ends with its start (and maybe "...").
        let body = out.strip_suffix("...").unwrap_or(&out);
        let clipped = (MIN_CLIPPED_PREFIX..secret.len())
            .rev()
            .filter(|&n| secret.is_char_boundary(n))
            .find(|&n| body.ends_with(&secret[..n]));
        if let Some(n) = clipped {
            let keep = body.len() - n;
            let tail = &out[body.len()..];
            out = Cow::Owned(format!("{}{MASK}{tail}", &out[..keep]));
        }
    }
    out
}

/// An error's whole text fit for the console, a job summary or a file: [`redact`], and the
/// source lines a TOML error quotes (`4 | api_key = "sk-..."`) masked after the `=` where
/// the key's name says it may hold a secret (key, token, secret, password, auth). A profile
/// has no field for a key (it names the variable), but a profile with one written in
/// must not have its error echo it.
pub fn redact_error(text: &str) -> String {
    let text = redact(text);
    let mut out = String::with_capacity(text.len());
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&mask_quoted_line(line));
    }
    out
}

/// A TOML error's quoted source line (`NN | text`) with a secret-looking value masked.
fn mask_quoted_line(line: &str) -> Cow<'_, str> {
    let Some((number, source)) = line.split_once(" | ") else {
        return Cow::Borrowed(line);
    };
    if number.trim().is_empty() || !number.trim().bytes().all(|b| b.is_ascii_digit()) {
        return Cow::Borrowed(line);
    }
    let Some((name, _)) = source.split_once('=') else {
        return Cow::Borrowed(line);
    };
    let name = name.trim().trim_matches('"').to_ascii_lowercase();
    let secret_like = name
        .split(|c: char| !c.is_ascii_alphanumeric())
        .any(|word| {
            [
                "key",
                "apikey",
                "token",
                "secret",
                "password",
                "passwd",
                "pass",
                "auth",
                "authorization",
                "credential",
                "credentials",
                "bearer",
            ]
            .contains(&word)
        });
    if !secret_like {
        return Cow::Borrowed(line);
    }
    let keep = line.len() - source.len() + source.find('=').unwrap_or(0) + 1;
    Cow::Owned(format!("{} {MASK}", &line[..keep]))
}

/// An endpoint URL fit to store or print: its user information replaced by `***`.
pub fn redact_url(url: &str) -> String {
    mask_url_credentials(url).into_owned()
}

/// Replaces the user information of every `scheme://user:pass@host` in `text`.
fn mask_url_credentials(text: &str) -> Cow<'_, str> {
    if !text.contains("://") || !text.contains('@') {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some((before, _, after)) = split_userinfo(rest) {
        out.push_str(before);
        out.push_str(MASK);
        out.push('@');
        rest = after;
    }
    out.push_str(rest);
    if out == text {
        Cow::Borrowed(text)
    } else {
        Cow::Owned(out)
    }
}

/// Splits the first URL with user information in `text` into (everything up to and with
/// `://`, the user information, everything after its `@`).
fn split_userinfo(text: &str) -> Option<(&str, &str, &str)> {
    let mut from = 0;
    while let Some(i) = text[from..].find("://") {
        let start = from + i + 3;
        let authority_end = text[start..]
            .find(|c: char| c == '/' || c == '?' || c == '#' || c.is_whitespace() || c == '"')
            .map_or(text.len(), |j| start + j);
        if let Some(at) = text[start..authority_end].rfind('@') {
            let at = start + at;
            return Some((&text[..start], &text[start..at], &text[at + 1..]));
        }
        from = start;
    }
    None
}

/// Standard base64 with padding (the form of a Basic authorization value).
fn base64(bytes: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = u32::from(b[0]) << 16 | u32::from(b[1]) << 8 | u32::from(b[2]);
        for k in 0..4 {
            if k <= chunk.len() {
                out.push(ABC[(n >> (18 - 6 * k) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_credentials_are_masked() {
        assert_eq!(
            redact_url("http://user:pa55@10.0.0.1:8000/v1"),
            "http://***@10.0.0.1:8000/v1"
        );
        assert_eq!(
            redact_url("http://10.0.0.1:8000/v1"),
            "http://10.0.0.1:8000/v1"
        );
        assert_eq!(
            redact("GET https://a:b@h/x and http://c@d:1 failed"),
            "GET https://***@h/x and http://***@d:1 failed"
        );
        // An @ in the path is not user information.
        assert_eq!(redact("http://h/v1/a@b"), "http://h/v1/a@b");
    }

    #[test]
    fn registered_secrets_are_masked_whole_and_clipped() {
        register_secret("sk-redact-unit-Zq81\"x");
        assert_eq!(
            redact("key sk-redact-unit-Zq81\"x echoed"),
            "key *** echoed"
        );
        assert_eq!(
            redact(r#"{"auth":"Bearer sk-redact-unit-Zq81\"x"}"#),
            r#"{"auth":"Bearer ***"}"#
        );
        assert_eq!(
            redact("cut at Bearer sk-redact-u..."),
            "cut at Bearer ***..."
        );
        assert_eq!(redact("ends in sk-r"), "ends in ***");
        assert_eq!(redact("ends in sk-"), "ends in sk-");
    }

    #[test]
    fn toml_errors_do_not_echo_a_key_line() {
        let err = "invalid profile p.toml: TOML parse error at line 4, column 1\n  |\n4 | api_key = \"sk-lit-Q1\"\n  | ^^^^^^^\nunknown field `api_key`";
        let shown = redact_error(err);
        assert!(!shown.contains("sk-lit-Q1"), "{shown}");
        assert!(shown.contains("4 | api_key = ***"), "{shown}");
        assert!(shown.contains("unknown field `api_key`"), "{shown}");
        let other = "  |\n7 | max_tokens = \"x\"\n  | ^^^";
        assert_eq!(redact_error(other), other);
    }

    #[test]
    fn endpoint_credentials_are_registered_in_every_form() {
        register_endpoint("http://alice:s3cr3t-unit@127.0.0.1:9");
        assert_eq!(redact("pw s3cr3t-unit"), "pw ***");
        assert_eq!(base64(b"alice:s3cr3t-unit"), "YWxpY2U6czNjcjN0LXVuaXQ=");
        assert_eq!(redact("Basic YWxpY2U6czNjcjN0LXVuaXQ="), "Basic ***");
        assert_eq!(base64(b"ab"), "YWI=");
        assert_eq!(base64(b"abc"), "YWJj");
    }
}
