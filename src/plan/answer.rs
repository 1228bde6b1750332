//! What a plan says: one row per node type (time, nodes, money, latency, roofline), the
//! comparison with the user's own estimate, and the answers in words.

use serde::Serialize;

use super::curve::FitReport;
use super::facts::ModelFacts;
use super::figures::{Basis, Interval, Quantiles};
use super::mix::MixReport;
use super::request::Limits;
use super::roofline::RooflineCheck;
use super::slo::SloReport;
use super::workload::Workload;

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

impl ModelSummary {
    pub fn of(m: &ModelFacts) -> ModelSummary {
        ModelSummary {
            name: m.name.clone(),
            params_b: m.params_b,
            active_params_b: m.active_params_b(),
            bytes_per_param: m.bytes_per_param,
            kv_bytes_per_token: m.kv_bytes_per_token(),
            state_mb_per_seq: m.state_mb_per_seq,
            source: m.source.clone(),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct DeadlinePlan {
    pub deadline_s: f64,
    /// Nodes to finish by the deadline at the median throughput.
    pub nodes_p50: u32,
    /// Nodes to finish by the deadline with 90% confidence (at the P10 throughput).
    pub nodes_p90: u32,
    /// Seconds kept free at the end for the tail at P50 (from the output length
    /// distribution, else one request at the planned concurrency; 0 when the row's
    /// concurrency is unknown).
    pub tail_s: f64,
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

/// The job on a fleet of one node type: the steady phase shared by the nodes, the
/// end-of-job tail not (the last requests run at falling concurrency on whichever nodes hold
/// them).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct FleetPlan {
    pub nodes: u32,
    /// Seconds, steady phase / nodes plus the tail: P10 (fast) / P50 / P90 (slow).
    pub job_s: Quantiles,
    /// The same in days.
    pub days: Quantiles,
    /// The tail counted at P50, seconds (0 when neither a length distribution nor a
    /// concurrency gives one).
    pub tail_s: f64,
    /// Every node rented for the whole job: P10 / P50 / P90 (None without a price).
    pub cost_usd: Option<Quantiles>,
}

/// The node counts plan.json tabulates for every row (with `--nodes N` added).
pub const FLEET_SIZES: [u32; 8] = [1, 2, 4, 8, 16, 32, 64, 128];

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
    pub tok_s_per_node: Quantiles,
    /// What P10-P90 is made of, or that it is unknown (then P10 and P90 say nothing).
    pub interval: Interval,
    /// Days on one node: P10 (fast) / P50 / P90 (slow).
    pub days: Quantiles,
    pub deadline: Option<DeadlinePlan>,
    /// The job on exactly `--nodes N` nodes of this type.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub on_nodes: Option<FleetPlan>,
    /// The job on 1, 2, 4 ... 128 nodes (and N), for tables and charts of one's own.
    pub by_node_count: Vec<FleetPlan>,
    /// GPU-hours at the median.
    pub gpu_hours: f64,
    pub usd_per_node_hour: Option<f64>,
    pub price_note: Option<String>,
    pub cost_usd: Option<Quantiles>,
    pub usd_per_million_tokens: Option<f64>,
    pub within_budget: Option<bool>,
    /// Per-request latency by Little's law at the concurrency used.
    pub latency_s: Option<f64>,
    /// The end-of-job tail at P50, seconds, from the output length distribution: what the
    /// job takes beyond its work at the planned rate (see `plan::lengths`); None without a
    /// distribution or a concurrency.
    pub end_tail_s: Option<f64>,
    /// The whole job on one node, seconds, steady phase plus the end-of-job tail: P10 (fast)
    /// / P50 / P90 (slow); None where `end_tail_s` is.
    pub job_s: Option<Quantiles>,
    /// The shortest one request can take: output tokens / batch-1 roofline, seconds.
    pub min_request_s: Option<f64>,
    /// Why the model cannot run on this node at the job's context (such rows are left out).
    pub infeasible: Option<String>,
    /// The figure is one request per replica (a batch-1 run, or scaled from one): a floor,
    /// not the node's capacity; the row and the summary say so.
    pub batch1_only: bool,
    pub roofline: Option<RooflineReport>,
    pub warnings: Vec<String>,
    pub notes: Vec<String>,
}

impl NodePlan {
    /// How the summary, the warnings and the chart name a row: "b200-7x (stated)".
    pub fn label(&self) -> String {
        match self.batch1_only {
            true => format!("{} ({}, {BATCH1})", self.node, self.basis.name()),
            false => label(&self.node, self.basis),
        }
    }
}

/// How a batch-1 row is marked where it is named.
pub const BATCH1: &str = "batch 1 only, not capacity";

/// A row's name with the basis of its figure: "b200-7x (stated)".
pub fn label(node: &str, basis: Basis) -> String {
    format!("{node} ({})", basis.name())
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
    /// The SLO cap and goodput (with --max-ttft-p99 / --max-itl-p99 and a run).
    pub slo: Option<SloReport>,
    /// The cheapest mix of node types for the deadline (with `--cheapest-mix`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mix: Option<MixReport>,
    /// The answers in words: fastest, fewest nodes for the deadline, cheapest, budget.
    pub summary: Vec<String>,
    pub notes: Vec<String>,
    pub warnings: Vec<String>,
}
