//! The processes a self-benchmark runs: the simulator, and each case in a child process of
//! its own on a runtime of the chosen size, which measures its own peak memory.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde::Serialize;

use crate::exit::Exit;
use crate::load::run::headroom::rss_bytes;

/// The most streams a case may open; the simulator is started with this many slots.
const SIM_SLOTS: usize = 8192;

/// Raises the soft open-file limit to the hard limit (thousands of streams need thousands
/// of sockets, here and in the simulator, which inherits it). Returns the soft limit.
pub(super) fn raise_nofile_limit() -> u64 {
    // SAFETY: getrlimit/setrlimit read and write the struct we own.
    unsafe {
        let mut lim: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return 0;
        }
        if lim.rlim_cur < lim.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: lim.rlim_max,
                rlim_max: lim.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                return raised.rlim_cur as u64;
            }
        }
        lim.rlim_cur as u64
    }
}

/// Which cores the client's case processes and the simulator may run on. With the two
/// pinned apart, the client's figures are its own: otherwise the simulator's threads
/// preempt the client's single worker whenever a burst of chunks is due, and the client's
/// read delays measure the simulator's CPU use as much as the client's.
#[derive(Debug, Clone, Default)]
pub(super) struct CoreSplit {
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
fn pin(_: &mut Command, _: &[usize]) {}

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
fn pin(cmd: &mut Command, cores: &[usize]) {
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

/// A `serve-sim` child process, killed on drop.
pub(super) struct SimProcess {
    child: Child,
    pub url: String,
}

impl SimProcess {
    pub fn start(extra: &[&str], cores: Option<&CoreSplit>) -> Result<SimProcess> {
        let exe = std::env::current_exe().context("cannot find the throughline binary")?;
        let mut cmd = Command::new(exe);
        cmd.args(["serve-sim", "--port", "0", "--max-running"])
            .arg(SIM_SLOTS.to_string())
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        if let Some(split) = cores {
            pin(&mut cmd, &split.simulator);
        }
        let mut child = cmd
            .spawn()
            .context("cannot start the simulator (serve-sim)")?;
        let stdout = child.stdout.take().context("no simulator output")?;
        // The first line naming an address (" on "); the simulator prints others before it.
        let mut reader = BufReader::new(stdout);
        let mut line = String::new();
        let url = loop {
            line.clear();
            let read = reader
                .read_line(&mut line)
                .context("cannot read the simulator's address")?;
            if let Some(url) = line.split(" on ").nth(1) {
                break url.trim().to_string();
            }
            if read == 0 {
                let _ = child.kill();
                bail!("the simulator did not say where it listens");
            }
        };
        Ok(SimProcess { child, url })
    }
}

impl Drop for SimProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `throughline selfbench --client-threads N ARGS` and reads its last line as JSON.
pub(super) fn spawn_child<T: serde::de::DeserializeOwned>(
    args: &[&str],
    threads: usize,
    cores: Option<&CoreSplit>,
) -> Result<T> {
    let exe = std::env::current_exe().context("cannot find the throughline binary")?;
    let mut cmd = Command::new(exe);
    cmd.args(["selfbench", "--client-threads", &threads.to_string()])
        .args(args)
        .stderr(Stdio::inherit());
    if let Some(split) = cores {
        pin(&mut cmd, &split.client);
    }
    let out = cmd.output().context("cannot run a self-benchmark case")?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        bail!("the child process failed: {text}");
    }
    let line = text.lines().last().unwrap_or_default();
    serde_json::from_str(line).with_context(|| format!("case output is not JSON: {line:?}"))
}

/// Peak resident memory of this process above what it held at the start, sampled every 5 ms
/// on a thread of its own.
pub(super) struct PeakRss {
    idle: u64,
    peak: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    sampler: std::thread::JoinHandle<()>,
}

impl PeakRss {
    pub fn start() -> PeakRss {
        let stop = Arc::new(AtomicBool::new(false));
        let peak = Arc::new(AtomicU64::new(0));
        let idle = rss_bytes().unwrap_or(0);
        let sampler = {
            let (stop, peak) = (Arc::clone(&stop), Arc::clone(&peak));
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    if let Some(rss) = rss_bytes() {
                        peak.fetch_max(rss, Ordering::Relaxed);
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
            })
        };
        PeakRss {
            idle,
            peak,
            stop,
            sampler,
        }
    }

    /// (idle RSS, peak RSS).
    pub fn finish(self) -> (u64, u64) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.sampler.join();
        let peak = self.peak.load(Ordering::Relaxed).max(self.idle);
        (self.idle, peak)
    }
}

/// Runs a case's future on a runtime of `threads` workers, on a thread of its own (the
/// caller's runtime has the default number of workers and cannot be nested), and prints
/// its figures as one JSON line.
pub(super) fn run_on_client_runtime<T, F>(
    threads: usize,
    case: impl FnOnce() -> F + Send + 'static,
) -> Result<Exit>
where
    T: Serialize + Send + 'static,
    F: std::future::Future<Output = Result<T>>,
{
    raise_nofile_limit();
    let handle = std::thread::spawn(move || -> Result<T> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads.max(1))
            .enable_all()
            .build()
            .context("cannot start the client runtime")?;
        rt.block_on(case())
    });
    let figures = handle
        .join()
        .map_err(|_| anyhow::anyhow!("the case panicked"))??;
    println!("{}", serde_json::to_string(&figures)?);
    Ok(Exit::Pass)
}
