//! axum handlers: the OpenAI endpoints, `/health`, `/metrics`, and SSE streaming.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use futures::stream::{self, Stream, StreamExt};
use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::api::{self, Envelope, Kind, Parsed};
use super::engine::Submission;
use super::faults::{crash, Admit, Fault, FaultState, Kind as FaultKind};
use super::metrics::Metrics;
use super::sched::Emission;

/// What every handler of one replica shares.
pub struct AppState {
    pub model: String,
    pub preset: String,
    pub default_max_tokens: u32,
    /// Tokens the chat template adds to every prompt (`--template-tokens`).
    pub template_tokens: u32,
    /// Counts prompt tokens when set (else one per word).
    pub tokenizer: Option<crate::tokenize::SharedTokenizer>,
    pub submit: mpsc::UnboundedSender<Submission>,
    pub metrics: Arc<Metrics>,
    pub next_id: AtomicU64,
    /// Fault injection and the API key check, shared by the process's replicas.
    pub faults: Arc<FaultState>,
    /// This replica's seed (fault draws are reproducible per replica).
    pub seed: u64,
    /// Per `user`: when each streamed content chunk was handed to the connection (see
    /// `SimConfig::record_send_times`).
    pub send_times: Option<Arc<SendTimes>>,
    /// TCP connections this replica accepted (`GET /sim/connections`): tests check with it
    /// that the client reuses its connections.
    pub connections: Arc<AtomicU64>,
    /// The speed factor this process start drew (`SimConfig::session_factor`).
    pub session_factor: f64,
    /// The version this server reports (`SimConfig::version`).
    pub version: String,
}

/// Send times in nanoseconds since the process's first recorded chunk, per `user`.
pub type SendTimes = std::sync::Mutex<std::collections::HashMap<String, Vec<u64>>>;

fn nanos_since_start() -> u64 {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    START
        .get_or_init(std::time::Instant::now)
        .elapsed()
        .as_nanos() as u64
}

async fn send_times(State(st): State<Arc<AppState>>) -> Response {
    match &st.send_times {
        None => error(
            StatusCode::NOT_FOUND,
            "serve-sim was started without --record-send-times",
        ),
        Some(times) => {
            let times = times.lock().unwrap_or_else(|e| e.into_inner());
            axum::Json(&*times).into_response()
        }
    }
}

pub fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/v1/chat/completions", post(chat))
        .route("/v1/completions", post(completions))
        .route("/v1/models", get(models))
        .route("/health", get(|| async { StatusCode::OK }))
        .route("/metrics", get(metrics))
        .route(
            "/version",
            get(|State(st): State<Arc<AppState>>| async move {
                axum::Json(api::version_body(&st.version))
            }),
        )
        .route("/sim/send-times", get(send_times))
        .route(
            "/sim/connections",
            get(|State(st): State<Arc<AppState>>| async move {
                st.connections
                    .load(std::sync::atomic::Ordering::Relaxed)
                    .to_string()
            }),
        )
        .with_state(state)
}

async fn chat(State(st): State<Arc<AppState>>, headers: HeaderMap, body: Bytes) -> Response {
    generate(st, Kind::Chat, &headers, &body).await
}

async fn completions(State(st): State<Arc<AppState>>, headers: HeaderMap, body: Bytes) -> Response {
    generate(st, Kind::Completion, &headers, &body).await
}

async fn models(State(st): State<Arc<AppState>>, headers: HeaderMap) -> Response {
    let auth = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    // Like vLLM's --api-key: every /v1 route needs the key (/health and /metrics do not).
    if st.faults.authorized(auth) == Some(false) {
        return error(StatusCode::UNAUTHORIZED, "missing or wrong API key");
    }
    axum::Json(json!({
        "object": "list",
        "data": [{"id": st.model, "object": "model", "created": now(), "owned_by": "throughline-sim"}],
    }))
    .into_response()
}

async fn metrics(State(st): State<Arc<AppState>>) -> Response {
    let mut text = st
        .metrics
        .render(&st.preset, &st.version, st.session_factor);
    text.push_str(&st.faults.render());
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}

fn error(status: StatusCode, message: &str) -> Response {
    let kind = if status == StatusCode::BAD_REQUEST {
        "invalid_request_error"
    } else {
        "server_error"
    };
    let body = json!({"error": {"message": message, "type": kind, "param": null, "code": status.as_u16()}});
    (status, axum::Json(body)).into_response()
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Everything a response needs to describe itself.
struct Ctx {
    id: String,
    created: u64,
    model: String,
    kind: Kind,
    req: Parsed,
}

impl Ctx {
    fn env(&self) -> Envelope<'_> {
        Envelope {
            id: &self.id,
            created: self.created,
            model: &self.model,
            kind: self.kind,
        }
    }
}

async fn generate(st: Arc<AppState>, kind: Kind, headers: &HeaderMap, body: &[u8]) -> Response {
    let auth = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    // With a required key, count requests that carry it (and refuse the rest); without one,
    // count requests that carry any bearer token.
    let authorized = match st.faults.authorized(auth) {
        Some(false) => return error(StatusCode::UNAUTHORIZED, "missing or wrong API key"),
        Some(true) => true,
        None => auth.is_some_and(|a| a.len() > 7 && a.starts_with("Bearer ")),
    };
    if authorized {
        st.metrics.authorized.fetch_add(1, Relaxed);
    }
    let n = st.next_id.fetch_add(1, Relaxed);
    let fault = match st.faults.admit(st.seed, n) {
        Admit::Exit => crash("--exit-after-requests reached"),
        Admit::Serve(f) => f,
    };
    let mut req = match api::parse(
        kind,
        body,
        st.default_max_tokens,
        st.tokenizer.as_ref().map(|t| &*t.0),
    ) {
        Ok(r) => r,
        Err(msg) => return error(StatusCode::BAD_REQUEST, &msg),
    };
    req.params.prompt_tokens = req.params.prompt_tokens.saturating_add(st.template_tokens);
    match fault.map(|f| f.kind) {
        Some(FaultKind::Http) => {
            let status = fault
                .and_then(|f| StatusCode::from_u16(f.status).ok())
                .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            return error(status, "injected fault");
        }
        Some(FaultKind::SlowFirstByte) => {
            tokio::time::sleep(st.faults.faults.slow_first_byte).await
        }
        Some(FaultKind::Degenerate) => {
            let p = &mut req.params;
            p.max_tokens = p.max_tokens.min(st.faults.faults.degenerate_tokens);
            p.min_tokens = p.min_tokens.min(p.max_tokens);
        }
        _ => {}
    }
    let (tx, rx) = mpsc::unbounded_channel();
    let sub = Submission {
        params: req.params,
        events: tx,
    };
    if st.submit.send(sub).is_err() {
        return error(StatusCode::SERVICE_UNAVAILABLE, "engine stopped");
    }
    let ctx = Ctx {
        id: format!("cmpl-{n}"),
        created: now(),
        model: st.model.clone(),
        kind,
        req,
    };
    let stall = st.faults.faults.stall;
    if ctx.req.stream {
        let recorder = match (&st.send_times, &ctx.req.user) {
            (Some(times), Some(user)) => Some(Recorder {
                times: times.clone(),
                user: user.clone(),
                sent_ns: Vec::with_capacity(ctx.req.params.max_tokens.min(65_536) as usize),
            }),
            _ => None,
        };
        sse_response(ctx, rx, fault, stall, recorder)
    } else {
        full_response(ctx, rx, fault, stall).await
    }
}

fn injected_reset() -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::ConnectionReset, "injected reset")
}

/// Non-streaming: wait for the last token. Dropping this future (client gone) drops `rx`,
/// which the engine sees as a closed channel and frees the slot.
async fn full_response(
    ctx: Ctx,
    mut rx: mpsc::UnboundedReceiver<Emission>,
    fault: Option<Fault>,
    stall: Duration,
) -> Response {
    let (mut text, mut n) = (String::new(), 0);
    let kind = fault.map(|f| f.kind);
    while let Some(e) = rx.recv().await {
        text.push_str(&super::text::token_text(e.start, e.tokens));
        n += e.tokens;
        if let Some(finish) = e.finish {
            let usage = api::usage(ctx.req.params.prompt_tokens, n, e.cached);
            let mut v = ctx.env().full(text, finish, usage);
            match kind {
                Some(FaultKind::Reset) => {
                    let body = stream::once(async { Err::<Bytes, _>(injected_reset()) });
                    return Response::new(Body::from_stream(body));
                }
                Some(FaultKind::Stall) => tokio::time::sleep(stall).await,
                Some(FaultKind::Malformed) => {
                    return (
                        [(header::CONTENT_TYPE, "application/json")],
                        "{\"choices\": [",
                    )
                        .into_response()
                }
                Some(FaultKind::NoUsage) => {
                    if let Some(o) = v.as_object_mut() {
                        o.remove("usage");
                    }
                }
                _ => {}
            }
            return axum::Json(v).into_response();
        }
    }
    error(StatusCode::SERVICE_UNAVAILABLE, "engine stopped")
}

/// One stream's content-chunk send times, stored under its `user` when the stream ends.
struct Recorder {
    times: Arc<SendTimes>,
    user: String,
    sent_ns: Vec<u64>,
}

impl Drop for Recorder {
    fn drop(&mut self) {
        let sent = std::mem::take(&mut self.sent_ns);
        let mut times = self.times.lock().unwrap_or_else(|e| e.into_inner());
        times.insert(std::mem::take(&mut self.user), sent);
    }
}

fn sse_response(
    ctx: Ctx,
    rx: mpsc::UnboundedReceiver<Emission>,
    fault: Option<Fault>,
    stall: Duration,
    recorder: Option<Recorder>,
) -> Response {
    let body = Body::from_stream(sse_events(ctx, rx, fault.map(|f| f.kind), stall, recorder));
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(body)
        .expect("static headers are valid")
}

fn frame(v: &Value) -> Bytes {
    Bytes::from(format!("data: {v}\n\n"))
}

/// The SSE frames of one request. The body owns `rx`: when the client disconnects, hyper
/// drops the body, the channel closes and the engine frees the slot at its next step.
/// A mid-stream fault (reset, stall, malformed line) strikes after the first content chunk;
/// an error item makes hyper abort the connection, which is how a reset looks to the client.
fn sse_events(
    ctx: Ctx,
    rx: mpsc::UnboundedReceiver<Emission>,
    fault: Option<FaultKind>,
    stall: Duration,
    recorder: Option<Recorder>,
) -> impl Stream<Item = Result<Bytes, std::io::Error>> {
    let head = match ctx.kind {
        Kind::Chat => Some(Ok(frame(&ctx.env().role_chunk()))),
        Kind::Completion => None,
    };
    let state = (ctx, rx, 0u32, false, fault, recorder);
    let body = stream::unfold(
        state,
        move |(ctx, mut rx, mut n, done, mut fault, mut recorder)| async move {
            if done {
                return None;
            }
            if n > 0 {
                match fault {
                    Some(FaultKind::Reset) => {
                        return Some((Err(injected_reset()), (ctx, rx, n, true, None, recorder)));
                    }
                    Some(FaultKind::Stall) => {
                        fault = None;
                        tokio::time::sleep(stall).await;
                    }
                    Some(FaultKind::Malformed) => {
                        let bad = Bytes::from_static(b"data: {\"choices\": [{\"delta\": \n\n");
                        return Some((Ok(bad), (ctx, rx, n, false, None, recorder)));
                    }
                    _ => {}
                }
            }
            let Some(e) = rx.recv().await else {
                // Engine gone mid-stream: end without [DONE] so the client sees a truncated stream.
                return None;
            };
            n += e.tokens;
            let mut out = Vec::with_capacity(3);
            let env = ctx.env();
            let mut chunk =
                env.content_chunk(&super::text::token_text(e.start, e.tokens), e.finish);
            let prompt = ctx.req.params.prompt_tokens;
            let no_usage = fault == Some(FaultKind::NoUsage);
            if ctx.req.continuous_usage && !no_usage {
                chunk["usage"] = api::usage(prompt, n, e.cached);
            }
            out.push(frame(&chunk));
            let finished = e.finish.is_some();
            if finished {
                if ctx.req.include_usage && !no_usage {
                    out.push(frame(&env.usage_chunk(api::usage(prompt, n, e.cached))));
                }
                if fault != Some(FaultKind::NoDone) {
                    out.push(Bytes::from_static(b"data: [DONE]\n\n"));
                }
            }
            let bytes: Bytes = out.concat().into();
            if let Some(r) = recorder.as_mut() {
                r.sent_ns.push(nanos_since_start());
            }
            Some((Ok(bytes), (ctx, rx, n, finished, fault, recorder)))
        },
    );
    stream::iter(head).chain(body)
}
