//! Opens a level's connections before its first request.
//!
//! Without it, the first request of each of C workers pays a TCP (and TLS) handshake inside
//! its TTFT, and at C = 1,024 on one core the client spends over 100 ms opening connections
//! while the first streams' tokens are already arriving: chunks wait unread, some are read
//! together and timed as one, and the trial's first token gaps are the client's, not the
//! server's (docs/client-benchmark.md measured it gap by gap). So before a level starts,
//! one `GET /v1/models` per connection opens them all at once and leaves them in the pool;
//! the level's requests then start on open connections, as in a server's steady state.
//! These requests are not part of any trial and are not recorded.

use std::time::Duration;

use http::Request;
use http_body_util::{BodyExt, Full};
use hyper::Uri;
use reqwest::header::{HeaderValue, AUTHORIZATION};
use tokio::task::JoinSet;

use super::body::base_url;
use super::http::LoadClient;

/// How long one opening request may take, its handshake included (longer than the
/// client's own connect timeout, so that a slow connect fails as a connect).
const OPEN_TIMEOUT: Duration = Duration::from_secs(15);

/// Sends `per_endpoint` concurrent `GET /v1/models` to each endpoint and reads each answer
/// to its end, so that the pool keeps one open connection per request. Returns how many got
/// an HTTP answer (any status: the connection is open either way). Failures are left to the
/// level's own requests, which report them in their classes.
pub async fn open_connections(
    client: &LoadClient,
    endpoints: &[String],
    per_endpoint: usize,
    api_key: Option<&HeaderValue>,
) -> usize {
    let mut requests = JoinSet::new();
    for endpoint in endpoints {
        let Ok(url) = format!("{}/v1/models", base_url(endpoint)).parse::<Uri>() else {
            continue;
        };
        for _ in 0..per_endpoint {
            let (client, url, key) = (client.clone(), url.clone(), api_key.cloned());
            requests.spawn(async move {
                let mut request = Request::get(url);
                if let Some(key) = key {
                    request = request.header(AUTHORIZATION, key);
                }
                let request = request.body(Full::default()).ok()?;
                let answered = async {
                    let response = client.request(request).await.ok()?;
                    response.into_body().collect().await.ok()
                };
                tokio::time::timeout(OPEN_TIMEOUT, answered)
                    .await
                    .ok()
                    .flatten()
            });
        }
    }
    let mut answered = 0;
    while let Some(done) = requests.join_next().await {
        if matches!(done, Ok(Some(_))) {
            answered += 1;
        }
    }
    answered
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpListener;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    /// A keep-alive server that counts the connections it accepts and the requests it
    /// answers (each request a head without body, answered with `{}`).
    fn counting_server() -> (String, Arc<AtomicUsize>, Arc<AtomicUsize>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (connections, requests) =
            (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (c, r) = (Arc::clone(&connections), Arc::clone(&requests));
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut s) = stream else { return };
                c.fetch_add(1, Ordering::SeqCst);
                let r = Arc::clone(&r);
                std::thread::spawn(move || {
                    let mut buf = Vec::new();
                    let mut byte = [0u8; 1024];
                    loop {
                        while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                            buf.drain(..end + 4);
                            r.fetch_add(1, Ordering::SeqCst);
                            let answer = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}";
                            if s.write_all(answer.as_bytes()).is_err() {
                                return;
                            }
                        }
                        match s.read(&mut byte) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&byte[..n]),
                        }
                    }
                });
            }
        });
        (url, connections, requests)
    }

    /// Eight opening requests open eight connections, and the next eight concurrent
    /// requests find them open: no new connection.
    #[tokio::test]
    async fn opens_one_connection_per_request_and_keeps_them() {
        let (url, connections, requests) = counting_server();
        let client = super::super::http::build_load_client(16).unwrap();
        let endpoints = vec![format!("{url}/v1")];
        assert_eq!(open_connections(&client, &endpoints, 8, None).await, 8);
        assert_eq!(connections.load(Ordering::SeqCst), 8);
        // The pool takes a connection back once its response is read; give it a moment.
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(open_connections(&client, &endpoints, 8, None).await, 8);
        assert_eq!(requests.load(Ordering::SeqCst), 16);
        assert_eq!(
            connections.load(Ordering::SeqCst),
            8,
            "the second round opened new connections"
        );
    }

    /// An endpoint nobody listens on: nothing answers, nothing panics.
    #[tokio::test]
    async fn an_unreachable_endpoint_opens_nothing() {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let client = super::super::http::build_load_client(4).unwrap();
        let endpoints = vec![format!("http://127.0.0.1:{port}")];
        assert_eq!(open_connections(&client, &endpoints, 4, None).await, 0);
    }
}
