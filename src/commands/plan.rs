//! `throughline plan`: how many days, how many nodes, what cost, for a token budget.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, ValueEnum};

use crate::exit::Exit;
use crate::fsutil::write_atomic;
use crate::plan::catalog::MAX_GPUS_PER_NODE;
use crate::plan::facts::{kv_bytes_for, model_from_hf_config, weight_bytes_for, ModelFacts};
use crate::plan::lengths;
use crate::plan::request::{Limits, RunNode};
use crate::plan::slo::Slo;
use crate::plan::workload::{human_duration, parse_count, parse_duration, Given};
use crate::plan::{plan, Catalog, Facts, PlanRequest, Workload};
use crate::record::RunResult;
use crate::report::plan::{render_json, render_table, write_capacity_chart};
use crate::report::plots::CAPACITY_PNG;

/// The examples `plan --help` ends with (tests/it/help_examples.rs runs each).
pub const EXAMPLES: &str = "\
Examples:
  # Days, nodes and cost on every catalog node for 902,087 completions of ~1,818 tokens
  throughline plan --completions 902087 --avg-output-tokens 1818 --model Qwen3.6-27B --deadline 2d
  # One catalog node type (--node's help lists them), on 8 nodes, for 1.64 billion tokens
  throughline plan --node rtx6000-8x-dp --output-tokens 1.64e9 --nodes 8
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

/// Bootstrap resamples for P10/P90 unless `--resamples` says otherwise.
const DEFAULT_RESAMPLES: usize = 1000;
/// Bootstrap seed unless `--seed` says otherwise.
const DEFAULT_SEED: u64 = 20261129;

/// Project days, nodes and cost for a token budget, from a run's measured scaling curve or
/// the node catalog, checked against the memory-bandwidth roofline.
#[derive(Debug, Args)]
pub struct PlanArgs {
    /// Completions (requests) in the job, e.g. 902087 (with --avg-output-tokens).
    #[arg(long, allow_hyphen_values = true)]
    pub completions: Option<String>,
    /// Average output tokens per completion, e.g. 1818.
    #[arg(long, allow_hyphen_values = true)]
    pub avg_output_tokens: Option<String>,
    /// Output tokens in all, e.g. 1.64e9 (instead of, or with, --completions).
    #[arg(long, allow_hyphen_values = true)]
    pub output_tokens: Option<String>,
    /// Average input (prompt) tokens per completion: counted in the KV cache.
    #[arg(long, allow_hyphen_values = true)]
    pub avg_input_tokens: Option<String>,
    /// The job's output lengths as a distribution: fixed:value=N, uniform:mean=M,range_ratio=R,
    /// normal:mean=M,sd=S or lognormal:mean=M,sd=S (e.g. lognormal:mean=1818,sd=1200). Its
    /// mean is the average output tokens; its spread sets the time-weighted context and the
    /// end-of-job tail.
    #[arg(long, value_name = "DIST", conflicts_with = "lengths_from")]
    pub output_length: Option<String>,
    /// The prompts' lengths as a distribution, as --output-length (its mean is the average
    /// input tokens).
    #[arg(long, value_name = "DIST", conflicts_with = "lengths_from")]
    pub input_length: Option<String>,
    /// Read the output (and input) length distributions from a benchmark profile's
    /// workload.output_length (and workload.input_length).
    #[arg(long, value_name = "PROFILE.toml")]
    pub lengths_from: Option<PathBuf>,
    /// Finish within this time: 2d, 36h, 90m, 1d12h. Gives the nodes needed.
    #[arg(long, allow_hyphen_values = true)]
    pub deadline: Option<String>,
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
    #[arg(long, allow_hyphen_values = true)]
    pub budget: Option<String>,
    /// A throughline results file: fit the USL to its concurrency sweep. Or a seed run built
    /// in, transcribed from published reports (one trial a level): seed:rtx6000-4x-tp4-qwen3.5-122b
    /// (4x RTX PRO 6000, TP=4, 5 levels), seed:rtx6000-8x-dp-qwen3.6-27b-batch1 (8 replicas,
    /// batch 1).
    #[arg(long, short = 'r', value_name = "RUN.json")]
    pub results: Option<PathBuf>,
    /// The catalog node type the run measured (with --results), or the only node to plan.
    #[arg(long)]
    pub node: Option<String>,
    /// GPU of the node the run measured (instead of --node).
    #[arg(long)]
    pub gpu: Option<String>,
    /// GPUs in the node the run measured.
    #[arg(long)]
    pub gpus_per_node: Option<u32>,
    /// Replicas (servers) like the one measured per node [default: 1, or the node's].
    #[arg(long)]
    pub replicas_per_node: Option<u32>,
    /// Price of the run's node per hour, dollars (when not from --node).
    #[arg(long)]
    pub usd_per_node_hour: Option<f64>,
    /// Highest concurrency per replica to plan with.
    #[arg(long)]
    pub max_concurrency: Option<u32>,
    /// Longest acceptable time per request, e.g. 60s (Little's law).
    #[arg(long, allow_hyphen_values = true)]
    pub max_latency: Option<String>,
    /// SLO: time to first token at p99, e.g. 2s (with --results: plan at the highest load
    /// whose measured p99 meets it, interpolated between levels).
    #[arg(long, allow_hyphen_values = true, value_name = "DURATION")]
    pub max_ttft_p99: Option<String>,
    /// SLO: inter-token latency at p99, e.g. 50ms (with --results, as --max-ttft-p99).
    #[arg(long, allow_hyphen_values = true, value_name = "DURATION")]
    pub max_itl_p99: Option<String>,
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
    #[arg(long, allow_hyphen_values = true)]
    pub params: Option<f64>,
    /// Active parameters per token in billions (MoE, with --model-config).
    #[arg(long, allow_hyphen_values = true)]
    pub active_params: Option<f64>,
    /// Weight format of the model served: bf16, fp8, int8, int4 (AWQ/GPTQ), nvfp4, mxfp4
    /// [default: the facts', config.json's, or the run's recorded precision].
    #[arg(long, value_name = "FORMAT")]
    pub quantization: Option<String>,
    /// KV-cache dtype as the server runs it: auto (16-bit), fp8, fp8_e4m3, fp8_e5m2.
    #[arg(long, value_name = "DTYPE")]
    pub kv_cache_dtype: Option<String>,
    /// Share of the throughput a long run sustains, e.g. 0.75.
    #[arg(long, default_value_t = 1.0, allow_hyphen_values = true)]
    pub sustained: f64,
    /// Your own estimate in days: the plan explains the difference.
    #[arg(long, allow_hyphen_values = true)]
    pub compare_days: Option<f64>,
    /// The node your --compare-days estimate is for [default: the run's, or --node's].
    #[arg(long, value_name = "NODE")]
    pub compare_node: Option<String>,
    /// What to print on standard output.
    #[arg(long, value_enum, default_value = "table")]
    pub format: PlanFormat,
    /// Also write the plan as JSON to this file.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Folder for plan.json and capacity.png.
    #[arg(long, short = 'o', value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Bootstrap resamples for P10/P90.
    #[arg(long, default_value_t = DEFAULT_RESAMPLES)]
    pub resamples: usize,
    /// Bootstrap seed (the same seed gives the same plan).
    #[arg(long, default_value_t = DEFAULT_SEED)]
    pub seed: u64,
}

/// `plan` with no flags: what callers in the code (the demo) start from.
impl Default for PlanArgs {
    fn default() -> Self {
        PlanArgs {
            completions: None,
            avg_output_tokens: None,
            output_tokens: None,
            avg_input_tokens: None,
            output_length: None,
            input_length: None,
            lengths_from: None,
            deadline: None,
            cheapest_mix: false,
            nodes: None,
            budget: None,
            results: None,
            node: None,
            gpu: None,
            gpus_per_node: None,
            replicas_per_node: None,
            usd_per_node_hour: None,
            max_concurrency: None,
            max_latency: None,
            max_ttft_p99: None,
            max_itl_p99: None,
            catalog: None,
            model: None,
            model_config: None,
            params: None,
            active_params: None,
            quantization: None,
            kv_cache_dtype: None,
            sustained: 1.0,
            compare_days: None,
            compare_node: None,
            format: PlanFormat::Table,
            json: None,
            out: None,
            resamples: DEFAULT_RESAMPLES,
            seed: DEFAULT_SEED,
        }
    }
}

fn positive(flag: &str, v: Option<f64>) -> Result<Option<f64>> {
    match v {
        Some(x) if !crate::stats::is_positive(x) => {
            bail!("{flag}: must be a positive number, got {x}")
        }
        other => Ok(other),
    }
}

/// The served weight format and KV dtype: `--quantization` and `--kv-cache-dtype`, else the
/// run's recorded precision (when it names a known format), else the facts as they are.
fn apply_formats(args: &PlanArgs, run: Option<&RunResult>, m: &mut ModelFacts) -> Result<()> {
    let recorded = run.and_then(|r| r.environment.precision.clone());
    let format = args
        .quantization
        .clone()
        .or(recorded.filter(|p| weight_bytes_for(p).is_some()));
    if let Some(q) = format {
        let bytes = weight_bytes_for(&q).ok_or_else(|| {
            anyhow!("--quantization: unknown format {q:?}; known: bf16, fp16, fp8, int8, int4 (awq, gptq), nvfp4, mxfp4")
        })?;
        // The KV cache keeps its dtype whatever the weights become.
        m.kv_bytes = Some(m.kv_bytes.unwrap_or(m.bytes_per_param));
        if bytes != m.bytes_per_param {
            m.source = format!("{}; weights as {q} ({bytes} bytes per parameter)", m.source);
        }
        m.bytes_per_param = bytes;
    }
    if let Some(d) = &args.kv_cache_dtype {
        let bytes = kv_bytes_for(d).ok_or_else(|| {
            anyhow!("--kv-cache-dtype: unknown dtype {d:?}; known: auto, bf16, fp16, fp8, fp8_e4m3, fp8_e5m2")
        })?;
        m.kv_bytes = Some(bytes);
        m.source = format!("{}; KV cache as {d}", m.source);
    }
    Ok(())
}

fn model_facts(args: &PlanArgs, facts: &Facts) -> Result<Option<ModelFacts>> {
    if args.model_config.is_none() && (args.params.is_some() || args.active_params.is_some()) {
        bail!("--params and --active-params go with --model-config");
    }
    positive("--params", args.params)?;
    positive("--active-params", args.active_params)?;
    if let Some(path) = &args.model_config {
        let mut m = model_from_hf_config(path, args.params, args.active_params)?;
        if let Some(name) = &args.model {
            m.name = name.clone();
        }
        return Ok(Some(m));
    }
    match &args.model {
        None => Ok(None),
        Some(name) => facts.model(name).cloned().map(Some).ok_or_else(|| {
            anyhow!(
                "--model: no facts for {name:?}; known: {} (or pass --model-config config.json)",
                facts.model_names().join(", ")
            )
        }),
    }
}

/// The GPU the run's environment recorded, as the facts name it (or as recorded).
fn run_gpu(run: &RunResult, facts: &Facts) -> Option<String> {
    let g = run.environment.gpu_model.as_deref()?;
    Some(
        facts
            .gpu(g)
            .map(|f| f.name.clone())
            .unwrap_or_else(|| g.to_string()),
    )
}

fn same_gpu(a: &str, b: &str, facts: &Facts) -> bool {
    match (facts.gpu(a), facts.gpu(b)) {
        (Some(x), Some(y)) => x.name == y.name,
        _ => crate::plan::facts::normalize(a) == crate::plan::facts::normalize(b),
    }
}

/// The node the run measured: `--node` (which must be the run's hardware), else the run's
/// environment and the flags. Replicas default to the run's endpoints: a run spread over
/// several servers measured that many replicas together.
fn run_node(args: &PlanArgs, run: &RunResult, catalog: &Catalog, facts: &Facts) -> Result<RunNode> {
    for (flag, v) in [
        ("--gpus-per-node", args.gpus_per_node),
        ("--replicas-per-node", args.replicas_per_node),
    ] {
        match v {
            Some(0) => bail!("{flag}: must be at least 1"),
            Some(n) if n > MAX_GPUS_PER_NODE => bail!(
                "{flag}: {n} is more than a node holds (at most {MAX_GPUS_PER_NODE}); a plan's \
                 node is one machine, the plan gives how many of them"
            ),
            _ => {}
        }
    }
    if let Some(g) = &args.gpu {
        if facts.gpu(g).is_none() {
            bail!(
                "--gpu: unknown GPU {g:?}; known: {}",
                facts.gpu_names().join(", ")
            );
        }
    }
    let endpoints = u32::try_from(run.environment.endpoints.max(1)).unwrap_or(u32::MAX);
    let recorded_gpu = run_gpu(run, facts);
    let mut warnings = Vec::new();
    let mut node = match &args.node {
        Some(name) => {
            let n = catalog.node(name)?;
            if let Some(rg) = &recorded_gpu {
                if !same_gpu(rg, &n.gpu, facts) {
                    bail!(
                        "--node {}: its GPU is {} but the run measured {}: a run's throughput \
                         belongs to the hardware it ran on. Leave out --node (the run's node is \
                         described by its environment, --gpus-per-node, --replicas-per-node), \
                         or plan {} without --results (scaled or catalog figures)",
                        n.name,
                        n.gpu,
                        rg,
                        n.name
                    );
                }
            }
            if let Some(c) = run.environment.gpu_count {
                if c != n.gpus_per_node && args.gpus_per_node.is_none() {
                    bail!(
                        "--node {}: it has {} GPUs but the run measured {c}: a run's throughput \
                         belongs to the hardware it ran on; leave out --node, or say the \
                         node's layout with --gpus-per-node and --replicas-per-node",
                        n.name,
                        n.gpus_per_node
                    );
                }
            }
            RunNode {
                name: n.name.clone(),
                gpu: Some(n.gpu.clone()),
                gpus_per_node: n.gpus_per_node,
                replicas_per_node: n.replicas_per_node,
                usd_per_node_hour: n.usd_per_node_hour,
                price_note: n.price_note.clone(),
                warnings: Vec::new(),
            }
        }
        None => {
            let gpu = args.gpu.clone().or_else(|| recorded_gpu.clone());
            let gpus = args
                .gpus_per_node
                .or(run.environment.gpu_count)
                .unwrap_or(endpoints)
                .max(1);
            RunNode {
                name: format!(
                    "{gpus}x {} (run)",
                    gpu.as_deref()
                        .and_then(|g| facts.gpu(g))
                        .map(|g| g.name.clone())
                        .or(gpu.clone())
                        .unwrap_or_else(|| "GPU".to_string())
                ),
                gpu,
                gpus_per_node: gpus,
                replicas_per_node: endpoints,
                usd_per_node_hour: None,
                price_note: None,
                warnings: Vec::new(),
            }
        }
    };
    if let (Some(g), Some(rg)) = (&args.gpu, &recorded_gpu) {
        if !same_gpu(g, rg, facts) {
            warnings.push(format!(
                "--gpu {g} overrides the run's recorded GPU ({rg}): the plan trusts you that \
                 the run measured {g}; if it did not, every figure below is for the wrong \
                 hardware"
            ));
        }
    }
    if let Some(g) = &args.gpu {
        node.gpu = Some(g.clone());
    }
    if let Some(n) = args.gpus_per_node {
        node.gpus_per_node = n;
    }
    if let Some(r) = args.replicas_per_node {
        node.replicas_per_node = r;
    }
    if node.replicas_per_node != endpoints && args.replicas_per_node.is_none() {
        warnings.push(format!(
            "{}: the run measured {endpoints} server(s) together and the node has {} \
             replica(s): the plan assumes each replica delivers what one of the run's servers \
             did",
            node.name, node.replicas_per_node
        ));
    }
    if let Some(p) = args.usd_per_node_hour {
        if !(p.is_finite() && p >= 0.0) {
            bail!("--usd-per-node-hour: must be zero or more, got {p}");
        }
        node.usd_per_node_hour = Some(p);
        node.price_note = Some("given with --usd-per-node-hour".to_string());
    }
    if node.gpus_per_node % node.replicas_per_node != 0 {
        bail!(
            "{} replicas per node (--replicas-per-node, or the run's {endpoints} endpoints) do \
             not divide the node's {} GPUs into whole GPUs per replica; say the layout with \
             --gpus-per-node and --replicas-per-node",
            node.replicas_per_node,
            node.gpus_per_node
        );
    }
    node.warnings = warnings;
    Ok(node)
}

/// The job from the flags: the token budget, and the length distributions when given.
fn workload(args: &PlanArgs) -> Result<Workload> {
    let (output, input) = match &args.lengths_from {
        Some(path) => {
            let (o, i) = lengths::from_profile(path)?;
            (Some(o), i)
        }
        None => (
            args.output_length
                .as_deref()
                .map(|t| lengths::parse_length("--output-length", t))
                .transpose()?,
            args.input_length
                .as_deref()
                .map(|t| lengths::parse_length("--input-length", t))
                .transpose()?,
        ),
    };
    // --completions with a distribution: its mean is the average output tokens.
    let mean = output.as_ref().map(|d| format!("{}", d.moments().0));
    let avg_out = match (
        &args.avg_output_tokens,
        &args.output_tokens,
        &args.completions,
    ) {
        (None, None, Some(_)) => mean.as_deref(),
        _ => args.avg_output_tokens.as_deref(),
    };
    Workload::from_flags(
        args.completions.as_deref(),
        avg_out,
        args.output_tokens.as_deref(),
        args.avg_input_tokens.as_deref(),
    )?
    .with_lengths(
        output,
        input,
        Given {
            avg_output: args.avg_output_tokens.is_some(),
            avg_input: args.avg_input_tokens.is_some(),
            total: args.output_tokens.is_some(),
        },
    )
}

pub fn run(args: PlanArgs) -> Result<Exit> {
    let workload = workload(&args)?;
    let deadline_s = args
        .deadline
        .as_deref()
        .map(|d| parse_duration("--deadline", d))
        .transpose()?;
    let max_latency_s = args
        .max_latency
        .as_deref()
        .map(|d| parse_duration("--max-latency", d))
        .transpose()?;
    let slo = Slo {
        max_ttft_p99_s: args
            .max_ttft_p99
            .as_deref()
            .map(|d| parse_duration("--max-ttft-p99", d))
            .transpose()?,
        max_itl_p99_s: args
            .max_itl_p99
            .as_deref()
            .map(|d| parse_duration("--max-itl-p99", d))
            .transpose()?,
    };
    if slo.any() && args.results.is_none() {
        bail!(
            "--max-ttft-p99 and --max-itl-p99 need a measured curve (--results RUN.json): \
             catalog figures carry no latency percentiles"
        );
    }
    let budget_usd = args
        .budget
        .as_deref()
        .map(|b| parse_count("--budget", b.trim_start_matches('$')))
        .transpose()?;
    if args.max_concurrency == Some(0) {
        bail!("--max-concurrency: must be at least 1");
    }
    if !(args.sustained > 0.0 && args.sustained <= 1.0) {
        bail!("--sustained: must be in (0, 1], got {}", args.sustained);
    }
    positive("--compare-days", args.compare_days)?;
    if args.compare_node.is_some() && args.compare_days.is_none() {
        bail!(
            "--compare-node names the node of a --compare-days estimate: give --compare-days too"
        );
    }
    if args.resamples == 0 {
        bail!("--resamples: must be at least 1");
    }
    if args.results.is_none() && (args.gpu.is_some() || args.gpus_per_node.is_some()) {
        bail!("--gpu and --gpus-per-node describe the node a run measured: they need --results");
    }

    let facts = Facts::builtin();
    let catalog = Catalog::load(args.catalog.as_deref(), &facts)?;
    let mut model = model_facts(&args, &facts)?;
    let run = match &args.results {
        Some(path) => {
            Some(crate::plan::seed_runs::load(path).with_context(|| "--results".to_string())?)
        }
        None => None,
    };
    let mut model_name = args.model.clone();
    if model.is_none() {
        if let Some(rm) = run.as_ref().and_then(|r| r.environment.model.clone()) {
            model = facts.model(&rm).cloned();
            model_name = Some(rm);
        }
    }
    if let Some(m) = model.as_mut() {
        apply_formats(&args, run.as_ref(), m)?;
    }
    let run_entry = match (&run, &args.results) {
        (Some(r), Some(path)) => Some((
            r,
            path.display().to_string(),
            run_node(&args, r, &catalog, &facts)?,
        )),
        _ => None,
    };
    let only_node = if run_entry.is_none() {
        args.node.clone()
    } else {
        None
    };
    let req = PlanRequest {
        workload,
        limits: Limits {
            deadline_s,
            budget_usd,
            max_concurrency: args.max_concurrency,
            max_latency_s,
            sustained_fraction: args.sustained,
            slo,
            cheapest_mix: args.cheapest_mix,
            nodes: args.nodes,
        },
        facts: &facts,
        catalog: &catalog,
        model,
        model_name,
        run: run_entry,
        only_node,
        resamples: args.resamples,
        seed: args.seed,
        compare_days: args.compare_days,
        compare_node: args.compare_node.clone(),
    };
    let plan = plan(&req)?;
    let json = render_json(&plan);
    // `--json -` owns stdout: the table goes to stderr, and the JSON is printed once.
    let json_to_stdout = args.json.as_deref().is_some_and(crate::fsutil::is_stdout);
    match (args.format, json_to_stdout) {
        // Node and model names come from catalog and results files.
        (PlanFormat::Table, false) => print!(
            "{}",
            crate::untrusted::for_terminal_lines(&render_table(&plan))
        ),
        (PlanFormat::Table, true) => eprint!(
            "{}",
            crate::untrusted::for_terminal_lines(&render_table(&plan))
        ),
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
        write_outputs(&plan, &json, dir)?;
    }
    Ok(Exit::Pass)
}

fn write_outputs(plan: &crate::plan::Plan, json: &str, dir: &Path) -> Result<()> {
    crate::fsutil::ensure_output_dir(dir)?;
    let json_path = dir.join("plan.json");
    write_atomic(&json_path, json.as_bytes())?;
    let png = dir.join(CAPACITY_PNG);
    write_capacity_chart(plan, &png)?;
    eprintln!(
        "plan: {} and {}{}",
        json_path.display(),
        png.display(),
        plan.limits
            .deadline_s
            .map(|d| format!(" (deadline {})", human_duration(d)))
            .unwrap_or_default()
    );
    Ok(())
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

    /// The code's default is what `throughline plan` with no flags parses to.
    #[test]
    fn default_args_are_the_flags_defaults() {
        let parsed = Flags::try_parse_from(["plan"]).unwrap().args;
        assert_eq!(format!("{:?}", PlanArgs::default()), format!("{parsed:?}"));
    }
}
