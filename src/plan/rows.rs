//! The rows of a plan before any arithmetic on time and money: one from the run (its USL fit
//! or best measured level), one per catalog figure for the plan's model, and scaled rows for
//! catalog nodes without a figure.

use std::path::Path;

use anyhow::{bail, Result};

use super::catalog::{FigureBasis, Node};
use super::curve::{self, ConcurrencyLimits, CurveEstimate, FitReport};
use super::facts::GpuFacts;
use super::field::Field;
use super::figures::{Basis, Interval, Quantiles};
use super::prefill;
use super::request::{PlanRequest, RunNode};
use super::roofline::MemoryFit;
use super::slo::{self, SloCap, SloReport};
use crate::record::RunResult;

/// The notes and warnings of the whole plan, in the order they arise.
#[derive(Debug, Default)]
pub(super) struct Remarks {
    pub notes: Vec<String>,
    pub warnings: Vec<String>,
    /// The SLO cap and goodput, when SLOs were given with a run.
    pub slo: Option<SloReport>,
}

/// The basic facts of one row before the money and time arithmetic.
pub(super) struct Row {
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
    pub tok_s_per_node: Quantiles,
    /// What P10-P90 is made of, or that it is unknown.
    pub interval: Interval,
    pub usd_per_node_hour: Option<f64>,
    pub price_note: Option<String>,
    pub speculative: bool,
    pub batch1_tok_s_per_replica: Option<f64>,
    /// The figure is one request per replica, as measured (a batch-1 run, or a scaling of
    /// one): a floor, not the node's capacity.
    pub batch1_only: bool,
    pub notes: Vec<String>,
}

/// The run's row and its USL fit, when there is a run.
pub(super) fn from_run(
    req: &PlanRequest,
    said: &mut Remarks,
) -> Result<Option<(Row, Option<FitReport>)>> {
    let Some((run, origin, node)) = &req.run else {
        return Ok(None);
    };
    let plan_model = req.plan_model_name();
    said.warnings.extend(node.warnings.iter().cloned());
    let (_, full_context) = req.context_tokens();
    let gpu = node.gpu.as_deref().and_then(|g| req.facts.gpu(g));
    let run_model = run.environment.model.clone();
    if let (Some(pm), Some(rm)) = (&plan_model, &run_model) {
        if !req.same_model(pm, rm) {
            return Err(Field::Results.error(format!(
                "the run {origin} measured {rm} but the plan is for {pm}: one model's \
                 throughput says nothing exact about another's; plan {pm} from its own run, or \
                 without --results (catalog figures for {pm}, or scaled ones)"
            )));
        }
    }
    let memory = memory_limit(req, node, gpu, full_context)?;
    let slo_cap = if req.limits.slo.any() {
        let c = slo::cap(run, origin, &req.limits.slo)?;
        if c.concurrency < 1.0 {
            bail!(
                "the SLOs allow {:.2} concurrent requests per replica ({}): less than one; no \
                 load in the measured curve meets them",
                c.concurrency,
                c.how
            );
        }
        Some(c)
    } else {
        None
    };
    let limits = ConcurrencyLimits {
        max_concurrency: req.limits.max_concurrency,
        memory,
        max_latency_s: req.limits.max_latency_s,
        avg_output_tokens: req.workload.avg_output_tokens,
        slo: slo_cap
            .as_ref()
            .map(|c| (c.concurrency.floor() as u32, format!("SLO: {}", c.how))),
    };
    let est: CurveEstimate = curve::estimate(run, origin, &limits, req.resamples, req.seed)?;
    said.notes.extend(est.notes.iter().cloned());
    said.warnings.extend(est.warnings.iter().cloned());
    for w in per_run(&run.warnings) {
        said.notes.push(format!("{origin}: {w}"));
    }
    let replicas = node.replicas_per_node.max(1);
    let batch1_only = measured_batch1_only(run, replicas);
    if batch1_only {
        said.warnings.push(format!(
            "{origin} measured one request per replica only (batch 1): its row, {}, is the node \
             at batch 1, a floor and not the node's capacity (a server decodes many requests at \
             once); measure a concurrency sweep on it (the default profile's levels) before \
             planning a job on its figure",
            node.name
        ));
    }
    let (tok_s, prefill_how) = prompt_lengths(req, run, origin, node, &est, said);
    if let Some(cap) = slo_cap {
        said.slo = Some(slo_report(
            req,
            run,
            origin,
            cap,
            &est,
            tok_s.p50 * replicas as f64,
        ));
    }
    let row = Row {
        node: node.name.clone(),
        gpu: node.gpu.clone(),
        gpus_per_node: node.gpus_per_node,
        replicas_per_node: replicas,
        model: plan_model.or(run_model),
        basis: est.basis,
        how: format!(
            "{}; x {replicas} replica(s) per node; concurrency limited by {}{prefill_how}",
            est.how, est.limited_by
        ),
        source: format!("{origin} ({})", run.tool),
        date: Some(run.started_at.clone()),
        concurrency_per_replica: Some(est.concurrency as f64),
        tok_s_per_node: tok_s.scale(replicas as f64),
        interval: est.interval.clone(),
        usd_per_node_hour: node.usd_per_node_hour,
        price_note: node.price_note.clone(),
        speculative: run.environment.speculative == Some(true),
        batch1_tok_s_per_replica: est.batch1_tok_s,
        batch1_only,
        notes: Vec::new(),
    };
    Ok(Some((row, est.fit)))
}

/// The most sequences whose KV cache fits in one replica beside the weights (a limit only
/// where the job's output length is known); an error where the weights, or one sequence,
/// do not fit at all.
fn memory_limit(
    req: &PlanRequest,
    node: &RunNode,
    gpu: Option<&GpuFacts>,
    full_context: f64,
) -> Result<Option<u32>> {
    Ok(match (&req.model, gpu) {
        (Some(m), Some(g)) => {
            let fit = MemoryFit::new(m, g, node.gpus_per_replica(), full_context);
            if !fit.weights_fit() {
                bail!(
                    "infeasible: {} ({:.0} GB of weights at {} bytes per parameter) does not fit \
                 in one replica of {}: {} x {} = {:.0} GB usable ({:.0}% of {:.0} GB); give \
                 the replica more GPUs (--gpus-per-node, --replicas-per-node), or say the \
                 weights' format if they are quantized (--quantization int4, fp8, ...)",
                    m.name,
                    fit.weight_bytes / 1e9,
                    m.bytes_per_param,
                    node.name,
                    node.gpus_per_replica(),
                    g.name,
                    fit.usable_bytes / 1e9,
                    super::roofline::MEMORY_FRACTION * 100.0,
                    g.memory_gb * node.gpus_per_replica() as f64
                );
            }
            if fit.max_concurrency == 0 {
                bail!(
                    "infeasible: on {}, one sequence of {:.0} tokens (input + output) needs \
                 {:.1} GB of KV cache and state, but only {:.1} GB are left after {:.0} GB of \
                 weights in one replica ({} x {})",
                    node.name,
                    full_context,
                    fit.bytes_per_seq / 1e9,
                    (fit.usable_bytes - fit.weight_bytes) / 1e9,
                    fit.weight_bytes / 1e9,
                    node.gpus_per_replica(),
                    g.name
                );
            }
            req.workload
                .avg_output_tokens
                .is_some()
                .then_some(fit.max_concurrency)
        }
        _ => None,
    })
}

/// What the plan says of the SLOs: the cap they set, the concurrency planned, and the
/// goodput at the measured level at or above the planned load. `node_tok_s`: the node's P50
/// throughput, from which its requests per second follow.
fn slo_report(
    req: &PlanRequest,
    run: &RunResult,
    origin: &str,
    cap: SloCap,
    est: &CurveEstimate,
    node_tok_s: f64,
) -> SloReport {
    let endpoints = run.environment.endpoints.max(1) as u32;
    let want = est.concurrency * endpoints;
    // The measured level at or above the planned load (its goodput is a lower bound for
    // the planned one), else the largest.
    let level = run
        .levels
        .iter()
        .map(|l| l.concurrency)
        .filter(|c| *c >= want)
        .min()
        .or(run.levels.iter().map(|l| l.concurrency).max());
    let goodput = level.and_then(|l| slo::goodput(Path::new(origin), l, &req.limits.slo));
    let avg_out = req
        .workload
        .avg_output_tokens
        .or(prefill::run_lengths(run).1);
    let rps = avg_out.map(|t| node_tok_s / t);
    SloReport {
        slo: req.limits.slo,
        cap,
        planned_concurrency_per_replica: est.concurrency,
        goodput_requests_per_s_per_node: match (&goodput, rps) {
            (Some(g), Some(r)) => Some(g.share * r),
            _ => None,
        },
        goodput,
    }
}

/// The job's prompt and output lengths against the run's: a warning where they differ, and
/// the prefill a longer prompt adds (compute bound), applied to the run's throughput per
/// replica. Returns the throughput and what was done, in words.
fn prompt_lengths(
    req: &PlanRequest,
    run: &crate::record::RunResult,
    origin: &str,
    node: &super::request::RunNode,
    est: &CurveEstimate,
    said: &mut Remarks,
) -> (Quantiles, String) {
    let (run_in, run_out) = prefill::run_lengths(run);
    let job_in = req.workload.avg_input_tokens;
    let job_out = req.workload.avg_output_tokens;
    for (what, job, measured) in [("input", job_in, run_in), ("output", job_out, run_out)] {
        if let (Some(j), Some(m)) = (job, measured) {
            if prefill::differs(j, m) {
                said.warnings.push(format!(
                    "the job's {what} averages {j:.0} tokens per request but {origin} measured \
                     {m:.0}: throughput at other lengths differs (prefill, KV reads, batch \
                     slots); benchmark with the job's lengths"
                ));
            }
        }
    }
    let gpu = node.gpu.as_deref().and_then(|g| req.facts.gpu(g));
    match (job_in, run_in, job_out, &req.model, gpu) {
        (Some(j), Some(m), Some(out), Some(model), Some(g)) if j > m => {
            let extra = prefill::prefill_s(model, g, node.gpus_per_replica(), j - m);
            (
                prefill::with_extra_time(est.tok_s, extra, out),
                format!(
                    "; prefill of {:.0} more prompt tokens per request than measured: +{extra:.2} s \
                     of replica compute each (compute bound, 2 x {}B active params x tokens at \
                     an assumed {:.0}% of {}'s tensor peak; the run has one prompt length, so \
                     its TTFT cannot give the slope)",
                    j - m,
                    model.active_params_b(),
                    prefill::PREFILL_EFFICIENCY * 100.0,
                    g.name
                ),
            )
        }
        _ => (est.tok_s, String::new()),
    }
}

/// Whether every level of the run kept at most one request in flight per replica: then no
/// figure of the run says what the node does under load.
fn measured_batch1_only(run: &RunResult, replicas: u32) -> bool {
    let most = run.levels.iter().map(|l| l.concurrency).max().unwrap_or(0);
    most > 0 && most <= replicas
}

/// Notes for names written the way they were before issue 50 (node ids and seed runs that
/// said `rtx6000`): still read, and the plan says what they are now called.
pub(super) fn note_renamed(req: &PlanRequest, said: &mut Remarks) {
    let nodes = [&req.only_node, &req.compare_node];
    let notes = nodes
        .into_iter()
        .flatten()
        .filter_map(|n| super::catalog::renamed_note(n))
        .chain(
            req.run
                .as_ref()
                .and_then(|(_, origin, _)| super::seed_runs::renamed_note(origin)),
        );
    said.notes.extend(notes);
}

/// The catalog nodes the plan looks at: the `--node` one alone when there is no run, else all.
pub(super) fn selected_nodes<'a>(req: &PlanRequest<'a>) -> Result<Vec<&'a Node>> {
    Ok(match (&req.only_node, &req.run) {
        (Some(name), None) => vec![req.catalog.node(name)?],
        _ => req.catalog.nodes.iter().collect(),
    })
}

/// A row per catalog figure for the plan's model; the run's node keeps the run's figure.
pub(super) fn from_catalog(
    req: &PlanRequest,
    selected: &[&Node],
    run_node: Option<&str>,
    said: &mut Remarks,
) -> Vec<Row> {
    let plan_model = req.plan_model_name();
    let mut rows = Vec::new();
    let mut skipped_models: Vec<String> = Vec::new();
    for node in selected {
        if run_node == Some(node.name.as_str()) {
            if node.tok_s().is_some() {
                said.notes.push(format!(
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
                 P50 at its middle, P10 and P90 at its ends"
            ),
            (Basis::Stated, None) => {
                format!("stated {tok_s:.0} tok/s per node: a claim, not a measurement")
            }
            _ => format!("catalog figure, {tok_s:.0} tok/s per node"),
        };
        rows.push(Row {
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
            tok_s_per_node: Quantiles {
                p10: tok_s,
                p50: (tok_s + high) / 2.0,
                p90: high,
            },
            interval: match (basis, node.tok_s_high) {
                (Basis::Stated, Some(_)) => Interval::unknown(
                    "a claim's range, not a measured interval: P10 and P90 are the range's ends",
                ),
                (Basis::Stated, None) => {
                    Interval::unknown("a claim without a range: its uncertainty is unknown")
                }
                _ => Interval::unknown(
                    "a catalog figure without trials: its spread is unknown (put a run's \
                     results in with --results to measure it)",
                ),
            },
            usd_per_node_hour: node.usd_per_node_hour,
            price_note: node.price_note.clone(),
            speculative: node.speculative,
            batch1_tok_s_per_replica: node.batch1_tok_s_per_replica,
            batch1_only: false,
            notes: Vec::new(),
        });
    }
    if !rows.is_empty() && req.workload.avg_input_tokens.is_some_and(|i| i > 0.0) {
        said.notes.push(
            "catalog figures do not say the prompt length they were obtained with: the job's \
             prefill is not added to them"
                .to_string(),
        );
    }
    if !skipped_models.is_empty() {
        said.notes.push(format!(
            "catalog figures for other models left out: {}",
            skipped_models.join(", ")
        ));
    }
    rows
}

/// Without a model to plan for, rows for different models cannot be compared, and no node
/// can be scaled (scaling needs one model's facts): refuse, naming the models, the nodes of
/// each and the flag, rather than print a mixed table with a warning at its foot.
pub(super) fn refuse_mixed_models(req: &PlanRequest, rows: &[Row]) -> Result<()> {
    if req.plan_model_name().is_some() {
        return Ok(());
    }
    let mut models: Vec<(String, Vec<String>)> = Vec::new();
    for r in rows {
        let Some(m) = &r.model else { continue };
        match models.iter_mut().find(|(name, _)| name == m) {
            Some((_, nodes)) => nodes.push(r.node.clone()),
            None => models.push((m.clone(), vec![r.node.clone()])),
        }
    }
    if models.len() > 1 {
        let listed: Vec<String> = (models.iter())
            .map(|(m, nodes)| format!("{m} ({})", nodes.join(", ")))
            .collect();
        bail!(
            "the catalog's figures are for {} different models: {}; a plan compares one \
             model's rows: pass --model NAME (e.g. --model {}), which also scales the measured \
             figure to the catalog's other nodes",
            models.len(),
            listed.join("; "),
            models[0].0
        );
    }
    Ok(())
}

/// A run's warnings with the per-trial ones of older results files folded: lines that say
/// the same after their "C=8 trial 2: " are one line naming the trials (a plan repeated one
/// note 18 times).
fn per_run(warnings: &[String]) -> Vec<String> {
    let split = |w: &str| -> Option<(String, String)> {
        let (head, rest) = w.split_once(": ")?;
        let (level, trial) = head.split_once(" trial ")?;
        let level_ok = level.starts_with("C=") || level.starts_with("rate=");
        (level_ok && !trial.is_empty() && trial.bytes().all(|b| b.is_ascii_digit()))
            .then(|| (format!("{level} trial {trial}"), rest.to_string()))
    };
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for w in warnings {
        match split(w) {
            Some((which, rest)) => {
                match out.iter_mut().find(|(r, t)| *r == rest && !t.is_empty()) {
                    Some((_, trials)) => trials.push(which),
                    None => out.push((rest, vec![which])),
                }
            }
            None => out.push((w.clone(), Vec::new())),
        }
    }
    out.into_iter()
        .map(|(text, trials)| match trials.len() {
            0 => text,
            1 => format!("{}: {text}", trials[0]),
            n => format!("{text} ({n} trials: {})", trials.join(", ")),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::per_run;

    #[test]
    fn a_note_repeated_per_trial_is_said_once() {
        let w: Vec<String> = [
            "C=1 trial 1: input words are not tokens",
            "C=1 trial 2: input words are not tokens",
            "C=8 trial 1: input words are not tokens",
            "C=8 trial 3: chunks estimated",
            "the run was short",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(
            per_run(&w),
            vec![
                "input words are not tokens (3 trials: C=1 trial 1, C=1 trial 2, C=8 trial 1)",
                "C=8 trial 3: chunks estimated",
                "the run was short",
            ]
        );
    }
}
