//! The command line's top level: the subcommands. Each command's flags live with the
//! command (`commands/*.rs`), which owns them.

use clap::{Parser, Subcommand};

use crate::commands::baseline::BaselineArgs;
use crate::commands::bench::BenchArgs;
use crate::commands::demo::DemoArgs;
use crate::commands::gate::GateArgs;
use crate::commands::plan::PlanArgs;

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
    /// Main's history of a baseline per level, and whether it shifted (a nightly check).
    Trend(crate::commands::trend::TrendArgs),
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
