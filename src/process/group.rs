//! A started command's process group: signalled whole, alive while a member that is not a
//! zombie is, and stopped (SIGTERM, a grace, SIGKILL). Commands are started in a group of
//! their own (`process_group(0)`), so that a stop reaches everything they started.

use std::time::Duration;

/// Sends `signal` to process group `pgid`; a group that is gone is no error. The group's
/// id cannot be given to a new process while a member lives (Linux keeps a process group's
/// id taken), so a signal reaches only what the server started.
pub fn signal_group(pgid: libc::pid_t, signal: libc::c_int) {
    // SAFETY: killpg only sends a signal; a group that is gone gives ESRCH, ignored.
    unsafe {
        libc::killpg(pgid, signal);
    }
}

/// Whether group `pgid` has a member that is not a zombie. Where /proc cannot say, whether
/// the group exists at all.
pub fn group_has_live_members(pgid: libc::pid_t) -> bool {
    // SAFETY: signal 0 only checks that the group exists.
    if unsafe { libc::killpg(pgid, 0) } != 0 {
        return std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH);
    }
    // Where /proc cannot be read, the group exists: say alive.
    if std::fs::read_dir("/proc").is_err() {
        return true;
    }
    (super::tree::table().iter()).any(|p| p.pgid == pgid && !p.zombie)
}

/// Stops process group `pgid` led by `child`: SIGTERM, then SIGKILL for what is left after
/// `grace`. Returns once `child` is reaped and no member of the group is alive, or `grace`
/// after the SIGKILL.
pub async fn stop_group(child: &mut tokio::process::Child, pgid: libc::pid_t, grace: Duration) {
    signal_group(pgid, libc::SIGTERM);
    let deadline = tokio::time::Instant::now() + grace;
    let _ = tokio::time::timeout_at(deadline, child.wait()).await;
    while group_has_live_members(pgid) && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    if group_has_live_members(pgid) {
        signal_group(pgid, libc::SIGKILL);
    }
    let _ = tokio::time::timeout(grace, child.wait()).await;
    let deadline = tokio::time::Instant::now() + grace;
    while group_has_live_members(pgid) && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
