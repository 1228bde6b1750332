//! Throughput from a run result: fit the USL to one point per trial, choose the concurrency
//! that maximizes throughput within the limits (memory, `--max-concurrency`, latency by
//! Little's law), and carry the trial-to-trial and fit uncertainty into a seeded bootstrap.

use anyhow::Result;

use crate::plan::field::Field;
use crate::record::analysis::{
    failed_levels, fit_points, scaling_of, wave_factor, Scaling, MIN_R_SQUARED,
};
use crate::record::checks::level_problems;
use crate::record::RunResult;
use crate::stats::{is_positive, mean, UslFit};

mod choose;
mod types;

use choose::Frame;
pub use types::{little_latency_s, ConcurrencyLimits, CurveEstimate, FitReport};

/// Refuses a results file a plan must not be made from: an open-loop run, an unfinished
/// one, or one with a trial whose throughput is negative or not a number.
fn refuse_bad_run(run: &RunResult, origin: &str) -> Result<()> {
    if run.levels.iter().any(|l| l.rate.is_some()) {
        return Err(Field::Results.error(format!(
            "the run {origin} is an open-loop run (levels are request rates): a plan needs \
             throughput against concurrency; measure a closed-loop sweep (`concurrency = [...]`)"
        )));
    }
    if !run.complete {
        return Err(Field::Results.error(format!(
            "the run {origin} is not complete (`complete: false`: the run was stopped before \
             every level ran): plan from a finished run"
        )));
    }
    for l in &run.levels {
        for t in &l.trials {
            if t.measured() && !is_positive(t.output_tok_per_s) {
                return Err(Field::Results.error(format!(
                    "the run {origin}: level {} trial {}: output_tok_per_s is {} with {} \
                     successful request(s); a throughput must be a positive number (the file \
                     is damaged or hand-edited)",
                    l.concurrency, t.trial, t.output_tok_per_s, t.succeeded
                )));
            }
        }
    }
    Ok(())
}

/// Chooses the concurrency and the throughput there.
///
/// Where the chosen concurrency was measured, the figure is the measurement (the fit only
/// interpolates between levels); the fit is used at a concurrency between measured levels
/// when it promises more than every measured level within the limits, and never beyond the
/// largest level measured. Levels that lost more requests than the profile allows are left
/// out; a fit with R^2 below [`MIN_R_SQUARED`] is not used.
pub fn estimate(
    run: &RunResult,
    origin: &str,
    limits: &ConcurrencyLimits,
    resamples: usize,
    seed: u64,
) -> Result<CurveEstimate> {
    refuse_bad_run(run, origin)?;
    let mut notes = Vec::new();
    let mut warnings = Vec::new();
    let problems = level_problems(&run.levels, run.profile.sweep.max_error_rate);
    for p in &problems {
        warnings.push(format!(
            "{origin}: {p}: this level is left out of the plan (a level that loses requests \
             is not capacity)"
        ));
    }
    notes.extend(waves_note(run, origin));
    // The points and the fit are the run's analysis (`record::analysis`), which the
    // throughput chart draws: one fit for both.
    let points = fit_points(run);
    if points.is_empty() {
        return Err(Field::Results.error(format!(
            "the run {origin}: no level has a successful trial within the profile's error \
             limit; nothing to plan from"
        )));
    }
    let mut levels: Vec<f64> = points.iter().map(|p| p.0).collect();
    levels.sort_by(f64::total_cmp);
    levels.dedup();
    notes.extend(run_notes(run, origin));
    let batch1_tok_s = {
        let at1: Vec<f64> = points.iter().filter(|p| p.0 == 1.0).map(|p| p.1).collect();
        (!at1.is_empty()).then(|| mean(&at1))
    };
    let caps = caps_of(limits);
    if limits.max_latency_s.is_some() && limits.avg_output_tokens.is_none() {
        notes.push(
            "--max-latency needs the average output tokens per request (--avg-output-tokens \
             or --completions): not applied"
                .to_string(),
        );
    }
    let fit = stored_fit(
        run,
        origin,
        &points,
        levels.len(),
        &mut notes,
        &mut warnings,
    );
    let frame = Frame {
        origin,
        points,
        levels,
        caps,
        limits,
        batch1_tok_s,
    };
    match &fit {
        Some(fit) => frame.with_fit(fit, resamples, seed, notes, warnings),
        None => Ok(frame.measured(None, notes, warnings)),
    }
}

/// The note on trials that ran in waves whose last one was part-empty (planned from their
/// steady rate), if any did.
fn waves_note(run: &RunResult, origin: &str) -> Option<String> {
    let waves: Vec<String> = run
        .levels
        .iter()
        .filter_map(|l| {
            let t = l.trials.iter().find(|t| t.measured())?;
            let k = wave_factor(run, l.concurrency, t);
            (k > 1.0 + 1e-9).then(|| {
                format!(
                    "C={} ({} requests: x{k:.3})",
                    l.concurrency, t.requests_sent
                )
            })
        })
        .collect();
    (!waves.is_empty()).then(|| {
        format!(
            "{origin}: equal-length requests ran in waves whose last one was part-empty at {}; \
             planned from the steady rate (window rate x waves x C / requests), which assumes \
             a step lasts as long with the last wave's fewer requests (true where decoding is \
             memory-bound; optimistic where it is compute-bound); make requests_per_level a \
             multiple of every concurrency to measure it directly",
            waves.join(", ")
        )
    })
}

/// Notes on the run itself: figures divided among its endpoints, and levels that lost some
/// requests (within the profile's limit).
fn run_notes(run: &RunResult, origin: &str) -> Vec<String> {
    let mut notes = Vec::new();
    let replicas = run.environment.endpoints.max(1);
    if replicas > 1 {
        notes.push(format!(
            "{origin} spread its requests over {replicas} endpoints: its figures are divided by \
             {replicas} to give one replica's, then multiplied by the node's replicas"
        ));
    }
    let bad_levels = failed_levels(run);
    for l in &run.levels {
        if l.error_rate() > 0.0 && !bad_levels.contains(&l.concurrency) {
            notes.push(format!(
                "{origin}: level {} lost {:.1}% of its requests; throughput counts successes only",
                l.concurrency,
                l.error_rate() * 100.0
            ));
        }
    }
    notes
}

/// The caps on concurrency per replica the limits set, each with its reason.
fn caps_of(limits: &ConcurrencyLimits) -> Vec<(u32, String)> {
    [
        limits
            .max_concurrency
            .map(|c| (c, format!("--max-concurrency {c}"))),
        limits.memory.map(|m| {
            (
                m,
                format!("memory: the KV cache of {m} sequences fits per replica"),
            )
        }),
        limits.slo.clone(),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// The run's scaling fit as its analysis stored it (`record::analysis`: the fit and its R^2
/// floor are computed there once, and the throughput chart draws the same one), described
/// against the points; where it has none (a result built in memory and not analysed, such
/// as the seeds in tests) it is computed here the same way. A fit that is not used says why.
fn stored_fit(
    run: &RunResult,
    origin: &str,
    points: &[(f64, f64)],
    levels: usize,
    notes: &mut Vec<String>,
    warnings: &mut Vec<String>,
) -> Option<UslFit> {
    let scaling = match &run.analysis {
        Some(a) => a.scaling.clone(),
        None => scaling_of(run),
    };
    match scaling {
        Scaling::Fitted(c) => Some(UslFit::with_parameters(points, c.lambda, c.sigma, c.kappa)),
        Scaling::Refused { r_squared } => {
            warnings.push(format!(
                "{origin}: the USL fit describes the curve badly (R^2 {:.2}, below {}): \
                 planned from the measured levels only; look at the curve (noise, a \
                 saturated client, a server that changed during the run)",
                r_squared, MIN_R_SQUARED
            ));
            None
        }
        Scaling::Failed { error } => {
            notes.push(format!(
                "{origin}: the USL fit failed ({error}); planning from the best measured level"
            ));
            None
        }
        Scaling::NotFitted => {
            notes.push(format!(
                "{origin} has {levels} concurrency level(s): no curve to fit (the USL needs 3); \
                 planning from the measured point{}",
                if levels > 1 { "s" } else { "" }
            ));
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::figures::Basis;
    use crate::plan::seeds::{seed_122b_curve, seed_27b_batch1};
    use crate::record::analysis::{points_per_replica, Scaling};

    /// Issue 28 item 4: the throughput chart draws the run's analysis; the plan's fit is the
    /// same curve (per replica, steady rates), and where the plan refuses a fit (R^2 floor)
    /// the analysis holds none to draw.
    #[test]
    fn plan_and_chart_read_the_same_fit() {
        let mut run = seed_122b_curve();
        run.environment.endpoints = 2;
        run.analyse();
        let est = estimate(&run, "s", &ConcurrencyLimits::default(), 20, 1).unwrap();
        let plan = est.fit.unwrap();
        let chart = match &run.analysis.as_ref().unwrap().scaling {
            Scaling::Fitted(c) => *c,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            (chart.lambda, chart.sigma, chart.kappa, chart.r_squared),
            (plan.lambda, plan.sigma, plan.kappa, plan.r_squared)
        );
        // The chart's aggregate curve at C is 2 replicas at C / 2 on the plan's curve.
        let n = plan.peak_concurrency.unwrap();
        assert!((chart.aggregate(2.0 * n) - 2.0 * plan.peak_throughput.unwrap()).abs() < 1e-6);

        // A zigzag the USL cannot describe: the plan warns and the chart has no curve.
        let mut bad = crate::record::fake::run(&[
            (1, &[100.0, 101.0]),
            (2, &[900.0, 905.0]),
            (4, &[150.0, 151.0]),
            (8, &[1000.0, 990.0]),
        ]);
        bad.analyse();
        let est = estimate(&bad, "z", &ConcurrencyLimits::default(), 20, 1).unwrap();
        assert!(est.fit.is_none());
        assert!(
            est.warnings.iter().any(|w| w.contains("R^2")),
            "{:?}",
            est.warnings
        );
        assert!(matches!(
            bad.analysis.unwrap().scaling,
            Scaling::Refused { .. }
        ));
    }

    fn within(actual: f64, expected: f64, rel: f64) -> bool {
        (actual - expected).abs() <= rel * expected.abs()
    }

    /// 24 equal-length requests at C = 16 run 2 waves for 1.5 waves' work: the steady rate is
    /// the window rate x 2 x 16 / 24 = 4/3; 64 requests (4 full waves) need no correction;
    /// neither do requests of unequal lengths (no ignore_eos) or trials that lost requests.
    /// (Seen in tests/it/alone/plan_vs_reality.rs: without it a 24-request sweep planned a 2,000-request
    /// job 37% too slow.)
    #[test]
    fn part_empty_last_waves_are_not_the_steady_rate() {
        let mut run = crate::record::fake::run(&[(16, &[1000.0]), (4, &[400.0])]);
        run.profile.workload.ignore_eos = true;
        run.levels[0].trials[0].requests_sent = 24;
        run.levels[0].trials[0].succeeded = 24;
        run.levels[1].trials[0].requests_sent = 64;
        run.levels[1].trials[0].succeeded = 64;
        let t = run.levels[0].trials[0].clone();
        assert!((wave_factor(&run, 16, &t) - 4.0 / 3.0).abs() < 1e-12);
        let points = points_per_replica(&run);
        assert!((points[0].1 - 4000.0 / 3.0).abs() < 1e-9, "{points:?}");
        assert_eq!(points[1].1, 400.0);
        let mut lost = t.clone();
        lost.succeeded = 23;
        assert_eq!(wave_factor(&run, 16, &lost), 1.0);
        run.profile.workload.ignore_eos = false;
        assert_eq!(wave_factor(&run, 16, &t), 1.0);
    }

    #[test]
    fn seed_curve_fits_the_usl() {
        let est = estimate(
            &seed_122b_curve(),
            "seed",
            &ConcurrencyLimits::default(),
            200,
            7,
        )
        .unwrap();
        let fit = est.fit.as_ref().unwrap();
        // Targets: sigma ~0.034, kappa ~4.2e-4, lambda ~119 tok/s, peak near 48 at ~1,610.
        assert!(within(fit.sigma, 0.034, 0.10), "sigma {}", fit.sigma);
        assert!(within(fit.kappa, 4.2e-4, 0.10), "kappa {}", fit.kappa);
        assert!(within(fit.lambda, 119.0, 0.10), "lambda {}", fit.lambda);
        let peak_n = fit.peak_concurrency.unwrap();
        assert!(within(peak_n, 48.0, 0.10), "peak N {peak_n}");
        assert!(within(fit.peak_throughput.unwrap(), 1610.0, 0.10));
        assert_eq!(est.basis, Basis::Fitted);
        assert!((est.concurrency as f64 - peak_n).abs() <= 1.0);
        assert!(within(est.tok_s.p50, 1610.0, 0.10));
        assert!(est.tok_s.p10 <= est.tok_s.p50 && est.tok_s.p50 <= est.tok_s.p90);
        assert!(est.tok_s.p90 > est.tok_s.p10, "{:?}", est.tok_s);
        assert_eq!(est.batch1_tok_s, Some(121.6));
    }

    #[test]
    fn bootstrap_is_deterministic() {
        let a = estimate(
            &seed_122b_curve(),
            "s",
            &ConcurrencyLimits::default(),
            100,
            1,
        )
        .unwrap();
        let b = estimate(
            &seed_122b_curve(),
            "s",
            &ConcurrencyLimits::default(),
            100,
            1,
        )
        .unwrap();
        assert_eq!(a, b);
    }

    #[test]
    fn limits_lower_the_concurrency() {
        let limits = ConcurrencyLimits {
            max_concurrency: Some(32),
            ..Default::default()
        };
        let est = estimate(&seed_122b_curve(), "s", &limits, 50, 1).unwrap();
        assert_eq!(est.concurrency, 32);
        assert!(
            est.limited_by.contains("--max-concurrency"),
            "{}",
            est.limited_by
        );
        // Little's law: at 1,818 tokens per request, 40 s allows n x 1818 / X(n) <= 40.
        let limits = ConcurrencyLimits {
            max_latency_s: Some(40.0),
            avg_output_tokens: Some(1818.0),
            ..Default::default()
        };
        let est = estimate(&seed_122b_curve(), "s", &limits, 50, 1).unwrap();
        let x = est.tok_s.p50;
        assert!(little_latency_s(est.concurrency as f64, 1818.0, x) <= 40.0);
        assert!(
            est.concurrency < 48 && est.concurrency > 30,
            "{}",
            est.concurrency
        );
        assert!(
            est.limited_by.contains("--max-latency"),
            "{}",
            est.limited_by
        );
    }

    #[test]
    fn open_loop_results_are_refused() {
        let mut run = seed_122b_curve();
        for (l, r) in run.levels.iter_mut().zip([1.0, 2.0, 4.0, 8.0, 16.0]) {
            l.rate = Some(r);
        }
        let limits = ConcurrencyLimits::default();
        let err = estimate(&run, "r.json", &limits, 10, 1)
            .unwrap_err()
            .to_string();
        assert!(err.contains("open-loop") && err.contains("r.json"), "{err}");
    }

    #[test]
    fn one_level_plans_from_the_measured_point() {
        let est = estimate(
            &seed_27b_batch1(),
            "b1",
            &ConcurrencyLimits::default(),
            50,
            1,
        )
        .unwrap();
        assert_eq!(est.basis, Basis::Measured);
        assert_eq!(est.concurrency, 1);
        // 8,192 tokens / 38.684 s over 8 servers: 26.5 tok/s per replica.
        assert!((est.tok_s.p50 - 26.47).abs() < 0.01, "{:?}", est.tok_s);
        assert!(est.notes.iter().any(|n| n.contains("no curve to fit")));
        assert_eq!(est.tok_s.p10, est.tok_s.p90);
    }
}
