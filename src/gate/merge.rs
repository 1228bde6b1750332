//! Verdicts of several checks (e.g. one per GPU runner of a workflow matrix) combined into
//! one, the worst outcome winning (regression > not comparable > pass).

use serde::{Deserialize, Serialize};

use super::verdict::{Outcome, Verdict};
use crate::exit::Exit;

/// The combined verdict (`verdict.json` of `throughline merge`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MergedVerdict {
    pub outcome: Outcome,
    /// The lowest candidate/baseline ratio over every check.
    pub worst_ratio: Option<f64>,
    pub checks: Vec<Check>,
}

/// One check that went into the combined verdict.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Check {
    /// The verdict file it was read from.
    pub file: String,
    pub verdict: Verdict,
    /// The legs whose blocks this check pooled into one verdict (gate/pool.rs); empty for a
    /// leg's own check.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pooled: Vec<String>,
}

/// How bad an outcome is: the worst one decides the combined verdict.
fn severity(o: Outcome) -> u8 {
    match o {
        Outcome::Pass => 0,
        Outcome::Inconclusive => 1,
        Outcome::NotComparable => 2,
        Outcome::Regression => 3,
    }
}

impl MergedVerdict {
    /// A regression that every regressed check let through as intended
    /// (`ci --allow-regression`), and no other check fails the whole (a refused or failing
    /// inconclusive one is not hidden behind "accepted"): the whole exits 0.
    pub fn regression_accepted(&self) -> bool {
        self.outcome == Outcome::Regression
            && self.exit() == Exit::Pass
            && (self.checks.iter())
                .filter(|c| c.verdict.outcome == Outcome::Regression)
                .all(|c| c.verdict.regression_accepted())
    }

    /// The exit code: the worst of the checks' own (each under its own settings, so an
    /// inconclusive check fails only where its baseline says so, and an accepted regression
    /// not at all).
    pub fn exit(&self) -> Exit {
        let rank = |e: Exit| match e {
            Exit::Regression => 3,
            Exit::NotComparable => 2,
            Exit::Pass => 0,
            _ => 1,
        };
        self.checks
            .iter()
            .map(|c| c.verdict.exit())
            .max_by_key(|e| rank(*e))
            .unwrap_or(Exit::Pass)
    }
}

/// Combines verdicts; `None` when there are none.
pub fn combine(checks: Vec<Check>) -> Option<MergedVerdict> {
    let outcome = checks
        .iter()
        .map(|c| c.verdict.outcome)
        .max_by_key(|o| severity(*o))?;
    let worst_ratio = checks
        .iter()
        .filter_map(|c| c.verdict.worst_ratio)
        .min_by(f64::total_cmp);
    Some(MergedVerdict {
        outcome,
        worst_ratio,
        checks,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::verdict::SettingOverride;

    /// The checks' outcomes merged, each accepted (`ci --allow-regression`) where said.
    fn merged(legs: &[(Outcome, bool)]) -> MergedVerdict {
        let checks = (legs.iter()).map(|&(outcome, accepted)| {
            let mut verdict = Verdict::refused("b", "p", None, Default::default(), "why");
            verdict.outcome = outcome;
            if accepted {
                verdict.overridden.push(SettingOverride::allow_regression());
            }
            Check {
                file: format!("{outcome:?}.json"),
                verdict,
                pooled: Vec::new(),
            }
        });
        combine(checks.collect()).unwrap()
    }

    #[test]
    fn a_regression_is_accepted_only_where_nothing_else_fails_the_whole() {
        let alone = merged(&[(Outcome::Regression, true)]);
        assert!(alone.regression_accepted());
        assert_eq!(alone.exit(), Exit::Pass);
        let beside_pass = merged(&[(Outcome::Regression, true), (Outcome::Pass, false)]);
        assert!(beside_pass.regression_accepted());
        // A leg that regressed without the input fails the whole.
        let unaccepted = merged(&[(Outcome::Regression, true), (Outcome::Regression, false)]);
        assert!(!unaccepted.regression_accepted());
        assert_eq!(unaccepted.exit(), Exit::Regression);
        // A refused leg is not hidden behind "accepted": the whole exits 3 and says no
        // acceptance.
        let refused = merged(&[(Outcome::Regression, true), (Outcome::NotComparable, false)]);
        assert!(!refused.regression_accepted());
        assert_eq!(refused.exit(), Exit::NotComparable);
    }
}
