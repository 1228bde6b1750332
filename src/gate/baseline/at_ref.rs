//! The baseline and the profile it names, read as they are at a git ref (the pull request's
//! target branch), so that a pull request can neither approve itself nor change what is
//! measured; and the refusals that need no measurement (an edited profile, another
//! environment), made before any GPU time is spent.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use super::{fingerprint_differences_except, Baseline, ARM_FIELDS};
use crate::exit::not_comparable;
use crate::profile::Profile;
use crate::record::fingerprint::FingerprintField;
use crate::record::Environment;

/// The git ref to read the baseline at: the one given, else the pull request's target
/// branch (`GITHUB_BASE_REF`).
pub fn resolve_ref(given: Option<&str>, github_base_ref: Option<&str>) -> Result<String> {
    if let Some(r) = given {
        return Ok(r.to_string());
    }
    match github_base_ref.map(str::trim).filter(|s| !s.is_empty()) {
        Some(branch) => Ok(format!("origin/{branch}")),
        None => bail!(
            "--baseline-ref is needed: GITHUB_BASE_REF is not set (this is not a pull_request \
             event); pass the branch the baseline lives on, e.g. --baseline-ref origin/main"
        ),
    }
}

/// What a check measures and compares with, as it is at the target branch's ref.
pub struct AtRef {
    pub reference: String,
    pub baseline: Baseline,
    /// The profile the baseline names, its files resolved beside it.
    pub profile: Profile,
    /// Where the profile is in the working tree.
    pub profile_path: PathBuf,
    /// The profile's text at the ref (compared with the working tree's).
    profile_text: String,
}

impl AtRef {
    /// Reads the baseline at `reference` and the profile its `profile` field names.
    pub fn read(baseline_path: &Path, reference: &str) -> Result<AtRef> {
        let baseline = Baseline::load_at_ref(baseline_path, reference).with_context(|| {
            format!(
                "cannot read the baseline at {reference} (in GitHub Actions, check out with \
                 `fetch-depth: 0` so that the target branch is there)"
            )
        })?;
        let Some(relative) = &baseline.profile else {
            bail!(
                "baseline {} at {reference} has no `profile` field, so `throughline ci` cannot \
                 tell what to run; bless it again with --profile FILE (relative to the baseline)",
                baseline_path.display()
            );
        };
        let dir = baseline_path.parent().unwrap_or_else(|| Path::new(""));
        let profile_path = dir.join(relative);
        let profile_text = crate::gate::gitref::read_at_ref(&profile_path, reference)
            .with_context(|| {
                format!("the profile named by baseline {}", baseline_path.display())
            })?;
        let mut profile = Profile::parse(&profile_text).with_context(|| {
            format!("invalid profile {} at {reference}", profile_path.display())
        })?;
        // Its files relative to it, as bench and bless take them (one function for all).
        profile.resolve_files(&profile_path)?;
        Ok(AtRef {
            reference: reference.to_string(),
            baseline,
            profile,
            profile_path,
            profile_text,
        })
    }

    /// A warning when the working tree's profile differs from the ref's: the check measures
    /// the ref's (the one the baseline was measured with).
    pub fn edited_here(&self) -> Option<String> {
        let limit = crate::profile::limits::PROFILE_FILE_BYTES;
        let here = crate::fsutil::read_bounded(&self.profile_path, limit).ok()?;
        (here != self.profile_text).then(|| {
            format!(
                "this change edits {}; the check measures the profile as it is at {}, which \
                 the baseline was measured with. Bless a new baseline after merging.",
                self.profile_path.display(),
                self.reference
            )
        })
    }

    /// Not comparable (exit 3) when the profile, as it will be run, is not the one the
    /// baseline was measured with.
    pub fn refuse_another_profile(&self) -> Result<()> {
        let hash = self.profile.canonical_hash()?;
        if hash != self.baseline.profile_hash {
            return Err(not_comparable(format!(
                "the profile {} at {} ({hash}) is not the one baseline {} was measured with \
                 ({}): the profile was edited without blessing a new baseline",
                self.profile_path.display(),
                self.reference,
                self.baseline.name,
                self.baseline.profile_hash
            )));
        }
        Ok(())
    }
}

/// Not comparable (exit 3) when what is known of the environment before measuring differs
/// from the baseline's. In relative mode the engine and its version are each arm's own (the
/// change may be an engine upgrade), so only the rest is compared.
pub fn refuse_another_environment(
    baseline: &Baseline,
    env: &Environment,
    relative: bool,
) -> Result<()> {
    let skip: &[&str] = if relative { &ARM_FIELDS } else { &[] };
    let (differ, _) = fingerprint_differences_except(&baseline.environment, env, skip);
    if !differ.is_empty() {
        return Err(not_comparable(format!(
            "the environment differs from baseline {}'s: {} (nothing was measured; bless a new \
             baseline for this environment)",
            baseline.name,
            differ.join("; ")
        )));
    }
    Ok(())
}

/// The fingerprint in one line, for logs and summaries (the server's words unescaped: the
/// caller makes it safe for where it goes).
pub fn fingerprint_line(env: &Environment) -> String {
    let mut parts = Vec::new();
    let mut push = |k: &str, v: Option<String>| {
        if let Some(v) = v {
            parts.push(format!("{k} {v}"));
        }
    };
    for field in FingerprintField::ALL {
        push(field.label(), field.read(env));
    }
    push("runner", env.runner.clone());
    parts.push(format!("endpoints {}", env.endpoints));
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ref_comes_from_the_flag_or_the_pull_requests_target() {
        assert_eq!(resolve_ref(Some("v1"), Some("main")).unwrap(), "v1");
        assert_eq!(resolve_ref(None, Some("main")).unwrap(), "origin/main");
        let err = resolve_ref(None, Some("")).unwrap_err().to_string();
        assert!(err.contains("--baseline-ref"), "{err}");
        assert!(resolve_ref(None, None).is_err());
    }
}
