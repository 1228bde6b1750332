//! The command line (clap definitions only; the work is in `commands`).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::commands::plan::PlanArgs;
use crate::record::Environment;

/// Truthful LLM inference server benchmarks, statistical CI regression gates and capacity plans.
#[derive(Debug, Parser)]
#[command(name = "throughline", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
#[allow(clippy::large_enum_variant)] // parsed once; boxing buys nothing
pub enum Command {
    /// Run a benchmark profile: a concurrency sweep with several trials per level.
    Bench(BenchArgs),
    /// Serve the built-in OpenAI-compatible simulated inference server.
    ServeSim(crate::sim::ServeSimArgs),
    /// Run the built-in demo: start the simulated server, run a small profile, print and save.
    Demo(DemoArgs),
    /// Compare a run with a baseline: exit 1 when throughput regressed beyond noise.
    Gate(GateArgs),
    /// Manage baseline files.
    Baseline(BaselineArgs),
    /// Draw the charts (PNG) and the Markdown report of a saved run.
    Plot(crate::commands::plot::PlotArgs),
    /// Project days, nodes and cost for a token budget from measured scaling curves or a node catalog.
    Plan(PlanArgs),
    /// Benchmark the load generator itself against the simulator: chunks/s, CPU, memory per
    /// stream, timing error.
    Selfbench(crate::commands::selfbench::SelfbenchArgs),
    /// The pull-request check: run the profile beside a baseline, gate it against the
    /// baseline on the target branch, write the job summary, outputs and artifacts.
    Ci(crate::commands::ci::CiArgs),
    /// Combine several runs (e.g. a matrix of GPU runners) into one report and one verdict.
    Merge(crate::commands::merge::MergeArgs),
}

#[derive(Debug, Args, Clone)]
pub struct GateArgs {
    /// The candidate run's results.json.
    #[arg(long)]
    pub results: PathBuf,
    /// The baseline file (TOML), e.g. baselines/NAME.toml.
    #[arg(long)]
    pub baseline: PathBuf,
    /// Read the baseline as it is at this git ref (e.g. origin/main), not from the working tree.
    #[arg(long)]
    pub baseline_ref: Option<String>,
    /// Family-wise significance level (default: the baseline's, 0.01).
    #[arg(long)]
    pub alpha: Option<f64>,
    /// Smallest relative drop that may fail the gate, e.g. 0.03 (default: the baseline's).
    #[arg(long)]
    pub min_effect: Option<f64>,
    /// Trials needed on each side to fail a level (default: the baseline's).
    #[arg(long)]
    pub min_trials: Option<u32>,
    /// Write the verdict as JSON.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write JUnit XML (one test case per level).
    #[arg(long)]
    pub junit: Option<PathBuf>,
    /// Write the Markdown summary.
    #[arg(long)]
    pub markdown: Option<PathBuf>,
    /// Also draw the run against the baseline: PNGs and report.md in this folder, with the
    /// charts linked from the Markdown summary.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct BaselineArgs {
    #[command(subcommand)]
    pub command: BaselineCommand,
}

#[derive(Debug, Subcommand)]
pub enum BaselineCommand {
    /// Write a baseline from run results, one session per results file.
    Bless(BlessArgs),
}

#[derive(Debug, Args)]
pub struct BlessArgs {
    /// results.json of a run (repeat for several runs; each becomes a session).
    #[arg(long, required = true)]
    pub results: Vec<PathBuf>,
    /// The baseline file to write, e.g. baselines/NAME.toml.
    #[arg(long)]
    pub baseline: PathBuf,
    /// Start over instead of appending a session.
    #[arg(long)]
    pub replace: bool,
    /// Append a session to the baseline (the default; say it to be explicit).
    #[arg(long, conflicts_with = "replace")]
    pub append: bool,
    /// Baseline name (default: the file name).
    #[arg(long)]
    pub name: Option<String>,
    /// The profile file, relative to the baseline, to record beside it.
    #[arg(long)]
    pub profile: Option<String>,
    /// The commit measured (default: $GITHUB_SHA, else the work tree's HEAD).
    #[arg(long)]
    pub commit: Option<String>,
}

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// The benchmark profile (TOML).
    #[arg(long, short = 'p')]
    pub profile: PathBuf,
    /// Folder for results.json, requests.jsonl and summary.csv.
    #[arg(long, short = 'o', default_value = "throughline-results")]
    pub out: PathBuf,
    /// Replace the profile's endpoints (repeat for several replicas).
    #[arg(long = "endpoint")]
    pub endpoints: Vec<String>,
    #[command(flatten)]
    pub environment: EnvironmentArgs,
    /// Never draw a progress bar (it is drawn only on a terminal anyway).
    #[arg(long)]
    pub no_progress: bool,
    /// Skip the PNG plots and report.md.
    #[arg(long)]
    pub no_plots: bool,
}

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Folder for the demo's files.
    #[arg(long, short = 'o', default_value = "throughline-results/demo")]
    pub out: PathBuf,
}

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
        }
    }
}
