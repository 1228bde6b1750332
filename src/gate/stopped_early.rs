//! The size a regression in blocks reports (issue 48 item 7). A run in blocks stops at the
//! first look where a level fails, so the drop it reports is one that crossed the fail bound:
//! on average larger than the true drop, the more so the noisier the blocks and the nearer
//! the drop to what the look could just tell. The crossover bench measures by how much
//! (benches/gate_crossover.rs, table 10); the verdict says so beside the figure an accepted
//! regression would carry.

use super::{LevelStatus, Outcome, Verdict};

/// The note for a regression of a run in blocks: which levels' drops read high, and where
/// the measured inflation is. None for any other verdict.
pub(super) fn note(verdict: &Verdict) -> Option<String> {
    if verdict.outcome != Outcome::Regression {
        return None;
    }
    let failed: Vec<String> = (verdict.levels.iter())
        .filter(|l| l.metric.is_throughput() && l.status == LevelStatus::Regression)
        .filter_map(|l| {
            Some(format!(
                "C={} {:.1}%",
                l.concurrency,
                (1.0 - l.ratio?) * 100.0
            ))
        })
        .collect();
    (!failed.is_empty()).then(|| {
        format!(
            "size: the run stopped at the first look where a level failed, so the drop it \
             reports ({}) is one that crossed the fail bound and reads larger than the true \
             one, most for drops near the bound and at large start spreads (by how much: \
             docs/gate-calibration.md, table 10); measure again before quoting the size",
            failed.join(", ")
        )
    })
}
