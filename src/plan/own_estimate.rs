//! The user's own estimate (`--compare-days`) against the plan: the throughput it implies,
//! and what the plan can see of the difference.

use anyhow::Result;

use super::answer::{Comparison, NodePlan};
use super::facts::normalize;
use super::field::Field;
use super::figures::{tok_s_for, Basis, SECONDS_PER_DAY};
use super::request::PlanRequest;
use super::workload::human_duration;

/// The row the user's estimate is for: `--compare-node`, else the run's row, else the only
/// (or `--node`) row; with several rows and none named, the estimate's node is unknown.
fn row_for<'n>(req: &PlanRequest, nodes: &'n [NodePlan]) -> Result<&'n NodePlan> {
    let names = || {
        nodes
            .iter()
            .map(|n| n.node.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    if let Some(name) = &req.compare_node {
        return nodes
            .iter()
            .find(|n| n.node == *name || normalize(&n.node) == normalize(name))
            .ok_or_else(|| {
                Field::CompareNode.error(format!(
                    "no row {name:?} in this plan for your estimate; rows: {}",
                    names()
                ))
            });
    }
    if req.run.is_some() || req.only_node.is_some() || nodes.len() == 1 {
        return Ok(&nodes[0]);
    }
    Err(Field::CompareDays.error(format!(
        "which node is your estimate in days for? Name it with --compare-node (rows: \
         {}), or plan one node with --node",
        names()
    )))
}

/// Explains the difference between the user's estimate and the plan, for the row it names.
pub(super) fn compare(req: &PlanRequest, nodes: &[NodePlan], your_days: f64) -> Result<Comparison> {
    let row = row_for(req, nodes)?;
    let tokens = req.workload.output_tokens;
    let implied = tok_s_for(tokens, your_days);
    let ratio = implied / row.tok_s_per_node.p50;
    let mut ex = vec![format!(
        "{your_days} days for {:.3e} tokens implies {implied:.0} tok/s sustained on one {}; \
         this plan uses {:.0} tok/s ({}), i.e. {} (P50; P10-P90 {}). Your \
         estimate assumes {:.0}% of the plan's rate.",
        tokens,
        row.node,
        row.tok_s_per_node.p50,
        row.basis.name(),
        human_duration(row.days.p50 * SECONDS_PER_DAY),
        if row.interval.known {
            format!("{} days", row.days.range_text())
        } else {
            "unknown".to_string()
        },
        ratio * 100.0
    )];
    if row.interval.known
        && your_days >= row.days.p10
        && your_days <= row.days.p90
        && row.days.p10 < row.days.p90
    {
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
    Ok(Comparison {
        node: row.node.clone(),
        your_days,
        implied_tok_s: implied,
        plan_days_p50: row.days.p50,
        plan_tok_s_p50: row.tok_s_per_node.p50,
        ratio,
        explanation: ex,
    })
}
