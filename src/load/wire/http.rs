//! The HTTP client that carries the load: HTTP/1.1 connections made with hyper directly and
//! kept in a pool of our own, rather than reqwest's or hyper-util's pooled clients.
//!
//! - **Bounded read buffers.** hyper grows a connection's read buffer whenever a read fills
//!   it, up to about 408 KiB. A stream that arrives faster than the client reads it (the
//!   instant simulator, a fast engine on loopback, a client briefly descheduled) fills every
//!   read, so at 4,096 streams the buffers alone took 1.6 GiB. SSE chunks are a few hundred
//!   bytes; an 8 KiB buffer (hyper's smallest) holds dozens of them (at 4,096 long streams it
//!   measured within 3% of 16 KiB).
//! - **Exactly the connections asked for.** hyper-util's pool takes a connection back in a
//!   task of its own once the response is read, and a request that finds the pool empty in
//!   the meantime opens another; it also lets concurrent openers share whichever connection
//!   frees first, so a level's first trial opened most of its connections while it ran
//!   (docs/client-benchmark.md has the counts). Here a connection goes back to the pool
//!   before the request's caller goes on, and
//!   [`LoadClient::open`] opens each connection it is asked for.
//!
//! The probe and the telemetry scrapes keep using reqwest: they are few and not timed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};
use bytes::Bytes;
use http::header::HOST;
use http::{HeaderValue, Request, Response};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper::Uri;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::{Connection, HttpConnector};
use tokio::task::JoinSet;
use tower_service::Service;

use super::wire_clock::{StampingConnector, WireClock};

/// The most bytes one connection buffers while reading (hyper's minimum is 8 KiB).
pub const READ_BUFFER_BYTES: usize = 8 * 1024;

/// How long a connection may take to open before the request fails as `connect`.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long [`LoadClient::open`] waits for a connection, TLS handshake included (longer than
/// the TCP connect timeout, so that a slow connect fails as one).
const OPEN_TIMEOUT: Duration = Duration::from_secs(15);

/// How long a released connection may take to be ready for its next request (it is once
/// hyper has read the end of the response); one that is not is closed.
const RELEASE_WAIT: Duration = Duration::from_secs(1);

/// A pooled HTTP/1.1 client (http and https, rustls, no OpenSSL; see [`trusted_roots`]) with
/// TCP_NODELAY, a bounded read buffer and kernel arrival times (wire_clock.rs). It does not
/// follow redirects: a benchmark that silently timed two servers would not be measuring the
/// endpoint it names. Cloning it shares the pool.
#[derive(Clone)]
pub struct LoadClient(Arc<Pool>);

struct Pool {
    connector: HttpsConnector<StampingConnector>,
    /// Idle connections by origin (`scheme://host:port`), the latest released last.
    idle: Mutex<HashMap<String, Vec<Conn>>>,
    /// Idle connections kept per origin (0: every request opens its own).
    max_idle: usize,
}

/// One open connection.
struct Conn {
    sender: SendRequest<Full<Bytes>>,
    clock: Option<WireClock>,
}

/// A connection lent to one request. Give it back with [`LoadClient::release`] once the
/// response has been read to its end; dropping it closes the connection.
pub struct Lease {
    conn: Conn,
    origin: String,
    /// The request opened this connection (else it was open before).
    pub new_connection: bool,
}

impl Lease {
    /// When bytes crossed this connection (wire_clock.rs).
    pub fn clock(&self) -> Option<&WireClock> {
        self.conn.clock.as_ref()
    }
}

/// Why a request got no response.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    /// No connection could be opened (refused, unreachable, TLS handshake failed).
    #[error("cannot connect to {origin}")]
    Connect {
        origin: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The connection broke before the response's head.
    #[error("the connection broke before the response")]
    Broke(#[source] hyper::Error),
}

impl SendError {
    pub fn is_connect(&self) -> bool {
        matches!(self, SendError::Connect { .. })
    }
}

/// Builds the load's client, keeping up to `max_idle` connections per origin open between
/// requests (0: a fresh connection for every request, for servers that close them anyway).
pub fn build_load_client(max_idle: usize) -> Result<LoadClient> {
    let mut tcp = HttpConnector::new();
    tcp.set_nodelay(true);
    tcp.set_connect_timeout(Some(CONNECT_TIMEOUT));
    tcp.enforce_http(false);
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let roots = trusted_roots();
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("cannot configure TLS")?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .wrap_connector(StampingConnector { tcp });
    Ok(LoadClient(Arc::new(Pool {
        connector,
        idle: Mutex::new(HashMap::new()),
        max_idle,
    })))
}

impl LoadClient {
    /// Sends `request` (an absolute URI) on an idle connection to its origin, or on a new
    /// one. A request that an idle connection could not take because the server had just
    /// closed it goes out once more on a new connection, as browsers and hyper-util do.
    pub async fn request(
        &self,
        mut request: Request<Full<Bytes>>,
    ) -> Result<(Response<Incoming>, Lease), SendError> {
        let uri = request.uri().clone();
        let origin = origin(&uri);
        if !request.headers().contains_key(HOST) {
            if let Some(host) = uri
                .authority()
                .and_then(|a| HeaderValue::from_str(a.as_str()).ok())
            {
                request.headers_mut().insert(HOST, host);
            }
        }
        // HTTP/1.1 asks for the path only; the host is in its header.
        if let Some(path) = uri.path_and_query().and_then(|p| p.as_str().parse().ok()) {
            *request.uri_mut() = path;
        }
        loop {
            let (mut conn, new_connection) = match self.take_idle(&origin) {
                Some(conn) => (conn, false),
                None => (self.connect(&uri, &origin).await?, true),
            };
            match conn.sender.try_send_request(request).await {
                Ok(response) => {
                    let lease = Lease {
                        conn,
                        origin,
                        new_connection,
                    };
                    return Ok((response, lease));
                }
                Err(mut e) => match e.take_message() {
                    Some(unsent) if !new_connection => request = unsent,
                    _ => return Err(SendError::Broke(e.into_error())),
                },
            }
        }
    }

    /// Gives a connection back once its response was read to its end: it waits (briefly) for
    /// hyper to be ready for the next request, so that the caller's next request finds it.
    pub async fn release(&self, lease: Lease) {
        let Lease {
            mut conn, origin, ..
        } = lease;
        if self.0.max_idle == 0 {
            return;
        }
        if let Ok(Ok(())) = tokio::time::timeout(RELEASE_WAIT, conn.sender.ready()).await {
            self.park(origin, [conn]);
        }
    }

    /// Opens connections to the origin of `uri` at once until the pool holds `count` idle
    /// ones (no more than it keeps), so that a level that comes round again finds its
    /// connections and opens none. Returns how many opened.
    pub async fn open(&self, uri: &Uri, count: usize) -> usize {
        let origin = origin(uri);
        let missing = count.saturating_sub(self.idle_count(&origin));
        let mut opening: JoinSet<Option<Conn>> = (0..missing)
            .map(|_| {
                let (client, uri, origin) = (self.clone(), uri.clone(), origin.clone());
                async move {
                    let connecting = client.connect(&uri, &origin);
                    tokio::time::timeout(OPEN_TIMEOUT, connecting)
                        .await
                        .ok()?
                        .ok()
                }
            })
            .collect();
        let mut opened = Vec::new();
        while let Some(done) = opening.join_next().await {
            if let Ok(Some(conn)) = done {
                opened.push(conn);
            }
        }
        let count = opened.len();
        self.park(origin, opened);
        count
    }

    /// Keeps `conns` idle for `origin`, as many as the pool's bound leaves room for; the
    /// rest are closed.
    fn park(&self, origin: String, conns: impl IntoIterator<Item = Conn>) {
        let mut idle = self.0.idle.lock().unwrap_or_else(|e| e.into_inner());
        let kept = idle.entry(origin).or_default();
        let room = self.0.max_idle.saturating_sub(kept.len());
        kept.extend(conns.into_iter().take(room));
    }

    /// Idle connections kept for `origin`, closed or not.
    fn idle_count(&self, origin: &str) -> usize {
        let idle = self.0.idle.lock().unwrap_or_else(|e| e.into_inner());
        idle.get(origin).map_or(0, Vec::len)
    }

    /// The latest released idle connection to `origin` that the server has not closed.
    fn take_idle(&self, origin: &str) -> Option<Conn> {
        let mut idle = self.0.idle.lock().unwrap_or_else(|e| e.into_inner());
        let conns = idle.get_mut(origin)?;
        while let Some(conn) = conns.pop() {
            if conn.sender.is_ready() {
                return Some(conn);
            }
        }
        None
    }

    /// Opens a connection (TCP, then TLS for https) and starts its HTTP/1.1 task.
    async fn connect(&self, uri: &Uri, origin: &str) -> Result<Conn, SendError> {
        let failed = |source: Box<dyn std::error::Error + Send + Sync>| SendError::Connect {
            origin: origin.to_string(),
            source,
        };
        let io = self
            .0
            .connector
            .clone()
            .call(uri.clone())
            .await
            .map_err(failed)?;
        let mut extras = http::Extensions::new();
        io.connected().get_extras(&mut extras);
        let (sender, connection) = hyper::client::conn::http1::Builder::new()
            .max_buf_size(READ_BUFFER_BYTES)
            .handshake(io)
            .await
            .map_err(|e| failed(e.into()))?;
        // The task ends when the server closes the connection or the sender is dropped.
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(Conn {
            sender,
            clock: extras.get::<WireClock>().cloned(),
        })
    }
}

/// `scheme://host:port` of a URI: the pool's key.
fn origin(uri: &Uri) -> String {
    let scheme = uri.scheme_str().unwrap_or("http");
    let host = uri.host().unwrap_or("");
    let port = uri
        .port_u16()
        .unwrap_or(if scheme == "https" { 443 } else { 80 });
    format!("{scheme}://{host}:{port}")
}

/// The certificate authorities HTTPS endpoints may be signed by: the system's (as curl and
/// reqwest's probe trust them, so a server behind a company CA works; `SSL_CERT_FILE` and
/// `SSL_CERT_DIR` name others, as for OpenSSL) and Mozilla's bundled list (for containers
/// without a system store). Unreadable system certificates are skipped.
pub fn trusted_roots() -> rustls::RootCertStore {
    let mut roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    let native = rustls_native_certs::load_native_certs();
    roots.add_parsable_certificates(native.certs);
    roots
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::test_server::read_request;
    use http_body_util::BodyExt;
    use std::io::Write;
    use std::net::TcpListener;

    /// A server that answers one request per connection and then closes it without saying
    /// so (no `Connection: close`), as a server's keep-alive timeout does. Returns the URL and
    /// a count of accepted connections.
    fn closing_server() -> (String, Arc<std::sync::atomic::AtomicUsize>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = Arc::clone(&accepted);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut s) = stream else { return };
                counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                read_request(&mut s);
                let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}");
                std::thread::sleep(Duration::from_millis(20));
                drop(s);
            }
        });
        (url, accepted)
    }

    async fn get(client: &LoadClient, url: &str) -> Result<Lease, SendError> {
        let request = Request::get(format!("{url}/v1/models"))
            .body(Full::default())
            .unwrap();
        let (response, lease) = client.request(request).await?;
        assert_eq!(response.status(), 200);
        response.into_body().collect().await.unwrap();
        Ok(lease)
    }

    /// A connection the server closed while it sat idle is not used again: the next request
    /// opens a new one and succeeds.
    #[tokio::test]
    async fn a_connection_closed_while_idle_is_replaced() {
        let (url, accepted) = closing_server();
        let client = build_load_client(4).unwrap();
        let lease = get(&client, &url).await.unwrap();
        assert!(lease.new_connection);
        client.release(lease).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        let lease = get(&client, &url).await.unwrap();
        assert!(lease.new_connection);
        assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 2);
    }

    /// A response that says `Connection: close` is not kept: giving its connection back
    /// neither keeps it nor waits for it.
    #[tokio::test]
    async fn a_connection_the_server_closes_is_not_kept() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut s) = stream else { return };
                read_request(&mut s);
                let _ = s.write_all(
                    b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}",
                );
                // Closed only later: the client must not wait for it.
                std::thread::sleep(Duration::from_millis(500));
            }
        });
        let client = build_load_client(4).unwrap();
        let lease = get(&client, &url).await.unwrap();
        let started = std::time::Instant::now();
        client.release(lease).await;
        assert!(
            started.elapsed() < RELEASE_WAIT / 2,
            "{:?}",
            started.elapsed()
        );
        assert_eq!(client.idle_count(&origin(&url.parse().unwrap())), 0);
    }

    /// Nobody listening: a connect error that names the origin.
    #[tokio::test]
    async fn a_refused_connection_is_a_connect_error() {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let client = build_load_client(4).unwrap();
        let err = get(&client, &format!("http://127.0.0.1:{port}"))
            .await
            .err()
            .unwrap();
        assert!(err.is_connect());
        assert!(
            err.to_string().contains(&format!("127.0.0.1:{port}")),
            "{err}"
        );
    }
}
