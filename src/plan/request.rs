//! What a plan is made from: the workload, the limits, the facts and catalog, the model, and
//! the run (with the node it measured), if any.

use serde::Serialize;

use crate::record::RunResult;

use super::catalog::Catalog;
use super::facts::{normalize, Facts, ModelFacts};
use super::lengths;
use super::slo::Slo;
use super::workload::Workload;

/// The job's limits and the planner's options.
#[derive(Debug, Clone, Serialize)]
pub struct Limits {
    pub deadline_s: Option<f64>,
    pub budget_usd: Option<f64>,
    pub max_concurrency: Option<u32>,
    pub max_latency_s: Option<f64>,
    /// Share of the measured or stated throughput a long run sustains (1 = all of it).
    pub sustained_fraction: f64,
    /// TTFT and ITL p99 limits: the plan runs at the highest load that meets them.
    pub slo: Slo,
    /// Find the cheapest mix of node types that meets the deadline at P90.
    pub cheapest_mix: bool,
    /// `--nodes N`: the job's time and cost on exactly N nodes of each type.
    pub nodes: Option<u32>,
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
    /// What the plan must say about how this node was put together (overrides).
    pub warnings: Vec<String>,
}

impl RunNode {
    /// GPUs per replica (a replica spans this many of the node's GPUs).
    pub fn gpus_per_replica(&self) -> u32 {
        self.gpus_per_node / self.replicas_per_node.max(1)
    }
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
    /// The node `--compare-days` is an estimate for (`--compare-node`).
    pub compare_node: Option<String>,
}

impl<'a> PlanRequest<'a> {
    /// The facts of the model a row is for: the plan's own model when it is the same one.
    pub(super) fn model_for(&self, name: Option<&str>) -> Option<ModelFacts> {
        let name = name?;
        if let Some(m) = &self.model {
            if normalize(&m.name) == normalize(name)
                || self.facts.model(name).map(|f| &f.name) == Some(&m.name)
            {
                return Some(m.clone());
            }
        }
        self.facts.model(name).cloned()
    }

    /// The name of the model the plan is for, with or without facts.
    pub(super) fn plan_model_name(&self) -> Option<String> {
        self.model
            .as_ref()
            .map(|m| m.name.clone())
            .or_else(|| self.model_name.clone())
    }

    pub(super) fn same_model(&self, a: &str, b: &str) -> bool {
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

    /// Context tokens per sequence: (mean over a completion's decode, full at its end).
    /// With an output length distribution the mean is time-weighted, input + E[L^2] / 2E[L]
    /// (long requests hold their slot longer), and the full context the length-biased
    /// input + E[L^2] / E[L] (what a sequence in flight reaches); equal lengths L give
    /// input + L/2 and input + L.
    pub(super) fn context_tokens(&self) -> (f64, f64) {
        let input = self.workload.avg_input_tokens.unwrap_or(0.0);
        if let Some(d) = &self.workload.output_length {
            return (
                input + lengths::time_weighted_context(d),
                input + lengths::length_biased_mean(d),
            );
        }
        let output = self.workload.avg_output_tokens.unwrap_or(0.0);
        (input + output / 2.0, input + output)
    }
}
