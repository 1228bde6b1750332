//! Hostile servers end to end through `throughline bench`: a server that reports token counts
//! it could not have produced, one that echoes the API key back, and ones whose bodies never
//! end. Nothing may crash, leak the key or read without bound; each request fails in its
//! class with a message that says why.
//!
//! The server is a few std threads on 127.0.0.1: it answers `/health`, `/v1/models` and
//! `/metrics` like an OpenAI-compatible server and the completions with the behaviour under
//! test. It serves at most [`MAX_CONNECTIONS`] connections and stops after [`SERVER_LIFE`].

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::common::*;
use serde_json::Value;

const MAX_CONNECTIONS: u64 = 64;
const SERVER_LIFE: Duration = Duration::from_secs(60);
/// The most an endless body sends before the server closes it.
const ENDLESS_CAP: u64 = 256 << 20;

/// What the server does with a completion request (`n` counts them from 0).
#[derive(Clone, Copy)]
enum Behaviour {
    /// Streams `chunks` content chunks, then usage with `completion_tokens` = `usage`.
    Usage { chunks: usize, usage: u64 },
    /// Echoes the request's `Authorization` header: in a 500 body, in an SSE error event,
    /// and at the place where the message is clipped, in turn.
    EchoKey,
    /// 500 with a body that never ends.
    EndlessError,
    /// 200 SSE with `data:` lines that never get their blank line.
    EndlessEvent,
}

struct Hostile {
    url: String,
    stop: Arc<AtomicBool>,
    /// Bytes written in endless bodies, over all connections.
    endless_bytes: Arc<AtomicU64>,
    thread: Option<JoinHandle<()>>,
}

impl Hostile {
    fn start(behaviour: Behaviour) -> Hostile {
        // The server's life is timed: the test's wait for the machine comes first.
        crate::common::share_machine();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
        listener.set_nonblocking(true).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let endless_bytes = Arc::new(AtomicU64::new(0));
        let thread = {
            let (stop, bytes) = (stop.clone(), endless_bytes.clone());
            std::thread::spawn(move || {
                let started = Instant::now();
                let requests = Arc::new(AtomicU64::new(0));
                let mut served = 0;
                while served < MAX_CONNECTIONS
                    && started.elapsed() < SERVER_LIFE
                    && !stop.load(Ordering::Relaxed)
                {
                    let Ok((s, _)) = listener.accept() else {
                        std::thread::sleep(Duration::from_millis(2));
                        continue;
                    };
                    served += 1;
                    let (requests, bytes, stop) = (requests.clone(), bytes.clone(), stop.clone());
                    std::thread::spawn(move || {
                        serve(s, behaviour, &requests, &bytes, &stop, started);
                    });
                }
            })
        };
        Hostile {
            url,
            stop,
            endless_bytes,
            thread: Some(thread),
        }
    }
}

impl Drop for Hostile {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Reads one request: (head, body); `None` when the connection closed first.
pub(crate) fn read_request(s: &mut TcpStream) -> Option<(String, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut piece = [0u8; 4096];
    let head_end = loop {
        match s.read(&mut piece) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&piece[..n]),
        }
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        if buf.len() > 1 << 20 {
            return None;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let length: usize = header(&head, "content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
        .min(1 << 20);
    while buf.len() < head_end + length {
        match s.read(&mut piece) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&piece[..n]),
        }
    }
    Some((head, buf[head_end..head_end + length].to_vec()))
}

fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim().eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

pub(crate) fn reply(s: &mut TcpStream, status: &str, content_type: &str, body: &str) {
    let _ = write!(
        s,
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}

fn serve(
    mut s: TcpStream,
    behaviour: Behaviour,
    requests: &AtomicU64,
    endless_bytes: &AtomicU64,
    stop: &AtomicBool,
    started: Instant,
) {
    let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
    let Some((head, body)) = read_request(&mut s) else {
        return;
    };
    let path = head.split_whitespace().nth(1).unwrap_or("").to_string();
    let auth = header(&head, "authorization").unwrap_or("").to_string();
    match path.as_str() {
        "/health" => return reply(&mut s, "200 OK", "text/plain", "ok"),
        "/v1/models" => {
            return reply(
                &mut s,
                "200 OK",
                "application/json",
                r#"{"object":"list","data":[{"id":"hostile","object":"model"}]}"#,
            )
        }
        p if !p.starts_with("/v1/") => return reply(&mut s, "404 Not Found", "text/plain", ""),
        _ => {}
    }
    let stream = serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|b| b["stream"].as_bool())
        .unwrap_or(true);
    assert!(stream, "these tests stream");
    let n = requests.fetch_add(1, Ordering::Relaxed);
    let sse_head =
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n";
    let chunk = r#"data: {"choices":[{"index":0,"delta":{"content":"word "}}]}"#;
    match behaviour {
        Behaviour::Usage { chunks, usage } => {
            let mut text = String::from(sse_head);
            for _ in 0..chunks {
                text.push_str(&format!("{chunk}\n\n"));
            }
            text.push_str(&format!(
                "data: {{\"choices\":[],\"usage\":{{\"prompt_tokens\":4,\"completion_tokens\":{usage}}}}}\n\ndata: [DONE]\n\n"
            ));
            let _ = s.write_all(text.as_bytes());
        }
        Behaviour::EchoKey => match n % 3 {
            0 => reply(
                &mut s,
                "500 Internal Server Error",
                "application/json",
                &format!(r#"{{"error":"rejected header {auth}"}}"#),
            ),
            1 => {
                let event = serde_json::json!({"error": {"message": format!("bad auth: {auth}")}});
                let _ = write!(s, "{sse_head}{chunk}\n\ndata: {event}\n\n");
            }
            _ => {
                // The key straddles the 200th character, where error texts are clipped
                // (its first 10 characters are left before the "...").
                let pad = "p".repeat(182);
                reply(
                    &mut s,
                    "400 Bad Request",
                    "text/plain",
                    &format!("{pad} {auth}"),
                );
            }
        },
        Behaviour::EndlessError => {
            let _ = s.write_all(
                b"HTTP/1.1 500 Internal Server Error\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\nENDLESS-ERROR ",
            );
            endless(&mut s, &[b'x'; 64 << 10], endless_bytes, stop, started);
        }
        Behaviour::EndlessEvent => {
            let _ = write!(s, "{sse_head}{chunk}\n\n");
            let line = format!("data: {}\n", "y".repeat(1018));
            endless(&mut s, line.as_bytes(), endless_bytes, stop, started);
        }
    }
}

/// Writes `piece` until the client goes away, [`ENDLESS_CAP`] bytes were written or the
/// server's life is over, counting the bytes.
fn endless(
    s: &mut TcpStream,
    piece: &[u8],
    total: &AtomicU64,
    stop: &AtomicBool,
    started: Instant,
) {
    let _ = s.set_write_timeout(Some(Duration::from_secs(5)));
    let mut written = 0u64;
    while written < ENDLESS_CAP && started.elapsed() < SERVER_LIFE && !stop.load(Ordering::Relaxed)
    {
        if s.write_all(piece).is_err() {
            break;
        }
        written += piece.len() as u64;
        total.fetch_add(piece.len() as u64, Ordering::Relaxed);
    }
}

/// One level of two requests, no warmup, one trial.
fn profile_body(max_tokens: u32, key_env: Option<&str>) -> String {
    let key = key_env.map_or(String::new(), |v| format!("api_key_env = \"{v}\"\n"));
    format!(
        r#"model = "hostile"
{key}[workload]
input_tokens = 4
max_tokens = {max_tokens}
degenerate_below = 1
[sweep]
concurrency = [1]
requests_per_level = 3
warmup_requests = 0
trials = 1
request_timeout = "20s"
stall_timeout = "15s"
"#
    )
}

struct Bench {
    out: Output,
    dir: PathBuf,
    elapsed: Duration,
    _tmp: tempfile::TempDir,
}

fn bench(endpoint: &str, body: &str, env: &[(&str, &str)]) -> Bench {
    let tmp = tempfile::tempdir().unwrap();
    let profile = write_profile(tmp.path(), "hostile", &[endpoint.to_string()], body);
    let dir = tmp.path().join("out");
    crate::common::share_machine();
    let started = Instant::now();
    let out = bench_command(&profile, &dir)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    Bench {
        out,
        elapsed: started.elapsed(),
        dir,
        _tmp: tmp,
    }
}

impl Bench {
    /// The single trial of the single level.
    fn trial(&self) -> Value {
        let path = self.dir.join("results.json");
        assert!(path.is_file(), "no results.json: {}", text(&self.out));
        read_json(&path)["levels"][0]["trials"][0].clone()
    }
}

/// A count the server could not have produced fails the request naming the field and the
/// numbers: over max_tokens as `over_length` (1e15 used to abort the run, u64::MAX to wrap
/// into 4.65e21 tok/s with exit 0), far more tokens than chunks received as `protocol`.
#[test]
fn impossible_token_counts_fail_as_over_length_or_protocol() {
    let cases: [(u64, usize, u32, &str, &str); 4] = [
        (
            1_000_000_000_000_000,
            3,
            16,
            "over_length",
            "max_tokens = 16",
        ),
        (u64::MAX, 3, 16, "over_length", "max_tokens = 16"),
        (17, 3, 16, "over_length", "max_tokens = 16"),
        (
            1000,
            2,
            4096,
            "protocol",
            "per content chunk received (2 chunks)",
        ),
    ];
    for (usage, chunks, max_tokens, class, says) in cases {
        let server = Hostile::start(Behaviour::Usage { chunks, usage });
        let run = bench(&server.url, &profile_body(max_tokens, None), &[]);
        let trial = run.trial();
        assert_eq!(code(&run.out), 2, "usage {usage}: {}", text(&run.out));
        assert_eq!(trial["requests_sent"], 3, "usage {usage}");
        assert_eq!(trial["failed"][class], 3, "usage {usage}: {trial}");
        assert_eq!(trial["output_tokens"], 0);
        assert_eq!(trial["output_tok_per_s"], 0.0);
        let msg = trial["error_examples"][class].as_str().unwrap();
        assert!(
            msg.contains(&format!("usage.completion_tokens = {usage}")) && msg.contains(says),
            "{msg}"
        );
        // The failed requests' tokens are counted one per chunk, never the server's number.
        assert_eq!(trial["failed_output_tokens"], 3 * chunks as u64, "{trial}");
    }
    // A count the server could have produced is believed.
    let server = Hostile::start(Behaviour::Usage {
        chunks: 3,
        usage: 16,
    });
    let run = bench(&server.url, &profile_body(16, None), &[]);
    assert_eq!(run.trial()["output_tokens"], 48, "{}", text(&run.out));
}

const KEY: &str = "sk-hostile-echo-K3y9Tq2w";
const PASSWORD: &str = "tl-pass-Xy12v";

/// Every file under `dir` is free of the secrets.
fn assert_no_secret_in_files(dir: &Path) -> usize {
    let mut n = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            n += assert_no_secret_in_files(&path);
            continue;
        }
        let bytes = std::fs::read(&path).unwrap();
        for secret in [KEY, &KEY[..8], PASSWORD] {
            assert!(
                !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
                "{secret:?} leaked into {}:\n{}",
                path.display(),
                String::from_utf8_lossy(&bytes)
            );
        }
        n += 1;
    }
    n
}

/// A server that echoes the Authorization header into error bodies and SSE error events
/// (also where the text is clipped), reached through an endpoint URL with credentials: after
/// bench, neither the key nor the password is in any file or in the output.
#[test]
fn an_echoed_key_is_never_written() {
    let server = Hostile::start(Behaviour::EchoKey);
    let endpoint = server
        .url
        .replace("http://", &format!("http://tluser:{PASSWORD}@"));
    let run = bench(
        &endpoint,
        &profile_body(16, Some("TL_HOSTILE_KEY")),
        &[("TL_HOSTILE_KEY", KEY)],
    );
    let trial = run.trial();
    assert_eq!(trial["requests_sent"], 3, "{}", text(&run.out));
    assert_eq!(trial["failed"]["http"], 2, "{trial}");
    assert_eq!(trial["failed"]["protocol"], 1, "{trial}");
    // The server did echo the key: the masked form is where it would have been.
    let journal = read_journal(&run.dir);
    let messages: Vec<&str> = journal
        .iter()
        .filter_map(|l| l["error_message"].as_str())
        .collect();
    assert_eq!(messages.len(), 3);
    assert!(messages.iter().all(|m| m.contains("***")), "{messages:?}");
    let results = std::fs::read_to_string(run.dir.join("results.json")).unwrap();
    assert!(results.contains("http://***@127.0.0.1:"), "{results}");
    let all = text(&run.out);
    for secret in [KEY, &KEY[..8], PASSWORD] {
        assert!(!all.contains(secret), "{secret:?} leaked: {all}");
    }
    assert!(assert_no_secret_in_files(&run.dir) >= 3);
}

/// A 500 whose body never ends: the client reads at most 64 KiB of it, fails the request as
/// `http` with the status and the start of the body, and hangs up (it used to read it all).
#[test]
fn an_endless_error_body_is_cut_off() {
    let server = Hostile::start(Behaviour::EndlessError);
    let run = bench(&server.url, &profile_body(16, None), &[]);
    let trial = run.trial();
    assert_eq!(trial["failed"]["http"], 3, "{trial}");
    let msg = trial["error_examples"]["http"].as_str().unwrap();
    assert!(
        msg.starts_with("HTTP 500") && msg.contains("ENDLESS-ERROR xxx"),
        "{msg}"
    );
    assert!(msg.chars().count() < 260, "{msg}");
    let sent = server.endless_bytes.load(Ordering::Relaxed);
    assert!(
        sent < 3 * (16 << 20),
        "the client read {sent} bytes of error bodies"
    );
    assert!(run.elapsed < Duration::from_secs(20), "{:?}", run.elapsed);
}

/// `data:` lines that never get the blank line ending their event: the event is refused at
/// 4 MiB as a `protocol` failure (it used to pile up without bound).
#[test]
fn an_endless_event_is_refused_at_its_limit() {
    let server = Hostile::start(Behaviour::EndlessEvent);
    let run = bench(&server.url, &profile_body(16, None), &[]);
    let trial = run.trial();
    assert_eq!(trial["failed"]["protocol"], 3, "{trial}");
    let msg = trial["error_examples"]["protocol"].as_str().unwrap();
    assert!(msg.contains("stream event longer than 4 MiB"), "{msg}");
    let sent = server.endless_bytes.load(Ordering::Relaxed);
    assert!(
        sent < 3 * (16 << 20),
        "the client read {sent} bytes of endless events"
    );
    assert!(run.elapsed < Duration::from_secs(20), "{:?}", run.elapsed);
}

/// A profile with a key written in (there is no such field: a profile names the variable)
/// is refused naming the field, without the TOML error quoting the key.
#[test]
fn a_profile_error_does_not_echo_a_key_line() {
    let tmp = tempfile::tempdir().unwrap();
    let body = profile_body(16, None).replace(
        "model = \"hostile\"\n",
        &format!("model = \"hostile\"\napi_key = \"{KEY}\"\n"),
    );
    let profile = write_profile(tmp.path(), "literal", &["http://127.0.0.1:9".into()], &body);
    let out = run_bench_cli(&profile, &tmp.path().join("out"), &[]);
    assert_eq!(code(&out), 2, "{}", text(&out));
    let all = text(&out);
    assert!(all.contains("unknown field `api_key`"), "{all}");
    assert!(!all.contains(&KEY[..8]), "{all}");
}
