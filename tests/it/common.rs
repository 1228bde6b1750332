//! Helpers for the end-to-end tests: the real binary, a real simulator process, profiles in
//! temporary folders. Traffic stays on 127.0.0.1.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

mod machine;
pub use machine::{share_machine, timing_lock, timing_lock_alone, TimingGuard};

/// The binary under test: this build's, or `THROUGHLINE_TEST_BIN` where set (to see a new
/// test fail on an older build: `THROUGHLINE_TEST_BIN=old/throughline cargo test --test it X`).
pub fn bin() -> &'static str {
    static BIN: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    BIN.get_or_init(|| {
        std::env::var("THROUGHLINE_TEST_BIN")
            .unwrap_or_else(|_| env!("CARGO_BIN_EXE_throughline").to_string())
    })
}

/// Runs the binary with `args` and returns its output.
pub fn run(args: &[&str]) -> Output {
    command().args(args).output().expect("run throughline")
}

/// The binary, with GPU locks of its own: tests run in parallel on the same slot numbers,
/// which on a real machine would be the same GPUs (tests of the locks set
/// THROUGHLINE_LOCK_DIR themselves).
pub fn command() -> Command {
    share_machine();
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let dir =
        std::env::temp_dir().join(format!("throughline-test-locks/{}-{n}", std::process::id()));
    let mut cmd = Command::new(bin());
    cmd.env("THROUGHLINE_LOCK_DIR", dir);
    // The bisect log's key in a folder of the tests' own, not the user's real state folder.
    cmd.env(
        "THROUGHLINE_STATE_DIR",
        std::env::temp_dir().join("throughline-test-state"),
    );
    cmd
}

/// `throughline bench --profile PROFILE --out OUT`, to add arguments or environment to.
pub fn bench_command(profile: &Path, out: &Path) -> Command {
    let mut cmd = command();
    cmd.arg("bench")
        .arg("--profile")
        .arg(profile)
        .arg("--out")
        .arg(out);
    cmd
}

/// Runs `throughline bench --profile PROFILE --out OUT --no-progress`, asserts it exited 0
/// (showing its output when not), and returns its output.
pub fn bench_ok(profile: &Path, out: &Path) -> Output {
    let o = run_bench_cli(profile, out, &["--no-progress"]);
    assert_eq!(code(&o), 0, "{}", text(&o));
    o
}

/// Runs `throughline bench --profile PROFILE --out OUT EXTRA...` and returns its output.
pub fn run_bench_cli(profile: &Path, out: &Path, extra: &[&str]) -> Output {
    bench_command(profile, out)
        .args(extra)
        .output()
        .expect("run throughline bench")
}

pub fn code(out: &Output) -> i32 {
    out.status.code().unwrap_or(-1)
}

pub fn text(out: &Output) -> String {
    format!(
        "--- stdout\n{}\n--- stderr\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A `throughline serve-sim` process on ephemeral ports, killed on drop.
pub struct Sim {
    child: Child,
    pub urls: Vec<String>,
}

impl Sim {
    pub fn start(replicas: usize, extra: &[&str]) -> Sim {
        Sim::start_env(replicas, extra, &[])
    }

    /// Like [`Sim::start`], with extra environment variables for the simulator process.
    pub fn start_env(replicas: usize, extra: &[&str], env: &[(&str, &str)]) -> Sim {
        use std::os::unix::process::CommandExt;
        let mut cmd = command();
        // Killed with this test binary too, where no drop runs (a SIGKILL, a cancel after a
        // library run took the signals): a cancelled run left its simulators serving. Linux
        // sends it when the thread that started the child ends: the test's own thread, which
        // drops the Sim before it ends anyway.
        // SAFETY: prctl is async-signal-safe and touches only the child being started.
        unsafe {
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut child = cmd
            .args([
                "serve-sim",
                "--port",
                "0",
                "--replicas",
                &replicas.to_string(),
            ])
            .args(extra)
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start serve-sim");
        let stdout = child.stdout.take().unwrap();
        let mut lines = BufReader::new(stdout).lines();
        let mut urls = Vec::new();
        while urls.len() < replicas {
            let line = lines.next().expect("serve-sim printed its URLs").unwrap();
            if let Some(url) = line.split(" on ").nth(1) {
                urls.push(url.trim().to_string());
            }
        }
        Sim { child, urls }
    }

    /// Sum of a counter over all replicas' /metrics.
    pub fn counter(&self, name: &str) -> f64 {
        self.urls
            .iter()
            .map(|u| {
                let body = http_get(&format!("{u}/metrics"));
                body.lines()
                    .find(|l| l.starts_with(name) && l[name.len()..].starts_with([' ', '{']))
                    .and_then(|l| l.rsplit(' ').next())
                    .and_then(|v| v.parse::<f64>().ok())
                    .unwrap_or_else(|| panic!("{name} not in /metrics:\n{body}"))
            })
            .sum()
    }
}

impl Drop for Sim {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A minimal blocking GET over a raw socket (tests need no HTTP client of their own).
pub fn http_get(url: &str) -> String {
    use std::io::{Read, Write};
    let rest = url.strip_prefix("http://").unwrap();
    let (host, path) = rest
        .split_once('/')
        .map(|(h, p)| (h, format!("/{p}")))
        .unwrap_or((rest, "/".into()));
    let mut s = std::net::TcpStream::connect(host).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).unwrap();
    body.split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or(body)
}

/// Writes a profile into `dir` with the given endpoints and body (everything after
/// `[target]`'s endpoints line).
pub fn write_profile(dir: &Path, name: &str, endpoints: &[String], rest: &str) -> PathBuf {
    let list = endpoints
        .iter()
        .map(|e| format!("{e:?}"))
        .collect::<Vec<_>>()
        .join(", ");
    let text = format!("name = \"{name}\"\n[target]\nendpoints = [{list}]\n{rest}");
    let path = dir.join(format!("{name}.profile.toml"));
    std::fs::write(&path, text).unwrap();
    path
}

pub fn read_json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Every line of `out_dir/requests.jsonl`, parsed.
pub fn read_journal(out_dir: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(out_dir.join("requests.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad JSONL line {l}: {e}")))
        .collect()
}

/// A copy of `results` (next to it, as `unflagged.json`) without the client's headroom
/// figures, its `client-bound` flags and the warnings, so that `baseline bless` takes it.
/// For tests about something else (locking, secrets) whose tiny runs on a busy CI machine
/// can be flagged when a few reads wait over a millisecond; what the flags do is tested in
/// tests/it/headroom.rs.
pub fn without_client_flags(results: &Path) -> PathBuf {
    let mut clean = read_json(results);
    clean["warnings"] = serde_json::json!([]);
    let strip = |levels: &mut serde_json::Value| {
        for level in levels.as_array_mut().unwrap() {
            for t in level["trials"].as_array_mut().unwrap() {
                t["flags"] = serde_json::json!([]);
                t["client"] = serde_json::Value::Null;
            }
        }
    };
    strip(&mut clean["levels"]);
    // A relative run's base arm too (the gate holds both arms to the client-bound rule).
    if clean["base"].is_object() {
        strip(&mut clean["base"]["levels"]);
    }
    let path = results.with_file_name("unflagged.json");
    std::fs::write(&path, serde_json::to_string(&clean).unwrap()).unwrap();
    path
}

/// This test binary, to run its test `name` of `module` (as `module_path!()` gives it) alone
/// in a process of its own: `--exact` on the path libtest knows, the crate's name left out.
pub fn own_test(module: &str, name: &str) -> Command {
    let (_, module) = module
        .split_once("::")
        .expect("a module inside the test crate");
    let mut cmd = Command::new(std::env::current_exe().expect("the test binary's path"));
    cmd.args(["--exact", &format!("{module}::{name}"), "--nocapture"]);
    cmd
}

/// Set in the process [`in_own_process`] starts for one test.
const OWN_PROCESS: &str = "THROUGHLINE_TEST_OWN_PROCESS";

/// Whether this is the process [`in_own_process`] started.
pub fn is_own_process() -> bool {
    std::env::var_os(OWN_PROCESS).is_some()
}

/// Runs `body` (the test `name` of `module`) in a process of its own: this binary again,
/// with `--exact`. For tests that change what is one per process: a library run installs
/// the SIGINT/SIGTERM handlers for good (after it this binary would ignore a cancel), and
/// in-process timing would share threads and allocator with the tests beside it.
pub fn in_own_process(module: &str, name: &str, body: impl FnOnce()) {
    if is_own_process() {
        body();
        return;
    }
    // The child's processes are this test's: a timing test waits for them as for any.
    share_machine();
    let out = own_test(module, name)
        .env(OWN_PROCESS, "1")
        .output()
        .expect("start this test binary again");
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    // libtest's line for a test that ran: a name that matched nothing would pass too.
    assert!(said.contains("1 passed"), "{said}");
    eprintln!("{said}");
}

/// Runs git in `dir` with a throwaway identity (tests make their own repositories).
pub fn git(dir: &Path, args: &[&str]) {
    share_machine();
    let out = Command::new("git")
        .args([
            "-c",
            "user.name=throughline test",
            "-c",
            "user.email=test@example.invalid",
            "-c",
            "init.defaultBranch=main",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run git");
    assert!(out.status.success(), "git {args:?}: {}", text(&out));
}

/// Commits everything in `dir` and makes it `origin/main`: where `ci --baseline-ref
/// origin/main` reads the profile and baseline a test just blessed.
pub fn commit_as_origin_main(dir: &Path, message: &str) {
    git(dir, &["add", "."]);
    git(dir, &["commit", "-qm", message]);
    git(dir, &["update-ref", "refs/remotes/origin/main", "HEAD"]);
}

/// `throughline baseline bless --results RESULTS --baseline BASELINE [extra...]`.
pub fn bless(results: &Path, baseline: &Path, extra: &[&str]) -> Output {
    with_results_and_baseline(&["baseline", "bless"], results, baseline, extra)
}

/// `throughline gate --results RESULTS --baseline BASELINE [extra...]`.
/// `gate` on a run of this busy test machine, whose trials may be flagged client-bound: the
/// flag is accepted here (tests/it/headroom.rs tests the refusal), as bless gets
/// [`without_client_flags`].
pub fn gate(results: &Path, baseline: &Path, extra: &[&str]) -> Output {
    with_results_and_baseline(&["gate", "--allow-client-bound"], results, baseline, extra)
}

/// `throughline gate --allow-client-bound --results RESULTS --json VERDICT`: a relative run
/// judged on its own arms (no baseline), its verdict written to `verdict`.
pub fn gate_own_arms(results: &Path, verdict: &Path) -> Output {
    run(&[
        "gate",
        "--allow-client-bound",
        "--results",
        results.to_str().unwrap(),
        "--json",
        verdict.to_str().unwrap(),
    ])
}

/// A baseline at `dir/b.toml` that vouches for profile `p`: blessed from a plain run of one
/// simulator (`fast` preset) into `dir/plain`.
pub fn baseline_from_a_plain_run(p: &Path, dir: &Path) -> PathBuf {
    let sim = Sim::start(1, &["--preset", "fast"]);
    let plain = dir.join("plain");
    let o = run_bench_cli(
        p,
        &plain,
        &["--no-progress", "--no-plots", "-e", &sim.urls[0]],
    );
    assert_eq!(code(&o), 0, "{}", text(&o));
    let baseline = dir.join("b.toml");
    let o = bless(
        &without_client_flags(&plain.join("results.json")),
        &baseline,
        &[],
    );
    assert_eq!(code(&o), 0, "{}", text(&o));
    baseline
}

/// A run in blocks' trials rewritten so that what the gate sees is known (a real run gives
/// the records' shape): ln tok/s = the slot effect (+2.5% on slot 1, -2.5% on slot 0) + for
/// the head `head(level index, block)` + a fixed trial pattern (-0.5%, 0, +0.5%); tok/s is
/// 1,000 times its exp. `src` and `dst` may be one file.
pub fn rewrite_block_trials(src: &Path, dst: &Path, head: impl Fn(usize, usize) -> f64) {
    let mut run = read_json(src);
    let pattern = [-0.005, 0.0, 0.005];
    for arm in ["head", "base"] {
        let levels = match arm {
            "head" => &mut run["levels"],
            _ => &mut run["base"]["levels"],
        };
        for (li, level) in levels.as_array_mut().unwrap().iter_mut().enumerate() {
            for t in level["trials"].as_array_mut().unwrap() {
                let block = t["block"].as_u64().unwrap() as usize;
                let slot = match t["slot"].as_u64().unwrap() {
                    1 => 0.025,
                    _ => -0.025,
                };
                let own = match arm {
                    "head" => head(li, block),
                    _ => 0.0,
                };
                let trial = t["trial"].as_u64().unwrap() as usize;
                let ln = slot + own + pattern[(trial + 2) % 3];
                t["output_tok_per_s"] = serde_json::json!(1000.0 * ln.exp());
            }
        }
    }
    std::fs::write(dst, serde_json::to_string(&run).unwrap()).unwrap();
}

fn with_results_and_baseline(
    command: &[&str],
    results: &Path,
    baseline: &Path,
    extra: &[&str],
) -> Output {
    let mut args = command.to_vec();
    args.extend(["--results", results.to_str().unwrap()]);
    args.extend(["--baseline", baseline.to_str().unwrap()]);
    args.extend_from_slice(extra);
    run(&args)
}

/// Waits for `child` at most `limit`, killing it (and failing) past that.
pub fn wait_with_deadline(child: Child, limit: Duration, what: &str) -> Output {
    let started = Instant::now();
    let pid = child.id();
    let waiter = std::thread::spawn(move || child.wait_with_output().unwrap());
    while !waiter.is_finished() {
        if started.elapsed() > limit {
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            panic!("{what} did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    waiter.join().unwrap()
}

/// A quick profile body (after `[target]`'s endpoints): one level, 5 trials of 8 short
/// requests; what tests of files and refusals need, not a measurement.
pub const QUICK_BODY: &str = r#"
[workload]
input_tokens = 4
max_tokens = 10
ignore_eos = true
[sweep]
concurrency = [1]
requests_per_level = 8
trials = 5
"#;

/// Makes a FIFO at `p` (a special file the tools must refuse, not read).
pub fn mkfifo(p: &Path) {
    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
}
