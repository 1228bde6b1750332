//! The inference engines throughline knows, and everything that differs between them: how
//! their Prometheus page is recognised, where they say their version, which request fields
//! fix an output length, whether a connection may be reused, and their telemetry's metric
//! names. One file per engine holds its `SPEC`; the rest of the crate asks `Engine` and never
//! lists engines itself.
//!
//! Adding an engine = one new file here (its `SPEC`, copied from the closest engine) + one
//! arm in the `engines!` list below. The probe then detects it, `target.engine` accepts it,
//! and the load generator, telemetry and version probe use its spec.
//!
//! A leaf: this module uses nothing else in the crate (tests/it/layout.rs checks it).

use std::fmt;

/// Declares the engines: the enum, `Engine::ALL` (in detection order: the first engine whose
/// metric prefix a page has wins) and the spec of each, from the module of the same name.
macro_rules! engines {
    ($($(#[$doc:meta])* $variant:ident => $module:ident,)*) => {
        $(mod $module;)*

        /// An inference engine behind an OpenAI-compatible endpoint.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Engine {
            $($(#[$doc])* $variant,)*
        }

        impl Engine {
            /// Every engine, in detection order.
            pub const ALL: &'static [Engine] = &[$(Engine::$variant,)*];

            /// What throughline knows of this engine.
            pub fn spec(self) -> &'static Spec {
                match self {
                    $(Engine::$variant => &$module::SPEC,)*
                }
            }
        }
    };
}

engines! {
    /// vLLM (`vllm serve`).
    Vllm => vllm,
    /// SGLang (`python -m sglang.launch_server`).
    Sglang => sglang,
    /// llama.cpp's `llama-server`.
    LlamaCpp => llama_cpp,
    /// Hugging Face Text Generation Inference.
    Tgi => tgi,
    /// NVIDIA NIM for LLMs.
    Nim => nim,
    /// Triton Inference Server with the TensorRT-LLM backend.
    Triton => triton,
    /// `trtllm-serve`.
    TensorrtLlm => tensorrt_llm,
    /// throughline's own simulator (`serve-sim`).
    Sim => sim,
    /// Any other OpenAI-compatible server: the generic minimum.
    OpenaiGeneric => openai_generic,
}

/// One engine's differences from the others.
#[derive(Debug)]
pub struct Spec {
    /// The name profiles, results and baselines use (`target.engine`, `environment.engine`).
    pub name: &'static str,
    /// Metric-name prefixes that identify the engine on a Prometheus page.
    pub metric_prefixes: &'static [&'static str],
    /// For an engine whose metric names carry no prefix: the page path and a metric that,
    /// together, identify it.
    pub unprefixed: Option<Unprefixed>,
    /// Where the engine says its version.
    pub version: Option<VersionRoute>,
    /// The request fields that make an output exactly `max_tokens` long (`ignore_eos`).
    pub fixed_length: FixedLength,
    /// Whether the load may reuse keep-alive connections.
    pub reuses_connections: bool,
    /// The metric names telemetry samples; `None`: nothing to scrape.
    pub telemetry: Option<Telemetry>,
}

/// A page path and a metric name that identify an engine without a prefix.
#[derive(Debug)]
pub struct Unprefixed {
    pub path: &'static str,
    pub metric: &'static str,
}

/// A route answering JSON and the field holding the version in it.
#[derive(Debug)]
pub struct VersionRoute {
    pub path: &'static str,
    pub field: &'static str,
}

/// How an engine is asked for a fixed output length (see load/dialect.rs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FixedLength {
    /// `ignore_eos` only: the OpenAI-compatible minimum.
    IgnoreEos,
    /// `ignore_eos` and `min_tokens` (= max_tokens unless the profile sets it).
    MinTokens,
    /// `ignore_eos` and `n_predict` (llama.cpp's own name for the output limit).
    NPredict,
    /// No field for it: `ignore_eos` is removed from the request and the run warns.
    Unsupported { warning: &'static str },
}

/// When an engine's generated-token counter moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counting {
    /// As each token is produced.
    PerToken,
    /// When the request finishes, all its tokens at once.
    AtCompletion,
}

/// The metric names of one engine's telemetry. A name may select series by one label,
/// written `name{label=value}`.
#[derive(Debug)]
pub struct Telemetry {
    /// Where the engine serves its Prometheus page.
    pub path: &'static str,
    /// Requests running and waiting: summed over series (ranks, models add up).
    pub running: &'static [&'static str],
    pub waiting: &'static [&'static str],
    /// KV cache usage as a fraction 0..1 (the first name present is used).
    pub cache_usage: &'static [&'static str],
    /// Counters: summed over series.
    pub preemptions: &'static [&'static str],
    pub generated_tokens: &'static [&'static str],
    pub counting: Counting,
}

impl Engine {
    /// The engine of this name (`target.engine`, a results file's `environment.engine`).
    pub fn from_name(name: &str) -> Option<Engine> {
        Engine::ALL.iter().copied().find(|e| e.name() == name)
    }

    pub fn name(self) -> &'static str {
        self.spec().name
    }

    /// Every engine name, quoted and comma-separated, for messages.
    pub fn names_quoted() -> String {
        let names: Vec<String> = Engine::ALL
            .iter()
            .map(|e| format!("{:?}", e.name()))
            .collect();
        names.join(", ")
    }

    /// The Prometheus page paths engines serve, each once, in detection order.
    pub fn metrics_paths() -> Vec<&'static str> {
        let mut paths = Vec::new();
        let telemetry = Engine::ALL
            .iter()
            .filter_map(|e| e.spec().telemetry.as_ref());
        for path in telemetry.map(|t| t.path) {
            if !paths.contains(&path) {
                paths.push(path);
            }
        }
        paths
    }

    /// Recognises an engine from a Prometheus page read at `path`: `has_prefix` says whether
    /// any metric name starts with a prefix, `has_metric` whether a metric is there.
    pub fn detect(
        path: &str,
        has_prefix: impl Fn(&str) -> bool,
        has_metric: impl Fn(&str) -> bool,
    ) -> Option<Engine> {
        let by_prefix = Engine::ALL
            .iter()
            .copied()
            .find(|e| e.spec().metric_prefixes.iter().any(|p| has_prefix(p)));
        by_prefix.or_else(|| {
            Engine::ALL.iter().copied().find(|e| {
                e.spec()
                    .unprefixed
                    .as_ref()
                    .is_some_and(|u| u.path == path && has_metric(u.metric))
            })
        })
    }
}

impl fmt::Display for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_read_back() {
        for e in Engine::ALL {
            assert_eq!(Engine::from_name(e.name()), Some(*e));
        }
        let mut names: Vec<&str> = Engine::ALL.iter().map(|e| e.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Engine::ALL.len());
        assert_eq!(Engine::from_name("auto"), None);
        assert_eq!(Engine::from_name("VLLM"), None);
    }

    #[test]
    fn pages_are_where_the_engines_serve_them() {
        assert_eq!(
            Engine::metrics_paths(),
            ["/metrics", "/v1/metrics", "/prometheus/metrics"]
        );
    }

    #[test]
    fn detection_reads_prefixes_then_unprefixed_pages() {
        let names =
            |list: &'static [&'static str]| move |p: &str| list.iter().any(|n| n.starts_with(p));
        let none = |_: &str| false;
        assert_eq!(
            Engine::detect("/metrics", names(&["vllm:num_requests_running"]), none),
            Some(Engine::Vllm)
        );
        assert_eq!(
            Engine::detect("/metrics", names(&["trtllm:x"]), none),
            Some(Engine::TensorrtLlm)
        );
        let nim = |m: &str| m == "num_requests_running";
        assert_eq!(Engine::detect("/v1/metrics", none, nim), Some(Engine::Nim));
        assert_eq!(Engine::detect("/metrics", none, nim), None);
        assert_eq!(Engine::detect("/metrics", none, none), None);
    }
}
