//! Reading files as they are at a git ref, so that a pull request is gated against the
//! baseline on its target branch, not against a baseline the pull request itself edited.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context, Result};

/// Reads `path` (a file inside a git work tree) as it is at `reference` (a branch, tag,
/// commit or anything `git rev-parse` takes, e.g. `origin/main`).
pub fn read_at_ref(path: &Path, reference: &str) -> Result<String> {
    let (repo, relative) = open_repo_for(path)?;
    let object = repo
        .revparse_single(reference)
        .with_context(|| format!("git ref {reference:?} not found in {}", repo_dir(&repo)))?;
    let commit = object
        .peel_to_commit()
        .with_context(|| format!("git ref {reference:?} does not name a commit"))?;
    let tree = commit.tree()?;
    let entry = tree.get_path(&relative).map_err(|_| {
        anyhow!(
            "{} does not exist at {reference} ({}); bless a baseline on that branch first",
            relative.display(),
            short(&commit.id().to_string())
        )
    })?;
    let blob = entry
        .to_object(&repo)?
        .peel_to_blob()
        .map_err(|_| anyhow!("{} at {reference} is not a file", relative.display()))?;
    let text = std::str::from_utf8(blob.content())
        .map_err(|_| anyhow!("{} at {reference} is not UTF-8 text", relative.display()))?;
    Ok(text.to_string())
}

/// The commit checked out in the work tree that holds `path`, if it is in one.
pub fn head_commit(path: &Path) -> Option<String> {
    let (repo, _) = open_repo_for(path).ok()?;
    let head = repo.head().ok()?.peel_to_commit().ok()?;
    Some(head.id().to_string())
}

/// The commit `reference` names in the repository that holds `path` (e.g. what
/// `origin/main` pointed at when a check read its baseline), if it names one.
pub fn commit_at(path: &Path, reference: &str) -> Option<String> {
    let (repo, _) = open_repo_for(path).ok()?;
    let commit = repo
        .revparse_single(reference)
        .ok()?
        .peel_to_commit()
        .ok()?;
    Some(commit.id().to_string())
}

/// One committed version of a file.
pub struct FileVersion {
    pub commit: String,
    /// The commit time (seconds since the epoch).
    pub time: i64,
    pub text: String,
}

/// Every distinct committed version of `path` reachable from HEAD, newest first, walking at
/// most `max_commits` commits (a bound: a long history is read in part, never without end).
/// Versions that are not UTF-8 or exceed `max_bytes` are skipped.
pub fn versions_of(path: &Path, max_commits: usize, max_bytes: usize) -> Result<Vec<FileVersion>> {
    let (repo, relative) = open_repo_for(path)?;
    let mut walk = repo.revwalk()?;
    walk.push_head()
        .with_context(|| format!("{} has no commits", repo_dir(&repo)))?;
    walk.set_sorting(git2::Sort::TIME)?;
    let mut versions = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for id in walk.take(max_commits) {
        let commit = repo.find_commit(id?)?;
        let Ok(entry) = commit.tree()?.get_path(&relative) else {
            continue;
        };
        if !seen.insert(entry.id()) {
            continue;
        }
        let Ok(blob) = entry.to_object(&repo)?.peel_to_blob() else {
            continue;
        };
        if blob.size() > max_bytes {
            continue;
        }
        if let Ok(text) = std::str::from_utf8(blob.content()) {
            versions.push(FileVersion {
                commit: commit.id().to_string(),
                time: commit.time().seconds(),
                text: text.to_string(),
            });
        }
    }
    Ok(versions)
}

fn open_repo_for(path: &Path) -> Result<(git2::Repository, PathBuf)> {
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()?.join(path)
    };
    let dir = absolute.parent().unwrap_or(Path::new("/"));
    let repo = git2::Repository::discover(dir)
        .with_context(|| format!("{} is not inside a git repository", path.display()))?;
    let workdir = repo
        .workdir()
        .ok_or_else(|| anyhow!("the git repository at {} has no work tree", repo_dir(&repo)))?;
    let workdir = workdir
        .canonicalize()
        .unwrap_or_else(|_| workdir.to_path_buf());
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    let file_name = absolute
        .file_name()
        .ok_or_else(|| anyhow!("{} names no file", path.display()))?;
    let relative = dir
        .strip_prefix(&workdir)
        .map_err(|_| {
            anyhow!(
                "{} is outside the work tree {}",
                path.display(),
                workdir.display()
            )
        })?
        .join(file_name);
    Ok((repo, relative))
}

fn repo_dir(repo: &git2::Repository) -> String {
    repo.path().display().to_string()
}

fn short(id: &str) -> &str {
    &id[..id.len().min(10)]
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn git(dir: &Path, args: &[&str]) {
        let ok = Command::new("git")
            .args([
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "-c",
                "init.defaultBranch=main",
            ])
            .args(args)
            .current_dir(dir)
            .status()
            .unwrap()
            .success();
        assert!(ok, "git {args:?}");
    }

    #[test]
    fn reads_committed_content_not_the_working_tree() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        git(d, &["init", "-q"]);
        std::fs::create_dir(d.join("baselines")).unwrap();
        let file = d.join("baselines/a.toml");
        std::fs::write(&file, "committed\n").unwrap();
        git(d, &["add", "."]);
        git(d, &["commit", "-qm", "one"]);
        std::fs::write(&file, "edited in the working tree\n").unwrap();
        assert_eq!(read_at_ref(&file, "main").unwrap(), "committed\n");
        assert_eq!(read_at_ref(&file, "HEAD").unwrap(), "committed\n");
        let err = format!("{:#}", read_at_ref(&file, "no-such-branch").unwrap_err());
        assert!(err.contains("no-such-branch"), "{err}");
        let err = format!(
            "{:#}",
            read_at_ref(&d.join("baselines/b.toml"), "main").unwrap_err()
        );
        assert!(
            err.contains("baselines/b.toml does not exist at main"),
            "{err}"
        );
        assert_eq!(head_commit(&file).unwrap().len(), 40);
    }
}
