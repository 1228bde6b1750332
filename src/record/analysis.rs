//! What a run's figures say, computed once per record ([`RunResult::analyse`]) and read by
//! every renderer, the gate and the planner, so that two figures never disagree: the peak and
//! knee of each arm's throughput, the drift across rounds, and the scaling law fitted the
//! planner's way (per replica, from steady rates, with an R^2 floor).
//!
//! Renderers only read these values; the fitting happens here and in `stats/`.

use serde::{Deserialize, Serialize};

use super::checks::level_problems;
use super::{LevelResult, RunResult, TrialResult};
use crate::stats::{fit_usl, is_positive, UslFit};

/// Below this R^2 the USL fit does not describe the curve: the plan uses measured levels only
/// and the chart draws no curve.
pub const MIN_R_SQUARED: f64 = 0.9;

/// The share of the peak a lower level must reach to be called the knee: beyond it, more
/// concurrency bought at most a tenth more throughput.
pub const KNEE_SHARE: f64 = 0.9;

/// The analysis of one run. Serialized in results.json for other readers; a file's copy is
/// recomputed on load (it is derived from the levels, never trusted over them).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct Analysis {
    /// Peak and knee of the run's own levels (a relative run's head arm).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head: Option<Shape>,
    /// Peak and knee of a relative run's base arm.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<Shape>,
    /// The scaling law the planner uses, or why there is none.
    #[serde(default)]
    pub scaling: Scaling,
}

/// A level named by the analysis, with its mean output tok/s over trials.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct LevelMark {
    pub concurrency: u32,
    /// The request rate of an open-loop level.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
    pub tok_s: f64,
}

/// Where an arm's measured throughput peaks, and its knee: the lowest closed-loop level below
/// the peak's that already gives [`KNEE_SHARE`] of the peak (none for open-loop levels, whose
/// levels are rates).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct Shape {
    pub peak: LevelMark,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub knee: Option<LevelMark>,
}

/// The planner's scaling fit of a run, as data a chart can draw.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Scaling {
    /// No fit is attempted: an open-loop run (levels are rates), or fewer than 3 levels.
    #[default]
    NotFitted,
    /// The fit did not converge.
    Failed { error: String },
    /// The fit converged but describes the curve badly (R^2 below [`MIN_R_SQUARED`]).
    Refused { r_squared: f64 },
    /// The fit the planner uses.
    Fitted(ScalingCurve),
}

/// X(N) = lambda N / (1 + sigma (N - 1) + kappa N (N - 1)) per replica (N: requests in flight
/// per replica), fitted to the trials' steady rates; `replicas` endpoints shared the run.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct ScalingCurve {
    pub lambda: f64,
    pub sigma: f64,
    pub kappa: f64,
    pub r_squared: f64,
    pub replicas: usize,
    /// Some trial's steady rate differs from its window rate (see [`wave_factor`]): the curve
    /// sits above those trials' points.
    #[serde(default)]
    pub wave_corrected: bool,
}

impl ScalingCurve {
    fn of(fit: &UslFit, replicas: usize, wave_corrected: bool) -> ScalingCurve {
        ScalingCurve {
            lambda: fit.lambda,
            sigma: fit.sigma,
            kappa: fit.kappa,
            r_squared: fit.r_squared,
            replicas: replicas.max(1),
            wave_corrected,
        }
    }

    /// Throughput of one replica at `n` requests in flight on it.
    pub fn per_replica(&self, n: f64) -> f64 {
        self.lambda * n / (1.0 + self.sigma * (n - 1.0) + self.kappa * n * (n - 1.0))
    }

    /// Throughput of the whole run at `concurrency` requests in flight over all its replicas:
    /// the figure a run's throughput chart shows.
    pub fn aggregate(&self, concurrency: f64) -> f64 {
        let r = self.replicas.max(1) as f64;
        r * self.per_replica(concurrency / r)
    }
}

impl Scaling {
    /// The curve, when the planner uses one.
    pub fn curve(&self) -> Option<&ScalingCurve> {
        match self {
            Scaling::Fitted(c) => Some(c),
            _ => None,
        }
    }
}

impl RunResult {
    /// Computes the analysis and the drift and stores them in the record: the one place they
    /// are computed (at the end of a run, when blocks are combined, when a file is loaded).
    pub fn analyse(&mut self) {
        self.drift = self.drift();
        self.analysis = Some(Analysis {
            head: shape(&self.levels),
            base: self.base.as_ref().and_then(|b| shape(&b.levels)),
            scaling: scaling_of(self),
        });
    }
}

/// Peak and knee of one arm's levels from their measured means; None when no level measured
/// anything.
pub fn shape(levels: &[LevelResult]) -> Option<Shape> {
    let mark = |l: &LevelResult, tok_s: f64| LevelMark {
        concurrency: l.concurrency,
        rate: l.rate,
        tok_s,
    };
    let means: Vec<(&LevelResult, f64)> = levels
        .iter()
        .filter_map(|l| l.trial_mean(|t| Some(t.output_tok_per_s)).map(|m| (l, m)))
        .collect();
    let (peak_at, peak) = means.iter().copied().max_by(|a, b| a.1.total_cmp(&b.1))?;
    let knee = if peak_at.rate.is_none() {
        means
            .iter()
            .filter(|(l, m)| {
                l.rate.is_none() && l.concurrency < peak_at.concurrency && *m >= KNEE_SHARE * peak
            })
            .min_by_key(|(l, _)| l.concurrency)
            .map(|(l, m)| mark(l, *m))
    } else {
        None
    };
    Some(Shape {
        peak: mark(peak_at, peak),
        knee,
    })
}

/// How much faster than its window rate a trial ran while its slots were full.
///
/// A closed-loop trial of K requests that all ask the same length (`ignore_eos`, no
/// `output_length` distribution, a request count rather than a duration) runs in waves:
/// ceil(K/C) of them at concurrency C, the last one part-empty when C does not divide K. Its
/// window rate (tokens / window) is then the steady rate x K / (C ceil(K/C)): 24 requests at
/// C = 16 run 2 waves for 1.5 waves' work and read 25% low. A plan runs a long job with its
/// slots full, so it plans from the steady rate; the job's own end is the tail, which the
/// plan adds from the job's lengths. 1 for every other trial (unequal lengths do not run in
/// waves), and for trials that lost requests. It assumes a decode step lasts as long with the
/// last wave's fewer requests as with full slots: true where decoding is memory-bound (and on
/// the simulator's fixed preset), optimistic where a smaller batch steps faster; the plan's
/// note says so.
pub fn wave_factor(run: &RunResult, concurrency: u32, t: &TrialResult) -> f64 {
    let w = &run.profile.workload;
    let equal_lengths = w.ignore_eos && w.output_length.is_none();
    let counted = run.profile.sweep.trial_span().is_none();
    let k = t.requests_sent;
    if !(equal_lengths && counted && concurrency > 0 && k > 0 && t.succeeded == k) {
        return 1.0;
    }
    let (k, c) = (k as f64, f64::from(concurrency));
    (k / c).ceil() * c / k
}

/// Per-replica points: (concurrency, tok/s), one per trial that measured something. A run
/// that spread its requests over several endpoints measured that many replicas together.
/// Each trial's rate is its steady rate (see [`wave_factor`]).
pub fn points_per_replica(run: &RunResult) -> Vec<(f64, f64)> {
    let r = run.environment.endpoints.max(1) as f64;
    run.levels
        .iter()
        .flat_map(|l| {
            l.trials
                .iter()
                .filter(|t| t.measured())
                .map(move |t| t.output_tok_per_s * wave_factor(run, l.concurrency, t))
                .filter(|x| is_positive(*x))
                .map(move |x| (l.concurrency as f64 / r, x / r))
        })
        .collect()
}

/// The levels that lost more requests than the profile allows: not capacity, so out of the fit.
pub fn failed_levels(run: &RunResult) -> Vec<u32> {
    run.levels
        .iter()
        .filter(|l| {
            !level_problems(std::slice::from_ref(*l), run.profile.sweep.max_error_rate).is_empty()
        })
        .map(|l| l.concurrency)
        .collect()
}

/// The points the planner fits: [`points_per_replica`] without the [`failed_levels`].
pub fn fit_points(run: &RunResult) -> Vec<(f64, f64)> {
    let replicas = run.environment.endpoints.max(1) as f64;
    let bad = failed_levels(run);
    points_per_replica(run)
        .into_iter()
        .filter(|p| !bad.iter().any(|b| (*b as f64 / replicas) == p.0))
        .collect()
}

/// What the USL fit of `points` gives: `None` with fewer than 3 distinct levels (no curve to
/// fit), else the fit or why it failed. The caller applies [`MIN_R_SQUARED`].
pub fn fit_of(points: &[(f64, f64)]) -> Option<Result<UslFit, String>> {
    let mut levels: Vec<f64> = points.iter().map(|p| p.0).collect();
    levels.sort_by(f64::total_cmp);
    levels.dedup();
    (levels.len() >= 3).then(|| fit_usl(points).map_err(|e| e.to_string()))
}

/// The planner's scaling fit of a closed-loop run (see [`Scaling`]).
pub fn scaling_of(run: &RunResult) -> Scaling {
    if run.levels.iter().any(|l| l.rate.is_some()) {
        return Scaling::NotFitted;
    }
    let wave_corrected = run.levels.iter().any(|l| {
        (l.trials.iter().filter(|t| t.measured()))
            .any(|t| (wave_factor(run, l.concurrency, t) - 1.0).abs() > 1e-9)
    });
    match fit_of(&fit_points(run)) {
        None => Scaling::NotFitted,
        Some(Err(error)) => Scaling::Failed { error },
        Some(Ok(f)) if f.r_squared >= MIN_R_SQUARED => Scaling::Fitted(ScalingCurve::of(
            &f,
            run.environment.endpoints,
            wave_corrected,
        )),
        Some(Ok(f)) => Scaling::Refused {
            r_squared: f.r_squared,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::fake;

    #[test]
    fn peak_and_knee_come_from_the_level_means() {
        let run = fake::run(&[
            (1, &[100.0, 102.0]),
            (8, &[700.0, 720.0]),
            (32, &[1180.0, 1200.0]),
            (64, &[1250.0, 1250.0]),
        ]);
        let head = run.analysis.as_ref().unwrap().head.unwrap();
        assert_eq!(head.peak.concurrency, 64);
        assert_eq!(head.peak.tok_s, 1250.0);
        let knee = head.knee.unwrap();
        assert_eq!((knee.concurrency, knee.tok_s), (32, 1190.0));
        assert!(shape(&[]).is_none());
    }

    /// The aggregate curve of a run over r replicas is r x the per-replica curve at C / r.
    #[test]
    fn the_aggregate_curve_is_the_replicas_curve_scaled() {
        let c = ScalingCurve {
            lambda: 100.0,
            sigma: 0.05,
            kappa: 1e-3,
            r_squared: 0.99,
            replicas: 4,
            wave_corrected: false,
        };
        assert!((c.aggregate(32.0) - 4.0 * c.per_replica(8.0)).abs() < 1e-9);
        assert!((c.per_replica(1.0) - 100.0).abs() < 1e-12);
    }

    /// A curve the USL cannot describe (a zigzag) is refused, with its R^2; fewer than 3
    /// levels are not fitted; an open-loop run is not fitted.
    #[test]
    fn the_r_squared_floor_refuses_a_bad_fit() {
        let zigzag = fake::run(&[
            (1, &[100.0, 101.0]),
            (2, &[900.0, 905.0]),
            (4, &[150.0, 151.0]),
            (8, &[1000.0, 990.0]),
            (16, &[120.0, 125.0]),
        ]);
        match &zigzag.analysis.as_ref().unwrap().scaling {
            Scaling::Refused { r_squared } => assert!(*r_squared < MIN_R_SQUARED),
            other => panic!("{other:?}"),
        }
        let two = fake::run(&[(1, &[100.0]), (2, &[190.0])]);
        assert_eq!(two.analysis.unwrap().scaling, Scaling::NotFitted);
        let mut open = fake::run(&[(1, &[100.0]), (2, &[190.0]), (4, &[350.0])]);
        open.levels.iter_mut().for_each(|l| l.rate = Some(1.0));
        open.analyse();
        assert_eq!(open.analysis.unwrap().scaling, Scaling::NotFitted);
    }

    /// results.json readers: a file without the analysis still reads, and the analysis
    /// survives a round trip.
    #[test]
    fn the_analysis_round_trips_and_may_be_absent() {
        let run = fake::run(&[
            (1, &[100.0, 101.0]),
            (4, &[380.0, 385.0]),
            (16, &[1200.0, 1190.0]),
        ]);
        let text = serde_json::to_string(&run).unwrap();
        let back: RunResult = serde_json::from_str(&text).unwrap();
        assert_eq!(back, run);
        let mut value: serde_json::Value = serde_json::from_str(&text).unwrap();
        value.as_object_mut().unwrap().remove("analysis");
        let old: RunResult = serde_json::from_value(value).unwrap();
        assert!(old.analysis.is_none());
    }

    /// A file written before the analysis existed, or edited since, is analysed on load from
    /// its levels: the stored copy is never trusted over them.
    #[test]
    fn loading_recomputes_the_analysis_from_the_levels() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("results.json");
        let mut run = fake::run(&[
            (1, &[100.0, 101.0]),
            (4, &[380.0, 385.0]),
            (16, &[1200.0, 1190.0]),
        ]);
        let truth = run.analysis.take();
        run.save(&path).unwrap();
        assert_eq!(RunResult::load(&path).unwrap().analysis, truth);
        run.analysis = Some(Analysis::default());
        run.save(&path).unwrap();
        assert_eq!(RunResult::load(&path).unwrap().analysis, truth);
    }
}
