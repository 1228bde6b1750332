//! The plan's answers in words: fastest on one node, fewest nodes for the deadline, cheapest,
//! and what the budget buys.

use super::answer::NodePlan;
use super::figures::SECONDS_PER_DAY;
use super::request::PlanRequest;
use super::workload::human_duration;

/// A node and its figure.
type Pick<'a> = Option<(&'a NodePlan, f64)>;

/// Of the nodes whose figure `f` gives, the one with the least: among measured and fitted
/// figures, and among all figures where that is another node.
fn both<'a>(nodes: &'a [NodePlan], f: &dyn Fn(&NodePlan) -> Option<f64>) -> (Pick<'a>, Pick<'a>) {
    let best = |all: bool| {
        nodes
            .iter()
            .filter(|n| all || n.basis.is_measured())
            .filter_map(|n| f(n).map(|v| (n, v)))
            .min_by(|a, b| a.1.total_cmp(&b.1))
    };
    let t = best(false);
    let a = best(true).filter(|a| t.is_none_or(|t| t.0.node != a.0.node));
    (t, a)
}

/// A node's P10-P90 days, in words.
fn days_range(n: &NodePlan) -> String {
    if !n.interval.known {
        "P10-P90 unknown".to_string()
    } else if n.days.p10 == n.days.p90 {
        "no spread".to_string()
    } else {
        let (lo, hi) = (
            human_duration(n.days.p10 * SECONDS_PER_DAY),
            human_duration(n.days.p90 * SECONDS_PER_DAY),
        );
        match lo == hi {
            // Not "2.89-2.89": the ends print alike, so say how narrow the spread is.
            true => format!(
                "P10-P90 within ±{:.1}%",
                ((n.days.p90 - n.days.p10) / 2.0 / n.days.p50 * 100.0).max(0.1)
            ),
            false => format!("P10-P90 {lo} to {hi}"),
        }
    }
}

/// The answers in a few lines: each question answered from measured or fitted figures, and
/// again from all figures where a stated or scaled one would answer differently.
pub(super) fn summarize(req: &PlanRequest, nodes: &[NodePlan]) -> Vec<String> {
    let mut out = Vec::new();
    yours(req, nodes, &mut out);
    fastest(nodes, &mut out);
    if let Some(count) = req.limits.nodes {
        fastest_on(count, nodes, &mut out);
    }
    if let Some(deadline) = req.limits.deadline_s {
        within_deadline(deadline, nodes, &mut out);
    }
    cheapest(req, nodes, &mut out);
    if let Some(budget) = req.limits.budget_usd {
        out.push(budget_line(req, budget, nodes));
    }
    out
}

/// The user's own hardware first: the run's row, and where it was measured at batch 1 only,
/// that it is not the node's capacity, beside the fastest measured row of the same GPU.
fn yours(req: &PlanRequest, nodes: &[NodePlan], out: &mut Vec<String>) {
    let Some((_, _, node)) = &req.run else { return };
    let Some(n) = nodes.iter().find(|n| n.node == node.name) else {
        return;
    };
    let days = |n: &NodePlan| human_duration(n.days.p50 * SECONDS_PER_DAY);
    out.push(format!(
        "your hardware (the run): {}, {} ({})",
        n.label(),
        days(n),
        days_range(n)
    ));
    if !n.batch1_only {
        return;
    }
    let loaded = nodes
        .iter()
        .filter(|c| !c.batch1_only && c.basis.is_measured() && c.gpu == n.gpu)
        .min_by(|a, b| a.days.p50.total_cmp(&b.days.p50));
    out.push(match loaded {
        Some(c) => format!(
            "  measured at batch 1 only, so that is a floor, not its capacity: {} (the same GPU, \
             measured serving many requests at once) takes {}; measure a concurrency sweep to \
             plan your own",
            c.label(),
            days(c)
        ),
        None => "  measured at batch 1 only, so that is a floor, not its capacity: measure a \
                 concurrency sweep before planning on it"
            .to_string(),
    });
}

/// The fastest on one node.
fn fastest(nodes: &[NodePlan], out: &mut Vec<String>) {
    let (t, a) = both(nodes, &|n| Some(n.days.p50));
    for (head, pick) in [
        ("fastest on one node", t),
        ("  counting stated and scaled figures", a),
    ] {
        if let Some((n, d)) = pick {
            out.push(format!(
                "{head}: {}, {} ({})",
                n.label(),
                human_duration(d * SECONDS_PER_DAY),
                days_range(n)
            ));
        }
    }
}

/// The fastest on `count` nodes (`--nodes`).
fn fastest_on(count: u32, nodes: &[NodePlan], out: &mut Vec<String>) {
    let (t, a) = both(nodes, &|n| n.on_nodes.map(|f| f.job_s.p50));
    for (head, pick) in [
        (format!("fastest on {count} nodes"), t),
        ("  counting stated and scaled figures".to_string(), a),
    ] {
        let Some((n, s)) = pick else { continue };
        let f = n.on_nodes.expect("picked by on_nodes");
        let spread = match n.interval.known {
            true => format!(
                "P10-P90 {} to {}",
                human_duration(f.job_s.p10),
                human_duration(f.job_s.p90)
            ),
            false => "P10-P90 unknown".to_string(),
        };
        let cost = f
            .cost_usd
            .map(|c| format!(", ${:.0}", c.p50))
            .unwrap_or_default();
        out.push(format!(
            "{head}: {}, {} ({spread}){cost}",
            n.label(),
            human_duration(s)
        ));
    }
}

/// Which nodes finish within the deadline on one node, and the fewest nodes for it.
fn within_deadline(deadline: f64, nodes: &[NodePlan], out: &mut Vec<String>) {
    let one: Vec<String> = nodes
        .iter()
        .filter(|n| n.interval.known)
        .filter(|n| n.deadline.as_ref().is_some_and(|d| d.nodes_p90 == 1))
        .map(NodePlan::label)
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
    let unsure: Vec<String> = nodes
        .iter()
        .filter(|n| !n.interval.known)
        .filter(|n| n.deadline.as_ref().is_some_and(|d| d.nodes_p50 == 1))
        .map(NodePlan::label)
        .collect();
    if !unsure.is_empty() {
        out.push(format!(
            "  at P50 only, interval unknown (no confidence can be given): {}",
            unsure.join(", ")
        ));
    }
    let (t, a) = both(nodes, &|n| n.deadline.as_ref().map(|d| d.nodes_p90 as f64));
    for (head, pick) in [
        ("fewest nodes for the deadline", t),
        ("  counting stated and scaled figures", a),
    ] {
        if let Some((n, k)) = pick {
            out.push(if n.interval.known {
                format!(
                    "{head}: {k} x {} ({} at P50)",
                    n.label(),
                    n.deadline.as_ref().map_or(0, |d| d.nodes_p50)
                )
            } else {
                format!(
                    "{head}: {} x {} at P50 (interval unknown: no 90% figure)",
                    n.deadline.as_ref().map_or(0, |d| d.nodes_p50),
                    n.label()
                )
            });
        }
    }
}

/// The cheapest.
fn cheapest(req: &PlanRequest, nodes: &[NodePlan], out: &mut Vec<String>) {
    let (t, a) = both(nodes, &|n| n.cost_usd.map(|c| c.p50));
    for (head, pick) in [("cheapest", t), ("  counting stated and scaled figures", a)] {
        if let Some((n, c)) = pick {
            out.push(format!(
                "{head}: {}, ${c:.0}, ${:.2} per million tokens ({})",
                n.label(),
                n.usd_per_million_tokens.unwrap_or(0.0),
                match req.catalog.is_builtin() {
                    true => "illustrative prices",
                    false => "your catalog's prices",
                }
            ));
        }
    }
}

/// What the budget buys on each node.
fn budget_line(req: &PlanRequest, budget: f64, nodes: &[NodePlan]) -> String {
    let (within, over): (Vec<&NodePlan>, Vec<&NodePlan>) = nodes
        .iter()
        .filter(|n| n.within_budget.is_some())
        .partition(|n| n.within_budget == Some(true));
    format!(
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
    )
}
