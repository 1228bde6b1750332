//! The physical sanity bound: the memory-bandwidth roofline for decode, and how many
//! concurrent sequences fit in memory.
//!
//! Decoding one step for a batch of `b` sequences reads every active weight once (shared by
//! the batch) plus each sequence's own KV cache and recurrent state:
//!
//! ```text
//! bytes per step  = W + b x S        W = active params x bytes per param
//!                                    S = KV bytes per token x context + recurrent state
//! X(b) <= b x bandwidth / (W + b x S)                (memory roofline, tok/s per replica)
//! X(b) <= FLOP/s / (2 x active params)               (compute roofline: 2 FLOPs per weight)
//! ```
//!
//! At batch 1 this is bandwidth / (W + S). The bound stays valid for mixture-of-experts
//! models, whose batched steps read *more* than the active weights (different tokens route
//! to different experts): it only gets looser. It assumes one token per sequence per step, so
//! speculative decoding (MTP, draft models) can exceed it by its accepted tokens per step.
//! The bandwidth is the datasheet peak of all GPUs of the replica (tensor parallelism splits
//! the weights, so their bandwidths add); real kernels reach about 80-92% of it. The context
//! used for S is the mean over a completion's decode: input + output / 2.
//!
//! Memory: sequences that fit = (GPU memory x 0.90 - all weights) / (KV bytes per token x
//! (input + output) + state), the 0.90 being the share of memory a serving engine typically
//! claims (vLLM's gpu_memory_utilization default); activations and CUDA graphs are ignored.

use serde::{Deserialize, Serialize};

use super::facts::{GpuFacts, ModelFacts};

/// Share of GPU memory assumed usable for weights and KV cache.
pub const MEMORY_FRACTION: f64 = 0.90;
/// Below this share of the roofline a figure is worth a look.
pub const LOW_EFFICIENCY: f64 = 0.20;

/// The roofline of one replica of a model.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Roofline {
    pub gpus_per_replica: u32,
    /// Datasheet peak bandwidth of the replica's GPUs together, bytes/s.
    pub bandwidth_bytes_s: f64,
    /// Active weight bytes read per step.
    pub weight_bytes_per_step: f64,
    /// KV cache and recurrent state bytes read per sequence per step.
    pub seq_bytes_per_step: f64,
    /// Context (tokens) that `seq_bytes_per_step` is computed for.
    pub context_tokens: f64,
    /// Dense tensor FLOP/s of the replica at the weights' precision.
    pub flops: f64,
    /// FLOPs per generated token (2 x active params).
    pub flops_per_token: f64,
}

impl Roofline {
    pub fn new(
        model: &ModelFacts,
        gpu: &GpuFacts,
        gpus_per_replica: u32,
        context_tokens: f64,
    ) -> Roofline {
        let g = gpus_per_replica.max(1) as f64;
        Roofline {
            gpus_per_replica: gpus_per_replica.max(1),
            bandwidth_bytes_s: gpu.bandwidth_bytes_s() * g,
            weight_bytes_per_step: model.active_weight_bytes(),
            seq_bytes_per_step: model.seq_bytes(context_tokens),
            context_tokens,
            flops: gpu.flops(model.bytes_per_param) * g,
            flops_per_token: 2.0 * model.active_params_b() * 1e9,
        }
    }

    /// Memory-bandwidth bound at batch `b`, tok/s per replica.
    pub fn memory_bound(&self, b: f64) -> f64 {
        b * self.bandwidth_bytes_s / (self.weight_bytes_per_step + b * self.seq_bytes_per_step)
    }

    /// Compute bound, tok/s per replica.
    pub fn compute_bound(&self) -> f64 {
        self.flops / self.flops_per_token
    }

    /// The bound at batch `b`: the lower of the memory and compute rooflines.
    pub fn bound(&self, b: f64) -> f64 {
        self.memory_bound(b.max(1.0)).min(self.compute_bound())
    }

    /// The batch-1 bound.
    pub fn batch1(&self) -> f64 {
        self.bound(1.0)
    }
}

/// How many sequences fit in one replica's memory.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MemoryFit {
    /// Usable memory of the replica, bytes (GPU memory x MEMORY_FRACTION).
    pub usable_bytes: f64,
    pub weight_bytes: f64,
    /// KV and state bytes of one sequence at its full context.
    pub bytes_per_seq: f64,
    /// Sequences that fit (0 when the weights alone do not fit).
    pub max_concurrency: u32,
}

impl MemoryFit {
    pub fn new(
        model: &ModelFacts,
        gpu: &GpuFacts,
        gpus_per_replica: u32,
        context_tokens: f64,
    ) -> MemoryFit {
        let usable = gpu.memory_bytes() * gpus_per_replica.max(1) as f64 * MEMORY_FRACTION;
        let weights = model.weight_bytes();
        let per_seq = model.seq_bytes(context_tokens).max(1.0);
        let free = usable - weights;
        let max = if free <= 0.0 {
            0
        } else {
            (free / per_seq).floor().min(u32::MAX as f64) as u32
        };
        MemoryFit {
            usable_bytes: usable,
            weight_bytes: weights,
            bytes_per_seq: per_seq,
            max_concurrency: max,
        }
    }

    pub fn weights_fit(&self) -> bool {
        self.weight_bytes < self.usable_bytes
    }
}

/// A throughput figure held against the roofline.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RooflineCheck {
    /// What was checked, e.g. "batch-1 tok/s per replica".
    pub what: String,
    pub figure: f64,
    /// The bound at the figure's batch size, tok/s per replica.
    pub bound: f64,
    /// Batch size (concurrent sequences per replica) the bound is for.
    pub batch: f64,
    /// figure / bound.
    pub efficiency: f64,
    pub verdict: Verdict,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Between 20% and 100% of the bound.
    Plausible,
    /// Above the bound: physically impossible without speculative decoding.
    AboveRoofline,
    /// Above the bound, but speculative decoding can produce several tokens per step.
    AboveRooflineSpeculative,
    /// Below 20% of the bound: a misconfiguration worth a look.
    FarBelow,
}

impl RooflineCheck {
    pub fn new(what: &str, figure: f64, bound: f64, batch: f64, speculative: bool) -> Self {
        let efficiency = figure / bound;
        let verdict = if efficiency > 1.0 {
            if speculative {
                Verdict::AboveRooflineSpeculative
            } else {
                Verdict::AboveRoofline
            }
        } else if efficiency < LOW_EFFICIENCY {
            Verdict::FarBelow
        } else {
            Verdict::Plausible
        };
        RooflineCheck {
            what: what.to_string(),
            figure,
            bound,
            batch,
            efficiency,
            verdict,
        }
    }

    /// A warning in words, or None when the figure is plausible.
    pub fn warning(&self, subject: &str) -> Option<String> {
        let head = format!(
            "{subject}: {} {:.1} tok/s is {:.0}% of the memory-bandwidth roofline ({:.1} tok/s at batch {:.0})",
            self.what,
            self.figure,
            self.efficiency * 100.0,
            self.bound,
            self.batch
        );
        match self.verdict {
            Verdict::Plausible => None,
            Verdict::AboveRoofline => Some(format!(
                "{head}: above the physical limit, so impossible as stated: a measurement or catalog error \
                 (wrong GPU, model, precision, or tokens counted twice)"
            )),
            Verdict::AboveRooflineSpeculative => Some(format!(
                "{head}: above the one-token-per-step limit; possible only through speculative decoding \
                 accepting {:.1}+ tokens per step on average: check it",
                self.efficiency
            )),
            Verdict::FarBelow => Some(format!(
                "{head}: below {:.0}% of the limit, a misconfiguration worth a look \
                 (batching off, wrong parallelism, CPU-bound client, throttling)",
                LOW_EFFICIENCY * 100.0
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::catalog::Catalog;
    use crate::plan::facts::Facts;

    #[test]
    fn dense_27b_on_one_rtx_pro_6000() {
        let f = Facts::builtin();
        let m = f.model("Qwen3.6-27B").unwrap();
        let g = f.gpu("RTX PRO 6000").unwrap();
        // The datasheet bandwidth, 1.792 TB/s, is stored (an upper bound must use the peak).
        // Weights: 27e9 x 2 bytes = 54 GB; plus the 0.151 GB recurrent state per sequence:
        // 1.792e12 / 54.151e9 = 33.09 tok/s. (With an effective ~1.6 TB/s it would be
        // 1.6e12 / 54e9 = 29.6 tok/s: the measured 26.5 is 80% of the datasheet roofline,
        // ~90% of the effective one.)
        let r = Roofline::new(m, g, 1, 0.0);
        assert_eq!(r.weight_bytes_per_step, 54e9);
        assert!((r.batch1() - 33.09).abs() < 0.05, "{}", r.batch1());
        let measured = RooflineCheck::new("batch-1 tok/s", 26.5, r.batch1(), 1.0, false);
        assert!((measured.efficiency - 0.80).abs() < 0.01);
        assert_eq!(measured.verdict, Verdict::Plausible);
        let claimed = RooflineCheck::new("batch-1 tok/s", 100.0, r.batch1(), 1.0, false);
        assert_eq!(claimed.verdict, Verdict::AboveRoofline);
        assert!(claimed.warning("x").unwrap().contains("impossible"));
        let slow = RooflineCheck::new("batch-1 tok/s", 5.0, r.batch1(), 1.0, false);
        assert_eq!(slow.verdict, Verdict::FarBelow);
    }

    #[test]
    fn batched_bound_is_weights_bound_and_grows_with_batch() {
        let f = Facts::builtin();
        let m = f.model("Llama-3.1-8B").unwrap();
        let g = f.gpu("H100").unwrap();
        let r = Roofline::new(m, g, 1, 2000.0);
        // 3.35e12 / (16.06e9 + 2000 x 131072) = 197.4 tok/s at batch 1.
        assert!((r.batch1() - 3.35e12 / (16.06e9 + 2000.0 * 131_072.0)).abs() < 1e-6);
        assert!(r.bound(64.0) > 30.0 * r.batch1());
        assert!(r.bound(64.0) < 64.0 * r.batch1());
        // Compute caps it eventually: 989e12 / (2 x 8.03e9) = 61,582 tok/s.
        assert!(r.bound(1e9) <= r.compute_bound());
    }

    #[test]
    fn memory_fit() {
        let f = Facts::builtin();
        let m = f.model("Llama-3.1-70B").unwrap();
        // 141.2 GB of weights do not fit on one 80 GB H100 ...
        let one = MemoryFit::new(m, f.gpu("H100").unwrap(), 1, 4096.0);
        assert!(!one.weights_fit());
        assert_eq!(one.max_concurrency, 0);
        // ... on 4: (4 x 80 x 0.9 - 141.2) GB / (327,680 x 4096) bytes = 109 sequences.
        let four = MemoryFit::new(m, f.gpu("H100").unwrap(), 4, 4096.0);
        assert_eq!(four.max_concurrency, 109);
    }

    #[test]
    fn catalog_claim_of_100_tok_s_at_batch_1_is_flagged() {
        let facts = Facts::builtin();
        let text = r#"
[[node]]
name = "too-good"
gpu = "RTX PRO 6000 Blackwell"
gpus_per_node = 1
model = "Qwen3.6-27B"
basis = "stated"
tok_s_per_node = 100
batch1_tok_s_per_replica = 100
source = "a slide"
"#;
        let c = Catalog::parse(text, "t.toml", &facts).unwrap();
        let node = &c.nodes[0];
        let r = Roofline::new(
            facts.model(node.model.as_deref().unwrap()).unwrap(),
            facts.gpu(&node.gpu).unwrap(),
            node.gpus_per_replica(),
            0.0,
        );
        let check = RooflineCheck::new(
            "batch-1 tok/s per replica",
            node.batch1_tok_s_per_replica.unwrap(),
            r.batch1(),
            1.0,
            node.speculative,
        );
        assert_eq!(check.verdict, Verdict::AboveRoofline);
        assert!(check.efficiency > 3.0);
    }
}
