//! Servers throughline starts and stops itself (src/load/servers): the real binary's
//! simulator as the server, and small shell commands for the ways a server misbehaves.
//! Everything on 127.0.0.1, every wait bounded.

use std::path::Path;
use std::time::{Duration, Instant};

use throughline::load::servers::{
    free_port, parse_slots, render, ManagedServer, Slot, LOG_HEAD_BYTES, LOG_TAIL_BYTES,
};

fn sim_template() -> String {
    format!(
        "echo port=$THROUGHLINE_PORT slot=$THROUGHLINE_SLOT gpus=$THROUGHLINE_GPUS; \
         exec {} serve-sim --preset instant --port {{port}} --model slot-{{slot}}-gpus-{{gpus}}",
        env!("CARGO_BIN_EXE_throughline")
    )
}

fn slot() -> Slot {
    Slot {
        index: 0,
        gpus: "0".into(),
    }
}

/// Whether a process that is not a zombie is in process group `pgid` (read from /proc: an
/// orphan that no one reaps stays a zombie in its group, and `kill(-pgid, 0)` would count it).
fn group_alive(pgid: u32) -> bool {
    std::fs::read_dir("/proc").unwrap().flatten().any(|entry| {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            return false;
        };
        let Some((_, rest)) = stat.rsplit_once(')') else {
            return false;
        };
        let f: Vec<&str> = rest.split_whitespace().collect();
        f.len() > 2 && f[2] == pgid.to_string() && f[0] != "Z" && f[0] != "X"
    })
}

fn pid_exists(pid: u32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    unsafe { libc::kill(pid as libc::pid_t, 0) == 0 }
}

/// Waits (at most 5 s) for `path` to hold a line that is exactly `line`: one the server
/// printed itself. The log's header quotes the command (`... echo ready ...`), so a
/// substring match returned before the shell had run what comes before the `echo` (a `trap`
/// that made the server outlive SIGTERM, seen racing in 7 of 18 runs).
async fn wait_for_log(path: &Path, line: &str) {
    crate::common::share_machine();
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if std::fs::read_to_string(path).is_ok_and(|t| t.lines().any(|l| l == line)) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!(
        "{} never said {line:?} on a line of its own",
        path.display()
    );
}

#[tokio::test]
async fn two_servers_start_healthy_answer_and_stop() {
    // The servers start beside nothing timed.
    crate::common::share_machine();
    let dir = tempfile::tempdir().unwrap();
    let slots = parse_slots("0;1").unwrap();
    let mut servers = Vec::new();
    // One through start(), one through launch() (free port and render in one).
    let port = free_port().unwrap();
    let command = render(&sim_template(), port, &slots[0]).unwrap();
    let log = dir.path().join("servers").join("head.log");
    servers.push(
        ManagedServer::start("head", &command, port, &slots[0], &log)
            .await
            .unwrap(),
    );
    let log = dir.path().join("servers").join("base.log");
    servers.push(
        ManagedServer::launch("base", &sim_template(), &slots[1], &log)
            .await
            .unwrap(),
    );
    for server in &mut servers {
        server
            .wait_healthy(Duration::from_secs(30), None)
            .await
            .unwrap();
    }
    let client = reqwest::Client::new();
    for (i, server) in servers.iter().enumerate() {
        let models = client
            .get(format!("{}/v1/models", server.url()))
            .timeout(Duration::from_secs(5))
            .send()
            .await
            .unwrap();
        assert!(models.status().is_success());
        let body = models.text().await.unwrap();
        assert!(body.contains(&format!("slot-{i}-gpus-{i}")), "{body}");
        let log = std::fs::read_to_string(server.log_path()).unwrap();
        assert!(
            log.contains(&format!("port={} slot={i} gpus={i}", server.port())),
            "{log}"
        );
        assert!(log.starts_with("=== throughline: starting server"), "{log}");
    }
    let pids: Vec<u32> = servers.iter().map(ManagedServer::pid).collect();
    for server in servers {
        crate::common::share_machine();
        let t = Instant::now();
        server.stop().await.unwrap();
        assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    }
    for pid in pids {
        assert!(!pid_exists(pid), "server {pid} is still there");
        assert!(!group_alive(pid), "group {pid} is still there");
    }
}

#[tokio::test]
async fn a_server_that_dies_while_loading_fails_the_wait_at_once_with_its_log() {
    // The servers start beside nothing timed.
    crate::common::share_machine();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("dies.log");
    let port = free_port().unwrap();
    let command = "echo boom >&2; printf '\\033[31m::error::injected\\n'; exit 3";
    let mut server = ManagedServer::start("head", command, port, &slot(), &log)
        .await
        .unwrap();
    crate::common::share_machine();
    let t = Instant::now();
    let e = server
        .wait_healthy(Duration::from_secs(60), None)
        .await
        .unwrap_err()
        .to_string();
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    assert!(e.contains("server head"), "{e}");
    assert!(e.contains("exit status: 3"), "{e}");
    assert!(e.contains("| boom"), "{e}");
    assert!(e.contains("echo boom"), "{e}");
    assert!(e.contains(&log.display().to_string()), "{e}");
    // The server's text is escaped, and no line of it starts a runner command.
    assert!(!e.contains('\x1b'), "{e:?}");
    assert!(e.contains("| \\u{1b}[31m::error::injected"), "{e}");
    assert!(!e.lines().any(|l| l.starts_with("::")), "{e}");
    assert!(server.exited().is_some());
    server.stop().await.unwrap();
}

#[tokio::test]
async fn a_server_not_healthy_by_the_timeout_fails_with_its_log() {
    // The servers start beside nothing timed.
    crate::common::share_machine();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("slow.log");
    let port = free_port().unwrap();
    let mut server =
        ManagedServer::start("base", "echo loading; exec sleep 30", port, &slot(), &log)
            .await
            .unwrap();
    crate::common::share_machine();
    let t = Instant::now();
    let e = server
        .wait_healthy(Duration::from_millis(800), None)
        .await
        .unwrap_err()
        .to_string();
    assert!(t.elapsed() < Duration::from_secs(4), "{:?}", t.elapsed());
    assert!(e.contains("server base"), "{e}");
    assert!(e.contains("was not healthy after"), "{e}");
    assert!(e.contains("| loading"), "{e}");
    assert!(server.exited().is_none());
    let pid = server.pid();
    server.stop().await.unwrap();
    assert!(!group_alive(pid));
}

#[tokio::test]
async fn a_server_that_ignores_sigterm_is_killed_after_the_grace() {
    // The servers start beside nothing timed.
    crate::common::share_machine();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("stubborn.log");
    let port = free_port().unwrap();
    let command = "trap '' TERM; echo ready; sleep 60 & sleep 60; wait";
    let mut server = ManagedServer::start("head", command, port, &slot(), &log)
        .await
        .unwrap();
    wait_for_log(&log, "ready").await;
    server.set_grace(Duration::from_millis(700));
    let pid = server.pid();
    assert!(group_alive(pid));
    crate::common::share_machine();
    let t = Instant::now();
    server.stop().await.unwrap();
    let took = t.elapsed();
    assert!(took >= Duration::from_millis(700), "{took:?}");
    assert!(took < Duration::from_secs(5), "{took:?}");
    assert!(!pid_exists(pid));
    assert!(!group_alive(pid), "group {pid} is still there");
}

#[tokio::test]
async fn a_dropped_server_has_its_group_killed() {
    // The servers start beside nothing timed.
    crate::common::share_machine();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("dropped.log");
    let port = free_port().unwrap();
    let server = ManagedServer::start(
        "head",
        "echo ready; sleep 60 & sleep 60; wait",
        port,
        &slot(),
        &log,
    )
    .await
    .unwrap();
    wait_for_log(&log, "ready").await;
    let pid = server.pid();
    assert!(group_alive(pid));
    drop(server);
    crate::common::share_machine();
    let deadline = Instant::now() + Duration::from_secs(3);
    while group_alive(pid) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!group_alive(pid), "group {pid} is still there");
    assert!(!pid_exists(pid), "the sh was not reaped");
}

#[tokio::test]
async fn a_taken_port_is_refused() {
    // The servers start beside nothing timed.
    crate::common::share_machine();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("taken.log");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let e = ManagedServer::start("base", "exec sleep 60", port, &slot(), &log)
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains(&format!("port {port}")), "{e}");
    assert!(e.contains("already in use"), "{e}");
    assert!(e.contains("server base"), "{e}");
    assert!(!log.exists(), "nothing was started, nothing logged");
}

#[tokio::test]
async fn a_restart_shows_only_its_own_log_lines() {
    // The servers start beside nothing timed.
    crate::common::share_machine();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("again.log");
    for (run, code) in [("first", 4), ("second", 5)] {
        let port = free_port().unwrap();
        let command = format!("echo {run}; exit {code}");
        let mut server = ManagedServer::start("head", &command, port, &slot(), &log)
            .await
            .unwrap();
        let e = server
            .wait_healthy(Duration::from_secs(10), None)
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains(&format!("| {run}")), "{e}");
        assert!(e.contains(&format!("exit status: {code}")), "{e}");
        if run == "second" {
            assert!(!e.contains("| first"), "{e}");
        }
    }
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("first") && text.contains("second"), "{text}");
}

/// Issue 35 item 5: a server that writes far more than its log keeps, then dies while it
/// loads. Its output is drained (it never blocks on a full pipe), the error shows its last
/// words, and the log keeps its head and tail with the cut said between them. With a child
/// left holding the output (`sleep &`), the last words come from memory; without, from the
/// log once the output ended.
#[tokio::test]
async fn a_chatty_server_that_dies_keeps_a_bounded_log_and_its_last_words() {
    // The servers start beside nothing timed.
    crate::common::share_machine();
    for left in ["", "sleep 30 & "] {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("chatty.log");
        let port = free_port().unwrap();
        let command = format!(
            "{left}echo first words; head -c 30000000 /dev/zero | tr '\\0' y; echo; \
             echo last words; exit 7"
        );
        let mut server = ManagedServer::start("head", &command, port, &slot(), &log)
            .await
            .unwrap();
        crate::common::share_machine();
        let t = Instant::now();
        let e = server
            .wait_healthy(Duration::from_secs(60), None)
            .await
            .unwrap_err()
            .to_string();
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "{left}{:?}",
            t.elapsed()
        );
        let end = &e[e.len().saturating_sub(300)..];
        assert!(e.contains("exit status: 7"), "{left}{end}");
        assert!(e.ends_with("| last words"), "{left}{end}");
        let stopped = server.stop().await.unwrap();
        assert!(stopped.output_bytes > 30_000_000, "{left}{stopped:?}");
        let kept = LOG_HEAD_BYTES + LOG_TAIL_BYTES as u64;
        assert_eq!(stopped.log_cut_bytes, stopped.output_bytes - kept, "{left}");
        let bytes = std::fs::read(&log).unwrap();
        assert!((bytes.len() as u64) < kept + 4096, "{left}{}", bytes.len());
        let text = String::from_utf8_lossy(&bytes);
        assert!(
            text.starts_with("=== throughline: starting server"),
            "{left}"
        );
        assert!(text.contains("\nfirst words\n"), "{left}");
        let said = format!(
            "=== throughline: {} bytes of server output cut here",
            stopped.log_cut_bytes
        );
        assert!(text.contains(&said), "{left}");
        assert!(text.ends_with("\nlast words\n"), "{left}");
    }
}

/// Issue 50 item 7: the GPU locks are machine-wide, so they are taken only for GPUs a run
/// named: with no `--slots` and server commands that do not use `{gpus}`, the default slots
/// name no GPU the servers use (a CPU server, the simulator, a command that picks its own
/// GPUs) and no GPU lock is taken, which the run says; naming the slots takes theirs.
#[test]
fn gpu_locks_are_taken_only_for_gpus_a_run_named() {
    use crate::common::*;
    let dir = tempfile::tempdir().unwrap();
    let profile = write_profile(
        dir.path(),
        "p",
        &["http://127.0.0.1:1".to_string()],
        QUICK_BODY,
    );
    let server = format!(
        "exec {} serve-sim --port {{port}} --preset fixed --token-delay-ms 1",
        bin()
    );
    let locks = |name: &str| -> Vec<String> {
        let dir = dir.path().join(name);
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n.starts_with("gpu-"))
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    };
    let bench = |name: &str, extra: &[&str]| {
        let o = bench_command(&profile, &dir.path().join(format!("out-{name}")))
            .args(["--no-progress", "--server-command", &server])
            .args(extra)
            .env("THROUGHLINE_LOCK_DIR", dir.path().join(name))
            .output()
            .unwrap();
        assert_eq!(code(&o), 0, "{}", text(&o));
        o
    };
    let o = bench("unnamed", &[]);
    assert_eq!(locks("unnamed"), Vec::<String>::new());
    assert!(text(&o).contains("no GPU lock"), "{}", text(&o));
    bench("named", &["--slots", "3"]);
    assert_eq!(locks("named"), ["gpu-3.lock"]);
}
