//! Change points in a series of session means: E-divisive means (Matteson & James 2014, as
//! Hunter/Otava use it on benchmark histories), significance by a permutation test.
//!
//! Why a permutation test: the series is short (tens of sessions) and its spread is whatever
//! the runners give it, so no distribution is assumed. Under "no change" the sessions are
//! exchangeable; the p-value of the best split is the share of shuffled series whose best
//! split is at least as strong, so a check at `alpha` raises a false alarm on an unchanged
//! series with probability at most `alpha` (up to the Monte Carlo error of `permutations`).
//! Several change points are found by binary segmentation: a significant split's two sides
//! are searched again, each at the same `alpha`.

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::basic::mean;

/// How the search runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ChangePointSettings {
    /// The false-alarm rate of each split's test.
    pub alpha: f64,
    /// The fewest points on each side of a split.
    pub min_segment: usize,
    /// Shuffles per test (the p-value's resolution is 1 / (permutations + 1)).
    pub permutations: usize,
    /// Seeds the shuffles, so a check is reproducible.
    pub seed: u64,
}

impl Default for ChangePointSettings {
    fn default() -> Self {
        ChangePointSettings {
            alpha: 0.05,
            min_segment: 3,
            permutations: 999,
            seed: 0x7e57,
        }
    }
}

/// A significant split: the series changes between `index - 1` and `index`.
#[derive(Debug, Clone, PartialEq)]
pub struct ChangePoint {
    /// The first point after the change.
    pub index: usize,
    /// The permutation p-value of the split, in its segment.
    pub p_value: f64,
    /// The mean of the segment's points before and after the split.
    pub mean_before: f64,
    pub mean_after: f64,
}

/// Finds the change points of `series` (sorted by index). Non-finite values are an error of
/// the caller's; they are skipped here by treating the series as too short.
pub fn change_points(series: &[f64], settings: &ChangePointSettings) -> Vec<ChangePoint> {
    let mut found = Vec::new();
    if series.iter().any(|v| !v.is_finite()) || settings.min_segment == 0 {
        return found;
    }
    let mut rng = ChaCha8Rng::seed_from_u64(settings.seed);
    let mut pending = vec![(0, series.len())];
    while let Some((start, end)) = pending.pop() {
        let segment = &series[start..end];
        let Some(test) = best_split(segment, settings, &mut rng) else {
            continue;
        };
        if test.p_value >= settings.alpha {
            continue;
        }
        let (before, after) = segment.split_at(test.split);
        found.push(ChangePoint {
            index: start + test.split,
            p_value: test.p_value,
            mean_before: mean(before),
            mean_after: mean(after),
        });
        pending.push((start, start + test.split));
        pending.push((start + test.split, end));
    }
    found.sort_by_key(|c| c.index);
    found
}

struct SplitTest {
    split: usize,
    p_value: f64,
}

/// The strongest split of `segment` and its permutation p-value; None when the segment is
/// too short to split.
fn best_split(
    segment: &[f64],
    settings: &ChangePointSettings,
    rng: &mut ChaCha8Rng,
) -> Option<SplitTest> {
    let (split, observed) = strongest(segment, settings.min_segment)?;
    let mut shuffled = segment.to_vec();
    let mut at_least = 0usize;
    for _ in 0..settings.permutations {
        shuffled.shuffle(rng);
        if let Some((_, q)) = strongest(&shuffled, settings.min_segment) {
            // A relative tolerance: ties (e.g. a constant series) count as "as strong".
            if q >= observed * (1.0 - 1e-12) {
                at_least += 1;
            }
        }
    }
    let p_value = (at_least + 1) as f64 / (settings.permutations + 1) as f64;
    Some(SplitTest { split, p_value })
}

/// The split with the largest E-divisive statistic (Matteson & James, alpha = 1): for a
/// split `tau` and a segment end `kappa`, with X = x[..tau] and Y = x[tau..kappa],
/// Q = mn/(m+n) * (2/(mn) sum|x-y| - 1/C(m,2) sum|x-x'| - 1/C(n,2) sum|y-y'|),
/// maximised over both (the free end finds a change that later reverts, which a split of
/// the whole series alone can miss). Sums over blocks of the distance matrix come from its
/// 2-D prefix sums, so one scan costs O(n^2).
fn strongest(x: &[f64], min_segment: usize) -> Option<(usize, f64)> {
    let n = x.len();
    let min_segment = min_segment.max(2);
    if n < 2 * min_segment {
        return None;
    }
    // prefix[i][j] = sum of |x_a - x_b| over a < i, b < j.
    let width = n + 1;
    let mut prefix = vec![0.0f64; width * width];
    for i in 0..n {
        let mut row = 0.0;
        for j in 0..n {
            row += (x[i] - x[j]).abs();
            prefix[(i + 1) * width + j + 1] = prefix[i * width + j + 1] + row;
        }
    }
    let block = |r0: usize, r1: usize, c0: usize, c1: usize| {
        prefix[r1 * width + c1] - prefix[r0 * width + c1] - prefix[r1 * width + c0]
            + prefix[r0 * width + c0]
    };
    let mut best: Option<(usize, f64)> = None;
    for split in min_segment..=(n - min_segment) {
        let m = split as f64;
        // Each within-block sum counts every pair twice.
        let within_before = block(0, split, 0, split) / (m * (m - 1.0));
        for end in (split + min_segment)..=n {
            let k = (end - split) as f64;
            let between = block(0, split, split, end) / (m * k);
            let within_after = block(split, end, split, end) / (k * (k - 1.0));
            let q = m * k / (m + k) * (2.0 * between - within_before - within_after);
            if best.is_none_or(|(_, b)| q > b) {
                best = Some((split, q));
            }
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::Rng;

    /// Independent normal draws (Box-Muller).
    fn noise(n: usize, sd: f64, seed: u64) -> Vec<f64> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        (0..n)
            .map(|_| {
                let (u, v): (f64, f64) = (rng.gen_range(f64::EPSILON..1.0), rng.gen());
                sd * (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
            })
            .collect()
    }

    /// The statistic against a direct O(n^2) evaluation of the definition.
    #[test]
    fn prefix_sums_match_the_definition() {
        let x: [f64; 7] = [1.0, 4.0, 2.5, 9.0, 8.0, 7.5, 10.0];
        let direct = |x: &[f64], split: usize| {
            let (a, b) = x.split_at(split);
            let (m, k) = (a.len() as f64, b.len() as f64);
            let mut between = 0.0;
            for p in a {
                for q in b {
                    between += (p - q).abs();
                }
            }
            let pairs = |s: &[f64]| {
                let mut t = 0.0;
                for i in 0..s.len() {
                    for j in i + 1..s.len() {
                        t += (s[i] - s[j]).abs();
                    }
                }
                let c = s.len() as f64 * (s.len() as f64 - 1.0) / 2.0;
                t / c
            };
            m * k / (m + k) * (2.0 * between / (m * k) - pairs(a) - pairs(b))
        };
        let (split, q) = strongest(&x, 2).unwrap();
        let best_direct = (2..=5)
            .flat_map(|s| (s + 2..=x.len()).map(move |e| (s, e)))
            .map(|(s, e)| (s, direct(&x[..e], s)))
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .unwrap();
        assert_eq!(split, best_direct.0);
        assert!((q - best_direct.1).abs() < 1e-9, "{q} vs {}", best_direct.1);
        assert_eq!(split, 3, "the jump is between 2.5 and 9.0");
    }

    #[test]
    fn a_step_of_three_sds_is_found_about_where_it_is() {
        let mut series = noise(30, 0.01, 1);
        for v in &mut series[18..] {
            *v -= 0.03;
        }
        let found = change_points(&series, &ChangePointSettings::default());
        assert_eq!(found.len(), 1, "{found:?}");
        // Noise can move the estimate by a session (here one draw after the step is high).
        assert!((17..=19).contains(&found[0].index), "{found:?}");
        assert!(found[0].p_value < 0.01, "{found:?}");
        assert!(found[0].mean_after < found[0].mean_before);
    }

    #[test]
    fn two_steps_are_both_found() {
        let mut series = noise(40, 0.01, 2);
        for v in &mut series[12..] {
            *v -= 0.05;
        }
        for v in &mut series[28..] {
            *v += 0.08;
        }
        let found: Vec<usize> = change_points(&series, &ChangePointSettings::default())
            .iter()
            .map(|c| c.index)
            .collect();
        assert_eq!(found, vec![12, 28]);
    }

    /// A change that reverts: a split of the whole series alone does not stand out from
    /// the shuffles (p 0.058 at this series); the free segment end finds it.
    #[test]
    fn a_drop_that_recovers_is_found_at_both_ends() {
        let wobble = [0.0, 0.01, -0.01, 0.005, -0.005];
        let series: Vec<f64> = (0..30)
            .map(|i| wobble[i % 5] + if (10..20).contains(&i) { -0.1 } else { 0.0 })
            .collect();
        let found: Vec<usize> = change_points(&series, &ChangePointSettings::default())
            .iter()
            .map(|c| c.index)
            .collect();
        assert_eq!(found, vec![10, 20]);
    }

    #[test]
    fn too_short_or_constant_series_have_none() {
        let settings = ChangePointSettings::default();
        assert!(change_points(&[1.0, 2.0, 3.0, 4.0, 5.0], &settings).is_empty());
        assert!(change_points(&[5.0; 20], &settings).is_empty());
        assert!(change_points(&[1.0, f64::NAN, 1.0, 1.0, 1.0, 1.0, 1.0], &settings).is_empty());
    }

    /// The stated false-alarm rate, measured: on unchanged series (independent normal
    /// sessions), the first split is significant at alpha = 0.05 in about 5% of series.
    #[test]
    fn false_alarm_rate_is_alpha_on_unchanged_series() {
        let settings = ChangePointSettings {
            permutations: 199,
            ..ChangePointSettings::default()
        };
        let series_count = 400;
        let alarms = (0..series_count)
            .filter(|&s| !change_points(&noise(20, 0.02, 1000 + s), &settings).is_empty())
            .count();
        let rate = alarms as f64 / series_count as f64;
        eprintln!("false-alarm rate {rate} over {series_count} unchanged series of 20");
        // Binomial(400, 0.05): sd 1.1 points; 2.2%-8.5% is about +-3 sd.
        assert!((0.022..=0.085).contains(&rate), "false-alarm rate {rate}");
    }
}
