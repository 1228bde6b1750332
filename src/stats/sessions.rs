//! Baselines pooled over several sessions (days, machines reboots): the one-way
//! random-effects model on ln(throughput),
//! `y_ij = mu + a_i + e_ij`, `a_i ~ (0, sigma_b^2)` per session, `e_ij ~ (0, sigma_w^2)` per trial.
//!
//! Trials of one session share the session's offset `a_i`, so the trial-to-trial variance of
//! one session understates how far a new session (the candidate's) can land from the
//! baseline. The gate adds [`session_extra_variance`] to the variance of the baseline mean.

/// Variance components of ln(values) over sessions (method of moments, one-way ANOVA).
#[derive(Debug, Clone, PartialEq)]
pub struct SessionComponents {
    /// Sessions with at least one usable value.
    pub sessions: usize,
    /// Usable values over all sessions.
    pub trials: usize,
    /// Mean of ln(values) over all trials (each trial weighs the same).
    pub mean_log: f64,
    /// Within-session mean square (estimate of sigma_w^2); 0 when no session has 2 trials.
    pub within_var: f64,
    /// Between-session variance component sigma_b^2, truncated at 0.
    pub between_var: f64,
}

fn logs(sessions: &[Vec<f64>]) -> Vec<Vec<f64>> {
    sessions
        .iter()
        .map(|s| {
            s.iter()
                .copied()
                .filter(|v| v.is_finite() && *v > 0.0)
                .map(f64::ln)
                .collect::<Vec<_>>()
        })
        .filter(|s| !s.is_empty())
        .collect()
}

/// Estimate the variance components of ln(values). Values that are not positive and finite
/// are ignored, and so are sessions left empty. Returns `None` when no value is usable.
///
/// Unbalanced one-way ANOVA, method of moments (Searle, Casella & McCulloch, *Variance
/// Components*, §3.5): with k sessions, N trials, n_i trials in session i,
/// `MSB = sum n_i (ybar_i - ybar)^2 / (k-1)`, `MSW = sum (y_ij - ybar_i)^2 / (N-k)`,
/// `n0 = (N - sum n_i^2 / N) / (k-1)`, `sigma_b^2 = max(0, (MSB - MSW) / n0)`.
///
/// With one session, or with no within-session replication at all (every session has one
/// trial, so N = k), the between component cannot be separated and is reported as 0. In the
/// second case that is still right for the gate: the pooled trials all come from different
/// sessions, so their sample variance already contains the between-session component.
pub fn session_components(sessions: &[Vec<f64>]) -> Option<SessionComponents> {
    let s = logs(sessions);
    let k = s.len();
    let n: usize = s.iter().map(Vec::len).sum();
    if n == 0 {
        return None;
    }
    let mean_log = s.iter().flatten().sum::<f64>() / n as f64;
    let means: Vec<f64> = s
        .iter()
        .map(|x| x.iter().sum::<f64>() / x.len() as f64)
        .collect();
    let ssw: f64 = s
        .iter()
        .zip(&means)
        .map(|(x, m)| x.iter().map(|v| (v - m).powi(2)).sum::<f64>())
        .sum();
    let within_var = if n > k { ssw / (n - k) as f64 } else { 0.0 };
    let between_var = if k < 2 || n == k {
        0.0
    } else {
        let ssb: f64 = s
            .iter()
            .zip(&means)
            .map(|(x, m)| x.len() as f64 * (m - mean_log).powi(2))
            .sum();
        let msb = ssb / (k - 1) as f64;
        let sum_ni2: f64 = s.iter().map(|x| (x.len() * x.len()) as f64).sum();
        let n0 = (n as f64 - sum_ni2 / n as f64) / (k - 1) as f64;
        ((msb - within_var) / n0).max(0.0)
    };
    Some(SessionComponents {
        sessions: k,
        trials: n,
        mean_log,
        within_var,
        between_var,
    })
}

/// Between-session variance component of ln(values) (see [`session_components`]);
/// 0 with fewer than two sessions, without within-session replication, or when the
/// estimate is negative.
pub fn between_session_variance(sessions: &[Vec<f64>]) -> f64 {
    session_components(sessions).map_or(0.0, |c| c.between_var)
}

/// Model-based variance of the pooled mean of ln(values) (every trial weighing 1/N):
/// `Var(ybar) = sigma_b^2 * sum n_i^2 / N^2 + sigma_w^2 / N`, from the estimated components.
/// With balanced sessions this is `(sigma_b^2 + sigma_w^2 / n) / k`. Returns `None` when no
/// value is usable, and also when the within-session variance is unknown (no session has
/// two trials), in which case use the plain sample variance of the pooled trials / N.
pub fn pooled_log_mean_variance(sessions: &[Vec<f64>]) -> Option<f64> {
    let c = session_components(sessions)?;
    if c.trials == c.sessions {
        return None;
    }
    let n = c.trials as f64;
    let sum_ni2: f64 = logs(sessions)
        .iter()
        .map(|x| (x.len() * x.len()) as f64)
        .sum();
    Some(c.between_var * sum_ni2 / (n * n) + c.within_var / n)
}

/// The amount the gate passes as `extra_baseline_var_of_mean` to
/// [`super::compare_log_ratio`] when the baseline pools several sessions:
/// `sigma_b^2 * (1 + 1/k)`.
///
/// Why: the candidate is one new session, so its mean carries one session offset
/// (variance sigma_b^2) that its own trial-to-trial variance does not show; the baseline's
/// mean carries the average of k offsets (sigma_b^2 / k), which the pooled baseline variance
/// shows only in part. Adding both is slightly conservative (the pooled baseline variance
/// already holds a little of the second term). 0 with a single baseline session: the
/// between-session component is then unknown, and the gate should say so.
pub fn session_extra_variance(sessions: &[Vec<f64>]) -> f64 {
    match session_components(sessions) {
        Some(c) if c.sessions >= 2 => c.between_var * (1.0 + 1.0 / c.sessions as f64),
        _ => 0.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, rel: f64) -> bool {
        (a - b).abs() <= rel * b.abs()
    }

    // Reference values from src/stats/reference/sessions_ref.py (NumPy, by the ANOVA formulas,
    // cross-checked against statsmodels MixedLM's REML estimate on balanced data, which for
    // balanced one-way designs equals the ANOVA estimate when positive).
    fn unbalanced() -> Vec<Vec<f64>> {
        vec![
            vec![1510.0, 1498.0, 1522.0, 1507.0],
            vec![1470.0, 1481.0, 1466.0],
            vec![1533.0, 1540.0, 1528.0, 1536.0, 1531.0],
        ]
    }
    fn balanced() -> Vec<Vec<f64>> {
        vec![
            vec![1510.0, 1498.0, 1522.0],
            vec![1470.0, 1481.0, 1466.0],
            vec![1533.0, 1540.0, 1528.0],
            vec![1502.0, 1511.0, 1495.0],
        ]
    }
    // UNBAL: numpy one-way ANOVA moments on log(values)
    const UNBAL_MEAN_LOG: f64 = 7.319836588399391;
    const UNBAL_WITHIN: f64 = 2.4551998832627576e-05;
    const UNBAL_BETWEEN: f64 = 0.0003918764013645457;
    const UNBAL_VAR_OF_MEAN: f64 = 0.00013811419482096402;
    // BAL: numpy one-way ANOVA moments on log(values)
    const BAL_MEAN_LOG: f64 = 7.316209236101876;
    const BAL_WITHIN: f64 = 3.371018054689612e-05;
    const BAL_BETWEEN: f64 = 0.00027230672279766817;
    const BAL_VAR_OF_MEAN: f64 = 7.088586241165839e-05;
    // SAME: numpy one-way ANOVA moments on log(values)
    const SAME_MEAN_LOG: f64 = 4.605086838484479;
    const SAME_WITHIN: f64 = 0.00025006376932580697;
    const SAME_BETWEEN: f64 = 0.0;
    const SAME_VAR_OF_MEAN: f64 = 4.1677294887634494e-05;
    // statsmodels.formula.api.mixedlm('y ~ 1', df, groups=session).fit(reml=True).cov_re (balanced)
    const BAL_REML_BETWEEN: f64 = 0.00027230614821277906;
    const BAL_REML_WITHIN: f64 = 3.371020578876368e-05;

    #[test]
    fn components_match_numpy_anova() {
        for (data, mean, within, between, vm) in [
            (
                unbalanced(),
                UNBAL_MEAN_LOG,
                UNBAL_WITHIN,
                UNBAL_BETWEEN,
                UNBAL_VAR_OF_MEAN,
            ),
            (
                balanced(),
                BAL_MEAN_LOG,
                BAL_WITHIN,
                BAL_BETWEEN,
                BAL_VAR_OF_MEAN,
            ),
        ] {
            let c = session_components(&data).unwrap();
            assert!(close(c.mean_log, mean, 1e-14), "{c:?}");
            assert!(close(c.within_var, within, 1e-9), "{c:?}");
            assert!(close(c.between_var, between, 1e-9), "{c:?}");
            assert!(close(between_session_variance(&data), between, 1e-9));
            assert!(close(pooled_log_mean_variance(&data).unwrap(), vm, 1e-9));
            let k = data.len() as f64;
            assert!(close(
                session_extra_variance(&data),
                between * (1.0 + 1.0 / k),
                1e-9
            ));
        }
        assert_eq!(session_components(&unbalanced()).unwrap().sessions, 3);
        assert_eq!(session_components(&unbalanced()).unwrap().trials, 12);
    }

    #[test]
    fn balanced_components_agree_with_reml() {
        let c = session_components(&balanced()).unwrap();
        assert!(close(c.between_var, BAL_REML_BETWEEN, 1e-4), "{c:?}");
        assert!(close(c.within_var, BAL_REML_WITHIN, 1e-4), "{c:?}");
    }

    #[test]
    fn negative_estimate_is_truncated_to_zero() {
        let data = vec![vec![100.0, 102.0, 98.0], vec![99.0, 101.0, 100.0]];
        assert_eq!(SAME_BETWEEN, 0.0);
        let c = session_components(&data).unwrap();
        assert_eq!(c.between_var, 0.0);
        assert!(close(c.within_var, SAME_WITHIN, 1e-9));
        assert!(close(c.mean_log, SAME_MEAN_LOG, 1e-14));
        assert!(close(
            pooled_log_mean_variance(&data).unwrap(),
            SAME_VAR_OF_MEAN,
            1e-9
        ));
        assert_eq!(session_extra_variance(&data), 0.0);
    }

    #[test]
    fn degenerate_inputs() {
        assert_eq!(between_session_variance(&[]), 0.0);
        assert!(session_components(&[vec![], vec![-1.0, f64::NAN]]).is_none());
        // One session: no between component, whatever the spread.
        assert_eq!(between_session_variance(&[vec![100.0, 150.0, 80.0]]), 0.0);
        assert_eq!(session_extra_variance(&[vec![100.0, 150.0, 80.0]]), 0.0);
        // No within-session replication: not separable, 0, and no model-based variance.
        let singles = vec![vec![100.0], vec![120.0], vec![90.0]];
        assert_eq!(between_session_variance(&singles), 0.0);
        assert_eq!(pooled_log_mean_variance(&singles), None);
        // Unusable values and empty sessions are ignored: same as the clean data.
        let mut dirty = unbalanced();
        dirty[0].push(f64::NAN);
        dirty[1].push(0.0);
        dirty.push(vec![]);
        assert!(close(between_session_variance(&dirty), UNBAL_BETWEEN, 1e-9));
    }
}
