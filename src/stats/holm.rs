//! Holm's step-down correction across the gated levels: a family of tests at level alpha
//! without Bonferroni's loss of power.

/// Holm–Bonferroni adjusted p-values, returned in the input order.
///
/// Sorted ascending, the i-th smallest (0-based) gets `(m - i) * p`, made monotone
/// non-decreasing by a running maximum and capped at 1. A level fails at family-wise level
/// alpha exactly when its adjusted p-value is below alpha. NaN p-values are treated as 1.
pub fn holm(p_values: &[f64]) -> Vec<f64> {
    let m = p_values.len();
    let p: Vec<f64> = p_values
        .iter()
        .map(|&x| if x.is_nan() { 1.0 } else { x.clamp(0.0, 1.0) })
        .collect();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&a, &b| p[a].total_cmp(&p[b]));
    let mut out = vec![1.0; m];
    let mut running = 0.0_f64;
    for (rank, &idx) in order.iter().enumerate() {
        let adj = ((m - rank) as f64 * p[idx]).min(1.0);
        running = running.max(adj);
        out[idx] = running;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn close(a: f64, b: f64, rel: f64) -> bool {
        (a - b).abs() <= rel * b.abs()
    }

    // Reference values from src/stats/reference/welch_ref.py (statsmodels).
    // statsmodels.stats.multitest.multipletests([0.01, 0.04, 0.03, 0.005, 0.5], method='holm')[1]
    const REF_HOLM: [f64; 5] = [0.04, 0.09, 0.09, 0.025, 0.5];
    // statsmodels.stats.multitest.multipletests([0.2, 0.2, 0.001, 0.9], method='holm')[1]
    const REF_HOLM2: [f64; 4] = [0.6000000000000001, 0.6000000000000001, 0.004, 0.9];

    #[test]
    fn holm_matches_statsmodels() {
        let a = holm(&[0.01, 0.04, 0.03, 0.005, 0.5]);
        for (g, w) in a.iter().zip(REF_HOLM) {
            assert!(close(*g, w, 1e-12), "{a:?}");
        }
        let a = holm(&[0.2, 0.2, 0.001, 0.9]);
        for (g, w) in a.iter().zip(REF_HOLM2) {
            assert!(close(*g, w, 1e-12), "{a:?}");
        }
        assert!(holm(&[]).is_empty());
        assert_eq!(holm(&[0.3]), vec![0.3]);
        assert_eq!(holm(&[0.6, 0.7, f64::NAN]), vec![1.0, 1.0, 1.0]);
    }

    #[test]
    fn holm_is_monotone_and_capped() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        for _ in 0..200 {
            let m = rng.gen_range(1..12);
            let p: Vec<f64> = (0..m).map(|_| rng.gen::<f64>().powi(3)).collect();
            let a = holm(&p);
            for i in 0..m {
                assert!(a[i] >= p[i] && a[i] <= 1.0);
                for j in 0..m {
                    if p[i] < p[j] {
                        assert!(a[i] <= a[j], "{p:?} -> {a:?}");
                    }
                }
            }
        }
    }
}
