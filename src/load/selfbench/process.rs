//! The processes a self-benchmark runs: the simulator, and each case in a child process of
//! its own on a runtime of the chosen size, which measures its own peak memory.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use anyhow::{bail, Context, Result};
use serde::Serialize;

use crate::exit::Exit;
use crate::process::open_files::raise_open_files;
use crate::process::pin::{pin, CoreSplit};

/// The most streams a case may open; the simulator is started with this many slots.
const SIM_SLOTS: usize = 8192;

/// A `serve-sim` child process, killed on drop.
pub struct SimProcess {
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
pub fn spawn_child<T: serde::de::DeserializeOwned>(
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

/// Runs a case's future on a runtime of `threads` workers, on a thread of its own (the
/// caller's runtime has the default number of workers and cannot be nested), and prints
/// its figures as one JSON line.
pub fn run_on_client_runtime<T, F>(
    threads: usize,
    case: impl FnOnce() -> F + Send + 'static,
) -> Result<Exit>
where
    T: Serialize + Send + 'static,
    F: std::future::Future<Output = Result<T>>,
{
    raise_open_files();
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
