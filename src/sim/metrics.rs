//! Server-side counters, exposed as Prometheus text so the load generator's telemetry can
//! cross-check what the client counted against what the server did.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

#[derive(Debug, Default)]
pub struct Metrics {
    pub running: AtomicU64,
    pub waiting: AtomicU64,
    /// Every token handed to a client (a chunk of k MTP tokens counts k).
    pub generation_tokens: AtomicU64,
    /// Prompt tokens of requests admitted (prefilled).
    pub prompt_tokens: AtomicU64,
    /// Prompt tokens looked up in the prefix cache (`--prefix-cache`), like vLLM's
    /// `vllm:prefix_cache_queries_total`.
    pub prefix_cache_queries: AtomicU64,
    /// Of those, tokens found cached (no prefill), like `vllm:prefix_cache_hits_total`.
    pub prefix_cache_hits: AtomicU64,
    /// Requests that ran to a finish_reason.
    pub requests: AtomicU64,
    /// Requests whose client went away before they finished.
    pub aborted: AtomicU64,
    /// Requests that carried `Authorization: Bearer <key>` (the required key, when one is set).
    pub authorized: AtomicU64,
    /// KV cache usage 0..1 as f64 bits, and requests preempted: exported only with a bounded
    /// cache (`--kv-cache-tokens`), as an engine without the figures does not export them.
    pub kv_cache_usage: AtomicU64,
    pub preemptions: AtomicU64,
    pub kv_cache_bounded: std::sync::atomic::AtomicBool,
}

impl Metrics {
    /// Prometheus text exposition (version 0.0.4).
    /// `session_factor`: the speed factor of this process start (1 without session jitter).
    pub fn render(&self, preset: &str, version: &str, session_factor: f64) -> String {
        let mut out = String::new();
        let mut put = |name: &str, kind: &str, help: &str, v: &AtomicU64| {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {}",
                v.load(Relaxed)
            );
        };
        put(
            "throughline_sim_num_requests_running",
            "gauge",
            "Requests in the decode batch.",
            &self.running,
        );
        put(
            "throughline_sim_num_requests_waiting",
            "gauge",
            "Requests queued for a free slot.",
            &self.waiting,
        );
        put(
            "throughline_sim_generation_tokens_total",
            "counter",
            "Output tokens sent to clients.",
            &self.generation_tokens,
        );
        put(
            "throughline_sim_prompt_tokens_total",
            "counter",
            "Prompt tokens of requests admitted, cached ones included.",
            &self.prompt_tokens,
        );
        put(
            "throughline_sim_prefix_cache_queries_total",
            "counter",
            "Prompt tokens looked up in the prefix cache (0 without --prefix-cache).",
            &self.prefix_cache_queries,
        );
        put(
            "throughline_sim_prefix_cache_hits_total",
            "counter",
            "Prompt tokens found in the prefix cache (not prefilled).",
            &self.prefix_cache_hits,
        );
        put(
            "throughline_sim_requests_total",
            "counter",
            "Requests finished with a finish_reason.",
            &self.requests,
        );
        put(
            "throughline_sim_requests_aborted_total",
            "counter",
            "Requests dropped because the client disconnected.",
            &self.aborted,
        );
        put(
            "throughline_sim_authorized_requests_total",
            "counter",
            "Requests that carried a bearer token (the required one, when set).",
            &self.authorized,
        );
        if self.kv_cache_bounded.load(Relaxed) {
            put(
                "throughline_sim_num_preemptions_total",
                "counter",
                "Requests preempted because the KV cache overflowed.",
                &self.preemptions,
            );
            let _ = writeln!(
                out,
                "# HELP throughline_sim_kv_cache_usage_perc KV cache usage, 0 to 1.\n# TYPE throughline_sim_kv_cache_usage_perc gauge\nthroughline_sim_kv_cache_usage_perc {}",
                f64::from_bits(self.kv_cache_usage.load(Relaxed))
            );
        }
        let _ = writeln!(
            out,
            "# HELP throughline_sim_session_factor Speed factor this process start drew (--session-jitter); every step lasts this much longer.\n# TYPE throughline_sim_session_factor gauge\nthroughline_sim_session_factor {session_factor}"
        );
        let _ = writeln!(
            out,
            "# HELP throughline_sim_info Simulator build and preset.\n# TYPE throughline_sim_info gauge\nthroughline_sim_info{{preset=\"{}\",version=\"{}\"}} 1",
            escape(preset),
            escape(version)
        );
        out
    }
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_every_family_with_help_and_type() {
        let m = Metrics::default();
        m.generation_tokens.store(42, Relaxed);
        let text = m.render("fast", "0.1.0", 1.25);
        assert!(text.contains("# TYPE throughline_sim_generation_tokens_total counter\nthroughline_sim_generation_tokens_total 42\n"));
        assert!(text.contains("# TYPE throughline_sim_num_requests_running gauge\n"));
        assert!(text.contains(
            "# TYPE throughline_sim_session_factor gauge\nthroughline_sim_session_factor 1.25\n"
        ));
        assert!(text.contains("throughline_sim_info{preset=\"fast\",version=\"0.1.0\"} 1\n"));
        assert!(
            !text.contains("kv_cache"),
            "an unbounded cache exports no usage"
        );
        m.kv_cache_bounded.store(true, Relaxed);
        m.kv_cache_usage.store(0.5f64.to_bits(), Relaxed);
        m.preemptions.store(3, Relaxed);
        let text = m.render("fast", "0.1.0", 1.0);
        assert!(
            text.contains("\nthroughline_sim_kv_cache_usage_perc 0.5\n"),
            "{text}"
        );
        assert!(
            text.contains("\nthroughline_sim_num_preemptions_total 3\n"),
            "{text}"
        );
    }
}
