//! The load over HTTPS: `bench` against the simulator behind a TLS front whose certificate a
//! private CA signed (fixtures/tls). Trusted through `SSL_CERT_FILE`, as a company CA would
//! be, every request succeeds; without it the run stops before sending load and says why.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::Arc;

use crate::common::*;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/tls")
        .join(name)
}

/// A TLS front on 127.0.0.1 that forwards each connection to `backend` (host:port), on a
/// thread of its own for the rest of the test process. Returns its port.
fn tls_front(backend: String) -> u16 {
    let certs = CertificateDer::pem_file_iter(fixture("server.pem"))
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_file(fixture("server.key")).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            while let Ok((tcp, _)) = listener.accept().await {
                let (acceptor, backend) = (acceptor.clone(), backend.clone());
                tokio::spawn(async move {
                    let Ok(mut tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let Ok(mut plain) = tokio::net::TcpStream::connect(&backend).await else {
                        return;
                    };
                    let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
                });
            }
        });
    });
    port
}

/// A simulator, and the port of a TLS front for it.
fn simulator_behind_tls() -> (Sim, u16) {
    let sim = Sim::start(1, &["--preset", "fast"]);
    let port = tls_front(sim.urls[0].trim_start_matches("http://").to_string());
    (sim, port)
}

const PROFILE: &str = r#"
[workload]
input_tokens = 16
max_tokens = 16
ignore_eos = true
[sweep]
concurrency = [4]
requests_per_level = 12
trials = 2
request_timeout = "20s"
"#;

/// Runs `bench` against `https://127.0.0.1:port`, with `ca_file` as `SSL_CERT_FILE` (or no
/// extra CA at all).
fn bench_over_tls(port: u16, ca_file: Option<&Path>, dir: &Path) -> Output {
    let endpoints = [format!("https://127.0.0.1:{port}")];
    let profile = write_profile(dir, "tls", &endpoints, PROFILE);
    let mut cmd = bench_command(&profile, &dir.join("out"));
    cmd.arg("--no-plots")
        .env_remove("SSL_CERT_FILE")
        .env_remove("SSL_CERT_DIR");
    if let Some(ca) = ca_file {
        cmd.env("SSL_CERT_FILE", ca);
    }
    cmd.output().expect("run throughline")
}

#[test]
fn the_load_runs_over_https_trusting_a_ca_from_ssl_cert_file() {
    let (sim, port) = simulator_behind_tls();
    let dir = tempfile::tempdir().unwrap();
    let out = bench_over_tls(port, Some(&fixture("ca.pem")), dir.path());
    assert_eq!(code(&out), 0, "{}", text(&out));
    let result = read_json(&dir.path().join("out/results.json"));
    for t in result["levels"][0]["trials"].as_array().unwrap() {
        assert_eq!(t["requests_sent"], 12, "{t}");
        assert_eq!(t["succeeded"], 12, "{t}");
        assert_eq!(t["output_tokens"], 12 * 16);
    }
    // Every request went through the TLS front to the simulator and was counted there.
    assert_eq!(
        sim.counter("throughline_sim_generation_tokens_total"),
        (2 * 12 * 16) as f64
    );
}

#[test]
fn an_untrusted_certificate_stops_the_run_and_says_so() {
    let (sim, port) = simulator_behind_tls();
    let dir = tempfile::tempdir().unwrap();
    let out = bench_over_tls(port, None, dir.path());
    // Exit 2 (an unreachable server, as the README's exit table says).
    assert_eq!(code(&out), 2, "{}", text(&out));
    let said = text(&out).to_lowercase();
    assert!(said.contains("certificate"), "{said}");
    assert!(said.contains("ssl_cert_file"), "no hint: {said}");
    assert_eq!(sim.counter("throughline_sim_generation_tokens_total"), 0.0);
}
