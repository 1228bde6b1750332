//! The planner's question as given (`plan`'s flags, or the demo's): checked, its run read,
//! the node that run measured and the model's facts found, and answered.

use std::path::PathBuf;

use anyhow::{anyhow, bail, Context, Result};

use super::catalog::MAX_GPUS_PER_NODE;
use super::facts::{kv_bytes_for, model_from_hf_config, weight_bytes_for, ModelFacts};
use super::lengths;
use super::request::{Limits, RunNode};
use super::slo::Slo;
use super::workload::{parse_count, parse_duration, Given};
use super::{plan, Catalog, Facts, Plan, PlanRequest, Workload};
use crate::record::RunResult;

/// Bootstrap resamples for P10/P90 unless `--resamples` says otherwise.
pub const DEFAULT_RESAMPLES: usize = 1000;
/// Bootstrap seed unless `--seed` says otherwise.
pub const DEFAULT_SEED: u64 = 20261129;

/// What a user asks the planner, as given on the command line (text where the flags take
/// text, so that each error names its flag): `plan`'s flags, or the demo's question.
#[derive(Debug, Clone)]
pub struct PlanQuery {
    /// Completions (requests) in the job, e.g. 902087 (with --avg-output-tokens).
    pub completions: Option<String>,
    /// Average output tokens per completion, e.g. 1818.
    pub avg_output_tokens: Option<String>,
    /// Output tokens in all, e.g. 1.64e9 (instead of, or with, --completions).
    pub output_tokens: Option<String>,
    /// Average input (prompt) tokens per completion: counted in the KV cache.
    pub avg_input_tokens: Option<String>,
    /// The job's output lengths as a distribution: fixed:value=N, uniform:mean=M,range_ratio=R,
    /// normal:mean=M,sd=S or lognormal:mean=M,sd=S (e.g. lognormal:mean=1818,sd=1200). Its
    /// mean is the average output tokens; its spread sets the time-weighted context and the
    /// end-of-job tail.
    pub output_length: Option<String>,
    /// The prompts' lengths as a distribution, as --output-length (its mean is the average
    /// input tokens).
    pub input_length: Option<String>,
    /// Read the output (and input) length distributions from a benchmark profile's
    /// workload.output_length (and workload.input_length).
    pub lengths_from: Option<PathBuf>,
    /// Finish within this time: 2d, 36h, 90m, 1d12h. Gives the nodes needed.
    pub deadline: Option<String>,
    /// With --deadline: the cheapest mix of node types (catalog prices and `available`
    /// counts) that meets the deadline at P90, and the runner-up. Rows whose P90 is unknown
    /// are left out.
    pub cheapest_mix: bool,
    /// The job on exactly N nodes of each type: time (P10-P90, end-of-job tail included) and
    /// cost. plan.json tabulates 1 to 128 nodes for every row either way.
    pub nodes: Option<u32>,
    /// Budget in dollars: each node type's cost is checked against it.
    pub budget: Option<String>,
    /// A throughline results file: fit the USL to its concurrency sweep.
    pub results: Option<PathBuf>,
    /// The catalog node type the run measured (with --results), or the only node to plan.
    pub node: Option<String>,
    /// GPU of the node the run measured (instead of --node).
    pub gpu: Option<String>,
    /// GPUs in the node the run measured.
    pub gpus_per_node: Option<u32>,
    /// Replicas (servers) like the one measured per node [default: 1, or the node's].
    pub replicas_per_node: Option<u32>,
    /// Price of the run's node per hour, dollars (when not from --node).
    pub usd_per_node_hour: Option<f64>,
    /// Highest concurrency per replica to plan with.
    pub max_concurrency: Option<u32>,
    /// Longest acceptable time per request, e.g. 60s (Little's law).
    pub max_latency: Option<String>,
    /// SLO: time to first token at p99, e.g. 2s (with --results: plan at the highest load
    /// whose measured p99 meets it, interpolated between levels).
    pub max_ttft_p99: Option<String>,
    /// SLO: inter-token latency at p99, e.g. 50ms (with --results, as --max-ttft-p99).
    pub max_itl_p99: Option<String>,
    /// Node catalog (TOML) [default: fixtures/catalog.toml, built in].
    pub catalog: Option<PathBuf>,
    /// Model name from the built-in facts (Qwen3.6-27B, Qwen3.5-122B-A10B, Llama-3.1-8B, ...).
    pub model: Option<String>,
    /// A Hugging Face config.json to read the model's facts from.
    pub model_config: Option<PathBuf>,
    /// Parameters in billions (with --model-config, when not derivable).
    pub params: Option<f64>,
    /// Active parameters per token in billions (MoE, with --model-config).
    pub active_params: Option<f64>,
    /// Weight format of the model served: bf16, fp8, int8, int4 (AWQ/GPTQ), nvfp4, mxfp4
    /// [default: the facts', config.json's, or the run's recorded precision].
    pub quantization: Option<String>,
    /// KV-cache dtype as the server runs it: auto (16-bit), fp8, fp8_e4m3, fp8_e5m2.
    pub kv_cache_dtype: Option<String>,
    /// Share of the throughput a long run sustains, e.g. 0.75.
    pub sustained: f64,
    /// Your own estimate in days: the plan explains the difference.
    pub compare_days: Option<f64>,
    /// The node your --compare-days estimate is for [default: the run's, or --node's].
    pub compare_node: Option<String>,
    /// Bootstrap resamples for P10/P90.
    pub resamples: usize,
    /// Bootstrap seed (the same seed gives the same plan).
    pub seed: u64,
}

/// `plan` with no flags (a test keeps it equal to the flags' defaults).
impl Default for PlanQuery {
    fn default() -> Self {
        PlanQuery {
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
            resamples: DEFAULT_RESAMPLES,
            seed: DEFAULT_SEED,
        }
    }
}

/// The plan that answers `q`: its figures checked, the run (if any) read, the node it
/// measured and the model's facts found.
pub fn answer(q: &PlanQuery) -> Result<Plan> {
    let workload = workload(q)?;
    let deadline_s = q
        .deadline
        .as_deref()
        .map(|d| parse_duration("--deadline", d))
        .transpose()?;
    let max_latency_s = q
        .max_latency
        .as_deref()
        .map(|d| parse_duration("--max-latency", d))
        .transpose()?;
    let slo = Slo {
        max_ttft_p99_s: q
            .max_ttft_p99
            .as_deref()
            .map(|d| parse_duration("--max-ttft-p99", d))
            .transpose()?,
        max_itl_p99_s: q
            .max_itl_p99
            .as_deref()
            .map(|d| parse_duration("--max-itl-p99", d))
            .transpose()?,
    };
    if slo.any() && q.results.is_none() {
        bail!(
            "--max-ttft-p99 and --max-itl-p99 need a measured curve (--results RUN.json): \
             catalog figures carry no latency percentiles"
        );
    }
    let budget_usd = q
        .budget
        .as_deref()
        .map(|b| parse_count("--budget", b.trim_start_matches('$')))
        .transpose()?;
    if q.max_concurrency == Some(0) {
        bail!("--max-concurrency: must be at least 1");
    }
    if !(q.sustained > 0.0 && q.sustained <= 1.0) {
        bail!("--sustained: must be in (0, 1], got {}", q.sustained);
    }
    positive("--compare-days", q.compare_days)?;
    if q.compare_node.is_some() && q.compare_days.is_none() {
        bail!(
            "--compare-node names the node of a --compare-days estimate: give --compare-days too"
        );
    }
    if q.resamples == 0 {
        bail!("--resamples: must be at least 1");
    }
    if q.results.is_none() && (q.gpu.is_some() || q.gpus_per_node.is_some()) {
        bail!("--gpu and --gpus-per-node describe the node a run measured: they need --results");
    }

    let facts = Facts::builtin();
    let catalog = Catalog::load(q.catalog.as_deref(), &facts)?;
    let mut model = model_facts(q, &facts)?;
    let run = match &q.results {
        Some(path) => Some(super::seed_runs::load(path).with_context(|| "--results".to_string())?),
        None => None,
    };
    let mut model_name = q.model.clone();
    if model.is_none() {
        if let Some(rm) = run.as_ref().and_then(|r| r.environment.model.clone()) {
            model = facts.model(&rm).cloned();
            model_name = Some(rm);
        }
    }
    if let Some(m) = model.as_mut() {
        apply_formats(q, run.as_ref(), m)?;
    }
    let run_entry = match (&run, &q.results) {
        (Some(r), Some(path)) => Some((
            r,
            path.display().to_string(),
            run_node(q, r, &catalog, &facts)?,
        )),
        _ => None,
    };
    let only_node = if run_entry.is_none() {
        q.node.clone()
    } else {
        None
    };
    let req = PlanRequest {
        workload,
        limits: Limits {
            deadline_s,
            budget_usd,
            max_concurrency: q.max_concurrency,
            max_latency_s,
            sustained_fraction: q.sustained,
            slo,
            cheapest_mix: q.cheapest_mix,
            nodes: q.nodes,
        },
        facts: &facts,
        catalog: &catalog,
        model,
        model_name,
        run: run_entry,
        only_node,
        resamples: q.resamples,
        seed: q.seed,
        compare_days: q.compare_days,
        compare_node: q.compare_node.clone(),
    };
    plan(&req)
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
fn apply_formats(q: &PlanQuery, run: Option<&RunResult>, m: &mut ModelFacts) -> Result<()> {
    let recorded = run.and_then(|r| r.environment.precision.clone());
    let format = q
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
    if let Some(d) = &q.kv_cache_dtype {
        let bytes = kv_bytes_for(d).ok_or_else(|| {
            anyhow!("--kv-cache-dtype: unknown dtype {d:?}; known: auto, bf16, fp16, fp8, fp8_e4m3, fp8_e5m2")
        })?;
        m.kv_bytes = Some(bytes);
        m.source = format!("{}; KV cache as {d}", m.source);
    }
    Ok(())
}

fn model_facts(q: &PlanQuery, facts: &Facts) -> Result<Option<ModelFacts>> {
    if q.model_config.is_none() && (q.params.is_some() || q.active_params.is_some()) {
        bail!("--params and --active-params go with --model-config");
    }
    positive("--params", q.params)?;
    positive("--active-params", q.active_params)?;
    if let Some(path) = &q.model_config {
        let mut m = model_from_hf_config(path, q.params, q.active_params)?;
        if let Some(name) = &q.model {
            m.name = name.clone();
        }
        return Ok(Some(m));
    }
    match &q.model {
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

/// `--gpus-per-node`, `--replicas-per-node` and `--gpu` checked on their own.
fn check_node_flags(q: &PlanQuery, facts: &Facts) -> Result<()> {
    for (flag, v) in [
        ("--gpus-per-node", q.gpus_per_node),
        ("--replicas-per-node", q.replicas_per_node),
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
    if let Some(g) = &q.gpu {
        if facts.gpu(g).is_none() {
            bail!(
                "--gpu: unknown GPU {g:?}; known: {}",
                facts.gpu_names().join(", ")
            );
        }
    }
    Ok(())
}

/// The node the run measured: `--node` (which must be the run's hardware), else the run's
/// environment and the flags. Replicas default to the run's endpoints: a run spread over
/// several servers measured that many replicas together.
fn run_node(q: &PlanQuery, run: &RunResult, catalog: &Catalog, facts: &Facts) -> Result<RunNode> {
    check_node_flags(q, facts)?;
    let endpoints = u32::try_from(run.environment.endpoints.max(1)).unwrap_or(u32::MAX);
    let recorded_gpu = run_gpu(run, facts);
    let mut warnings = Vec::new();
    let mut node = match &q.node {
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
                if c != n.gpus_per_node && q.gpus_per_node.is_none() {
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
            let gpu = q.gpu.clone().or_else(|| recorded_gpu.clone());
            let gpus = q
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
    if let (Some(g), Some(rg)) = (&q.gpu, &recorded_gpu) {
        if !same_gpu(g, rg, facts) {
            warnings.push(format!(
                "--gpu {g} overrides the run's recorded GPU ({rg}): the plan trusts you that \
                 the run measured {g}; if it did not, every figure below is for the wrong \
                 hardware"
            ));
        }
    }
    if let Some(g) = &q.gpu {
        node.gpu = Some(g.clone());
    }
    if let Some(n) = q.gpus_per_node {
        node.gpus_per_node = n;
    }
    if let Some(r) = q.replicas_per_node {
        node.replicas_per_node = r;
    }
    if node.replicas_per_node != endpoints && q.replicas_per_node.is_none() {
        warnings.push(format!(
            "{}: the run measured {endpoints} server(s) together and the node has {} \
             replica(s): the plan assumes each replica delivers what one of the run's servers \
             did",
            node.name, node.replicas_per_node
        ));
    }
    if let Some(p) = q.usd_per_node_hour {
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
fn workload(q: &PlanQuery) -> Result<Workload> {
    let (output, input) = match &q.lengths_from {
        Some(path) => {
            let (o, i) = lengths::from_profile(path)?;
            (Some(o), i)
        }
        None => (
            q.output_length
                .as_deref()
                .map(|t| lengths::parse_length("--output-length", t))
                .transpose()?,
            q.input_length
                .as_deref()
                .map(|t| lengths::parse_length("--input-length", t))
                .transpose()?,
        ),
    };
    // --completions with a distribution: its mean is the average output tokens.
    let mean = output.as_ref().map(|d| format!("{}", d.moments().0));
    let avg_out = match (&q.avg_output_tokens, &q.output_tokens, &q.completions) {
        (None, None, Some(_)) => mean.as_deref(),
        _ => q.avg_output_tokens.as_deref(),
    };
    Workload::from_flags(
        q.completions.as_deref(),
        avg_out,
        q.output_tokens.as_deref(),
        q.avg_input_tokens.as_deref(),
    )?
    .with_lengths(
        output,
        input,
        Given {
            avg_output: q.avg_output_tokens.is_some(),
            avg_input: q.avg_input_tokens.is_some(),
            total: q.output_tokens.is_some(),
        },
    )
}
