//! Locks a run holds until it exits: its output folder (two runs into one folder would
//! interleave their logs, tear requests.jsonl and leave one run's results), and the GPUs of
//! its slots, machine-wide (two jobs on one runner would measure each other).
//!
//! Each is an advisory `flock` on a small file whose text names the holder (pid, start time,
//! command). The kernel drops a lock when its process dies, however it dies, so a lock left
//! by a killed run is simply taken: there is no stale lock to clean. The locks are held by
//! the process (a list below), so a command that runs several times into one folder (bisect's
//! steps) takes each once.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::load::run::interrupt::Interrupt;
use crate::load::servers::Slot;

/// The lock file in an output folder.
pub const OUTPUT_LOCK: &str = ".throughline.lock";
/// Where the GPU locks live unless `THROUGHLINE_LOCK_DIR` says (one folder per machine,
/// shared by every user's runs: made writable by all, sticky like /tmp).
const GPU_LOCK_DIR: &str = "throughline-locks";
/// How often a run waiting for a GPU tries again, and says who holds it.
const RETRY: Duration = Duration::from_millis(500);
const SAY_EVERY: Duration = Duration::from_secs(30);
/// The most of a holder's text read back (the file may be anything).
const HOLDER_BYTES: u64 = 1024;

/// The locks this process holds: released when it exits.
static HELD: Mutex<Vec<(PathBuf, File)>> = Mutex::new(Vec::new());

/// Takes the lock on output folder `dir` (created if missing) for the rest of the process;
/// refused, naming the holder, while another run holds it.
pub fn hold_output(dir: &Path) -> Result<()> {
    // Created if missing, refused if a link (a pull request can commit one).
    crate::fsutil::ensure_output_dir(dir)?;
    let path = dir.join(OUTPUT_LOCK);
    match try_hold(&path, Users::One)? {
        None => Ok(()),
        Some(holder) => bail!(
            "{} is in use by another throughline run ({holder}): two runs into one folder would \
             mix their files. Wait for it to end, or give this run another --out",
            dir.display()
        ),
    }
}

/// Takes the machine-wide lock of every GPU of `slots`, waiting while another run holds one
/// (saying who, every 30 s) for at most `limit`; a signal stops the wait.
pub async fn hold_gpus(slots: &[Slot], limit: Duration, interrupt: &Interrupt) -> Result<()> {
    let dir = gpu_lock_dir()?;
    let started = Instant::now();
    let mut said = None::<Instant>;
    for slot in slots {
        for gpu in slot
            .gpus
            .split(',')
            .map(str::trim)
            .filter(|g| !g.is_empty())
        {
            let path = dir.join(format!("gpu-{}.lock", file_safe(gpu)));
            loop {
                let Some(holder) = try_hold(&path, Users::All)? else {
                    break;
                };
                if started.elapsed() >= limit {
                    bail!(
                        "GPU {gpu} (slot {}) is in use by another throughline run on this \
                         machine ({holder}) after waiting {}: two runs on one GPU measure each \
                         other. Give this run other --slots, or run the jobs one after another",
                        slot.index,
                        humantime::format_duration(limit)
                    );
                }
                if said.is_none_or(|t| t.elapsed() >= SAY_EVERY) {
                    eprintln!(
                        "waiting for GPU {gpu} (slot {}): in use by another throughline run \
                         ({holder}); lock {}",
                        slot.index,
                        path.display()
                    );
                    said = Some(Instant::now());
                }
                tokio::select! {
                    () = tokio::time::sleep(RETRY) => {}
                    () = interrupt.stopping() => {
                        return Err(interrupt
                            .error(format_args!("waiting for GPU {gpu}"))
                            .unwrap_or_else(|| anyhow::anyhow!("interrupted")));
                    }
                }
            }
        }
    }
    Ok(())
}

/// The folder of the machine-wide GPU locks, created open to every user.
fn gpu_lock_dir() -> Result<PathBuf> {
    let dir = match std::env::var_os("THROUGHLINE_LOCK_DIR") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => std::env::temp_dir().join(GPU_LOCK_DIR),
    };
    if !dir.is_dir() {
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create the lock folder {}", dir.display()))?;
        // Other users' runs share the GPUs: they must be able to make their lock files.
        let _ = std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o1777));
    }
    Ok(dir)
}

/// Who takes a lock: this user alone (an output folder's) or every user of the machine (a
/// GPU's, in the shared lock folder).
#[derive(Clone, Copy, PartialEq)]
enum Users {
    One,
    All,
}

/// Takes the lock at `path` for the process: None when taken (or already held here), else
/// the holder's description.
fn try_hold(path: &Path, users: Users) -> Result<Option<String>> {
    let mut held = HELD.lock().unwrap_or_else(|e| e.into_inner());
    if held.iter().any(|(p, _)| p == path) {
        return Ok(None);
    }
    let mut file = open_lock(path, users)?;
    // SAFETY: flock on a descriptor this function owns; LOCK_NB never blocks.
    if unsafe {
        libc::flock(
            std::os::fd::AsRawFd::as_raw_fd(&file),
            libc::LOCK_EX | libc::LOCK_NB,
        )
    } != 0
    {
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
            return Ok(Some(holder(&mut file)));
        }
        return Err(err).with_context(|| format!("cannot lock {}", path.display()));
    }
    // Ours now: say who holds it, for whoever is refused.
    let _ = file.set_len(0);
    let _ = file.rewind();
    let _ = writeln!(file, "{}", this_holder());
    held.push((path.to_path_buf(), file));
    Ok(None)
}

/// Opens (creating) a lock file: never through a link (a pull request could commit one in
/// the output folder), never a FIFO or a device. A lock every user takes is made writable
/// by all (the umask would make it 0644: another user's run was refused at its GPU lock) and
/// an existing one is opened without O_CREAT (which Linux refuses on another user's file in
/// a sticky folder under fs.protected_regular); one they still cannot write (left by an
/// older version) is locked read-only: flock needs no write access, only the holder line.
fn open_lock(path: &Path, users: Users) -> Result<File> {
    let open = |create: bool, write: bool| {
        let mut options = OpenOptions::new();
        options
            .read(true)
            .write(write)
            .create_new(create)
            .mode(0o666)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC);
        options.open(path)
    };
    let opened = match open(false, true) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => match open(true, true) {
            Ok(file) => {
                if users == Users::All {
                    let _ = file.set_permissions(std::fs::Permissions::from_mode(0o666));
                }
                Ok(file)
            }
            // Another run made it in between.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => open(false, true),
            Err(e) => Err(e),
        },
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied && users == Users::All => {
            open(false, false)
        }
        other => other,
    };
    let file = opened.with_context(|| {
        format!(
            "cannot open the lock file {} (a link or a special file there is refused)",
            path.display()
        )
    })?;
    let meta = file
        .metadata()
        .with_context(|| format!("cannot read {}", path.display()))?;
    if !meta.is_file() {
        bail!("the lock file {} is not a regular file", path.display());
    }
    // One of ours that an older version left 0644: opened to every user from now on.
    // SAFETY: geteuid only reads the process's credentials.
    let own = meta.uid() == unsafe { libc::geteuid() };
    if users == Users::All && own && meta.mode() & 0o666 != 0o666 {
        let _ = file.set_permissions(std::fs::Permissions::from_mode(0o666));
    }
    Ok(file)
}

/// "pid 123, started 2026-12-03T01:20:00Z, command: throughline bench ..." for this process.
fn this_holder() -> String {
    let command: Vec<String> = std::env::args().collect();
    let command = crate::record::redact::redact(&command.join(" ")).into_owned();
    let command: String = command.chars().take(300).collect();
    format!(
        "pid {}, started {}, command: {}",
        std::process::id(),
        crate::load::now_rfc3339(),
        command.replace(['\n', '\r'], " ")
    )
}

/// What the lock file says of its holder: text from another process (or a hand-edited
/// file), bounded and made safe for a terminal and a CI log.
fn holder(file: &mut File) -> String {
    let mut text = String::new();
    let _ = file.rewind();
    let _ = file.take(HOLDER_BYTES).read_to_string(&mut text);
    let line = text.lines().next().unwrap_or("").trim();
    match line.is_empty() {
        true => "holder unknown".to_string(),
        false => crate::untrusted::for_terminal(line).into_owned(),
    }
}

/// A GPU id as part of a file name: letters, digits, `-` and `_` kept, the rest as hex.
fn file_safe(id: &str) -> String {
    id.chars()
        .map(
            |c| match c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                true => c.to_string(),
                false => format!("%{:02x}", c as u32),
            },
        )
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpu_ids_become_file_names() {
        assert_eq!(file_safe("0"), "0");
        assert_eq!(file_safe("GPU-1a2b"), "GPU-1a2b");
        assert_eq!(file_safe("../x"), "%2e%2e%2fx");
    }

    #[test]
    fn a_folder_locked_here_is_taken_once_and_its_holder_named() {
        let dir = tempfile::tempdir().unwrap();
        hold_output(dir.path()).unwrap();
        hold_output(dir.path()).unwrap();
        let text = std::fs::read_to_string(dir.path().join(OUTPUT_LOCK)).unwrap();
        assert!(
            text.starts_with(&format!("pid {}", std::process::id())),
            "{text}"
        );
        // Another descriptor (as another process would have) is refused while it is held.
        let other = open_lock(&dir.path().join(OUTPUT_LOCK), Users::One).unwrap();
        let refused = unsafe {
            libc::flock(
                std::os::fd::AsRawFd::as_raw_fd(&other),
                libc::LOCK_EX | libc::LOCK_NB,
            )
        };
        assert_ne!(refused, 0);
    }

    #[test]
    fn a_gpu_lock_is_writable_by_every_user() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gpu-x.lock");
        assert_eq!(try_hold(&path, Users::All).unwrap(), None);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o666, "{mode:o}");
    }

    #[test]
    fn a_gpu_lock_left_0644_by_this_user_is_opened_to_every_user() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gpu-y.lock");
        std::fs::write(&path, "pid 1, an older run\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(try_hold(&path, Users::All).unwrap(), None);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o666, "{mode:o}");
    }

    #[test]
    fn a_lock_file_this_user_cannot_write_is_locked_read_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gpu-old.lock");
        std::fs::write(&path, "pid 1, an older run\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o444)).unwrap();
        let file = open_lock(&path, Users::All).unwrap();
        // SAFETY: flock on a descriptor this test owns.
        let locked = unsafe {
            libc::flock(
                std::os::fd::AsRawFd::as_raw_fd(&file),
                libc::LOCK_EX | libc::LOCK_NB,
            )
        };
        assert_eq!(locked, 0);
    }

    #[test]
    fn a_link_is_not_a_lock_file() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("elsewhere");
        std::fs::write(&target, "keep").unwrap();
        std::os::unix::fs::symlink(&target, dir.path().join(OUTPUT_LOCK)).unwrap();
        assert!(hold_output(dir.path()).is_err());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
    }
}
