//! axum handlers: the OpenAI endpoints, `/health`, `/metrics`, and SSE streaming.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use futures::stream::{self, Stream, StreamExt};
use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::api::{self, Envelope, Kind, Parsed};
use super::engine::Submission;
use super::metrics::Metrics;
use super::sched::Emission;

/// What every handler of one replica shares.
pub struct AppState {
    pub model: String,
    pub preset: String,
    pub default_max_tokens: u32,
    pub submit: mpsc::UnboundedSender<Submission>,
    pub metrics: Arc<Metrics>,
    pub next_id: AtomicU64,
}

pub fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/v1/chat/completions", post(chat))
        .route("/v1/completions", post(completions))
        .route("/v1/models", get(models))
        .route("/health", get(|| async { StatusCode::OK }))
        .route("/metrics", get(metrics))
        .with_state(state)
}

async fn chat(State(st): State<Arc<AppState>>, body: Bytes) -> Response {
    generate(st, Kind::Chat, &body).await
}

async fn completions(State(st): State<Arc<AppState>>, body: Bytes) -> Response {
    generate(st, Kind::Completion, &body).await
}

async fn models(State(st): State<Arc<AppState>>) -> Response {
    axum::Json(json!({
        "object": "list",
        "data": [{"id": st.model, "object": "model", "created": now(), "owned_by": "throughline-sim"}],
    }))
    .into_response()
}

async fn metrics(State(st): State<Arc<AppState>>) -> Response {
    let text = st.metrics.render(&st.preset, env!("CARGO_PKG_VERSION"));
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

async fn generate(st: Arc<AppState>, kind: Kind, body: &[u8]) -> Response {
    let req = match api::parse(kind, body, st.default_max_tokens) {
        Ok(r) => r,
        Err(msg) => return error(StatusCode::BAD_REQUEST, &msg),
    };
    let (tx, rx) = mpsc::unbounded_channel();
    let sub = Submission {
        params: req.params,
        events: tx,
    };
    if st.submit.send(sub).is_err() {
        return error(StatusCode::SERVICE_UNAVAILABLE, "engine stopped");
    }
    let ctx = Ctx {
        id: format!("cmpl-{}", st.next_id.fetch_add(1, Relaxed)),
        created: now(),
        model: st.model.clone(),
        kind,
        req,
    };
    if ctx.req.stream {
        sse_response(ctx, rx)
    } else {
        full_response(ctx, rx).await
    }
}

/// Non-streaming: wait for the last token. Dropping this future (client gone) drops `rx`,
/// which the engine sees as a closed channel and frees the slot.
async fn full_response(ctx: Ctx, mut rx: mpsc::UnboundedReceiver<Emission>) -> Response {
    let (mut text, mut n) = (String::new(), 0);
    while let Some(e) = rx.recv().await {
        text.push_str(&api::token_text(e.start, e.tokens));
        n += e.tokens;
        if let Some(finish) = e.finish {
            let usage = api::usage(ctx.req.params.prompt_tokens, n);
            return axum::Json(ctx.env().full(text, finish, usage)).into_response();
        }
    }
    error(StatusCode::SERVICE_UNAVAILABLE, "engine stopped")
}

fn sse_response(ctx: Ctx, rx: mpsc::UnboundedReceiver<Emission>) -> Response {
    let body = Body::from_stream(sse_events(ctx, rx).map(Ok::<_, std::convert::Infallible>));
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
fn sse_events(ctx: Ctx, rx: mpsc::UnboundedReceiver<Emission>) -> impl Stream<Item = Bytes> {
    let head = match ctx.kind {
        Kind::Chat => Some(frame(&ctx.env().role_chunk())),
        Kind::Completion => None,
    };
    let state = (ctx, rx, 0u32, false);
    let body = stream::unfold(state, |(ctx, mut rx, mut n, done)| async move {
        if done {
            return None;
        }
        let Some(e) = rx.recv().await else {
            // Engine gone mid-stream: end without [DONE] so the client sees a truncated stream.
            return None;
        };
        n += e.tokens;
        let mut out = Vec::with_capacity(3);
        let env = ctx.env();
        let mut chunk = env.content_chunk(&api::token_text(e.start, e.tokens), e.finish);
        let prompt = ctx.req.params.prompt_tokens;
        if ctx.req.continuous_usage {
            chunk["usage"] = api::usage(prompt, n);
        }
        out.push(frame(&chunk));
        let finished = e.finish.is_some();
        if finished {
            if ctx.req.include_usage {
                out.push(frame(&env.usage_chunk(api::usage(prompt, n))));
            }
            out.push(Bytes::from_static(b"data: [DONE]\n\n"));
        }
        let bytes: Bytes = out.concat().into();
        Some((bytes, (ctx, rx, n, finished)))
    });
    stream::iter(head).chain(body)
}
