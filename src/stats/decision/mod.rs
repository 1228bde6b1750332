//! The gate's decision rules (issue 14): per level a test that matches how the data were
//! collected, Holm across levels, three outcomes, a gross-regression guard, and a drift check.
//!
//! The rules were designed and calibrated in Python; `src/stats/reference/reference.py` holds
//! the exact formulas this module ports, `make_vectors.py` wrote `vectors.json` (the cases the
//! tests here reproduce to 1e-6), and `calibrate.py` the calibration that
//! `benches/gate_calibration.rs` repeats with these functions (`docs/gate-calibration.md`).
//!
//! * [`relative_level`]: base and head measured in one job. One server start per arm: the
//!   trial is the unit (outlier rule, then Welch). Restarts: the server start is the unit
//!   (Welch on session means).
//! * [`history_level`]: a candidate session against k baseline sessions of main: a
//!   prediction-interval t test with the between-session variance and its k-1 degrees of
//!   freedom (Satterthwaite when the candidate has fewer trials than the baseline sessions).
//! * [`crossover_level`]: relative runs in blocks (servers restarted, slots swapped): the
//!   slot effect cancels and the start spread is estimated from the blocks, or taken from an
//!   A/A calibration ([`SlotCalibration`]).
//! * [`grouped_level`]: blocks over several pairs of slots and runners: a slot effect per
//!   (runner, pair), and the groups' gaps pooled only where they agree.
//! * [`decide`]: Holm across levels for the main test and the guard, the per-level outcome,
//!   the bounds and the smallest detectable drop, and the overall outcome.
//! * [`drift_check`]: a trend across the interleaved rounds of a run.
//!
//! Inputs are logs: ln tok/s per trial (for a latency gate, -ln latency, so that "lower is
//! worse" holds for every metric). **Non-finite values are ignored**: they are removed (with
//! their session label) before anything is computed, and counted in
//! [`LevelTest::ignored_base`] / [`LevelTest::ignored_head`] so that the caller can say so. A
//! failed trial is the caller's business (the error-rate limit, exit 2), not a value here.
//! Nothing here panics on data; the only panic is a session-label slice whose length differs
//! from its values' (a caller bug).

mod calibration;
mod crossover;
mod decide;
mod drift;
mod groups;
mod level;
mod outliers;
#[cfg(test)]
mod vectors;

pub use calibration::{
    pooled_evidence, CalibrationUnused, LevelEvidence, RunEvidence, SlotCalibration,
    CALIBRATION_AGREEMENT_P,
};
pub use crossover::{
    calibration_evidence, crossover_level, crossover_level_with, trimmed_block, Block,
    CrossoverInfo, TrimmedBlock,
};
pub use decide::{decide, DecisionSettings};
pub use drift::{drift_check, drift_check_at, Drift, DRIFT_ALPHA, DRIFT_MIN_SIZE};
pub use groups::{
    grouped_evidence, grouped_level, grouped_level_with, GroupSlot, GroupedBlock, GroupsInfo,
    GROUPS_AGREEMENT_P,
};
pub use level::{history_level, relative_level, Design, LevelOutcome, LevelTest};
pub use outliers::{outlier_mask_relative, OUTLIER_Z};

use statrs::distribution::{ContinuousCDF, StudentsT};

use super::basic::median;
pub use super::basic::{mean, variance as var};

/// Student's t cdf; NaN when the inputs are not a valid distribution or point.
fn t_cdf(x: f64, df: f64) -> f64 {
    match StudentsT::new(0.0, 1.0, df) {
        Ok(t) if !x.is_nan() => t.cdf(x),
        _ => f64::NAN,
    }
}

/// Student's t quantile; NaN when df is not positive and finite.
fn t_ppf(q: f64, df: f64) -> f64 {
    match StudentsT::new(0.0, 1.0, df) {
        Ok(t) if df.is_finite() && (0.0..=1.0).contains(&q) => t.inverse_cdf(q),
        _ => f64::NAN,
    }
}

/// Welch: d = mean(head) - mean(base), its se and the Welch-Satterthwaite df.
/// Needs >= 2 values per side. The df is computed from variance shares, so that tiny
/// variances cannot underflow into 0/0.
fn welch(base: &[f64], head: &[f64]) -> (f64, f64, f64) {
    let (nb, nh) = (base.len() as f64, head.len() as f64);
    let (vb, vh) = (var(base) / nb, var(head) / nh);
    let se2 = vb + vh;
    let d = mean(head) - mean(base);
    if se2 == 0.0 {
        return (d, 0.0, nb + nh - 2.0);
    }
    let (fb, fh) = (vb / se2, vh / se2);
    let df = 1.0 / (fb * fb / (nb - 1.0) + fh * fh / (nh - 1.0));
    (d, se2.sqrt(), df)
}

/// Values grouped by label, labels in first-seen order.
fn group(values: &[f64], labels: &[u32]) -> Vec<Vec<f64>> {
    let mut keys: Vec<u32> = Vec::new();
    let mut out: Vec<Vec<f64>> = Vec::new();
    for (&v, &l) in values.iter().zip(labels) {
        match keys.iter().position(|&k| k == l) {
            Some(i) => out[i].push(v),
            None => {
                keys.push(l);
                out.push(vec![v]);
            }
        }
    }
    out
}

/// Pooled within-cell variance and its df over the cells with >= 2 values (NaN, 0 if none).
fn pooled_within<C: AsRef<[f64]>>(cells: &[C]) -> (f64, usize) {
    let mut ss = 0.0;
    let mut df = 0;
    for c in cells.iter().map(AsRef::as_ref).filter(|c| c.len() >= 2) {
        let m = mean(c);
        ss += c.iter().map(|v| (v - m) * (v - m)).sum::<f64>();
        df += c.len() - 1;
    }
    if df > 0 {
        (ss / df as f64, df)
    } else {
        (f64::NAN, 0)
    }
}

/// The finite values and their labels (an empty label slice means one session, label 0),
/// and how many values were not finite.
///
/// # Panics
/// When `labels` is neither empty nor as long as `values`.
fn usable(values: &[f64], labels: &[u32], side: &str) -> (Vec<f64>, Vec<u32>, usize) {
    assert!(
        labels.is_empty() || labels.len() == values.len(),
        "{side}: {} session labels for {} values",
        labels.len(),
        values.len()
    );
    let mut v = Vec::with_capacity(values.len());
    let mut l = Vec::with_capacity(values.len());
    for (i, &x) in values.iter().enumerate() {
        if x.is_finite() {
            v.push(x);
            l.push(labels.get(i).copied().unwrap_or(0));
        }
    }
    let ignored = values.len() - v.len();
    (v, l, ignored)
}

/// `Some(x)` when x is finite.
fn finite(x: f64) -> Option<f64> {
    x.is_finite().then_some(x)
}

#[cfg(test)]
mod proptests {
    use super::*;
    use proptest::prelude::*;

    /// Finite values of any size (ln values near 5 most of the time) and, where allowed,
    /// non-finite ones.
    fn value(non_finite: bool) -> BoxedStrategy<f64> {
        let finite = prop_oneof![
            3 => 4.0..6.0_f64,
            1 => -50.0..50.0_f64,
            1 => prop::num::f64::NORMAL | prop::num::f64::SUBNORMAL | prop::num::f64::ZERO,
            1 => Just(5.0),
        ];
        if non_finite {
            prop_oneof![4 => finite, 1 => prop::num::f64::ANY].boxed()
        } else {
            finite.boxed()
        }
    }

    fn trials(non_finite: bool) -> impl Strategy<Value = (Vec<f64>, Vec<u32>)> {
        prop::collection::vec((value(non_finite), 0u32..3), 0..=12)
            .prop_map(|v| v.into_iter().unzip())
    }

    fn check(levels: &mut [LevelTest]) {
        let s = DecisionSettings::default();
        decide(levels, &s);
        for l in levels.iter() {
            for p in [l.p, l.p_guard, l.p_holm, l.p_guard_holm] {
                assert!((0.0..=1.0).contains(&p), "p {p} in {l:?}");
            }
            assert!(l.lower >= 0.0 && l.df >= 0.0 && l.se_w >= 0.0);
            // Every level serializes to valid JSON and reads back (to the last bit or so).
            let back: LevelTest = serde_json::from_str(&serde_json::to_string(l).unwrap()).unwrap();
            super::level::tests::assert_json_close(&back, l);
        }
    }

    proptest! {
        #[test]
        fn relative_levels_never_panic((b, bs) in trials(true), (h, hs) in trials(true),
                                       restarts in any::<bool>()) {
            let none: &[u32] = &[];
            let mut lv = if restarts {
                [relative_level(&b, &h, &bs, &hs, 0.25)]
            } else {
                [relative_level(&b, &h, none, none, 0.25)]
            };
            check(&mut lv);
        }

        #[test]
        fn history_levels_never_panic(base in prop::collection::vec(
                                          prop::collection::vec(value(true), 0..=12), 0..=6),
                                      cand in prop::collection::vec(value(true), 0..=12)) {
            let mut lv = [history_level(&base, &cand, 0.25), history_level(&base, &cand, 0.25)];
            check(&mut lv);
        }

        #[test]
        fn drift_never_panics(rows in prop::collection::vec(
                                  (0u32..4, value(true), 0u32..8, 0u32..3), 0..=12)) {
            let cells: Vec<u32> = rows.iter().map(|r| r.0).collect();
            let vals: Vec<f64> = rows.iter().map(|r| r.1).collect();
            let rounds: Vec<u32> = rows.iter().map(|r| r.2).collect();
            let sess: Vec<u32> = rows.iter().map(|r| r.3).collect();
            if let Some(d) = drift_check(&cells, &vals, &rounds, &sess) {
                prop_assert!((0.0..=1.0).contains(&d.p) && d.df >= 1.0);
            }
        }
    }
}

#[cfg(test)]
mod welch_tests {
    use super::*;

    fn close(a: f64, b: f64, rel: f64) -> bool {
        (a - b).abs() <= rel * b.abs()
    }

    /// scipy.stats.ttest_ind(log(c), log(b), equal_var=False, alternative='less') on these
    /// samples (src/stats/reference/welch_ref.py, SciPy 1.17).
    #[test]
    fn welch_matches_scipy() {
        let b = [1510.2_f64, 1498.7, 1523.9, 1505.1, 1489.4].map(f64::ln);
        let c = [1461.0_f64, 1470.3, 1449.8, 1480.2, 1455.5, 1466.1].map(f64::ln);
        let (d, se, df) = welch(&b, &c);
        assert!(close(d / se, -5.745697031641359, 1e-10), "{}", d / se);
        assert!(close(df, 8.043232643762432, 1e-10), "{df}");
        assert!(close(t_cdf(d / se, df), 0.00021130833090524605, 1e-6));
        // scipy.stats.gmean(c) / scipy.stats.gmean(b)
        assert!(close(d.exp(), 0.9723447548634102, 1e-12));
    }
}
