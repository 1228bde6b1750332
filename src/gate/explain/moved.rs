//! One figure that moved beyond noise at one level, and the chance an unchanged run lists
//! one.

use serde::{Deserialize, Serialize};

use super::figure::Figure;

/// The chance, over all figures and levels that varied together, that an unchanged run lists a
/// figure.
pub const EXPLAIN_ALPHA: f64 = 0.05;

/// One figure that moved beyond noise at one level.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Moved {
    pub figure: Figure,
    /// Geometric (ratios) or arithmetic (differences) means over the trials.
    pub base: f64,
    pub head: f64,
    /// head / base for a ratio figure, head - base for a difference, with its bounds.
    pub change: f64,
    pub low: f64,
    pub high: f64,
    pub ratio_scale: bool,
}

impl Moved {
    /// "batch size 14.2 -> 9.8 (-31%)", "KV cache 61% -> 93%".
    pub fn said(&self) -> String {
        let f = self.figure;
        let mut s = format!(
            "{} {} -> {}",
            f.name(),
            f.show(self.base),
            f.show(self.head)
        );
        if self.ratio_scale {
            s.push_str(&format!(" ({:+.0}%)", (self.change - 1.0) * 100.0));
        }
        s
    }

    pub(super) fn up(&self) -> bool {
        if self.ratio_scale {
            self.change > 1.0
        } else {
            self.change > 0.0
        }
    }
}
