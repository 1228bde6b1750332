//! Looking at the server(s) before measuring: healthy (waiting while a model loads),
//! reachable, which model, which engine.
//!
//! A sweep against a server that is not there would only produce a table of connection
//! errors; the probe stops it up front with a message that says which endpoint and why.

use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use serde_json::Value;

use reqwest::header::HeaderValue;

use super::stream::client::{error_chain, read_capped, MAX_PROBE_BODY};
use super::telemetry::Recognizer;
use super::wire::body::base_url;
use crate::engine::Engine;
use crate::profile::ModelChoice;
use crate::record::fingerprint::FingerprintField;
use crate::record::redact::{redact, register_endpoint};

/// What the probe learned.
#[derive(Debug, Clone, Default)]
pub struct ProbeReport {
    /// The model ids the first endpoint serves.
    pub models: Vec<String>,
    /// The engine recognised from `/metrics`, when there is one.
    pub engine: Option<Engine>,
    /// The telemetry metrics of that engine the first endpoint exports (see telemetry.rs).
    pub metrics: Vec<&'static str>,
    /// The engine's version as the engine itself reports it (vLLM `/version`, SGLang
    /// `/get_server_info`, TGI `/info`, llama.cpp `/props`, NIM `/v1/version`).
    pub engine_version: Option<String>,
}

impl ProbeReport {
    /// The model the requests name: the profile's, or (for "auto") the first the server
    /// lists. `server` names the server in the message (`http://..`, "the base server ..").
    /// The one place `target.model` is resolved (`bench`, `ci`'s precheck, a relative run).
    pub fn model(&self, choice: &ModelChoice, server: &str) -> Result<String> {
        match (choice, self.models.first()) {
            (ModelChoice::Named(id), _) => Ok(id.clone()),
            (ModelChoice::Auto, Some(first)) => Ok(first.clone()),
            (ModelChoice::Auto, None) => bail!(
                "target.model is \"auto\" but {server} lists no models at /v1/models; set \
                 target.model"
            ),
        }
    }
}

/// Checks every endpoint answers `/v1/models`; reads the model list and the engine.
/// `key_var` is the profile's `target.api_key_env`, named when the server wants a key.
pub async fn probe(
    client: &reqwest::Client,
    endpoints: &[String],
    key_var: Option<&str>,
) -> Result<ProbeReport> {
    let mut report = ProbeReport::default();
    endpoints.iter().for_each(|e| register_endpoint(e));
    let said = |text: String| anyhow::anyhow!("{}", redact(&text));
    for (i, endpoint) in endpoints.iter().enumerate() {
        check_health(client, endpoint)
            .await
            .map_err(|e| said(e.to_string()))?;
        let url = format!("{}/v1/models", base_url(endpoint));
        let response = client
            .get(&url)
            .timeout(Duration::from_secs(10))
            .send()
            .await;
        let response = match response {
            Ok(r) => r,
            Err(e) => {
                let why = error_chain(&e);
                // rustls says "invalid peer certificate: UnknownIssuer" and no more.
                let hint = if why.contains("certificate") {
                    "; if its certificate is signed by a private CA, name the CA's PEM file in \
                     SSL_CERT_FILE"
                } else {
                    ""
                };
                return Err(said(format!(
                    "cannot reach the server at {endpoint} ({url}): {why}{hint}"
                )));
            }
        };
        if !response.status().is_success() {
            return Err(said(format!(
                "the server at {endpoint} answered {} to GET {url}{}",
                response.status(),
                key_hint(response.status(), key_var)
            )));
        }
        if i == 0 {
            let body = read_capped(response, MAX_PROBE_BODY)
                .await
                .map_err(|e| said(format!("GET {url}: {e}")))?;
            let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            report.models = body
                .get("data")
                .and_then(Value::as_array)
                .map(|list| {
                    list.iter()
                        .filter_map(|m| m.get("id").and_then(Value::as_str).map(str::to_string))
                        .collect()
                })
                .unwrap_or_default();
            if let Some((engine, page)) = find_metrics(client, endpoint).await {
                report.engine = Some(engine);
                if let Some(a) = super::telemetry::adapter(engine) {
                    report.metrics = a.present_in(page.page());
                }
            }
            report.engine_version = engine_version(client, endpoint, report.engine).await;
        }
    }
    Ok(report)
}

/// What to do about a 401 or 403: the profile's `target.api_key_env` names the variable
/// that holds the key (the key itself never goes in a file or a flag).
fn key_hint(status: reqwest::StatusCode, key_var: Option<&str>) -> String {
    if status != reqwest::StatusCode::UNAUTHORIZED && status != reqwest::StatusCode::FORBIDDEN {
        return String::new();
    }
    match key_var {
        None => "; the server wants an API key: name the environment variable that holds it \
                 in the profile, `api_key_env = \"VLLM_API_KEY\"` under [target] (the \
                 variable your server reads), and set that variable"
            .to_string(),
        Some(var) if std::env::var_os(var).is_none_or(|v| v.is_empty()) => format!(
            "; the profile's target.api_key_env names {var}, which is not set here: set it to \
             the server's key"
        ),
        Some(var) => format!(
            "; the key in {var} (the profile's target.api_key_env) was refused: is it the key \
             this server was started with?"
        ),
    }
}

/// `GET /health`: a server that says it is not ready (llama.cpp answers 503 while it loads
/// the model) is refused up front. Servers without the route (404) or unreachable ones are
/// left to the `/v1/models` check, which names the problem.
async fn check_health(client: &reqwest::Client, endpoint: &str) -> Result<()> {
    let url = format!("{}/health", base_url(endpoint));
    let Ok(response) = client
        .get(&url)
        .timeout(Duration::from_secs(10))
        .send()
        .await
    else {
        return Ok(());
    };
    let mut status = response.status();
    let mut response = response;
    if status == reqwest::StatusCode::NOT_FOUND {
        // NVIDIA NIM answers readiness at /v1/health/ready instead.
        let ready = format!("{}/v1/health/ready", base_url(endpoint));
        if let Ok(r) = client
            .get(&ready)
            .timeout(Duration::from_secs(10))
            .send()
            .await
        {
            status = r.status();
            response = r;
        }
    }
    if status.is_server_error() {
        let body = read_capped(response, MAX_PROBE_BODY)
            .await
            .unwrap_or_default();
        let body = String::from_utf8_lossy(&body);
        bail!(
            "the server at {endpoint} is not ready: GET {url} answered {status} {}",
            super::stream::chunk::clip(body.trim())
        );
    }
    Ok(())
}

/// The engine names and series of the page at `path`, read line by line as it arrives (at
/// most the first `MAX_PAGE_BYTES`: a swollen page costs no memory); `None` on any failure
/// or a non-2xx answer.
async fn metrics_page(client: &reqwest::Client, endpoint: &str, path: &str) -> Option<Recognizer> {
    let response = get_success(client, endpoint, path).await?;
    let mut page = Recognizer::default();
    super::telemetry::read_lines(response, super::telemetry::MAX_PAGE_BYTES, |line| {
        page.line(line)
    })
    .await
    .ok()?;
    Some(page)
}

/// The answer to `GET {endpoint}{path}` (5 s timeout); `None` on any failure or a non-2xx
/// answer: probes that may find nothing.
async fn get_success(
    client: &reqwest::Client,
    endpoint: &str,
    path: &str,
) -> Option<reqwest::Response> {
    let url = format!("{}{path}", base_url(endpoint));
    let response = client
        .get(url)
        .timeout(Duration::from_secs(5))
        .send()
        .await
        .ok()?;
    response.status().is_success().then_some(response)
}

/// The body of `GET {endpoint}{path}` (as [`get_success`]), at most `limit` bytes.
async fn get_capped(
    client: &reqwest::Client,
    endpoint: &str,
    path: &str,
    limit: usize,
) -> Option<Vec<u8>> {
    let response = get_success(client, endpoint, path).await?;
    read_capped(response, limit).await.ok()
}

/// The Prometheus pages engines serve (most at `/metrics`, NVIDIA NIM at `/v1/metrics`,
/// trtllm-serve at `/prometheus/metrics`): the first page whose metrics name an engine.
async fn find_metrics(client: &reqwest::Client, endpoint: &str) -> Option<(Engine, Recognizer)> {
    for path in Engine::metrics_paths() {
        if let Some(page) = metrics_page(client, endpoint, path).await {
            if let Some(engine) = page.engine(path) {
                return Some((engine, page));
            }
        }
    }
    None
}

/// Recognises an engine by the metric names it exports (parsed, so a name inside a
/// comment or a label value does not count) and the page it was read from.
pub fn engine_from_metrics(text: &str, path: &str) -> Option<Engine> {
    let mut page = Recognizer::default();
    text.lines().for_each(|line| page.line(line));
    page.engine(path)
}

/// The engine's version, asked of the engine at its version route (bounded read, short
/// timeout); `None` when it has none, does not say, or says something that is not a short
/// printable string.
async fn engine_version(
    client: &reqwest::Client,
    endpoint: &str,
    engine: Option<Engine>,
) -> Option<String> {
    let route = engine?.spec().version.as_ref()?;
    let body = get_capped(client, endpoint, route.path, MAX_PROBE_BODY).await?;
    version_field(&body, route.field)
}

/// The version string in a JSON body's `field`, checked to be short and printable.
pub fn version_field(body: &[u8], field: &str) -> Option<String> {
    let v: Value = serde_json::from_slice(body).ok()?;
    let s = match v.get(field)? {
        Value::String(s) => s.trim().to_string(),
        Value::Number(n) => n.to_string(),
        _ => return None,
    };
    (!s.is_empty() && s.len() <= 64 && s.chars().all(|c| !c.is_control())).then_some(s)
}

/// Fills the run's fingerprint from what was detected: the engine and its version from the
/// probe, the GPUs from this machine's GPU tool when every endpoint is on this machine.
/// Typed values are kept; a different detected value is recorded (and warned about).
pub fn fill_environment(
    environment: &mut crate::record::Environment,
    report: &ProbeReport,
    endpoints: &[String],
) {
    environment.take_detected(
        FingerprintField::Engine,
        report.engine.map(|e| e.name().to_string()),
    );
    environment.take_detected(
        FingerprintField::EngineVersion,
        report.engine_version.clone(),
    );
    if endpoints.iter().all(|e| is_loopback(e)) {
        if let Some(g) = super::gpu::detect() {
            environment.take_detected(FingerprintField::GpuModel, g.model);
            environment.take_detected(FingerprintField::GpuCount, g.count.map(|c| c.to_string()));
            environment.take_detected(FingerprintField::Driver, g.driver);
        }
    }
}

/// Whether an endpoint's host is this machine.
fn is_loopback(endpoint: &str) -> bool {
    let Ok(url) = reqwest::Url::parse(endpoint) else {
        return false;
    };
    let Some(host) = url.host_str() else {
        return false;
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Polls every endpoint until it answers `GET /health` with a success (or, where the server
/// has no `/health`, `GET /v1/models`), or until `timeout` has passed since the start. The
/// API key, when given, goes with every check (a server may guard `/v1/models` with it).
/// While it waits (a model can take ten minutes to load), it says on stderr what it waits
/// for, every ~15 s (`THROUGHLINE_WAIT_INTERVAL`, a humantime duration, for tests).
pub async fn wait_healthy(
    endpoints: &[String],
    timeout: Duration,
    api_key: Option<&HeaderValue>,
) -> Result<()> {
    let every = std::env::var("THROUGHLINE_WAIT_INTERVAL")
        .ok()
        .and_then(|v| humantime::parse_duration(v.trim()).ok())
        .filter(|d| !d.is_zero())
        .unwrap_or(WAIT_MESSAGE_INTERVAL);
    wait_healthy_saying(endpoints, timeout, api_key, every, |line| {
        eprintln!("{}", crate::untrusted::for_terminal_lines(line))
    })
    .await
}

/// How often the health wait says what it waits for.
pub const WAIT_MESSAGE_INTERVAL: Duration = Duration::from_secs(15);

/// [`wait_healthy`], saying what it waits for through `say` at once and then every `every`.
pub async fn wait_healthy_saying(
    endpoints: &[String],
    timeout: Duration,
    api_key: Option<&HeaderValue>,
    every: Duration,
    mut say: impl FnMut(&str),
) -> Result<()> {
    endpoints.iter().for_each(|e| register_endpoint(e));
    let client = super::stream::client::build_probe_client(api_key)?;
    let start = Instant::now();
    let deadline = start + timeout;
    let whole = |d: Duration| humantime::format_duration(Duration::from_secs(d.as_secs()));
    for (i, endpoint) in endpoints.iter().enumerate() {
        let mut delay = Duration::from_millis(200);
        let mut last_said: Option<Instant> = None;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let limit = left.clamp(Duration::from_secs(1), Duration::from_secs(10));
            let why = match health(&client, endpoint, limit).await {
                Ok(()) => break,
                Err(why) => why,
            };
            let why = redact(&why).into_owned();
            let shown = redact(endpoint).into_owned();
            let endpoint = &shown;
            if Instant::now() >= deadline {
                bail!(
                    "the server at {endpoint} was not healthy after {} (--wait-healthy): {why}. \
                     Is it started, on this port, and done loading the model?",
                    whole(start.elapsed())
                );
            }
            if last_said.is_none_or(|t| t.elapsed() >= every) {
                let of = match endpoints.len() {
                    1 => String::new(),
                    n => format!(" (endpoint {} of {n})", i + 1),
                };
                say(&format!(
                    "waiting for {endpoint}{of} to be healthy: GET /health (or /v1/models) to \
                     answer 2xx; now: {why}; waited {} of {}",
                    whole(start.elapsed()),
                    whole(timeout)
                ));
                last_said = Some(Instant::now());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            tokio::time::sleep(delay.min(left)).await;
            delay = (delay * 2).min(Duration::from_secs(5)).min(every);
        }
    }
    Ok(())
}

/// One health check; `Err` says why the server is not (yet) healthy.
pub(super) async fn health(
    client: &reqwest::Client,
    endpoint: &str,
    limit: Duration,
) -> std::result::Result<(), String> {
    let base = base_url(endpoint);
    let get = |path: &str| {
        let url = format!("{base}{path}");
        let request = client.get(&url).timeout(limit);
        async move {
            request
                .send()
                .await
                .map(|r| r.status())
                .map_err(|e| format!("GET {url}: {}", error_chain(&e)))
        }
    };
    let status = get("/health").await?;
    if status.is_success() {
        return Ok(());
    }
    if status != reqwest::StatusCode::NOT_FOUND && status != reqwest::StatusCode::METHOD_NOT_ALLOWED
    {
        return Err(format!("GET {base}/health answered {status}"));
    }
    // NVIDIA NIM: readiness at /v1/health/ready (503 while it loads).
    let status = get("/v1/health/ready").await?;
    if status.is_success() {
        return Ok(());
    }
    if status.is_server_error() {
        return Err(format!("GET {base}/v1/health/ready answered {status}"));
    }
    let status = get("/v1/models").await?;
    if status.is_success() {
        Ok(())
    } else {
        Err(format!(
            "no /health, and GET {base}/v1/models answered {status}"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_engines() {
        let m = "/metrics";
        assert_eq!(
            engine_from_metrics("# HELP x\nvllm:num_requests_running 3\n", m),
            Some(Engine::Vllm)
        );
        assert_eq!(
            engine_from_metrics("sglang:num_queue_reqs 0", m),
            Some(Engine::Sglang)
        );
        assert_eq!(
            engine_from_metrics("# vllm: only in a comment\nfoo 1", m),
            None
        );
        assert_eq!(
            engine_from_metrics("foo{x=\"vllm:y\"} 1", m),
            None,
            "a label value is not a metric name"
        );
        let nim = "num_requests_running{model_name=\"m\"} 1\n";
        assert_eq!(engine_from_metrics(nim, "/v1/metrics"), Some(Engine::Nim));
        assert_eq!(engine_from_metrics(nim, m), None);
        assert_eq!(
            engine_from_metrics("nv_inference_pending_request_count{model=\"t\"} 0", m),
            Some(Engine::Triton)
        );
    }

    #[test]
    fn versions_are_short_printable_strings() {
        assert_eq!(
            version_field(br#"{"version":"0.6.3.post1"}"#, "version").as_deref(),
            Some("0.6.3.post1")
        );
        assert_eq!(
            version_field(br#"{"build_info":"b4567-abcdef"}"#, "build_info").as_deref(),
            Some("b4567-abcdef")
        );
        assert_eq!(version_field(br#"{"version":"a\nb"}"#, "version"), None);
        assert_eq!(version_field(b"not json", "version"), None);
        let long = format!(r#"{{"version":"{}"}}"#, "x".repeat(65));
        assert_eq!(version_field(long.as_bytes(), "version"), None);
        assert!(is_loopback("http://127.0.0.1:8000"));
        assert!(is_loopback("http://localhost:8000/v1"));
        assert!(is_loopback("http://[::1]:8000"));
        assert!(!is_loopback("http://gpu-box:8000"));
    }

    #[tokio::test]
    async fn waiting_for_a_server_that_is_not_there_ends() {
        // A port that was just free: nothing listens there.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let started = Instant::now();
        let err = wait_healthy(
            &[format!("http://127.0.0.1:{port}")],
            Duration::from_millis(600),
            None,
        )
        .await
        .unwrap_err()
        .to_string();
        assert!(err.contains("not healthy after"), "{err}");
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    /// While it waits, it says what it waits for, again and again (every ~15 s in real use).
    #[tokio::test]
    async fn waiting_says_what_it_waits_for_at_each_interval() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut lines = Vec::new();
        let err = wait_healthy_saying(
            &[format!("http://127.0.0.1:{port}")],
            Duration::from_millis(1_300),
            None,
            Duration::from_millis(300),
            |l| lines.push(l.to_string()),
        )
        .await
        .unwrap_err();
        assert!(err.to_string().contains("not healthy after"), "{err}");
        assert!(lines.len() >= 3, "{lines:?}");
        for l in &lines {
            assert!(
                l.contains("GET /health (or /v1/models) to answer 2xx"),
                "{l}"
            );
            assert!(l.contains(&format!("127.0.0.1:{port}")), "{l}");
            assert!(l.contains("waited") && l.contains("of 1s"), "{l}");
        }
    }
}
