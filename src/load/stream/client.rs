//! Sending one request and timing it: send, first byte, first chunk, first content token,
//! every content chunk, end. Failures come back classified, never as panics or retries.

use std::time::{Duration, Instant};

use http::Request;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::Uri;
use reqwest::header::{HeaderValue, AUTHORIZATION, CONTENT_TYPE};
use tokio::time::timeout_at;

use super::chunk::{append_answer, clip, parse_chunk, parse_response, Usage};
use super::tokens::ChunkLog;
use crate::load::wire::http::LoadClient;
use crate::load::wire::read_delay;
use crate::load::wire::sse::{SseDecoder, SseError};
use crate::load::wire::wire_clock::WireClock;
use crate::profile::Profile;
use crate::record::{redact, ErrorClass};

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

/// The most of an error response's body that is read (its first 200 characters are kept);
/// the rest is not read and the connection is closed.
pub const MAX_ERROR_BODY: usize = 64 << 10;
/// The most of a whole (non-streamed) response that is read: far above any completion of a
/// few thousand tokens, low enough that a body that never ends cannot take the memory.
pub const MAX_WHOLE_BODY: usize = 64 << 20;
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

/// Reads a hyper body up to its end or `cap` bytes, whichever comes first. Returns the bytes
/// read (at most `cap`) and whether the body ended.
async fn read_body_capped(body: &mut Incoming, cap: usize) -> Result<(Vec<u8>, bool), String> {
    let mut read = Vec::new();
    loop {
        match next_data(body).await {
            Ok(Some(piece)) => {
                let room = cap - read.len();
                if piece.len() > room {
                    read.extend_from_slice(&piece[..room]);
                    return Ok((read, false));
                }
                read.extend_from_slice(&piece);
            }
            Ok(None) => return Ok((read, true)),
            Err(e) => return Err(error_chain(&e)),
        }
    }
}

/// Limits on one request: its whole time and the longest silence.
#[derive(Debug, Clone, Copy)]
pub struct RequestLimits {
    /// The whole request, from send to the last byte.
    pub request_timeout: Duration,
    /// The longest wait for the next piece of the response once it has started.
    pub stall_timeout: Duration,
    /// Keep up to this many bytes of the answer's text in [`Observed::answer`] (0: none):
    /// multi-turn runs carry it into the next turn (`Conversations::answer_bytes`).
    pub answer_bytes: usize,
}

/// What the client observed for one request, before classification.
#[derive(Debug, Clone, Default)]
pub struct Observed {
    /// When the request's first bytes were handed to the kernel (when it was started, if
    /// it never got that far or the connection could not say).
    pub sent_s: f64,
    /// From the start of the request to its first bytes leaving: the client's own queueing
    /// (and the connect, on a new connection), kept out of TTFT and E2E.
    pub send_delay_s: Option<f64>,
    /// The request opened its connection (its send delay includes the handshakes).
    pub new_connection: bool,
    pub first_byte_s: Option<f64>,
    pub first_chunk_s: Option<f64>,
    pub end_s: f64,
    /// Content chunks only (role-only and usage-only chunks are not tokens).
    pub chunks: ChunkLog,
    pub usage: Option<Usage>,
    pub finish_reason: Option<String>,
    pub http_status: Option<u16>,
    pub failure: Option<(ErrorClass, String)>,
    /// The answer's text, kept only when [`RequestLimits::answer_bytes`] is set.
    pub answer: Option<String>,
    /// The most bytes of it kept.
    pub answer_cap: usize,
}

/// Sends `body` to `url` and observes the response. `clock` is the run's time origin. The
/// first byte, each chunk and the end are timed by when their data reached this machine
/// (wire_clock.rs), not by when this task parsed them.
pub async fn send(
    client: &LoadClient,
    url: &Uri,
    body: bytes::Bytes,
    api_key: Option<&HeaderValue>,
    stream: bool,
    limits: RequestLimits,
    clock: Instant,
) -> Observed {
    let since = |t: Instant| t.duration_since(clock).as_secs_f64();
    let start = Instant::now();
    let mut obs = Observed {
        sent_s: since(start),
        answer: (limits.answer_bytes > 0).then(String::new),
        answer_cap: limits.answer_bytes,
        ..Observed::default()
    };
    let deadline = tokio::time::Instant::from_std(start + limits.request_timeout);

    let mut request = Request::post(url.clone()).header(CONTENT_TYPE, "application/json");
    if let Some(key) = api_key {
        request = request.header(AUTHORIZATION, key.clone());
    }
    let request = match request.body(Full::new(body)) {
        Ok(r) => r,
        Err(e) => {
            return fail(
                obs,
                ErrorClass::Connect,
                &format!("bad request: {e}"),
                since,
            )
        }
    };
    let response = match timeout_at(deadline, client.request(request)).await {
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
            } else {
                ErrorClass::Reset
            };
            return fail(obs, class, &error_chain(&e), since);
        }
        Ok(Ok(r)) => r,
    };
    let (response, lease) = response;
    let mut arrivals = Arrivals {
        clock: lease.clock().cloned(),
        floor: start,
    };
    // The request was sent when its first bytes left, not when this task began it: with a
    // thousand requests starting at once on one core, the last were written tens of
    // milliseconds later (docs/client-benchmark.md), time the server never saw.
    let written = (arrivals.clock.as_ref())
        .and_then(WireClock::write_started)
        .filter(|w| *w >= start);
    if let Some(written) = written {
        obs.sent_s = since(written);
        obs.send_delay_s = Some((written - start).as_secs_f64());
        arrivals.floor = written;
    }
    obs.new_connection = lease.new_connection;
    obs.first_byte_s = Some(since(arrivals.latest()));
    let status = response.status();
    obs.http_status = Some(status.as_u16());
    if !status.is_success() {
        // At most MAX_ERROR_BODY bytes are read: a server that answers an error with a body
        // that never ends is cut off there (the connection is closed with the lease).
        let mut body = response.into_body();
        let mut text = match timeout_at(deadline, read_body_capped(&mut body, MAX_ERROR_BODY)).await
        {
            Ok(Ok((bytes, ended))) => {
                if ended {
                    // An error answer read to its end leaves the connection usable.
                    client.release(lease).await;
                }
                clip(String::from_utf8_lossy(&bytes).trim())
            }
            _ => String::new(),
        };
        if status.is_redirection() {
            text = "redirects are not followed: point the endpoint at the server itself".into();
        }
        return fail(
            obs,
            ErrorClass::Http,
            &format!("HTTP {status}: {text}"),
            since,
        );
    }
    let body = response.into_body();
    // A stream read up to `[DONE]` leaves the rest of its body (see below).
    let unread = if stream {
        let mut body = body;
        let stopped_early = read_stream(
            &mut body,
            &mut obs,
            deadline,
            limits.stall_timeout,
            clock,
            &mut arrivals,
        )
        .await;
        stopped_early.then_some(body)
    } else {
        read_whole(body, &mut obs, deadline, clock, &mut arrivals).await;
        None
    };
    obs.end_s = match obs.failure {
        // A failure ends when it is noticed (a stall or timeout has no data to time it by).
        Some(_) => since(Instant::now()),
        None => since(arrivals.latest()),
    };
    // A failed response leaves its connection in an unknown state: it is closed (the lease
    // dropped). A successful one goes back to the pool before the caller goes on, so that
    // a closed-loop worker's next request finds it.
    if obs.failure.is_none() {
        // `[DONE]` ends the measurement, but the HTTP body has its own end (the last chunk
        // of the chunked encoding), which may come in a later read. A body dropped before it
        // costs the connection, so it is read to its end (after `end_s` was taken) first.
        // Read aside in a task of its own instead, the closed loop's next request would race
        // it to the pool and open a connection of its own (docs/client-benchmark.md has the
        // counts).
        let ended = match unread {
            Some(body) => drain(body).await,
            None => true,
        };
        if ended {
            client.release(lease).await;
        }
    }
    obs
}

/// Reads a finished response's body to its end (for at most a second). Returns whether it
/// got there.
async fn drain(mut body: Incoming) -> bool {
    let rest = async {
        loop {
            match body.frame().await {
                Some(Ok(_)) => {}
                Some(Err(_)) => return false,
                None => return true,
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(1), rest)
        .await
        .unwrap_or(false)
}

/// The arrival times of one response's reads, never earlier than the request was sent nor
/// than the read before.
struct Arrivals {
    clock: Option<WireClock>,
    floor: Instant,
}

impl Arrivals {
    fn latest(&mut self) -> Instant {
        self.latest_read().0
    }

    /// The latest read's arrival time, and whether it was late (its data waited in the
    /// socket longer than [`read_delay::LATE_READ`]).
    fn latest_read(&mut self) -> (Instant, bool) {
        let (at, waited) = self
            .clock
            .as_ref()
            .and_then(WireClock::latest_read)
            .unwrap_or_else(|| (Instant::now(), None));
        let at = at.max(self.floor);
        self.floor = at;
        (at, waited.is_some_and(|w| w > read_delay::LATE_READ))
    }
}

/// The next piece of body data; trailers are skipped. `Ok(None)` at the end of the body.
async fn next_data(body: &mut Incoming) -> Result<Option<bytes::Bytes>, hyper::Error> {
    while let Some(frame) = body.frame().await {
        if let Ok(data) = frame?.into_data() {
            return Ok(Some(data));
        }
    }
    Ok(None)
}

/// Reads the SSE stream into `obs`. Returns true when it stopped at `[DONE]` (or a failure)
/// before the body's end.
async fn read_stream(
    body: &mut Incoming,
    obs: &mut Observed,
    deadline: tokio::time::Instant,
    stall: Duration,
    clock: Instant,
    arrivals: &mut Arrivals,
) -> bool {
    let since = |t: Instant| t.duration_since(clock).as_secs_f64();
    let mut reader = StreamReader::new();
    let mut merges = LateMerges::default();
    // The stall clock restarts only when an SSE data event arrives: keep-alive comments
    // (`: ping`) are bytes, not progress, and must not hide a server that stopped generating.
    let mut stall_deadline = tokio::time::Instant::now() + stall;
    // One timer for the whole stream, moved only when it fires early: a timer armed and
    // cancelled for every chunk was about 3% of the client's CPU samples at a thousand
    // streams (tokio's timer wheel, insert and remove).
    let timer = tokio::time::sleep_until(stall_deadline.min(deadline));
    tokio::pin!(timer);
    loop {
        let next = tokio::select! {
            biased;
            next = next_data(body) => next,
            () = &mut timer => {
                let due = stall_deadline.min(deadline);
                if tokio::time::Instant::now() < due {
                    // Data came since the timer was set: it fired early.
                    timer.as_mut().reset(due);
                    continue;
                }
                obs.failure = Some(if stall_deadline < deadline {
                    (
                        ErrorClass::Stall,
                        format!("no data event for {}", humantime::format_duration(stall)),
                    )
                } else {
                    (
                        ErrorClass::Timeout,
                        "response not finished before the request timeout".into(),
                    )
                });
                return true;
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
                return true;
            }
        };
        let events_before = reader.data_events;
        let chunks_before = obs.chunks.len();
        let (at, late) = arrivals.latest_read();
        let stop = reader.push(since(at), &bytes, obs);
        merges.count(at, late, obs.chunks.len() - chunks_before);
        if stop {
            return true;
        }
        if reader.data_events > events_before {
            stall_deadline = tokio::time::Instant::now() + stall;
        }
    }
    reader.finish(since(arrivals.latest()), obs);
    false
}

/// Counts a stream's content chunks that came in a late read together with the chunk
/// before them (read_delay.rs), and reports them when the stream ends.
#[derive(Default)]
struct LateMerges {
    chunks: u64,
    late_merged: u64,
    /// The arrival time of the stream's latest content chunk.
    last: Option<Instant>,
}

impl LateMerges {
    /// `new_chunks` content chunks were taken from a read that arrived `at` (late or not).
    fn count(&mut self, at: Instant, late: bool, new_chunks: usize) {
        if new_chunks == 0 {
            return;
        }
        let with_previous = usize::from(self.last == Some(at));
        if late {
            self.late_merged += (new_chunks - 1 + with_previous) as u64;
        }
        self.chunks += new_chunks as u64;
        self.last = Some(at);
    }
}

impl Drop for LateMerges {
    fn drop(&mut self) {
        read_delay::record_chunks(self.chunks, self.late_merged);
    }
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
            obs.chunks.push(
                now,
                info.text_chars,
                info.usage.map(|u| u.completion_tokens),
            );
            if let Some(answer) = obs.answer.as_mut() {
                append_answer(&data, answer, obs.answer_cap);
            }
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
    body: Incoming,
    obs: &mut Observed,
    deadline: tokio::time::Instant,
    clock: Instant,
    arrivals: &mut Arrivals,
) {
    let mut body = body;
    let text = match timeout_at(deadline, read_body_capped(&mut body, MAX_WHOLE_BODY)).await {
        Err(_) => {
            obs.failure = Some((
                ErrorClass::Timeout,
                "response not finished before the request timeout".into(),
            ));
            return;
        }
        Ok(Err(e)) => {
            obs.failure = Some((ErrorClass::Reset, format!("connection broke: {e}")));
            return;
        }
        Ok(Ok((_, false))) => {
            obs.failure = Some((
                ErrorClass::Protocol,
                format!("response body longer than {} MiB", MAX_WHOLE_BODY >> 20),
            ));
            return;
        }
        Ok(Ok((bytes, true))) => bytes,
    };
    let text = match std::str::from_utf8(&text) {
        Ok(t) => t,
        Err(_) => {
            obs.failure = Some((ErrorClass::Protocol, "response body is not UTF-8".into()));
            return;
        }
    };
    let now = arrivals.latest().duration_since(clock).as_secs_f64();
    match parse_response(text) {
        Err(msg) => obs.failure = Some((ErrorClass::Protocol, msg)),
        Ok(info) => {
            if let Some(err) = info.error {
                obs.failure = Some((ErrorClass::Protocol, format!("server error: {err}")));
                return;
            }
            obs.usage = info.usage;
            obs.finish_reason = info.finish_reason.clone();
            if let Some(answer) = obs.answer.as_mut() {
                append_answer(text, answer, obs.answer_cap);
            }
            if info.has_content() {
                obs.chunks.push(
                    now,
                    info.text_chars,
                    info.usage.map(|u| u.completion_tokens),
                );
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
        SseError::LineTooLong => {
            format!(
                "stream line longer than {} MiB",
                crate::load::wire::sse::MAX_LINE >> 20
            )
        }
        SseError::EventTooLong => format!(
            "stream event longer than {} MiB (data lines without the blank line that ends an \
             event)",
            crate::load::wire::sse::MAX_EVENT >> 20
        ),
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
    use crate::load::test_server::{read_request, sse_server};
    use std::io::Write;
    use std::net::TcpListener;

    /// Accepts one connection, reads one request (head and body), answers `reply`, returns
    /// the request head.
    fn serve_once(listener: TcpListener, reply: String) -> std::thread::JoinHandle<String> {
        std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let head = read_request(&mut s).expect("connection closed before the request ended");
            s.write_all(reply.as_bytes()).unwrap();
            head
        })
    }

    fn redirect_to(port: u16) -> String {
        format!("HTTP/1.1 307 Temporary Redirect\r\nLocation: http://127.0.0.1:{port}/v1/models\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
    }

    fn secret_key() -> HeaderValue {
        let mut key = HeaderValue::from_static("Bearer sk-redirect-test");
        key.set_sensitive(true);
        key
    }

    fn limits() -> RequestLimits {
        RequestLimits {
            request_timeout: Duration::from_secs(10),
            stall_timeout: Duration::from_secs(10),
            answer_bytes: 0,
        }
    }

    /// The load's requests do not follow a redirect: the request fails as `http`, saying why,
    /// and the key never reaches the other port.
    #[tokio::test]
    async fn load_requests_do_not_follow_redirects() {
        let a = TcpListener::bind("127.0.0.1:0").unwrap();
        let b = TcpListener::bind("127.0.0.1:0").unwrap();
        let (pa, pb) = (
            a.local_addr().unwrap().port(),
            b.local_addr().unwrap().port(),
        );
        b.set_nonblocking(true).unwrap();
        let a = serve_once(a, redirect_to(pb));
        let key = secret_key();
        let client = crate::load::wire::http::build_load_client(1).unwrap();
        let url: Uri = format!("http://127.0.0.1:{pa}/v1/chat/completions")
            .parse()
            .unwrap();
        let body = bytes::Bytes::from_static(b"{}");
        let obs = send(
            &client,
            &url,
            body,
            Some(&key),
            false,
            limits(),
            Instant::now(),
        )
        .await;
        let head_a = a.join().unwrap();
        assert!(
            head_a
                .to_ascii_lowercase()
                .contains("authorization: bearer sk-redirect-test"),
            "{head_a}"
        );
        let (class, msg) = obs.failure.expect("a redirect is a failure");
        assert_eq!(class, ErrorClass::Http);
        assert!(msg.contains("307") && msg.contains("not followed"), "{msg}");
        assert_eq!(obs.http_status, Some(307));
        assert!(b.accept().is_err(), "the redirect was followed");
    }

    /// The probe follows redirects, and reqwest removes the key when one leads elsewhere.
    #[tokio::test]
    async fn probe_redirect_to_another_port_drops_the_key() {
        let a = TcpListener::bind("127.0.0.1:0").unwrap();
        let b = TcpListener::bind("127.0.0.1:0").unwrap();
        let (pa, pb) = (
            a.local_addr().unwrap().port(),
            b.local_addr().unwrap().port(),
        );
        let body = r#"{"object":"list","data":[]}"#;
        let a = serve_once(a, redirect_to(pb));
        let b = serve_once(
            b,
            format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            ),
        );
        let key = secret_key();
        let client = build_probe_client(Some(&key)).unwrap();
        let response = client
            .get(format!("http://127.0.0.1:{pa}/v1/models"))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        let (head_a, head_b) = (a.join().unwrap(), b.join().unwrap());
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

    /// A server whose chunked body ends 300 ms after `[DONE]`: the client stops measuring at
    /// `[DONE]`, reads the rest of the body before it returns, and its next request reuses the
    /// connection.
    #[tokio::test]
    async fn the_body_after_done_is_read_so_the_connection_is_reused() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            let mut connections = 0;
            listener.set_nonblocking(true).unwrap();
            let started = std::time::Instant::now();
            let mut served = 0;
            while served < 2 && started.elapsed() < Duration::from_secs(10) {
                let Ok((mut s, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(2));
                    continue;
                };
                connections += 1;
                s.set_nonblocking(false).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                while served < 2 && read_request(&mut s).is_some() {
                    let data = "data: {\"choices\":[{\"delta\":{\"content\":\"hi \"}}]}\n\ndata: [DONE]\n\n";
                    let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n";
                    let _ = s.write_all(format!("{head}{:x}\r\n{data}\r\n", data.len()).as_bytes());
                    std::thread::sleep(Duration::from_millis(300));
                    let _ = s.write_all(b"0\r\n\r\n");
                    served += 1;
                }
            }
            connections
        });
        let client = crate::load::wire::http::build_load_client(1).unwrap();
        let url: Uri = format!("http://127.0.0.1:{port}/v1/chat/completions")
            .parse()
            .unwrap();
        for _ in 0..2 {
            let body = bytes::Bytes::from_static(b"{}");
            let obs = send(&client, &url, body, None, true, limits(), Instant::now()).await;
            assert!(obs.failure.is_none(), "{:?}", obs.failure);
            assert_eq!(obs.chunks.len(), 1);
            // Measured up to [DONE], not up to the end of the body 300 ms later (with room
            // for a busy machine).
            assert!(obs.end_s - obs.sent_s < 0.2, "{obs:?}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(
            server.join().unwrap(),
            1,
            "the second request opened a new connection"
        );
    }

    /// A request held in the client before its bytes leave (another task takes the only
    /// thread for 400 ms just after the request was begun) is timed from when it left: the
    /// wait is its send delay, in neither its TTFT nor its E2E. (400 ms held against 250 ms
    /// allowed: room for a busy machine to delay the test server, none for the wait.)
    #[tokio::test(flavor = "current_thread")]
    async fn time_held_in_the_client_is_not_in_ttft() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let data = "data: {\"choices\":[{\"delta\":{\"content\":\"hi \"}}]}\n\ndata: [DONE]\n\n";
        let reply = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: {}\r\n\r\n{data}",
            data.len()
        );
        let server = serve_once(listener, reply);
        let client = crate::load::wire::http::build_load_client(1).unwrap();
        let url: Uri = format!("http://127.0.0.1:{port}/v1/chat/completions")
            .parse()
            .unwrap();
        assert_eq!(client.open(&url, 1).await, 1);
        let clock = Instant::now();
        let request = {
            let (client, url) = (client.clone(), url.clone());
            let body = bytes::Bytes::from_static(b"{}");
            tokio::spawn(
                async move { send(&client, &url, body, None, true, limits(), clock).await },
            )
        };
        // Runs after the request task has begun and handed the request to its connection,
        // before the connection's task writes it.
        tokio::spawn(async { std::thread::sleep(Duration::from_millis(400)) });
        let obs = request.await.unwrap();
        server.join().unwrap();
        assert!(obs.failure.is_none(), "{:?}", obs.failure);
        assert!(!obs.new_connection);
        let held = obs
            .send_delay_s
            .expect("the connection knows when the request left");
        assert!(held >= 0.395, "held {held} s");
        // Counted from the request's start, both would be over 400 ms.
        let ttft = obs.chunks.first_at_s().unwrap() - obs.sent_s;
        assert!(
            (0.0..0.25).contains(&ttft),
            "TTFT {ttft} s holds the client's wait"
        );
        assert!(obs.end_s - obs.sent_s < 0.25, "{obs:?}");
    }

    /// A server that keeps the connection busy with SSE comments but sends no token is
    /// stalled: keep-alives must not reset the stall clock.
    #[tokio::test]
    async fn keep_alive_comments_do_not_hide_a_stall() {
        let (port, server) = sse_server(|s| {
            let role = "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\n\n";
            let _ = s.write_all(role.as_bytes());
            for _ in 0..30 {
                std::thread::sleep(Duration::from_millis(50));
                if s.write_all(b": ping\n\n").is_err() {
                    break;
                }
            }
        });
        let limits = RequestLimits {
            request_timeout: Duration::from_secs(10),
            stall_timeout: Duration::from_millis(400),
            answer_bytes: 0,
        };
        let started = Instant::now();
        let obs = send_with(port, limits).await;
        let waited = started.elapsed();
        let (class, msg) = obs.failure.expect("a stall");
        assert_eq!(class, ErrorClass::Stall, "{msg}");
        assert!(
            waited < Duration::from_millis(1200),
            "stalled after {waited:?}"
        );
        let _ = server.join();
    }

    /// Chunks count as read late together only when their read was late and the chunk
    /// shares its arrival time with the one before (or came in the same frame).
    #[test]
    fn late_merges_are_counted_per_shared_read() {
        let t0 = Instant::now();
        let t1 = t0 + Duration::from_millis(20);
        let mut m = LateMerges::default();
        m.count(t0, false, 1);
        m.count(t0, false, 1); // one prompt read, two frames: a server write, not counted
        m.count(t1, true, 0); // a keep-alive: no chunk
        m.count(t1, true, 1); // a late read, but alone
        m.count(t1, true, 2); // the same late read: both share it with the one before
        m.count(t1 + Duration::from_millis(20), true, 3); // a late read of three
        assert_eq!((m.chunks, m.late_merged), (8, 4));
        std::mem::forget(m); // not counted into this process's totals
    }

    /// A server sending a token every 100 ms for `tokens` tokens, then `[DONE]`.
    fn steady_server(tokens: usize) -> (u16, std::thread::JoinHandle<()>) {
        sse_server(move |s| {
            for _ in 0..tokens {
                std::thread::sleep(Duration::from_millis(100));
                let token = "data: {\"choices\":[{\"delta\":{\"content\":\"a \"}}]}\n\n";
                if s.write_all(token.as_bytes()).is_err() {
                    return;
                }
            }
            let _ = s.write_all(b"data: [DONE]\n\n");
        })
    }

    /// One streamed request to the test server on `port`, on a fresh client.
    async fn send_with(port: u16, limits: RequestLimits) -> Observed {
        let client = crate::load::wire::http::build_load_client(1).unwrap();
        let url: Uri = format!("http://127.0.0.1:{port}/v1/chat/completions")
            .parse()
            .unwrap();
        let body = bytes::Bytes::from_static(b"{}");
        send(&client, &url, body, None, true, limits, Instant::now()).await
    }

    /// The stall timer is moved only when it fires: tokens 100 ms apart for 1.5 s never trip
    /// a 600 ms stall limit, though the timer set at the start fires (twice) while they flow.
    /// (600 ms, not 250: a busy machine can hold the server's thread for a gap of 250 ms.)
    #[tokio::test]
    async fn steady_tokens_never_stall() {
        let (port, server) = steady_server(15);
        let limits = RequestLimits {
            request_timeout: Duration::from_secs(10),
            stall_timeout: Duration::from_millis(600),
            answer_bytes: 0,
        };
        let obs = send_with(port, limits).await;
        assert!(obs.failure.is_none(), "{:?}", obs.failure);
        assert_eq!(obs.chunks.len(), 15);
        server.join().unwrap();
    }

    /// A stream that keeps flowing ends at the request timeout, as a timeout (not a stall).
    #[tokio::test]
    async fn a_flowing_stream_ends_at_the_request_timeout() {
        let (port, server) = steady_server(20);
        let limits = RequestLimits {
            request_timeout: Duration::from_millis(550),
            stall_timeout: Duration::from_millis(500),
            answer_bytes: 0,
        };
        let started = Instant::now();
        let obs = send_with(port, limits).await;
        let waited = started.elapsed();
        let (class, msg) = obs.failure.expect("a timeout");
        assert_eq!(class, ErrorClass::Timeout, "{msg}");
        assert!(
            waited >= Duration::from_millis(540) && waited < Duration::from_millis(1500),
            "ended after {waited:?}"
        );
        server.join().unwrap();
    }
}
