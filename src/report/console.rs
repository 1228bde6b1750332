//! The console table of a run: one row per concurrency level, with the mean and spread
//! across trials (statistics are across trials, never across requests).

use crate::record::telemetry::TrialTelemetry;
use crate::record::{Arm, LevelResult, TrialResult};
use crate::stats::Spread;

/// The table header.
pub fn level_header() -> String {
    format!(
        "{:>6} | {:>22} | {:>13} | {:>10} | {:>8} | {:>7} | {:>6} | {:>6} | {:>9} | {:>9}",
        "C",
        "agg tok/s mean ± sd",
        "per-req tok/s",
        "tok/trial",
        "wall s",
        "ok",
        "failed",
        "err %",
        "TTFT p50",
        "ITL p50"
    )
}

/// The line above an arm's rows in a relative run.
pub fn arm_heading(arm: Option<Arm>) -> String {
    match arm {
        Some(Arm::Base) => "base (the target branch's server):".to_string(),
        Some(Arm::Head) => "head (this change's server):".to_string(),
        None => String::new(),
    }
}

/// One row for a level. Means are over trials; ok and failed are totals over trials.
pub fn level_row(level: &LevelResult) -> String {
    let trials = &level.trials;
    let tps: Vec<f64> = level.throughputs();
    let agg = match Spread::of(&tps) {
        Some(s) if s.n > 1 => format!("{:.1} ± {:.1} ({}x)", s.mean, s.sd, s.n),
        Some(s) => format!("{:.1} (1x)", s.mean),
        None => "no success".to_string(),
    };
    let mean = |f: &dyn Fn(&TrialResult) -> Option<f64>| level.trial_mean(f);
    let show = |v: Option<f64>, digits: usize, unit: &str| match v {
        Some(x) => format!("{x:.digits$}{unit}"),
        None => "-".to_string(),
    };
    let ok: u64 = trials.iter().map(|t| t.succeeded).sum();
    let failed: u64 = trials.iter().map(|t| t.failed_total()).sum();
    format!(
        "{:>6} | {:>22} | {:>13} | {:>10} | {:>8} | {:>7} | {:>6} | {:>6} | {:>9} | {:>9}",
        match level.rate {
            Some(r) => format!("{r}/s"),
            None => level.concurrency.to_string(),
        },
        agg,
        show(mean(&|t| t.per_request_tok_per_s), 1, ""),
        show(mean(&|t| Some(t.output_tokens as f64)), 0, ""),
        show(mean(&|t| Some(t.window_s)), 2, ""),
        ok,
        failed,
        format!("{:.1}", level.error_rate() * 100.0),
        show(mean(&|t| t.ttft_ms.as_ref().map(|p| p.p50)), 1, "ms"),
        show(mean(&|t| t.itl_ms.as_ref().map(|p| p.p50)), 2, "ms"),
    )
}

/// What the server's own metrics said at a level (saturation, token cross-check), indented
/// under its row; None when no telemetry was collected.
pub fn server_note(level: &LevelResult) -> Option<String> {
    level_note(&level.trials).map(|n| format!("{:>6}   {n}", ""))
}

/// One line on what the server's metrics said at a level, for the console.
fn level_note(trials: &[TrialResult]) -> Option<String> {
    let tele: Vec<&TrialTelemetry> = trials.iter().filter_map(|t| t.telemetry.as_ref()).collect();
    if tele.is_empty() {
        return None;
    }
    let mut reasons: Vec<String> = Vec::new();
    for t in &tele {
        for r in &t.saturation {
            let kind = r.split(" (").next().unwrap_or(r);
            if !reasons.iter().any(|x| x.starts_with(kind)) {
                reasons.push(r.clone());
            }
        }
    }
    let d: Vec<f64> = tele.iter().filter_map(|t| t.disagreement).collect();
    let check = if d.is_empty() {
        "no token cross-check (too few scrapes)".to_string()
    } else {
        let worst = d
            .iter()
            .fold(0.0f64, |m, v| if v.abs() > m.abs() { *v } else { m });
        format!(
            "client vs server tokens {:+.2}% (worst trial)",
            worst * 100.0
        )
    };
    let state = if reasons.is_empty() {
        "not saturated".to_string()
    } else {
        format!("saturated: {}", reasons.join(", "))
    };
    Some(format!("server: {state}; {check}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::fake::trial;

    #[test]
    fn row_shows_mean_spread_and_totals() {
        let level = LevelResult {
            concurrency: 16,
            rate: None,
            trials: vec![trial(1, 100.0), trial(2, 110.0)],
        };
        let row = level_row(&level);
        assert!(row.contains("105.0 ± 7.1 (2x)"), "{row}");
        assert!(row.contains("     20 |"), "{row}");
        assert_eq!(row.len(), level_header().len());
    }
}
