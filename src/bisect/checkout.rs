//! The commits a bisect walks and a checkout of each: a git worktree (so that builds which
//! read their own git metadata, such as setuptools-scm's version, work), built by the
//! user's command with a time limit, reused while it is at the right commit and built.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{bail, Context, Result};

use crate::load::run::interrupt::Interrupt;
use crate::load::servers::shell_quoted;
use crate::process::group::{signal_group, stop_group};

/// The most commits a bisect walks (a range this long takes 18 steps).
const MAX_COMMITS: usize = 200_000;

/// A commit on the walk: its full id and subject line (untrusted text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Commit {
    pub id: String,
    pub subject: String,
}

impl Commit {
    /// The short id shown to people.
    pub fn short(&self) -> &str {
        &self.id[..self.id.len().min(10)]
    }
}

/// The repository's work tree and the two ends, resolved.
pub struct Walk {
    pub repo_dir: PathBuf,
    pub good: Commit,
    /// The commits after `good` up to the bad ref, oldest first (the bad ref last), along
    /// first parents: a merged branch counts as the merge commit that brought it in.
    pub commits: Vec<Commit>,
}

fn commit_id(repo: &git2::Repository, spec: &str, flag: &str) -> Result<git2::Oid> {
    let object = repo
        .revparse_single(spec)
        .with_context(|| format!("{flag} {spec}: not a commit in this repository"))?;
    let commit = object
        .peel_to_commit()
        .with_context(|| format!("{flag} {spec}: not a commit"))?;
    Ok(commit.id())
}

fn described(c: &git2::Commit<'_>) -> Commit {
    Commit {
        id: c.id().to_string(),
        subject: c.summary().unwrap_or("").to_string(),
    }
}

/// Resolves `good` and `bad` in the repository at (or above) `dir` and lists the commits
/// between them.
pub fn walk(dir: &Path, good: &str, bad: &str) -> Result<Walk> {
    let repo = git2::Repository::discover(dir)
        .with_context(|| format!("{} is not in a git repository", dir.display()))?;
    let Some(work_dir) = repo.workdir().map(Path::to_path_buf) else {
        bail!(
            "{}: a bare repository has no work tree to build",
            dir.display()
        );
    };
    let good_commit = repo.find_commit(commit_id(&repo, good, "--good")?)?;
    let bad_commit = repo.find_commit(commit_id(&repo, bad, "--bad")?)?;
    if good_commit.id() == bad_commit.id() {
        bail!("--good {good} and --bad {bad} are the same commit: nothing lies between them");
    }
    if !repo.graph_descendant_of(bad_commit.id(), good_commit.id())? {
        bail!(
            "--bad {bad} does not descend from --good {good}: the good commit must be an \
             ancestor of the bad one"
        );
    }
    let mut walk = repo.revwalk()?;
    walk.push(bad_commit.id())?;
    walk.hide(good_commit.id())?;
    walk.simplify_first_parent()?;
    walk.set_sorting(git2::Sort::TOPOLOGICAL)?;
    let mut commits = Vec::new();
    for id in walk {
        let id = id?;
        if commits.len() == MAX_COMMITS {
            bail!("more than {MAX_COMMITS} commits between --good and --bad: choose closer refs");
        }
        commits.push(described(&repo.find_commit(id)?));
    }
    commits.reverse();
    Ok(Walk {
        repo_dir: work_dir,
        good: described(&good_commit),
        commits,
    })
}

/// The default output folder: `throughline-bisect-NAME` beside the work tree of the
/// repository at (or above) `dir`, NAME the work tree's folder name. Never inside the tree,
/// where `git status` would list it, `git clean` delete a half-done bisect's log, and a build
/// of the tree pick up its checkouts.
pub fn beside_work_tree(dir: &Path) -> Result<PathBuf> {
    let repo = git2::Repository::discover(dir)
        .with_context(|| format!("{} is not in a git repository", dir.display()))?;
    let Some(work_dir) = repo.workdir() else {
        bail!(
            "{}: a bare repository has no work tree to build",
            dir.display()
        );
    };
    let work_dir = work_dir
        .canonicalize()
        .with_context(|| format!("cannot resolve {}", work_dir.display()))?;
    match (work_dir.parent(), work_dir.file_name()) {
        (Some(parent), Some(name)) => {
            Ok(parent.join(format!("throughline-bisect-{}", name.to_string_lossy())))
        }
        _ => bail!(
            "the work tree {} has no folder beside it for bisect's files: give one with -o DIR \
             (outside the work tree)",
            work_dir.display()
        ),
    }
}

/// A command template run in `dir`: `cd DIR && TEMPLATE` (its {port}, {slot} and {gpus}
/// stay for the server lifecycle to fill). The folder is a path, never a template: quoted
/// for the shell, its braces doubled so that the template's rules give them back as they are
/// (`-o 'out_{x}'` is a folder, not a placeholder).
pub fn in_dir(dir: &Path, template: &str) -> String {
    let quoted = shell_quoted(&dir.to_string_lossy())
        .replace('{', "{{")
        .replace('}', "}}");
    format!("cd {quoted} && {template}")
}

fn git(repo_dir: &Path, args: &[&str]) -> Result<String> {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(repo_dir)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .context("cannot run git (is it installed?)")?;
    if !out.status.success() {
        bail!(
            "git {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Where a commit's checkout lives under OUT.
pub fn checkout_dir(out: &Path, commit: &Commit) -> PathBuf {
    out.join("worktrees").join(commit.short())
}

/// The marker saying a checkout was built by `build` (so a resumed bisect reuses it).
fn built_marker(dir: &Path) -> PathBuf {
    dir.with_extension("built")
}

/// Why a commit could not be made ready (it is skipped, not fatal).
#[derive(Debug)]
pub struct NotReady(pub String);

/// Checks `commit` out in its worktree under OUT (reused when it is already there and
/// built) and runs `build` in it. Err(NotReady) when the build fails or times out; an
/// error when a signal stopped it. A checkout that is not ready is removed (and git's
/// record of it), whatever stopped it: its build log stays beside it.
pub async fn ready(
    walk: &Walk,
    out: &Path,
    commit: &Commit,
    build: Option<&str>,
    build_timeout: Duration,
    stop: &mut Stop,
) -> Result<std::result::Result<PathBuf, NotReady>> {
    let dir = checkout_dir(out, commit);
    let marker = built_marker(&dir);
    let at = dir
        .is_dir()
        .then(|| git(&dir, &["rev-parse", "HEAD"]).ok())
        .flatten();
    if at.as_deref() == Some(commit.id.as_str()) && marker.is_file() {
        return Ok(Ok(dir));
    }
    remove(walk, &dir);
    let _ = std::fs::remove_file(&marker);
    if let Some(parent) = dir.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot create {}", parent.display()))?;
    }
    git(
        &walk.repo_dir,
        &[
            "worktree",
            "add",
            "--detach",
            "--force",
            &dir.to_string_lossy(),
            &commit.id,
        ],
    )
    .with_context(|| format!("cannot check out {}", commit.short()))?;
    if let Some(build) = build {
        let log = dir.with_extension("build.log");
        match run_build(&dir, build, &log, build_timeout, stop).await {
            Ok(Ok(())) => {}
            Ok(Err(why)) => {
                remove(walk, &dir);
                return Ok(Err(NotReady(why)));
            }
            Err(e) => {
                remove(walk, &dir);
                return Err(e);
            }
        }
    }
    if let Err(e) = std::fs::write(&marker, &commit.id) {
        remove(walk, &dir);
        return Err(e).with_context(|| format!("cannot write {}", marker.display()));
    }
    Ok(Ok(dir))
}

/// How long a build stopped by a signal has after SIGTERM before its group is killed.
const BUILD_GRACE: Duration = Duration::from_secs(5);

/// SIGINT and SIGTERM, watched for the whole bisect: the process's one stop switch
/// (load/run/interrupt.rs), which the measurement of each step looks at too. Once watched
/// the signals no longer end the process, so the bisect looks here between steps and while
/// a build runs.
pub struct Stop(Interrupt);

impl Stop {
    /// Starts watching; inside the tokio runtime.
    pub fn from_signals() -> Stop {
        Stop(Interrupt::from_signals())
    }

    /// A switch tripped by hand (tests): `Interrupt::trigger` with the signal's number.
    #[cfg(test)]
    fn manual() -> (Interrupt, Stop) {
        let i = Interrupt::manual(Duration::from_secs(3));
        (i.clone(), Stop(i))
    }

    /// The signal received, if one was.
    pub fn signal(&self) -> Option<i32> {
        self.0.signal()
    }

    /// Waits for a signal (forever, if none can come).
    pub async fn stopped(&mut self) -> i32 {
        self.0.stopping().await;
        self.0.signal().unwrap_or(libc::SIGTERM)
    }

    /// Err(interrupted) once a signal was received.
    pub fn check(&self) -> Result<()> {
        match self.signal() {
            Some(sig) => Err(interrupted(sig)),
            None => Ok(()),
        }
    }
}

/// The error of a bisect stopped by signal `sig`: it exits 128 + sig (130, 143).
pub fn interrupted(sig: i32) -> anyhow::Error {
    crate::exit::CodedError {
        exit: crate::exit::Exit::Interrupted(sig),
        message: format!(
            "the bisect was interrupted (signal {sig}); its log keeps every step finished: \
             run the same command again to continue"
        ),
    }
    .into()
}

/// Runs the build command in `dir` (its own process group, output to `log`), killed after
/// `limit`. Ok(Err(why)) when it fails; an error (exit 130/143) when a signal stopped the
/// bisect, after the build's whole group is stopped.
pub async fn run_build(
    dir: &Path,
    command: &str,
    log: &Path,
    limit: Duration,
    stop: &mut Stop,
) -> Result<std::result::Result<(), String>> {
    stop.check()?;
    let file = crate::fsutil::create_output(log)
        .with_context(|| format!("cannot write the build log {}", log.display()))?;
    let mut build = tokio::process::Command::new("sh");
    build
        .arg("-c")
        .arg(command)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(file.try_clone()?)
        .stderr(file)
        .process_group(0)
        .kill_on_drop(true);
    // A commit's build: not the step's GitHub file commands nor the runner's tokens.
    crate::process::env::withhold(build.as_std_mut());
    let mut child = build
        .spawn()
        .context("cannot run the build command with sh")?;
    let pid = child.id().map(|p| p as libc::pid_t);
    enum Ended {
        Exited(std::io::Result<std::process::ExitStatus>),
        TimedOut,
        Signal(i32),
    }
    let ended = tokio::select! {
        waited = tokio::time::timeout(limit, child.wait()) => match waited {
            Ok(status) => Ended::Exited(status),
            Err(_) => Ended::TimedOut,
        },
        sig = stop.stopped() => Ended::Signal(sig),
    };
    match ended {
        Ended::Exited(status) => {
            let status = status.context("waiting for the build command")?;
            Ok(if status.success() {
                Ok(())
            } else {
                Err(format!(
                    "the build failed ({status}); its log: {}",
                    log.display()
                ))
            })
        }
        Ended::TimedOut => {
            if let Some(pid) = pid {
                signal_group(pid, libc::SIGKILL);
            }
            let _ = child.wait().await;
            Ok(Err(format!(
                "the build took longer than --build-timeout {}; its log: {}",
                humantime::format_duration(limit),
                log.display()
            )))
        }
        Ended::Signal(sig) => {
            if let Some(pid) = pid {
                stop_group(&mut child, pid, BUILD_GRACE).await;
            }
            Err(interrupted(sig))
        }
    }
}

/// Removes a checkout (and git's record of it); what cannot be removed stays, said once.
pub fn remove(walk: &Walk, dir: &Path) {
    if !dir.exists() {
        return;
    }
    if git(
        &walk.repo_dir,
        &["worktree", "remove", "--force", &dir.to_string_lossy()],
    )
    .is_err()
    {
        let _ = std::fs::remove_dir_all(dir);
        let _ = git(&walk.repo_dir, &["worktree", "prune"]);
    }
    let _ = std::fs::remove_file(built_marker(dir));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_quoted_for_the_shell() {
        assert_eq!(shell_quoted("/tmp/a b"), "'/tmp/a b'");
        assert_eq!(shell_quoted("it's"), r"'it'\''s'");
        assert_eq!(
            in_dir(Path::new("/w/x"), "serve --port {port}"),
            "cd '/w/x' && serve --port {port}"
        );
        // A folder's braces are doubled, so that the template gives them back as they are.
        assert_eq!(
            in_dir(Path::new("/w/out_{x}"), "serve --port {port}"),
            "cd '/w/out_{{x}}' && serve --port {port}"
        );
    }

    #[tokio::test]
    async fn a_signal_stops_the_build_and_says_so_in_its_exit_code() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("build.log");
        let (signal, mut stop) = Stop::manual();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            signal.trigger(libc::SIGTERM);
        });
        let started = std::time::Instant::now();
        let built = run_build(
            dir.path(),
            "sleep 30 & sleep 30; wait",
            &log,
            Duration::from_secs(60),
            &mut stop,
        )
        .await;
        let e = built.expect_err("stopped");
        assert_eq!(
            crate::exit::exit_for(&e),
            crate::exit::Exit::Interrupted(libc::SIGTERM)
        );
        assert!(started.elapsed() < Duration::from_secs(10));
        // A build is not started once a signal came.
        let e = run_build(dir.path(), "true", &log, Duration::from_secs(5), &mut stop).await;
        assert!(e.is_err());
    }
}
