//! The HTTP client that carries the load: hyper's own pooled client rather than reqwest's,
//! because only hyper lets us bound the per-connection read buffer.
//!
//! hyper grows a connection's read buffer whenever a read fills it, up to about 408 KiB. A
//! stream that arrives faster than the client reads it (the instant simulator, a fast engine
//! on loopback, a client briefly descheduled) fills every read, so at 4,096 streams the
//! buffers alone took 1.6 GiB. SSE chunks are a few hundred bytes; an 8 KiB buffer (hyper's
//! smallest) holds dozens of them (at 4,096 long streams it measured within 3% of 16 KiB).
//!
//! The probe and the telemetry scrapes keep using reqwest: they are few and not timed.

use std::time::Duration;

use anyhow::{Context, Result};
use bytes::Bytes;
use http_body_util::Full;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioTimer};

use super::arrival::StampingConnector;

/// The most bytes one connection buffers while reading (hyper's minimum is 8 KiB).
pub const READ_BUFFER_BYTES: usize = 8 * 1024;

/// How long a connection may take to open before the request fails as `connect`.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A pooled HTTP/1.1 client (http and https, rustls, no OpenSSL; see [`trusted_roots`]) with
/// TCP_NODELAY, a bounded read buffer and kernel arrival times (arrival.rs). It does not
/// follow redirects: a benchmark that silently timed two servers would not be measuring the
/// endpoint it names.
pub type LoadClient = Client<HttpsConnector<StampingConnector>, Full<Bytes>>;

/// Builds the load's client, keeping up to `max_idle` connections open between requests
/// (0: a fresh connection for every request, for servers that close them anyway).
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
    Ok(Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(max_idle)
        .pool_timer(TokioTimer::new())
        .timer(TokioTimer::new())
        .http1_max_buf_size(READ_BUFFER_BYTES)
        .build(connector))
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
