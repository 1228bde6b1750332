//! The lock that keeps two blesses of one baseline from interleaving.

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

/// An exclusive lock on a baseline file while it is rewritten, so two blesses cannot
/// interleave: an OS lock (`flock`), which dies with the process (a bless killed by SIGKILL
/// or stopped by SIGTERM never blocks the next one). The lock file lives in the temporary
/// folder, named by a hash of the baseline's absolute path ([`lock_path`]), never beside the
/// baseline where `git add -A` would commit it. It stays there: deleting it would let a third
/// bless lock a new file while the second still holds the old one.
pub struct BaselineLock {
    // Holds the lock while open; closing the file releases it.
    _file: std::fs::File,
}

/// How long a bless waits for another to finish before giving up.
pub const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

impl BaselineLock {
    /// Takes the lock, waiting up to [`LOCK_WAIT`] for another bless to release it.
    pub fn acquire(baseline: &Path) -> Result<BaselineLock> {
        BaselineLock::acquire_within(baseline, LOCK_WAIT)
    }

    pub fn acquire_within(baseline: &Path, wait: std::time::Duration) -> Result<BaselineLock> {
        use std::os::fd::AsRawFd;
        use std::os::unix::fs::OpenOptionsExt;
        // The baseline's folder first (the bless writes there next), so that its lock is
        // keyed by the folder's resolved path from the first bless on.
        if let Some(dir) = baseline.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create folder {}", dir.display()))?;
        }
        let path = lock_path(baseline)?;
        if let Some(dir) = path.parent() {
            own_folder(dir)?;
        }
        // Not through a link planted where the lock file goes.
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&path)
            .with_context(|| format!("cannot open lock {}", path.display()))?;
        let started = std::time::Instant::now();
        let mut said = false;
        loop {
            // SAFETY: flock on a descriptor this function owns; no memory is passed.
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
                return Ok(BaselineLock { _file: file });
            }
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() != Some(libc::EWOULDBLOCK) {
                return Err(err).with_context(|| format!("cannot lock {}", path.display()));
            }
            if started.elapsed() >= wait {
                bail!(
                    "another bless holds {} (waited {} s); a stopped bless releases it by itself",
                    path.display(),
                    wait.as_secs()
                );
            }
            if !said {
                eprintln!("waiting for another bless to release {}", path.display());
                said = true;
            }
            std::thread::sleep(std::time::Duration::from_millis(25));
        }
    }
}

/// Makes (mode 0700) or checks the user's lock folder: in a shared $TMPDIR another user can
/// plant `throughline-locks-<uid>` before this user's first bless, as a link to a folder they
/// chose or as a folder of theirs, and hold or replace the locks in it. Only a real folder
/// of this user's own is used, closed to others (mode 0700).
fn own_folder(dir: &Path) -> Result<()> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot create folder {}", parent.display()))?;
    }
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e).with_context(|| format!("cannot create folder {}", dir.display())),
    }
    let meta = std::fs::symlink_metadata(dir)
        .with_context(|| format!("cannot read the lock folder {}", dir.display()))?;
    // SAFETY: getuid has no preconditions and cannot fail.
    let uid = unsafe { libc::getuid() };
    let why = match () {
        _ if meta.file_type().is_symlink() => Some("a symbolic link"),
        _ if !meta.is_dir() => Some("not a folder"),
        _ if meta.uid() != uid => Some("another user's"),
        _ => None,
    };
    // This user's own, made by an earlier build under a loose umask: closed to others now.
    if why.is_none() && meta.mode() & 0o077 != 0 {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        // Through a handle opened without following a link: the folder checked is the one
        // changed.
        OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(dir)
            .and_then(|f| f.set_permissions(std::fs::Permissions::from_mode(0o700)))
            .with_context(|| format!("cannot close the lock folder {} to others", dir.display()))?;
    }
    match why {
        Some(why) => bail!(
            "the bless lock folder {} is {why}: refused, not used (in a shared temporary \
             folder another user may have made it). Remove it, or set TMPDIR to a folder of \
             your own",
            dir.display()
        ),
        None => Ok(()),
    }
}

/// Where the lock of `baseline` lives: `$TMPDIR/throughline-locks-<uid>/<sha256 of the
/// baseline's absolute path, its folder resolved>.lock`. Keyed by the path, so two spellings
/// of one file (`./b.toml`, `dir/../b.toml`, a linked folder) share a lock; per user, so one
/// user's folder never blocks another's.
pub fn lock_path(baseline: &Path) -> Result<PathBuf> {
    use sha2::{Digest, Sha256};
    let Some(file) = baseline.file_name() else {
        bail!("{} names no file to lock", baseline.display());
    };
    let dir = match baseline.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(d) => d.to_path_buf(),
        None => PathBuf::from("."),
    };
    // The folder exists by now in a bless (it writes there next); if not, the plain path.
    let dir = std::fs::canonicalize(&dir).or_else(|_| std::path::absolute(&dir))?;
    let key = dir.join(file);
    let digest = Sha256::digest(key.as_os_str().as_encoded_bytes());
    let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    // SAFETY: getuid has no preconditions and cannot fail.
    let uid = unsafe { libc::getuid() };
    Ok(std::env::temp_dir()
        .join(format!("throughline-locks-{uid}"))
        .join(format!("{hex}.lock")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_is_exclusive_and_released() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b.toml");
        let short = std::time::Duration::from_millis(100);
        let lock = BaselineLock::acquire(&path).unwrap();
        let err = BaselineLock::acquire_within(&path, short).err().unwrap();
        assert!(err.to_string().contains("another bless holds"), "{err}");
        drop(lock);
        assert!(BaselineLock::acquire_within(&path, short).is_ok());
        // Nothing beside the baseline for `git add -A` to commit.
        let beside: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert!(beside.is_empty(), "{beside:?}");
        // Two spellings of one file share the lock; another file has its own.
        let sub = dir.path().join("sub");
        std::fs::create_dir(&sub).unwrap();
        let other_spelling = sub.join("..").join("b.toml");
        assert_eq!(
            lock_path(&other_spelling).unwrap(),
            lock_path(&path).unwrap()
        );
        assert_ne!(
            lock_path(&dir.path().join("c.toml")).unwrap(),
            lock_path(&path).unwrap()
        );
    }
}
