//! Sending one request and timing it: send, first byte, first chunk, first content token,
//! every content chunk, end. Failures come back classified, never as panics or retries.

//! The parts live beside it: `observed` (what was seen, the limits), `body` (reading the
//! response), `reader` (SSE events into what was seen), `probe_client` (the probe's client,
//! the API key header, capped reads); their public items are re-exported here.

use std::time::Instant;

use http::Request;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::Uri;
use reqwest::header::{HeaderValue, AUTHORIZATION, CONTENT_TYPE};
use tokio::time::timeout_at;

use super::body::{drain, read_body_capped, read_stream, read_whole, Arrivals};
use super::chunk::clip;
use crate::load::wire::http::{Lease, LoadClient};
use crate::load::wire::wire_clock::WireClock;
use crate::record::ErrorClass;

pub use super::body::{MAX_ERROR_BODY, MAX_WHOLE_BODY};
use super::observed::fail;
pub use super::observed::{error_chain, Observed, RequestLimits};
pub use super::probe_client::{
    api_key_header, build_probe_client, read_capped, CappedReadError, MAX_PROBE_BODY,
};
pub use super::reader::StreamReader;

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
    let (response, lease) = match request_answered(client, url, body, api_key, deadline).await {
        Ok(answered) => answered,
        Err((class, msg)) => return fail(obs, class, &msg, since),
    };
    let mut arrivals = time_the_send(&mut obs, &lease, start, since);
    let status = response.status();
    obs.http_status = Some(status.as_u16());
    if !status.is_success() {
        let text = error_answer(client, response, lease, deadline).await;
        return fail(
            obs,
            ErrorClass::Http,
            &format!("HTTP {status}: {text}"),
            since,
        );
    }
    let body = response.into_body();
    // A stream read up to `[DONE]` leaves the rest of its body (see `keep_connection`).
    let unread = if stream {
        let mut body = body;
        let stopped_early = read_stream(
            &mut body,
            &mut obs,
            deadline,
            limits.stall_timeout,
            limits.max_tokens,
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
    if obs.failure.is_none() {
        keep_connection(client, lease, unread).await;
    }
    obs
}

/// Sends the request and waits for the response's head, until `deadline`. A failure comes
/// back as its class and message.
async fn request_answered(
    client: &LoadClient,
    url: &Uri,
    body: bytes::Bytes,
    api_key: Option<&HeaderValue>,
    deadline: tokio::time::Instant,
) -> Result<(http::Response<Incoming>, Lease), (ErrorClass, String)> {
    let mut request = Request::post(url.clone()).header(CONTENT_TYPE, "application/json");
    if let Some(key) = api_key {
        request = request.header(AUTHORIZATION, key.clone());
    }
    let request = match request.body(Full::new(body)) {
        Ok(r) => r,
        Err(e) => return Err((ErrorClass::Connect, format!("bad request: {e}"))),
    };
    match timeout_at(deadline, client.request(request)).await {
        Err(_) => Err((
            ErrorClass::Timeout,
            "no response before the request timeout".to_string(),
        )),
        Ok(Err(e)) => {
            let class = if e.is_connect() {
                ErrorClass::Connect
            } else {
                ErrorClass::Reset
            };
            Err((class, error_chain(&e)))
        }
        Ok(Ok(r)) => Ok(r),
    }
}

/// When the request was sent and its first byte came: the arrival times of the response's
/// reads start from there.
fn time_the_send(
    obs: &mut Observed,
    lease: &Lease,
    start: Instant,
    since: impl Fn(Instant) -> f64,
) -> Arrivals {
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
    arrivals
}

/// The text of an error answer (non-2xx), clipped. At most MAX_ERROR_BODY bytes are read: a
/// server that answers an error with a body that never ends is cut off there (the
/// connection is closed with the lease); one read to its end leaves the connection usable.
async fn error_answer(
    client: &LoadClient,
    response: http::Response<Incoming>,
    lease: Lease,
    deadline: tokio::time::Instant,
) -> String {
    let status = response.status();
    let mut body = response.into_body();
    let mut text = match timeout_at(deadline, read_body_capped(&mut body, MAX_ERROR_BODY)).await {
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
    text
}

/// A successful response's connection goes back to the pool before the caller goes on, so
/// that a closed-loop worker's next request finds it. (A failed response leaves its
/// connection in an unknown state: it is closed, the lease dropped.)
async fn keep_connection(client: &LoadClient, lease: Lease, unread: Option<Incoming>) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::test_server::{read_request, sse_server};
    use std::io::Write;
    use std::net::TcpListener;
    use std::time::Duration;

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
            max_tokens: None,
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
            max_tokens: None,
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
            max_tokens: None,
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
            max_tokens: None,
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
