//! The projection, as a sequence: the rows (from the run, the catalog, and scaled by memory
//! bandwidth), each row finished into time, nodes, money, latency and the roofline check, then
//! the comparison with the user's estimate and the answers in words.

use anyhow::{bail, Result};

use super::answer::{ModelSummary, NodePlan, Plan};
use super::catalog::Node;
use super::curve::FitReport;
use super::field::Field;
use super::figures::SECONDS_PER_DAY;
use super::finish::finish;
use super::in_words::summarize;
use super::mix::{cheapest_mix, MixReport, NodeOption};
use super::own_estimate::compare;
use super::request::PlanRequest;
use super::rows::{self, Remarks, Row};
use super::workload::human_duration;

/// Said when no input length is given: the memory and roofline figures then count prompts as
/// 0 tokens, which a reader must know (it holds more sequences and a higher bound than real
/// prompts allow).
pub const INPUT_UNKNOWN: &str = "input length unknown: prompts are counted as 0 tokens in the \
     memory and roofline figures (sequences that fit, the bound, scaled rows), which overstates \
     them for real prompts; give --avg-input-tokens N, --input-length or --lengths-from";

/// Makes the plan.
pub fn plan(req: &PlanRequest) -> Result<Plan> {
    let mut said = Remarks::default();
    if req.workload.avg_output_tokens.is_none() {
        said.notes.push(
            "average output tokens per completion unknown (give --completions or \
             --avg-output-tokens): no per-request latency, and KV reads are left out of the \
             roofline"
                .to_string(),
        );
    }

    if req.workload.avg_input_tokens.is_none() && req.model.is_some() {
        said.notes.push(INPUT_UNKNOWN.to_string());
    }

    let (rows, fit) = gather_rows(req, &mut said)?;

    let (nodes, left_out): (Vec<NodePlan>, Vec<NodePlan>) = rows
        .into_iter()
        .map(|r| finish(req, r))
        .partition(|n| n.infeasible.is_none());
    let reasons: Vec<String> = left_out
        .iter()
        .filter_map(|n| n.infeasible.clone())
        .collect();
    if nodes.is_empty() || (req.only_node.is_some() && !left_out.is_empty()) {
        bail!("infeasible: {}", reasons.join("; "));
    }
    for r in &reasons {
        said.notes.push(format!("left out, infeasible: {r}"));
    }
    refuse_a_missed_deadline(req, &nodes)?;
    for n in &nodes {
        said.warnings.extend(n.warnings.iter().cloned());
    }
    if req.limits.sustained_fraction < 1.0 {
        said.notes.push(format!(
            "every throughput is multiplied by --sustained {} (the share of a benchmark's rate \
             a long run keeps)",
            req.limits.sustained_fraction
        ));
    }
    if req.catalog.is_builtin() {
        said.notes.push(
            "prices are illustrative (see each node's price note), not quotes; put your own in \
             a catalog"
                .to_string(),
        );
    }

    let comparison = req
        .compare_days
        .map(|d| compare(req, &nodes, d))
        .transpose()?;
    let mix = if req.limits.cheapest_mix {
        Some(cheapest(req, &nodes)?)
    } else {
        None
    };
    let summary = summarize(req, &nodes);
    Ok(Plan {
        workload: req.workload.clone(),
        limits: req.limits.clone(),
        model: req.model.as_ref().map(ModelSummary::of),
        catalog: req.catalog.origin.clone(),
        results: req.run.as_ref().map(|r| r.1.clone()),
        fit,
        nodes,
        comparison,
        slo: said.slo.take(),
        mix,
        summary,
        notes: said.notes,
        warnings: said.warnings,
    })
}

/// The rows to plan: the run's (with its fit), the catalog's for the nodes shown, and the
/// scaled ones; an error when there is nothing to plan from.
fn gather_rows(req: &PlanRequest, said: &mut Remarks) -> Result<(Vec<Row>, Option<FitReport>)> {
    rows::note_renamed(req, said);
    let (mut rows, fit) = match rows::from_run(req, said)? {
        Some((row, fit)) => (vec![row], fit),
        None => (Vec::new(), None),
    };
    let run_node = rows.first().map(|r| r.node.clone());
    let selected = rows::selected_nodes(req)?;
    // Every catalog figure for the plan's model, also those of nodes not shown: `--node`
    // alone still needs a measured reference to scale from.
    let all: Vec<&Node> = req.catalog.nodes.iter().collect();
    let mut aside = Remarks::default();
    let catalog_rows = rows::from_catalog(
        req,
        &all,
        run_node.as_deref(),
        if selected.len() == all.len() {
            &mut *said
        } else {
            &mut aside
        },
    );
    let mut references: Vec<&Row> = rows.iter().collect();
    references.extend(catalog_rows.iter());
    let scaled = super::scaled::scaled(req, &selected, run_node.as_deref(), &references, said);
    let shown: Vec<Row> = catalog_rows
        .into_iter()
        .filter(|r| selected.iter().any(|n| n.name == r.node))
        .collect();
    rows.extend(shown);
    rows::refuse_mixed_models(req, &rows)?;
    rows.extend(scaled);
    if rows.is_empty() && req.plan_model_name().is_none() {
        bail!(
            "nothing to plan from: no run (--results), and no throughput figure in {} for the \
             nodes asked; give --model NAME to scale a measured reference for that model to \
             them",
            req.catalog.origin
        );
    }
    if rows.is_empty() {
        bail!(
            "nothing to plan from: no run (--results), and no catalog entry in {} has a \
             throughput figure{}",
            req.catalog.origin,
            req.plan_model_name()
                .as_ref()
                .map(|m| format!(" for {m}"))
                .unwrap_or_default()
        );
    }
    Ok((rows, fit))
}

/// Refuses a deadline no node meets (or the run's node misses), with the nodes' reasons.
fn refuse_a_missed_deadline(req: &PlanRequest, nodes: &[NodePlan]) -> Result<()> {
    if let Some(d) = req.limits.deadline_s {
        let run_row_misses = req.run.is_some() && nodes[0].deadline.is_none();
        if run_row_misses || nodes.iter().all(|n| n.deadline.is_none()) {
            let why: Vec<String> = nodes
                .iter()
                .take(if run_row_misses { 1 } else { nodes.len() })
                .flat_map(|n| {
                    n.warnings
                        .iter()
                        .filter(|w| w.contains("deadline"))
                        .cloned()
                })
                .collect();
            return Err(Field::Deadline.error(format!(
                "the deadline {}: cannot be met: {}",
                super::workload::human_duration(d),
                why.join("; ")
            )));
        }
    }
    Ok(())
}

/// The cheapest mix of the plan's rows that meets the deadline at P90: each row at its P10
/// throughput (the slow end), its price and the catalog's `available` count. Rows whose P90
/// is unknown cannot promise P90 and are left out, as are rows without a price; the run's
/// row takes its catalog node's count when it is one. Exit 2 (an error) when no mix meets it.
fn cheapest(req: &PlanRequest, nodes: &[NodePlan]) -> Result<MixReport> {
    let Some(deadline_s) = req.limits.deadline_s else {
        bail!("the cheapest mix needs a deadline: the mix is the cheapest that meets it");
    };
    let mut options = Vec::new();
    let mut left_out = Vec::new();
    // Rows without a P90, grouped by why (one line per reason, not per row).
    let mut unknown: Vec<(String, Vec<String>)> = Vec::new();
    for n in nodes {
        if !n.interval.known {
            match unknown.iter_mut().find(|(why, _)| *why == n.interval.how) {
                Some((_, names)) => names.push(n.label()),
                None => unknown.push((n.interval.how.clone(), vec![n.label()])),
            }
            continue;
        }
        let Some(price) = n.usd_per_node_hour else {
            left_out.push(format!("{}: no price per node-hour", n.label()));
            continue;
        };
        if options.iter().any(|o: &NodeOption| o.name == n.node) {
            continue;
        }
        options.push(NodeOption {
            name: n.node.clone(),
            tok_per_s: n.tok_s_per_node.p10,
            usd_per_hour: price,
            available: req.catalog.node(&n.node).ok().and_then(|c| c.available),
        });
    }
    for (why, names) in unknown {
        left_out.push(format!(
            "{}: P90 unknown, so they cannot promise the deadline at P90 ({why})",
            names.join(", ")
        ));
    }
    if options.is_empty() {
        return Err(Field::CheapestMix.error(format!(
            "no row can promise the deadline at P90: {}",
            left_out.join("; ")
        )));
    }
    let tokens = req.workload.output_tokens;
    match cheapest_mix(&options, tokens, deadline_s / 3600.0)? {
        Some(answer) => Ok(MixReport {
            deadline_s,
            options,
            answer,
            left_out,
        }),
        None => {
            let most: Vec<String> = options
                .iter()
                .map(|o| match o.available {
                    Some(a) => format!(
                        "{} x {} ({:.2} days at P90 together)",
                        a,
                        o.name,
                        tokens / (f64::from(a) * o.tok_per_s) / SECONDS_PER_DAY
                    ),
                    None => format!("{} (unlimited)", o.name),
                })
                .collect();
            Err(Field::CheapestMix.error(format!(
                "no mix of the available nodes meets the deadline {} at P90; \
                 available: {}{}",
                human_duration(deadline_s),
                most.join(", "),
                if left_out.is_empty() {
                    String::new()
                } else {
                    format!("; left out: {}", left_out.join("; "))
                }
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::catalog::Catalog;
    use crate::plan::facts::Facts;
    use crate::plan::figures::Basis;
    use crate::plan::request::{Limits, RunNode};
    use crate::plan::seeds::seed_122b_curve;
    use crate::plan::workload::Workload;

    fn request<'a>(facts: &'a Facts, catalog: &'a Catalog, tokens: f64) -> PlanRequest<'a> {
        PlanRequest {
            workload: Workload {
                output_tokens: tokens,
                completions: None,
                avg_output_tokens: None,
                avg_input_tokens: None,
                output_length: None,
                input_length: None,
            },
            limits: Limits {
                deadline_s: None,
                budget_usd: None,
                max_concurrency: None,
                max_latency_s: None,
                sustained_fraction: 1.0,
                slo: Default::default(),
                cheapest_mix: false,
                nodes: None,
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
            compare_node: None,
        }
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
        req.compare_node = Some("rtxpro6000-4x-dp-mtp".to_string());
        req.only_node = None;
        let p = plan(&req).unwrap();
        let row = |name: &str| p.nodes.iter().find(|n| n.node == name).unwrap();
        let rtx4 = row("rtxpro6000-4x-dp-mtp");
        assert!((rtx4.days.p50 - 11.86).abs() < 0.01);
        assert_eq!(rtx4.deadline.as_ref().unwrap().nodes_p50, 6);
        let b200 = row("b200-7x");
        assert_eq!(b200.basis, Basis::Stated);
        // A stated range of 15,000-30,000 tok/s: P50 at its middle, its ends as P10/P90, and
        // no claim to a measured interval.
        assert!((b200.days.p50 - 0.8436).abs() < 0.001, "{:?}", b200.days);
        assert!((b200.days.p90 - 1.265).abs() < 0.001);
        assert!((b200.days.p10 - 0.633).abs() < 0.001);
        assert!(!b200.interval.known);
        assert_eq!(b200.deadline.as_ref().unwrap().nodes_p50, 1);
        let rtx8 = row("rtxpro6000-8x-dp");
        let roof = rtx8.roofline.as_ref().unwrap();
        let b1 = &roof.checks[0];
        assert!((b1.efficiency - 0.80).abs() < 0.01, "{b1:?}");
        // Scaled rows exist for the catalog's figure-less nodes, from rtxpro6000-8x-dp.
        let h200 = row("h200-8x");
        assert_eq!(h200.basis, Basis::Scaled);
        assert!((h200.tok_s_per_node.p50 - 9440.0 * 4.8 / 1.792).abs() < 1.0);
        // The 122B figure is left out: another model.
        assert!(p.nodes.iter().all(|n| n.node != "rtxpro6000-4x-tp4"));
        // The comparison is for the node named, not the first row.
        let c = p.comparison.unwrap();
        assert_eq!(c.node, "rtxpro6000-4x-dp-mtp");
        assert!((c.plan_days_p50 - 11.86).abs() < 0.01);
        // Without a node named, several rows leave the estimate's node unknown: refused.
        req.compare_node = None;
        let err = plan(&req).unwrap_err().to_string();
        assert!(err.contains("--compare-node"), "{err}");
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
        let node = catalog.node("rtxpro6000-4x-tp4").unwrap();
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
                warnings: Vec::new(),
            },
        ));
        let p = plan(&req).unwrap();
        let first = &p.nodes[0];
        assert_eq!(first.node, "rtxpro6000-4x-tp4");
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
                .filter(|n| n.node == "rtxpro6000-4x-tp4")
                .count(),
            1
        );
    }
}
