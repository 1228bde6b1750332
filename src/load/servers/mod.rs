//! Servers throughline starts itself (`--server-command`, `--base-server-command`): start
//! one per slot, wait until it is healthy, stop it, start it again elsewhere. The rules are
//! those scripts/gate-server.sh keeps for the workflows:
//!
//! - a port already taken on 127.0.0.1 is refused before anything starts (a server left
//!   over from a killed job would otherwise be measured in place of the new one);
//! - the command runs under `sh -c` in its own process group, stdin closed, stdout and
//!   stderr appended to a log file that is kept with the run's artifacts, through a pipe
//!   that throughline drains: each start keeps its first 8 MiB and its last 2 MiB, the cut
//!   said in the log and on stderr (capture.rs); the log is never written through a link;
//! - healthy is `GET /health` answering 2xx (else, where there is no `/health`, the probe's
//!   fallbacks up to `GET /v1/models`), asked at once, then ever less often up to every
//!   250 ms;
//! - a server that dies while it loads fails the wait at once, naming it, its exit status,
//!   its command and the end of its log; so does one not healthy by the timeout;
//! - stopping is SIGTERM to the group and to every process of its tree (a child that called
//!   `setsid` left the group, not the tree; a daemon whose parent exited is adopted by
//!   throughline, a child subreaper), up to 30 s for them to go, then SIGKILL; a second
//!   SIGINT/SIGTERM to throughline skips the wait; a server dropped without being stopped
//!   (an error, a panic) has its tree SIGKILLed;
//! - a server outlives a throughline that was killed outright (SIGKILL) only until its `sh`
//!   sees it: the `sh` is started with a parent-death signal (SIGTERM);
//! - what answers on the port must be the server: once it is healthy (and again at each
//!   block's end, before its trials count), every socket listening on its port must be held
//!   by a process descended from its `sh` (listener.rs). A port another process answers on
//!   is a port lost between the pick and the server's bind: the server is stopped and
//!   started again on another port, [`PORT_TRIES`] starts in all, then the run stops naming
//!   who holds the port;
//! - the command starts without the step's GitHub file commands (`$GITHUB_OUTPUT`, ...) and
//!   the runner's tokens in its environment (env.rs).
//!
//! The command must keep the server in the foreground (`exec vllm serve ...`, or plain
//! `vllm serve ...`): the `sh` exiting is read as the server exiting.

mod capture;
mod listener;
mod slots;
mod tail;

/// The process tree's reader, where runner/in_blocks.rs names it (`become_subreaper`).
pub use crate::process::tree;

pub use crate::process::env::{withhold as withhold_env, WITHHELD_ENV};
pub use capture::{LOG_HEAD_BYTES, LOG_TAIL_BYTES};

pub use slots::{free_port, parse_slots, render, shell_quoted, Slot, MAX_SLOTS};
pub use tail::{escape_controls, log_tail, TAIL_BYTES};

use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use reqwest::header::HeaderValue;

use crate::process::env;
use crate::process::group::{group_has_live_members, signal_group};
use crate::record::redact::redact;
use slots::port_taken;

/// How long a stopped server has between SIGTERM and SIGKILL (vLLM frees GPU memory and
/// shuts its workers down in a few seconds; 30 s is the workflow script's bound).
pub const DEFAULT_GRACE: Duration = Duration::from_secs(30);
/// The health wait's first pause between asks (and looks at the process); each next pause
/// is twice the last, up to [`POLL`]. A server that is up in a moment (a restart, a simulator,
/// a run in blocks starting two servers a block) is not left waiting a whole 250 ms.
const FIRST_POLL: Duration = Duration::from_millis(20);
/// The health wait's longest pause: a model that loads for minutes is asked four times a
/// second.
const POLL: Duration = Duration::from_millis(250);
/// How long one health request may take (a loading server that accepts the connection
/// and answers nothing must not stall the wait).
const REQUEST_LIMIT: Duration = Duration::from_secs(2);
/// How many of the log's last lines an error shows.
const TAIL_LINES: usize = 40;
/// How long a process group may take to go after SIGKILL (a process in the kernel, in a
/// GPU driver's call, dies when the call returns).
const KILL_WAIT: Duration = Duration::from_secs(10);
/// How long stopping waits for the last of a server's output to reach its log (its
/// processes are gone: the pipe is read to its end in moments; more is a slow disk).
const LOG_FINISH_WAIT: Duration = Duration::from_secs(5);
/// How many times [`ManagedServer::launch_checked`] starts a server, each on a port of its
/// own, while another process answers on its port. A port taken between the pick and the
/// server's bind is a race that the next port ends; a process that follows the server from
/// port to port (one that reads the port from the server's command line) is still there
/// after three, and the run stops naming it.
pub const PORT_TRIES: u32 = 3;

/// What [`ManagedServer::launch_checked`] came to.
#[derive(Debug)]
pub enum Launch {
    /// Healthy, on a port whose listening sockets are its own.
    Up(ManagedServer),
    /// Not started, or started and failed (not healthy, its port another's after
    /// [`PORT_TRIES`] starts): the caller stops it, with any others, so that their grace
    /// periods run together.
    Failed(Option<ManagedServer>, anyhow::Error),
    /// A signal came while it loaded (or before a start again on another port: none then).
    Interrupted(Option<ManagedServer>),
}

/// A server process (group) throughline started. Stop it with [`ManagedServer::stop`];
/// dropping it SIGKILLs its group.
#[derive(Debug)]
pub struct ManagedServer {
    label: String,
    command: String,
    port: u16,
    slot: Slot,
    log_path: PathBuf,
    /// Where this start's output begins in the log (earlier starts may have appended to it).
    log_from: u64,
    child: Child,
    /// The process group: the id of the `sh` that leads it.
    pgid: libc::pid_t,
    started: Instant,
    grace: Duration,
    stopped: bool,
    /// The copy of its output into the log.
    capture: capture::Capture,
}

/// One start of [`ManagedServer::launch_checked`]: done (whatever it came to), or lost to
/// another process on the port (why, and the server started, to be stopped).
enum Try {
    Done(Launch),
    Lost(Option<ManagedServer>, String),
}

/// What a stopped server left: how much of its output its log keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stopped {
    /// Bytes the server wrote (this start).
    pub output_bytes: u64,
    /// Bytes of them cut from the middle of the log ([`LOG_HEAD_BYTES`], [`LOG_TAIL_BYTES`]).
    pub log_cut_bytes: u64,
}

impl ManagedServer {
    /// Starts `command` (already rendered, see [`render`]) as server `label` (a name for
    /// messages: "head", "base") on `port` in `slot`, its output appended to `log_path`
    /// (parent folders created) after a line saying what was started. The environment gets
    /// `THROUGHLINE_PORT`, `THROUGHLINE_SLOT` and `THROUGHLINE_GPUS`; `CUDA_VISIBLE_DEVICES`
    /// is left to the command (`CUDA_VISIBLE_DEVICES={gpus} vllm serve ...`), which knows
    /// whether its engine wants it. Refused when `port` is taken on 127.0.0.1.
    ///
    /// Async for the callers' sake (and so that a future check may wait); nothing in it
    /// blocks for long.
    pub async fn start(
        label: &str,
        command: &str,
        port: u16,
        slot: &Slot,
        log_path: &Path,
    ) -> Result<ManagedServer> {
        if port == 0 {
            bail!("server {label}: port 0 is not a port to start a server on; use free_port()");
        }
        if port_taken(port) {
            bail!(
                "server {label}: port {port} on 127.0.0.1 is already in use, before the server \
                 was started: a server left over from a killed job? Stop it, or use another port"
            );
        }
        if let Some(dir) = log_path.parent().filter(|d| !d.as_os_str().is_empty()) {
            crate::fsutil::ensure_output_dir(dir).with_context(|| format!("server {label}"))?;
        }
        let mut log = crate::fsutil::open_output_append(log_path)
            .with_context(|| format!("server {label}: cannot open its log"))?;
        let log_from = log.metadata().map(|m| m.len()).unwrap_or(0);
        writeln!(
            log,
            "=== throughline: starting server {label} on port {port}, GPUs {} ({{slot}} = {}), \
             at {}: {}",
            slot.gpus,
            slot.index,
            crate::load::bench_setup::now_rfc3339(),
            redact(command)
        )
        .with_context(|| format!("server {label}: cannot write {}", log_path.display()))?;
        let copy = log
            .try_clone()
            .with_context(|| format!("server {label}: cannot open {}", log_path.display()))?;
        let (capture, pipe) = capture::Capture::start(copy)
            .with_context(|| format!("server {label}: cannot make a pipe for its output"))?;
        let out = pipe
            .try_clone()
            .with_context(|| format!("server {label}: cannot make a pipe for its output"))?;
        let mut sh = Command::new("sh");
        sh.arg("-c")
            .arg(command)
            .stdin(Stdio::null())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(pipe))
            .env("THROUGHLINE_PORT", port.to_string())
            .env("THROUGHLINE_SLOT", slot.index.to_string())
            .env("THROUGHLINE_GPUS", &slot.gpus)
            // Inherited by the whole tree: how `throughline cleanup` knows the run's processes.
            .env(tree::RUN_TOKEN_VAR, tree::run_token())
            // Its own process group, so that stopping it stops everything it started.
            .process_group(0);
        // Not the step's GitHub file commands nor the runner's tokens (env.rs).
        env::withhold(&mut sh);
        // SAFETY: the closure runs in the child between fork and exec and calls only prctl,
        // which is async-signal-safe. The parent-death signal is tied to the thread that
        // forks: a tokio worker, which lives as long as the runtime (the process).
        #[cfg(target_os = "linux")]
        unsafe {
            sh.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM, 0, 0, 0);
                Ok(())
            });
        }
        let spawned = tree::spawn_started(&mut sh);
        // The Command holds the parent's copies of the pipe's writing end: dropped now, so
        // that the output ends when the server's processes are gone.
        drop(sh);
        let child = spawned.map_err(|e| {
            anyhow!(
                "server {label}: cannot run sh -c {}: {e}",
                redact(&escape_controls(command))
            )
        })?;
        let pgid = child.id() as libc::pid_t;
        Ok(ManagedServer {
            label: label.to_string(),
            command: command.to_string(),
            port,
            slot: slot.clone(),
            log_path: log_path.to_path_buf(),
            log_from,
            child,
            pgid,
            started: Instant::now(),
            grace: DEFAULT_GRACE,
            stopped: false,
            capture,
        })
    }

    /// [`start`](Self::start) on a [`free_port`], the command rendered from `template`
    /// (see [`render`]) for that port and `slot`: what a crossover block does for each
    /// server.
    pub async fn launch(
        label: &str,
        template: &str,
        slot: &Slot,
        log_path: &Path,
    ) -> Result<ManagedServer> {
        let port = free_port()?;
        let command = render(template, port, slot)?;
        Self::start(label, &command, port, slot, log_path).await
    }

    /// [`launch`](Self::launch), waited for until healthy, and checked that what answers on
    /// the port is this server ([`check_port`](Self::check_port)). Where another process
    /// answers there (it bound the port before the server did, whose own bind then failed
    /// or will), the server is stopped and started again on another free port, at most
    /// [`PORT_TRIES`] starts, each said on stderr; after the last, the error names who holds
    /// the port. `started` is told of each start before it is waited for (to record it for
    /// `cleanup`); its error fails the launch. Health requests carry no API key.
    pub async fn launch_checked(
        label: &str,
        template: &str,
        slot: &Slot,
        log_path: &Path,
        timeout: Duration,
        interrupt: &crate::load::run::interrupt::Interrupt,
        mut started: impl FnMut(&ManagedServer) -> Result<()>,
    ) -> Launch {
        let mut n = 1;
        loop {
            let tried = Self::start_once(
                label,
                template,
                slot,
                log_path,
                timeout,
                interrupt,
                &mut started,
            );
            match tried.await {
                Try::Done(launch) => return launch,
                Try::Lost(server, why) if n < PORT_TRIES => {
                    n += 1;
                    eprintln!(
                        "warning: server {label}: {why}; it is started again on another port \
                         (start {n} of {PORT_TRIES})"
                    );
                    if let Some(server) = server {
                        if let Err(e) = server.stop().await {
                            return Launch::Failed(None, e);
                        }
                    }
                    if interrupt.is_stopping() {
                        return Launch::Interrupted(None);
                    }
                }
                Try::Lost(server, why) => {
                    let error = anyhow!(
                        "server {label}: {why} (start {n} of {PORT_TRIES}, each on a port of \
                         its own: another process answered on every one, and what answers on \
                         a server's port would be measured in its place)"
                    );
                    return Launch::Failed(server, error);
                }
            }
        }
    }

    /// One start of [`launch_checked`](Self::launch_checked): a free port, the command for
    /// it, the start, the wait; lost where another process answers on the port.
    async fn start_once(
        label: &str,
        template: &str,
        slot: &Slot,
        log_path: &Path,
        timeout: Duration,
        interrupt: &crate::load::run::interrupt::Interrupt,
        started: &mut impl FnMut(&ManagedServer) -> Result<()>,
    ) -> Try {
        let picked = free_port().and_then(|port| Ok((port, render(template, port, slot)?)));
        let (port, command) = match picked {
            Ok(picked) => picked,
            Err(e) => return Try::Done(Launch::Failed(None, e)),
        };
        if port_taken(port) {
            // Taken between the pick and now; nothing is started on it.
            let why = format!("port {port} was taken by another process once it was picked");
            return Try::Lost(None, why);
        }
        let mut server = match Self::start(label, &command, port, slot, log_path).await {
            Ok(server) => server,
            Err(e) => return Try::Done(Launch::Failed(None, e)),
        };
        if let Err(e) = started(&server) {
            return Try::Done(Launch::Failed(Some(server), e));
        }
        let up = tokio::select! {
            up = server.wait_healthy(timeout, None) => Some(up),
            () = interrupt.stopping() => None,
        };
        match up {
            None => Try::Done(Launch::Interrupted(Some(server))),
            Some(Ok(())) => match server.port_owner() {
                Ok(()) => Try::Done(Launch::Up(server)),
                Err(why) => Try::Lost(Some(server), format!("port {port} {why}")),
            },
            Some(Err(e)) => {
                // Dead before it was healthy, another process listening on its port: its
                // own bind failed (the port was taken between the pick and the bind).
                if server.exited().is_some() {
                    if let Err(listener::NotOurs::Held(who)) = listener::owned_by(port, &[]) {
                        let why = format!(
                            "port {port} {who} (the server exited before it was healthy: \
                             its own bind failed?)"
                        );
                        return Try::Lost(Some(server), why);
                    }
                }
                Try::Done(Launch::Failed(Some(server), e))
            }
        }
    }

    /// Whether what listens on the server's port is the server's own: every socket listening
    /// on it held by a process descended from its `sh` (listener.rs). The error names who
    /// holds it (pid and command line, escaped). Checked once the server is healthy and
    /// again at a block's end: what answered may have changed since.
    pub fn check_port(&mut self) -> Result<()> {
        let (label, port) = (self.label.clone(), self.port);
        self.port_owner()
            .map_err(|why| anyhow!("server {label}: port {port} {why}"))
    }

    /// [`check_port`](Self::check_port)'s reason, after "port N ". Linux only: elsewhere
    /// there is no /proc to tell who listens, and nothing is refused.
    fn port_owner(&mut self) -> std::result::Result<(), String> {
        if !cfg!(target_os = "linux") {
            return Ok(());
        }
        if let Some(status) = self.exited() {
            // Whoever listens there now is no process of the server's (it has none left):
            // named, as a start whose port was taken before its bind (its bind failed).
            let holder = match listener::owned_by(self.port, &[]) {
                Err(listener::NotOurs::Held(who)) => format!("; the port {who}"),
                _ => String::new(),
            };
            return Err(format!(
                "is not the server's any more: the server exited ({status}){holder}"
            ));
        }
        // The `sh` is not reaped (just seen running): its pid is still its own.
        let tree = tree::tree_of(&[self.pgid], None, &tree::table());
        listener::owned_by(self.port, &tree).map_err(|e| e.reason())
    }

    /// How long [`stop`](Self::stop) waits between SIGTERM and SIGKILL ([`DEFAULT_GRACE`]
    /// unless set; tests shorten it).
    pub fn set_grace(&mut self, grace: Duration) {
        self.grace = grace;
    }

    /// `http://127.0.0.1:PORT`, the server's endpoint.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn log_path(&self) -> &Path {
        &self.log_path
    }

    pub fn label(&self) -> &str {
        &self.label
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn slot(&self) -> &Slot {
        &self.slot
    }

    /// The process id of the `sh` that runs the command, which is also its process group's.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The exit status of the `sh` that runs the command, once it has exited (it is reaped
    /// then); `None` while it runs.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Polls the server until it is healthy (pauses of 20 ms, 40 ms, ... then 250 ms; 2 s per
    /// request; `api_key` goes with every request). Fails at once when the process exits
    /// first (a server that dies while loading the model), and at `timeout`; both errors name
    /// the server, its command and its log, with the log's last 40 lines. Says on stderr what
    /// it waits for every 15 s (a model can take minutes to load).
    pub async fn wait_healthy(
        &mut self,
        timeout: Duration,
        api_key: Option<&HeaderValue>,
    ) -> Result<()> {
        let client = super::stream::client::build_probe_client(api_key)?;
        let url = self.url();
        let start = Instant::now();
        let deadline = start + timeout;
        let mut why = String::from("not asked yet");
        let mut last_said = Instant::now();
        let mut poll = FIRST_POLL;
        loop {
            if let Some(status) = self.exited() {
                return Err(self.failure(&format!("exited ({status}) before it was healthy")));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                let waited =
                    humantime::format_duration(Duration::from_secs(start.elapsed().as_secs()));
                return Err(self.failure(&format!(
                    "was not healthy after {waited}: {}",
                    redact(&escape_controls(&why))
                )));
            }
            let asked = Instant::now();
            let check = super::probe::health(&client, &url, REQUEST_LIMIT);
            let outcome = tokio::select! {
                answer = check => Some(answer),
                () = exit_of(&mut self.child) => None,
                () = tokio::time::sleep(left) => Some(Err("no answer in time".to_string())),
            };
            match outcome {
                Some(Ok(())) => return Ok(()),
                Some(Err(e)) => why = e,
                None => continue, // exited: said at the loop's top
            }
            if last_said.elapsed() >= super::probe::WAIT_MESSAGE_INTERVAL {
                eprintln!(
                    "waiting for server {} at {url} to be healthy (its log: {}); now: {}",
                    self.label,
                    self.log_path.display(),
                    redact(&escape_controls(&why))
                );
                last_said = Instant::now();
            }
            let pause = poll.saturating_sub(asked.elapsed());
            poll = (poll * 2).min(POLL);
            tokio::select! {
                () = tokio::time::sleep(pause) => {}
                () = exit_of(&mut self.child) => {}
            }
        }
    }

    /// The last `lines` lines this start of the server wrote, each behind a `| ` margin,
    /// control characters escaped (see [`log_tail`]). A server that exited is given a
    /// moment for its last words to reach the log; output cut from the log's middle is
    /// still shown where it is the end.
    pub fn log_tail(&mut self, lines: usize) -> String {
        if self.exited().is_some() {
            self.capture.settle(Duration::from_secs(1));
        }
        match self.capture.end_text(&self.log_path, self.log_from) {
            Ok(text) => tail::format_tail(&text, lines),
            Err(e) => format!("| (cannot read the log {}: {e})", self.log_path.display()),
        }
    }

    /// An error about this server: `what` happened, with its command, its log's path and
    /// its last lines (escaped, redacted).
    fn failure(&mut self, what: &str) -> anyhow::Error {
        let tail = self.log_tail(TAIL_LINES);
        let text = format!(
            "server {} (port {}, GPUs {}) {what}, {} after it was started\n\
             command: sh -c {}\n\
             the last {TAIL_LINES} lines of its log {}:\n{tail}",
            self.label,
            self.port,
            self.slot.gpus,
            humantime::format_duration(Duration::from_millis(
                self.started.elapsed().as_millis() as u64
            )),
            escape_controls(&self.command),
            self.log_path.display(),
        );
        anyhow!("{}", redact(&text))
    }

    /// Stops the server: SIGTERM to its process group and every other process of its tree
    /// (see [`tree`]), up to the grace period ([`set_grace`](Self::set_grace)) for all of
    /// them to end (cut short by a second SIGINT/SIGTERM to throughline), then SIGKILL. The
    /// `sh` is reaped. An error when something outlives SIGKILL by 10 s (a process stuck in
    /// the kernel).
    ///
    /// Returns how much output the server wrote and how much of it its log cut (said on
    /// stderr too).
    ///
    /// Cancel-safe: a stop dropped half-way leaves the rest to [`Drop`] (SIGKILL).
    pub async fn stop(mut self) -> Result<Stopped> {
        let hurry = crate::load::run::interrupt::Interrupt::installed();
        let hurried = || hurry.as_ref().is_some_and(|h| h.is_hurried());
        let mut known = self.tree(&[]);
        self.signal_all(&known, libc::SIGTERM);
        let deadline = Instant::now() + self.grace;
        while Instant::now() < deadline && !hurried() {
            if self.gone(&mut known) {
                return Ok(self.end_log(LOG_FINISH_WAIT));
            }
            // Anything new in the tree (a child forked while shutting down) is asked too.
            self.signal_all(&known, libc::SIGTERM);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        self.signal_all(&known, libc::SIGKILL);
        let deadline = Instant::now() + KILL_WAIT;
        while Instant::now() < deadline {
            if self.gone(&mut known) {
                return Ok(self.end_log(LOG_FINISH_WAIT));
            }
            self.signal_all(&known, libc::SIGKILL);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let left: Vec<String> = (known.iter())
            .filter(|p| tree::still_there(p))
            .map(|p| p.pid.to_string())
            .collect();
        bail!(
            "server {}: its process group {} (processes {}) is still there 10 s after SIGKILL",
            self.label,
            self.pgid,
            left.join(", ")
        )
    }

    /// Sends `signal` to the group (while it is still this server's: the `sh` not reaped, or
    /// a member seen before still there) and to each process `known`.
    fn signal_all(&mut self, known: &[tree::Proc], signal: libc::c_int) {
        let reaped = !matches!(self.child.try_wait(), Ok(None));
        if !reaped
            || known
                .iter()
                .any(|p| p.pgid == self.pgid && tree::still_there(p))
        {
            signal_group(self.pgid, signal);
        }
        tree::signal_each(known, signal);
    }

    /// The live processes of this server's tree, and the strays throughline adopted. While
    /// the `sh` is not reaped its pid and group are this server's; after, the group is
    /// trusted at the first look (`known` empty: a group's id is not given out while a
    /// member lives, and the `sh` was reaped moments ago), then only through the processes
    /// already `known` (still the same ones).
    fn tree(&mut self, known: &[tree::Proc]) -> Vec<tree::Proc> {
        let procs = tree::table();
        let mut roots: Vec<libc::pid_t> = (known.iter())
            .filter(|p| tree::still_there(p))
            .map(|p| p.pid)
            .collect();
        let reaped = !matches!(self.child.try_wait(), Ok(None));
        let group = if reaped {
            (known.iter()).find(|p| p.pgid == self.pgid && tree::still_there(p))
        } else {
            roots.push(self.pgid);
            None
        };
        let pgid = (!reaped || group.is_some() || known.is_empty()).then_some(self.pgid);
        let mut found = tree::tree_of(&roots, pgid, &procs);
        found.extend(tree::strays(&procs));
        found
    }

    /// Whether the whole tree has ended (the `sh` reaped, adopted strays too); `known`
    /// gains what the tree has now.
    fn gone(&mut self, known: &mut Vec<tree::Proc>) -> bool {
        let _ = self.exited();
        for p in self.tree(known) {
            if !known.contains(&p) {
                known.push(p);
            }
        }
        tree::reap(known, Some(self.pgid));
        if self.group_alive() || known.iter().any(tree::still_there) {
            return false;
        }
        // Those that ended since the look above (the last members of the group) too.
        tree::reap(known, Some(self.pgid));
        self.stopped = true;
        tree::forget_started(self.pgid);
        true
    }

    /// Ends the copy of the output into the log (the tail after a cut is written now) and
    /// says on stderr what was cut, if anything.
    fn end_log(&mut self, wait: Duration) -> Stopped {
        let (output_bytes, log_cut_bytes) = self.capture.finish(wait);
        if log_cut_bytes > 0 {
            eprintln!(
                "warning: server {} wrote {output_bytes} bytes of output: {log_cut_bytes} \
                 bytes of server output cut from the middle of its log {} (it keeps the \
                 first {LOG_HEAD_BYTES} and the last {LOG_TAIL_BYTES} bytes)",
                self.label,
                self.log_path.display()
            );
        }
        if let Some(e) = self.capture.error() {
            eprintln!(
                "warning: server {}: its log {} could not be written whole: {e}",
                self.label,
                self.log_path.display()
            );
        }
        Stopped {
            output_bytes,
            log_cut_bytes,
        }
    }

    /// Whether a process of the group runs: the `sh` not yet reaped, or another member that
    /// is not a zombie (an orphan whose new parent does not reap it still counts as gone).
    fn group_alive(&mut self) -> bool {
        // An error (the `sh` already reaped elsewhere) counts as exited, never as running.
        if let Ok(None) = self.child.try_wait() {
            return true;
        }
        group_has_live_members(self.pgid)
    }
}

impl Drop for ManagedServer {
    /// SIGKILLs the group of a server not stopped, and reaps the `sh` (waiting at most 2 s:
    /// a drop must not hang), then ends the log's copy (at most 1 s more). Never panics.
    fn drop(&mut self) {
        if self.stopped {
            return;
        }
        let known = self.tree(&[]);
        self.signal_all(&known, libc::SIGKILL);
        let deadline = Instant::now() + Duration::from_secs(2);
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_)) | Err(_)) {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        tree::reap(&known, Some(self.pgid));
        tree::forget_started(self.pgid);
        // The log's tail is written before the process (an error's exit) may end.
        self.end_log(Duration::from_secs(1));
    }
}

/// Resolves when the child has exited (polled every 50 ms; it stays unreaped only until the
/// caller's next [`ManagedServer::exited`]).
async fn exit_of(child: &mut Child) {
    loop {
        if matches!(child.try_wait(), Ok(Some(_))) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
