//! The outlier rule of a relative comparison inside one session (both arms served by one
//! server start each): real servers have slow modes (on llama.cpp one trial in five ran at
//! 146 instead of about 215 tok/s), and one such trial makes a 6-trial level undecidable.

use super::median;

/// Robust-z threshold: a trial is dropped beyond 5 robust standard deviations.
pub const OUTLIER_Z: f64 = 5.0;
/// The least distance (ln scale, about 5%) from both medians that makes a trial an outlier:
/// a slow mode is tens of percent, while on a very steady server 5 robust sds can be a few
/// tenths of a percent, and a trial 0.3% off is no outlier. Does not bind at the calibrated
/// noise (CV 2% puts 5 robust sds near 10%).
pub const OUTLIER_MIN_DISTANCE: f64 = 0.05;
/// 1 / Phi^-1(3/4): turns a median absolute deviation into a normal standard deviation.
const MAD_K: f64 = 1.482602218505602;

/// Which trials the rule drops, per arm (`true` = outlier).
///
/// mb, mh = the arms' medians; s = 1.4826 * median of the 2n own-arm residuals
/// {|y - mb| : base} U {|y - mh| : head}; a trial is an outlier when its distance to the
/// *nearer* arm median, min(|y - mb|, |y - mh|), exceeds `z * s` and
/// [`OUTLIER_MIN_DISTANCE`]. Nothing is dropped when
/// s = 0 or an arm is empty. Symmetric in the arms, and it never picks a mode inside one arm:
/// a trial that sits with the other arm's bulk is kept, so an arm whose majority is slow keeps
/// all its trials (centring on each arm's own median instead gave 8% false failures).
///
/// Used only for one-session relative comparisons: with restarts the cells hold 1-3 trials,
/// and in history mode a level-wide median would call a real regression of the single
/// candidate session an outlier.
pub fn outlier_mask_relative(base: &[f64], head: &[f64], z: f64) -> (Vec<bool>, Vec<bool>) {
    let keep_all = (vec![false; base.len()], vec![false; head.len()]);
    if base.is_empty() || head.is_empty() {
        return keep_all;
    }
    let (mb, mh) = (median(base), median(head));
    let own: Vec<f64> = base
        .iter()
        .map(|v| (v - mb).abs())
        .chain(head.iter().map(|v| (v - mh).abs()))
        .collect();
    let s = MAD_K * median(&own);
    // s is NaN only for absurd inputs (an overflow); keep everything then too.
    if s.is_nan() || s <= 0.0 {
        return keep_all;
    }
    let limit = (z * s).max(OUTLIER_MIN_DISTANCE);
    let out = |v: &f64| (v - mb).abs().min((v - mh).abs()) > limit;
    (
        base.iter().map(out).collect(),
        head.iter().map(out).collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_steady_server_has_no_outliers_within_a_few_percent() {
        // Spread 0.01%: 5 robust sds are 0.05%, but a trial 0.4% off is still kept.
        let base = [1000.0_f64, 1000.1, 999.9, 1000.05, 996.0].map(f64::ln);
        let head = [900.0_f64, 900.1, 899.9, 900.05, 899.95].map(f64::ln);
        let (mb, mh) = outlier_mask_relative(&base, &head, OUTLIER_Z);
        assert_eq!(mb, [false; 5]);
        assert_eq!(mh, [false; 5]);
    }

    #[test]
    fn a_slow_mode_trial_is_dropped_and_the_other_arms_bulk_is_kept() {
        let base = [215.0_f64, 214.0, 146.0, 216.0, 213.0, 215.5].map(f64::ln);
        let head = [202.0_f64, 203.0, 201.0, 204.0, 202.5, 201.5].map(f64::ln);
        let (mb, mh) = outlier_mask_relative(&base, &head, OUTLIER_Z);
        assert_eq!(mb, [false, false, true, false, false, false]);
        assert_eq!(mh, [false; 6]);
    }

    #[test]
    fn an_arm_whose_majority_is_slow_keeps_all_its_trials() {
        // 4 of 6 head trials slow: the head median is slow, but its 2 normal trials sit with
        // the base bulk, so nothing is dropped.
        let base = [215.0_f64, 214.0, 216.0, 213.0, 215.5, 214.5].map(f64::ln);
        let head = [146.0_f64, 147.0, 214.0, 145.0, 215.0, 146.5].map(f64::ln);
        let (mb, mh) = outlier_mask_relative(&base, &head, OUTLIER_Z);
        assert!(mb.iter().chain(&mh).all(|&x| !x));
    }

    #[test]
    fn nothing_is_dropped_when_the_mad_is_zero() {
        // More than half the residuals are 0: s = 0, and the far value stays.
        let base = [5.0, 5.0, 5.0, 5.0, 9.0];
        let head = [5.0, 5.0, 5.0, 5.0, 5.0];
        let (mb, mh) = outlier_mask_relative(&base, &head, OUTLIER_Z);
        assert!(mb.iter().chain(&mh).all(|&x| !x));
    }
}
