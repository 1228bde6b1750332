//! A server's output, copied into its log with a bound.
//!
//! The server writes into a pipe, never into the log file itself; a thread here drains the
//! pipe at once, whatever the disk does with it (a server whose pipe fills would stall in
//! its own `write`). The first [`LOG_HEAD_BYTES`] of a start's output go to the log as they
//! come; after that only the last [`LOG_TAIL_BYTES`] are kept, in memory, and written after
//! a line saying how much was cut when the output ends (the server and everything it
//! started are gone) or the server is stopped. A chatty server (200 MB in 0.6 s was seen)
//! leaves a log of at most about 10 MiB, which the workflows upload as an artifact.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The first bytes of each start's output kept in the log, as they come: a server says what
/// it is and how it is set up, and why a start failed (a stack trace), at the beginning.
/// vLLM's start-up, a model's load and CUDA graph capture with debug logging take a few MB;
/// 8 MiB keeps them whole with room to spare.
pub const LOG_HEAD_BYTES: u64 = 8 << 20;

/// The last bytes of a start's output kept after a cut: what the server said last before it
/// was stopped or died (an error's tail reads at most its last 64 KiB, `TAIL_BYTES`). Held
/// in memory until the output ends, per server; 2 MiB is thousands of lines of context
/// for a few MiB of memory however long the run.
pub const LOG_TAIL_BYTES: usize = 2 << 20;

/// How often (ms) the copying thread looks whether it was asked to finish while the pipe is
/// quiet.
const POLL_MS: i32 = 100;

/// How much more the thread reads once asked to finish: a process that left the server's
/// group and still writes must not keep it copying forever.
const FINISH_READS: usize = 64;

/// How much is read from the pipe at once.
const CHUNK: usize = 64 * 1024;

/// What the copying thread shares with the server's owner.
#[derive(Debug, Default)]
struct State {
    /// Bytes of output read so far.
    seen: u64,
    /// The output past the head not yet in the log: its last [`LOG_TAIL_BYTES`].
    ring: VecDeque<u8>,
    /// The tail written into the log when the copy ended.
    tail_written: u64,
    /// The copy has ended: everything kept is in the log.
    done: bool,
    /// Why the log could not be written, once it could not.
    error: Option<String>,
}

impl State {
    /// Bytes of output in neither the head nor the tail.
    fn cut(&self) -> u64 {
        let tail = self.ring.len() as u64 + self.tail_written;
        (self.seen.saturating_sub(LOG_HEAD_BYTES)).saturating_sub(tail)
    }
}

/// The copy of one start's output into its log.
#[derive(Debug)]
pub(super) struct Capture {
    state: Arc<Mutex<State>>,
    finish: Arc<AtomicBool>,
    done: mpsc::Receiver<()>,
    thread: Option<JoinHandle<()>>,
}

/// The line written into the log where output was cut.
fn cut_line(cut: u64) -> String {
    format!(
        "\n=== throughline: {cut} bytes of server output cut here (the log keeps the first \
         {LOG_HEAD_BYTES} and the last {LOG_TAIL_BYTES} bytes of each start) ===\n"
    )
}

impl Capture {
    /// Starts copying into `log` (opened for appending); returns the capture and the pipe's
    /// writing end, for the server's stdout and stderr (close-on-exec, as every copy the
    /// parent keeps must be: the log ends when the last writer goes).
    pub(super) fn start(log: File) -> std::io::Result<(Capture, OwnedFd)> {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: pipe2 writes two descriptors into the array it is given.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: both are new descriptors owned by nothing else.
        let (reader, writer) =
            unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        let state = Arc::new(Mutex::new(State::default()));
        let finish = Arc::new(AtomicBool::new(false));
        let (tx, done) = mpsc::channel();
        let (s, f) = (state.clone(), finish.clone());
        let thread = std::thread::Builder::new()
            .name("server-log".into())
            .spawn(move || {
                copy(File::from(reader), log, &s, &f);
                let _ = tx.send(());
            })?;
        Ok((
            Capture {
                state,
                finish,
                done,
                thread: Some(thread),
            },
            writer,
        ))
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits up to `wait` for the output to end (a server that exited: its last words may
    /// still be in the pipe).
    pub(super) fn settle(&self, wait: Duration) {
        let deadline = Instant::now() + wait;
        while !self.state().done && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The end of this start's output as text (its last lines, at most 64 KiB): the log's
    /// end from byte `from` on, and what is held in memory after a cut.
    pub(super) fn end_text(&self, path: &Path, from: u64) -> std::io::Result<String> {
        let limit = super::TAIL_BYTES as usize;
        let (held, cut) = {
            let state = self.state();
            let skip = state.ring.len().saturating_sub(limit);
            let held: Vec<u8> = state.ring.iter().skip(skip).copied().collect();
            // Once the copy ended, the cut line and the tail are in the log.
            (held, if state.done { 0 } else { state.cut() })
        };
        if held.len() >= limit {
            // All from memory; the first line, cut by the bound, left out.
            let text = String::from_utf8_lossy(&held);
            return Ok(text.split_once('\n').map_or("", |(_, r)| r).to_string());
        }
        let mut text = super::tail::read_end(path, from)?;
        if cut > 0 {
            text.push_str(&cut_line(cut));
        }
        text.push_str(&String::from_utf8_lossy(&held));
        Ok(text)
    }

    /// Ends the copy: whatever the pipe holds is read, the tail written after the cut line,
    /// waiting at most `wait`. Returns (bytes seen, bytes cut). Safe to call again.
    pub(super) fn finish(&mut self, wait: Duration) -> (u64, u64) {
        self.finish.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            match self.done.recv_timeout(wait) {
                Ok(()) => {
                    let _ = thread.join();
                }
                // Still writing the log (a slow disk): it ends on its own.
                Err(_) => self.thread = Some(thread),
            }
        }
        let state = self.state();
        (state.seen, state.cut())
    }

    /// Why the log could not be written, if it could not.
    pub(super) fn error(&self) -> Option<String> {
        self.state().error.clone()
    }
}

impl Drop for Capture {
    /// The thread is asked to end (it writes the tail, then goes); not waited for.
    fn drop(&mut self) {
        self.finish.store(true, Ordering::Release);
    }
}

/// Whether `fd` has something to read (or its writers are gone) within `ms` milliseconds.
fn readable(fd: libc::c_int, ms: i32) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one pollfd, valid for the call.
    let n = unsafe { libc::poll(&mut p, 1, ms) };
    n > 0
}

/// The thread's work: pipe to log, head then tail, until the output ends or `finish` is set
/// (then what the pipe holds, within [`FINISH_READS`] reads).
fn copy(mut pipe: File, mut log: File, state: &Mutex<State>, finish: &AtomicBool) {
    let lock = || state.lock().unwrap_or_else(|e| e.into_inner());
    let mut buf = vec![0u8; CHUNK];
    let mut head_left = LOG_HEAD_BYTES;
    let mut reads_after_finish = 0;
    loop {
        let asked = finish.load(Ordering::Acquire);
        if asked {
            reads_after_finish += 1;
            if reads_after_finish > FINISH_READS {
                break;
            }
        }
        if !readable(pipe.as_raw_fd(), if asked { 0 } else { POLL_MS }) {
            if asked {
                break;
            }
            continue;
        }
        let n = match pipe.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        let head = (n as u64).min(head_left) as usize;
        if head > 0 {
            head_left -= head as u64;
            if let Err(e) = log.write_all(&buf[..head]) {
                lock().error.get_or_insert_with(|| e.to_string());
            }
        }
        let mut s = lock();
        s.seen += n as u64;
        s.ring.extend(&buf[head..n]);
        let over = s.ring.len().saturating_sub(LOG_TAIL_BYTES);
        s.ring.drain(..over);
    }
    let mut s = lock();
    let cut = s.cut();
    let mut tail = Vec::with_capacity(s.ring.len() + 200);
    if cut > 0 {
        tail.extend_from_slice(cut_line(cut).as_bytes());
    }
    let (a, b) = s.ring.as_slices();
    tail.extend_from_slice(a);
    tail.extend_from_slice(b);
    if let Err(e) = log.write_all(&tail) {
        s.error.get_or_insert_with(|| e.to_string());
    }
    s.tail_written = s.ring.len() as u64;
    s.ring.clear();
    s.done = true;
}
