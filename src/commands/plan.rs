//! `throughline plan`: how many days, how many nodes, what cost, for a token budget.

use std::num::{NonZeroU32, NonZeroUsize};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Result};
use clap::{Args, ValueEnum};

use crate::exit::Exit;
use crate::fsutil::write_atomic;
use crate::plan::field::{field_of, Field};
use crate::plan::lengths;
use crate::plan::query::{answer, Lengths, PlanQuery, DEFAULT_RESAMPLES, DEFAULT_SEED};
use crate::plan::values::{self, Usd};
use crate::plan::{Catalog, Facts, TokenBudget};
use crate::profile::LengthDist;
use crate::report::plan::{render_json, render_short, render_table, write_plan_files};

/// The examples `plan --help` ends with (tests/it/help_examples.rs runs each).
pub const EXAMPLES: &str = "\
Examples:
  # Days, nodes and cost on every catalog node for 902,087 completions of ~1,818 tokens
  throughline plan --completions 902087 --avg-output-tokens 1818 --model Qwen3.6-27B --deadline 2d
  # One catalog node type (--node's help lists them), on 8 nodes, for 1.64 billion tokens
  throughline plan --node rtxpro6000-8x-dp --output-tokens 1.64e9 --nodes 8
  # From your own measured curve, with the chart and plan.json written
  throughline plan -r throughline-results/results.json --completions 902087 \\
      --avg-output-tokens 1818 -o plan";

/// The `--node` help, naming the node types of the built-in catalog.
pub fn node_help() -> String {
    let names = Catalog::builtin(&Facts::builtin())
        .map(|c| {
            c.nodes
                .iter()
                .map(|n| n.name.clone())
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default();
    format!(
        "The catalog node type the run measured (with --results), or the only node to plan. \
         Built-in: {names}"
    )
}

/// Console table or JSON on standard output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PlanFormat {
    Table,
    Json,
}

/// Project days, nodes and cost for a token budget, from a run's measured scaling curve or
/// the node catalog, checked against the memory-bandwidth roofline. Each value is read by
/// its parser (plan/values.rs, plan/lengths.rs), so clap refuses a bad one with the flag's
/// name before the planner runs.
#[derive(Debug, Args)]
pub struct PlanArgs {
    /// Completions (requests) in the job, e.g. 902087 (with --avg-output-tokens).
    #[arg(long, allow_hyphen_values = true, value_parser = values::parse_whole)]
    pub completions: Option<f64>,
    /// Average output tokens per completion, e.g. 1818.
    #[arg(long, allow_hyphen_values = true, value_parser = values::parse_count)]
    pub avg_output_tokens: Option<f64>,
    /// Output tokens in all, e.g. 1.64e9 (instead of, or with, --completions).
    #[arg(long, allow_hyphen_values = true, value_parser = values::parse_count)]
    pub output_tokens: Option<f64>,
    /// Average input (prompt) tokens per completion: counted in the KV cache.
    #[arg(long, allow_hyphen_values = true, value_parser = values::parse_count_or_zero)]
    pub avg_input_tokens: Option<f64>,
    /// The job's output lengths as a distribution: fixed:value=N, uniform:mean=M,range_ratio=R,
    /// normal:mean=M,sd=S or lognormal:mean=M,sd=S (e.g. lognormal:mean=1818,sd=1200). Its
    /// mean is the average output tokens; its spread sets the time-weighted context and the
    /// end-of-job tail.
    #[arg(long, value_name = "DIST", conflicts_with = "lengths_from", value_parser = lengths::parse_length)]
    pub output_length: Option<LengthDist>,
    /// The prompts' lengths as a distribution, as --output-length (its mean is the average
    /// input tokens).
    #[arg(long, value_name = "DIST", conflicts_with = "lengths_from", value_parser = lengths::parse_length)]
    pub input_length: Option<LengthDist>,
    /// Read the output (and input) length distributions from a benchmark profile's
    /// workload.output_length (and workload.input_length).
    #[arg(long, value_name = "PROFILE.toml")]
    pub lengths_from: Option<PathBuf>,
    /// Finish within this time: 2d, 36h, 90m, 1d12h. Gives the nodes needed.
    #[arg(long, allow_hyphen_values = true, value_parser = values::parse_duration)]
    pub deadline: Option<Duration>,
    /// With --deadline: the cheapest mix of node types (catalog prices and `available`
    /// counts) that meets the deadline at P90, and the runner-up. Rows whose P90 is unknown
    /// are left out.
    #[arg(long, requires = "deadline")]
    pub cheapest_mix: bool,
    /// The job on exactly N nodes of each type: time (P10-P90, end-of-job tail included) and
    /// cost. plan.json tabulates 1 to 128 nodes for every row either way.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub nodes: Option<u32>,
    /// Budget in dollars: each node type's cost is checked against it.
    #[arg(long, allow_hyphen_values = true, value_parser = values::parse_usd)]
    pub budget: Option<Usd>,
    /// A throughline results file: fit the USL to its concurrency sweep. Or a seed run built
    /// in, transcribed from published reports (one trial a level): seed:rtxpro6000-4x-tp4-qwen3.5-122b
    /// (4x RTX PRO 6000, TP=4, 5 levels), seed:rtxpro6000-8x-dp-qwen3.6-27b-batch1 (8 replicas,
    /// batch 1).
    #[arg(long, short = 'r', value_name = "RUN.json")]
    pub results: Option<PathBuf>,
    /// The catalog node type the run measured (with --results), or the only node to plan.
    #[arg(long)]
    pub node: Option<String>,
    /// GPU of the node the run measured (instead of --node).
    #[arg(long, requires = "results")]
    pub gpu: Option<String>,
    /// GPUs in the node the run measured.
    #[arg(long, requires = "results", value_parser = values::parse_per_node)]
    pub gpus_per_node: Option<NonZeroU32>,
    /// Replicas (servers) like the one measured per node [default: 1, or the node's].
    #[arg(long, value_parser = values::parse_per_node)]
    pub replicas_per_node: Option<NonZeroU32>,
    /// Price of the run's node per hour, dollars (when not from --node).
    #[arg(long, allow_hyphen_values = true, value_parser = values::parse_price)]
    pub usd_per_node_hour: Option<f64>,
    /// Highest concurrency per replica to plan with.
    #[arg(long, value_parser = values::parse_concurrency)]
    pub max_concurrency: Option<NonZeroU32>,
    /// Longest acceptable time per request, e.g. 60s (Little's law).
    #[arg(long, allow_hyphen_values = true, value_parser = values::parse_duration)]
    pub max_latency: Option<Duration>,
    /// SLO: time to first token at p99, e.g. 2s (with --results: plan at the highest load
    /// whose measured p99 meets it, interpolated between levels).
    #[arg(long, allow_hyphen_values = true, value_name = "DURATION", requires = "results", value_parser = values::parse_duration)]
    pub max_ttft_p99: Option<Duration>,
    /// SLO: inter-token latency at p99, e.g. 50ms (with --results, as --max-ttft-p99).
    #[arg(long, allow_hyphen_values = true, value_name = "DURATION", requires = "results", value_parser = values::parse_duration)]
    pub max_itl_p99: Option<Duration>,
    /// Node catalog (TOML) [default: fixtures/catalog.toml, built in].
    #[arg(long)]
    pub catalog: Option<PathBuf>,
    /// Model name from the built-in facts (Qwen3.6-27B, Qwen3.5-122B-A10B, Llama-3.1-8B, ...).
    #[arg(long)]
    pub model: Option<String>,
    /// A Hugging Face config.json to read the model's facts from.
    #[arg(long, value_name = "config.json")]
    pub model_config: Option<PathBuf>,
    /// Parameters in billions (with --model-config, when not derivable).
    #[arg(long, allow_hyphen_values = true, requires = "model_config", value_parser = values::parse_positive)]
    pub params: Option<f64>,
    /// Active parameters per token in billions (MoE, with --model-config).
    #[arg(long, allow_hyphen_values = true, requires = "model_config", value_parser = values::parse_positive)]
    pub active_params: Option<f64>,
    /// Weight format of the model served: bf16, fp8, int8, int4 (AWQ/GPTQ), nvfp4, mxfp4
    /// [default: the facts', config.json's, or the run's recorded precision].
    #[arg(long, value_name = "FORMAT")]
    pub quantization: Option<String>,
    /// KV-cache dtype as the server runs it: auto (16-bit), fp8, fp8_e4m3, fp8_e5m2.
    #[arg(long, value_name = "DTYPE")]
    pub kv_cache_dtype: Option<String>,
    /// Share of the throughput a long run sustains, e.g. 0.75.
    #[arg(long, default_value_t = 1.0, allow_hyphen_values = true, value_parser = values::parse_share)]
    pub sustained: f64,
    /// Your own estimate in days: the plan explains the difference.
    #[arg(long, allow_hyphen_values = true, value_parser = values::parse_positive)]
    pub compare_days: Option<f64>,
    /// The node your --compare-days estimate is for [default: the run's, or --node's].
    #[arg(long, value_name = "NODE", requires = "compare_days")]
    pub compare_node: Option<String>,
    /// What to print on standard output.
    #[arg(long, value_enum, default_value = "table")]
    pub format: PlanFormat,
    /// Print each node's details and the notes too (the table's default fits one screen; all
    /// of it is in --json and plan.json either way).
    #[arg(long, short = 'v')]
    pub verbose: bool,
    /// Also write the plan as JSON to this file.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Folder for plan.json and capacity.png.
    #[arg(long, short = 'o', value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Bootstrap resamples for P10/P90.
    #[arg(long, default_value_t = DEFAULT_RESAMPLES, value_parser = values::parse_resamples)]
    pub resamples: NonZeroUsize,
    /// Bootstrap seed (the same seed gives the same plan).
    #[arg(long, default_value_t = DEFAULT_SEED)]
    pub seed: u64,
}

impl PlanArgs {
    /// The question these flags ask, for the planner: which flags give the job's size is
    /// the command line's rule, said here in its flags' names.
    pub fn query(&self) -> Result<PlanQuery> {
        let lengths = match &self.lengths_from {
            Some(path) => Lengths::FromProfile(path.clone()),
            None => Lengths::Given {
                output: self.output_length.clone(),
                input: self.input_length.clone(),
            },
        };
        let has_output_lengths = self.output_length.is_some() || self.lengths_from.is_some();
        let tokens = match (self.output_tokens, self.completions, self.avg_output_tokens) {
            (Some(output_tokens), completions, avg_output_tokens) => TokenBudget::Total {
                output_tokens,
                completions,
                avg_output_tokens,
            },
            (None, Some(completions), avg) if avg.is_some() || has_output_lengths => {
                TokenBudget::PerCompletion {
                    completions,
                    avg_output_tokens: avg,
                }
            }
            (None, Some(_), _) => {
                bail!("--completions needs --avg-output-tokens (or give --output-tokens)")
            }
            (None, None, Some(_)) => {
                bail!("--avg-output-tokens needs --completions (or give --output-tokens)")
            }
            (None, None, None) => bail!(
                "no workload: give --output-tokens TOTAL, or --completions N with \
                 --avg-output-tokens T"
            ),
        };
        Ok(PlanQuery {
            tokens,
            avg_input_tokens: self.avg_input_tokens,
            lengths,
            deadline: self.deadline,
            cheapest_mix: self.cheapest_mix,
            nodes: self.nodes,
            budget: self.budget,
            results: self.results.clone(),
            node: self.node.clone(),
            gpu: self.gpu.clone(),
            gpus_per_node: self.gpus_per_node,
            replicas_per_node: self.replicas_per_node,
            usd_per_node_hour: self.usd_per_node_hour,
            max_concurrency: self.max_concurrency,
            max_latency: self.max_latency,
            max_ttft_p99: self.max_ttft_p99,
            max_itl_p99: self.max_itl_p99,
            catalog: self.catalog.clone(),
            model: self.model.clone(),
            model_config: self.model_config.clone(),
            params: self.params,
            active_params: self.active_params,
            quantization: self.quantization.clone(),
            kv_cache_dtype: self.kv_cache_dtype.clone(),
            sustained: self.sustained,
            compare_days: self.compare_days,
            compare_node: self.compare_node.clone(),
            resamples: self.resamples,
            seed: self.seed,
        })
    }
}

/// The flag that gave the part of the question a planner's error is about, put in front of
/// the error (the planner names the part in words, knowing no flag).
fn with_flag(error: anyhow::Error) -> anyhow::Error {
    let flag = match field_of(&error) {
        None => return error,
        Some(Field::LengthsFrom) => "--lengths-from",
        Some(Field::Deadline) => "--deadline",
        Some(Field::CheapestMix) => "--cheapest-mix",
        Some(Field::Results) => "--results",
        Some(Field::Node) => "--node",
        Some(Field::Gpu) => "--gpu",
        Some(Field::ReplicasPerNode) => "--replicas-per-node",
        Some(Field::MaxTtftP99) => "--max-ttft-p99",
        Some(Field::MaxItlP99) => "--max-itl-p99",
        Some(Field::Catalog) => "--catalog",
        Some(Field::Model) => "--model",
        Some(Field::ModelConfig) => "--model-config",
        Some(Field::Quantization) => "--quantization",
        Some(Field::KvCacheDtype) => "--kv-cache-dtype",
        Some(Field::CompareDays) => "--compare-days",
        Some(Field::CompareNode) => "--compare-node",
    };
    error.context(flag)
}

pub fn run(args: PlanArgs) -> Result<Exit> {
    let plan = answer(&args.query()?).map_err(with_flag)?;
    let json = render_json(&plan);
    // `--json -` owns stdout: the table goes to stderr, and the JSON is printed once.
    let json_to_stdout = args.json.as_deref().is_some_and(crate::fsutil::is_stdout);
    let table = || match args.verbose {
        true => render_table(&plan),
        false => render_short(&plan),
    };
    match (args.format, json_to_stdout) {
        // Node and model names come from catalog and results files.
        (PlanFormat::Table, false) => print!("{}", crate::untrusted::for_terminal_lines(&table())),
        (PlanFormat::Table, true) => eprint!("{}", crate::untrusted::for_terminal_lines(&table())),
        (PlanFormat::Json, _) => {}
    }
    if args.format == PlanFormat::Json || json_to_stdout {
        println!("{json}");
    }
    if let Some(path) = args.json.as_ref().filter(|_| !json_to_stdout) {
        write_atomic(path, json.as_bytes())?;
        eprintln!("plan: {}", path.display());
    }
    if let Some(dir) = &args.out {
        write_plan_files(&plan, &json, dir)?;
    }
    Ok(Exit::Pass)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    /// The flags alone, as the top-level parser sees them.
    #[derive(Parser)]
    struct Flags {
        #[command(flatten)]
        args: PlanArgs,
    }

    /// The planner's defaults are what `throughline plan` asks with only a job's size.
    #[test]
    fn the_default_query_is_the_flags_defaults() {
        let parsed = Flags::try_parse_from(["plan", "--output-tokens", "1e9"])
            .unwrap()
            .args;
        let want = PlanQuery::new(TokenBudget::Total {
            output_tokens: 1e9,
            completions: None,
            avg_output_tokens: None,
        });
        assert_eq!(want, parsed.query().unwrap());
    }

    /// Which flags give the job's size is the command line's rule, said in its flags.
    #[test]
    fn a_job_without_its_size_names_the_flags_to_give() {
        for (args, said) in [
            (&["plan"][..], "no workload: give --output-tokens"),
            (
                &["plan", "--completions", "10"],
                "--completions needs --avg-output-tokens",
            ),
            (
                &["plan", "--avg-output-tokens", "10"],
                "--avg-output-tokens needs --completions",
            ),
        ] {
            let err = Flags::try_parse_from(args)
                .unwrap()
                .args
                .query()
                .unwrap_err();
            assert!(err.to_string().contains(said), "{args:?}: {err}");
        }
        let lengths = [
            "plan",
            "--completions",
            "10",
            "--output-length",
            "fixed:value=5",
        ];
        let q = Flags::try_parse_from(lengths)
            .unwrap()
            .args
            .query()
            .unwrap();
        assert_eq!(
            q.tokens,
            TokenBudget::PerCompletion {
                completions: 10.0,
                avg_output_tokens: None
            }
        );
    }
}
