//! The rows of a plan before any arithmetic on time and money: one from the run (its USL fit
//! or best measured level), one per catalog figure for the plan's model, and scaled rows for
//! catalog nodes without a figure.

use std::path::Path;

use anyhow::{bail, Result};

use super::catalog::{FigureBasis, Node};
use super::curve::{self, ConcurrencyLimits, CurveEstimate, FitReport};
use super::facts::{GpuFacts, ModelFacts};
use super::figures::{Basis, Interval, Quantiles};
use super::prefill;
use super::request::{PlanRequest, RunNode};
use super::roofline::{MemoryFit, Roofline};
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
            bail!(
                "--results {origin} measured {rm} but the plan is for {pm}: one model's \
                 throughput says nothing exact about another's; plan {pm} from its own run, or \
                 without --results (catalog figures for {pm}, or scaled ones)"
            );
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

/// The measured row scaled rows are scaled from, and the job's context lengths.
struct ScaleFrom<'a> {
    row: Option<&'a Row>,
    name: &'a str,
    facts: &'a GpuFacts,
    /// Its throughput per GPU.
    per_gpu: Quantiles,
    plan_model: Option<String>,
    mean_ctx: f64,
    full_ctx: f64,
}

/// Scaled rows: catalog nodes without a figure, from the first measured reference for the
/// plan's model (the run's row when there is one), by memory bandwidth per GPU.
pub(super) fn scaled(
    req: &PlanRequest,
    selected: &[&Node],
    run_node: Option<&str>,
    rows: &[&Row],
    said: &mut Remarks,
) -> Vec<Row> {
    let mut scaled = Vec::new();
    let plan_model = req.plan_model_name();
    let reference_row = rows
        .iter()
        .find(|r| r.basis.is_measured() && r.gpu.is_some());
    let reference = reference_row.map(|r| {
        (
            r.node.clone(),
            r.gpu.clone().unwrap_or_default(),
            r.tok_s_per_node.scale(1.0 / r.gpus_per_node as f64),
        )
    });
    let (Some((ref_name, ref_gpu, per_gpu)), Some(_)) = (&reference, &plan_model) else {
        return scaled;
    };
    let ref_facts = req.facts.gpu(ref_gpu);
    // With the reference's batch known, scale at the roofline: the same share of the bound,
    // at the batch each node holds (the reference's, or fewer where memory says so).
    let (mean_ctx, full_ctx) = req.context_tokens();
    let ref_share = match (reference_row, &req.model, ref_facts) {
        (Some(r), Some(m), Some(g)) => r.concurrency_per_replica.map(|b| {
            let gpr = (r.gpus_per_node / r.replicas_per_node.max(1)).max(1);
            let per_replica = r.tok_s_per_node.p50 / r.replicas_per_node.max(1) as f64;
            (b, per_replica / Roofline::new(m, g, gpr, mean_ctx).bound(b))
        }),
        _ => None,
    };
    for node in selected {
        if node.tok_s().is_some() || run_node == Some(node.name.as_str()) {
            continue;
        }
        let (Some(rf), Some(tf)) = (ref_facts, req.facts.gpu(&node.gpu)) else {
            continue;
        };
        let from = ScaleFrom {
            row: reference_row.copied(),
            name: ref_name,
            facts: rf,
            per_gpu: *per_gpu,
            plan_model: plan_model.clone(),
            mean_ctx,
            full_ctx,
        };
        let mut row_notes = Vec::new();
        let Some(replicas) = replicas_for(req, node, tf, &mut row_notes, said) else {
            continue;
        };
        scaled.push(match (ref_share, &req.model) {
            (Some(at), Some(m)) => from.at_roofline(node, tf, m, replicas, at, row_notes),
            _ => from.by_bandwidth(req, node, tf, replicas, row_notes),
        });
    }
    scaled
}

/// The replicas a node is planned with: its own, or fewer where the model does not fit one
/// replica's GPUs (said in `notes`); None (said in the plan's notes) where it fits nowhere.
fn replicas_for(
    req: &PlanRequest,
    node: &Node,
    tf: &GpuFacts,
    notes: &mut Vec<String>,
    said: &mut Remarks,
) -> Option<u32> {
    let mut replicas = node.replicas_per_node;
    if let Some(m) = &req.model {
        match replicas_that_fit(m, tf, node.gpus_per_node, replicas) {
            Some(r) if r != replicas => {
                notes.push(format!(
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
                said.notes.push(format!(
                    "{}: {} ({:.0} GB of weights) does not fit in {} x {}: not projected",
                    node.name,
                    m.name,
                    m.weight_bytes() / 1e9,
                    node.gpus_per_node,
                    tf.name
                ));
                return None;
            }
        }
    }
    Some(replicas)
}

impl ScaleFrom<'_> {
    /// A node scaled at the roofline: the reference's share of its bound at its batch
    /// (`at`: batch and share), applied to this node's bound at the batch it holds.
    fn at_roofline(
        &self,
        node: &Node,
        tf: &GpuFacts,
        m: &ModelFacts,
        replicas: u32,
        (ref_batch, share): (f64, f64),
        notes: Vec<String>,
    ) -> Row {
        let ref_name = self.name;
        let gpr = node.gpus_per_node / replicas;
        let holds = MemoryFit::new(m, tf, gpr, self.full_ctx).max_concurrency;
        let batch = ref_batch.min(holds as f64).max(1.0);
        let per_replica = share * Roofline::new(m, tf, gpr, self.mean_ctx).bound(batch);
        let how = format!(
            "scaled from {ref_name} at the roofline: its {:.0}% of the memory-bandwidth \
             bound at batch {ref_batch:.0}, applied to this node's bound at batch \
             {batch:.0}{} ({} GPU(s) of {} per replica, x {replicas} replicas); assumes \
             the same share of the bound, ignores interconnect and compute differences",
            share * 100.0,
            if batch < ref_batch {
                format!(" (the {holds} sequences its memory holds at the job's context)")
            } else {
                String::new()
            },
            gpr,
            tf.name
        );
        self.scaled_row(
            node,
            replicas,
            how,
            (Some(batch), per_replica * replicas as f64),
            "at the roofline",
            notes,
        )
    }

    /// A node scaled by memory bandwidth per GPU, capped where its memory holds fewer
    /// sequences than the reference's.
    fn by_bandwidth(
        &self,
        req: &PlanRequest,
        node: &Node,
        tf: &GpuFacts,
        replicas: u32,
        mut notes: Vec<String>,
    ) -> Row {
        let ref_name = self.name;
        let ratio = tf.bandwidth_tb_s / self.facts.bandwidth_tb_s;
        let mut tok_s = self.per_gpu.p50 * ratio * node.gpus_per_node as f64;
        let mut concurrency = None;
        let mut how = format!(
            "scaled from {ref_name}: {:.0} tok/s per GPU x bandwidth ratio {:.2} ({} {} TB/s / \
             {} {} TB/s) x {} GPUs; assumes the same efficiency per GPU, ignores interconnect \
             and compute differences",
            self.per_gpu.p50,
            ratio,
            tf.name,
            tf.bandwidth_tb_s,
            self.facts.name,
            self.facts.bandwidth_tb_s,
            node.gpus_per_node
        );
        if let Some(cap) = memory_cap(
            req,
            self.row.as_ref(),
            self.facts,
            tf,
            node.gpus_per_node / replicas,
        ) {
            if cap.per_replica * (replicas as f64) < tok_s {
                tok_s = cap.per_replica * replicas as f64;
                concurrency = Some(cap.holds as f64);
                how = format!(
                    "{how}; capped by memory: {} sequences fit per replica here against {} on \
                     {ref_name}, so this node gets the reference's share of its bound ({:.0}% at \
                     its {} sequences) of its own bound at batch {}",
                    cap.holds,
                    cap.ref_holds,
                    cap.share * 100.0,
                    cap.ref_holds,
                    cap.holds
                );
                notes.push(format!(
                    "capped at the {} sequences its memory holds per replica ({} on {ref_name}, \
                     whose throughput was scaled): the bandwidth ratio alone would claim {:.0} \
                     tok/s per node",
                    cap.holds,
                    cap.ref_holds,
                    self.per_gpu.p50 * ratio * node.gpus_per_node as f64
                ));
            }
        }
        self.scaled_row(
            node,
            replicas,
            how,
            (concurrency, tok_s),
            "by memory bandwidth",
            notes,
        )
    }

    /// A row scaled from the reference by `method` ("at the roofline"): no interval, since
    /// the error of scaling across hardware has not been measured.
    fn scaled_row(
        &self,
        node: &Node,
        replicas: u32,
        how: String,
        (concurrency_per_replica, tok_s): (Option<f64>, f64),
        method: &str,
        notes: Vec<String>,
    ) -> Row {
        Row {
            node: node.name.clone(),
            gpu: Some(node.gpu.clone()),
            gpus_per_node: node.gpus_per_node,
            replicas_per_node: replicas,
            model: self.plan_model.clone(),
            basis: Basis::Scaled,
            how,
            source: node.source.clone(),
            date: None,
            concurrency_per_replica,
            tok_s_per_node: Quantiles::single(tok_s),
            interval: Interval::unknown(format!(
                "scaled across hardware {method}: the error of this scaling has not been \
                 measured, so no interval is given (measure the node to get one)"
            )),
            usd_per_node_hour: node.usd_per_node_hour,
            price_note: node.price_note.clone(),
            speculative: false,
            batch1_tok_s_per_replica: None,
            notes,
        }
    }
}

/// A scaled node that holds fewer sequences per replica than the reference: the most its
/// memory lets it deliver at the reference's efficiency.
struct MemoryCap {
    /// Sequences that fit per replica here and on the reference (at the job's full context).
    holds: u32,
    ref_holds: u32,
    /// The reference's tok/s per replica over its bound at `ref_holds` (a lower bound on its
    /// efficiency, its batch being unknown).
    share: f64,
    /// `share` x this node's bound at `holds`.
    per_replica: f64,
}

/// The memory cap of a node scaled by the bandwidth ratio from `reference` (whose batch is
/// unknown: at most what its memory holds). None when the model, the reference or its
/// memory is unknown, or when this node holds at least as many sequences.
fn memory_cap(
    req: &PlanRequest,
    reference: Option<&&Row>,
    rf: &GpuFacts,
    tf: &GpuFacts,
    gpus_per_replica: u32,
) -> Option<MemoryCap> {
    let (m, r) = (req.model.as_ref()?, reference?);
    let (mean_ctx, full_ctx) = req.context_tokens();
    let ref_gpr = (r.gpus_per_node / r.replicas_per_node.max(1)).max(1);
    let ref_holds = MemoryFit::new(m, rf, ref_gpr, full_ctx).max_concurrency;
    let holds = MemoryFit::new(m, tf, gpus_per_replica.max(1), full_ctx).max_concurrency;
    if holds == 0 || ref_holds == 0 || holds >= ref_holds {
        return None;
    }
    let ref_per_replica = r.tok_s_per_node.p50 / r.replicas_per_node.max(1) as f64;
    let share = ref_per_replica / Roofline::new(m, rf, ref_gpr, mean_ctx).bound(ref_holds as f64);
    let per_replica =
        share * Roofline::new(m, tf, gpus_per_replica.max(1), mean_ctx).bound(holds as f64);
    (share.is_finite() && per_replica.is_finite()).then_some(MemoryCap {
        holds,
        ref_holds,
        share,
        per_replica,
    })
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
