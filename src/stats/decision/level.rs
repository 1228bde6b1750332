//! One level's comparison: (d, se, df) for the design the data came from, and the p-values of
//! the main test and of the gross-regression guard. [`super::decide`] fills in the rest.

use serde::{Deserialize, Serialize};

use super::outliers::{outlier_mask_relative, OUTLIER_Z};
use super::{finite, group, mean, pooled_within, t_cdf, usable, var, welch};

/// How the gate compares: base and head measured in one job, or a candidate against main's
/// history of sessions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Design {
    Relative,
    History,
}

/// A level's (or the whole comparison's) outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LevelOutcome {
    /// Significant after Holm and at least the minimum effect, or the guard tripped.
    Regression,
    /// The one-sided lower bound of the ratio lies above 1 - min_effect.
    NoRegression,
    /// The data cannot tell; [`LevelTest::mdd`] says what they could have seen.
    Inconclusive,
}

/// One level's comparison (reference.py's `Level`). Logs throughout: `d` = mean ln head -
/// mean ln base, `ratio` = exp(d) (head / base throughput; for a latency gate base / head
/// latency). `None` marks what cannot be estimated or is unbounded (serialized as `null`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LevelTest {
    pub design: Design,
    /// Server starts (sessions) per arm; for history, the baseline sessions k and 1.
    /// Relative with more than one on either side is "relative with restarts".
    pub sessions_base: usize,
    pub sessions_head: usize,
    /// None when an arm (or the baseline) has no usable trial.
    pub d: Option<f64>,
    pub ratio: Option<f64>,
    /// Standard error of d; None when not estimable (history k = 1, fewer than 3 trials left
    /// in an arm, fewer than 2 sessions per arm with restarts).
    pub se: Option<f64>,
    /// Degrees of freedom of the main test; 0 when not estimable.
    pub df: f64,
    /// Within-session-only se and df of d, for the guard (0 and 0 when not estimable).
    pub se_w: f64,
    pub df_w: f64,
    /// sqrt of the pooled within-session (within-cell) variance.
    pub sigma_w: Option<f64>,
    /// Between-session standard deviation sqrt(max(0, sigma_b2_raw)), its untruncated
    /// variance estimate (may be negative) and that estimate's df. None where the design
    /// cannot estimate it (relative without restarts, history with k = 1 -- df 0 there).
    pub sigma_b: Option<f64>,
    pub sigma_b2_raw: Option<f64>,
    pub sigma_b_df: Option<f64>,
    /// Trials used (after the outlier rule) on each side; history: all baseline trials.
    pub n_base: usize,
    pub n_head: usize,
    /// Trials dropped by the outlier rule (relative, one session only). Warn when head drops
    /// at least 2 more than base: an imbalance of slow trials is itself a regression.
    pub dropped_base: usize,
    pub dropped_head: usize,
    /// Non-finite input values, ignored.
    pub ignored_base: usize,
    pub ignored_head: usize,
    /// One-sided p of "head slower" and of "drop beyond the guard" (within-session noise).
    pub p: f64,
    pub p_guard: f64,
    /// Filled by [`super::decide`]: Holm-adjusted p-values across the levels.
    pub p_holm: f64,
    pub p_guard_holm: f64,
    /// Two one-sided bounds of the ratio at level 1 - main_alpha/m (the decision's own level);
    /// lower 0 and upper None (unbounded) when not estimable.
    pub lower: f64,
    pub upper: Option<f64>,
    /// The one-sided bounds at the pass confidence (0.95, no multiplicity correction): what
    /// the pass rule reads and the verdict shows. 0 and None when not estimable.
    #[serde(default)]
    pub pass_lower: f64,
    #[serde(default)]
    pub pass_upper: Option<f64>,
    /// The se and df the pass bounds read where they differ from the main test's: runners
    /// whose head/base gaps differ beyond chance widen the pass side only (groups.rs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pass_se: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pass_df: Option<f64>,
    /// Smallest drop detected with the set power, sigma_b included; None = no drop can be
    /// detected (not estimable, e.g. history with one baseline session).
    pub mdd: Option<f64>,
    pub outcome: LevelOutcome,
    /// The gross-regression guard fired (Holm p_guard below the guard alpha).
    pub guard_tripped: bool,
    /// A relative run in blocks (servers restarted, slots swapped): what the blocks said
    /// about slot and start effects ([`super::crossover_level`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crossover: Option<super::CrossoverInfo>,
}

impl LevelTest {
    pub(super) fn new(design: Design, d: Option<f64>) -> LevelTest {
        LevelTest {
            design,
            sessions_base: 0,
            sessions_head: 0,
            d,
            ratio: None,
            se: None,
            df: 0.0,
            se_w: 0.0,
            df_w: 0.0,
            sigma_w: None,
            sigma_b: None,
            sigma_b2_raw: None,
            sigma_b_df: None,
            n_base: 0,
            n_head: 0,
            dropped_base: 0,
            dropped_head: 0,
            ignored_base: 0,
            ignored_head: 0,
            p: 1.0,
            p_guard: 1.0,
            p_holm: 1.0,
            p_guard_holm: 1.0,
            lower: 0.0,
            upper: None,
            pass_lower: 0.0,
            pass_upper: None,
            pass_se: None,
            pass_df: None,
            mdd: None,
            outcome: LevelOutcome::Inconclusive,
            guard_tripped: false,
            crossover: None,
        }
    }

    /// Whether the main test has an estimate (se and df) to work with.
    pub fn estimable(&self) -> bool {
        self.d.is_some() && self.se.is_some() && self.df > 0.0
    }

    /// Sets the main (se, df) when both are usable; otherwise leaves the level not estimable.
    pub(super) fn set_main(&mut self, se: f64, df: f64) {
        if se.is_finite() && se >= 0.0 && df.is_finite() && df > 0.0 {
            self.se = Some(se);
            self.df = df;
        }
    }

    /// Sets the pass side's own (se, df) where both are usable (see `pass_se`).
    pub(super) fn set_pass(&mut self, se: f64, df: f64) {
        if se.is_finite() && se >= 0.0 && df.is_finite() && df > 0.0 {
            (self.pass_se, self.pass_df) = (Some(se), Some(df));
        }
    }

    pub(super) fn set_within(&mut self, se_w: f64, df_w: f64) {
        if se_w.is_finite() && se_w > 0.0 && df_w > 0.0 {
            self.se_w = se_w;
            self.df_w = df_w;
        }
    }

    /// p = P(T_df <= d/se) (one-sided, "head slower"); p_guard = P(T_df_w <= (d - ln(1 -
    /// guard)) / se_w), the test of "the drop is at most the guard" on within-session noise.
    /// A guard outside (0, 1) is off.
    pub(super) fn finish(mut self, guard: f64) -> LevelTest {
        self.d = self.d.and_then(finite);
        let Some(d) = self.d else {
            self.se = None;
            self.df = 0.0;
            return self;
        };
        self.ratio = finite(d.exp());
        self.p = match self.se {
            Some(se) if se > 0.0 && self.df > 0.0 => t_cdf(d / se, self.df),
            Some(_) if self.df > 0.0 => f64::from(u8::from(d >= 0.0)),
            _ => 1.0,
        };
        self.p_guard = if guard > 0.0 && guard < 1.0 && self.se_w > 0.0 && self.df_w > 0.0 {
            t_cdf((d - (1.0 - guard).ln()) / self.se_w, self.df_w)
        } else {
            1.0
        };
        self.p = clean_p(self.p);
        self.p_guard = clean_p(self.p_guard);
        self.p_holm = self.p;
        self.p_guard_holm = self.p_guard;
        self
    }
}

/// A p-value in [0, 1]; NaN (an overflow on absurd inputs) becomes 1: it never fails a level.
fn clean_p(p: f64) -> f64 {
    if p.is_nan() {
        1.0
    } else {
        p.clamp(0.0, 1.0)
    }
}

/// Relative (A/B in one job) comparison at one level.
///
/// `base`/`head`: ln values per trial; `*_sessions`: the server start (session) label of each
/// trial (an empty slice = one session). When each arm has one label, the trial is the unit:
/// the outlier rule ([`outlier_mask_relative`]), then Welch on the trials (fewer than 3 left
/// in an arm: not estimable). When either arm has more, each start is a session and the unit:
/// Welch on the session means (no outlier rule), with sigma_w (pooled within cells) and
/// sigma_b (pooled variance of session means - sigma_w^2 / harmonic cell size, df 2B - 2)
/// reported.
///
/// # Panics
/// When a label slice is neither empty nor as long as its values.
pub fn relative_level(
    base: &[f64],
    head: &[f64],
    base_sessions: &[u32],
    head_sessions: &[u32],
    guard: f64,
) -> LevelTest {
    let (mut bv, mut bs, ignored_base) = usable(base, base_sessions, "base");
    let (mut hv, mut hs, ignored_head) = usable(head, head_sessions, "head");
    let one_label = |l: &[u32]| l.iter().all(|&x| x == l[0]);
    let (nb0, nh0) = (bv.len(), hv.len());
    if one_label(&bs) && one_label(&hs) {
        let (mask_b, mask_h) = outlier_mask_relative(&bv, &hv, OUTLIER_Z);
        (bv, bs) = keep(&bv, &bs, &mask_b);
        (hv, hs) = keep(&hv, &hs, &mask_h);
    }
    let (gb, gh) = (group(&bv, &bs), group(&hv, &hs));
    let cells: Vec<&Vec<f64>> = gb.iter().chain(&gh).collect();
    let (s2w, dfw) = pooled_within(&cells);
    let d = (!bv.is_empty() && !hv.is_empty()).then(|| mean(&hv) - mean(&bv));
    let mut lv = LevelTest::new(Design::Relative, d);
    lv.sessions_base = gb.len();
    lv.sessions_head = gh.len();
    lv.sigma_w = (dfw > 0).then(|| s2w.sqrt());
    if gb.len() <= 1 && gh.len() <= 1 {
        if bv.len() >= 3 && hv.len() >= 3 {
            let (d, se, df) = welch(&bv, &hv);
            lv.d = Some(d);
            lv.set_main(se, df);
            lv.set_within(se, df);
        }
    } else {
        let mb: Vec<f64> = gb.iter().map(|c| mean(c)).collect();
        let mh: Vec<f64> = gh.iter().map(|c| mean(c)).collect();
        lv.d = (!mb.is_empty() && !mh.is_empty()).then(|| mean(&mh) - mean(&mb));
        if mb.len() >= 2 && mh.len() >= 2 {
            let (d, se, df) = welch(&mb, &mh);
            lv.d = Some(d);
            lv.set_main(se, df);
        }
        let n_harm = cells.len() as f64 / cells.iter().map(|c| 1.0 / c.len() as f64).sum::<f64>();
        let (s2m, dfm) = pooled_within(&[&mb, &mh]);
        if dfm > 0 && dfw > 0 {
            let sb2 = s2m - s2w / n_harm;
            lv.sigma_b2_raw = finite(sb2);
            lv.sigma_b = finite(sb2.max(0.0).sqrt());
            lv.sigma_b_df = Some(dfm as f64);
        }
        if dfw > 0 {
            let se_w = (s2w * (1.0 / bv.len() as f64 + 1.0 / hv.len() as f64)).sqrt();
            lv.set_within(se_w, dfw as f64);
        }
    }
    lv.n_base = bv.len();
    lv.n_head = hv.len();
    lv.dropped_base = nb0 - bv.len();
    lv.dropped_head = nh0 - hv.len();
    lv.ignored_base = ignored_base;
    lv.ignored_head = ignored_head;
    lv.finish(guard)
}

fn keep(values: &[f64], labels: &[u32], drop: &[bool]) -> (Vec<f64>, Vec<u32>) {
    let kept = || values.iter().zip(labels).zip(drop).filter(|(_, &x)| !x);
    (
        kept().map(|((&v, _), _)| v).collect(),
        kept().map(|((_, &l), _)| l).collect(),
    )
}

/// History mode at one level: k baseline sessions (ln values each) against one candidate
/// session.
///
/// d = mean(candidate) - mean of the k session means; V = s_m^2 (1 + 1/k) + max(0, 1/n_c -
/// 1/n_h) s_w^2 with s_m^2 the sample variance of the k session means (k - 1 df, unbiased,
/// never truncated), s_w^2 the within-session variance pooled over all k + 1 sessions and n_h
/// the harmonic mean of the baseline sessions' sizes; Satterthwaite df (k - 1 when n_c >=
/// n_h). k = 1: not estimable, only the guard can fail. No outlier rule: slow trials enter the
/// session means (see reference.py for why). Sessions left empty by non-finite values are
/// left out.
pub fn history_level(base_sessions: &[Vec<f64>], candidate: &[f64], guard: f64) -> LevelTest {
    let mut ignored_base = 0;
    let mut base: Vec<Vec<f64>> = Vec::with_capacity(base_sessions.len());
    for s in base_sessions {
        let (v, _, ign) = usable(s, &[], "baseline session");
        ignored_base += ign;
        if !v.is_empty() {
            base.push(v);
        }
    }
    let (cand, _, ignored_head) = usable(candidate, &[], "candidate");
    let k = base.len();
    let kf = k as f64;
    let mb: Vec<f64> = base.iter().map(|s| mean(s)).collect();
    let d = (k > 0 && !cand.is_empty()).then(|| mean(&cand) - mean(&mb));
    let mut lv = LevelTest::new(Design::History, d);
    lv.sessions_base = k;
    lv.sessions_head = usize::from(!cand.is_empty());
    lv.n_base = base.iter().map(Vec::len).sum();
    lv.n_head = cand.len();
    lv.ignored_base = ignored_base;
    lv.ignored_head = ignored_head;
    if d.is_none() {
        return lv.finish(guard);
    }
    let sessions: Vec<&Vec<f64>> = base.iter().chain(std::iter::once(&cand)).collect();
    let (s2w, dfw) = pooled_within(&sessions);
    lv.sigma_w = (dfw > 0).then(|| s2w.sqrt());
    let nc = cand.len() as f64;
    let n_harm = kf / base.iter().map(|s| 1.0 / s.len() as f64).sum::<f64>();
    if dfw > 0 {
        lv.set_within(
            (s2w * (1.0 / nc + 1.0 / lv.n_base as f64)).sqrt(),
            dfw as f64,
        );
    }
    if k >= 2 {
        let s2m = var(&mb);
        let a = s2m * (1.0 + 1.0 / kf);
        let coef = (1.0 / nc - 1.0 / n_harm).max(0.0);
        // The within term needs s_w^2; with no within-session df it is unknown.
        let c = if coef > 0.0 { coef * s2w } else { 0.0 };
        let v = a + c;
        let df = if v > 0.0 {
            let within = if c > 0.0 {
                (c / v).powi(2) / dfw as f64
            } else {
                0.0
            };
            1.0 / ((a / v).powi(2) / (kf - 1.0) + within)
        } else {
            kf - 1.0
        };
        lv.set_main(v.sqrt(), df);
        if dfw > 0 {
            let sb2 = s2m - s2w / n_harm;
            lv.sigma_b2_raw = finite(sb2);
            lv.sigma_b = finite(sb2.max(0.0).sqrt());
        }
        lv.sigma_b_df = Some(kf - 1.0);
    } else {
        lv.sigma_b_df = Some(0.0);
    }
    lv.finish(guard)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::{decide, t_cdf, DecisionSettings};
    use super::*;

    /// A session of 5 trials around `mean` (within-session sd about 0.3%).
    fn session(mean: f64) -> Vec<f64> {
        [-0.004, -0.002, 0.0, 0.002, 0.004]
            .map(|e| mean + e)
            .to_vec()
    }

    #[test]
    fn the_between_session_term_keeps_a_drop_within_the_session_spread_from_failing() {
        // k = 4 sessions whose means spread by +-6%; the candidate is 7% below their mean,
        // inside that spread. Within-session noise alone would call it a certain regression.
        let base: Vec<Vec<f64>> = [-0.06, -0.02, 0.02, 0.06].map(session).to_vec();
        let mut lv = [history_level(&base, &session(-0.07), 0.25)];
        let verdict = decide(&mut lv, &DecisionSettings::default());
        let lv = &lv[0];
        assert_eq!(verdict, LevelOutcome::Inconclusive);
        assert!(
            lv.sigma_b.unwrap() > 0.04,
            "sigma_b reported: {:?}",
            lv.sigma_b
        );
        assert!(
            lv.mdd.unwrap() > 0.2,
            "the MDD carries sigma_b: {:?}",
            lv.mdd
        );
        // With s_m^2 replaced by 0, only the within-session se remains: a sure failure.
        let without = t_cdf(lv.d.unwrap() / lv.se_w, lv.df_w);
        assert!(
            without < 1e-6 && lv.ratio.unwrap() <= 0.97,
            "p without s_m^2: {without}"
        );
    }

    #[test]
    fn history_credits_sigma_b_with_k_minus_1_df_not_the_pooled_trials() {
        // k = 3 sessions (means -1%, 0, +1%), candidate 5% lower: t = -4.3 is significant on
        // the pooled trials' 16 df, not on the 2 df three session means have.
        let base: Vec<Vec<f64>> = [-0.01, 0.0, 0.01].map(session).to_vec();
        let mut lv = [history_level(&base, &session(-0.05), 0.25)];
        let verdict = decide(&mut lv, &DecisionSettings::default());
        let lv = &lv[0];
        assert_eq!(lv.df, 2.0);
        assert_eq!(lv.sigma_b_df, Some(2.0));
        assert_eq!(verdict, LevelOutcome::Inconclusive);
        let t = lv.d.unwrap() / lv.se.unwrap();
        assert!(
            t_cdf(t, lv.df_w) < 0.008,
            "pooled df {} would fail it",
            lv.df_w
        );
        assert!(lv.p > 0.008);
    }

    #[test]
    fn one_baseline_session_fails_only_a_gross_drop_through_the_guard() {
        let base = vec![session(0.0)];
        let s = DecisionSettings::default();
        let mut gross = [history_level(&base, &session(0.70_f64.ln()), s.guard)];
        assert_eq!(decide(&mut gross, &s), LevelOutcome::Regression);
        assert!(gross[0].guard_tripped);
        assert_eq!((gross[0].se, gross[0].p, gross[0].mdd), (None, 1.0, None));
        // 20%: beyond any 6 v 6 noise, but within what one session cannot rule out.
        let mut big = [history_level(&base, &session(0.80_f64.ln()), s.guard)];
        assert_eq!(decide(&mut big, &s), LevelOutcome::Inconclusive);
        assert!(!big[0].guard_tripped);
    }

    /// 6 v 6 around 215 tok/s with base trial 2 in the slow mode (146 tok/s).
    fn slow_base() -> (Vec<f64>, Vec<f64>) {
        let b = [215.0_f64, 214.0, 146.0, 216.0, 213.0, 215.5]
            .map(f64::ln)
            .to_vec();
        let h = [202.0_f64, 203.0, 201.0, 204.0, 202.5, 201.5]
            .map(f64::ln)
            .to_vec();
        (b, h)
    }

    #[test]
    fn the_outlier_rule_applies_to_one_session_relative_only() {
        let (b, h) = slow_base();
        let one = relative_level(&b, &h, &[], &[], 0.25);
        assert_eq!((one.dropped_base, one.dropped_head, one.n_base), (1, 0, 5));
        // The same trials from 3 server starts per arm: sessions are the unit, nothing dropped.
        let blocks = [0, 0, 1, 1, 2, 2];
        let restarts = relative_level(&b, &h, &blocks, &blocks, 0.25);
        assert_eq!((restarts.dropped_base, restarts.sessions_base), (0, 3));
        assert!(restarts.sigma_b.is_some());
        // History never drops.
        let hist = history_level(&[b.clone(), h.clone()], &b, 0.25);
        assert_eq!((hist.dropped_base, hist.dropped_head), (0, 0));
    }

    #[test]
    fn nothing_is_dropped_when_the_mad_is_zero() {
        let b = [5.0, 5.0, 5.0, 5.0, 5.0, 5.2];
        let h = [5.0, 5.0, 5.0, 5.0, 5.0, 5.0];
        let lv = relative_level(&b, &h, &[], &[], 0.25);
        assert_eq!((lv.dropped_base, lv.dropped_head), (0, 0));
    }

    #[test]
    fn too_few_trials_left_and_empty_arms_are_not_estimable() {
        let lv = relative_level(&[1.0, 1.1], &[1.0, 1.2, 1.1], &[], &[], 0.25);
        assert!(!lv.estimable());
        assert_eq!((lv.p, lv.se, lv.df), (1.0, None, 0.0));
        let empty = relative_level(&[], &[1.0, 1.2, 1.1], &[], &[], 0.25);
        assert_eq!((empty.d, empty.ratio, empty.p), (None, None, 1.0));
        let no_base = history_level(&[], &[1.0, 1.1], 0.25);
        assert_eq!((no_base.d, no_base.p_guard), (None, 1.0));
    }

    #[test]
    fn non_finite_values_are_ignored_and_counted() {
        let b = [5.0, f64::NAN, 5.01, 4.99, f64::NEG_INFINITY];
        let h = [5.0, 5.02, f64::INFINITY, 4.98];
        let lv = relative_level(&b, &h, &[0, 0, 0, 0, 0], &[1, 1, 1, 1], 0.25);
        assert_eq!(
            (lv.ignored_base, lv.ignored_head, lv.n_base, lv.n_head),
            (2, 1, 3, 3)
        );
        assert!(lv.estimable());
    }

    #[test]
    fn a_level_round_trips_through_json_with_its_unbounded_fields() {
        let mut lv = [history_level(
            &[vec![5.0, 5.01, 4.99]],
            &[4.0, 4.01, 3.99],
            0.25,
        )];
        decide(&mut lv, &DecisionSettings::default());
        let json = serde_json::to_string(&lv[0]).unwrap();
        assert!(json.contains(r#""mdd":null"#) && json.contains(r#""outcome":"regression""#));
        let back: LevelTest = serde_json::from_str(&json).unwrap();
        assert_json_close(&back, &lv[0]);
    }

    /// Equal up to the last bit of a float: serde_json without its `float_roundtrip` feature
    /// may read a float back 1 ulp off (seen here), so exact `==` after a round trip needs
    /// that feature in Cargo.toml.
    pub(crate) fn assert_json_close(a: &LevelTest, b: &LevelTest) {
        fn close(a: &serde_json::Value, b: &serde_json::Value) -> bool {
            use serde_json::Value::*;
            match (a, b) {
                (Number(x), Number(y)) => {
                    let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
                    (x - y).abs() <= 4.0 * f64::EPSILON * x.abs().max(y.abs())
                }
                (Object(x), Object(y)) => {
                    x.len() == y.len()
                        && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| close(v, w)))
                }
                _ => a == b,
            }
        }
        let (x, y) = (
            serde_json::to_value(a).unwrap(),
            serde_json::to_value(b).unwrap(),
        );
        assert!(close(&x, &y), "{x}\n{y}");
    }
}
