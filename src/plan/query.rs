//! The planner's question, typed: `plan`'s flags after clap has read each value
//! (`commands/plan.rs`), or the demo's question; checked against the facts and the catalog,
//! its run read, the node that run measured and the model's facts found, and answered.

use std::num::{NonZeroU32, NonZeroUsize};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;

use super::facts::{kv_bytes_for, model_from_hf_config, weight_bytes_for, ModelFacts};
use super::field::Field;
use super::lengths;
use super::request::{Limits, RunNode};
use super::slo::Slo;
use super::values::Usd;
use super::workload::TokenBudget;
use super::{plan, Catalog, Facts, Plan, PlanRequest, Workload};
use crate::profile::LengthDist;
use crate::record::RunResult;

/// Bootstrap resamples for P10/P90 unless the question says otherwise.
pub const DEFAULT_RESAMPLES: NonZeroUsize = NonZeroUsize::new(1000).unwrap();
/// Bootstrap seed unless the question says otherwise.
pub const DEFAULT_SEED: u64 = 20261129;

/// Where the job's length distributions come from.
#[derive(Debug, Clone, PartialEq)]
pub enum Lengths {
    /// Given as distributions (either may be absent).
    Given {
        output: Option<LengthDist>,
        input: Option<LengthDist>,
    },
    /// A benchmark profile's `workload.output_length` (and `workload.input_length`).
    FromProfile(PathBuf),
}

/// What a user asks the planner, each value already read and checked on its own (counts
/// positive, durations longer than zero, shares in (0, 1], per-node counts within a node):
/// what is left to check needs the facts, the catalog, the run or several values together.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanQuery {
    /// The job's size: the output tokens in all, or completions times tokens per completion.
    pub tokens: TokenBudget,
    /// Average input (prompt) tokens per completion (zero or more): counted in the KV cache.
    pub avg_input_tokens: Option<f64>,
    /// The output and prompt lengths as distributions, given or read from a profile.
    pub lengths: Lengths,
    /// Finish within this time: gives the nodes needed.
    pub deadline: Option<Duration>,
    /// With a deadline: the cheapest mix of node types that meets it at P90.
    pub cheapest_mix: bool,
    /// The job on exactly N nodes of each type.
    pub nodes: Option<u32>,
    /// Each node type's cost is checked against it.
    pub budget: Option<Usd>,
    /// A throughline results file (or `seed:NAME`): fit the USL to its concurrency sweep.
    pub results: Option<PathBuf>,
    /// The catalog node type the run measured (with a run), or the only node to plan.
    pub node: Option<String>,
    /// GPU of the node the run measured (instead of a node type).
    pub gpu: Option<String>,
    /// GPUs in the node the run measured (at most a node's most).
    pub gpus_per_node: Option<NonZeroU32>,
    /// Replicas like the one measured per node (at most a node's most).
    pub replicas_per_node: Option<NonZeroU32>,
    /// Price of the run's node per hour, dollars (zero or more).
    pub usd_per_node_hour: Option<f64>,
    /// Highest concurrency per replica to plan with.
    pub max_concurrency: Option<NonZeroU32>,
    /// Longest acceptable time per request (Little's law).
    pub max_latency: Option<Duration>,
    /// SLO: time to first token at p99 (with a run only).
    pub max_ttft_p99: Option<Duration>,
    /// SLO: inter-token latency at p99 (with a run only).
    pub max_itl_p99: Option<Duration>,
    /// Node catalog (TOML) [default: the built-in one].
    pub catalog: Option<PathBuf>,
    /// Model name from the built-in facts (or the name for a config.json's facts).
    pub model: Option<String>,
    /// A Hugging Face config.json to read the model's facts from.
    pub model_config: Option<PathBuf>,
    /// Parameters and active parameters per token, in billions (positive; with a config.json).
    pub params: Option<f64>,
    pub active_params: Option<f64>,
    /// Weight format of the model served [default: the facts', config.json's, or the run's].
    pub quantization: Option<String>,
    /// KV-cache dtype as the server runs it.
    pub kv_cache_dtype: Option<String>,
    /// Share of the throughput a long run sustains, in (0, 1].
    pub sustained: f64,
    /// Your own estimate in days (positive): the plan explains the difference.
    pub compare_days: Option<f64>,
    /// The node that estimate is for.
    pub compare_node: Option<String>,
    /// Bootstrap resamples for P10/P90.
    pub resamples: NonZeroUsize,
    /// Bootstrap seed (the same seed gives the same plan).
    pub seed: u64,
}

impl PlanQuery {
    /// The question about `tokens` with nothing else said: the defaults `plan` has.
    pub fn new(tokens: TokenBudget) -> PlanQuery {
        PlanQuery {
            tokens,
            avg_input_tokens: None,
            lengths: Lengths::Given {
                output: None,
                input: None,
            },
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

/// The plan that answers `q`: the run (if any) read, the node it measured and the model's
/// facts found.
pub fn answer(q: &PlanQuery) -> Result<Plan> {
    let workload = workload(q)?;
    let facts = Facts::builtin();
    let catalog = Catalog::load(q.catalog.as_deref(), &facts)?;
    let mut model = model_facts(q, &facts)?;
    let run = match &q.results {
        Some(path) => {
            Some(super::seed_runs::load(path).map_err(|e| Field::Results.wrap("the run", e))?)
        }
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
            deadline_s: q.deadline.map(|d| d.as_secs_f64()),
            budget_usd: q.budget.map(|b| b.0),
            max_concurrency: q.max_concurrency.map(NonZeroU32::get),
            max_latency_s: q.max_latency.map(|d| d.as_secs_f64()),
            sustained_fraction: q.sustained,
            slo: Slo {
                max_ttft_p99_s: q.max_ttft_p99.map(|d| d.as_secs_f64()),
                max_itl_p99_s: q.max_itl_p99.map(|d| d.as_secs_f64()),
            },
            cheapest_mix: q.cheapest_mix,
            nodes: q.nodes,
        },
        facts: &facts,
        catalog: &catalog,
        model,
        model_name,
        run: run_entry,
        only_node,
        resamples: q.resamples.get(),
        seed: q.seed,
        compare_days: q.compare_days,
        compare_node: q.compare_node.clone(),
    };
    plan(&req)
}

/// The served weight format and KV dtype: as the question says, else the
/// run's recorded precision (when it names a known format), else the facts as they are.
fn apply_formats(q: &PlanQuery, run: Option<&RunResult>, m: &mut ModelFacts) -> Result<()> {
    let recorded = run.and_then(|r| r.environment.precision.clone());
    let format = q
        .quantization
        .clone()
        .or(recorded.filter(|p| weight_bytes_for(p).is_some()));
    if let Some(q) = format {
        let bytes = weight_bytes_for(&q).ok_or_else(|| {
            Field::Quantization.error(format!("unknown weight format {q:?}; known: bf16, fp16, fp8, int8, int4 (awq, gptq), nvfp4, mxfp4"))
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
            Field::KvCacheDtype.error(format!(
                "unknown KV-cache dtype {d:?}; known: auto, bf16, fp16, fp8, fp8_e4m3, fp8_e5m2"
            ))
        })?;
        m.kv_bytes = Some(bytes);
        m.source = format!("{}; KV cache as {d}", m.source);
    }
    Ok(())
}

fn model_facts(q: &PlanQuery, facts: &Facts) -> Result<Option<ModelFacts>> {
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
            Field::Model.error(format!(
                "no facts for the model {name:?}; known: {} (or pass --model-config config.json)",
                facts.model_names().join(", ")
            ))
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

/// The run's GPU as the question names it, checked against the facts.
fn check_gpu(q: &PlanQuery, facts: &Facts) -> Result<()> {
    match &q.gpu {
        Some(g) if facts.gpu(g).is_none() => Err(Field::Gpu.error(format!(
            "unknown GPU {g:?} for the run's node; known: {}",
            facts.gpu_names().join(", ")
        ))),
        _ => Ok(()),
    }
}

/// The node the run measured: the node type asked (which must be the run's hardware), else
/// the run's environment and the question's GPU and layout. Replicas default to the run's endpoints: a run spread over
/// several servers measured that many replicas together.
fn run_node(q: &PlanQuery, run: &RunResult, catalog: &Catalog, facts: &Facts) -> Result<RunNode> {
    check_gpu(q, facts)?;
    let endpoints = u32::try_from(run.environment.endpoints.max(1)).unwrap_or(u32::MAX);
    let recorded_gpu = run_gpu(run, facts);
    let mut warnings = Vec::new();
    let mut node = match &q.node {
        Some(name) => {
            let n = catalog.node(name)?;
            if let Some(rg) = &recorded_gpu {
                if !same_gpu(rg, &n.gpu, facts) {
                    return Err(Field::Node.error(format!(
                        "the node type {}: its GPU is {} but the run measured {}: a run's throughput \
                         belongs to the hardware it ran on. Leave out --node (the run's node is \
                         described by its environment, --gpus-per-node, --replicas-per-node), \
                         or plan {} without --results (scaled or catalog figures)",
                        n.name,
                        n.gpu,
                        rg,
                        n.name
                    )));
                }
            }
            if let Some(c) = run.environment.gpu_count {
                if c != n.gpus_per_node && q.gpus_per_node.is_none() {
                    return Err(Field::Node.error(format!(
                        "the node type {}: it has {} GPUs but the run measured {c}: a run's \
                         throughput belongs to the hardware it ran on; leave out --node, or say \
                         the node's layout with --gpus-per-node and --replicas-per-node",
                        n.name, n.gpus_per_node
                    )));
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
                .map(NonZeroU32::get)
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
        node.gpus_per_node = n.get();
    }
    if let Some(r) = q.replicas_per_node {
        node.replicas_per_node = r.get();
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
        node.usd_per_node_hour = Some(p);
        node.price_note = Some("given with --usd-per-node-hour".to_string());
    }
    if node.gpus_per_node % node.replicas_per_node != 0 {
        return Err(Field::ReplicasPerNode.error(format!(
            "{} replicas per node (as asked, or the run's {endpoints} endpoints) do \
             not divide the node's {} GPUs into whole GPUs per replica; say the layout with \
             --gpus-per-node and --replicas-per-node",
            node.replicas_per_node, node.gpus_per_node
        )));
    }
    node.warnings = warnings;
    Ok(node)
}

/// The job: its token budget, and the length distributions when given or read.
fn workload(q: &PlanQuery) -> Result<Workload> {
    let (output, input) = match &q.lengths {
        Lengths::FromProfile(path) => {
            let (o, i) = lengths::from_profile(path)?;
            (Some(o), i)
        }
        Lengths::Given { output, input } => (output.clone(), input.clone()),
    };
    Workload::new(&q.tokens, q.avg_input_tokens, output, input)
}
