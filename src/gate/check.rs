//! How a run is judged, built once from a command's flags: against what, with which
//! settings, what may be let through, and what the verdict says of where its settings came
//! from. `gate`, `ci` and bisect's steps judge through it, so the client review and the
//! verdict's provenance are filled in one way everywhere.

use anyhow::Result;

use super::baseline::Baseline;
use super::{Outcome, SettingOverride, Verdict};
use crate::profile::GateSettings;
use crate::record::RunResult;

/// What a run is compared with.
#[derive(Debug, Clone)]
pub enum Against {
    /// A baseline: its profile, environment and (for one server) its sessions.
    Baseline(Baseline),
    /// The run's own two arms (a relative run), nothing outside vouching for them.
    OwnArms,
    /// The run's own two arms, with the slots' A/A calibration of a baseline that vouches
    /// for nothing else (a bisect step: `gate::bisect::step_verdict`).
    CalibratedArms(Option<Baseline>),
}

/// A run's judge: the rule, the settings and what the verdict says of them.
#[derive(Debug, Clone)]
pub struct Check {
    pub against: Against,
    pub settings: GateSettings,
    /// Settings given in place of the baseline's (`--alpha`..., `--allow-regression`),
    /// listed in the verdict.
    pub overridden: Vec<SettingOverride>,
    /// Decide on a run whose load generator could have moved the verdict.
    pub allow_client_bound: bool,
    /// Where the settings came from ("baseline main at origin/main"), for the verdict.
    pub settings_from: Option<String>,
    /// The git ref the baseline was read at.
    pub baseline_ref: Option<String>,
    /// What the command found before measuring (an edited profile), said first among the
    /// verdict's warnings: annotations show only the first few.
    pub said_first: Vec<String>,
}

impl Check {
    /// A check with `settings` and nothing overridden or allowed.
    pub fn new(against: Against, settings: GateSettings) -> Check {
        Check {
            against,
            settings,
            overridden: Vec::new(),
            allow_client_bound: false,
            settings_from: None,
            baseline_ref: None,
            said_first: Vec::new(),
        }
    }

    /// The baseline compared with, if any (its sessions are drawn beside the run).
    pub fn baseline(&self) -> Option<&Baseline> {
        match &self.against {
            Against::Baseline(b) => Some(b),
            Against::CalibratedArms(b) => b.as_ref(),
            Against::OwnArms => None,
        }
    }

    /// The gate's rule alone: what the sequential looks ask at each look.
    pub fn decide(&self, run: &RunResult) -> Result<Verdict> {
        match &self.against {
            Against::Baseline(b) => super::evaluate(b, run, &self.settings),
            Against::OwnArms => super::evaluate_relative(run, &self.settings),
            Against::CalibratedArms(b) => {
                super::bisect::step_verdict(run, &self.settings, b.as_ref())
            }
        }
    }

    /// The verdict on `run`: decided, reviewed for the client's part (`results` names the
    /// saved results.json for the way on), with what was overridden and where the settings
    /// came from.
    pub fn judge(&self, run: &RunResult, results: &str) -> Result<Verdict> {
        let mut verdict = self.decide(run)?;
        let regate = |r: &RunResult| self.decide(r);
        super::client_bound::review(&mut verdict, run, self.allow_client_bound, results, &regate)?;
        verdict.overridden = self.overridden.clone();
        verdict.settings_from = self.settings_from.clone();
        verdict.baseline_ref = self.baseline_ref.clone();
        if let Some(line) = partial(run) {
            // A pass of some levels is not a pass of the pull request.
            if verdict.outcome == Outcome::Pass {
                verdict.outcome = Outcome::Inconclusive;
            }
            verdict.warnings.insert(0, line);
        }
        if !self.said_first.is_empty() {
            let mut warnings = self.said_first.clone();
            warnings.append(&mut verdict.warnings);
            verdict.warnings = warnings;
        }
        Ok(verdict)
    }
}

/// What a run that measured only some of its profile's levels (`--levels`: a later wave's
/// leg) must say: its verdict is not the pull request's, the merge's is.
fn partial(run: &RunResult) -> Option<String> {
    let only = &run.servers.as_ref()?.only_levels;
    let all = &run.profile.sweep.concurrency;
    if only.is_empty() || all.iter().all(|c| only.contains(c)) {
        return None;
    }
    Some(format!(
        "measured only {} of the profile's {} (--levels): one leg of a later wave, at best \
         inconclusive on its own; `merge` pools it with the legs that measured every level, \
         and the merge's verdict is the pull request's",
        crate::record::levels_text(only),
        crate::record::levels_text(all)
    ))
}
