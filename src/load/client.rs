//! Sending one request and timing it: send, first byte, first chunk, first content token,
//! every content chunk, end. Failures come back classified, never as panics or retries.

use std::time::{Duration, Instant};

use reqwest::header::{HeaderValue, AUTHORIZATION, CONTENT_TYPE};
use tokio::time::timeout_at;

use super::chunk::{clip, parse_chunk, parse_response, Usage};
use super::sse::{SseDecoder, SseError};
use super::tokens::ChunkArrival;
use crate::record::ErrorClass;

/// The HTTP client of a run: rustls TLS (Cargo.toml: reqwest `rustls-tls`, no OpenSSL), one
/// idle connection per worker, TCP_NODELAY. The API key, when given, goes on every request
/// (the probe's `/v1/models` and `/metrics` too: vLLM's `--api-key` guards all of `/v1`), marked
/// sensitive so it never shows in Debug output. reqwest's default redirect policy removes
/// `Authorization` when a redirect leads to another host or port (see the test
/// `redirect_to_another_port_drops_the_key`).
pub fn build_client(
    max_concurrency: usize,
    api_key: Option<&HeaderValue>,
) -> anyhow::Result<reqwest::Client> {
    let mut headers = reqwest::header::HeaderMap::new();
    if let Some(key) = api_key {
        headers.insert(AUTHORIZATION, key.clone());
    }
    reqwest::Client::builder()
        .pool_max_idle_per_host(max_concurrency)
        .tcp_nodelay(true)
        .connect_timeout(Duration::from_secs(10))
        .default_headers(headers)
        .build()
        .map_err(|e| anyhow::anyhow!("cannot build the HTTP client: {e}"))
}

/// Limits on one request.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// The whole request, from send to the last byte.
    pub request_timeout: Duration,
    /// The longest wait for the next piece of the response once it has started.
    pub stall_timeout: Duration,
}

/// What the client observed for one request, before classification.
#[derive(Debug, Clone, Default)]
pub struct Observed {
    pub sent_s: f64,
    pub first_byte_s: Option<f64>,
    pub first_chunk_s: Option<f64>,
    pub end_s: f64,
    /// Content chunks only (role-only and usage-only chunks are not tokens).
    pub chunks: Vec<ChunkArrival>,
    pub usage: Option<Usage>,
    pub finish_reason: Option<String>,
    pub http_status: Option<u16>,
    pub failure: Option<(ErrorClass, String)>,
}

/// Sends `body` to `url` and observes the response. `clock` is the run's time origin.
pub async fn send(
    client: &reqwest::Client,
    url: &str,
    body: bytes::Bytes,
    api_key: Option<&HeaderValue>,
    stream: bool,
    limits: Limits,
    clock: Instant,
) -> Observed {
    let since = |t: Instant| t.duration_since(clock).as_secs_f64();
    let start = Instant::now();
    let mut obs = Observed {
        sent_s: since(start),
        ..Observed::default()
    };
    let deadline = tokio::time::Instant::from_std(start + limits.request_timeout);

    let mut request = client
        .post(url)
        .header(CONTENT_TYPE, "application/json")
        .body(body);
    if let Some(key) = api_key {
        request = request.header(AUTHORIZATION, key.clone());
    }
    let response = match timeout_at(deadline, request.send()).await {
        Err(_) => {
            return fail(
                obs,
                ErrorClass::Timeout,
                "no response before the request timeout",
                since,
            )
        }
        Ok(Err(e)) => {
            let class = if e.is_connect() {
                ErrorClass::Connect
            } else if e.is_timeout() {
                ErrorClass::Timeout
            } else {
                ErrorClass::Reset
            };
            return fail(obs, class, &error_chain(&e), since);
        }
        Ok(Ok(r)) => r,
    };
    obs.first_byte_s = Some(since(Instant::now()));
    let status = response.status();
    obs.http_status = Some(status.as_u16());
    if !status.is_success() {
        let text = match timeout_at(deadline, response.text()).await {
            Ok(Ok(t)) => clip(t.trim()),
            _ => String::new(),
        };
        return fail(
            obs,
            ErrorClass::Http,
            &format!("HTTP {status}: {text}"),
            since,
        );
    }
    if stream {
        read_stream(response, &mut obs, deadline, limits.stall_timeout, clock).await;
    } else {
        read_whole(response, &mut obs, deadline, clock).await;
    }
    obs.end_s = since(Instant::now());
    obs
}

async fn read_stream(
    mut response: reqwest::Response,
    obs: &mut Observed,
    deadline: tokio::time::Instant,
    stall: Duration,
    clock: Instant,
) {
    let since = |t: Instant| t.duration_since(clock).as_secs_f64();
    let mut reader = StreamReader::new();
    // The stall clock restarts only when an SSE data event arrives: keep-alive comments
    // (`: ping`) are bytes, not progress, and must not hide a server that stopped generating.
    let mut stall_deadline = tokio::time::Instant::now() + stall;
    loop {
        let stalls_first = stall_deadline < deadline;
        let next = match timeout_at(stall_deadline.min(deadline), response.chunk()).await {
            Ok(r) => r,
            Err(_) if stalls_first => {
                obs.failure = Some((
                    ErrorClass::Stall,
                    format!("no data event for {}", humantime::format_duration(stall)),
                ));
                return;
            }
            Err(_) => {
                obs.failure = Some((
                    ErrorClass::Timeout,
                    "response not finished before the request timeout".into(),
                ));
                return;
            }
        };
        let bytes = match next {
            Ok(Some(b)) => b,
            Ok(None) => break,
            Err(e) => {
                obs.failure = Some((
                    ErrorClass::Reset,
                    format!("connection broke mid-stream: {}", error_chain(&e)),
                ));
                return;
            }
        };
        let events_before = reader.data_events;
        if reader.push(since(Instant::now()), &bytes, obs) {
            return;
        }
        if reader.data_events > events_before {
            stall_deadline = tokio::time::Instant::now() + stall;
        }
    }
    reader.finish(since(Instant::now()), obs);
}

/// The SSE-to-[`Observed`] step on its own: bytes in, each with the time it arrived (seconds
/// since the run's origin). The network loop feeds it; tests feed it recorded streams with
/// their arrival times, so what is measured is parsed by exactly one path.
#[derive(Debug, Default)]
pub struct StreamReader {
    decoder: SseDecoder,
    events: Vec<String>,
    done: bool,
    /// SSE data events decoded so far (comments and keep-alives are not events).
    pub data_events: u64,
}

impl StreamReader {
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds bytes that arrived at `at_s`. Returns true when reading should stop: the request
    /// failed (recorded in `obs`) or the stream said `[DONE]`.
    pub fn push(&mut self, at_s: f64, bytes: &[u8], obs: &mut Observed) -> bool {
        if let Err(e) = self.decoder.push(bytes, &mut self.events) {
            obs.failure = Some((ErrorClass::Protocol, sse_error(e)));
            return true;
        }
        self.data_events += self.events.len() as u64;
        handle_events(&mut self.events, obs, at_s, &mut self.done) || self.done
    }

    /// The connection closed at `at_s` without `[DONE]` having stopped the reading.
    pub fn finish(&mut self, at_s: f64, obs: &mut Observed) {
        if let Err(e) = self.decoder.finish(&mut self.events) {
            obs.failure = Some((ErrorClass::Protocol, sse_error(e)));
            return;
        }
        if handle_events(&mut self.events, obs, at_s, &mut self.done) {
            return;
        }
        if !self.done {
            obs.failure = Some((
                ErrorClass::Protocol,
                "stream ended without `data: [DONE]`".into(),
            ));
        }
    }
}

/// Applies decoded events; returns true when the request has failed.
fn handle_events(events: &mut Vec<String>, obs: &mut Observed, now: f64, done: &mut bool) -> bool {
    for data in events.drain(..) {
        if *done {
            continue;
        }
        if data.trim() == "[DONE]" {
            *done = true;
            continue;
        }
        obs.first_chunk_s.get_or_insert(now);
        let info = match parse_chunk(&data) {
            Ok(i) => i,
            Err(msg) => {
                obs.failure = Some((ErrorClass::Protocol, msg));
                return true;
            }
        };
        if let Some(err) = info.error {
            obs.failure = Some((
                ErrorClass::Protocol,
                format!("server error in stream: {err}"),
            ));
            return true;
        }
        if info.has_content() {
            obs.chunks.push(ChunkArrival {
                at_s: now,
                text_chars: info.text_chars,
                cumulative_tokens: info.usage.map(|u| u.completion_tokens),
            });
        }
        if info.usage.is_some() {
            obs.usage = info.usage;
        }
        if info.finish_reason.is_some() {
            obs.finish_reason = info.finish_reason;
        }
    }
    false
}

async fn read_whole(
    response: reqwest::Response,
    obs: &mut Observed,
    deadline: tokio::time::Instant,
    clock: Instant,
) {
    let text = match timeout_at(deadline, response.text()).await {
        Err(_) => {
            obs.failure = Some((
                ErrorClass::Timeout,
                "response not finished before the request timeout".into(),
            ));
            return;
        }
        Ok(Err(e)) => {
            obs.failure = Some((
                ErrorClass::Reset,
                format!("connection broke: {}", error_chain(&e)),
            ));
            return;
        }
        Ok(Ok(t)) => t,
    };
    let now = Instant::now().duration_since(clock).as_secs_f64();
    match parse_response(&text) {
        Err(msg) => obs.failure = Some((ErrorClass::Protocol, msg)),
        Ok(info) => {
            if let Some(err) = info.error {
                obs.failure = Some((ErrorClass::Protocol, format!("server error: {err}")));
                return;
            }
            obs.usage = info.usage;
            obs.finish_reason = info.finish_reason.clone();
            if info.has_content() {
                obs.chunks.push(ChunkArrival {
                    at_s: now,
                    text_chars: info.text_chars,
                    cumulative_tokens: info.usage.map(|u| u.completion_tokens),
                });
            }
        }
    }
}

fn fail(
    mut obs: Observed,
    class: ErrorClass,
    msg: &str,
    since: impl Fn(Instant) -> f64,
) -> Observed {
    obs.end_s = since(Instant::now());
    obs.failure = Some((class, msg.to_string()));
    obs
}

fn sse_error(e: SseError) -> String {
    match e {
        SseError::InvalidUtf8 => "stream line is not UTF-8".into(),
        SseError::LineTooLong => "stream line longer than 4 MiB".into(),
    }
}

/// The error with its causes ("connection refused" is usually a few levels down).
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let s_text = s.to_string();
        if !text.contains(&s_text) {
            text.push_str(": ");
            text.push_str(&s_text);
        }
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpListener;

    /// Accepts one connection, reads one request (head and body), answers `reply`, returns
    /// the request head.
    fn serve_once(listener: TcpListener, reply: String) -> std::thread::JoinHandle<String> {
        std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut buf = Vec::new();
            let mut byte = [0u8; 1024];
            let head_end = loop {
                let n = s.read(&mut byte).unwrap();
                assert!(n > 0, "connection closed before the request ended");
                buf.extend_from_slice(&byte[..n]);
                if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                    break i + 4;
                }
            };
            let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
            let length: usize = head
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse().ok())?
                })
                .unwrap_or(0);
            while buf.len() < head_end + length {
                let n = s.read(&mut byte).unwrap();
                if n == 0 {
                    break;
                }
                buf.extend_from_slice(&byte[..n]);
            }
            s.write_all(reply.as_bytes()).unwrap();
            head
        })
    }

    #[tokio::test]
    async fn redirect_to_another_port_drops_the_key() {
        let a = TcpListener::bind("127.0.0.1:0").unwrap();
        let b = TcpListener::bind("127.0.0.1:0").unwrap();
        let (pa, pb) = (
            a.local_addr().unwrap().port(),
            b.local_addr().unwrap().port(),
        );
        let body = r#"{"choices":[{"message":{"content":"hi there"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":2}}"#;
        let a = serve_once(
            a,
            format!("HTTP/1.1 307 Temporary Redirect\r\nLocation: http://127.0.0.1:{pb}/v1/chat/completions\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"),
        );
        let b = serve_once(
            b,
            format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            ),
        );
        let mut key = HeaderValue::from_static("Bearer sk-redirect-test");
        key.set_sensitive(true);
        let client = build_client(1, Some(&key)).unwrap();
        let limits = Limits {
            request_timeout: Duration::from_secs(10),
            stall_timeout: Duration::from_secs(10),
        };
        let obs = send(
            &client,
            &format!("http://127.0.0.1:{pa}/v1/chat/completions"),
            bytes::Bytes::from_static(b"{}"),
            Some(&key),
            false,
            limits,
            Instant::now(),
        )
        .await;
        let (head_a, head_b) = (a.join().unwrap(), b.join().unwrap());
        assert!(obs.failure.is_none(), "{:?}", obs.failure);
        assert_eq!(obs.usage.map(|u| u.completion_tokens), Some(2));
        assert!(
            head_a
                .to_ascii_lowercase()
                .contains("authorization: bearer sk-redirect-test"),
            "{head_a}"
        );
        assert!(
            !head_b.to_ascii_lowercase().contains("authorization"),
            "{head_b}"
        );
        assert!(!format!("{key:?}").contains("sk-redirect-test"));
    }

    /// A server that keeps the connection busy with SSE comments but sends no token is
    /// stalled: keep-alives must not reset the stall clock.
    #[tokio::test]
    async fn keep_alive_comments_do_not_hide_a_stall() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut byte = [0u8; 4096];
            let _ = s.read(&mut byte);
            let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n";
            let role = "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\n\n";
            let _ = s.write_all(format!("{head}{role}").as_bytes());
            for _ in 0..30 {
                std::thread::sleep(Duration::from_millis(50));
                if s.write_all(b": ping\n\n").is_err() {
                    break;
                }
            }
        });
        let client = build_client(1, None).unwrap();
        let limits = Limits {
            request_timeout: Duration::from_secs(10),
            stall_timeout: Duration::from_millis(400),
        };
        let started = Instant::now();
        let obs = send(
            &client,
            &format!("http://127.0.0.1:{port}/v1/chat/completions"),
            bytes::Bytes::from_static(b"{}"),
            None,
            true,
            limits,
            Instant::now(),
        )
        .await;
        let waited = started.elapsed();
        let (class, msg) = obs.failure.expect("a stall");
        assert_eq!(class, ErrorClass::Stall, "{msg}");
        assert!(
            waited < Duration::from_millis(1200),
            "stalled after {waited:?}"
        );
        let _ = server.join();
    }
}
