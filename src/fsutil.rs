//! File helpers: atomic writes, so that a crash or a kill never leaves half a result or a
//! half-written baseline behind, and bounded reads of input files.

use std::io::{Read, Write};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

/// The mode of a file throughline creates: results, reports and baselines are CI artifacts
/// and files kept in git, readable by everyone (what `File::create` gives under umask 022).
pub const NEW_FILE_MODE: u32 = 0o644;

/// Whether a file flag's value means standard output (`-`): the command then keeps stdout
/// for that file alone and says everything else on stderr, so that `--json -` parses.
pub fn is_stdout(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// Of the file flags given, at most one may be `-`: two files on one stdout parse as neither.
/// Returns whether one is.
pub fn check_one_stdout(flags: &[(&str, Option<&Path>)]) -> Result<bool> {
    let named: Vec<&str> = (flags.iter())
        .filter(|(_, p)| p.is_some_and(is_stdout))
        .map(|(flag, _)| *flag)
        .collect();
    if named.len() > 1 {
        bail!(
            "{} all write to standard output (`-`): give all but one a file name",
            named.join(", ")
        );
    }
    Ok(named.len() == 1)
}

/// Writes `bytes` to `path`.
///
/// A regular file (or a new one) is written through a temporary file in the same folder,
/// synced, then renamed over the target: readers see the old file or the new one, never a
/// mix. An existing file keeps its mode; a new one gets [`NEW_FILE_MODE`].
///
/// A symbolic link at `path` is never written through: output folders sit in a pull
/// request's checkout, which can commit `verdict.md -> ~/.bashrc`. The rename replaces the
/// link itself with the new file (its target is left as it was), and stderr says so.
///
/// `-` is standard output; a special file at `path` itself (a FIFO, a character device) and
/// paths under `/dev` or `/proc` (`--json /dev/stdout`, `/dev/fd/3`, links there included)
/// are written directly, never replaced.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    if is_stdout(path) {
        let mut out = std::io::stdout().lock();
        return out
            .write_all(bytes)
            .and_then(|_| out.flush())
            .context("cannot write to standard output");
    }
    let existing = std::fs::symlink_metadata(path).ok();
    let special = existing
        .as_ref()
        .is_some_and(|m| is_special(&m.file_type()));
    if special || is_system_path(path) {
        let mut options = std::fs::OpenOptions::new();
        options.append(true);
        if !is_system_path(path) {
            // A link swapped in since it was looked at is refused, not followed.
            options.custom_flags(libc::O_NOFOLLOW);
        }
        let mut file = options
            .open(path)
            .with_context(|| format!("cannot open {}", path.display()))?;
        return file
            .write_all(bytes)
            .and_then(|_| file.flush())
            .with_context(|| format!("cannot write {}", path.display()));
    }
    let link = existing
        .as_ref()
        .is_some_and(|m| m.file_type().is_symlink());
    if existing.as_ref().is_some_and(|m| m.is_dir()) {
        bail!("cannot write {}: it is a folder", path.display());
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&dir)
        .with_context(|| format!("cannot create folder {}", dir.display()))?;
    let mode = match &existing {
        Some(m) if m.is_file() => m.permissions().mode() & 0o7777,
        _ => NEW_FILE_MODE,
    };
    let mut tmp = tempfile::Builder::new()
        .prefix(".throughline-")
        .suffix(".tmp")
        .tempfile_in(&dir)
        .with_context(|| format!("cannot create a temporary file in {}", dir.display()))?;
    tmp.write_all(bytes)
        .and_then(|_| {
            tmp.as_file()
                .set_permissions(std::fs::Permissions::from_mode(mode))
        })
        .and_then(|_| tmp.as_file().sync_all())
        .with_context(|| format!("cannot write {}", path.display()))?;
    if link {
        warn_link(path, "replaced by a regular file");
    }
    tmp.persist(path)
        .map_err(|e| e.error)
        .with_context(|| format!("cannot replace {}", path.display()))?;
    Ok(())
}

/// Whether a file type is one written in place (never replaced, never removed).
fn is_special(t: &std::fs::FileType) -> bool {
    t.is_fifo() || t.is_char_device() || t.is_block_device() || t.is_socket()
}

/// Says on stderr what was done with the symbolic link at `path` (its target is neither
/// read nor named: it is whatever the link's author chose).
fn warn_link(path: &Path, done: &str) {
    eprintln!(
        "warning: {} was a symbolic link: {done}; its target was left alone (throughline never \
         writes through a link in its output)",
        path.display()
    );
}

/// Removes a symbolic link at `path` (the link itself, never its target), saying so on
/// stderr. Returns whether there was one.
pub fn remove_link(path: &Path) -> Result<bool> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => {
            std::fs::remove_file(path)
                .with_context(|| format!("cannot remove the link {}", path.display()))?;
            warn_link(path, "removed");
            Ok(true)
        }
        _ => Ok(false),
    }
}

/// Removes the output file at `path`; a symbolic link there is removed itself (its target
/// stays, see [`remove_link`]). Nothing there is fine; a special file or a folder is left
/// alone.
pub fn remove_output(path: &Path) -> Result<()> {
    if remove_link(path)? {
        return Ok(());
    }
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_file() => {
            std::fs::remove_file(path).with_context(|| format!("cannot remove {}", path.display()))
        }
        _ => Ok(()),
    }
}

/// Opens the output file at `path` for appending (created with [`NEW_FILE_MODE`] when
/// missing): a server's log, a journal. A symbolic link there is removed first and a new
/// file made in its place ([`remove_link`]); the open itself never follows a link
/// (`O_NOFOLLOW`), so one made in between is refused.
pub fn open_output_append(path: &Path) -> Result<std::fs::File> {
    open_output(path, false)
}

/// Creates the output file at `path` afresh (truncated; mode [`NEW_FILE_MODE`] when new),
/// as [`open_output_append`] does: never through a link.
pub fn create_output(path: &Path) -> Result<std::fs::File> {
    open_output(path, true)
}

fn open_output(path: &Path, truncate: bool) -> Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    remove_link(path)?;
    let mut options = std::fs::OpenOptions::new();
    options
        .create(true)
        .mode(NEW_FILE_MODE)
        .custom_flags(libc::O_NOFOLLOW);
    if truncate {
        options.write(true).truncate(true);
    } else {
        options.append(true);
    }
    options.open(path).map_err(|e| match e.raw_os_error() {
        Some(libc::ELOOP) => anyhow::anyhow!(
            "cannot write {}: it became a symbolic link while it was opened; throughline never \
             writes through a link in its output",
            path.display()
        ),
        _ => anyhow::Error::new(e).context(format!("cannot write {}", path.display())),
    })
}

/// Creates the output folder `path` (parents included) after checking that neither it nor,
/// for a relative path, any folder on the way to it is a symbolic link: an output folder in
/// a checkout (`throughline-results/`, `servers/`) that is a committed link to `~/` would
/// have the run's files written elsewhere. A link is refused, naming it and the fix.
pub fn ensure_output_dir(path: &Path) -> Result<()> {
    refuse_linked_dir(path)?;
    std::fs::create_dir_all(path)
        .with_context(|| format!("cannot create folder {}", path.display()))?;
    // One made a link in between is refused now, before anything is written into it.
    refuse_linked_dir(path)
}

/// Fails when the folder `path` (absent is fine), or any of the folders it lies under inside
/// the checkout, is a symbolic link: for a relative path every folder it names, for an
/// absolute one those below the working directory or `$GITHUB_WORKSPACE` (the reusable
/// workflow's `OUT=$GITHUB_WORKSPACE/.throughline/results` with a committed `.throughline`
/// link once sent the results outside the checkout).
pub fn refuse_linked_dir(path: &Path) -> Result<()> {
    use std::path::Component;
    let mut checked: Vec<&Path> = vec![path];
    if path.is_relative() {
        checked.extend(
            path.ancestors()
                .skip(1)
                .filter(|a| matches!(a.components().next_back(), Some(Component::Normal(_)))),
        );
    } else {
        let workspaces = std::env::current_dir()
            .ok()
            .into_iter()
            .chain(std::env::var_os("GITHUB_WORKSPACE").map(std::path::PathBuf::from))
            .filter(|w| w.is_absolute());
        for root in workspaces.collect::<Vec<_>>() {
            let below = path.ancestors().skip(1).take_while(|a| *a != root);
            if path.starts_with(&root) {
                checked.extend(below.filter(|a| !checked.contains(a)).collect::<Vec<_>>());
            }
        }
    }
    for p in checked {
        if std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_symlink()) {
            bail!(
                "the output folder {} is a symbolic link: throughline does not write its \
                 output through links (a checkout can commit one pointing anywhere). Remove \
                 the link, or give a real folder as the output folder",
                p.display()
            );
        }
    }
    Ok(())
}

/// Paths no atomic replacement may touch: device nodes and the process's own descriptors
/// (`/dev/stdout` is itself a link, to `/proc/self/fd/1`: followed, as the user meant).
fn is_system_path(path: &Path) -> bool {
    path.starts_with("/dev") || path.starts_with("/proc")
}

/// Opens a regular file for reading, refusing anything else before a byte is read: a FIFO
/// (whose opening waits for a writer, and whose reading never ends), a device such as
/// `/dev/zero`, a folder. The path is looked at first, then opened without waiting (a FIFO
/// swapped in between opens at once) and looked at again through the open file.
pub fn open_regular(path: &Path) -> Result<(std::fs::File, std::fs::Metadata)> {
    use std::os::unix::fs::OpenOptionsExt;
    let regular = |m: &std::fs::Metadata| {
        if m.is_file() {
            Ok(())
        } else {
            Err(anyhow::anyhow!(
                "{} is not a regular file (a {}); expected a file",
                path.display(),
                kind(&m.file_type())
            ))
        }
    };
    let meta =
        std::fs::metadata(path).with_context(|| format!("cannot open {}", path.display()))?;
    regular(&meta)?;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    let meta = file
        .metadata()
        .with_context(|| format!("cannot read {}", path.display()))?;
    regular(&meta)?;
    Ok((file, meta))
}

/// What a file that is not a regular file is, for messages.
fn kind(t: &std::fs::FileType) -> &'static str {
    if t.is_dir() {
        "folder"
    } else if t.is_fifo() {
        "FIFO"
    } else if t.is_char_device() {
        "character device"
    } else if t.is_block_device() {
        "block device"
    } else if t.is_socket() {
        "socket"
    } else {
        "special file"
    }
}

/// Feeds at most `limit` bytes of the regular file at `path` to `sink` (a hasher), refusing
/// a special file before reading and a file past the limit (naming both).
pub fn stream_bounded(path: &Path, limit: u64, sink: &mut impl Write) -> Result<u64> {
    let (file, meta) = open_regular(path)?;
    if meta.len() > limit {
        bail!(
            "{} is {} bytes, over the limit of {limit} bytes for this kind of file",
            path.display(),
            meta.len()
        );
    }
    let read = std::io::copy(&mut file.take(limit + 1), sink)
        .with_context(|| format!("cannot read {}", path.display()))?;
    if read > limit {
        bail!(
            "{} grew past the limit of {limit} bytes while being read",
            path.display()
        );
    }
    Ok(read)
}

/// Reads a text file of at most `limit` bytes. Refuses anything but a regular file (a FIFO
/// or `/dev/zero` would be read forever) and a larger file, naming the path and the limit.
pub fn read_bounded(path: &Path, limit: u64) -> Result<String> {
    let (file, meta) = open_regular(path)?;
    if meta.len() > limit {
        bail!(
            "{} is {} bytes, over the limit of {limit} bytes for this kind of file",
            path.display(),
            meta.len()
        );
    }
    let mut bytes = Vec::new();
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("cannot read {}", path.display()))?;
    if bytes.len() as u64 > limit {
        bail!(
            "{} grew past the limit of {limit} bytes while being read",
            path.display()
        );
    }
    String::from_utf8(bytes).with_context(|| format!("{} is not UTF-8 text", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn one_file_flag_at_most_owns_stdout() {
        let dash = Path::new("-");
        let file = Path::new("v.json");
        assert!(!check_one_stdout(&[("--json", Some(file)), ("--junit", None)]).unwrap());
        assert!(check_one_stdout(&[("--json", Some(dash)), ("--junit", Some(file))]).unwrap());
        let err = check_one_stdout(&[("--json", Some(dash)), ("--junit", Some(dash))])
            .unwrap_err()
            .to_string();
        assert!(err.contains("--json, --junit"), "{err}");
    }

    #[test]
    fn replaces_whole_file_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub").join("a.json");
        write_atomic(&path, b"first version, longer").unwrap();
        write_atomic(&path, b"second").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"second");
        let names: Vec<_> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
    }

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().permissions().mode() & 0o7777
    }

    fn mkfifo(p: &Path) {
        let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    }

    /// Each case prepares the folder, writes "new" through `write_atomic` at `out`, then
    /// checks what is where.
    #[test]
    fn writes_replace_links_keep_modes_and_leave_special_files_alone() {
        type Setup = fn(&Path);
        type Check = fn(&Path);
        let cases: &[(&str, &str, Setup, Check)] = &[
            (
                "new file is 0644",
                "a.json",
                |_| {},
                |d| {
                    assert_eq!(mode(&d.join("a.json")), 0o644);
                },
            ),
            (
                "existing file keeps its mode",
                "a.json",
                |d| {
                    std::fs::write(d.join("a.json"), "old").unwrap();
                    std::fs::set_permissions(d.join("a.json"), PermissionsExt::from_mode(0o640))
                        .unwrap();
                },
                |d| assert_eq!(mode(&d.join("a.json")), 0o640),
            ),
            (
                "a symlink is replaced by a file, its target left alone",
                "link.json",
                |d| {
                    std::fs::create_dir(d.join("real")).unwrap();
                    std::fs::write(d.join("real/a.json"), "old").unwrap();
                    symlink("real/a.json", d.join("link.json")).unwrap();
                },
                |d| {
                    let m = std::fs::symlink_metadata(d.join("link.json")).unwrap();
                    assert!(m.is_file(), "still a link");
                    assert_eq!(mode(&d.join("link.json")), 0o644);
                    assert_eq!(std::fs::read(d.join("link.json")).unwrap(), b"new");
                    assert_eq!(std::fs::read(d.join("real/a.json")).unwrap(), b"old");
                    assert_eq!(std::fs::read_dir(d.join("real")).unwrap().count(), 1);
                },
            ),
            (
                "a dangling link is replaced, the file it names not made",
                "l1",
                |d| {
                    symlink("l2", d.join("l1")).unwrap();
                    symlink(d.join("made.json"), d.join("l2")).unwrap();
                },
                |d| {
                    assert!(std::fs::symlink_metadata(d.join("l1")).unwrap().is_file());
                    assert!(!d.join("made.json").exists());
                    assert_eq!(std::fs::read(d.join("l1")).unwrap(), b"new");
                },
            ),
            (
                "a FIFO is written, not replaced",
                "fifo",
                |d| mkfifo(&d.join("fifo")),
                |d| {
                    let m = std::fs::symlink_metadata(d.join("fifo")).unwrap();
                    assert!(m.file_type().is_fifo());
                },
            ),
            (
                "a link to a FIFO is replaced, the FIFO left alone",
                "to-fifo",
                |d| {
                    mkfifo(&d.join("fifo"));
                    symlink("fifo", d.join("to-fifo")).unwrap();
                },
                |d| {
                    assert!(std::fs::symlink_metadata(d.join("to-fifo"))
                        .unwrap()
                        .is_file());
                    assert!(std::fs::metadata(d.join("fifo"))
                        .unwrap()
                        .file_type()
                        .is_fifo());
                },
            ),
        ];
        for (name, out, setup, check) in cases {
            let dir = tempfile::tempdir().unwrap();
            setup(dir.path());
            let path = dir.path().join(out);
            // A FIFO needs a reader while it is written (a link to one is not written).
            let fifo = std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_fifo());
            let reader = fifo.then(|| {
                let p = path.clone();
                std::thread::spawn(move || std::fs::read(p).unwrap())
            });
            write_atomic(&path, b"new").unwrap_or_else(|e| panic!("{name}: {e:#}"));
            if let Some(r) = reader {
                assert_eq!(r.join().unwrap(), b"new", "{name}");
            }
            check(dir.path());
        }
        // `-` is standard output.
        write_atomic(Path::new("-"), b"").unwrap();
    }

    #[test]
    fn bounded_reads_refuse_special_and_large_files() {
        let dir = tempfile::tempdir().unwrap();
        let small = dir.path().join("p.toml");
        std::fs::write(&small, "name = 1").unwrap();
        let big = dir.path().join("big.toml");
        std::fs::write(&big, vec![b'#'; 2048]).unwrap();
        let fifo = dir.path().join("fifo");
        mkfifo(&fifo);
        assert_eq!(read_bounded(&small, 1024).unwrap(), "name = 1");
        for (path, says) in [
            (big.as_path(), "over the limit of 1024 bytes"),
            (Path::new("/dev/zero"), "not a regular file"),
            (dir.path(), "not a regular file"),
        ] {
            let err = format!("{:#}", read_bounded(path, 1024).unwrap_err());
            assert!(
                err.contains(says) && err.contains(&*path.to_string_lossy()),
                "{err}"
            );
        }
        // Opening a FIFO would block until a writer comes: it is refused before it is opened
        // (no writer here), and named as a FIFO.
        let err = format!("{:#}", read_bounded(&fifo, 1024).unwrap_err());
        assert!(err.contains("not a regular file (a FIFO)"), "{err}");
        let mut sink = Vec::new();
        let err = format!("{:#}", stream_bounded(&fifo, 1024, &mut sink).unwrap_err());
        assert!(err.contains("not a regular file (a FIFO)"), "{err}");
        assert_eq!(stream_bounded(&small, 1024, &mut sink).unwrap(), 8);
        let err = format!("{:#}", stream_bounded(&big, 1024, &mut sink).unwrap_err());
        assert!(err.contains("over the limit of 1024 bytes"), "{err}");
    }

    #[test]
    fn outputs_opened_or_removed_never_touch_a_links_target() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("target"), "secret").unwrap();
        for (name, act) in [
            (
                "append",
                open_output_append as fn(&Path) -> Result<std::fs::File>,
            ),
            ("create", create_output),
        ] {
            let at = d.join(format!("{name}.log"));
            symlink(d.join("target"), &at).unwrap();
            let mut file = act(&at).unwrap();
            file.write_all(b"mine").unwrap();
            assert!(std::fs::symlink_metadata(&at).unwrap().is_file(), "{name}");
            assert_eq!(std::fs::read(&at).unwrap(), b"mine", "{name}");
            assert_eq!(mode(&at), NEW_FILE_MODE, "{name}");
        }
        let gone = d.join("old.json");
        symlink(d.join("target"), &gone).unwrap();
        remove_output(&gone).unwrap();
        assert!(std::fs::symlink_metadata(&gone).is_err());
        assert_eq!(std::fs::read(d.join("target")).unwrap(), b"secret");
        // Appending keeps what is there; creating starts over.
        let log = d.join("again.log");
        open_output_append(&log).unwrap().write_all(b"a").unwrap();
        open_output_append(&log).unwrap().write_all(b"b").unwrap();
        assert_eq!(std::fs::read(&log).unwrap(), b"ab");
        create_output(&log).unwrap().write_all(b"c").unwrap();
        assert_eq!(std::fs::read(&log).unwrap(), b"c");
    }

    #[test]
    fn output_folders_that_are_links_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::create_dir(d.join("elsewhere")).unwrap();
        symlink(d.join("elsewhere"), d.join("out")).unwrap();
        let err = format!("{:#}", ensure_output_dir(&d.join("out")).unwrap_err());
        assert!(err.contains("out is a symbolic link"), "{err}");
        ensure_output_dir(&d.join("real/servers")).unwrap();
        assert!(d.join("real/servers").is_dir());
        // A relative path: every folder on the way is looked at.
        let here = std::env::current_dir().unwrap();
        let rel = d.strip_prefix("/").unwrap();
        let up: PathBuf = here.components().skip(1).map(|_| "..").collect();
        let err = ensure_output_dir(&up.join(rel).join("out/results")).unwrap_err();
        assert!(format!("{err:#}").contains("symbolic link"), "{err:#}");
        assert_eq!(std::fs::read_dir(d.join("elsewhere")).unwrap().count(), 0);
    }
}
