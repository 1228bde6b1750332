//! Hostile files and killed runs, end to end through the real binary (issue 15, items 4, 6,
//! 7, 8, 9, 12; item 10, a collapsed open-loop schedule, is timed and lives in
//! tests/it/alone/openloop_cli.rs): profile values past the limits, a profile that never
//! ends, too few file descriptors, bad gate settings in a baseline, a killed re-run, outputs
//! that are links or FIFOs, a bless killed while it holds its lock. Traffic stays on
//! 127.0.0.1.

use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;

fn spawn(cmd: &mut Command) -> Child {
    cmd.stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o7777
}

/// A complete run of the instant simulator into `dir/out`, and a copy of its results that
/// `baseline bless` takes (no client-bound flags).
fn quick_results(dir: &Path) -> (PathBuf, PathBuf) {
    let sim = Sim::start(1, &["--preset", "instant"]);
    let profile = write_profile(dir, "quick", &sim.urls, QUICK_BODY);
    let out = dir.join("out");
    let o = run_bench_cli(&profile, &out, &[]);
    assert_eq!(code(&o), 0, "{}", text(&o));
    let results = out.join("results.json");
    let clean = without_client_flags(&results);
    (results, clean)
}

/// Item 4: each value once panicked (exit 101), aborted (134), hung or ran out of sockets;
/// now bench refuses it before sending anything, exit 2, naming the field. The endpoint is a
/// port nothing listens on: validation must come first.
#[test]
fn profile_values_past_the_limits_exit_2_naming_the_field() {
    let tmp = tempfile::tempdir().unwrap();
    let workload = "[workload]\ninput_tokens = 4\nmax_tokens = 10\n";
    let cases: &[(&str, &str, &str)] = &[
        (
            "huge request_timeout",
            "[sweep]\nconcurrency = [1]\nrequest_timeout = \"100000000000h\"",
            "sweep.request_timeout",
        ),
        (
            "duration near u64::MAX plus warmup",
            "[sweep]\nconcurrency = [1]\nduration = \"18446744073709551615s\"\nwarmup = \"1s\"",
            "sweep.duration",
        ),
        (
            "rate 1e-20",
            "[sweep]\nrates = [1e-20]\nduration = \"10s\"",
            "sweep.rates",
        ),
        (
            "rate 1e300",
            "[sweep]\nrates = [1e300]\nduration = \"10s\"",
            "sweep.rates",
        ),
        (
            "gamma_shape 1e-300",
            "[sweep]\nrates = [5.0]\nrequests_per_level = 20\narrival = \"gamma\"\ngamma_shape = 1e-300",
            "sweep.gamma_shape",
        ),
        (
            "a million workers",
            "[sweep]\nconcurrency = [1000000]",
            "sweep.concurrency",
        ),
        (
            "trials",
            "[sweep]\nconcurrency = [1]\ntrials = 100000",
            "sweep.trials",
        ),
    ];
    for (name, sweep, field) in cases {
        let body = format!("{workload}{sweep}\n");
        let profile = write_profile(tmp.path(), "bad", &["http://127.0.0.1:9".into()], &body);
        let child = spawn(&mut bench_command(&profile, &tmp.path().join("out")));
        let out = wait_with_deadline(child, Duration::from_secs(20), name);
        assert_eq!(code(&out), 2, "{name}: {}", text(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(field), "{name}: {}", text(&out));
    }
    // 4e9 input tokens: the field is first checked against its range.
    let body =
        "[workload]\ninput_tokens = 4000000000\nmax_tokens = 10\n[sweep]\nconcurrency = [1]\n";
    let profile = write_profile(tmp.path(), "bad", &["http://127.0.0.1:9".into()], body);
    let out = run_bench_cli(&profile, &tmp.path().join("out"), &[]);
    assert_eq!(code(&out), 2, "{}", text(&out));
    assert!(
        text(&out).contains("workload.input_tokens"),
        "{}",
        text(&out)
    );

    // A profile that never ends, and one too large, are refused by name.
    let big = tmp.path().join("big.toml");
    std::fs::write(&big, "#".repeat(2 * 1024 * 1024)).unwrap();
    for (path, says) in [
        (Path::new("/dev/zero"), "not a regular file"),
        (big.as_path(), "over the limit"),
    ] {
        let child = spawn(&mut bench_command(path, &tmp.path().join("out")));
        let out = wait_with_deadline(child, Duration::from_secs(20), "bench --profile");
        assert_eq!(code(&out), 2, "{}", text(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(says) && err.contains(&*path.to_string_lossy()),
            "{}",
            text(&out)
        );
    }
}

/// Item 4: too few file descriptors for the sweep is refused before anything is sent, with
/// the `ulimit -n` to set.
#[test]
fn too_few_file_descriptors_are_refused_before_sending() {
    let tmp = tempfile::tempdir().unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let body = "[workload]\ninput_tokens = 4\nmax_tokens = 10\n[sweep]\nconcurrency = [5000]\nrequests_per_level = 5000\ntrials = 1\n";
    let profile = write_profile(tmp.path(), "fds", &[url], body);
    let mut cmd = bench_command(&profile, &tmp.path().join("out"));
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: 512,
                rlim_max: 512,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = wait_with_deadline(spawn(&mut cmd), Duration::from_secs(20), "bench");
    assert_eq!(code(&out), 2, "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("ulimit -n 5"), "{}", text(&out));
    assert!(
        listener.accept().is_err(),
        "a connection was opened before the check"
    );
}

/// Items 6 and 12: gate settings that would pass anything, and figures no run gives, are
/// refused on load with the field named: exit 2 through `throughline gate`. Bless refuses
/// tok/s its own loader would refuse.
#[test]
fn bad_gate_settings_and_figures_exit_2_naming_the_field() {
    let tmp = tempfile::tempdir().unwrap();
    let (results, clean) = quick_results(tmp.path());
    let baseline = tmp.path().join("base.toml");
    let o = bless(&clean, &baseline, &["--commit", "abc"]);
    assert_eq!(code(&o), 0, "{}", text(&o));
    let good = std::fs::read_to_string(&baseline).unwrap();
    for (from, to, field) in [
        ("alpha = 0.01", "alpha = nan", "gate.alpha"),
        ("alpha = 0.01", "alpha = 0.0", "gate.alpha"),
        ("min_effect = 0.03", "min_effect = 2.0", "gate.min_effect"),
    ] {
        assert!(good.contains(from), "{good}");
        let bad = tmp.path().join("bad.toml");
        std::fs::write(&bad, good.replace(from, to)).unwrap();
        let out = run(&[
            "gate",
            "--allow-client-bound",
            "--results",
            results.to_str().unwrap(),
            "--baseline",
            bad.to_str().unwrap(),
        ]);
        assert_eq!(code(&out), 2, "{to}: {}", text(&out));
        assert!(text(&out).contains(field), "{to}: {}", text(&out));
    }

    // A candidate with negative or zero tok/s.
    let mut value = read_json(&clean);
    value["levels"][0]["trials"][0]["output_tok_per_s"] = serde_json::json!(-5.0);
    let negative = tmp.path().join("negative.json");
    std::fs::write(&negative, value.to_string()).unwrap();
    let out = run(&[
        "gate",
        "--allow-client-bound",
        "--results",
        negative.to_str().unwrap(),
        "--baseline",
        baseline.to_str().unwrap(),
    ]);
    assert_eq!(code(&out), 2, "{}", text(&out));
    assert!(text(&out).contains("output_tok_per_s"), "{}", text(&out));

    value["levels"][0]["trials"][0]["output_tok_per_s"] = serde_json::json!(0.0);
    let zero = tmp.path().join("zero.json");
    std::fs::write(&zero, value.to_string()).unwrap();
    let fresh = tmp.path().join("fresh.toml");
    let out = bless(&zero, &fresh, &["--commit", "abc"]);
    assert_eq!(code(&out), 2, "{}", text(&out));
    assert!(text(&out).contains("output_tok_per_s"), "{}", text(&out));
    assert!(!fresh.exists(), "bless wrote a baseline its loader refuses");
}

/// Item 7: a re-run killed after its first requests leaves no complete-looking result of the
/// run before beside its new journal.
#[test]
fn a_killed_rerun_leaves_no_stale_results() {
    let tmp = tempfile::tempdir().unwrap();
    let (results, _) = quick_results(tmp.path());
    let out_dir = results.parent().unwrap().to_path_buf();
    assert!(out_dir.join("summary.csv").exists());
    // What later steps (plot, gate) put beside the first run's results.
    std::fs::write(out_dir.join("report.md"), "old report").unwrap();
    std::fs::write(out_dir.join("throughput.png"), "old chart").unwrap();
    std::fs::write(out_dir.join("verdict.md"), "PASS").unwrap();
    std::fs::write(out_dir.join("junit.xml"), "<testsuite/>").unwrap();

    // The second run is slow: one token every 100 ms.
    let slow = Sim::start(1, &["--preset", "instant", "--token-delay-ms", "100"]);
    let profile = write_profile(tmp.path(), "quick", &slow.urls, QUICK_BODY);
    let child = spawn(&mut bench_command(&profile, &out_dir));
    crate::common::share_machine();
    let started = Instant::now();
    let journal = out_dir.join("requests.jsonl");
    loop {
        let lines = std::fs::read_to_string(&journal)
            .map(|t| t.lines().count())
            .unwrap_or(0);
        // The old journal had 40 lines; the new one starts empty.
        if (1..40).contains(&lines) {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "no requests");
        std::thread::sleep(Duration::from_millis(20));
    }
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    let _ = wait_with_deadline(child, Duration::from_secs(10), "killed bench");
    let journal = read_journal(&out_dir);
    for name in [
        "results.json",
        "summary.csv",
        "report.md",
        "verdict.md",
        "junit.xml",
        "throughput.png",
    ] {
        assert!(
            !out_dir.join(name).exists(),
            "{name} of the run before stays beside a journal of {} requests",
            journal.len()
        );
    }
}

/// Item 8: outputs that are FIFOs or standard output are written, not replaced; new files
/// are 0644 and existing files keep their mode. Issue 35 changed links: a link at an output
/// path is replaced by the file (its target left alone), never written through.
#[test]
fn outputs_replace_links_and_write_special_files() {
    let tmp = tempfile::tempdir().unwrap();
    let (results, clean) = quick_results(tmp.path());
    assert_eq!(mode(&results), 0o644, "results.json");
    let d = tmp.path();
    std::fs::create_dir(d.join("artifacts")).unwrap();
    std::fs::write(d.join("artifacts/base.toml"), "").unwrap();
    std::os::unix::fs::symlink("artifacts/base.toml", d.join("base.toml")).unwrap();
    std::fs::remove_file(d.join("artifacts/base.toml")).unwrap();
    let o = bless(&clean, &d.join("base.toml"), &["--commit", "abc"]);
    assert_eq!(code(&o), 0, "{}", text(&o));
    assert!(std::fs::symlink_metadata(d.join("base.toml"))
        .unwrap()
        .is_file());
    assert_eq!(mode(&d.join("base.toml")), 0o644);
    assert!(
        !d.join("artifacts/base.toml").exists(),
        "the dangling link's target was made"
    );
    let baseline = d.join("base.toml");

    type Setup = fn(&Path) -> PathBuf;
    let cases: &[(&str, Setup)] = &[
        ("new file", |d| d.join("new.json")),
        ("existing 0600 file", |d| {
            let p = d.join("private.json");
            std::fs::write(&p, "old").unwrap();
            std::fs::set_permissions(&p, PermissionsExt::from_mode(0o600)).unwrap();
            p
        }),
        ("symlink", |d| {
            std::fs::create_dir_all(d.join("real")).unwrap();
            std::fs::write(d.join("real/v.json"), "old").unwrap();
            std::os::unix::fs::symlink("real/v.json", d.join("link.json")).unwrap();
            d.join("link.json")
        }),
        ("fifo", |d| {
            mkfifo(&d.join("pipe"));
            d.join("pipe")
        }),
        ("stdout", |_| PathBuf::from("-")),
    ];
    for (name, setup) in cases {
        let case = tempfile::tempdir().unwrap();
        let path = setup(case.path());
        let fifo = std::fs::metadata(&path).is_ok_and(|m| m.file_type().is_fifo());
        let reader = fifo.then(|| {
            let p = path.clone();
            std::thread::spawn(move || std::fs::read_to_string(p).unwrap())
        });
        let mut cmd = crate::common::command();
        cmd.args([
            "gate",
            "--allow-client-bound",
            "--results",
            results.to_str().unwrap(),
        ])
        .args(["--baseline", baseline.to_str().unwrap()])
        .arg("--json")
        .arg(&path);
        let out = wait_with_deadline(spawn(&mut cmd), Duration::from_secs(30), name);
        assert_ne!(code(&out), 2, "{name}: {}", text(&out));
        let written = match (reader, *name) {
            (Some(r), _) => r.join().unwrap(),
            (None, "stdout") => String::from_utf8_lossy(&out.stdout).into_owned(),
            _ => std::fs::read_to_string(&path).unwrap(),
        };
        assert!(written.contains("\"levels\""), "{name}: {written}");
        let c = case.path();
        match *name {
            "new file" => assert_eq!(mode(&path), 0o644),
            "existing 0600 file" => assert_eq!(mode(&path), 0o600),
            "symlink" => {
                let m = std::fs::symlink_metadata(&path).unwrap();
                assert!(m.is_file(), "the link is still there");
                assert_eq!(
                    std::fs::read_to_string(c.join("real/v.json")).unwrap(),
                    "old"
                );
                assert!(String::from_utf8_lossy(&out.stderr).contains("symbolic link"));
            }
            "fifo" => assert!(std::fs::symlink_metadata(&path)
                .unwrap()
                .file_type()
                .is_fifo()),
            _ => {}
        }
    }
}

/// A child process that holds the flock of `baseline`'s lock file until killed.
fn lock_holder(baseline: &Path) -> Child {
    let name = throughline::gate::baseline::lock_path(baseline).unwrap();
    std::fs::create_dir_all(name.parent().unwrap()).unwrap();
    let lock = std::ffi::CString::new(name.as_os_str().as_encoded_bytes()).unwrap();
    crate::common::share_machine();
    let mut cmd = Command::new("sleep");
    cmd.arg("60");
    unsafe {
        cmd.pre_exec(move || {
            let fd = libc::open(lock.as_ptr(), libc::O_RDWR | libc::O_CREAT, 0o644);
            if fd < 0 || libc::flock(fd, libc::LOCK_EX) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.spawn().unwrap()
}

/// Item 9: a lock held by a process that was killed does not block the next bless; a bless
/// that finds the lock held waits for it (two blesses serialize); a bless stopped by SIGTERM
/// leaves no temporary file.
#[test]
fn bless_locks_die_with_their_process_and_serialize() {
    let tmp = tempfile::tempdir().unwrap();
    let (_, clean) = quick_results(tmp.path());
    // In a folder of its own, as baselines/ in a repository: after every bless below it holds
    // the baseline alone (no lock file for `git add -A` to commit).
    let folder = tmp.path().join("baselines");
    let baseline = folder.join("base.toml");
    let bless_cmd = || {
        let mut c = crate::common::command();
        c.args(["baseline", "bless", "--commit", "abc"])
            .args(["--results", clean.to_str().unwrap()])
            .args(["--baseline", baseline.to_str().unwrap()]);
        c
    };

    // Killed while holding the lock: the next bless goes ahead.
    let mut holder = lock_holder(&baseline);
    std::thread::sleep(Duration::from_millis(200));
    holder.kill().unwrap();
    holder.wait().unwrap();
    let out = wait_with_deadline(
        spawn(&mut bless_cmd()),
        Duration::from_secs(30),
        "bless after a killed holder",
    );
    assert_eq!(code(&out), 0, "{}", text(&out));

    // Held by a live process: the bless waits (they overlap), then goes ahead once the
    // holder is gone.
    let mut holder = lock_holder(&baseline);
    std::thread::sleep(Duration::from_millis(200));
    let mut waiting = spawn(&mut bless_cmd());
    std::thread::sleep(Duration::from_millis(800));
    assert!(
        waiting.try_wait().unwrap().is_none(),
        "bless did not wait for the lock"
    );
    holder.kill().unwrap();
    holder.wait().unwrap();
    let out = wait_with_deadline(waiting, Duration::from_secs(30), "waiting bless");
    assert_eq!(code(&out), 0, "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("waiting for another bless"),
        "{}",
        text(&out)
    );
    let text_now = std::fs::read_to_string(&baseline).unwrap();
    assert_eq!(text_now.matches("[[sessions]]").count(), 2, "{text_now}");

    // Stopped by SIGTERM at any moment: no temporary file stays, and the next bless works.
    for delay_ms in [0u64, 2, 5, 10, 20, 40] {
        let child = spawn(&mut bless_cmd());
        std::thread::sleep(Duration::from_millis(delay_ms));
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let _ = wait_with_deadline(child, Duration::from_secs(30), "stopped bless");
    }
    let leftovers: Vec<_> = std::fs::read_dir(&folder)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    let out = wait_with_deadline(spawn(&mut bless_cmd()), Duration::from_secs(30), "bless");
    assert_eq!(code(&out), 0, "{}", text(&out));
    let beside: Vec<String> = std::fs::read_dir(&folder)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(beside, ["base.toml"], "only the baseline in its folder");
}

/// A managed server for `--server-command`: the instant simulator, `before` run first.
fn sim_server(before: &str) -> String {
    format!(
        "{before}exec {} serve-sim --preset instant --port {{port}}",
        bin()
    )
}

/// `bench --server-command COMMAND -o OUT` with the quick profile (its endpoint replaced).
fn managed_bench(dir: &Path, out: &Path, command: &str, extra: &[&str]) -> std::process::Output {
    let profile = write_profile(
        dir,
        "managed",
        &["http://127.0.0.1:1".to_string()],
        QUICK_BODY,
    );
    let mut cmd = bench_command(&profile, out);
    cmd.args(["--no-progress", "--server-command", command, "--slots", "0"])
        .args(extra);
    wait_with_deadline(spawn(&mut cmd), Duration::from_secs(120), "managed bench")
}

/// Files outside the run that a link in an output folder points to: each holds `name`'s
/// secret, and must still hold it, alone, after the run.
struct Elsewhere(PathBuf, std::cell::RefCell<Vec<String>>);

impl Elsewhere {
    fn new(dir: &Path) -> Elsewhere {
        let home = dir.join("home");
        std::fs::create_dir_all(&home).unwrap();
        Elsewhere(home, Default::default())
    }
    fn file(&self, name: &str) -> PathBuf {
        self.1.borrow_mut().push(name.to_string());
        let p = self.0.join(name);
        std::fs::write(&p, format!("secret of {name}\n")).unwrap();
        p
    }
    fn link(&self, name: &str, at: &Path) {
        std::fs::create_dir_all(at.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(self.file(name), at).unwrap();
    }
    fn untouched(&self, out: &std::process::Output) {
        let names = self.1.borrow();
        let shown = text(out);
        let wrong: Vec<String> = (names.iter())
            .filter_map(|name| {
                let now = std::fs::read(self.0.join(name));
                let now = now.map(|b| String::from_utf8_lossy(&b).into_owned());
                let kept = now
                    .as_deref()
                    .is_ok_and(|t| t == format!("secret of {name}\n"));
                let quoted = shown.contains(&format!("secret of {name}"));
                let start = |t: &str| t.chars().take(60).collect::<String>();
                (!kept || quoted).then(|| match now {
                    Ok(t) if !kept => format!("{name} now holds {:?}...", start(&t)),
                    Ok(_) => format!("{name}'s text was shown"),
                    Err(e) => format!("{name}: {e}"),
                })
            })
            .collect();
        assert!(
            wrong.is_empty(),
            "files outside the run were touched through links:\n{}\n{shown}",
            wrong.join("\n")
        );
    }
}

fn is_link(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_symlink())
}

/// Issue 35 item 1: links in an output folder (a pull request's checkout can commit them)
/// are replaced by the run's own files, never written through, truncated or deleted; each
/// is named on stderr.
#[test]
fn links_in_an_output_folder_are_replaced_not_followed() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let home = Elsewhere::new(d);
    let out = d.join("out");
    home.link("authorized_keys", &out.join("report.md"));
    home.link("summary-target.csv", &out.join("summary.csv"));
    home.link("profile", &out.join("servers/block-1-head.log"));
    home.link("db.sqlite", &out.join("blocks/block-1/requests.jsonl"));
    // A result of the run before, removed before the journal starts over.
    home.link("old-results.json", &out.join("blocks/block-1/results.json"));
    let o = managed_bench(d, &out, &sim_server(""), &[]);
    assert_eq!(code(&o), 0, "{}", text(&o));
    home.untouched(&o);
    for name in [
        "report.md",
        "summary.csv",
        "servers/block-1-head.log",
        "blocks/block-1/requests.jsonl",
    ] {
        let p = out.join(name);
        assert!(!is_link(&p), "{name} is still a link\n{}", text(&o));
        assert!(std::fs::metadata(&p).unwrap().len() > 0, "{name} is empty");
        let said = String::from_utf8_lossy(&o.stderr);
        assert!(
            said.contains(&p.display().to_string()) && said.contains("link"),
            "{name}: the replaced link is not named on stderr\n{}",
            text(&o)
        );
    }
    let log = std::fs::read_to_string(out.join("servers/block-1-head.log")).unwrap();
    assert!(log.contains("=== throughline: starting server"), "{log}");
}

/// Issue 35 item 1: `ci` that cannot measure (no server there) writes its refusal into
/// verdict.md: a link there is replaced, its target (a shell's rc file) left alone.
#[test]
fn a_refusal_replaces_a_verdict_link() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let home = Elsewhere::new(d);
    let repo = d.join("repo");
    std::fs::create_dir_all(repo.join("baselines")).unwrap();
    home.link(".bashrc", &repo.join("out/verdict.md"));
    let dead = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut cmd = crate::common::command();
    cmd.current_dir(&repo)
        .args([
            "ci",
            "--allow-client-bound",
            "--baseline",
            "baselines/x.toml",
        ])
        .args([
            "--baseline-ref",
            "HEAD",
            "--wait-healthy",
            "1s",
            "--out",
            "out",
        ])
        .arg("--endpoint")
        .arg(format!("http://127.0.0.1:{dead}"))
        .env("GITHUB_STEP_SUMMARY", d.join("summary.md"))
        .env("GITHUB_OUTPUT", d.join("outputs.txt"));
    let o = wait_with_deadline(spawn(&mut cmd), Duration::from_secs(60), "ci");
    assert_eq!(code(&o), 2, "{}", text(&o));
    home.untouched(&o);
    let verdict = repo.join("out/verdict.md");
    assert!(
        !is_link(&verdict),
        "verdict.md is still a link\n{}",
        text(&o)
    );
    let written = std::fs::read_to_string(&verdict).unwrap();
    assert!(written.contains("could not measure"), "{written}");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("verdict.md"),
        "{}",
        text(&o)
    );
}

/// Issue 35 item 1: an output folder, or its servers/ or blocks/, that is a link to a
/// folder elsewhere is refused before anything is written, naming the path and the fix.
#[test]
fn output_folders_that_are_links_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    for (what, link) in [("-o", ""), ("servers/", "servers"), ("blocks/", "blocks")] {
        let target = d.join(format!("home-{}", what.trim_end_matches('/')));
        std::fs::create_dir_all(&target).unwrap();
        let out = d.join(format!("out-{}", what.trim_end_matches('/')));
        let at = if link.is_empty() {
            out.clone()
        } else {
            std::fs::create_dir_all(&out).unwrap();
            out.join(link)
        };
        std::os::unix::fs::symlink(&target, &at).unwrap();
        let o = managed_bench(d, &out, &sim_server(""), &[]);
        assert_eq!(code(&o), 2, "{what}: {}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains(&at.display().to_string()) && err.contains("symbolic link"),
            "{what}: {}",
            text(&o)
        );
        let inside: Vec<_> = std::fs::read_dir(&target).unwrap().collect();
        assert!(
            inside.is_empty(),
            "{what}: written into the link's target: {inside:?}"
        );
    } // A plain bench into a link to a folder holding an earlier run: nothing there is moved.
    let sim = Sim::start(1, &["--preset", "instant"]);
    let target = d.join("home-run");
    std::fs::create_dir_all(&target).unwrap();
    for name in ["results.json", "requests.jsonl"] {
        std::fs::write(target.join(name), "mine\n").unwrap();
    }
    let out = d.join("out-run");
    std::os::unix::fs::symlink(&target, &out).unwrap();
    let profile = write_profile(d, "plain", &sim.urls, QUICK_BODY);
    let o = run_bench_cli(&profile, &out, &["--no-progress"]);
    assert_eq!(code(&o), 2, "{}", text(&o));
    assert!(text(&o).contains("symbolic link"), "{}", text(&o));
    let mut names: Vec<String> = std::fs::read_dir(&target)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["requests.jsonl", "results.json"], "{}", text(&o));
}

/// Issue 35 item 2: a dataset that is not ShareGPT (any JSON array of strings: a file of
/// secrets) is refused naming the file, the line, the column and the shape expected, and
/// none of its text.
#[test]
fn a_dataset_error_never_quotes_the_file() {
    let sim = Sim::start(1, &["--preset", "instant"]);
    let tmp = tempfile::tempdir().unwrap();
    let secret = format!("sk-{}", "s3cr3t".repeat(500));
    let data = tmp.path().join("tokens.json");
    std::fs::write(&data, serde_json::to_string(&[&secret, "two"]).unwrap()).unwrap();
    let body = format!(
        "[workload]\nmax_tokens = 8\ndataset = {{ path = {:?}, format = \"sharegpt\" }}\n\
         [sweep]\nconcurrency = [1]\n",
        data.display().to_string()
    );
    let profile = write_profile(tmp.path(), "leak", &sim.urls, &body);
    let o = run_bench_cli(&profile, &tmp.path().join("out"), &["--no-progress"]);
    assert_eq!(code(&o), 2, "{}", text(&o));
    let all = text(&o);
    assert!(!all.contains("s3cr3t"), "the file's text was shown: {all}");
    for says in [
        &data.display().to_string(),
        "line 1, column",
        "a string",
        "conversations",
    ] {
        assert!(all.contains(says), "{says:?} not said: {all}");
    }
}

/// Issue 35 item 5: a server that writes 200 MB of output leaves a log of its first and last
/// megabytes, the cut said in the log, on stderr and in the run's results.
#[test]
fn a_chatty_servers_log_is_capped_and_the_cut_said() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let command = sim_server("head -c 200000000 /dev/zero | tr '\\0' x; echo; echo last words; ");
    let o = managed_bench(tmp.path(), &out, &command, &[]);
    assert_eq!(code(&o), 0, "{}", text(&o));
    let log = out.join("servers/block-1-head.log");
    let size = std::fs::metadata(&log).unwrap().len();
    assert!(size < 16 << 20, "the log holds {size} bytes");
    let text_of_log = String::from_utf8_lossy(&std::fs::read(&log).unwrap()).into_owned();
    assert!(
        text_of_log.contains("bytes of server output cut here"),
        "the cut is not said in the log"
    );
    assert!(text_of_log.contains("last words"), "the tail was not kept");
    assert!(
        text(&o).contains("bytes of server output cut"),
        "{}",
        text(&o)
    );
    let results = read_json(&out.join("results.json"));
    let cut = results["servers"]["blocks"][0]["head_log_cut_bytes"]
        .as_u64()
        .unwrap_or_else(|| panic!("no cut in results: {}", results["servers"]));
    assert!(cut > 180_000_000, "{cut}");
}

/// The commands that write files from files (plot, plan, merge) refuse an output folder that
/// is a link, as bench and ci do: nothing lands in the link's target.
#[test]
fn every_commands_output_folder_that_is_a_link_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let (results, _) = quick_results(d);
    let results = results.to_str().unwrap().to_string();
    for (what, args) in [
        ("plot", vec!["plot", "--results", &results, "--out"]),
        (
            "plan",
            vec![
                "plan",
                "--completions",
                "1000",
                "--avg-output-tokens",
                "100",
                "-r",
                &results,
                "-o",
            ],
        ),
        ("merge", vec!["merge", "-r", &results, "-o"]),
    ] {
        let target = d.join(format!("home-{what}"));
        std::fs::create_dir_all(&target).unwrap();
        let link = d.join(format!("out-{what}"));
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let mut args = args.clone();
        let link_text = link.to_str().unwrap().to_string();
        args.push(&link_text);
        let o = run(&args);
        assert_eq!(code(&o), 2, "{what}: {}", text(&o));
        assert!(text(&o).contains("symbolic link"), "{what}: {}", text(&o));
        let inside: Vec<_> = std::fs::read_dir(&target).unwrap().collect();
        assert!(
            inside.is_empty(),
            "{what}: written into the target: {inside:?}"
        );
    }
}

/// In a shared temporary folder another user can plant `throughline-locks-<uid>` before this
/// user's first bless: a link to a folder they chose, where the bless then made its lock
/// file. Now a link there is refused (exit 2, naming it) and nothing is made where it points;
/// a folder of the user's own made under a loose umask is closed to others (0700).
#[test]
fn a_bless_lock_folder_planted_as_a_link_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let (_, clean) = quick_results(tmp.path());
    let shared = tmp.path().join("shared-tmp");
    let chosen = tmp.path().join("chosen-by-another");
    std::fs::create_dir_all(&shared).unwrap();
    std::fs::create_dir_all(&chosen).unwrap();
    let uid = unsafe { libc::getuid() };
    let folder = shared.join(format!("throughline-locks-{uid}"));
    std::os::unix::fs::symlink(&chosen, &folder).unwrap();
    let baseline = tmp.path().join("baselines/base.toml");
    let bless_with_tmp = || {
        crate::common::command()
            .env("TMPDIR", &shared)
            .args(["baseline", "bless", "--commit", "abc"])
            .args(["--results", clean.to_str().unwrap()])
            .args(["--baseline", baseline.to_str().unwrap()])
            .output()
            .unwrap()
    };
    let o = bless_with_tmp();
    assert_eq!(code(&o), 2, "{}", text(&o));
    assert!(
        text(&o).contains("is a symbolic link: refused"),
        "{}",
        text(&o)
    );
    assert_eq!(
        std::fs::read_dir(&chosen).unwrap().count(),
        0,
        "a file was made there"
    );
    assert!(!baseline.exists());

    // The user's own folder, group-writable: used, and closed to others.
    std::fs::remove_file(&folder).unwrap();
    std::fs::create_dir(&folder).unwrap();
    std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o775)).unwrap();
    let o = bless_with_tmp();
    assert_eq!(code(&o), 0, "{}", text(&o));
    assert_eq!(mode(&folder), 0o700);
}
