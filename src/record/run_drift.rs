//! The server's drift across a run's interleaved rounds, from the trials' tok/s.

use super::RunResult;
use crate::stats::decision::{drift_check, Drift};

impl RunResult {
    /// The trend of ln tok/s across the interleaved rounds, over every level and both arms
    /// (each trial centred on its level and arm, `stats::decision::drift_check`). None when
    /// the trials carry no round (a sequential or older run) or there are too few rounds.
    pub fn drift(&self) -> Option<Drift> {
        let base = self
            .base
            .as_ref()
            .map(|b| b.levels.as_slice())
            .unwrap_or(&[]);
        let (mut cells, mut values, mut rounds) = (Vec::new(), Vec::new(), Vec::new());
        // A run in blocks: each block is its own session (its servers started fresh).
        let mut sessions = Vec::new();
        for (arm, levels) in [&self.levels[..], base].into_iter().enumerate() {
            for (i, level) in levels.iter().enumerate() {
                for t in level.trials.iter().filter(|t| t.measured()) {
                    if !crate::stats::is_positive(t.output_tok_per_s) {
                        continue;
                    }
                    cells.push((arm * 100_000 + i) as u32);
                    values.push(t.output_tok_per_s.ln());
                    rounds.push(t.round?);
                    sessions.push(t.block.unwrap_or(0));
                }
            }
        }
        drift_check(&cells, &values, &rounds, &sessions)
    }
}
