//! `[gate]`: the regression gate's settings (not part of the profile hash).

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};

/// Settings of the regression gate (they do not change what is measured, so they are not
/// part of the profile hash).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct GateSettings {
    /// Family-wise significance level, Holm-corrected across gated levels.
    #[serde(default = "default_alpha")]
    pub alpha: f64,
    /// The smallest relative drop in throughput that may fail the gate (0.03 = 3%).
    #[serde(default = "default_min_effect")]
    pub min_effect: f64,
    /// Trials needed on each side before a level may fail.
    #[serde(default = "default_min_trials")]
    pub min_trials: u32,
    /// "Pass" rules out, at every level, a drop larger than `tolerance` with this one-sided
    /// confidence (0.95; no multiplicity correction: every level must pass on its own).
    #[serde(default = "default_pass_confidence")]
    pub pass_confidence: f64,
    /// The drop a pass rules out (0.05 = 5%). `min_effect` stays the fail threshold.
    #[serde(default = "default_tolerance")]
    pub tolerance: f64,
    /// A drop beyond this (0.25 = 25%) fails even when the data cannot estimate the
    /// between-session variation (a baseline of one or two sessions): no plausible restart
    /// or neighbour moves a server that far.
    #[serde(default = "default_guard")]
    pub guard: f64,
    /// Fail (exit 3) when the data cannot tell whether the change regressed, instead of
    /// passing loudly (exit 0).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fail_on_inconclusive: bool,
    /// `baseline bless --append` keeps the newest this many sessions (a rolling window of
    /// main's history).
    #[serde(default = "default_max_sessions")]
    pub max_sessions: u32,
    /// Latency gates, off unless set: the relative rise of a per-trial p99 that may fail,
    /// e.g. `ttft_p99 = 0.10` (10%). Same test as throughput, "higher is worse".
    #[serde(default, skip_serializing_if = "LatencyGates::is_empty")]
    pub latency: LatencyGates,
    /// Use A/A calibration rows that another runner (label or host) measured: off by default,
    /// since another machine's slots and starts are not this one's (issue 48).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub calibration_from_any_runner: bool,
}

/// Latency gates (see `GateSettings::latency`): each the smallest rise that may fail.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LatencyGates {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_p99: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub itl_p99: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub e2e_p99: Option<f64>,
}

impl LatencyGates {
    pub fn is_empty(&self) -> bool {
        self.ttft_p99.is_none() && self.itl_p99.is_none() && self.e2e_p99.is_none()
    }
}

impl GateSettings {
    /// These settings with any value given on the command line put in its place, checked
    /// like the profile's (errors name the flag).
    pub fn overridden(
        &self,
        alpha: Option<f64>,
        min_effect: Option<f64>,
        min_trials: Option<u32>,
        tolerance: Option<f64>,
    ) -> Result<GateSettings> {
        if let Some(a) = alpha.filter(|a| !(*a > 0.0 && *a < 0.5)) {
            bail!("--alpha: {a} is outside (0, 0.5)");
        }
        if let Some(e) = min_effect.filter(|e| !(0.0..1.0).contains(e)) {
            bail!("--min-effect: {e} is outside [0, 1) (0.03 means 3%)");
        }
        if let Some(n) = min_trials.filter(|n| *n < 2) {
            bail!("--min-trials: {n} is below 2 (a variance needs two trials)");
        }
        if let Some(t) = tolerance.filter(|t| !(*t > 0.0 && *t < 1.0)) {
            bail!("--tolerance: {t} is outside (0, 1) (0.05 means 5%)");
        }
        let settings = GateSettings {
            alpha: alpha.unwrap_or(self.alpha),
            min_effect: min_effect.unwrap_or(self.min_effect),
            min_trials: min_trials.unwrap_or(self.min_trials),
            tolerance: tolerance.unwrap_or(self.tolerance),
            ..self.clone()
        };
        settings.validate()?;
        Ok(settings)
    }

    /// Checks every setting; errors name the field (`gate.alpha`) and the allowed range. A
    /// NaN alpha or a min_effect of 2 would make the gate pass anything.
    pub fn validate(&self) -> Result<()> {
        let within = |name: &str, v: f64, lo: f64, hi: f64, lo_open: bool| -> Result<()> {
            let ok = v.is_finite() && (if lo_open { v > lo } else { v >= lo }) && v < hi;
            if !ok {
                let open = if lo_open { "(" } else { "[" };
                bail!("field `gate.{name}`: {v} is outside {open}{lo}, {hi})");
            }
            Ok(())
        };
        within("alpha", self.alpha, 0.0, 0.5, true)?;
        within("min_effect", self.min_effect, 0.0, 1.0, false)?;
        within("guard", self.guard, self.min_effect, 1.0, true)?;
        within("pass_confidence", self.pass_confidence, 0.5, 1.0, false)?;
        within("tolerance", self.tolerance, 0.0, 1.0, true)?;
        if self.min_trials < 2 {
            bail!("field `gate.min_trials`: must be at least 2 (a variance needs two trials)");
        }
        if self.max_sessions < 1 {
            bail!("field `gate.max_sessions`: 0 keeps no session");
        }
        for (name, v) in [
            ("latency.ttft_p99", self.latency.ttft_p99),
            ("latency.itl_p99", self.latency.itl_p99),
            ("latency.e2e_p99", self.latency.e2e_p99),
        ] {
            if let Some(v) = v {
                within(name, v, 0.0, 10.0, true)?;
            }
        }
        Ok(())
    }
}

impl Default for GateSettings {
    fn default() -> Self {
        GateSettings {
            alpha: default_alpha(),
            min_effect: default_min_effect(),
            min_trials: default_min_trials(),
            pass_confidence: default_pass_confidence(),
            tolerance: default_tolerance(),
            guard: default_guard(),
            fail_on_inconclusive: false,
            max_sessions: default_max_sessions(),
            latency: LatencyGates::default(),
            calibration_from_any_runner: false,
        }
    }
}

fn default_guard() -> f64 {
    0.25
}
fn default_max_sessions() -> u32 {
    20
}

fn default_alpha() -> f64 {
    0.01
}
fn default_min_effect() -> f64 {
    0.03
}
fn default_pass_confidence() -> f64 {
    0.95
}
fn default_tolerance() -> f64 {
    0.05
}
fn default_min_trials() -> u32 {
    5
}
