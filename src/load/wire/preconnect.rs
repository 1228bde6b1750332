//! Opens a level's connections before its first request.
//!
//! Without it, the first request of each of C workers pays a TCP (and TLS) handshake, and at
//! C = 1,024 on one core the client spends over 100 ms opening connections while the first
//! streams' tokens are already arriving: chunks wait unread, some are read together and
//! timed as one, and the trial's first token gaps are the client's, not the server's
//! (docs/client-benchmark.md measured it gap by gap). So before a level starts, the client
//! opens one connection per worker, all at once, and parks them in its pool (http.rs); the
//! level's requests then start on open connections, as in a server's steady state. Nothing
//! is sent on them until then: the server sees connections, not requests.

use hyper::Uri;

use super::body::base_url;
use super::http::LoadClient;

/// Opens `per_endpoint` connections to each endpoint and keeps them in the client's pool.
/// Returns how many opened. Failures are left to the level's own requests, which report
/// them in their classes.
pub async fn open_connections(
    client: &LoadClient,
    endpoints: &[String],
    per_endpoint: usize,
) -> usize {
    let mut opened = 0;
    for endpoint in endpoints {
        if let Ok(uri) = base_url(endpoint).parse::<Uri>() {
            opened += client.open(&uri, per_endpoint).await;
        }
    }
    opened
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::test_server::read_request;
    use std::io::Write;
    use std::net::TcpListener;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use http_body_util::BodyExt;

    /// A keep-alive server that counts the connections it accepts and the requests it
    /// answers (each request a head without body, answered with `{}`).
    fn counting_server() -> (String, Arc<AtomicUsize>, Arc<AtomicUsize>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        // A backlog for 300 connects at once (std listens with 128): past it the kernel
        // drops a handshake's last step and retries it after 1, 2, 4 s, and the test below,
        // which waits 5 s for 300 accepts, failed now and then on a busy machine.
        // SAFETY: listen on a socket this function owns, already listening; it only
        // changes the length of its queue.
        unsafe { libc::listen(std::os::fd::AsRawFd::as_raw_fd(&listener), 1024) };
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
                    while read_request(&mut s).is_some() {
                        r.fetch_add(1, Ordering::SeqCst);
                        let answer = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}";
                        if s.write_all(answer.as_bytes()).is_err() {
                            return;
                        }
                    }
                });
            }
        });
        (url, connections, requests)
    }

    /// The connections the server has accepted, once it has accepted `expected` (a connect
    /// completes in the kernel before the server's accept loop counts it) or after 5 s.
    async fn accepted(counter: &AtomicUsize, expected: usize) -> usize {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while counter.load(Ordering::SeqCst) < expected && std::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        counter.load(Ordering::SeqCst)
    }

    /// Eight requests at once, each read to its end and its connection given back.
    async fn eight_requests(client: &LoadClient, url: &str) {
        let requests: Vec<_> = (0..8)
            .map(|_| {
                let client = client.clone();
                let request = http::Request::get(format!("{url}/v1/models"))
                    .body(http_body_util::Full::default())
                    .unwrap();
                tokio::spawn(async move {
                    let (response, lease) = client.request(request).await.unwrap();
                    response.into_body().collect().await.unwrap();
                    client.release(lease).await;
                })
            })
            .collect();
        for r in requests {
            r.await.unwrap();
        }
    }

    /// Eight connections opened, none used: the server sees eight connections and no
    /// request. Then two rounds of eight concurrent requests run on exactly those.
    #[tokio::test]
    async fn opens_the_connections_asked_for_and_the_requests_use_them() {
        let (url, connections, requests) = counting_server();
        let client = crate::load::wire::http::build_load_client(16).unwrap();
        let endpoints = vec![format!("{url}/v1")];
        assert_eq!(open_connections(&client, &endpoints, 8).await, 8);
        assert_eq!(accepted(&connections, 8).await, 8);
        assert_eq!(requests.load(Ordering::SeqCst), 0);
        for round in 1..=2 {
            eight_requests(&client, &url).await;
            assert_eq!(requests.load(Ordering::SeqCst), 8 * round);
            assert_eq!(
                connections.load(Ordering::SeqCst),
                8,
                "round {round} opened new connections"
            );
        }
        // A level that comes round again (interleaved trials) finds its connections open;
        // a larger one opens only the difference.
        assert_eq!(open_connections(&client, &endpoints, 8).await, 0);
        assert_eq!(open_connections(&client, &endpoints, 12).await, 4);
        assert_eq!(accepted(&connections, 12).await, 12);
    }

    /// The pool keeps no more idle connections than it was built for: of eight opened,
    /// four stay, and eight requests then open four more.
    #[tokio::test]
    async fn the_pool_keeps_at_most_its_bound() {
        let (url, connections, _) = counting_server();
        let client = crate::load::wire::http::build_load_client(4).unwrap();
        assert_eq!(
            open_connections(&client, std::slice::from_ref(&url), 8).await,
            8
        );
        eight_requests(&client, &url).await;
        assert_eq!(connections.load(Ordering::SeqCst), 12);
    }

    /// Many connections at once (the test server accepts them one by one, so some handshakes
    /// may wait for the kernel's retry): each one asked for is opened, and nothing is sent.
    #[tokio::test]
    async fn opens_hundreds_at_once() {
        let (url, connections, requests) = counting_server();
        let client = crate::load::wire::http::build_load_client(300).unwrap();
        assert_eq!(
            open_connections(&client, std::slice::from_ref(&url), 300).await,
            300
        );
        assert_eq!(accepted(&connections, 300).await, 300);
        assert_eq!(requests.load(Ordering::SeqCst), 0);
    }

    /// An endpoint nobody listens on: nothing answers, nothing panics.
    #[tokio::test]
    async fn an_unreachable_endpoint_opens_nothing() {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let client = crate::load::wire::http::build_load_client(4).unwrap();
        let endpoints = vec![format!("http://127.0.0.1:{port}")];
        assert_eq!(open_connections(&client, &endpoints, 4).await, 0);
    }
}
