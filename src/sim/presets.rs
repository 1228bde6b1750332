//! Named configurations, calibrated against measurements users reported (see the
//! calibration tests in `replay.rs`, which hold each preset to its figures).

use super::config::SimConfig;

const NAMES: &[&str] = &[
    "fast",
    "fixed",
    "instant",
    "rtxpro6000x4-qwen122b",
    "rtxpro6000-27b",
];

fn base(preset: &str, model: &str) -> SimConfig {
    SimConfig {
        preset: preset.to_string(),
        model: model.to_string(),
        max_running: 256,
        lambda: 1000.0,
        sigma: 0.0,
        kappa: 0.0,
        tokens_per_step_mean: 1.0,
        mtp_max: 1,
        prefill_s_per_token: 0.0,
        token_delay_ms: None,
        natural_len_mean: 64.0,
        natural_len_sigma: 0.5,
        default_max_tokens: 2048,
        slowdown: 1.0,
        session_jitter: 0.0,
        seed: 0,
        record_send_times: false,
        tokenizer: None,
        prefix_cache: false,
        template_tokens: 0,
        kv_cache_tokens: None,
        engine_version: None,
    }
}

impl SimConfig {
    /// The preset called `name`, or `None` when there is no such preset.
    pub fn preset(name: &str) -> Option<SimConfig> {
        let cfg = match name {
            // Quick demos and tests: ~2 ms steps at batch 1, ~5 ms at batch 64.
            "fast" => SimConfig {
                max_running: 64,
                lambda: 500.0,
                sigma: 0.02,
                kappa: 1e-4,
                prefill_s_per_token: 1e-6,
                natural_len_mean: 48.0,
                ..base(name, "sim-model")
            },
            // Measurement truth: every step lasts exactly 20 ms, whatever the batch.
            "fixed" => SimConfig {
                token_delay_ms: Some(20.0),
                max_running: 1024,
                ..base(name, "sim-model")
            },
            // No engine delay: benchmarks the client, not the server.
            "instant" => SimConfig {
                token_delay_ms: Some(0.0),
                max_running: 1024,
                ..base(name, "sim-model")
            },
            // Qwen3.5-122B-A10B BF16, 4x RTX PRO 6000, SGLang TP4 with MTP, 48 slots.
            // Measured closed loop (1000 in / 1000 out, ignore_eos): 121.6, 399.1, 1213.5,
            // 1515.1, 1582.5 tok/s at C = 1, 4, 16, 32, 64. Fitted through the replay, with
            // prefill (~17k tok/s) and the 48-slot cap in the loop, not to the bare USL.
            "rtxpro6000x4-qwen122b" => SimConfig {
                max_running: 48,
                lambda: 117.0,
                sigma: 0.026,
                kappa: 3.6e-4,
                tokens_per_step_mean: 2.0,
                mtp_max: 3,
                prefill_s_per_token: 6e-5,
                natural_len_mean: 800.0,
                ..base(name, "Qwen/Qwen3.5-122B-A10B")
            },
            // Qwen3.6-27B on one RTX PRO 6000, SGLang, 37 slots: 26.5 tok/s for one
            // request, ~1180 tok/s aggregate at saturation. Per-request speed *rises*
            // under load between those two figures, which the USL expresses with a
            // slightly negative sigma (Gunther's superlinear regime).
            "rtxpro6000-27b" => SimConfig {
                max_running: 37,
                lambda: 26.5,
                sigma: -0.013,
                kappa: 2.1e-4,
                prefill_s_per_token: 2e-4,
                natural_len_mean: 1100.0,
                ..base(name, "Qwen/Qwen3.6-27B")
            },
            _ => return None,
        };
        Some(cfg)
    }

    /// Names accepted by [`SimConfig::preset`], for `--help` and error messages.
    pub fn preset_names() -> &'static [&'static str] {
        NAMES
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_preset_exists_and_validates() {
        for name in SimConfig::preset_names() {
            let cfg = SimConfig::preset(name).expect(name);
            cfg.validate().unwrap();
            assert_eq!(cfg.preset, *name);
        }
        assert!(SimConfig::preset("nope").is_none());
    }
}
