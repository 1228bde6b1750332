//! The environment fingerprint flags that `bench` and `ci` share.

use clap::Args;

use crate::record::Environment;

/// The environment fingerprint a baseline is compared on; what is not given is detected
/// from the server where possible.
#[derive(Debug, Args, Clone, Default)]
pub struct EnvironmentArgs {
    /// GPU model, e.g. "RTX PRO 6000".
    #[arg(long, env = "THROUGHLINE_GPU")]
    pub gpu: Option<String>,
    /// GPUs serving the model (all replicas together).
    #[arg(long, env = "THROUGHLINE_GPU_COUNT")]
    pub gpu_count: Option<u32>,
    /// GPU driver version.
    #[arg(long, env = "THROUGHLINE_DRIVER")]
    pub driver: Option<String>,
    /// Inference engine (vllm, sglang, llama.cpp, tgi); detected from /metrics when not given.
    #[arg(long, env = "THROUGHLINE_ENGINE")]
    pub engine: Option<String>,
    /// Inference engine version, e.g. 0.11.0 (part of the fingerprint a baseline is compared
    /// on: a run on another engine version is not comparable).
    #[arg(long, env = "THROUGHLINE_ENGINE_VERSION")]
    pub engine_version: Option<String>,
    /// Model precision, e.g. bf16, fp8.
    #[arg(long, env = "THROUGHLINE_PRECISION")]
    pub precision: Option<String>,
    /// Runner label or host name (GitHub's RUNNER_NAME is used when set).
    #[arg(long, env = "THROUGHLINE_RUNNER")]
    pub runner: Option<String>,
}

impl EnvironmentArgs {
    pub fn to_environment(&self) -> Environment {
        Environment {
            gpu_model: self.gpu.clone(),
            gpu_count: self.gpu_count,
            driver: self.driver.clone(),
            engine: self.engine.clone(),
            engine_version: self.engine_version.clone(),
            model: None,
            precision: self.precision.clone(),
            runner: self
                .runner
                .clone()
                .or_else(|| std::env::var("RUNNER_NAME").ok()),
            endpoints: 0,
            speculative: None,
            overridden: Vec::new(),
        }
    }
}
