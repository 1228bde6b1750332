//! What a command throughline starts for the user (a server, bisect's build) must not
//! inherit from its environment (issue 47).
//!
//! On GitHub Actions the step's environment names the runner's file commands: a line
//! appended to `$GITHUB_OUTPUT` is a step output (the workflow reads the verdict there), to
//! `$GITHUB_ENV` or `$GITHUB_PATH` the environment of every later step (`LD_PRELOAD=...`),
//! to `$GITHUB_STEP_SUMMARY` the job summary. A started server inherited them, and wrote
//! `accepted=true` into the outputs, a "pass" heading into the summary and an `LD_PRELOAD`
//! line for the steps after. The server measured is the pull request's code: it must not
//! write what the step says about it. The runner's tokens (caches, artifacts, OIDC) and
//! the repository's token are no business of a server or a build either.
//!
//! Kept: everything else, `HF_TOKEN` and the profile's API key variable above all (the
//! documentation says they reach the server). A build that needs a token gets it under
//! another name, written in its command.
//!
//! This stops the inheritance only: a process of the same user can still read another's
//! environment in /proc. Only a server run as another user is kept from the files.

use std::process::Command;

/// The variables removed from the environment of every command throughline starts for
/// the user: the runner's file commands, its service tokens and URLs, its OIDC request
/// token, and the repository tokens a workflow puts in the environment (`GH_TOKEN` is the
/// one the `gh` CLI reads: scripts/gate-server.sh's comment step takes it).
pub const WITHHELD_ENV: &[&str] = &[
    "GITHUB_OUTPUT",
    "GITHUB_ENV",
    "GITHUB_PATH",
    "GITHUB_STATE",
    "GITHUB_STEP_SUMMARY",
    "ACTIONS_RUNTIME_TOKEN",
    "ACTIONS_RUNTIME_URL",
    "ACTIONS_CACHE_URL",
    "ACTIONS_RESULTS_URL",
    "ACTIONS_ID_TOKEN_REQUEST_TOKEN",
    "ACTIONS_ID_TOKEN_REQUEST_URL",
    "GITHUB_TOKEN",
    "GH_TOKEN",
];

/// Removes [`WITHHELD_ENV`] from `cmd`'s environment.
pub fn withhold(cmd: &mut Command) -> &mut Command {
    for var in WITHHELD_ENV {
        cmd.env_remove(var);
    }
    cmd
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_withheld_variables_are_removed_and_the_rest_kept() {
        let mut cmd = Command::new("sh");
        cmd.env("GITHUB_OUTPUT", "/tmp/out").env("HF_TOKEN", "hf");
        withhold(&mut cmd);
        let envs: Vec<_> = cmd.get_envs().collect();
        for var in WITHHELD_ENV {
            assert!(
                envs.contains(&(std::ffi::OsStr::new(var), None)),
                "{var} is not removed"
            );
        }
        assert!(envs.contains(&(
            std::ffi::OsStr::new("HF_TOKEN"),
            Some(std::ffi::OsStr::new("hf"))
        )));
    }
}
