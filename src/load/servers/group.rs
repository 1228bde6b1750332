//! The operating system's side of a managed server: its process group, and whether a port
//! is taken.

use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

/// Sends `signal` to process group `pgid`; a group that is gone is no error. The group's
/// id cannot be given to a new process while a member lives (Linux keeps a process group's
/// id taken), so a signal reaches only what the server started.
pub(super) fn signal_group(pgid: libc::pid_t, signal: libc::c_int) {
    // SAFETY: killpg only sends a signal; a group that is gone gives ESRCH, ignored.
    unsafe {
        libc::killpg(pgid, signal);
    }
}

/// Whether group `pgid` has a member that is not a zombie. Where /proc cannot say, whether
/// the group exists at all.
pub(super) fn group_has_live_members(pgid: libc::pid_t) -> bool {
    // SAFETY: signal 0 only checks that the group exists.
    if unsafe { libc::killpg(pgid, 0) } != 0 {
        return std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH);
    }
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return true;
    };
    entries.flatten().any(|entry| {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            return false;
        };
        // pid (comm) state ppid pgrp ...; comm may hold spaces and parentheses.
        let Some((_, rest)) = stat.rsplit_once(')') else {
            return false;
        };
        let mut fields = rest.split_whitespace();
        let state = fields.next();
        let pgrp = fields.nth(1).and_then(|p| p.parse::<libc::pid_t>().ok());
        pgrp == Some(pgid) && state != Some("Z") && state != Some("X")
    })
}

/// Whether something listens on (or holds) `port` on 127.0.0.1: binding it fails, or a
/// connection to it is accepted (a listener with SO_REUSEPORT lets a bind succeed).
pub(super) fn port_taken(port: u16) -> bool {
    if TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_err() {
        return true;
    }
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    TcpStream::connect_timeout(&addr, Duration::from_millis(300)).is_ok()
}
