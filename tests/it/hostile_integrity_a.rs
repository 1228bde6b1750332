//! Issue 47 (hostile review), four ways a pull request's own files or server could write a
//! verdict: GPU lock files that are links to other files, streams longer than `max_tokens`,
//! a forged bisect log, and impossible telemetry gauges. Each test drives the real binary
//! against files and servers on 127.0.0.1 and checks that the run refuses, fails the request
//! in its class, or drops the value, and says why.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use crate::common::*;
use crate::hostile::reply;

/// A bench in blocks on slot 0 whose server exits at once: the GPU lock is taken before
/// any server starts, so a refused lock is the whole run.
fn bench_on_gpu0(dir: &Path, locks: &Path) -> std::process::Output {
    let p = crate::crossover_cli::profile(dir);
    bench_command(&p, &dir.join("out"))
        .args([
            "--no-progress",
            "--no-plots",
            "--server-command",
            "exit 3 # {port}",
        ])
        .args(["--slots", "0"])
        .env("THROUGHLINE_LOCK_DIR", locks)
        .output()
        .unwrap()
}

/// A `gpu-0.lock` that is a hard link to another file (a root-owned file elsewhere, on a
/// machine where runs are root) was truncated, rewritten and made world-writable. It is
/// refused now: exit 2, the path and what to do said, the other file as it was.
#[test]
fn a_hard_linked_gpu_lock_is_refused_and_its_other_name_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let locks = dir.path().join("locks");
    std::fs::create_dir(&locks).unwrap();
    let other = dir.path().join("precious.conf");
    std::fs::write(&other, "keep me\n").unwrap();
    std::fs::set_permissions(&other, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::hard_link(&other, locks.join("gpu-0.lock")).unwrap();
    let o = bench_on_gpu0(dir.path(), &locks);
    let said = text(&o);
    assert_eq!(code(&o), 2, "{said}");
    let mode = std::fs::metadata(&other).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode, 0o600, "mode changed to {mode:o}: {said}");
    assert_eq!(
        std::fs::read_to_string(&other).unwrap(),
        "keep me\n",
        "{said}"
    );
    assert!(
        said.contains("gpu-0.lock") && said.contains("more than one name"),
        "{said}"
    );
}

/// A lock folder that is a symbolic link (planted in a shared /tmp by another user) is not
/// followed: the run is refused, nothing is made in the folder it points to.
#[test]
fn a_lock_folder_that_is_a_link_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("theirs");
    std::fs::create_dir(&target).unwrap();
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o700)).unwrap();
    let locks = dir.path().join("throughline-locks");
    std::os::unix::fs::symlink(&target, &locks).unwrap();
    let o = bench_on_gpu0(dir.path(), &locks);
    let said = text(&o);
    assert_eq!(code(&o), 2, "{said}");
    assert!(said.contains("symbolic link"), "{said}");
    assert_eq!(std::fs::read_dir(&target).unwrap().count(), 0, "{said}");
    let mode = std::fs::metadata(&target).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode, 0o700, "{mode:o}");
}

// ---------------------------------------------------------------------------------------------
// A fake vLLM on 127.0.0.1: a few std threads that answer `/health`, `/v1/models`,
// `/metrics` (the page given) and the completions (the stream given). It serves at most
// [`FAKE_CONNECTIONS`] connections and stops after [`FAKE_LIFE`] or when dropped.

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const FAKE_CONNECTIONS: u64 = 400;
const FAKE_LIFE: Duration = Duration::from_secs(60);

/// What the fake answers a completion with: `chunks` content chunks of one character (each
/// written as it is made, so a client that hangs up stops the server's writing), then a
/// usage chunk when `usage` is given, then `[DONE]`.
#[derive(Clone, Copy)]
struct Stream {
    chunks: u64,
    usage: Option<u64>,
}

struct Fake {
    url: String,
    stop: Arc<AtomicBool>,
    /// Content chunks written, over all completions.
    chunks_written: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Fake {
    fn start(metrics: &str, stream: Stream) -> Fake {
        share_machine();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
        listener.set_nonblocking(true).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let chunks_written = Arc::new(AtomicU64::new(0));
        let metrics = Arc::new(metrics.to_string());
        let thread = {
            let (stop, written) = (stop.clone(), chunks_written.clone());
            std::thread::spawn(move || {
                let started = Instant::now();
                let mut served = 0;
                while served < FAKE_CONNECTIONS
                    && started.elapsed() < FAKE_LIFE
                    && !stop.load(Ordering::Relaxed)
                {
                    let Ok((s, _)) = listener.accept() else {
                        std::thread::sleep(Duration::from_millis(2));
                        continue;
                    };
                    served += 1;
                    let (metrics, written, stop) = (metrics.clone(), written.clone(), stop.clone());
                    std::thread::spawn(move || serve(s, &metrics, stream, &written, &stop));
                }
            })
        };
        Fake {
            url,
            stop,
            chunks_written,
            thread: Some(thread),
        }
    }
}

impl Drop for Fake {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Reads one request (bounded, as tests/it/hostile.rs reads them): its path, or None when
/// the connection closed first.
fn read_request(s: &mut TcpStream) -> Option<String> {
    let (head, _) = crate::hostile::read_request(s)?;
    head.split_whitespace().nth(1).map(str::to_string)
}

fn serve(mut s: TcpStream, metrics: &str, stream: Stream, written: &AtomicU64, stop: &AtomicBool) {
    let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
    let _ = s.set_write_timeout(Some(Duration::from_secs(10)));
    let Some(path) = read_request(&mut s) else {
        return;
    };
    match path.as_str() {
        "/health" => return reply(&mut s, "200 OK", "text/plain", "ok"),
        "/metrics" => return reply(&mut s, "200 OK", "text/plain", metrics),
        "/v1/models" => {
            return reply(
                &mut s,
                "200 OK",
                "application/json",
                r#"{"object":"list","data":[{"id":"fake","object":"model"}]}"#,
            )
        }
        p if !p.starts_with("/v1/") => return reply(&mut s, "404 Not Found", "text/plain", ""),
        _ => {}
    }
    if s.write_all(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n",
    )
    .is_err()
    {
        return;
    }
    // Written in pieces of up to 256 chunks: a client that stops reading makes a write fail.
    let chunk = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"}}]}\n\n";
    let mut left = stream.chunks;
    while left > 0 && !stop.load(Ordering::Relaxed) {
        let n = left.min(256);
        if s.write_all(chunk.repeat(n as usize).as_bytes()).is_err() {
            return;
        }
        written.fetch_add(n, Ordering::Relaxed);
        left -= n;
    }
    let mut tail = String::new();
    if let Some(usage) = stream.usage {
        tail.push_str(&format!(
            "data: {{\"choices\":[],\"usage\":{{\"prompt_tokens\":4,\"completion_tokens\":{usage}}}}}\n\n"
        ));
    }
    tail.push_str("data: [DONE]\n\n");
    let _ = s.write_all(tail.as_bytes());
}

/// A vLLM `/metrics` page with the gauges given (the counter moves with nothing: the
/// cross-check is not under test).
fn vllm_page(running: &str, waiting: &str, cache: &str) -> String {
    format!(
        "# TYPE vllm:num_requests_running gauge\n\
         vllm:num_requests_running{{engine=\"0\",model_name=\"fake\"}} {running}\n\
         vllm:num_requests_waiting{{engine=\"0\",model_name=\"fake\"}} {waiting}\n\
         vllm:kv_cache_usage_perc{{engine=\"0\",model_name=\"fake\"}} {cache}\n"
    )
}

/// One level of `requests` requests asking for `max_tokens`, no warmup, one trial.
fn fake_profile(dir: &Path, url: &str, max_tokens: u32, requests: u32) -> std::path::PathBuf {
    write_profile(
        dir,
        "fake",
        &[url.to_string()],
        &format!(
            "model = \"fake\"\n[workload]\ninput_tokens = 4\nmax_tokens = {max_tokens}\n\
             degenerate_below = 1\n[sweep]\nconcurrency = [1]\nrequests_per_level = \
             {requests}\nwarmup_requests = 0\ntrials = 1\nrequest_timeout = \"20s\"\n\
             stall_timeout = \"15s\"\n"
        ),
    )
}

/// Telemetry gauges a server could not have had (a KV cache 500% full, -3 requests
/// waiting) were kept in the samples and said: "KV cache near full (500%)" in the run's
/// summary. They are dropped where the page is read now, counted, and the run says so.
#[test]
fn impossible_gauges_are_dropped_counted_and_never_shown() {
    let fake = Fake::start(
        &vllm_page("-7", "-3", "5.0"),
        Stream {
            chunks: 4,
            usage: Some(4),
        },
    );
    let dir = tempfile::tempdir().unwrap();
    let p = fake_profile(dir.path(), &fake.url, 4, 3);
    let out = dir.path().join("out");
    let o = run_bench_cli(&p, &out, &["--no-progress", "--no-plots"]);
    let said = text(&o);
    assert_eq!(code(&o), 0, "{said}");
    assert!(
        !said.contains("500%") && !said.contains("-3 waiting"),
        "{said}"
    );
    let results = read_json(&out.join("results.json"));
    let telemetry = &results["levels"][0]["trials"][0]["telemetry"];
    let series = &telemetry["endpoints"][0];
    let samples = series["samples"].as_array().unwrap();
    assert!(!samples.is_empty(), "{telemetry}");
    for s in samples {
        assert!(
            s["cache_usage"].is_null() && s["waiting"].is_null() && s["running"].is_null(),
            "{s}"
        );
    }
    // Three values per scrape dropped, and the run says so once.
    assert_eq!(
        series["invalid_values"].as_u64(),
        Some(3 * samples.len() as u64),
        "{series}"
    );
    assert!(said.contains("could not be true"), "{said}");
    // The requests themselves were answered whole.
    assert_eq!(fake.chunks_written.load(Ordering::Relaxed), 3 * 4);
}

/// The most content chunks the over-long server streams per request: enough that reading
/// them all is plain in the test's time (the fix stops at the 9th), few enough that the
/// test stays quick without the fix.
const ENDLESS_CHUNKS: u64 = 200_000;

/// A server that streams more content chunks than `max_tokens` allowed, without usage, was
/// credited with every one (5 million chunks gave 10,000,000 output tokens for 2 requests
/// of max_tokens 8, exit 0). Each such request fails now as `over_length`, its stream cut
/// off at the first chunk too many (the server's writes stop far short of its 200,000).
#[test]
fn a_stream_longer_than_max_tokens_fails_as_over_length_and_is_cut_off() {
    let fake = Fake::start(
        &vllm_page("1", "0", "0.1"),
        Stream {
            chunks: ENDLESS_CHUNKS,
            usage: None,
        },
    );
    let dir = tempfile::tempdir().unwrap();
    let p = fake_profile(dir.path(), &fake.url, 8, 2);
    let out = dir.path().join("out");
    let o = run_bench_cli(&p, &out, &["--no-progress", "--no-plots"]);
    let said = text(&o);
    let results = read_json(&out.join("results.json"));
    let trial = &results["levels"][0]["trials"][0];
    assert_eq!(trial["failed"]["over_length"], 2, "{trial}\n{said}");
    assert_eq!(trial["output_tokens"], 0, "{trial}");
    assert_eq!(code(&o), 2, "{said}");
    let msg = trial["error_examples"]["over_length"].as_str().unwrap();
    assert!(msg.contains("max_tokens = 8"), "{msg}");
    for r in read_journal(&out) {
        assert_eq!(r["error"], "over_length", "{r}");
        assert!(r["chunks"].as_u64().unwrap() <= 9, "{r}");
    }
    // Cut off: the client stopped reading (the socket's buffers hold some more).
    let written = fake.chunks_written.load(Ordering::Relaxed);
    assert!(written < ENDLESS_CHUNKS, "{written} chunks written");
}

// ---------------------------------------------------------------------------------------------
// The bisect log.

/// `throughline bisect` of `ids[0]..ids[1]` in `repo` into `out`, whose servers never start
/// (each step is quick: "not measured"), with the log's key kept in `state`.
fn bisect_unstartable(
    repo: &Path,
    out: &Path,
    state: &Path,
    ids: &[String],
) -> std::process::Output {
    let profile = crate::crossover_cli::profile(repo.parent().unwrap());
    command()
        .args(["bisect", "-C"])
        .arg(repo)
        .arg("-p")
        .arg(&profile)
        .args(["--server-command", "exit 1 # {port}", "--slots", "0", "-o"])
        .arg(out)
        .args(["--good", &ids[0], "--bad", &ids[1]])
        .env("THROUGHLINE_STATE_DIR", state)
        .output()
        .unwrap()
}

/// A bisect log with a forged step (a pull request can commit one in its checkout, where
/// the output folder often is: the header names only commit ids, the profile's hash and the
/// commands) made bisect name the forged commit as the first slower one without measuring
/// anything, exit 0. The forged step does not carry the keyed checksum now: it is moved
/// aside, measured again (here its server does not start, so nothing is named), and the
/// run says so.
#[test]
fn a_forged_bisect_step_is_measured_again_not_believed() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    let mut ids = Vec::new();
    git(&repo, &["init", "-q"]);
    for (i, subject) in ["the good commit", "an innocent change"].iter().enumerate() {
        std::fs::write(repo.join("n.txt"), format!("{i}\n")).unwrap();
        git(&repo, &["add", "-A"]);
        git(&repo, &["commit", "-q", "-m", subject]);
        let id = std::process::Command::new("git")
            .args(["rev-parse", "HEAD"])
            .current_dir(&repo)
            .output()
            .unwrap();
        ids.push(String::from_utf8_lossy(&id.stdout).trim().to_string());
    }
    let (out, state) = (tmp.path().join("out"), tmp.path().join("state"));
    // A first bisect writes the log's header (what a forger would copy or compute).
    let first = bisect_unstartable(&repo, &out, &state, &ids);
    assert_eq!(code(&first), 2, "{}", text(&first));
    let log_path = out.join("bisect-log.jsonl");
    let log = std::fs::read_to_string(&log_path).unwrap();
    let header = log.lines().next().unwrap();
    let forged = serde_json::json!({
        "number": 1, "commit": ids[1], "subject": "an innocent change", "outcome": "bad",
        "reason": "regression: C=1 0.800", "levels": [], "blocks": 4, "seconds": 60.0
    });
    std::fs::write(&log_path, format!("{header}\n{forged}\n")).unwrap();
    let o = bisect_unstartable(&repo, &out, &state, &ids);
    let said = text(&o);
    assert!(!said.contains("first slower commit"), "{said}");
    assert_eq!(code(&o), 2, "{said}");
    assert!(
        said.contains("not trusted") && said.contains("measured again"),
        "{said}"
    );
    let report = read_json(&out.join("bisect.json"));
    let steps = report["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 1, "{report}");
    assert_eq!(steps[0]["outcome"], "skip", "{report}");
    let aside = std::fs::read_to_string(out.join("bisect-log.untrusted.jsonl")).unwrap();
    assert!(aside.contains("regression: C=1 0.800"), "{aside}");
}
