//! Time, nodes, money, latency and the roofline for one row: what turns a throughput figure
//! into a node type's projection.

use super::answer::{label, DeadlinePlan, FleetPlan, NodePlan, RooflineReport, FLEET_SIZES};
use super::curve;
use super::facts::{GpuFacts, ModelFacts};
use super::figures::{Quantiles, SECONDS_PER_DAY};
use super::lengths;
use super::request::PlanRequest;
use super::roofline::{MemoryFit, Roofline, RooflineCheck, Verdict, LOW_EFFICIENCY};
use super::rows::Row;
use super::workload::human_duration;

/// Nodes that generate `tokens` within `deadline_s` at `tok_s` per node (at least one), when
/// the end-of-job tail takes up to `tail_s`: the last requests start while the others finish
/// and run at falling concurrency, so the steady phase must end one request's duration early.
/// Conservative: with K requests in S slots the job takes between K/S and K/S + 1 request
/// durations. None when the deadline is not longer than the tail.
pub fn nodes_for(tokens: f64, tok_s: f64, deadline_s: f64, tail_s: f64) -> Option<u32> {
    let steady = deadline_s - tail_s;
    if !(steady > 0.0 && tok_s > 0.0) {
        return None;
    }
    let n = (tokens / (tok_s * steady)).ceil().max(1.0);
    (n <= u32::MAX as f64).then_some(n as u32)
}

/// A row's projection: days at P10/P50/P90, nodes for the deadline, GPU-hours, cost, $ per
/// million tokens, latency by Little's law, and the roofline check.
pub(super) fn finish(req: &PlanRequest, mut r: Row) -> NodePlan {
    let tokens = req.workload.output_tokens;
    let tok_s = r.tok_s_per_node.scale(req.limits.sustained_fraction);
    let days = tok_s.days_for(tokens);
    let node_hours_p50 = days.p50 * 24.0;
    let gpu_hours = node_hours_p50 * r.gpus_per_node as f64;
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
    let mut notes = std::mem::take(&mut r.notes);
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
    let model = req.model_for(r.model.as_deref());
    let gpu = r.gpu.as_deref().and_then(|g| req.facts.gpu(g));
    let (roofline, infeasible) =
        check_roofline(req, &r, model.as_ref(), gpu, &mut warnings, &mut notes);
    // The shortest a request can take: output tokens at the batch-1 roofline (a physical
    // bound), and how long one takes at the planned concurrency (the end-of-job tail).
    let min_request_s = match (&roofline, req.workload.avg_output_tokens) {
        (Some(rf), Some(t)) if rf.batch1_bound > 0.0 => Some(t / rf.batch1_bound),
        _ => None,
    };
    // With an output length distribution, the end-of-job tail from it (see `lengths`): the
    // slots of one node wait on the longest request left when the queue empties.
    let slots = r
        .concurrency_per_replica
        .map(|c| (c * replicas).round().clamp(1.0, f64::from(u32::MAX)) as u32);
    let tail_tokens = match (&req.workload.output_length, slots) {
        (Some(d), Some(n)) => Some((lengths::tail_excess_tokens(d, n), n)),
        _ => None,
    };
    let tail_at = |x: f64| tail_tokens.map(|(t, n)| t * f64::from(n) / x);
    let job_s = tail_tokens.map(|_| Quantiles {
        p10: days.p10 * SECONDS_PER_DAY + tail_at(tok_s.p90).unwrap_or(0.0),
        p50: days.p50 * SECONDS_PER_DAY + tail_at(tok_s.p50).unwrap_or(0.0),
        p90: days.p90 * SECONDS_PER_DAY + tail_at(tok_s.p10).unwrap_or(0.0),
    });
    let end_tail_s = tail_at(tok_s.p50);
    let tail_s = end_tail_s.or(latency);
    let deadline = req.limits.deadline_s.and_then(|d| {
        let tail = tail_s.unwrap_or(0.0);
        let job = JobTimes {
            tokens,
            tok_s,
            min_request_s,
            tail_s,
            tail_p90: tail_at(tok_s.p10).unwrap_or(tail),
        };
        plan_deadline(
            d,
            &label(&r.node, r.basis),
            &job,
            r.concurrency_per_replica,
            &mut warnings,
        )
    });
    let tail_fast = tail_at(tok_s.p90).or(tail_s).unwrap_or(0.0);
    let tail_slow = tail_at(tok_s.p10).or(tail_s).unwrap_or(0.0);
    let (on_nodes, by_node_count) = fleet_plans(
        req,
        days,
        (tail_fast, tail_s, tail_slow),
        r.usd_per_node_hour,
    );
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
        interval: r.interval,
        days,
        deadline,
        on_nodes,
        by_node_count,
        gpu_hours,
        usd_per_node_hour: r.usd_per_node_hour,
        price_note: r.price_note,
        cost_usd: cost,
        usd_per_million_tokens: usd_per_mtok,
        within_budget,
        latency_s: latency,
        end_tail_s,
        job_s,
        min_request_s,
        infeasible,
        batch1_only: r.batch1_only,
        roofline,
        warnings,
        notes,
    }
}

/// The job on fleets of whole nodes: on `--nodes`, and on each of the usual fleet sizes.
/// `tails`: the end-of-job tail at the P90, P50 and P10 throughput.
fn fleet_plans(
    req: &PlanRequest,
    days: Quantiles,
    (tail_fast, tail_s, tail_slow): (f64, Option<f64>, f64),
    usd_per_node_hour: Option<f64>,
) -> (Option<FleetPlan>, Vec<FleetPlan>) {
    let fleet = |nodes: u32| {
        let n = f64::from(nodes);
        let job_s = Quantiles {
            p10: days.p10 * SECONDS_PER_DAY / n + tail_fast,
            p50: days.p50 * SECONDS_PER_DAY / n + tail_s.unwrap_or(0.0),
            p90: days.p90 * SECONDS_PER_DAY / n + tail_slow,
        };
        FleetPlan {
            nodes,
            job_s,
            days: job_s.scale(1.0 / SECONDS_PER_DAY),
            tail_s: tail_s.unwrap_or(0.0),
            cost_usd: usd_per_node_hour.map(|p| job_s.scale(n * p / 3600.0)),
        }
    };
    let on_nodes = req.limits.nodes.map(fleet);
    let mut sizes: Vec<u32> = FLEET_SIZES.to_vec();
    sizes.extend(req.limits.nodes);
    sizes.sort_unstable();
    sizes.dedup();
    (on_nodes, sizes.into_iter().map(fleet).collect())
}

/// What the deadline is planned from: the job's tokens at the node's throughput, the
/// shortest a request can take, and the end-of-job tail (at P50, and at the P10 throughput).
struct JobTimes {
    tokens: f64,
    tok_s: Quantiles,
    min_request_s: Option<f64>,
    tail_s: Option<f64>,
    tail_p90: f64,
}

/// Nodes for the deadline `d` at P50 and P90 throughput, or why no number of nodes meets it
/// (said in `warnings`).
fn plan_deadline(
    d: f64,
    label: &str,
    job: &JobTimes,
    concurrency_per_replica: Option<f64>,
    warnings: &mut Vec<String>,
) -> Option<DeadlinePlan> {
    if let Some(m) = job.min_request_s.filter(|m| *m >= d) {
        warnings.push(format!(
            "{label}: the deadline {} is shorter than one request can take ({} at the \
             batch-1 memory-bandwidth roofline): no number of nodes meets it",
            human_duration(d),
            human_duration(m)
        ));
        return None;
    }
    let tail = job.tail_s.unwrap_or(0.0);
    // The slow end's last request (P10 throughput) must fit as well as the median's.
    let tail_slowest = job.tail_p90.max(tail);
    match (
        nodes_for(job.tokens, job.tok_s.p50, d, tail),
        nodes_for(job.tokens, job.tok_s.p10, d, job.tail_p90),
    ) {
        (Some(p50), Some(p90)) => Some(DeadlinePlan {
            deadline_s: d,
            nodes_p50: p50,
            nodes_p90: p90,
            tail_s: tail,
        }),
        _ if d > tail_slowest => {
            warnings.push(format!(
                "{label}: the deadline {} would need more than {} nodes",
                human_duration(d),
                u32::MAX
            ));
            None
        }
        _ => {
            warnings.push(format!(
                "{label}: the deadline {} is not longer than one request takes at \
                 concurrency {:.0} per replica ({}, Little's law): no number of nodes meets \
                 it at this concurrency; plan at a lower one (--max-latency or \
                 --max-concurrency)",
                human_duration(d),
                concurrency_per_replica.unwrap_or(0.0),
                human_duration(tail_slowest)
            ));
            None
        }
    }
}

/// The roofline check of a row whose model and GPU are known, and why the model cannot run
/// there if it cannot; else a note that the roofline was not checked.
fn check_roofline(
    req: &PlanRequest,
    r: &Row,
    model: Option<&ModelFacts>,
    gpu: Option<&GpuFacts>,
    warnings: &mut Vec<String>,
    notes: &mut Vec<String>,
) -> (Option<RooflineReport>, Option<String>) {
    match (model, gpu) {
        (Some(m), Some(g)) => {
            let report = roofline(req, r, m, g, warnings, notes);
            (Some(report), infeasibility(req, r, m, g))
        }
        (None, _) => {
            notes.push(format!(
                "{}: no model facts{}: roofline not checked",
                r.node,
                r.model
                    .as_deref()
                    .map(|m| format!(" for {m}"))
                    .unwrap_or_default()
            ));
            (None, None)
        }
        (_, None) => {
            notes.push(format!("{}: GPU unknown: roofline not checked", r.node));
            (None, None)
        }
    }
}

/// Why the row's model cannot run on its node at the job's context, if it cannot: the weights
/// do not fit in one replica, or not even one sequence's KV cache fits beside them.
fn infeasibility(req: &PlanRequest, r: &Row, m: &ModelFacts, g: &GpuFacts) -> Option<String> {
    let (_, full_ctx) = req.context_tokens();
    let gpr = (r.gpus_per_node / r.replicas_per_node.max(1)).max(1);
    let mem = MemoryFit::new(m, g, gpr, full_ctx);
    if !mem.weights_fit() {
        return Some(format!(
            "{}: {} ({:.0} GB of weights) does not fit in one replica of {gpr} x {} ({:.0} GB \
             usable)",
            r.node,
            m.name,
            mem.weight_bytes / 1e9,
            g.name,
            mem.usable_bytes / 1e9
        ));
    }
    if mem.max_concurrency == 0 {
        return Some(format!(
            "{}: one sequence of {full_ctx:.0} tokens needs {:.1} GB of KV cache and state; \
             {:.1} GB are left beside the weights in one replica of {gpr} x {}",
            r.node,
            mem.bytes_per_seq / 1e9,
            (mem.usable_bytes - mem.weight_bytes) / 1e9,
            g.name
        ));
    }
    None
}

/// The row's figures against the memory-bandwidth roofline of its GPU and model: the batch-1
/// check, the check at the figure's batch (or the most that fits), and what fits in memory.
fn roofline(
    req: &PlanRequest,
    r: &Row,
    m: &ModelFacts,
    g: &GpuFacts,
    warnings: &mut Vec<String>,
    notes: &mut Vec<String>,
) -> RooflineReport {
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
    let subject = label(&r.node, r.basis);
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
    let replicas = r.replicas_per_node.max(1) as f64;
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
            if m.active_params_b() < m.params_b && b > 1.0 && check.verdict == Verdict::FarBelow {
                let read = (m.active_weight_bytes() * b).min(m.weight_bytes());
                let all = b * roof.bandwidth_bytes_s / (read + b * roof.seq_bytes_per_step);
                if raw_per_replica >= LOW_EFFICIENCY * all {
                    check.verdict = Verdict::Plausible;
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
            if !batch_known && check.verdict == Verdict::FarBelow {
                check.verdict = Verdict::Plausible;
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
    RooflineReport {
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deadline that the median's last request fits but the slow end's does not: no
    /// number of nodes meets it at the slow end, and the warning says why (Little's law),
    /// not "more than 4294967295 nodes".
    #[test]
    fn a_deadline_the_slow_ends_last_request_misses_says_why() {
        let job = JobTimes {
            tokens: 1e9,
            tok_s: Quantiles {
                p10: 800.0,
                p50: 1000.0,
                p90: 1200.0,
            },
            min_request_s: Some(1.0),
            tail_s: Some(3000.0),
            tail_p90: 4000.0,
        };
        let mut warnings = Vec::new();
        let plan = plan_deadline(3600.0, "node", &job, Some(64.0), &mut warnings);
        assert!(plan.is_none());
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].contains("Little's law"), "{warnings:?}");
        assert!(!warnings[0].contains("4294967295"), "{warnings:?}");
    }
}
