//! Issue 47 (hostile review), four ways a pull request's own files or server could write a
//! verdict: GPU lock files that are links to other files, streams longer than `max_tokens`,
//! a forged bisect log, and impossible telemetry gauges. Each test drives the real binary
//! against files and servers on 127.0.0.1 and checks that the run refuses, fails the request
//! in its class, or drops the value, and says why.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use crate::common::*;

/// A bench in blocks on slot 0 whose server exits at once: the GPU lock is taken before
/// any server starts, so a refused lock is the whole run.
fn bench_on_gpu0(dir: &Path, locks: &Path) -> std::process::Output {
    let p = crate::crossover_cli::profile(dir);
    bench_command(&p, &dir.join("out"))
        .args([
            "--no-progress",
            "--no-plots",
            "--server-command",
            "exit 3 # {port}",
        ])
        .args(["--slots", "0"])
        .env("THROUGHLINE_LOCK_DIR", locks)
        .output()
        .unwrap()
}

/// A `gpu-0.lock` that is a hard link to another file (a root-owned file elsewhere, on a
/// machine where runs are root) was truncated, rewritten and made world-writable. It is
/// refused now: exit 2, the path and what to do said, the other file as it was.
#[test]
fn a_hard_linked_gpu_lock_is_refused_and_its_other_name_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let locks = dir.path().join("locks");
    std::fs::create_dir(&locks).unwrap();
    let other = dir.path().join("precious.conf");
    std::fs::write(&other, "keep me\n").unwrap();
    std::fs::set_permissions(&other, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::hard_link(&other, locks.join("gpu-0.lock")).unwrap();
    let o = bench_on_gpu0(dir.path(), &locks);
    let said = text(&o);
    assert_eq!(code(&o), 2, "{said}");
    let mode = std::fs::metadata(&other).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode, 0o600, "mode changed to {mode:o}: {said}");
    assert_eq!(
        std::fs::read_to_string(&other).unwrap(),
        "keep me\n",
        "{said}"
    );
    assert!(
        said.contains("gpu-0.lock") && said.contains("more than one name"),
        "{said}"
    );
}

/// A lock folder that is a symbolic link (planted in a shared /tmp by another user) is not
/// followed: the run is refused, nothing is made in the folder it points to.
#[test]
fn a_lock_folder_that_is_a_link_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("theirs");
    std::fs::create_dir(&target).unwrap();
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o700)).unwrap();
    let locks = dir.path().join("throughline-locks");
    std::os::unix::fs::symlink(&target, &locks).unwrap();
    let o = bench_on_gpu0(dir.path(), &locks);
    let said = text(&o);
    assert_eq!(code(&o), 2, "{said}");
    assert!(said.contains("symbolic link"), "{said}");
    assert_eq!(std::fs::read_dir(&target).unwrap().count(), 0, "{said}");
    let mode = std::fs::metadata(&target).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode, 0o700, "{mode:o}");
}
