//! Main's history and its trend: every session a baseline file has held (its current
//! sessions and, from git, those its window has since dropped), one mean per session and
//! level, and the change points of that series (`stats::changepoint`). A slow drift that no
//! single pull request shows becomes visible here; a nightly check fails when the latest
//! shift is a slowdown.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};

use super::baseline::{Baseline, Session, BASELINE_FILE_BYTES};
use super::gitref;
use crate::stats::changepoint::{change_points, ChangePointSettings};

/// The most commits read back from git: years of nightly blesses, and a bound.
pub const MAX_COMMITS: usize = 5_000;

/// The latest sessions per level searched for shifts, by default (`trend --window`): most of
/// a year of nightly sessions. The search costs (window)^2 per shuffle, so the window bounds
/// it: 2,000 sessions searched whole took minutes, 40,000 asked for 12.8 GB.
pub const WINDOW: usize = 250;
/// The largest `--window`.
pub const MAX_WINDOW: usize = 1_000;

/// The sessions of a baseline's history, oldest first.
#[derive(Debug, Clone)]
pub struct History {
    pub name: String,
    /// The baseline's minimum effect (a shift smaller than this is reported, not failed).
    pub min_effect: f64,
    pub sessions: Vec<Session>,
    /// Committed versions of the file that were read (0 when git was not used).
    pub versions_read: usize,
    /// What of the history was left out, and why (reported, not fatal).
    pub unreadable: Vec<String>,
}

/// Collects the sessions of `path`: the working-tree file's, plus every committed version's
/// when `from_git` (sessions are told apart by when they were measured and at which commit).
pub fn collect(path: &Path, from_git: bool) -> Result<History> {
    let current = Baseline::load(path)?;
    let mut sessions: BTreeMap<(String, Option<String>), Session> = BTreeMap::new();
    let mut versions_read = 0;
    let mut unreadable = Vec::new();
    if from_git {
        let versions = match gitref::versions_of(path, MAX_COMMITS, BASELINE_FILE_BYTES as usize) {
            Ok(versions) => versions,
            // Not in a repository (or no commits yet): the file's own sessions, said so.
            Err(e) => {
                unreadable.push(format!("its git history was not read: {e:#}"));
                Vec::new()
            }
        };
        for version in versions {
            versions_read += 1;
            let origin = format!("{} at {}", path.display(), &version.commit[..10]);
            match Baseline::parse(&version.text, &origin) {
                Ok(old) if old.profile_hash == current.profile_hash => {
                    for s in old.sessions {
                        sessions.insert((s.measured_at.clone(), s.commit.clone()), s);
                    }
                }
                // A different profile measured something else: not the same series.
                Ok(_) => unreadable.push(format!(
                    "the version at {} measured another profile (its hash differs): left out",
                    &version.commit[..10]
                )),
                Err(e) => unreadable.push(format!(
                    "the version at {} was left out: {e:#}",
                    &version.commit[..10]
                )),
            }
        }
    }
    for s in current.sessions {
        sessions.insert((s.measured_at.clone(), s.commit.clone()), s);
    }
    let mut sessions: Vec<Session> = sessions.into_values().collect();
    sessions.sort_by_cached_key(|s| sort_key(&s.measured_at));
    Ok(History {
        name: current.name,
        min_effect: current.gate.min_effect,
        sessions,
        versions_read,
        unreadable,
    })
}

/// RFC 3339 stamps in any offset, ordered by the instant they name (unparsable ones first,
/// by their text).
fn sort_key(stamp: &str) -> (i128, String) {
    let instant =
        time::OffsetDateTime::parse(stamp, &time::format_description::well_known::Rfc3339)
            .map(|t| t.unix_timestamp_nanos())
            .unwrap_or(i128::MIN);
    (instant, stamp.to_string())
}

/// One session's figure at one level.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TrendPoint {
    pub measured_at: String,
    pub commit: Option<String>,
    /// The geometric mean of the session's trial tok/s (the gate works on ln tok/s).
    pub tok_per_s: f64,
    pub trials: usize,
}

/// A shift in one level's series.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Shift {
    /// The first session after the shift.
    pub measured_at: String,
    pub commit: Option<String>,
    /// The commit of the last session before the shift: the change lies in
    /// `before_commit..commit` (what `bisect` searches).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before_commit: Option<String>,
    /// Geometric-mean tok/s after / before (within the segment the split was found in).
    pub ratio: f64,
    pub p_value: f64,
}

/// One level's trend.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LevelTrend {
    pub concurrency: u32,
    pub points: Vec<TrendPoint>,
    pub shifts: Vec<Shift>,
    /// The latest shift is a slowdown of at least the baseline's minimum effect.
    pub slower: bool,
}

/// The trend of every level.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Trend {
    pub name: String,
    pub sessions: usize,
    /// Each level's test runs at alpha / levels, so that the chance of any false alarm on
    /// an unchanged history is at most `alpha`.
    pub alpha: f64,
    pub min_effect: f64,
    /// The most sessions per level searched for shifts: the latest ones (earlier sessions
    /// are drawn, not tested). 0 in files from before the window.
    #[serde(default)]
    pub window: usize,
    pub levels: Vec<LevelTrend>,
}

/// A shift's commits, when both sessions recorded one that reads as a commit id (a
/// baseline file is hand-editable: anything else is not put in a command).
pub fn commit_range(shift: &Shift) -> Option<(&str, &str)> {
    fn id(c: Option<&str>) -> Option<&str> {
        c.filter(|c| (7..=64).contains(&c.len()) && c.bytes().all(|b| b.is_ascii_hexdigit()))
    }
    Some((
        id(shift.before_commit.as_deref())?,
        id(shift.commit.as_deref())?,
    ))
}

impl Trend {
    /// Whether some level has more sessions than the window searched.
    pub fn windowed(&self) -> bool {
        self.levels.iter().any(|l| l.points.len() > self.window)
    }

    /// The levels whose latest shift is a slowdown of at least the minimum effect.
    pub fn slower_levels(&self) -> Vec<u32> {
        self.levels
            .iter()
            .filter(|l| l.slower)
            .map(|l| l.concurrency)
            .collect()
    }
}

/// The trend of `history`'s levels; `alpha` is the family-wise false-alarm rate. Shifts are
/// searched in the latest [`WINDOW`] sessions of each level.
pub fn analyse(history: &History, alpha: f64, settings: &ChangePointSettings) -> Result<Trend> {
    analyse_latest(history, alpha, settings, WINDOW)
}

/// [`analyse`], searching the latest `window` sessions of each level for shifts.
pub fn analyse_latest(
    history: &History,
    alpha: f64,
    settings: &ChangePointSettings,
    window: usize,
) -> Result<Trend> {
    if !(alpha > 0.0 && alpha < 1.0) {
        bail!("alpha must be between 0 and 1 (exclusive), got {alpha}");
    }
    if !(2..=MAX_WINDOW).contains(&window) {
        bail!("the window must be from 2 to {MAX_WINDOW} sessions, got {window}");
    }
    let mut by_level: BTreeMap<u32, Vec<TrendPoint>> = BTreeMap::new();
    for s in &history.sessions {
        for level in &s.levels {
            let logs: Vec<f64> = level
                .tok_per_s
                .iter()
                .filter(|v| crate::stats::is_positive(**v))
                .map(|v| v.ln())
                .collect();
            if logs.is_empty() {
                continue;
            }
            by_level
                .entry(level.concurrency)
                .or_default()
                .push(TrendPoint {
                    measured_at: s.measured_at.clone(),
                    commit: s.commit.clone(),
                    tok_per_s: crate::stats::mean(&logs).exp(),
                    trials: logs.len(),
                });
        }
    }
    let per_level = ChangePointSettings {
        alpha: alpha / by_level.len().max(1) as f64,
        ..*settings
    };
    let levels = by_level
        .into_iter()
        .map(|(concurrency, points)| {
            let start = points.len().saturating_sub(window);
            let series: Vec<f64> = points[start..].iter().map(|p| p.tok_per_s.ln()).collect();
            let shifts: Vec<Shift> = change_points(&series, &per_level)
                .into_iter()
                .map(|c| Shift {
                    measured_at: points[start + c.index].measured_at.clone(),
                    commit: points[start + c.index].commit.clone(),
                    before_commit: (start + c.index)
                        .checked_sub(1)
                        .and_then(|i| points[i].commit.clone()),
                    ratio: (c.mean_after - c.mean_before).exp(),
                    p_value: c.p_value,
                })
                .collect();
            let slower = shifts
                .last()
                .is_some_and(|s| s.ratio <= 1.0 - history.min_effect);
            LevelTrend {
                concurrency,
                points,
                shifts,
                slower,
            }
        })
        .collect();
    Ok(Trend {
        name: history.name.clone(),
        sessions: history.sessions.len(),
        alpha,
        min_effect: history.min_effect,
        window,
        levels,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::baseline::BaselineLevel;

    fn session(day: u32, tok_per_s: f64) -> Session {
        Session {
            measured_at: format!("2026-10-{day:02}T03:00:00Z"),
            commit: Some(format!("{day:040}")),
            tool: "throughline test".into(),
            runner: None,
            levels: vec![BaselineLevel {
                concurrency: 8,
                tok_per_s: vec![tok_per_s * 0.99, tok_per_s, tok_per_s * 1.01],
                per_request_tok_per_s: vec![],
                ttft_p99_ms: vec![],
                itl_p99_ms: vec![],
                e2e_p99_ms: vec![],
            }],
        }
    }

    fn history(values: &[f64]) -> History {
        History {
            name: "t".into(),
            min_effect: 0.03,
            sessions: values
                .iter()
                .enumerate()
                .map(|(i, v)| session(i as u32 + 1, *v))
                .collect(),
            versions_read: 0,
            unreadable: vec![],
        }
    }

    /// A wobble of +-1% with a 6% drop from session 13 on.
    fn wobble(i: usize) -> f64 {
        [1.0, 1.01, 0.99, 1.005, 0.995][i % 5]
    }

    #[test]
    fn only_commit_ids_make_a_range() {
        let shift = |before: &str, after: &str| Shift {
            measured_at: "2026-10-13T03:00:00Z".into(),
            commit: Some(after.into()),
            before_commit: Some(before.into()),
            ratio: 0.9,
            p_value: 0.001,
        };
        let (a, b) = ("1a2b3c4d".to_string(), "e".repeat(40));
        assert_eq!(commit_range(&shift(&a, &b)), Some((a.as_str(), b.as_str())));
        // A hand-edited file: text that is not a commit id never reaches a command.
        assert_eq!(commit_range(&shift("main; rm -rf /", &b)), None);
        assert_eq!(commit_range(&shift(&a, "abc")), None);
    }

    #[test]
    fn a_lasting_drop_is_a_slower_level_at_the_session_it_began() {
        let values: Vec<f64> = (0..24)
            .map(|i| 1000.0 * wobble(i) * if i >= 12 { 0.94 } else { 1.0 })
            .collect();
        let trend = analyse(&history(&values), 0.05, &ChangePointSettings::default()).unwrap();
        let level = &trend.levels[0];
        assert_eq!(level.points.len(), 24);
        assert_eq!(level.shifts.len(), 1, "{:?}", level.shifts);
        assert_eq!(level.shifts[0].measured_at, "2026-10-13T03:00:00Z");
        assert!(
            (level.shifts[0].ratio - 0.94).abs() < 0.01,
            "{:?}",
            level.shifts
        );
        assert_eq!(trend.slower_levels(), vec![8]);
    }

    #[test]
    fn a_recovered_drop_or_a_speedup_is_not_slower() {
        let recovered: Vec<f64> = (0..30)
            .map(|i| 1000.0 * wobble(i) * if (10..20).contains(&i) { 0.9 } else { 1.0 })
            .collect();
        let trend = analyse(&history(&recovered), 0.05, &ChangePointSettings::default()).unwrap();
        assert_eq!(
            trend.levels[0].shifts.len(),
            2,
            "{:?}",
            trend.levels[0].shifts
        );
        assert!(trend.slower_levels().is_empty());
        let faster: Vec<f64> = (0..20)
            .map(|i| 1000.0 * wobble(i) * if i >= 10 { 1.1 } else { 1.0 })
            .collect();
        let trend = analyse(&history(&faster), 0.05, &ChangePointSettings::default()).unwrap();
        assert_eq!(trend.levels[0].shifts.len(), 1);
        assert!(trend.slower_levels().is_empty());
    }

    #[test]
    fn a_drop_smaller_than_the_minimum_effect_is_reported_not_failed() {
        let values: Vec<f64> = (0..24)
            .map(|i| 1000.0 * (1.0 + 0.001 * wobble(i)) * if i >= 12 { 0.98 } else { 1.0 })
            .collect();
        let trend = analyse(&history(&values), 0.05, &ChangePointSettings::default()).unwrap();
        assert_eq!(trend.levels[0].shifts.len(), 1);
        assert!(
            trend.slower_levels().is_empty(),
            "2% < the 3% minimum effect"
        );
    }

    #[test]
    fn sessions_sort_by_instant_across_offsets() {
        assert!(sort_key("2026-10-01T23:00:00-05:00") > sort_key("2026-10-02T01:00:00Z"));
        assert!(sort_key("not a date") < sort_key("2026-10-02T01:00:00Z"));
    }

    /// A shift before the window is not searched; one inside it is found where it is.
    #[test]
    fn only_the_latest_window_is_searched() {
        let values: Vec<f64> = (0..60)
            .map(|i| 1000.0 * wobble(i) * if i >= 10 { 0.9 } else { 1.0 })
            .collect();
        let s = ChangePointSettings::default();
        let trend = analyse_latest(&history(&values), 0.05, &s, 40).unwrap();
        assert!(trend.levels[0].shifts.is_empty() && trend.windowed());
        assert_eq!(trend.levels[0].points.len(), 60);
        let late: Vec<f64> = (0..60)
            .map(|i| 1000.0 * wobble(i) * if i >= 45 { 0.9 } else { 1.0 })
            .collect();
        let trend = analyse_latest(&history(&late), 0.05, &s, 40).unwrap();
        assert_eq!(trend.levels[0].shifts.len(), 1);
        assert_eq!(
            trend.levels[0].shifts[0].measured_at,
            "2026-10-46T03:00:00Z"
        );
        assert!(analyse_latest(&history(&late), 0.05, &s, 1).is_err());
    }

    #[test]
    fn alpha_outside_zero_one_is_refused() {
        let h = history(&[1.0; 8]);
        assert!(analyse(&h, 0.0, &ChangePointSettings::default()).is_err());
        assert!(analyse(&h, 1.0, &ChangePointSettings::default()).is_err());
    }
}
