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

/// Where the GPU and output-folder locks live unless `THROUGHLINE_LOCK_DIR` says (one folder
/// per machine, shared by every user's runs: made writable by all, sticky like /tmp).
const GPU_LOCK_DIR: &str = "throughline-locks";
/// How often a run waiting for a GPU tries again, and says who holds it.
const RETRY: Duration = Duration::from_millis(500);
const SAY_EVERY: Duration = Duration::from_secs(30);
/// The most of a holder's text read back (the file may be anything).
const HOLDER_BYTES: u64 = 1024;

/// The locks this process holds: released when it exits.
static HELD: Mutex<Vec<(PathBuf, File)>> = Mutex::new(Vec::new());

/// Takes the lock on output folder `dir` (created if missing) for the rest of the process;
/// refused, naming the holder, while another run holds it. The lock is on the folder itself
/// (an flock on its descriptor): no lock file is left in it (`-o .` in a checkout once left a
/// `.throughline.lock` there), and the holder is found by the kernel's own record of it.
pub fn hold_output(dir: &Path) -> Result<()> {
    // Created if missing, refused if a link (a pull request can commit one).
    crate::fsutil::ensure_output_dir(dir)?;
    let real = dir
        .canonicalize()
        .with_context(|| format!("cannot resolve the output folder {}", dir.display()))?;
    let mut held = HELD.lock().unwrap_or_else(|e| e.into_inner());
    if held.iter().any(|(p, _)| *p == real) {
        return Ok(());
    }
    let folder = open_folder(dir)?;
    // SAFETY: flock on a descriptor this function owns; LOCK_NB never blocks.
    let taken = unsafe {
        libc::flock(
            std::os::fd::AsRawFd::as_raw_fd(&folder),
            libc::LOCK_EX | libc::LOCK_NB,
        )
    } == 0;
    if !taken {
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EWOULDBLOCK) {
            return Err(err).with_context(|| format!("cannot lock {}", dir.display()));
        }
        bail!(
            "{} is in use by another throughline run ({}): two runs into one folder would \
             mix their files. Wait for it to end, or give this run another --out{}",
            dir.display(),
            folder_holder(&folder),
            HOW_TO_CLEAR
        );
    }
    held.push((real, folder));
    Ok(())
}

/// Who holds the flock on `folder`, from /proc/locks ("pid 123, command: throughline bench
/// ..."): the command line is another process's text, bounded, redacted and made safe.
fn folder_holder(folder: &File) -> String {
    let Ok(meta) = folder.metadata() else {
        return "holder unknown".into();
    };
    let dev = meta.dev();
    let key = format!(
        "{:02x}:{:02x}:{}",
        libc::major(dev),
        libc::minor(dev),
        meta.ino()
    );
    let locks = crate::fsutil::read_bounded(Path::new("/proc/locks"), 1 << 20).unwrap_or_default();
    let pid = locks
        .lines()
        .filter(|l| !l.contains("->"))
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| f.get(1) == Some(&"FLOCK") && f.get(5) == Some(&key.as_str()))
        .and_then(|f| f.get(4).and_then(|p| p.parse::<u32>().ok()));
    let Some(pid) = pid else {
        return "holder unknown".into();
    };
    let mut bytes = Vec::new();
    if let Ok(file) = File::open(format!("/proc/{pid}/cmdline")) {
        let _ = file.take(HOLDER_BYTES).read_to_end(&mut bytes);
    }
    let command = String::from_utf8_lossy(&bytes).replace('\0', " ");
    let command = crate::record::redact::redact(command.trim()).into_owned();
    let command: String = command.chars().take(300).collect();
    crate::untrusted::for_terminal(&format!("pid {pid}, command: {command}")).into_owned()
}

/// Takes the machine-wide lock of every GPU of `slots`, waiting while another run holds one
/// (saying who, every 30 s) for at most `limit`; a signal stops the wait.
pub async fn hold_gpus(slots: &[Slot], limit: Duration, interrupt: &Interrupt) -> Result<()> {
    hold_gpus_in(&gpu_lock_dir()?, slots, limit, interrupt).await
}

/// [`hold_gpus`] with the locks in `dir`.
async fn hold_gpus_in(
    dir: &Path,
    slots: &[Slot],
    limit: Duration,
    interrupt: &Interrupt,
) -> Result<()> {
    let folder = open_folder(dir)?;
    let started = Instant::now();
    let mut said = None::<Instant>;
    for slot in slots {
        for gpu in slot
            .gpus
            .split(',')
            .map(str::trim)
            .filter(|g| !g.is_empty())
        {
            let name = format!("gpu-{}.lock", file_safe(gpu));
            let path = dir.join(&name);
            loop {
                let Some(holder) = try_hold(&folder, dir, &name)? else {
                    break;
                };
                if started.elapsed() >= limit {
                    bail!(
                        "GPU {gpu} (slot {}) is in use by another throughline run on this \
                         machine ({holder}; lock {}) after waiting {}: two runs on one GPU \
                         measure each other. Give this run other --slots, or run the jobs one \
                         after another{}",
                        slot.index,
                        path.display(),
                        humantime::format_duration(limit),
                        HOW_TO_CLEAR
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

/// What to do about a lock that is held: the kernel drops it when its holder exits, so a
/// stuck holder is ended, never its file deleted (a run that made a new file in its place
/// would lock that one while the holder keeps the old: two runs on one GPU).
const HOW_TO_CLEAR: &str = ". If that run is stuck, end its process (the pid above): the lock \
     goes with it. Do not delete the lock file, which would let two runs in at once";

/// The folder of the machine-wide GPU locks (`THROUGHLINE_LOCK_DIR`, else
/// `$TMPDIR/throughline-locks`), created open to every user. A link there is refused, not
/// followed: in a shared /tmp another user can plant `throughline-locks -> somewhere`, and
/// this run would make (and open to all) its lock files in a folder they chose.
fn gpu_lock_dir() -> Result<PathBuf> {
    let dir = match std::env::var_os("THROUGHLINE_LOCK_DIR") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => std::env::temp_dir().join(GPU_LOCK_DIR),
    };
    let refuse_link = || {
        anyhow::anyhow!(
            "the GPU lock folder {} is a symbolic link: refused, not followed (in a shared \
             folder another user may have planted it). Remove the link, or set \
             THROUGHLINE_LOCK_DIR to a real folder",
            dir.display()
        )
    };
    match std::fs::symlink_metadata(&dir) {
        Ok(meta) if meta.file_type().is_symlink() => return Err(refuse_link()),
        Ok(meta) if !meta.is_dir() => bail!(
            "the GPU lock folder {} is not a folder: remove it, or set THROUGHLINE_LOCK_DIR to \
             a folder",
            dir.display()
        ),
        Ok(_) => return Ok(dir),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => {
            return Err(e).with_context(|| format!("cannot read the lock folder {}", dir.display()))
        }
    }
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot create the lock folder {}", dir.display()))?;
    }
    match std::fs::create_dir(&dir) {
        // Made here: opened to every user (other users' runs share the GPUs and must be able
        // to make their lock files), through a handle, so never through a link put in its
        // place meanwhile.
        Ok(()) => {
            let _ = open_folder(&dir)
                .map(|f| f.set_permissions(std::fs::Permissions::from_mode(0o1777)));
        }
        // Another run made it in between; a link made in between is refused.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            if std::fs::symlink_metadata(&dir).is_ok_and(|m| m.file_type().is_symlink()) {
                return Err(refuse_link());
            }
        }
        Err(e) => {
            return Err(e)
                .with_context(|| format!("cannot create the lock folder {}", dir.display()))
        }
    }
    Ok(dir)
}

/// A handle on a lock folder, opened without following a link: its lock files are opened
/// relative to it, so the folder checked is the folder written in.
fn open_folder(dir: &Path) -> Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(dir)
        .with_context(|| {
            format!(
                "cannot open the lock folder {} (a symbolic link there is refused, not \
                 followed)",
                dir.display()
            )
        })
}

/// Takes the lock `name` in `folder` (a handle on `dir`) for the process: None when taken
/// (or already held here), else the holder's description.
fn try_hold(folder: &File, dir: &Path, name: &str) -> Result<Option<String>> {
    let path = dir.join(name);
    let mut held = HELD.lock().unwrap_or_else(|e| e.into_inner());
    if held.iter().any(|(p, _)| *p == path) {
        return Ok(None);
    }
    let mut file = open_lock(folder, &path)?;
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
    // Ours now: say who holds it, for whoever is refused. (open_lock checked that this
    // file has no other name: the text goes nowhere else.)
    let _ = file.set_len(0);
    let _ = file.rewind();
    let _ = writeln!(file, "{}", this_holder());
    held.push((path, file));
    Ok(None)
}

/// Opens (creating) the lock file `path` in `folder`: never through a link (a pull request
/// could commit one in the output folder), never a FIFO or a device, and never a file with
/// another name (a hard link: the holder line written into it would land in that other file,
/// and a chmod would open it to every user; a root run once made a root-owned file
/// elsewhere world-writable so).
///
/// A lock every user takes is made writable by all (the umask would make it 0644: another
/// user's run was refused at its GPU lock): a file this process created (O_EXCL) at once,
/// an existing one only when it is this user's own regular file of one name (one an older
/// version left 0644). An existing one is opened without O_CREAT (which Linux refuses on
/// another user's file in a sticky folder under fs.protected_regular); one this user cannot
/// write is locked read-only: flock needs no write access, only the holder line does.
fn open_lock(folder: &File, path: &Path) -> Result<File> {
    let name = path.file_name().unwrap_or_default();
    let open = |create: bool, write: bool| -> std::io::Result<File> {
        let c_name = std::ffi::CString::new(name.as_encoded_bytes())
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
        let mut flags = libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC;
        flags |= if write { libc::O_RDWR } else { libc::O_RDONLY };
        if create {
            flags |= libc::O_CREAT | libc::O_EXCL;
        }
        // SAFETY: openat with a descriptor this process holds open and a NUL-terminated
        // name; the descriptor returned is owned by the File made of it.
        let fd = unsafe {
            libc::openat(
                std::os::fd::AsRawFd::as_raw_fd(folder),
                c_name.as_ptr(),
                flags,
                0o666 as libc::c_uint,
            )
        };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `fd` was just opened and nothing else owns it.
        Ok(unsafe { <File as std::os::fd::FromRawFd>::from_raw_fd(fd) })
    };
    let mut created = false;
    let opened = match open(false, true) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => match open(true, true) {
            Ok(file) => {
                created = true;
                Ok(file)
            }
            // Another run made it in between.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => open(false, true),
            Err(e) => Err(e),
        },
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => open(false, false),
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
        bail!(
            "the lock file {} is not a regular file: refused. Remove it (no throughline run \
             makes one like it)",
            path.display()
        );
    }
    if meta.nlink() > 1 {
        bail!(
            "the lock file {} has more than one name ({} hard links): refused, not written \
             (the holder line would land in the other file too). Remove it: the next run makes \
             a new one",
            path.display(),
            meta.nlink()
        );
    }
    // SAFETY: geteuid only reads the process's credentials.
    let own = meta.uid() == unsafe { libc::geteuid() };
    // Made here, or one of ours that an older version left 0644: opened to every user.
    if (created || own) && meta.mode() & 0o666 != 0o666 {
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

    /// Takes GPU lock `name` in `dir`, as [`hold_gpus`] does.
    fn gpu_lock(dir: &Path, name: &str) -> Result<Option<String>> {
        try_hold(&open_folder(dir)?, dir, name)
    }

    #[test]
    fn gpu_ids_become_file_names() {
        assert_eq!(file_safe("0"), "0");
        assert_eq!(file_safe("GPU-1a2b"), "GPU-1a2b");
        assert_eq!(file_safe("../x"), "%2e%2e%2fx");
    }

    #[test]
    fn a_folder_locked_here_is_taken_once_and_its_holder_named() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        hold_output(&out).unwrap();
        hold_output(&dir.path().join("./out")).unwrap();
        // Nothing in the output folder (`-o .` in a checkout once left a lock file).
        assert_eq!(std::fs::read_dir(&out).unwrap().count(), 0);
        // Another descriptor (as another process would have) is refused while it is held,
        // and the kernel's record names this process as the holder.
        let other = open_folder(&out).unwrap();
        let refused = unsafe {
            libc::flock(
                std::os::fd::AsRawFd::as_raw_fd(&other),
                libc::LOCK_EX | libc::LOCK_NB,
            )
        };
        assert_ne!(refused, 0);
        let holder = folder_holder(&other);
        assert!(
            holder.starts_with(&format!("pid {}, command: ", std::process::id())),
            "{holder}"
        );
    }

    #[test]
    fn a_gpu_lock_is_writable_by_every_user() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gpu-x.lock");
        assert_eq!(gpu_lock(dir.path(), "gpu-x.lock").unwrap(), None);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o666, "{mode:o}");
    }

    #[test]
    fn a_gpu_lock_left_0644_by_this_user_is_opened_to_every_user() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gpu-y.lock");
        std::fs::write(&path, "pid 1, an older run\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(gpu_lock(dir.path(), "gpu-y.lock").unwrap(), None);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o666, "{mode:o}");
    }

    #[test]
    fn a_lock_file_this_user_cannot_write_is_locked_read_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gpu-old.lock");
        std::fs::write(&path, "pid 1, an older run\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o444)).unwrap();
        let folder = open_folder(dir.path()).unwrap();
        let file = open_lock(&folder, &path).unwrap();
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
        std::os::unix::fs::symlink(&target, dir.path().join("gpu-l.lock")).unwrap();
        assert!(gpu_lock(dir.path(), "gpu-l.lock").is_err());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
    }

    /// A lock file with a second name (a hard link to a file elsewhere) is refused before
    /// anything is written or opened to all: the other file keeps its text and its mode.
    #[test]
    fn a_hard_linked_lock_file_is_refused_and_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let other = dir.path().join("elsewhere.conf");
        std::fs::write(&other, "keep").unwrap();
        std::fs::set_permissions(&other, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::hard_link(&other, dir.path().join("gpu-0.lock")).unwrap();
        let e = format!("{:#}", gpu_lock(dir.path(), "gpu-0.lock").unwrap_err());
        assert!(
            e.contains("gpu-0.lock") && e.contains("2 hard links"),
            "{e}"
        );
        assert_eq!(std::fs::read_to_string(&other).unwrap(), "keep");
        let mode = std::fs::metadata(&other).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o600, "{mode:o}");
    }

    /// A FIFO (or any special file) in a lock's place is refused, and opening it does not
    /// hang (O_NONBLOCK).
    #[test]
    fn a_special_file_is_not_a_lock_file() {
        let dir = tempfile::tempdir().unwrap();
        let fifo =
            std::ffi::CString::new(dir.path().join("gpu-f.lock").as_os_str().as_encoded_bytes())
                .unwrap();
        // SAFETY: mkfifo with a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o666) }, 0);
        let e = format!("{:#}", gpu_lock(dir.path(), "gpu-f.lock").unwrap_err());
        assert!(e.contains("not a regular file"), "{e}");
    }

    /// A lock folder that is a link is refused, not followed.
    #[test]
    fn a_lock_folder_that_is_a_link_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real");
        std::fs::create_dir(&real).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let e = format!("{:#}", gpu_lock(&link, "gpu-0.lock").unwrap_err());
        assert!(e.contains("symbolic link"), "{e}");
        assert_eq!(std::fs::read_dir(&real).unwrap().count(), 0);
    }

    /// A GPU still held when the wait runs out is refused naming the holder (its line in
    /// the file), the lock's path and how to clear it.
    #[tokio::test]
    async fn a_gpu_held_past_the_wait_names_its_holder_and_how_to_clear_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gpu-9.lock");
        std::fs::write(
            &path,
            "pid 4242, started 2026-01-01T00:00:00Z, command: x\n",
        )
        .unwrap();
        let other = File::open(&path).unwrap();
        // SAFETY: flock on a descriptor this test owns.
        let locked = unsafe {
            libc::flock(
                std::os::fd::AsRawFd::as_raw_fd(&other),
                libc::LOCK_EX | libc::LOCK_NB,
            )
        };
        assert_eq!(locked, 0);
        let slots = [Slot {
            index: 0,
            gpus: "9".into(),
        }];
        let interrupt = Interrupt::manual(Duration::from_secs(1));
        let e = hold_gpus_in(dir.path(), &slots, Duration::ZERO, &interrupt)
            .await
            .unwrap_err()
            .to_string();
        for said in ["pid 4242", "gpu-9.lock", "end its process", "Do not delete"] {
            assert!(e.contains(said), "{said:?} not in: {e}");
        }
    }
}
