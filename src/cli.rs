//! The command line's top level: the subcommands. Each command's flags live with the
//! command (`commands/*.rs`), which owns them, and so do the examples its `--help` ends with
//! (tests/it/help_examples.rs runs every one of them against the simulator).
//!
//! Short flags mean the same everywhere: -p profile, -o output folder (or file), -e endpoint,
//! -m model, -c concurrency, -r results, -b baseline, -f force.

use clap::{Args, Parser, Subcommand};

use crate::commands::baseline::BaselineArgs;
use crate::commands::bench::BenchArgs;
use crate::commands::demo::DemoArgs;
use crate::commands::gate::GateArgs;
use crate::commands::init::InitArgs;
use crate::commands::plan::PlanArgs;
use crate::commands::{baseline, bench, ci, demo, gate, init, merge, plan, plot, selfbench};

/// Truthful LLM inference server benchmarks, statistical CI regression gates and capacity plans.
#[derive(Debug, Parser)]
#[command(name = "throughline", version, about, long_about = None, after_help = TOP_EXAMPLES)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

const TOP_EXAMPLES: &str = "\
Examples:
  # A first number from a server you run (vLLM, SGLang, llama.cpp, TGI, ...)
  throughline bench -e http://127.0.0.1:8000
  # A profile to edit and keep in git
  throughline init -e http://127.0.0.1:8000 -o throughline.toml --force
  # The whole job on the built-in simulator, about 80 s
  throughline demo";

#[derive(Debug, Subcommand)]
#[allow(clippy::large_enum_variant)] // parsed once; boxing buys nothing
pub enum Command {
    /// Run a benchmark: a profile file, or a default profile from the flags (a concurrency
    /// sweep with several trials per level).
    #[command(after_help = bench::EXAMPLES)]
    Bench(BenchArgs),
    /// Write a commented profile to start from; with --endpoint, ask the server for its
    /// model, engine and context length first.
    #[command(after_help = init::EXAMPLES)]
    Init(InitArgs),
    /// Serve the built-in OpenAI-compatible simulated inference server.
    #[command(after_help = SERVE_SIM_HELP)]
    ServeSim(crate::commands::serve_sim::ServeSimArgs),
    /// Run the built-in demo: two simulated servers, one 10% slower (a pull request that
    /// regressed), measured in one job, gated, charted and planned; then an unchanged pull
    /// request in 4 blocks with the servers' slots swapped, which passes.
    #[command(after_help = demo::EXAMPLES)]
    Demo(DemoArgs),
    /// Compare a run with a baseline: exit 1 when throughput regressed beyond noise.
    #[command(after_help = gate::EXAMPLES)]
    Gate(GateArgs),
    /// Manage baseline files.
    #[command(after_help = baseline::EXAMPLES)]
    Baseline(BaselineArgs),
    /// Draw the charts (PNG) and the Markdown report of a saved run.
    #[command(after_help = plot::EXAMPLES)]
    Plot(crate::commands::plot::PlotArgs),
    /// Main's history of a baseline per level, and whether it shifted (a nightly check).
    Trend(crate::commands::trend::TrendArgs),
    /// Project days, nodes and cost for a token budget from measured scaling curves or a node catalog.
    #[command(
        after_help = plan::EXAMPLES,
        mut_arg("node", |a| a.help(plan::node_help()))
    )]
    Plan(PlanArgs),
    /// Benchmark the load generator itself against the simulator: chunks/s, CPU, memory per
    /// stream, timing error.
    #[command(after_help = selfbench::EXAMPLES)]
    Selfbench(crate::commands::selfbench::SelfbenchArgs),
    /// The pull-request check: run the profile beside a baseline, gate it against the
    /// baseline on the target branch, write the job summary, outputs and artifacts.
    #[command(after_help = ci::EXAMPLES)]
    Ci(crate::commands::ci::CiArgs),
    /// Find the commit that made a server slower: each step measures a commit against the
    /// good one's server in a relative run in blocks, and the gate decides.
    #[command(after_help = crate::commands::bisect::EXAMPLES)]
    Bisect(crate::commands::bisect::BisectArgs),
    /// Combine several runs (e.g. a matrix of GPU runners) into one report and one verdict.
    #[command(after_help = merge::EXAMPLES)]
    Merge(crate::commands::merge::MergeArgs),
    /// Stop what a run into OUT started and left running (a cancelled or killed job): the
    /// process groups it recorded in OUT/servers/processes.txt, whole trees, never by name.
    #[command(after_help = crate::commands::cleanup::EXAMPLES)]
    Cleanup(crate::commands::cleanup::CleanupArgs),
    /// Print a shell completion script (bash, zsh or fish) on standard output.
    #[command(after_help = COMPLETIONS_EXAMPLES)]
    Completions(CompletionsArgs),
}

/// What each simulator preset is (src/sim/presets.rs holds their figures), and examples.
const SERVE_SIM_HELP: &str = "\
Presets:
  fast                   quick demos and tests: ~2 ms decode steps at batch 1, ~5 ms at
                         batch 64, 64 requests decoded at once
  fixed                  measurement truth: every decode step lasts exactly 20 ms, whatever
                         the batch (1024 at once)
  instant                no engine delay at all: benchmarks the client, not the server
  rtxpro6000x4-qwen122b  Qwen3.5-122B-A10B BF16 on 4x RTX PRO 6000, SGLang TP4 with MTP, 48
                         slots (121.6 tok/s at C = 1 to 1582.5 at C = 64, as measured)
  rtxpro6000-27b         Qwen3.6-27B on one RTX PRO 6000, SGLang, 37 slots (26.5 tok/s for one
                         request, ~1180 tok/s at saturation)

Examples:
  # A quick server on port 8000 (it prints its URL; Ctrl-C stops it)
  throughline serve-sim --preset fast --port 8000
  # A calibrated big node, two replicas on ports 8000 and 8001
  throughline serve-sim --preset rtxpro6000x4-qwen122b --replicas 2 --port 8000
  # A server 10% slower, to see the gate catch a regression
  throughline serve-sim --preset fast --slowdown 1.10 --port 8001";

const COMPLETIONS_EXAMPLES: &str = "\
Examples:
  # bash: load them in this shell (put the line in ~/.bashrc to keep them)
  source <(throughline completions bash)
  # zsh: a file in a folder on $fpath
  throughline completions zsh > ~/.zfunc/_throughline
  # fish
  throughline completions fish > ~/.config/fish/completions/throughline.fish";

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_parser_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn serve_sim_help_names_every_preset() {
        for name in crate::sim::SimConfig::preset_names() {
            assert!(
                SERVE_SIM_HELP.contains(&format!("\n  {name} ")),
                "preset {name} is not described in serve-sim --help"
            );
        }
    }

    #[test]
    fn every_subcommand_ends_its_help_with_two_or_three_examples() {
        let mut cli = Cli::command();
        for sub in cli.get_subcommands_mut() {
            let help = sub.render_long_help().to_string();
            let examples = help.split("Examples:").nth(1).unwrap_or_else(|| {
                panic!("`{}` --help has no examples", sub.get_name());
            });
            let n = examples
                .lines()
                .filter(|l| {
                    l.trim_start().starts_with("throughline ") || l.contains("<(throughline")
                })
                .count();
            assert!(
                (2..=3).contains(&n),
                "`{}` has {n} examples",
                sub.get_name()
            );
        }
    }
}
