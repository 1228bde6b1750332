//! Pinning a child to cores: the self-benchmark runs its client cases and the simulator on
//! cores apart, so that each one's figures are its own.

use std::process::Command;

/// Which cores the client's case processes and the simulator may run on. With the two
/// pinned apart, the client's figures are its own: otherwise the simulator's threads
/// preempt the client's single worker whenever a burst of chunks is due, and the client's
/// read delays measure the simulator's CPU use as much as the client's.
#[derive(Debug, Clone, Default)]
pub struct CoreSplit {
    pub client: Vec<usize>,
    pub simulator: Vec<usize>,
}

impl CoreSplit {
    /// The first `client_threads` of the cores this process may use for the client, the
    /// rest for the simulator; `None` when there are not enough cores to split.
    pub fn new(client_threads: usize) -> Option<CoreSplit> {
        let cores = allowed_cores();
        if cores.len() <= client_threads {
            return None;
        }
        let (client, simulator) = cores.split_at(client_threads);
        Some(CoreSplit {
            client: client.to_vec(),
            simulator: simulator.to_vec(),
        })
    }
}

/// The cores this process may run on (none known outside Linux: nothing is pinned there).
#[cfg(not(target_os = "linux"))]
fn allowed_cores() -> Vec<usize> {
    Vec::new()
}

#[cfg(not(target_os = "linux"))]
pub fn pin(_: &mut Command, _: &[usize]) {}

/// The cores this process may run on.
#[cfg(target_os = "linux")]
fn allowed_cores() -> Vec<usize> {
    // SAFETY: cpu_set_t is plain data, and sched_getaffinity writes at most its size.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    }
}

/// Makes `cmd`'s process (and every thread it starts) run only on `cores`.
#[cfg(target_os = "linux")]
pub fn pin(cmd: &mut Command, cores: &[usize]) {
    use std::os::unix::process::CommandExt;
    if cores.is_empty() {
        return;
    }
    // SAFETY: cpu_set_t is plain data; CPU_SET writes inside it.
    let set = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cores {
            libc::CPU_SET(c, &mut set);
        }
        set
    };
    // SAFETY: between fork and exec the closure makes one system call, which is
    // async-signal-safe, and allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            if libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}
