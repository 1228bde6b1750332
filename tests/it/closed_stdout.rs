//! A reader that leaves early (`throughline bench ... | head`): the run must not be lost.
//! Rust's print macros panic on a write to a closed pipe; a run that printed its first lines
//! into `head` ended with exit 101, a backtrace and no results.json (issue 50 item 7).

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::Duration;

use crate::common::*;

/// `bench` whose standard output is read for one line and then closed: it finishes the run,
/// writes results.json and exits 0 (or 141, killed by SIGPIPE the way `head`'s writers are),
/// never with a panic.
#[test]
fn bench_into_a_reader_that_closes_early_keeps_the_run() {
    let sim = Sim::start(1, &["--preset", "fixed", "--token-delay-ms", "1"]);
    let dir = tempfile::tempdir().unwrap();
    let profile = write_profile(dir.path(), "p", &sim.urls, QUICK_BODY);
    let out = dir.path().join("out");
    let mut child = bench_command(&profile, &out)
        .arg("--no-progress")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    // The reader is gone (dropped with its pipe) before the run prints its table.
    assert!(first.starts_with("throughline bench"), "{first}");
    let o = wait_with_deadline(child, Duration::from_secs(60), "bench into a closed pipe");
    let died_of_sigpipe = std::os::unix::process::ExitStatusExt::signal(&o.status) == Some(13);
    assert!(code(&o) == 0 || died_of_sigpipe, "{}", text(&o));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        out.join("results.json").is_file(),
        "the run was lost: {stderr}"
    );
}

/// `bench ... 2>&1 | head -1`: standard error into the same pipe, its reader gone before the
/// error is printed. The error's `eprintln!` panicked (exit 101, "failed printing to
/// stderr"); now standard error joins standard output's relay and the run exits with its own
/// code (2: nothing listens at the endpoint).
#[test]
fn an_error_into_a_reader_that_closed_early_keeps_its_exit_code() {
    let dir = tempfile::tempdir().unwrap();
    // Nothing listens on port 1 of 127.0.0.1: the run cannot measure.
    let profile = write_profile(
        dir.path(),
        "p",
        &["http://127.0.0.1:1".to_string()],
        QUICK_BODY,
    );
    let out = dir.path().join("out");
    let o = std::process::Command::new("bash")
        .arg("-c")
        .arg(r#""$0" bench -p "$1" -o "$2" --no-progress 2>&1 | head -1; echo "exit=${PIPESTATUS[0]}""#)
        .arg(bin())
        .arg(&profile)
        .arg(&out)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&o.stdout);
    assert!(said.starts_with("throughline bench"), "{said}");
    assert!(said.contains("exit=2"), "{said}");
}
