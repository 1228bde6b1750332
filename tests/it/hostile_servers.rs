//! Issue 47: ways something other than the measurement could write the verdict through the
//! servers throughline starts itself (`--server-command`). A run in blocks picks a free
//! port, lets it go and tells the server to bind it: whatever answers there was measured,
//! even a process that is not the server's (seen: exit 0, model "SQUATTER"). And a started
//! server inherited the step's GitHub file commands (`$GITHUB_OUTPUT`, ...) and wrote the
//! step's outputs and summary. Everything on 127.0.0.1, every wait bounded.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::common::*;

/// A small profile: one level, 2 trials of 4 requests; the endpoints are the servers'.
fn profile(dir: &Path) -> PathBuf {
    write_profile(
        dir,
        "hostile",
        &["http://127.0.0.1:1".to_string()],
        "[workload]\nmax_tokens = 8\nignore_eos = true\n[sweep]\nconcurrency = [2]\n\
         requests_per_level = 4\nwarmup_requests = 1\ntrials = 2\n[gate]\nmin_trials = 2\n",
    )
}

/// `path` in single quotes for the shell that runs a server command.
fn quoted(path: &Path) -> String {
    format!("'{}'", path.display().to_string().replace('\'', r"'\''"))
}

/// A process started by the test, before the run: not throughline's descendant, without
/// its run's token. It reads port numbers from a FIFO and serves a simulator named
/// SQUATTER on each (what a server command can ask of a process it does not own), and
/// touches `bound-PORT` beside the FIFO once that simulator listens. It stays in the test
/// binary's process group: a child in a group of its own would be a stray to the servers
/// that library tests stop in this process (they signal this process's children in other
/// groups). Killed with its descendants on drop; its `sh` dies with the test binary.
struct Squatter {
    child: Child,
    fifo: PathBuf,
}

impl Squatter {
    fn start(dir: &Path) -> Squatter {
        let fifo = dir.join("ports");
        mkfifo(&fifo);
        // The FIFO is opened read-write: a writer never waits, a read never sees its end.
        let script = format!(
            "exec 3<>{fifo}; while read p <&3; do \
               {bin} serve-sim --preset instant --port \"$p\" --model SQUATTER \
                 | (read line; touch {dir}/bound-\"$p\"; cat >/dev/null) & \
             done",
            fifo = quoted(&fifo),
            bin = bin(),
            dir = quoted(dir),
        );
        let mut cmd = Command::new("sh");
        cmd.args(["-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::null());
        // SAFETY: prctl is async-signal-safe and touches only the child being started.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let child = cmd.spawn().expect("start the squatter");
        Squatter { child, fifo }
    }

    /// A shell command that hands `{port}` to the squatter.
    fn hand_over(&self) -> String {
        format!("echo {{port}} > {}", quoted(&self.fifo))
    }
}

/// The processes descended from `root` (read from /proc/PID/stat: pid, then parent).
fn descendants(root: u32) -> Vec<u32> {
    let parents: Vec<(u32, u32)> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let pid: u32 = e.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            let ppid = stat
                .rsplit_once(')')?
                .1
                .split_whitespace()
                .nth(1)?
                .parse()
                .ok()?;
            Some((pid, ppid))
        })
        .collect();
    let mut found = vec![root];
    let mut i = 0;
    while i < found.len() {
        let parent = found[i];
        found.extend(
            parents
                .iter()
                .filter(|(_, pp)| *pp == parent)
                .map(|(p, _)| *p),
        );
        i += 1;
    }
    found
}

impl Drop for Squatter {
    fn drop(&mut self) {
        for pid in descendants(self.child.id()) {
            // SAFETY: kill only sends a signal, to a process this test started (the sh and
            // what it started, read a moment ago).
            unsafe {
                libc::kill(pid as libc::pid_t, libc::SIGKILL);
            }
        }
        let _ = self.child.wait();
    }
}

/// `bench` in blocks on one slot (one server), one block.
fn bench_one(p: &Path, out: &Path, server: &str) -> std::process::Output {
    let args = [
        "--no-progress",
        "--no-plots",
        "--server-command",
        server,
        "--slots",
        "0",
        "--blocks",
        "1",
        "--max-blocks",
        "1",
        "--server-timeout",
        "60s",
    ];
    run_bench_cli(p, out, &args)
}

/// The model the run measured, where it wrote results.
fn measured_model(out: &Path) -> Option<String> {
    let results = out.join("results.json");
    results.exists().then(|| {
        read_json(&results)["environment"]["model"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    })
}

/// Item 1: a server command that never serves but has a process started before the run
/// (no descendant of throughline) listen on `{port}`. That process answered the health
/// check and was measured: exit 0, model SQUATTER. Now the listening socket must belong
/// to the server's process tree: the run exits 2 naming who holds the port.
#[test]
fn a_port_answered_by_a_process_outside_the_servers_tree_is_not_measured() {
    let dir = tempfile::tempdir().unwrap();
    let squatter = Squatter::start(dir.path());
    let p = profile(dir.path());
    let out = dir.path().join("out");
    let server = format!("{}; exec sleep 60", squatter.hand_over());
    let o = bench_one(&p, &out, &server);
    let said = text(&o);
    assert_eq!(measured_model(&out), None, "{said}");
    assert_eq!(code(&o), 2, "{said}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("not in the process tree"), "{err}");
    // The holder is named: its pid and its command line.
    assert!(err.contains("serve-sim --preset instant --port"), "{err}");
    assert!(err.contains("--model SQUATTER"), "{err}");
    assert!(err.contains("pid "), "{err}");
    // Three starts, each on a port of its own, then the run gives up.
    assert!(err.contains("start 3 of 3"), "{err}");
}

/// Item 1: the port taken between the free-port pick and the server's bind (here by the
/// squatter, on the first start only, before the server binds): the server's own bind
/// fails, it is started again on another port and the real server is measured. Before, the
/// squatter answered the health check and the server's death ended the run (exit 2).
#[test]
fn a_start_whose_port_was_taken_is_retried_on_another_port() {
    let dir = tempfile::tempdir().unwrap();
    let squatter = Squatter::start(dir.path());
    let p = profile(dir.path());
    let out = dir.path().join("out");
    let server = format!(
        "if mkdir {first} 2>/dev/null; then {hand}; \
           while ! test -e {dir}/bound-{{port}}; do sleep 0.05; done; fi; \
         exec {bin} serve-sim --preset instant --port {{port}} --model REAL",
        first = quoted(&dir.path().join("first")),
        hand = squatter.hand_over(),
        dir = quoted(dir.path()),
        bin = bin(),
    );
    let o = bench_one(&p, &out, &server);
    let said = text(&o);
    assert_eq!(code(&o), 0, "{said}");
    assert_eq!(measured_model(&out).as_deref(), Some("REAL"), "{said}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("another port"), "{err}");
    assert!(
        err.contains("--model SQUATTER"),
        "the holder is named: {err}"
    );
}

/// Item 1 (b): the head's server reads the base's port from /proc/*/cmdline and serves a
/// slow fake base there before the base's server binds it. The base's server stands for
/// one that loads before it binds (SGLang, TGI): once the head's watcher runs (block 2,
/// where the head starts first) it binds only after the fake listens, or 10 s, and it stays
/// up when its bind fails (as a server sharing the port with SO_REUSEPORT, or a launcher
/// outliving its worker, would). Seen before: block 2 measured the fake as the base (a third
/// of the head's tok/s) and the run exited 0. Now the base's port is held by a process of
/// the head's tree, which is not the base's: exit 2 naming it.
#[test]
fn the_heads_server_cannot_serve_the_bases_port() {
    let dir = tempfile::tempdir().unwrap();
    let p = profile(dir.path());
    let out = dir.path().join("out");
    let (bin, d) = (bin(), quoted(dir.path()));
    // The watcher finds "--port N --slowdown 1 " in any process's command line (the base's
    // alone has it; the watcher's own holds the pattern, not digits there) and serves each
    // new N once, three times slower, touching fake-N once that listens.
    let head = format!(
        "touch {d}/watching; \
         (last=; while :; do \
            p=$(grep -aoh 'port [0-9][0-9]* --slowdown 1 ' /proc/[0-9]*/cmdline \
                2>/dev/null | head -n 1 | cut -d' ' -f2); \
            if test -n \"$p\" && test \"$p\" != \"$last\"; then last=$p; \
              {bin} serve-sim --preset fixed --token-delay-ms 2 --port \"$p\" \
                --slowdown 3 --model m | (read line && touch {d}/fake-\"$p\"; cat >/dev/null) & \
            fi; \
            sleep 0.05; \
          done) & \
         exec {bin} serve-sim --preset fixed --token-delay-ms 2 --port {{port}} --model m"
    );
    let base = format!(
        "if test -e {d}/watching; then i=0; \
           while ! test -e {d}/fake-{{port}} && test $i -lt 200; do sleep 0.05; i=$((i+1)); done; \
         fi; \
         {bin} serve-sim --preset fixed --token-delay-ms 2 --port {{port}} --slowdown 1 --model m \
         || exec sleep 60"
    );
    let args = [
        "--no-progress",
        "--no-plots",
        "--server-command",
        &head,
        "--base-server-command",
        &base,
        "--slots",
        "0;1",
        "--blocks",
        "2",
        "--max-blocks",
        "2",
        "--server-timeout",
        "60s",
    ];
    let o = run_bench_cli(&p, &out, &args);
    let said = text(&o);
    assert_eq!(code(&o), 2, "{said}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("base server"), "{err}");
    assert!(
        err.contains("--slowdown 3 --model m"),
        "the holder is named: {err}"
    );
    assert!(err.contains("not in the process tree"), "{err}");
}

/// Item 2: a started server inherited the step's GitHub file commands and the runner's
/// tokens, and wrote `accepted=true` into the step's outputs, a "pass" heading into the job
/// summary, an `LD_PRELOAD` line for later steps. Now none of those variables reaches it;
/// `HF_TOKEN` still does (documented: the model's token goes to the server).
#[test]
fn a_server_does_not_get_the_steps_github_files_or_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let p = profile(dir.path());
    let out = dir.path().join("out");
    let files = ["output", "summary", "env", "path", "state"].map(|f| dir.path().join(f));
    for f in &files {
        std::fs::write(f, "").unwrap();
    }
    let seen = dir.path().join("seen");
    let server = format!(
        "echo accepted=true >> \"$GITHUB_OUTPUT\"; echo '# pass' >> \"$GITHUB_STEP_SUMMARY\"; \
         echo LD_PRELOAD=/tmp/evil.so >> \"$GITHUB_ENV\"; echo /tmp/evil >> \"$GITHUB_PATH\"; \
         echo x=1 >> \"$GITHUB_STATE\"; \
         echo \"tokens=$ACTIONS_RUNTIME_TOKEN,$ACTIONS_ID_TOKEN_REQUEST_TOKEN,\
$ACTIONS_ID_TOKEN_REQUEST_URL,$ACTIONS_CACHE_URL,$ACTIONS_RUNTIME_URL,$GITHUB_TOKEN \
hf=$HF_TOKEN\" > {seen}; \
         exec {bin} serve-sim --preset instant --port {{port}}",
        seen = quoted(&seen),
        bin = bin(),
    );
    let mut cmd = bench_command(&p, &out);
    cmd.args(["--no-progress", "--no-plots", "--server-command", &server])
        .args(["--slots", "0", "--blocks", "1", "--max-blocks", "1"])
        .env("GITHUB_OUTPUT", &files[0])
        .env("GITHUB_STEP_SUMMARY", &files[1])
        .env("GITHUB_ENV", &files[2])
        .env("GITHUB_PATH", &files[3])
        .env("GITHUB_STATE", &files[4])
        .env("ACTIONS_RUNTIME_TOKEN", "rt")
        .env("ACTIONS_ID_TOKEN_REQUEST_TOKEN", "idt")
        .env("ACTIONS_ID_TOKEN_REQUEST_URL", "http://127.0.0.1:1/id")
        .env("ACTIONS_CACHE_URL", "http://127.0.0.1:1/cache")
        .env("ACTIONS_RUNTIME_URL", "http://127.0.0.1:1/rt")
        .env("GITHUB_TOKEN", "ght")
        .env("HF_TOKEN", "hf-kept");
    let o = cmd.output().unwrap();
    let said = text(&o);
    assert_eq!(code(&o), 0, "{said}");
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        for line in ["accepted=true", "# pass", "LD_PRELOAD", "/tmp/evil", "x=1"] {
            assert!(!text.contains(line), "{}: {text}", f.display());
        }
    }
    let seen = std::fs::read_to_string(&seen).unwrap();
    assert_eq!(seen.trim(), "tokens=,,,,, hf=hf-kept", "{said}");
}

/// Item 2: bisect's `--build-command` runs a commit's own build: it too starts without the
/// step's GitHub files (it wrote `accepted=true` into the step's outputs).
#[test]
fn a_build_command_does_not_get_the_steps_github_files() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    git(&repo, &["init", "-q"]);
    let mut ids = Vec::new();
    for i in 0..2 {
        std::fs::write(repo.join("n.txt"), format!("{i}\n")).unwrap();
        git(&repo, &["add", "-A"]);
        git(&repo, &["commit", "-q", "-m", &format!("commit {i}")]);
        let id = Command::new("git")
            .args(["rev-parse", "HEAD"])
            .current_dir(&repo)
            .output()
            .unwrap();
        ids.push(String::from_utf8_lossy(&id.stdout).trim().to_string());
    }
    let output = dir.path().join("output");
    std::fs::write(&output, "").unwrap();
    let p = profile(dir.path());
    let server = format!("exec {} serve-sim --port {{port}}", bin());
    let o = command()
        .args(["bisect", "-C"])
        .arg(&repo)
        .arg("-p")
        .arg(&p)
        .args(["--server-command", &server])
        .args([
            "--build-command",
            "echo accepted=true >> \"$GITHUB_OUTPUT\"; exit 1",
        ])
        .args(["--slots", "0", "--good", &ids[0], "--bad", &ids[1], "-o"])
        .arg(dir.path().join("out"))
        .env("GITHUB_OUTPUT", &output)
        .output()
        .unwrap();
    let said = text(&o);
    assert_eq!(code(&o), 2, "{said}");
    assert!(said.contains("could not be built"), "{said}");
    let written = std::fs::read_to_string(&output).unwrap();
    assert!(!written.contains("accepted=true"), "{written}");
}

/// Item 1, what "the server's tree" means: a server whose `sh` is the server, whose child
/// binds the port, or whose child called `setsid` first (vLLM's and SGLang's workers are
/// children) passes [`ManagedServer::check_port`]; a listener that left the tree (a double
/// fork: its parent exited) or that the server never started (here the test's own socket,
/// bound while the server sleeps) does not, and is named by its pid.
#[test]
fn the_port_check_counts_the_servers_descendants_and_nothing_else() {
    // In a process of its own: stopping a server signals this process's children in other
    // process groups (strays it would have adopted), which another test's may be.
    in_own_process(
        module_path!(),
        "the_port_check_counts_the_servers_descendants_and_nothing_else",
        || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(port_check_cases());
        },
    );
}

async fn port_check_cases() {
    use std::time::Duration;
    use throughline::load::servers::{free_port, render, ManagedServer, Slot};
    let dir = tempfile::tempdir().unwrap();
    let slot = Slot {
        index: 0,
        gpus: "0".into(),
    };
    let sim = format!("{} serve-sim --preset instant --port {{port}}", bin());
    let start = |template: String| {
        let (dir, slot) = (dir.path().to_path_buf(), slot.clone());
        async move {
            let port = free_port().unwrap();
            let command = render(&template, port, &slot).unwrap();
            let log = dir.join("server.log");
            let mut server = ManagedServer::start("t", &command, port, &slot, &log)
                .await
                .unwrap();
            server.set_grace(Duration::from_secs(5));
            server
        }
    };
    for (template, ours) in [
        (format!("exec {sim}"), true),
        (format!("{sim}; exit 1"), true),
        (format!("setsid {sim}; exit 1"), true),
        (format!("({sim} &); exec sleep 30"), false),
    ] {
        let mut server = start(template.clone()).await;
        server
            .wait_healthy(Duration::from_secs(30), None)
            .await
            .unwrap();
        let checked = server.check_port();
        assert_eq!(checked.is_ok(), ours, "{template}: {checked:?}");
        if let Err(e) = checked {
            let e = e.to_string();
            assert!(e.contains("not in the process tree"), "{e}");
            assert!(e.contains("serve-sim --preset instant"), "{e}");
        }
        server.stop().await.unwrap();
    }
    let mut server = start("exec sleep 30 # {port}".to_string()).await;
    let outsider = std::net::TcpListener::bind(("127.0.0.1", server.port())).unwrap();
    let e = server.check_port().unwrap_err().to_string();
    assert!(e.contains(&format!("pid {}", std::process::id())), "{e}");
    drop(outsider);
    let e = server.check_port().unwrap_err().to_string();
    assert!(e.contains("no listening socket"), "{e}");
    server.stop().await.unwrap();
}
