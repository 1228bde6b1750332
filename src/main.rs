//! The `throughline` binary: parse the command line, run the command, map the outcome to an
//! exit code (0 pass, 1 regression, 2 could not do the job, 3 not comparable).

use clap::{CommandFactory, Parser};
use throughline::cli::{Cli, Command};
use throughline::commands;
use throughline::exit::{exit_for, Exit};

fn main() {
    let cli = Cli::parse();
    // Before anything prints: a reader that leaves early must not cost the run.
    let relay = stdout_relay::install();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            std::process::exit(Exit::Failure.code());
        }
    };
    let outcome = runtime.block_on(async {
        match cli.command {
            Command::Bench(args) => commands::bench::run(args).await,
            Command::Init(args) => commands::init::run(args).await,
            Command::Completions(args) => {
                let mut command = Cli::command();
                clap_complete::generate(
                    args.shell,
                    &mut command,
                    "throughline",
                    &mut std::io::stdout(),
                );
                Ok(Exit::Pass)
            }
            Command::Demo(args) => commands::demo::run(args).await,
            Command::ServeSim(args) => commands::serve_sim::run(args).await.map(|_| Exit::Pass),
            Command::Gate(args) => commands::gate::run(args).await,
            Command::Baseline(args) => commands::baseline::run(args).await,
            Command::Plot(args) => commands::plot::run(args),
            Command::Plan(args) => commands::plan::run(args),
            Command::Trend(args) => commands::trend::run(args),
            Command::Selfbench(args) => commands::selfbench::run(args),
            Command::Ci(args) => commands::ci::run(args).await,
            Command::Bisect(args) => commands::bisect::run(args).await,
            Command::Merge(args) => commands::merge::run(args),
            Command::Cleanup(args) => commands::cleanup::run(args).await,
        }
    });
    let exit = match outcome {
        Ok(exit) => exit,
        Err(error) => {
            // Secrets (the API key, URL credentials, a key line quoted by a TOML error) are
            // masked in whatever an error chain says (record/redact.rs).
            let said = throughline::record::redact::redact_error(&format!("{error:#}"));
            // Errors quote servers and files: nothing in them may act on a CI log
            // (src/untrusted.rs).
            eprintln!(
                "error: {}",
                throughline::untrusted::for_terminal_lines(&said)
            );
            exit_for(&error)
        }
    };
    if let Some(relay) = relay {
        relay.finish();
    }
    std::process::exit(exit.code());
}

/// Standard output into a pipe whose reader may leave early (`throughline bench ... | head`).
/// Rust's print macros panic when a write fails, and a write to a pipe nobody reads fails
/// (EPIPE): the run ended there, exit 101 with a backtrace, before its results were written.
/// So where standard output is a pipe or a socket (never a terminal or a file), descriptor 1
/// becomes a pipe of this process's own, which a thread copies to the real standard output;
/// once the reader has gone, the thread reads on and drops the rest. Every print succeeds, the
/// run ends as it would have (its files written, its exit code its own), and what the reader
/// read came in order and whole.
mod stdout_relay {
    use std::fs::File;
    use std::io::{Read, Write};
    use std::os::fd::FromRawFd;
    use std::sync::mpsc;
    use std::time::Duration;

    /// The relay's thread, which says when it has copied everything.
    pub struct Relay {
        done: mpsc::Receiver<()>,
    }

    /// Puts the relay in place where standard output is a pipe or a socket; None elsewhere
    /// (or when a descriptor or the thread cannot be had: printing then goes on as before).
    pub fn install() -> Option<Relay> {
        // SAFETY: fstat, fcntl, pipe2, dup2 and close on descriptors this function owns or on
        // descriptor 1, before any other thread of this process prints.
        unsafe {
            let mut st: libc::stat = std::mem::zeroed();
            if libc::fstat(1, &mut st) != 0 {
                return None;
            }
            let kind = st.st_mode & libc::S_IFMT;
            if kind != libc::S_IFIFO && kind != libc::S_IFSOCK {
                return None;
            }
            let real = libc::fcntl(1, libc::F_DUPFD_CLOEXEC, 3);
            if real < 0 {
                return None;
            }
            let mut fds = [0; 2];
            if libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
                libc::close(real);
                return None;
            }
            let (read_end, write_end) = (fds[0], fds[1]);
            let from = File::from_raw_fd(read_end);
            let to = File::from_raw_fd(real);
            let (tell, done) = mpsc::channel();
            let thread = std::thread::Builder::new()
                .name("stdout relay".into())
                .spawn(move || {
                    copy(from, to);
                    let _ = tell.send(());
                });
            if thread.is_err() {
                libc::close(write_end);
                return None;
            }
            // Descriptor 1 is now the pipe (inherited by children as stdout was: dup2 leaves
            // it without close-on-exec).
            if libc::dup2(write_end, 1) < 0 {
                libc::close(write_end);
                return None;
            }
            libc::close(write_end);
            Some(Relay { done })
        }
    }

    /// Copies until every writer has closed the pipe; after the reader has gone, reads on
    /// and drops, so that no writer blocks or fails.
    fn copy(mut from: File, mut to: File) {
        let mut buf = [0u8; 16 * 1024];
        let mut reader_gone = false;
        loop {
            match from.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    if !reader_gone && to.write_all(&buf[..n]).is_err() {
                        reader_gone = true;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
    }

    impl Relay {
        /// Before the process exits: what it printed is flushed into the pipe, descriptor 1
        /// pointed at /dev/null (closing this process's end), and the thread given up to two
        /// seconds to copy the rest (a child that kept the descriptor would hold it open).
        pub fn finish(self) {
            let _ = std::io::stdout().flush();
            // SAFETY: open, dup2 and close of descriptors this function owns and of 1.
            unsafe {
                let null = libc::open(c"/dev/null".as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                if null >= 0 {
                    libc::dup2(null, 1);
                    libc::close(null);
                } else {
                    libc::close(1);
                }
            }
            let _ = self.done.recv_timeout(Duration::from_secs(2));
        }
    }
}
