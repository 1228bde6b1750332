//! What changed besides tok/s: beside a relative verdict, every figure the run recorded for
//! both arms (client latencies and lengths, the server's own telemetry) compared head with
//! base per level, with a bound from the same trials and the same estimator the gate uses:
//! in a run in blocks `crossover_level` on the blocks the gate reads (paired by slot
//! orientation, so a slot effect cancels and the start spread is in the bound), else
//! `relative_level` (Welch on the trials of one start per arm, whose start effect no bound
//! covers: the changes say so).
//! A figure is listed only when its bound excludes "unchanged" at a family level of 5% over
//! every figure and level that varied (Bonferroni, with Tarone's rule: a comparison that
//! cannot list anything takes no share), and it moved by more than its floor; then typed
//! rules over the moved figures give ranked readings ("the KV cache fills sooner"), never a
//! match on text.

mod bound;
mod figure;
mod moved;
mod reading;

use serde::{Deserialize, Serialize};

use crate::record::{LevelResult, RunResult};

use bound::{can_list, compare, Compared};
pub use figure::Figure;
pub use moved::{Moved, EXPLAIN_ALPHA};
use reading::read;
pub use reading::{Cause, Reading};

/// What changed at one level.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LevelChanges {
    pub concurrency: u32,
    /// Figures recorded for both arms that the blocks could not compare (too few blocks of
    /// each orientation and no calibration: the start spread unknown), so not listed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_estimable: Vec<Figure>,
    /// The figures that moved, largest first.
    pub moved: Vec<Moved>,
    /// Typed readings, likeliest first.
    pub readings: Vec<Reading>,
}

/// The "what changed" section of a relative verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Changes {
    /// Figures compared (per level); the comparisons over all levels that could list a
    /// figure (recorded in both arms, estimable, and varying), and the level of each after
    /// Bonferroni over those (0 in verdicts written before the family was counted so).
    pub figures_compared: usize,
    #[serde(default)]
    pub comparisons: usize,
    pub per_test_alpha: f64,
    /// The run was in blocks (servers started fresh, slots swapped), so the bounds cover
    /// start and slot effects; false with one start per arm, where a start effect (one start
    /// of a server faster than another) can be listed as a change.
    #[serde(default)]
    pub starts_covered: bool,
    pub levels: Vec<LevelChanges>,
}

impl Changes {
    /// The likeliest reading over all levels (the highest level's first reading, levels
    /// with more load showing a cause most clearly).
    pub fn top(&self) -> Option<&Reading> {
        self.levels.iter().rev().find_map(|l| l.readings.first())
    }
}

/// Compares every figure of a relative run's two arms; None for a run of one arm.
pub fn explain(run: &RunResult) -> Option<Changes> {
    let base = run.base.as_ref()?;
    let pairs: Vec<(&LevelResult, &LevelResult)> = (run.levels.iter())
        .filter_map(|h| {
            let b = base
                .levels
                .iter()
                .find(|b| b.concurrency == h.concurrency)?;
            Some((b, h))
        })
        .collect();
    // The family: the comparisons that could list a figure. A figure absent from an arm, not
    // estimable, or the same value in every trial of both arms (no errors, a fixed prompt)
    // cannot be listed at any level, so it takes no share of the 5% (Tarone's rule for
    // tests that cannot reach significance): with fewer tests the rest keep more power.
    let tests = (pairs.iter())
        .flat_map(|(b, h)| {
            Figure::ALL
                .iter()
                .map(move |&f| can_list(f, &b.trials, &h.trials))
        })
        .filter(|&can| can)
        .count();
    let per_test_alpha = EXPLAIN_ALPHA / tests.max(1) as f64;
    let in_blocks = (run.levels.iter().chain(&base.levels))
        .flat_map(|l| &l.trials)
        .any(|t| t.block.is_some());
    let levels = pairs
        .into_iter()
        .map(|(b, h)| {
            let mut moved = Vec::new();
            let mut not_estimable = Vec::new();
            for &f in &Figure::ALL {
                match compare(f, &b.trials, &h.trials, per_test_alpha) {
                    Compared::Moved(m) => moved.push(m),
                    Compared::NotEstimable => not_estimable.push(f),
                    Compared::Within | Compared::Absent => {}
                }
            }
            moved.sort_by(|x, y| size(y).total_cmp(&size(x)));
            let readings = read(&moved);
            LevelChanges {
                concurrency: h.concurrency,
                not_estimable,
                moved,
                readings,
            }
        })
        .collect();
    Some(Changes {
        figures_compared: Figure::ALL.len(),
        comparisons: tests,
        per_test_alpha,
        starts_covered: in_blocks,
        levels,
    })
}

/// How far a figure moved, in units comparable across figures (its floors).
fn size(m: &Moved) -> f64 {
    if m.ratio_scale {
        m.change.ln().abs() / m.figure.floor()
    } else {
        m.change.abs() / m.figure.floor()
    }
}
