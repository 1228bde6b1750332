//! Scaled rows: catalog nodes without a throughput figure, projected from a measured
//! reference for the plan's model (the run's row when there is one), at the roofline where
//! the reference's batch is known, else by memory bandwidth, capped by what memory holds.
//! Apart from rows.rs so that each file has one job (and stays under the layout's cap).

use super::catalog::Node;
use super::facts::{GpuFacts, ModelFacts};
use super::figures::{Basis, Interval, Quantiles};
use super::request::PlanRequest;
use super::roofline::{MemoryFit, Roofline};
use super::rows::{Remarks, Row};

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
            // Scaled from a batch-1 figure, it is one too.
            batch1_only: self.row.is_some_and(|r| r.batch1_only),
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
