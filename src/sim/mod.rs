//! The built-in OpenAI-compatible simulated inference server: a continuous-batching
//! engine model (USL step times, prefill, MTP, FIFO admission) behind real HTTP, so the
//! load generator, the gate and the planner can be tested end to end without a GPU.
//!
//! Engine model (one per replica): at most `max_running` requests decode together, the
//! rest wait FIFO. A step lasts `(tokens_per_step_mean / lambda) * (1 + sigma (b-1) +
//! kappa b (b-1)) * slowdown` for a batch of `b`, plus `prefill_s_per_token` per prompt
//! token admitted in that step; each running request gains 1..=`mtp_max` tokens per step,
//! sent as one chunk. With `token_delay_ms` every step lasts exactly that (times
//! `slowdown`), prefill and batch ignored; 0 means no delay at all. Steps run on an
//! absolute clock, so long runs do not drift. With `session_jitter`, each start of a
//! cluster draws one speed factor from its seed that multiplies every step like `slowdown`
//! (a restarted server's session); `/metrics` reports it.
//!
//! HTTP contract: `POST /v1/chat/completions`, `POST /v1/completions` (streaming or not),
//! `GET /v1/models`, `GET /health`, `GET /metrics`. Prompt tokens = whitespace-separated
//! words of the prompt or of all message texts (a token-id array counts its length); each
//! output token is one word plus a space. Chat streams send the role-only chunk as soon as
//! the request is accepted (so it is not the first token), put `finish_reason` on the
//! chunk carrying the last tokens (like vLLM), then the `include_usage` chunk, then
//! `[DONE]`. `/metrics` counts generation tokens as they are handed to a client,
//! `requests_total` as requests finish, and aborted requests apart. With `--prefix-cache`,
//! a chat prompt's messages before its last (a system prompt, a conversation's history,
//! answers included) already prefilled cost no prefill time again (`prefix_cache`), and usage reports its tokens as `prompt_tokens_details.cached_tokens`.
//!
//! Layout: `config` (knobs), `presets` (calibrated configurations), `sched` (the engine's
//! clock-free logic), `engine` (the real-time task), `replay` (virtual-time calibration),
//! `prefix_cache` (the bounded cache of prompt prefixes), `text` (the output tokens'
//! words), `api` (OpenAI shapes), `http` (axum handlers, SSE), `metrics` (Prometheus),
//! `cluster` (replicas and the `serve-sim` command).

mod api;
mod cluster;
mod config;
mod draw;
mod engine;
pub mod faults;
mod http;
mod metrics;
mod prefix_cache;
mod presets;
mod replay;
mod sched;
#[cfg(test)]
mod tests;
mod text;

pub use cluster::{serve, Listen, SimCluster};
pub use config::SimConfig;
pub use replay::simulated_closed_loop_throughput;
pub use sched::FinishReason;
