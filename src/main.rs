//! The `throughline` binary: parse the command line, run the command, map the outcome to an
//! exit code (0 pass, 1 regression, 2 could not do the job, 3 not comparable).

use clap::{CommandFactory, Parser};
use throughline::cli::{Cli, Command};
use throughline::commands;
use throughline::exit::{exit_for, Exit};

fn main() {
    let cli = Cli::parse();
    // Before anything prints: a reader that leaves early must not cost the run.
    let relays = stdout_relay::install();
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
    stdout_relay::finish(relays);
    std::process::exit(exit.code());
}

/// Standard output and standard error into a pipe whose reader may leave early
/// (`throughline bench ... | head`, `throughline ci ... 2>&1 | head -1`). Rust's print macros
/// panic when a write fails, and a write to a pipe nobody reads fails (EPIPE): the run ended
/// there, exit 101 with a backtrace, before its results were written. So where a stream is a
/// pipe or a socket (never a terminal or a file), its descriptor becomes a pipe of this
/// process's own, which a thread copies to the real one; once the reader has gone, the thread
/// reads on and drops the rest. Where standard error is the same pipe as standard output
/// (`2>&1`), it joins standard output's relay, so the two keep their order. Every print
/// succeeds, the run ends as it would have (its files written, its exit code its own), and
/// what the reader read came in order and whole.
mod stdout_relay {
    use std::fs::File;
    use std::io::{Read, Write};
    use std::os::fd::FromRawFd;
    use std::sync::mpsc;
    use std::time::Duration;

    /// A relay's thread, which says when it has copied everything, and the descriptors that
    /// write into its pipe.
    pub struct Relay {
        done: mpsc::Receiver<()>,
        fds: Vec<i32>,
    }

    /// The relays put in place: standard output's where it is a pipe or a socket (standard
    /// error joining it where it is the same pipe), standard error's own where it is another.
    /// Empty elsewhere, or when a descriptor or a thread cannot be had: printing then goes on
    /// as before.
    pub fn install() -> Vec<Relay> {
        let (out, err) = (piped(1), piped(2));
        let same = matches!((out, err), (Some(o), Some(e)) if o == e);
        let mut relays = Vec::new();
        if out.is_some() {
            if let Some(mut relay) = relay(1) {
                // SAFETY: dup2 of descriptor 1 (now the relay's pipe) onto 2, before any other
                // thread of this process prints.
                if same && unsafe { libc::dup2(1, 2) } >= 0 {
                    relay.fds.push(2);
                }
                relays.push(relay);
            }
        }
        if err.is_some() && !same {
            relays.extend(relay(2));
        }
        relays
    }

    /// The pipe or socket behind `fd` (device and inode), None for anything else.
    fn piped(fd: i32) -> Option<(u64, u64)> {
        // SAFETY: fstat of a descriptor into a zeroed struct this function owns.
        unsafe {
            let mut st: libc::stat = std::mem::zeroed();
            if libc::fstat(fd, &mut st) != 0 {
                return None;
            }
            let kind = st.st_mode & libc::S_IFMT;
            (kind == libc::S_IFIFO || kind == libc::S_IFSOCK)
                .then_some((st.st_dev as u64, st.st_ino as u64))
        }
    }

    /// Points `fd` at a pipe of this process's own, copied to what `fd` was by a thread.
    fn relay(fd: i32) -> Option<Relay> {
        // SAFETY: fcntl, pipe2, dup2 and close on descriptors this function owns or on `fd`,
        // before any other thread of this process prints.
        unsafe {
            let real = libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 3);
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
                .name(format!("relay of fd {fd}"))
                .spawn(move || {
                    copy(from, to);
                    let _ = tell.send(());
                });
            if thread.is_err() {
                libc::close(write_end);
                return None;
            }
            // `fd` is now the pipe (inherited by children as it was: dup2 leaves it without
            // close-on-exec).
            if libc::dup2(write_end, fd) < 0 {
                libc::close(write_end);
                return None;
            }
            libc::close(write_end);
            Some(Relay {
                done,
                fds: vec![fd],
            })
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

    /// Before the process exits: what it printed is flushed into the pipes, their descriptors
    /// pointed at /dev/null (closing this process's ends), and each thread given up to two
    /// seconds to copy the rest (a child that kept a descriptor would hold it open).
    pub fn finish(relays: Vec<Relay>) {
        let _ = std::io::stdout().flush();
        let _ = std::io::stderr().flush();
        for relay in &relays {
            for &fd in &relay.fds {
                // SAFETY: open, dup2 and close of descriptors this function owns and of `fd`.
                unsafe {
                    let null = libc::open(c"/dev/null".as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                    if null >= 0 {
                        libc::dup2(null, fd);
                        libc::close(null);
                    } else {
                        libc::close(fd);
                    }
                }
            }
        }
        for relay in relays {
            let _ = relay.done.recv_timeout(Duration::from_secs(2));
        }
    }
}
