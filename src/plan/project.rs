//! The projection: for each node type, the throughput used and how it was obtained, days at
//! P10/P50/P90, nodes for a deadline, GPU-hours, cost, $ per million tokens, latency, and
//! the roofline check.

use anyhow::{bail, Result};
use serde::Serialize;

use crate::record::RunResult;

use super::catalog::{Catalog, FigureBasis, Node};
use super::curve::{self, ConcurrencyLimits, CurveEstimate, FitReport};
use super::facts::{Facts, GpuFacts, ModelFacts};
use super::roofline::{MemoryFit, Roofline, RooflineCheck};
use super::workload::{human_duration, Workload};

/// How a throughput figure was obtained.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Basis {
    /// Measured at this configuration.
    Measured,
    /// From the USL fitted to a measured curve.
    Fitted,
    /// Scaled from another GPU's measurement by memory bandwidth.
    Scaled,
    /// Claimed on a spec sheet or in an estimate: not a measurement.
    Stated,
}

impl Basis {
    pub fn name(self) -> &'static str {
        match self {
            Basis::Measured => "measured",
            Basis::Fitted => "fitted",
            Basis::Scaled => "scaled",
            Basis::Stated => "stated",
        }
    }
}

/// Three quantiles. For throughput, p10 is the low (pessimistic) end; for days and cost, p10
/// is the short (optimistic) end.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct Spread3 {
    pub p10: f64,
    pub p50: f64,
    pub p90: f64,
}

impl Spread3 {
    pub fn single(x: f64) -> Spread3 {
        Spread3 {
            p10: x,
            p50: x,
            p90: x,
        }
    }
    pub fn scale(self, k: f64) -> Spread3 {
        Spread3 {
            p10: self.p10 * k,
            p50: self.p50 * k,
            p90: self.p90 * k,
        }
    }
    /// `k / x` for each quantile, swapping the ends (the low throughput gives the long time).
    pub fn invert(self, k: f64) -> Spread3 {
        Spread3 {
            p10: k / self.p90,
            p50: k / self.p50,
            p90: k / self.p10,
        }
    }
}

/// The job's limits and the planner's options.
#[derive(Debug, Clone, Serialize)]
pub struct Limits {
    pub deadline_s: Option<f64>,
    pub budget_usd: Option<f64>,
    pub max_concurrency: Option<u32>,
    pub max_latency_s: Option<f64>,
    /// Share of the measured or stated throughput a long run sustains (1 = all of it).
    pub sustained_fraction: f64,
}

/// The node a run was measured on.
#[derive(Debug, Clone)]
pub struct RunNode {
    pub name: String,
    pub gpu: Option<String>,
    pub gpus_per_node: u32,
    pub replicas_per_node: u32,
    pub usd_per_node_hour: Option<f64>,
    pub price_note: Option<String>,
}

/// Everything a plan is made from.
pub struct PlanRequest<'a> {
    pub workload: Workload,
    pub limits: Limits,
    pub facts: &'a Facts,
    pub catalog: &'a Catalog,
    /// The model being planned for (from --model, --model-config or the run).
    pub model: Option<ModelFacts>,
    /// A model name that has no facts (the roofline is skipped for it).
    pub model_name: Option<String>,
    pub run: Option<(&'a RunResult, String, RunNode)>,
    /// `--node` without a run: plan only this node type.
    pub only_node: Option<String>,
    pub resamples: usize,
    pub seed: u64,
    pub compare_days: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ModelSummary {
    pub name: String,
    pub params_b: f64,
    pub active_params_b: f64,
    pub bytes_per_param: f64,
    pub kv_bytes_per_token: f64,
    pub state_mb_per_seq: f64,
    pub source: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct DeadlinePlan {
    pub deadline_s: f64,
    /// Nodes to finish by the deadline at the median throughput.
    pub nodes_p50: u32,
    /// Nodes to finish by the deadline with 90% confidence (at the P10 throughput).
    pub nodes_p90: u32,
}

#[derive(Debug, Clone, Serialize)]
pub struct RooflineReport {
    /// Batch-1 decode bound per replica, tok/s.
    pub batch1_bound: f64,
    /// Bound per replica at `batch` concurrent sequences, tok/s (None when no batch is known).
    pub bound: Option<f64>,
    pub batch: Option<f64>,
    /// False when the figure's batch size is unknown and `batch` is the most that fits.
    pub batch_known: bool,
    /// Throughput used per replica / bound.
    pub efficiency: Option<f64>,
    pub bandwidth_tb_s_per_replica: f64,
    pub weight_gb_per_step: f64,
    pub seq_mb_per_step: f64,
    pub context_tokens: f64,
    /// Sequences that fit in one replica's memory at the job's full context.
    pub memory_max_concurrency: Option<u32>,
    pub checks: Vec<RooflineCheck>,
}

/// One node type's projection.
#[derive(Debug, Clone, Serialize)]
pub struct NodePlan {
    pub node: String,
    pub gpu: Option<String>,
    pub gpus_per_node: u32,
    pub replicas_per_node: u32,
    pub model: Option<String>,
    pub basis: Basis,
    pub how: String,
    pub source: String,
    pub date: Option<String>,
    pub concurrency_per_replica: Option<f64>,
    /// Throughput per node after the sustained fraction: P10 (low) / P50 / P90 (high).
    pub tok_s_per_node: Spread3,
    /// Days on one node: P10 (fast) / P50 / P90 (slow).
    pub days: Spread3,
    pub deadline: Option<DeadlinePlan>,
    /// GPU-hours at the median.
    pub gpu_hours: f64,
    pub usd_per_node_hour: Option<f64>,
    pub price_note: Option<String>,
    pub cost_usd: Option<Spread3>,
    pub usd_per_million_tokens: Option<f64>,
    pub within_budget: Option<bool>,
    /// Per-request latency by Little's law at the concurrency used.
    pub latency_s: Option<f64>,
    pub roofline: Option<RooflineReport>,
    pub warnings: Vec<String>,
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    pub node: String,
    pub your_days: f64,
    pub implied_tok_s: f64,
    pub plan_days_p50: f64,
    pub plan_tok_s_p50: f64,
    /// implied / plan throughput.
    pub ratio: f64,
    pub explanation: Vec<String>,
}

/// The whole plan.
#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    pub workload: Workload,
    pub limits: Limits,
    pub model: Option<ModelSummary>,
    pub catalog: String,
    pub results: Option<String>,
    pub fit: Option<FitReport>,
    pub nodes: Vec<NodePlan>,
    pub comparison: Option<Comparison>,
    /// The answers in words: fastest, fewest nodes for the deadline, cheapest, budget.
    pub summary: Vec<String>,
    pub notes: Vec<String>,
    pub warnings: Vec<String>,
}

/// Days to generate `tokens` at `tok_s`.
pub fn days_for(tokens: f64, tok_s: f64) -> f64 {
    tokens / tok_s / 86_400.0
}

/// The basic facts of one row before the money and time arithmetic.
struct RowInput {
    node: String,
    gpu: Option<String>,
    gpus_per_node: u32,
    replicas_per_node: u32,
    model: Option<String>,
    basis: Basis,
    how: String,
    source: String,
    date: Option<String>,
    concurrency_per_replica: Option<f64>,
    tok_s_per_node: Spread3,
    usd_per_node_hour: Option<f64>,
    price_note: Option<String>,
    speculative: bool,
    batch1_tok_s_per_replica: Option<f64>,
    notes: Vec<String>,
}

impl<'a> PlanRequest<'a> {
    fn model_for(&self, name: Option<&str>) -> Option<ModelFacts> {
        let name = name?;
        if let Some(m) = &self.model {
            if super::facts::normalize(&m.name) == super::facts::normalize(name)
                || self.facts.model(name).map(|f| &f.name) == Some(&m.name)
            {
                return Some(m.clone());
            }
        }
        self.facts.model(name).cloned()
    }

    fn plan_model_name(&self) -> Option<String> {
        self.model
            .as_ref()
            .map(|m| m.name.clone())
            .or_else(|| self.model_name.clone())
    }

    fn same_model(&self, a: &str, b: &str) -> bool {
        use super::facts::normalize;
        if normalize(a) == normalize(b) {
            return true;
        }
        match (self.facts.model(a), self.facts.model(b)) {
            (Some(x), Some(y)) => x.name == y.name,
            _ => {
                self.model
                    .as_ref()
                    .is_some_and(|m| normalize(&m.name) == normalize(a))
                    && self
                        .model
                        .as_ref()
                        .is_some_and(|m| normalize(&m.name) == normalize(b))
            }
        }
    }

    fn context_tokens(&self) -> (f64, f64) {
        let input = self.workload.avg_input_tokens.unwrap_or(0.0);
        let output = self.workload.avg_output_tokens.unwrap_or(0.0);
        // Mean context over a completion's decode, and the full context at its end.
        (input + output / 2.0, input + output)
    }
}

/// Makes the plan.
pub fn plan(req: &PlanRequest) -> Result<Plan> {
    let mut notes: Vec<String> = Vec::new();
    let mut warnings: Vec<String> = Vec::new();
    let mut rows: Vec<RowInput> = Vec::new();
    let mut fit: Option<FitReport> = None;
    let plan_model = req.plan_model_name();
    let (_, full_context) = req.context_tokens();
    if req.workload.avg_output_tokens.is_none() {
        notes.push(
            "average output tokens per completion unknown (give --completions or \
             --avg-output-tokens): no per-request latency, and KV reads are left out of the \
             roofline"
                .to_string(),
        );
    }

    // 1. The run, if any.
    let mut run_row_node: Option<String> = None;
    if let Some((run, origin, node)) = &req.run {
        let gpu = node.gpu.as_deref().and_then(|g| req.facts.gpu(g));
        let memory = match (&req.model, gpu) {
            (Some(m), Some(g)) if req.workload.avg_output_tokens.is_some() => {
                let fit = MemoryFit::new(
                    m,
                    g,
                    node.gpus_per_node / node.replicas_per_node.max(1),
                    full_context,
                );
                if !fit.weights_fit() {
                    warnings.push(format!(
                        "{}: {} ({:.0} GB of weights) does not fit in {} x {} ({:.0} GB usable): \
                         check --gpus-per-node and --replicas-per-node",
                        node.name,
                        m.name,
                        fit.weight_bytes / 1e9,
                        node.gpus_per_node / node.replicas_per_node.max(1),
                        g.name,
                        fit.usable_bytes / 1e9
                    ));
                    None
                } else {
                    Some(fit.max_concurrency.max(1))
                }
            }
            _ => None,
        };
        let limits = ConcurrencyLimits {
            max_concurrency: req.limits.max_concurrency,
            memory,
            max_latency_s: req.limits.max_latency_s,
            avg_output_tokens: req.workload.avg_output_tokens,
        };
        let est: CurveEstimate = curve::estimate(run, origin, &limits, req.resamples, req.seed)?;
        notes.extend(est.notes.iter().cloned());
        if let Some(f) = &est.fit {
            fit = Some(f.clone());
        }
        for w in &run.warnings {
            notes.push(format!("{origin}: {w}"));
        }
        let run_model = run.environment.model.clone();
        if let (Some(pm), Some(rm)) = (&plan_model, &run_model) {
            if !req.same_model(pm, rm) {
                warnings.push(format!(
                    "the run measured {rm} but the plan is for {pm}: the run's throughput is used as is"
                ));
            }
        }
        let replicas = node.replicas_per_node.max(1);
        let speculative = run.environment.speculative == Some(true);
        rows.push(RowInput {
            node: node.name.clone(),
            gpu: node.gpu.clone(),
            gpus_per_node: node.gpus_per_node,
            replicas_per_node: replicas,
            model: plan_model.clone().or(run_model),
            basis: est.basis,
            how: format!(
                "{}; x {replicas} replica(s) per node; concurrency limited by {}",
                est.how, est.limited_by
            ),
            source: format!("{origin} ({})", run.tool),
            date: Some(run.started_at.clone()),
            concurrency_per_replica: Some(est.concurrency as f64),
            tok_s_per_node: est.tok_s.scale(replicas as f64),
            usd_per_node_hour: node.usd_per_node_hour,
            price_note: node.price_note.clone(),
            speculative,
            batch1_tok_s_per_replica: est.batch1_tok_s,
            notes: Vec::new(),
        });
        run_row_node = Some(node.name.clone());
    }

    // 2. The catalog's figures.
    let selected: Vec<&Node> = match (&req.only_node, &req.run) {
        (Some(name), None) => vec![req.catalog.node(name)?],
        _ => req.catalog.nodes.iter().collect(),
    };
    let mut skipped_models: Vec<String> = Vec::new();
    for node in &selected {
        if run_row_node.as_deref() == Some(node.name.as_str()) {
            if node.tok_s().is_some() {
                notes.push(format!(
                    "the catalog's own figure for {} is replaced by the run's",
                    node.name
                ));
            }
            continue;
        }
        let Some(tok_s) = node.tok_s() else { continue };
        let node_model = node.model.clone().unwrap_or_default();
        if let Some(pm) = &plan_model {
            if !req.same_model(pm, &node_model) {
                skipped_models.push(format!("{} ({node_model})", node.name));
                continue;
            }
        }
        let basis = match node.basis {
            Some(FigureBasis::Measured) => Basis::Measured,
            _ => Basis::Stated,
        };
        let high = node.tok_s_high.unwrap_or(tok_s);
        let how = match (basis, node.tok_s_high) {
            (Basis::Stated, Some(h)) => format!(
                "stated range {tok_s:.0}-{h:.0} tok/s per node (an estimate, not a measurement): \
                 P50 and P90 at the low end, P10 at the high end"
            ),
            (Basis::Stated, None) => {
                format!("stated {tok_s:.0} tok/s per node: a claim, not a measurement")
            }
            _ => format!("catalog figure, {tok_s:.0} tok/s per node"),
        };
        rows.push(RowInput {
            node: node.name.clone(),
            gpu: Some(node.gpu.clone()),
            gpus_per_node: node.gpus_per_node,
            replicas_per_node: node.replicas_per_node,
            model: node.model.clone(),
            basis,
            how,
            source: node.source.clone(),
            date: node.date.clone(),
            concurrency_per_replica: node.concurrency_per_replica.map(f64::from),
            tok_s_per_node: Spread3 {
                p10: tok_s,
                p50: tok_s,
                p90: high,
            },
            usd_per_node_hour: node.usd_per_node_hour,
            price_note: node.price_note.clone(),
            speculative: node.speculative,
            batch1_tok_s_per_replica: node.batch1_tok_s_per_replica,
            notes: Vec::new(),
        });
    }
    if !skipped_models.is_empty() {
        notes.push(format!(
            "catalog figures for other models left out: {}",
            skipped_models.join(", ")
        ));
    }
    if plan_model.is_none() {
        let mut models: Vec<String> = rows.iter().filter_map(|r| r.model.clone()).collect();
        models.sort();
        models.dedup();
        if models.len() > 1 {
            warnings.push(format!(
                "the rows are for different models ({}): pass --model to compare like with like",
                models.join(", ")
            ));
        }
    }

    // 3. Scaled rows: catalog nodes without a figure, from the first measured reference for
    // the plan's model (the run's row when there is one), by memory bandwidth per GPU.
    let reference = rows
        .iter()
        .find(|r| matches!(r.basis, Basis::Measured | Basis::Fitted) && r.gpu.is_some())
        .map(|r| {
            (
                r.node.clone(),
                r.gpu.clone().unwrap_or_default(),
                r.tok_s_per_node.scale(1.0 / r.gpus_per_node as f64),
            )
        });
    if let (Some((ref_name, ref_gpu, per_gpu)), Some(_)) = (&reference, &plan_model) {
        let ref_facts = req.facts.gpu(ref_gpu);
        for node in &selected {
            if node.tok_s().is_some() || run_row_node.as_deref() == Some(node.name.as_str()) {
                continue;
            }
            let (Some(rf), Some(tf)) = (ref_facts, req.facts.gpu(&node.gpu)) else {
                continue;
            };
            let mut row_notes = Vec::new();
            let mut replicas = node.replicas_per_node;
            if let Some(m) = &req.model {
                match replicas_that_fit(m, tf, node.gpus_per_node, replicas) {
                    Some(r) if r != replicas => {
                        row_notes.push(format!(
                            "{} does not fit {} per replica: planned as {r} replica(s) of {} GPU(s)",
                            m.name,
                            if node.gpus_per_replica() == 1 {
                                "on one GPU".to_string()
                            } else {
                                format!("on {} GPUs", node.gpus_per_replica())
                            },
                            node.gpus_per_node / r
                        ));
                        replicas = r;
                    }
                    Some(_) => {}
                    None => {
                        notes.push(format!(
                            "{}: {} ({:.0} GB of weights) does not fit in {} x {}: not projected",
                            node.name,
                            m.name,
                            m.weight_bytes() / 1e9,
                            node.gpus_per_node,
                            tf.name
                        ));
                        continue;
                    }
                }
            }
            let ratio = tf.bandwidth_tb_s / rf.bandwidth_tb_s;
            rows.push(RowInput {
                node: node.name.clone(),
                gpu: Some(node.gpu.clone()),
                gpus_per_node: node.gpus_per_node,
                replicas_per_node: replicas,
                model: plan_model.clone(),
                basis: Basis::Scaled,
                how: format!(
                    "scaled from {ref_name}: {:.0} tok/s per GPU x bandwidth ratio {:.2} ({} {} TB/s \
                     / {} {} TB/s) x {} GPUs; assumes the same efficiency per GPU, ignores \
                     interconnect and compute differences",
                    per_gpu.p50,
                    ratio,
                    tf.name,
                    tf.bandwidth_tb_s,
                    rf.name,
                    rf.bandwidth_tb_s,
                    node.gpus_per_node
                ),
                source: node.source.clone(),
                date: None,
                concurrency_per_replica: None,
                tok_s_per_node: per_gpu.scale(ratio * node.gpus_per_node as f64),
                usd_per_node_hour: node.usd_per_node_hour,
                price_note: node.price_note.clone(),
                speculative: false,
                batch1_tok_s_per_replica: None,
                notes: row_notes,
            });
        }
    }

    if rows.is_empty() {
        bail!(
            "nothing to plan from: no run (--results), and no catalog entry in {} has a \
             throughput figure{}",
            req.catalog.origin,
            plan_model
                .as_ref()
                .map(|m| format!(" for {m}"))
                .unwrap_or_default()
        );
    }

    // 4. Time, nodes, money, latency and the roofline for each row.
    let nodes: Vec<NodePlan> = rows.into_iter().map(|r| finish(req, r)).collect();
    for n in &nodes {
        warnings.extend(n.warnings.iter().cloned());
    }
    if req.limits.sustained_fraction < 1.0 {
        notes.push(format!(
            "every throughput is multiplied by --sustained {} (the share of a benchmark's rate \
             a long run keeps)",
            req.limits.sustained_fraction
        ));
    }
    notes.push(
        "prices are illustrative (see each node's price note), not quotes; put your own in a \
         catalog"
            .to_string(),
    );

    let comparison = req.compare_days.map(|d| compare(req, &nodes, d));
    let summary = summarize(req, &nodes);
    Ok(Plan {
        workload: req.workload.clone(),
        limits: req.limits.clone(),
        model: req.model.as_ref().map(|m| ModelSummary {
            name: m.name.clone(),
            params_b: m.params_b,
            active_params_b: m.active_params_b(),
            bytes_per_param: m.bytes_per_param,
            kv_bytes_per_token: m.kv_bytes_per_token(),
            state_mb_per_seq: m.state_mb_per_seq,
            source: m.source.clone(),
        }),
        catalog: req.catalog.origin.clone(),
        results: req.run.as_ref().map(|r| r.1.clone()),
        fit,
        nodes,
        comparison,
        summary,
        notes,
        warnings,
    })
}

fn label(n: &NodePlan) -> String {
    format!("{} ({})", n.node, n.basis.name())
}

/// The answers in a few lines: each question answered from measured or fitted figures, and
/// again from all figures where a stated or scaled one would answer differently.
fn summarize(req: &PlanRequest, nodes: &[NodePlan]) -> Vec<String> {
    let mut out = Vec::new();
    let trusted = |n: &&NodePlan| matches!(n.basis, Basis::Measured | Basis::Fitted);
    let best = |all: bool, f: &dyn Fn(&NodePlan) -> Option<f64>| {
        nodes
            .iter()
            .filter(|n| all || trusted(n))
            .filter_map(|n| f(n).map(|v| (n, v)))
            .min_by(|a, b| a.1.total_cmp(&b.1))
    };
    let both = |f: &dyn Fn(&NodePlan) -> Option<f64>| {
        let t = best(false, f);
        let a = best(true, f).filter(|a| t.is_none_or(|t| t.0.node != a.0.node));
        (t, a)
    };
    let range = |n: &NodePlan| {
        if n.days.p10 == n.days.p90 {
            "no spread".to_string()
        } else {
            format!(
                "P10-P90 {} to {}",
                human_duration(n.days.p10 * 86_400.0),
                human_duration(n.days.p90 * 86_400.0)
            )
        }
    };
    let (t, a) = both(&|n| Some(n.days.p50));
    for (head, pick) in [
        ("fastest on one node", t),
        ("  counting stated and scaled figures", a),
    ] {
        if let Some((n, d)) = pick {
            out.push(format!(
                "{head}: {}, {} ({})",
                label(n),
                human_duration(d * 86_400.0),
                range(n)
            ));
        }
    }
    if let Some(deadline) = req.limits.deadline_s {
        let one: Vec<String> = nodes
            .iter()
            .filter(|n| n.deadline.as_ref().is_some_and(|d| d.nodes_p90 == 1))
            .map(label)
            .collect();
        out.push(format!(
            "within {} on one node (at 90% confidence): {}",
            human_duration(deadline),
            if one.is_empty() {
                "none".to_string()
            } else {
                one.join(", ")
            }
        ));
        let (t, a) = both(&|n| n.deadline.as_ref().map(|d| d.nodes_p90 as f64));
        for (head, pick) in [
            ("fewest nodes for the deadline", t),
            ("  counting stated and scaled figures", a),
        ] {
            if let Some((n, k)) = pick {
                out.push(format!(
                    "{head}: {k} x {} ({} at P50)",
                    label(n),
                    n.deadline.as_ref().map_or(0, |d| d.nodes_p50)
                ));
            }
        }
    }
    let (t, a) = both(&|n| n.cost_usd.map(|c| c.p50));
    for (head, pick) in [("cheapest", t), ("  counting stated and scaled figures", a)] {
        if let Some((n, c)) = pick {
            out.push(format!(
                "{head}: {}, ${c:.0}, ${:.2} per million tokens (illustrative prices)",
                label(n),
                n.usd_per_million_tokens.unwrap_or(0.0)
            ));
        }
    }
    if let Some(budget) = req.limits.budget_usd {
        let (within, over): (Vec<&NodePlan>, Vec<&NodePlan>) = nodes
            .iter()
            .filter(|n| n.within_budget.is_some())
            .partition(|n| n.within_budget == Some(true));
        out.push(format!(
            "budget ${budget:.0}: within for {}; over for {}",
            if within.is_empty() {
                "none".to_string()
            } else {
                within
                    .iter()
                    .map(|n| n.node.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            },
            if over.is_empty() {
                "none".to_string()
            } else {
                over.iter()
                    .map(|n| {
                        format!(
                            "{} (buys {:.3e} of the {:.3e} tokens)",
                            n.node,
                            budget / n.usd_per_million_tokens.unwrap_or(f64::INFINITY) * 1e6,
                            req.workload.output_tokens
                        )
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        ));
    }
    out
}

/// Replicas per node such that the model's weights take at most 80% of a replica's usable
/// memory (room for the KV cache): the catalog's layout when it fits, else fewer, larger
/// replicas. None when not even the whole node holds the model.
fn replicas_that_fit(m: &ModelFacts, g: &GpuFacts, gpus: u32, preferred: u32) -> Option<u32> {
    let fits = |r: u32| {
        let fit = MemoryFit::new(m, g, gpus / r, 0.0);
        fit.weight_bytes <= 0.8 * fit.usable_bytes
    };
    if preferred > 0 && gpus % preferred == 0 && fits(preferred) {
        return Some(preferred);
    }
    (1..=gpus)
        .rev()
        .filter(|r| gpus % r == 0 && (gpus / r).is_power_of_two())
        .find(|r| fits(*r))
}

fn finish(req: &PlanRequest, r: RowInput) -> NodePlan {
    let tokens = req.workload.output_tokens;
    let tok_s = r.tok_s_per_node.scale(req.limits.sustained_fraction);
    let days = tok_s.invert(tokens / 86_400.0);
    let node_hours_p50 = days.p50 * 24.0;
    let gpu_hours = node_hours_p50 * r.gpus_per_node as f64;
    let deadline = req.limits.deadline_s.map(|d| DeadlinePlan {
        deadline_s: d,
        nodes_p50: (tokens / (tok_s.p50 * d)).ceil().max(1.0) as u32,
        nodes_p90: (tokens / (tok_s.p10 * d)).ceil().max(1.0) as u32,
    });
    let cost = r.usd_per_node_hour.map(|p| days.scale(24.0 * p));
    let usd_per_mtok = r.usd_per_node_hour.map(|p| p / (tok_s.p50 * 3600.0) * 1e6);
    let within_budget = match (req.limits.budget_usd, cost) {
        (Some(b), Some(c)) => Some(c.p50 <= b),
        _ => None,
    };
    let replicas = r.replicas_per_node.max(1) as f64;
    let per_replica = tok_s.p50 / replicas;
    let latency = match (r.concurrency_per_replica, req.workload.avg_output_tokens) {
        (Some(n), Some(t)) => Some(curve::little_latency_s(n, t, per_replica)),
        _ => None,
    };
    let mut warnings = Vec::new();
    let mut notes = r.notes;
    if let (Some(l), Some(max)) = (latency, req.limits.max_latency_s) {
        if l > max {
            warnings.push(format!(
                "{}: {l:.0} s per request at concurrency {:.0} per replica exceeds --max-latency \
                 {max:.0}s (Little's law); the figure was obtained at that concurrency",
                r.node,
                r.concurrency_per_replica.unwrap_or(0.0)
            ));
        }
    }
    let mut roofline = None;
    let model = req.model_for(r.model.as_deref());
    let gpu = r.gpu.as_deref().and_then(|g| req.facts.gpu(g));
    match (&model, gpu) {
        (Some(m), Some(g)) => {
            let (mean_ctx, full_ctx) = req.context_tokens();
            let gpr = (r.gpus_per_node / r.replicas_per_node.max(1)).max(1);
            let roof = Roofline::new(m, g, gpr, mean_ctx);
            let mem = MemoryFit::new(m, g, gpr, full_ctx);
            let memory_max = if mem.weights_fit() {
                Some(mem.max_concurrency)
            } else {
                warnings.push(format!(
                    "{}: {} ({:.0} GB of weights) does not fit in {gpr} x {} ({:.0} GB usable) per replica",
                    r.node,
                    m.name,
                    mem.weight_bytes / 1e9,
                    g.name,
                    mem.usable_bytes / 1e9
                ));
                None
            };
            let subject = format!("{} ({})", r.node, r.basis.name());
            let mut checks = Vec::new();
            if let Some(b1) = r.batch1_tok_s_per_replica {
                checks.push(RooflineCheck::new(
                    "batch-1 tok/s per replica",
                    b1,
                    roof.batch1(),
                    1.0,
                    r.speculative,
                ));
            }
            // The batched check needs a batch size: the figure's own, else the most that fits
            // in memory (the loosest bound).
            let batch_known = r.concurrency_per_replica.is_some();
            let batch = r
                .concurrency_per_replica
                .or(memory_max.filter(|m| *m > 0).map(f64::from));
            let raw_per_replica = r.tok_s_per_node.p50 / replicas;
            let (bound, efficiency) = match batch {
                // At batch 1 the batch-1 check above already says it.
                Some(b) if b <= 1.0 && r.batch1_tok_s_per_replica.is_some() => {
                    (Some(roof.batch1()), checks.last().map(|c| c.efficiency))
                }
                Some(b) => {
                    let bound = roof.bound(b);
                    let mut check = RooflineCheck::new(
                        "tok/s per replica",
                        raw_per_replica,
                        bound,
                        b,
                        r.speculative,
                    );
                    // MoE: a batched step reads between the active weights and all of them;
                    // call a figure far below only if it is far below the all-experts bound too.
                    if m.active_params_b() < m.params_b
                        && b > 1.0
                        && check.verdict == super::roofline::Verdict::FarBelow
                    {
                        let read = (m.active_weight_bytes() * b).min(m.weight_bytes());
                        let all = b * roof.bandwidth_bytes_s / (read + b * roof.seq_bytes_per_step);
                        if raw_per_replica >= super::roofline::LOW_EFFICIENCY * all {
                            check.verdict = super::roofline::Verdict::Plausible;
                            notes.push(format!(
                                "MoE: {:.0}% of the active-weights roofline at batch {b:.0}, {:.0}% of the bound \
                                 with every expert read ({all:.0} tok/s); the truth lies between",
                                check.efficiency * 100.0,
                                raw_per_replica / all * 100.0
                            ));
                        }
                    }
                    // Without the figure's own batch size the bound is the one at the most
                    // that fits in memory, the loosest: good for "above", not for "far below".
                    if !batch_known && check.verdict == super::roofline::Verdict::FarBelow {
                        check.verdict = super::roofline::Verdict::Plausible;
                        notes.push(format!(
                            "concurrency of the figure unknown: checked against the bound at the \
                             {b:.0} sequences that fit in memory, so {:.0}% is a lower bound on its \
                             efficiency",
                            check.efficiency * 100.0
                        ));
                    }
                    let eff = check.efficiency;
                    checks.push(check);
                    (Some(bound), Some(eff))
                }
                None => (None, None),
            };
            for c in &checks {
                if let Some(w) = c.warning(&subject) {
                    warnings.push(w);
                }
            }
            roofline = Some(RooflineReport {
                batch1_bound: roof.batch1(),
                bound,
                batch,
                batch_known,
                efficiency,
                bandwidth_tb_s_per_replica: roof.bandwidth_bytes_s / 1e12,
                weight_gb_per_step: roof.weight_bytes_per_step / 1e9,
                seq_mb_per_step: roof.seq_bytes_per_step / 1e6,
                context_tokens: mean_ctx,
                memory_max_concurrency: memory_max,
                checks,
            });
        }
        (None, _) => notes.push(format!(
            "{}: no model facts{}: roofline not checked",
            r.node,
            r.model
                .as_deref()
                .map(|m| format!(" for {m}"))
                .unwrap_or_default()
        )),
        (_, None) => notes.push(format!("{}: GPU unknown: roofline not checked", r.node)),
    }
    NodePlan {
        node: r.node,
        gpu: gpu.map(|g| g.name.clone()).or(r.gpu),
        gpus_per_node: r.gpus_per_node,
        replicas_per_node: r.replicas_per_node,
        model: r.model,
        basis: r.basis,
        how: r.how,
        source: r.source,
        date: r.date,
        concurrency_per_replica: r.concurrency_per_replica,
        tok_s_per_node: tok_s,
        days,
        deadline,
        gpu_hours,
        usd_per_node_hour: r.usd_per_node_hour,
        price_note: r.price_note,
        cost_usd: cost,
        usd_per_million_tokens: usd_per_mtok,
        within_budget,
        latency_s: latency,
        roofline,
        warnings,
        notes,
    }
}

/// Explains the difference between the user's estimate and the plan, for the first row
/// (the run's, or the `--node` one).
fn compare(req: &PlanRequest, nodes: &[NodePlan], your_days: f64) -> Comparison {
    let row = &nodes[0];
    let tokens = req.workload.output_tokens;
    let implied = tokens / (your_days * 86_400.0);
    let ratio = implied / row.tok_s_per_node.p50;
    let mut ex = vec![format!(
        "{your_days} days for {:.3e} tokens implies {implied:.0} tok/s sustained on one {}; \
         this plan uses {:.0} tok/s ({}), i.e. {} (P50; P10-P90 {:.1}-{:.1} days). Your \
         estimate assumes {:.0}% of the plan's rate.",
        tokens,
        row.node,
        row.tok_s_per_node.p50,
        row.basis.name(),
        human_duration(row.days.p50 * 86_400.0),
        row.days.p10,
        row.days.p90,
        ratio * 100.0
    )];
    if your_days >= row.days.p10 && your_days <= row.days.p90 && row.days.p10 < row.days.p90 {
        ex.push("your estimate lies within the plan's P10-P90 range: the difference is within the measured uncertainty.".to_string());
    }
    if ratio < 1.0 {
        let lost_h = (1.0 - ratio) * 24.0;
        ex.push(format!(
            "what the plan can see of the missing {:.0}%:",
            (1.0 - ratio) * 100.0
        ));
        ex.push(format!(
            "  peak vs sustained: {:.0} tok/s is {} a short benchmark's rate at its best \
             concurrency; a long run also pays prefill for every new prompt, outputs of uneven \
             length that leave batch slots idle, and queue gaps between requests",
            row.tok_s_per_node.p50,
            match row.basis {
                Basis::Fitted => "the USL fit's peak of",
                Basis::Measured => "the measured figure,",
                _ => "a figure like",
            }
        ));
        ex.push(format!(
            "  ramp and downtime: {lost_h:.1} hours a day at zero throughput (start-up, warm-up, \
             restarts, checkpoints, data loading) would account for all of it"
        ));
        ex.push(format!(
            "  failures: every failed or truncated request is generated again; a {:.0}% retry \
             rate costs {:.0}% of the throughput",
            (1.0 / ratio - 1.0) * 100.0,
            (1.0 - ratio) * 100.0
        ));
        ex.push(format!(
            "  to plan for it, pass --sustained {ratio:.2}, or measure a long run at the chosen \
             concurrency with several trials"
        ));
    } else if ratio > 1.0 {
        ex.push(format!(
            "your estimate is {:.1}x faster than the plan's figure: the classic cause is linear \
             extrapolation from a batch-1 or low-concurrency figure (throughput saturates: see \
             the USL fit), or counting failed requests' tokens",
            ratio
        ));
    }
    Comparison {
        node: row.node.clone(),
        your_days,
        implied_tok_s: implied,
        plan_days_p50: row.days.p50,
        plan_tok_s_p50: row.tok_s_per_node.p50,
        ratio,
        explanation: ex,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::seeds::seed_122b_curve;

    fn request<'a>(facts: &'a Facts, catalog: &'a Catalog, tokens: f64) -> PlanRequest<'a> {
        PlanRequest {
            workload: Workload {
                output_tokens: tokens,
                completions: None,
                avg_output_tokens: None,
                avg_input_tokens: None,
            },
            limits: Limits {
                deadline_s: None,
                budget_usd: None,
                max_concurrency: None,
                max_latency_s: None,
                sustained_fraction: 1.0,
            },
            facts,
            catalog,
            model: None,
            model_name: None,
            run: None,
            only_node: None,
            resamples: 100,
            seed: 1,
            compare_days: None,
        }
    }

    #[test]
    fn days_arithmetic() {
        // 1.64e9 tokens at 1,600 tok/s: 11.9 days; the seeds' 16.5 days implies ~1,150 tok/s.
        assert!((days_for(1.64e9, 1600.0) - 11.86).abs() < 0.01);
        assert!((1.64e9_f64 / (16.5 * 86_400.0) - 1150.4).abs() < 0.1);
        // 523 million tokens at 9,440 tok/s: 15.4 hours.
        assert!((days_for(523e6, 9440.0) * 24.0 - 15.39).abs() < 0.01);
        // 1.64e9 at 15,000 tok/s: 1.27 days.
        assert!((days_for(1.64e9, 15_000.0) - 1.265).abs() < 0.001);
    }

    #[test]
    fn catalog_plan_for_the_27b_job() {
        let facts = Facts::builtin();
        let catalog = Catalog::builtin(&facts).unwrap();
        let mut req = request(&facts, &catalog, 1.64e9);
        req.model = facts.model("Qwen3.6-27B").cloned();
        req.workload.avg_output_tokens = Some(1818.0);
        req.limits.deadline_s = Some(2.0 * 86_400.0);
        req.compare_days = Some(16.5);
        req.only_node = None;
        let p = plan(&req).unwrap();
        let row = |name: &str| p.nodes.iter().find(|n| n.node == name).unwrap();
        let rtx4 = row("rtx6000-4x-dp-mtp");
        assert!((rtx4.days.p50 - 11.86).abs() < 0.01);
        assert_eq!(rtx4.deadline.as_ref().unwrap().nodes_p50, 6);
        let b200 = row("b200-7x");
        assert_eq!(b200.basis, Basis::Stated);
        assert!((b200.days.p50 - 1.265).abs() < 0.001);
        assert!((b200.days.p10 - 0.633).abs() < 0.001);
        assert_eq!(b200.deadline.as_ref().unwrap().nodes_p50, 1);
        let rtx8 = row("rtx6000-8x-dp");
        let roof = rtx8.roofline.as_ref().unwrap();
        let b1 = &roof.checks[0];
        assert!((b1.efficiency - 0.80).abs() < 0.01, "{b1:?}");
        // Scaled rows exist for the catalog's figure-less nodes, from rtx6000-8x-dp.
        let h200 = row("h200-8x");
        assert_eq!(h200.basis, Basis::Scaled);
        assert!((h200.tok_s_per_node.p50 - 9440.0 * 4.8 / 1.792).abs() < 1.0);
        // The 122B figure is left out: another model.
        assert!(p.nodes.iter().all(|n| n.node != "rtx6000-4x-tp4"));
        let c = p.comparison.unwrap();
        assert_eq!(c.node, "rtx6000-8x-dp");
    }

    #[test]
    fn run_plan_uses_the_fit_and_the_node() {
        let facts = Facts::builtin();
        let catalog = Catalog::builtin(&facts).unwrap();
        let run = seed_122b_curve();
        let mut req = request(&facts, &catalog, 1.64e9);
        req.model = facts.model("Qwen3.5-122B-A10B").cloned();
        req.workload.avg_output_tokens = Some(1818.0);
        req.compare_days = Some(16.5);
        let node = catalog.node("rtx6000-4x-tp4").unwrap();
        req.run = Some((
            &run,
            "seed.json".to_string(),
            RunNode {
                name: node.name.clone(),
                gpu: Some(node.gpu.clone()),
                gpus_per_node: node.gpus_per_node,
                replicas_per_node: node.replicas_per_node,
                usd_per_node_hour: node.usd_per_node_hour,
                price_note: node.price_note.clone(),
            },
        ));
        let p = plan(&req).unwrap();
        let first = &p.nodes[0];
        assert_eq!(first.node, "rtx6000-4x-tp4");
        assert_eq!(first.basis, Basis::Fitted);
        assert!((first.tok_s_per_node.p50 - 1610.0).abs() < 161.0);
        assert!(first.latency_s.unwrap() > 40.0);
        let c = p.comparison.as_ref().unwrap();
        assert!(c.ratio < 1.0 && c.explanation.iter().any(|l| l.contains("sustained")));
        assert!(p.fit.is_some());
        // It is not listed twice.
        assert_eq!(
            p.nodes
                .iter()
                .filter(|n| n.node == "rtx6000-4x-tp4")
                .count(),
            1
        );
    }
}
