//! The simulator's configuration and its validation.

use anyhow::{bail, Result};

/// Everything that shapes one simulated engine. Rates are in tokens per second of real
/// (wall-clock) time: there is deliberately no time-scale knob, so a figure the simulator
/// produces is the figure a client measures.
#[derive(Debug, Clone, PartialEq)]
pub struct SimConfig {
    /// Preset this configuration came from (reported in `/metrics` `throughline_sim_info`).
    pub preset: String,
    /// Model id served by `/v1/models` and echoed in responses.
    pub model: String,
    /// Most requests decoded at once; the rest wait FIFO.
    pub max_running: usize,
    /// USL lambda: decode tokens/s of one request running alone.
    pub lambda: f64,
    /// USL contention coefficient.
    pub sigma: f64,
    /// USL coherency coefficient.
    pub kappa: f64,
    /// Mean tokens a request gains per decode step (above 1 only with MTP).
    pub tokens_per_step_mean: f64,
    /// Most tokens a request gains per step (speculative decoding); 1 disables MTP.
    pub mtp_max: u32,
    /// Seconds each prompt token adds to the step in which its request is admitted.
    pub prefill_s_per_token: f64,
    /// Fixed cadence: every step lasts exactly this long whatever the batch, prefill ignored
    /// (0 = no delay at all, for benchmarking the client).
    pub token_delay_ms: Option<f64>,
    /// Mean natural output length (lognormal) of requests that do not set `ignore_eos`.
    pub natural_len_mean: f64,
    /// Shape (sigma of the underlying normal) of the natural-length lognormal.
    pub natural_len_sigma: f64,
    /// `max_tokens` used when a request sets none.
    pub default_max_tokens: u32,
    /// Multiplies every step's duration: 1.10 makes the server 10% slower (fakes a regression).
    pub slowdown: f64,
    /// Seed of all random draws; each replica derives its own from it.
    pub seed: u64,
    /// Keep the time each streamed content chunk was handed to the connection, per request
    /// that names a `user`, and serve them at `GET /sim/send-times`: `selfbench` pairs them
    /// with the client's arrival times to separate the client's timing error from the
    /// simulator's own lateness.
    pub record_send_times: bool,
}

impl SimConfig {
    /// USL denominator `1 + sigma (b-1) + kappa b (b-1)` for a running batch of `b`.
    pub fn usl_denominator(&self, b: usize) -> f64 {
        let b = b as f64;
        1.0 + self.sigma * (b - 1.0) + self.kappa * b * (b - 1.0)
    }

    /// Steady-state aggregate decode tokens/s at batch `b` (prefill excluded): the USL curve.
    pub fn usl_throughput(&self, b: usize) -> f64 {
        self.lambda * b as f64 / self.usl_denominator(b)
    }

    /// Rejects configurations that would divide by zero, loop forever or panic later.
    pub fn validate(&self) -> Result<()> {
        let finite_pos = |v: f64| v.is_finite() && v > 0.0;
        if self.max_running == 0 {
            bail!("max_running must be at least 1");
        }
        if !finite_pos(self.slowdown) {
            bail!("slowdown must be a positive number, got {}", self.slowdown);
        }
        if self.mtp_max == 0 {
            bail!("mtp_max must be at least 1");
        }
        if !(self.tokens_per_step_mean >= 1.0 && self.tokens_per_step_mean <= self.mtp_max as f64) {
            bail!(
                "tokens_per_step_mean must lie in [1, mtp_max = {}], got {}",
                self.mtp_max,
                self.tokens_per_step_mean
            );
        }
        if !(self.prefill_s_per_token.is_finite() && self.prefill_s_per_token >= 0.0) {
            bail!("prefill_s_per_token must be >= 0");
        }
        let len_ok = finite_pos(self.natural_len_mean)
            && self.natural_len_sigma.is_finite()
            && self.natural_len_sigma >= 0.0;
        if !len_ok {
            bail!("natural length mean must be > 0 and its sigma >= 0");
        }
        if self.default_max_tokens == 0 {
            bail!("default_max_tokens must be at least 1");
        }
        match self.token_delay_ms {
            Some(d) if !(d.is_finite() && d >= 0.0) => {
                bail!("token delay must be >= 0 ms, got {d}")
            }
            Some(_) => {}
            None => {
                if !finite_pos(self.lambda) {
                    bail!("lambda must be a positive number, got {}", self.lambda);
                }
                if !self.sigma.is_finite() || !self.kappa.is_finite() || self.kappa < 0.0 {
                    bail!("sigma must be finite and kappa >= 0");
                }
                if let Some(b) = (1..=self.max_running).find(|&b| self.usl_denominator(b) <= 0.0) {
                    bail!("USL denominator is not positive at batch {b}: check sigma/kappa");
                }
            }
        }
        Ok(())
    }
}
