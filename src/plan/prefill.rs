//! Prompt length: what a run benchmarked against what the job asks, and the prefill time a
//! longer prompt adds. A run measured with one prompt length cannot give TTFT's slope against
//! input length, so the extra prefill comes from the compute bound: 2 x active parameters
//! FLOPs per prompt token at [`PREFILL_EFFICIENCY`] of the replica's dense tensor peak
//! (attention's quadratic term is left out, so long prompts cost at least this).

use crate::record::RunResult;

use super::facts::{GpuFacts, ModelFacts};
use super::figures::Quantiles;

/// Share of the datasheet tensor peak prefill is assumed to reach: an assumption, not a
/// measurement, and the plan says so wherever it is used.
pub const PREFILL_EFFICIENCY: f64 = 0.5;

/// Lengths differing by more than this share from what was benchmarked are worth a warning.
pub const LENGTH_TOLERANCE: f64 = 0.25;

/// Mean input and output tokens per successful request over the whole run.
pub fn run_lengths(run: &RunResult) -> (Option<f64>, Option<f64>) {
    let trials = run.levels.iter().flat_map(|l| &l.trials);
    let (mut ok, mut input, mut output) = (0u64, 0u64, 0u64);
    for t in trials {
        ok += t.succeeded;
        input += t.input_tokens;
        output += t.output_tokens;
    }
    if ok == 0 {
        return (None, None);
    }
    let per = |x: u64| (x > 0).then(|| x as f64 / ok as f64);
    (per(input), per(output))
}

/// Seconds of one replica's compute to prefill `tokens` prompt tokens (compute bound at
/// [`PREFILL_EFFICIENCY`] of the peak).
pub fn prefill_s(model: &ModelFacts, gpu: &GpuFacts, gpus_per_replica: u32, tokens: f64) -> f64 {
    let flops = gpu.flops(model.bytes_per_param) * gpus_per_replica.max(1) as f64;
    2.0 * model.active_params_b() * 1e9 * tokens / (flops * PREFILL_EFFICIENCY)
}

/// Output throughput once every request costs `extra_s` more replica time: a request of
/// `avg_out` tokens took avg_out / x seconds of the replica, now avg_out / x + extra_s.
pub fn with_extra_time(tok_s: Quantiles, extra_s: f64, avg_out: f64) -> Quantiles {
    let one = |x: f64| avg_out / (avg_out / x + extra_s);
    Quantiles {
        p10: one(tok_s.p10),
        p50: one(tok_s.p50),
        p90: one(tok_s.p90),
    }
}

/// True when `job` differs from `measured` by more than [`LENGTH_TOLERANCE`].
pub fn differs(job: f64, measured: f64) -> bool {
    (job - measured).abs() > LENGTH_TOLERANCE * measured.max(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::facts::Facts;

    #[test]
    fn prefill_is_the_compute_bound() {
        let f = Facts::builtin();
        let m = f.model("Qwen3.6-27B").unwrap();
        let g = f.gpu("H100").unwrap();
        // 2 x 27e9 x 100,000 FLOPs / (989e12 x 0.5) = 10.92 s.
        let s = prefill_s(m, g, 1, 100_000.0);
        assert!((s - 2.0 * 27e9 * 1e5 / (989e12 * 0.5)).abs() < 1e-9, "{s}");
        assert!((s - 10.92).abs() < 0.01, "{s}");
        // 1,818 tokens at 400 tok/s take 4.545 s; with 10.92 s more, 115.5 tok/s.
        let x = with_extra_time(Quantiles::single(400.0), s, 1818.0);
        assert!((x.p50 - 1818.0 / (1818.0 / 400.0 + s)).abs() < 1e-9);
        assert!(x.p50 < 120.0 && x.p50 > 110.0, "{x:?}");
    }
}
