//! Relative runs in blocks (issue 26): throughline starts both servers itself
//! (`--server-command`, `--base-server-command`), swaps their slots between blocks, and the
//! gate tells a slot from a regression. The servers are the real simulator, started as
//! processes from the command templates; a slot effect is made with the template itself
//! (`--slowdown` chosen by `{slot}`: slot 1 runs 5% faster), as GPU 1 might be.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::*;

/// A small profile: two levels, 3 trials of 12 requests each; endpoints are replaced.
pub(crate) fn profile(dir: &Path) -> std::path::PathBuf {
    write_profile(
        dir,
        "xo",
        &["http://127.0.0.1:1".to_string()],
        "[workload]\nmax_tokens = 16\nignore_eos = true\n[sweep]\nconcurrency = [1, 4]\n\
         requests_per_level = 8\nwarmup_requests = 2\ntrials = 3\n[gate]\nmin_trials = 3\n",
    )
}

/// A simulator command whose slot 1 runs 5% faster than slot 0, times `slowdown`.
pub(crate) fn server(slowdown: f64) -> String {
    format!(
        "exec {} serve-sim --port {{port}} --preset fast --slowdown \
         $(test {{slot}} = 1 && echo {} || echo {})",
        bin(),
        slowdown * 0.95,
        slowdown
    )
}

/// `bench` in blocks; returns its output.
pub(crate) fn bench_blocks(
    p: &Path,
    out: &Path,
    head: &str,
    base: &str,
    extra: &[&str],
) -> std::process::Output {
    let mut args = vec![
        "--no-progress",
        "--no-plots",
        "--server-command",
        head,
        "--base-server-command",
        base,
        "--slots",
        "0;1",
    ];
    args.extend_from_slice(extra);
    run_bench_cli(p, out, &args)
}

/// With one slot (`--slots 0`) both arms share its GPUs and the swap is of which starts
/// first: the logs say so, not "slot 1 (GPUs 0)" (a slot that does not exist).
#[test]
fn one_slot_logs_say_which_start_not_a_second_slot() {
    let dir = tempfile::tempdir().unwrap();
    let p = profile(dir.path());
    let out = dir.path().join("one");
    let sim = server(1.0);
    let flags = ["--slots", "0", "--blocks", "2", "--max-blocks", "2"];
    let o = run_bench_cli(
        &p,
        &out,
        &[
            &["--no-progress", "--no-plots", "--server-command", &sim],
            &["--base-server-command", &sim][..],
            &flags[..],
        ]
        .concat(),
    );
    assert_eq!(code(&o), 0, "{}", text(&o));
    for (log, said) in [
        (
            "block-1-base.log",
            "block 1 base server (started first on the one slot)",
        ),
        (
            "block-1-head.log",
            "block 1 head server (started second on the one slot)",
        ),
        (
            "block-2-head.log",
            "block 2 head server (started first on the one slot)",
        ),
    ] {
        let text = std::fs::read_to_string(out.join("servers").join(log)).unwrap();
        let header = text.lines().next().unwrap();
        assert!(header.contains(said), "{log}: {header}");
        assert!(header.contains("GPUs 0 ({slot} = "), "{log}: {header}");
        assert!(!header.contains("slot 1 (GPUs 0)"), "{log}: {header}");
    }
}

#[test]
fn a_server_that_dies_while_starting_is_named_with_its_log() {
    let dir = tempfile::tempdir().unwrap();
    let p = profile(dir.path());
    let out = dir.path().join("dead");
    crate::common::share_machine();
    let started = Instant::now();
    let o = bench_blocks(
        &p,
        &out,
        "echo 'model file not found: {port}' >&2; exit 3",
        &server(1.0),
        &["--blocks", "2"],
    );
    assert_eq!(code(&o), 2, "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("model file not found"), "{err}");
    assert!(err.contains("head"), "the server is named: {err}");
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "a dead server is seen at once, not at the health timeout"
    );
}

#[test]
fn a_template_typo_is_refused_before_anything_starts() {
    let dir = tempfile::tempdir().unwrap();
    let p = profile(dir.path());
    let o = bench_blocks(
        &p,
        &dir.path().join("typo"),
        "serve --port {prot}",
        &server(1.0),
        &[],
    );
    assert_eq!(code(&o), 2, "{}", text(&o));
    assert!(text(&o).contains("prot"), "{}", text(&o));
    assert!(
        !dir.path().join("typo/servers").exists(),
        "nothing was started"
    );
}

// ---------------------------------------------------------------------------------------------
// Cancellation (issue 35): a signal in any phase of a run in blocks stops every process the
// run started, its whole tree, within the 30 s grace, keeps what was measured and exits
// 128 + the signal. Each server command carries a tag; /proc is searched for it afterwards.

/// Processes (not zombies) whose command line holds `tag`.
fn tagged(tag: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(cmd) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let zombie = stat
            .rsplit_once(')')
            .is_some_and(|(_, r)| r.trim_start().starts_with('Z'));
        if cmd.contains(tag) && !zombie {
            found.push(format!("{}: {cmd}", entry.file_name().to_string_lossy()));
        }
    }
    found
}

/// A tag no other test's processes carry.
fn tag(name: &str) -> String {
    format!("tl-cancel-{name}-{}", std::process::id())
}

/// `bench` in blocks started in the background, stdout and stderr piped.
fn spawn_blocks(p: &Path, out: &Path, head: &str, extra: &[&str]) -> std::process::Child {
    bench_command(p, out)
        .args(["--no-progress", "--no-plots", "--server-command", head])
        .args(extra)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits (at most 60 s) until `path` exists and holds `text`.
fn wait_for_file(path: &Path, text: &str) {
    crate::common::share_machine();
    let started = Instant::now();
    while !std::fs::read_to_string(path).is_ok_and(|s| s.contains(text)) {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{} never held {text:?}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Asserts nothing tagged is left (checked once the run has exited: what it started must
/// be gone by then, not later).
fn none_left(tag: &str, said: &str) {
    let left = tagged(tag);
    assert!(left.is_empty(), "left running: {left:?}\n{said}");
}

#[test]
fn a_signal_while_the_first_servers_load_stops_them_and_exits_128_plus_it() {
    for (sig, name) in [(libc::SIGTERM, "term"), (libc::SIGINT, "int")] {
        let dir = tempfile::tempdir().unwrap();
        let p = profile(dir.path());
        let out = dir.path().join("out");
        let t = tag(&format!("load-{name}"));
        let started = dir.path().join("started");
        // The server "loads" for 300 s: a sleep in its tree, the tag in its command line.
        let head = format!(
            "echo up > {}; sh -c 'sleep 300; : {t}'; exec {} serve-sim --port {{port}}",
            started.display(),
            bin()
        );
        let child = spawn_blocks(&p, &out, &head, &[]);
        wait_for_file(&started, "up");
        while tagged(&t).is_empty() {
            std::thread::sleep(Duration::from_millis(20));
        }
        unsafe { libc::kill(child.id() as i32, sig) };
        let o = wait_with_deadline(child, Duration::from_secs(35), "the interrupted run");
        assert_eq!(code(&o), 128 + sig, "{}", text(&o));
        assert!(text(&o).contains("was loading"), "{}", text(&o));
        none_left(&t, &text(&o));
    }
}

#[test]
fn a_signal_in_a_later_blocks_server_load_keeps_the_blocks_measured() {
    let dir = tempfile::tempdir().unwrap();
    let p = profile(dir.path());
    let out = dir.path().join("out");
    let t = tag("later");
    let count = dir.path().join("count");
    // The first start is quick; the second (block 2) loads for 300 s.
    let head = format!(
        "n=$(cat {c} 2>/dev/null || echo 0); echo $((n+1)) > {c}; \
         if [ $n -ge 1 ]; then sh -c 'sleep 300; : {t}'; fi; exec {} serve-sim --port {{port}} --preset fast",
        bin(),
        c = count.display()
    );
    let child = spawn_blocks(&p, &out, &head, &["--blocks", "2"]);
    wait_for_file(&count, "2");
    while tagged(&t).is_empty() {
        std::thread::sleep(Duration::from_millis(20));
    }
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let o = wait_with_deadline(child, Duration::from_secs(35), "the interrupted run");
    assert_eq!(code(&o), 130, "{}", text(&o));
    none_left(&t, &text(&o));
    // Block 1 is kept, marked incomplete, with the reason.
    let results = read_json(&out.join("results.json"));
    assert_eq!(results["complete"], false, "{}", text(&o));
    assert_eq!(results["servers"]["blocks"].as_array().unwrap().len(), 1);
    let stopped = results["servers"]["stopped"].as_str().unwrap();
    assert!(
        stopped.contains("interrupted by SIGINT in block 2"),
        "{stopped}"
    );
}

#[test]
fn a_servers_setsid_and_daemonised_children_end_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let p = profile(dir.path());
    let out = dir.path().join("out");
    let t = tag("setsid");
    // One helper calls setsid and stays the server's child; another is daemonised (its
    // parent, a subshell, exits at once), so only a subreaper can find it.
    let head = format!(
        "setsid sh -c 'sleep 300; : {t}-a' & (setsid sh -c 'sleep 300; : {t}-b' &); \
         exec {} serve-sim --port {{port}} --preset fast",
        bin()
    );
    let child = spawn_blocks(&p, &out, &head, &[]);
    let o = wait_with_deadline(child, Duration::from_secs(120), "the run");
    assert_eq!(code(&o), 0, "{}", text(&o));
    none_left(&t, &text(&o));
}

#[test]
fn a_second_signal_kills_a_server_that_ignores_the_first() {
    let dir = tempfile::tempdir().unwrap();
    let p = profile(dir.path());
    let out = dir.path().join("out");
    let t = tag("stubborn");
    let started = dir.path().join("started");
    let head = format!(
        "trap '' TERM; echo up > {}; sh -c 'trap \"\" TERM; sleep 300; : {t}'; exec {} serve-sim --port {{port}}",
        started.display(),
        bin()
    );
    let child = spawn_blocks(&p, &out, &head, &[]);
    wait_for_file(&started, "up");
    while tagged(&t).is_empty() {
        std::thread::sleep(Duration::from_millis(20));
    }
    let pid = child.id() as i32;
    crate::common::share_machine();
    let asked = Instant::now();
    unsafe { libc::kill(pid, libc::SIGTERM) };
    std::thread::sleep(Duration::from_millis(500));
    // Still in its 30 s grace: the first signal asks; the second stops now.
    assert!(!tagged(&t).is_empty(), "the first signal should only ask");
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let o = wait_with_deadline(child, Duration::from_secs(20), "the twice-signalled run");
    assert_eq!(code(&o), 143, "{}", text(&o));
    assert!(
        asked.elapsed() < Duration::from_secs(15),
        "took {:?}",
        asked.elapsed()
    );
    none_left(&t, &text(&o));
}

// ---------------------------------------------------------------------------------------------
// Collisions (issue 35): two runs into one folder, two runs on one GPU.

#[test]
fn a_second_run_into_the_same_folder_is_refused_naming_the_first() {
    let dir = tempfile::tempdir().unwrap();
    let p = profile(dir.path());
    let out = dir.path().join("out");
    let started = dir.path().join("started");
    // The first run's server loads for a while: the second run starts meanwhile.
    let head = format!(
        "echo up >> {}; sleep 2; exec {} serve-sim --port {{port}} --preset fast",
        started.display(),
        bin()
    );
    let first = spawn_blocks(&p, &out, &head, &[]);
    wait_for_file(&started, "up");
    let second = bench_blocks(&p, &out, &head, &head, &["--blocks", "2"]);
    assert_eq!(code(&second), 2, "{}", text(&second));
    let said = text(&second);
    assert!(said.contains("in use by another throughline run"), "{said}");
    assert!(said.contains(&format!("pid {}", first.id())), "{said}");
    let first = wait_with_deadline(first, Duration::from_secs(120), "the first run");
    assert_eq!(code(&first), 0, "{}", text(&first));
    // The refused run started nothing: one server start, the first run's results whole.
    assert_eq!(
        std::fs::read_to_string(&started).unwrap().lines().count(),
        1
    );
    let results = read_json(&out.join("results.json"));
    assert_eq!(results["complete"], true);
}

#[test]
fn a_run_waits_for_a_gpu_another_run_holds() {
    let dir = tempfile::tempdir().unwrap();
    let locks = dir.path().join("locks");
    let p = profile(dir.path());
    let started = dir.path().join("started");
    let head = format!(
        "echo up >> {}; sleep 2; exec {} serve-sim --port {{port}} --preset fast",
        started.display(),
        bin()
    );
    let spawn = |out: &str| {
        bench_command(&p, &dir.path().join(out))
            .args(["--no-progress", "--no-plots", "--server-command", &head])
            .args(["--slots", "7"])
            .env("THROUGHLINE_LOCK_DIR", &locks)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let first = spawn("a");
    let first_pid = first.id();
    wait_for_file(&started, "up");
    let second = spawn("b");
    let first = wait_with_deadline(first, Duration::from_secs(120), "the first run");
    let second = wait_with_deadline(second, Duration::from_secs(120), "the second run");
    assert_eq!(code(&first), 0, "{}", text(&first));
    assert_eq!(code(&second), 0, "{}", text(&second));
    let said = text(&second);
    assert!(said.contains("waiting for GPU 7 (slot 0)"), "{said}");
    assert!(said.contains(&format!("pid {first_pid}")), "{said}");
}

#[test]
fn cleanup_stops_what_a_killed_run_left_by_its_record() {
    let dir = tempfile::tempdir().unwrap();
    let p = profile(dir.path());
    let out = dir.path().join("out");
    let t = tag("killed");
    let started = dir.path().join("started");
    // A server that ignores SIGTERM, with a helper that left its group: what a run killed
    // outright (SIGKILL: no chance to stop anything) leaves holding the GPU.
    let head = format!(
        "trap '' TERM; echo up > {}; setsid sh -c 'sleep 300; : {t}-helper' & \
         sh -c 'trap \"\" TERM; sleep 300; : {t}-loading'; exec {} serve-sim --port {{port}}",
        started.display(),
        bin()
    );
    let child = spawn_blocks(&p, &out, &head, &[]);
    wait_for_file(&started, "up");
    // The server's sh (whose command line holds the tag too), the helper, the "loading".
    while tagged(&t).len() < 3 {
        std::thread::sleep(Duration::from_millis(20));
    }
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    let _ = wait_with_deadline(child, Duration::from_secs(10), "the killed run");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        tagged(&t).len(),
        3,
        "the killed run's processes: {:?}",
        tagged(&t)
    );
    let record = std::fs::read_to_string(out.join("servers/processes.txt")).unwrap();
    assert!(record.contains("block 1 head server (slot 0)"), "{record}");
    let o = run(&["cleanup", out.to_str().unwrap(), "--grace", "2s"]);
    assert_eq!(code(&o), 0, "{}", text(&o));
    assert!(text(&o).contains("is still running"), "{}", text(&o));
    none_left(&t, &text(&o));
    // Again: nothing left to stop, said so.
    let o = run(&["cleanup", out.to_str().unwrap()]);
    assert!(text(&o).contains("none of the 1 server(s)"), "{}", text(&o));

    // A record committed by a pull request names a process that is not the run's (here a
    // sleep of the test's own, its group and start time copied right): it is left alone.
    crate::common::share_machine();
    // Started through the list of started children that a server's stop reads, as a server
    // is: this test binary's managed_servers tests stop servers in-process, and a child in a
    // group of its own that the list lacks would be a stray of theirs, to stop.
    let mut bystander = throughline::load::servers::tree::spawn_started(
        std::process::Command::new("sh")
            .args(["-c", &format!("sleep 300; : {t}-bystander")])
            .process_group(0),
    )
    .unwrap();
    let pid = bystander.id();
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let start = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .nth(19)
        .unwrap()
        .to_string();
    let forged = dir.path().join("forged");
    std::fs::create_dir_all(forged.join("servers")).unwrap();
    std::fs::write(
        forged.join("servers/processes.txt"),
        format!("{pid} {start} 0123456789abcdef block 1 head server (slot 0)\n"),
    )
    .unwrap();
    let o = run(&["cleanup", forged.to_str().unwrap(), "--grace", "1s"]);
    assert_eq!(code(&o), 0, "{}", text(&o));
    let alive = bystander.try_wait().unwrap().is_none();
    // Its whole group: the `sh` and its `sleep`, which would otherwise outlive the test
    // holding the test binary's output open (`.ci/run`'s tee waited for one until it was
    // killed by hand).
    // SAFETY: killpg only sends a signal, to the group this test made.
    unsafe { libc::killpg(pid as libc::pid_t, libc::SIGKILL) };
    let _ = bystander.wait();
    throughline::load::servers::tree::forget_started(pid as libc::pid_t);
    assert!(
        alive,
        "cleanup signalled a process the run did not start: {}",
        text(&o)
    );
    // ... and said so, rather than "none is still running".
    assert!(text(&o).contains("left alone"), "{}", text(&o));
    assert!(!text(&o).contains("none of the"), "{}", text(&o));
}

/// Issue 47 items 5 and 6: a process record planted in the output folder with a bad line
/// first (the run once appended to it, and `cleanup` stopped at that line with exit 2,
/// stopping nothing), and a server helper that daemonised (double fork, setsid: reparented to
/// throughline, then to init once throughline was killed), outside every recorded group
/// (`cleanup` once said nothing was running). Now the run writes a fresh record and cleanup
/// finds the daemon by the run's token.
#[test]
fn cleanup_stops_a_daemon_that_left_its_group_despite_a_planted_record() {
    let dir = tempfile::tempdir().unwrap();
    let p = profile(dir.path());
    let out = dir.path().join("out");
    std::fs::create_dir_all(out.join("servers")).unwrap();
    std::fs::write(out.join("servers/processes.txt"), "not a record line\n").unwrap();
    let t = tag("daemon");
    let started = dir.path().join("started");
    let head = format!(
        "(setsid sh -c 'sleep 300; : {t}-daemon' &); echo up > {}; \
         exec {} serve-sim --port {{port}}",
        started.display(),
        bin()
    );
    let child = spawn_blocks(&p, &out, &head, &[]);
    wait_for_file(&started, "up");
    while tagged(&t).is_empty() {
        std::thread::sleep(Duration::from_millis(20));
    }
    wait_for_file(&out.join("servers/processes.txt"), "block 1 head server");
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    let _ = wait_with_deadline(child, Duration::from_secs(10), "the killed run");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(tagged(&t).len(), 1, "the daemon: {:?}", tagged(&t));
    let o = run(&["cleanup", out.to_str().unwrap(), "--grace", "2s"]);
    let said = text(&o);
    assert_eq!(code(&o), 0, "{said}");
    none_left(&t, &said);
    assert!(said.contains("outside its recorded groups"), "{said}");
}

#[test]
fn a_signal_while_a_block_measures_stops_its_servers_and_exits_143() {
    let dir = tempfile::tempdir().unwrap();
    let p = profile(dir.path());
    let out = dir.path().join("out");
    let t = tag("measuring");
    // Slow tokens (200 ms each): block 1 measures for a while; the tag is the model's name.
    let head = format!(
        "exec {} serve-sim --port {{port}} --preset fixed --token-delay-ms 200 --model {t}",
        bin()
    );
    let child = spawn_blocks(&p, &out, &head, &["--blocks", "2"]);
    // Measuring once the first request is in the block's journal.
    wait_for_file(&out.join("blocks/block-1/requests.jsonl"), "{");
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let o = wait_with_deadline(child, Duration::from_secs(35), "the interrupted run");
    assert_eq!(code(&o), 143, "{}", text(&o));
    none_left(&t, &text(&o));
    // What block 1 measured before the signal is on disk, marked incomplete.
    let block = read_json(&out.join("blocks/block-1/results.json"));
    assert_eq!(block["complete"], false, "{}", text(&o));
}

/// Issue 46 item 4: before a run in blocks, its cost: blocks and rounds over the pairs, server
/// starts, wall time and GPU-hours, said as a guess the first time and measured from the
/// earlier run's blocks the next; checked against --max-duration; and after it, what it cost.
#[test]
fn the_cost_is_said_before_the_run_and_measured_the_second_time() {
    let dir = tempfile::tempdir().unwrap();
    let p = profile(dir.path());
    let out = dir.path().join("out");
    let s = server(1.0);
    // bench_blocks gives --slots "0;1"; a second pair beside it.
    let args = [
        "--blocks",
        "2",
        "--max-blocks",
        "2",
        "--slots",
        "2;3",
        "--max-duration",
        "10m",
    ];
    let first = bench_blocks(&p, &out, &s, &s, &args);
    assert_eq!(code(&first), 0, "{}", text(&first));
    let said = text(&first);
    assert!(
        said.contains(
            "cost: 2 block(s) to the first look in 1 round(s) on 2 pair(s) (4 server starts)"
        ),
        "{said}"
    );
    assert!(said.contains("a guess"), "{said}");
    assert!(
        said.contains("cost: --max-duration 10m: the whole plan fits"),
        "{said}"
    );
    let stopped = read_json(&out.join("results.json"))["servers"]["stopped"].clone();
    assert!(
        stopped
            .as_str()
            .unwrap()
            .contains("on 2 pairs (blocks per pair 1, 1)"),
        "{stopped}"
    );
    assert!(stopped.as_str().unwrap().contains("GPU-hours"), "{stopped}");
    let second = bench_blocks(&p, &out, &s, &s, &args);
    assert_eq!(code(&second), 0, "{}", text(&second));
    let said = text(&second);
    assert!(
        said.contains("measured: the median of 2 block(s)"),
        "{said}"
    );
}

// ---------------------------------------------------------------------------------------------
// Reaping (issue 51): throughline is a subreaper in a run in blocks, so a server's process
// whose parent (its `sh`) ended first becomes throughline's child; unreaped, each stopped
// server left one as a zombie until the run ended.

/// This process's zombie children: "pid (comm)".
fn zombie_children(parent: u32) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let Some((head, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let f: Vec<&str> = rest.split_whitespace().collect();
        if f.len() > 1 && f[0] == "Z" && f[1] == parent.to_string() {
            found.push(format!("{head})"));
        }
    }
    found
}

/// A server command whose server is the `sh`'s child (not `exec`ed): when the group is
/// stopped the `sh` may end first, and the server is adopted. Once a block's line is out,
/// its servers are stopped: none of their processes may be left as a zombie.
#[test]
fn servers_stopped_in_a_block_are_reaped_before_the_next() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let p = profile(dir.path());
    let out = dir.path().join("out");
    let sim = format!(
        "{} serve-sim --port {{port}} --preset fast & wait",
        crate::common::bin()
    );
    let blocks = ["--blocks", "3", "--max-blocks", "3", "--slots", "0;1"];
    let mut child = spawn_blocks(
        &p,
        &out,
        &sim,
        &[&["--base-server-command", &sim][..], &blocks[..]].concat(),
    );
    let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut seen = Vec::new();
    for line in stdout.lines() {
        let line = line.unwrap();
        if line.starts_with("block 1:") || line.starts_with("block 2:") {
            seen.push((line.clone(), zombie_children(child.id())));
        }
    }
    let o = child.wait_with_output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(seen.len(), 2, "{seen:?}");
    for (line, zombies) in seen {
        assert!(zombies.is_empty(), "after {line:?}: zombies {zombies:?}");
    }
}
