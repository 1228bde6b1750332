//! Did the server drift during the run? A trend across the interleaved rounds.

use serde::{Deserialize, Serialize};

use super::{mean, t_cdf};

/// Two-sided p below which a trend is flagged. Calibrated: p < 0.01 flagged up to 1.45% of
/// drift-free runs under AR(1) 0.5; 0.005 keeps false flags at or below 0.7%.
pub const DRIFT_ALPHA: f64 = 0.005;
/// A flagged trend must also have moved at least 1% (log scale) over the run.
pub const DRIFT_MIN_SIZE: f64 = 0.01;

/// A trend across rounds (reference.py `drift_check`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Drift {
    /// Change of ln value per round.
    pub slope: f64,
    /// slope / se; an exact linear fit (se 0) gives +-f64::MAX, so that JSON stays numeric.
    pub t: f64,
    /// Residual df: rounds - sessions - 1.
    pub df: f64,
    /// Two-sided p.
    pub p: f64,
    /// slope * (rounds per session - 1): the log change over a session's run.
    pub size: f64,
    /// p < alpha and |size| >= the minimum size: "server drifted by `size`".
    pub flagged: bool,
}

/// [`drift_check_at`] with alpha [`DRIFT_ALPHA`] and minimum size [`DRIFT_MIN_SIZE`].
pub fn drift_check(
    cells: &[u32],
    values: &[f64],
    rounds: &[u32],
    sessions: &[u32],
) -> Option<Drift> {
    drift_check_at(cells, values, rounds, sessions, DRIFT_ALPHA, DRIFT_MIN_SIZE)
}

/// Trend across interleaved rounds, pooled over levels and arms.
///
/// Per trial: `cells` the cell it is centred in (one id per level x arm x session), `values`
/// its ln value, `rounds` its round (numbered across the run, each round inside one session),
/// `sessions` its server start. e = y - mean(cell); ebar_r = mean e over round r; OLS of ebar_r
/// on r with one intercept per session: b = sum (r - rbar_s) ebar_r / sum (r - rbar_s)^2, df =
/// R - S - 1, t = b / se(b), p = 2 F_t(-|t|; df). A round's session is that of its first
/// trial. Non-finite values are ignored. None when df < 1 (too few rounds: with restarts every
/// 2 rounds the check has df 2 and little power).
///
/// # Panics
/// When the four slices differ in length.
pub fn drift_check_at(
    cells: &[u32],
    values: &[f64],
    rounds: &[u32],
    sessions: &[u32],
    alpha: f64,
    min_size: f64,
) -> Option<Drift> {
    let n = values.len();
    assert!(
        cells.len() == n && rounds.len() == n && sessions.len() == n,
        "drift_check: {} cells, {} values, {} rounds, {} sessions",
        cells.len(),
        n,
        rounds.len(),
        sessions.len()
    );
    let ok: Vec<usize> = (0..n).filter(|&i| values[i].is_finite()).collect();
    // Residuals from cell means.
    let mut e = vec![0.0; n];
    for idx in groups(&ok, |i| cells[i]) {
        let m = mean(&idx.iter().map(|&i| values[i]).collect::<Vec<_>>());
        for &i in &idx {
            e[i] = values[i] - m;
        }
    }
    // Round means, rounds in ascending order, grouped by session (first-seen order).
    let mut by_round = groups(&ok, |i| rounds[i]);
    by_round.sort_by_key(|idx| rounds[idx[0]]);
    let round_pts: Vec<(f64, f64, u32)> = by_round
        .iter()
        .map(|idx| {
            let eb = mean(&idx.iter().map(|&i| e[i]).collect::<Vec<_>>());
            (f64::from(rounds[idx[0]]), eb, sessions[idx[0]])
        })
        .collect();
    let per_session = groups(&(0..round_pts.len()).collect::<Vec<_>>(), |j| {
        round_pts[j].2
    });
    let df = round_pts.len() as f64 - per_session.len() as f64 - 1.0;
    if df < 1.0 {
        return None;
    }
    // Centre r and ebar within each session.
    let centred: Vec<Vec<(f64, f64)>> = per_session
        .iter()
        .map(|js| {
            let rb = mean(&js.iter().map(|&j| round_pts[j].0).collect::<Vec<_>>());
            let yb = mean(&js.iter().map(|&j| round_pts[j].1).collect::<Vec<_>>());
            js.iter()
                .map(|&j| (round_pts[j].0 - rb, round_pts[j].1 - yb))
                .collect()
        })
        .collect();
    let all = || centred.iter().flatten();
    let sxx: f64 = all().map(|(x, _)| x * x).sum();
    let sxy: f64 = all().map(|(x, y)| x * y).sum();
    let b = sxy / sxx;
    let rss: f64 = all().map(|(x, y)| (y - b * x).powi(2)).sum();
    let se = (rss / df / sxx).sqrt();
    let t = if se > 0.0 {
        b / se
    } else {
        f64::MAX.copysign(b)
    };
    let p = 2.0 * t_cdf(-t.abs(), df);
    let p = if p.is_nan() { 1.0 } else { p.clamp(0.0, 1.0) };
    let span = per_session.iter().map(Vec::len).max().unwrap_or(1) as f64 - 1.0;
    let size = b * span;
    Some(Drift {
        slope: b,
        t,
        df,
        p,
        size,
        flagged: p < alpha && size.abs() >= min_size,
    })
}

/// Indices grouped by key, groups in first-seen order.
fn groups(idx: &[usize], key: impl Fn(usize) -> u32) -> Vec<Vec<usize>> {
    let mut keys: Vec<u32> = Vec::new();
    let mut out: Vec<Vec<usize>> = Vec::new();
    for &i in idx {
        let k = key(i);
        match keys.iter().position(|&x| x == k) {
            Some(g) => out[g].push(i),
            None => {
                keys.push(k);
                out.push(vec![i]);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2 cells x `rounds` rounds in one session, ln values = trend * round + wiggle.
    fn run(rounds: u32, trend: f64) -> (Vec<u32>, Vec<f64>, Vec<u32>, Vec<u32>) {
        let wiggle = [0.003, -0.002, 0.001, -0.003, 0.002, -0.001];
        let mut out = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for r in 0..rounds {
            for c in 0..2u32 {
                out.0.push(c);
                out.1.push(
                    5.0 + f64::from(c)
                        + trend * f64::from(r)
                        + wiggle[(r as usize + c as usize) % 6],
                );
                out.2.push(r);
                out.3.push(0);
            }
        }
        out
    }

    #[test]
    fn a_falling_server_is_flagged_and_a_steady_one_is_not() {
        let (c, v, r, s) = run(6, -0.015);
        let d = drift_check(&c, &v, &r, &s).unwrap();
        assert!(d.flagged && d.size < -0.05, "{d:?}");
        let (c, v, r, s) = run(6, 0.0);
        assert!(!drift_check(&c, &v, &r, &s).unwrap().flagged);
    }

    #[test]
    fn too_few_rounds_give_no_check() {
        let (c, v, r, s) = run(2, -0.015);
        assert_eq!(drift_check(&c, &v, &r, &s), None);
    }
}
