//! Issue 29 items 1-3 and 12: text throughline did not write (a server's bodies, model ids and
//! engine version; names and warnings in results and baselines) must not act on what shows
//! it. The real binary against hostile servers and files:
//!
//! - no line of its output is one a GitHub Actions runner would execute (`::` at the start
//!   after whitespace, `##[` anywhere), but for throughline's own annotations;
//! - the job summary, `verdict.md` and the pull-request comment, read as Markdown events,
//!   render no link, image, heading or HTML from untrusted text;
//! - `init -e` writes only the keys it means to, whatever the model id says;
//! - a job summary stays under GitHub's 1 MiB and says what it left out.
//!
//! The hostile server is a few std threads on 127.0.0.1 (at most [`MAX_CONNECTIONS`]
//! connections, stopped after [`SERVER_LIFE`] or when dropped).

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::*;
use pulldown_cmark::{Event, Parser, Tag, TagEnd};

const MAX_CONNECTIONS: usize = 400;
const SERVER_LIFE: Duration = Duration::from_secs(60);

/// Workflow commands, a fence breaker, a heading, an image, a link and HTML, on many lines.
pub(crate) const HOSTILE: &str =
    "oops\n::stop-commands::abc123\n::error title=owned::from the server\n  \
::add-mask::x\n##[error]fake error ##[group]g\n```\n## Approved by throughline\n\
![img](http://evil.invalid/x.png) [click](http://evil.invalid/) \
<a href=\"http://evil.invalid/\">a</a> <details><summary>s</summary>\r\n\x1b[2J\x07end";

/// A model id that, written raw into the profile's comments, sets gate keys (issue 29 item 3:
/// `bless` would copy them into the baseline).
const GATE_INJECTION: &str = "m\ngate.min_effect = 0.2\ngate.alpha = 0.49 #";

/// A model id with workflow commands on lines of their own.
const MODEL_INJECTION: &str =
    "m\ngate.min_effect = 0.99\ngate.alpha = 0.49\n::stop-commands::zz\n##[error]m";

/// What the hostile server answers.
#[derive(Clone)]
struct Answers {
    /// `GET /health`: status and body.
    health: (u16, String),
    /// The ids `/v1/models` lists.
    models: Vec<String>,
    /// `GET /version` (vLLM's): the version field.
    version: String,
    /// A completion: a 500 with this body, or (`stream_error`) a 200 stream whose one event
    /// is an error object with this message.
    completion: String,
    stream_error: bool,
}

impl Answers {
    fn hostile() -> Answers {
        Answers {
            health: (200, "ok".into()),
            models: vec!["good-model".into()],
            version: "0.1 ::stop-commands::v ##[error]v".into(),
            completion: HOSTILE.into(),
            stream_error: false,
        }
    }
}

struct Server {
    url: String,
    stop: Arc<AtomicBool>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

impl Server {
    fn start(answers: Answers) -> Server {
        // The server's life is timed: the test's wait for the machine comes first.
        crate::common::share_machine();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
        listener.set_nonblocking(true).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        std::thread::spawn(move || {
            let started = Instant::now();
            let mut served = 0;
            while served < MAX_CONNECTIONS
                && started.elapsed() < SERVER_LIFE
                && !stopping.load(Ordering::Relaxed)
            {
                let Ok((s, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(2));
                    continue;
                };
                served += 1;
                let answers = answers.clone();
                std::thread::spawn(move || serve(s, &answers));
            }
        });
        Server { url, stop }
    }
}

/// One request per connection (`Connection: close`).
fn serve(mut s: TcpStream, answers: &Answers) {
    let _ = s.set_nonblocking(false);
    let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
        if buf.len() > 1 << 20 {
            return;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let length: usize = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().ok())?
        })
        .unwrap_or(0);
    while buf.len() < head_end + length {
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let path = head.split_whitespace().nth(1).unwrap_or("/").to_string();
    let json = |v: serde_json::Value| (200, "application/json", v.to_string());
    let (status, kind, body) = match path.as_str() {
        "/health" => (answers.health.0, "text/plain", answers.health.1.clone()),
        "/v1/models" => {
            let data: Vec<_> = (answers.models.iter())
                .map(|id| serde_json::json!({"id": id, "object": "model"}))
                .collect();
            json(serde_json::json!({"object": "list", "data": data}))
        }
        "/metrics" => (
            200,
            "text/plain",
            "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 0\n".into(),
        ),
        "/version" => json(serde_json::json!({"version": answers.version})),
        p if p.starts_with("/v1/") && answers.stream_error => {
            let event = serde_json::json!({"error": {"message": answers.completion}});
            (200, "text/event-stream", format!("data: {event}\n\n"))
        }
        p if p.starts_with("/v1/") => (500, "text/plain", answers.completion.clone()),
        _ => (404, "text/plain", "not found".into()),
    };
    let reply = format!(
        "HTTP/1.1 {status} X\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = s.write_all(reply.as_bytes());
}

/// The binary with a clean environment: no Actions variables unless `actions` names the
/// summary and output files.
pub(crate) fn command(dir: &Path, actions: bool) -> Command {
    let mut cmd = crate::common::command();
    cmd.current_dir(dir);
    for (k, _) in std::env::vars() {
        if k.starts_with("THROUGHLINE_") || k.starts_with("GITHUB_") || k == "RUNNER_NAME" {
            cmd.env_remove(k);
        }
    }
    if actions {
        cmd.env("GITHUB_ACTIONS", "true")
            .env("GITHUB_STEP_SUMMARY", dir.join("summary.md"))
            .env("GITHUB_OUTPUT", dir.join("outputs.txt"));
    }
    cmd
}

/// Every output line a runner would execute, but throughline's own annotations (which start
/// `::error title=` or `::warning title=` and carry their data escaped on the one line).
fn executed_lines(out: &Output) -> Vec<String> {
    let all = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // A runner splits lines at CR too.
    all.split(['\n', '\r'])
        .filter(|l| {
            let t = l.trim_start();
            let own = t.starts_with("::error title=") || t.starts_with("::warning title=");
            (t.starts_with("::") && !own) || l.contains("##[")
        })
        .map(str::to_string)
        .collect()
}

pub(crate) fn assert_runs_nothing(out: &Output) {
    let bad = executed_lines(out);
    assert!(
        bad.is_empty(),
        "lines a runner would execute: {bad:#?}\n{}",
        text(out)
    );
    let all = text(out);
    assert!(!all.contains('\x1b') && !all.contains('\x07'), "{all}");
}

/// A quick bench against `url`: one level, one trial, a few requests.
fn quick_bench(dir: &Path, url: &str) -> Output {
    let out = dir.join("run");
    command(dir, false)
        .args([
            "bench",
            "-e",
            url,
            "-c",
            "1",
            "--trials",
            "1",
            "--max-tokens",
            "16",
        ])
        .args(["--no-progress", "--no-plots", "--out"])
        .arg(&out)
        .output()
        .unwrap()
}

#[test]
fn a_hostile_health_body_runs_nothing_in_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(Answers {
        health: (503, HOSTILE.into()),
        ..Answers::hostile()
    });
    let out = quick_bench(dir.path(), &server.url);
    assert_eq!(code(&out), 2, "{}", text(&out));
    assert!(
        text(&out).contains("stop-commands"),
        "the body is shown, escaped: {}",
        text(&out)
    );
    assert_runs_nothing(&out);
}

#[test]
fn hostile_error_bodies_model_ids_and_versions_run_nothing_in_the_log() {
    for stream_error in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let server = Server::start(Answers {
            models: vec![MODEL_INJECTION.into(), "##[error]second".into()],
            stream_error,
            ..Answers::hostile()
        });
        let out = quick_bench(dir.path(), &server.url);
        assert_ne!(code(&out), 0, "{}", text(&out));
        assert!(text(&out).contains("stop-commands"), "{}", text(&out));
        assert_runs_nothing(&out);
        // The report quotes the first error of each class: rendered as text.
        if let Ok(report) = std::fs::read_to_string(dir.path().join("run/report.md")) {
            assert_renders_no_markup(&report, "report.md");
        }
    }
}

#[test]
fn init_writes_only_its_own_keys_whatever_the_model_id_says() {
    let keys = |models: Vec<String>| {
        let dir = tempfile::tempdir().unwrap();
        let server = Server::start(Answers {
            models,
            ..Answers::hostile()
        });
        let out = command(dir.path(), false)
            .args(["init", "-e", &server.url, "-o", "p.toml"])
            .output()
            .unwrap();
        assert_eq!(code(&out), 0, "{}", text(&out));
        let written = std::fs::read_to_string(dir.path().join("p.toml")).unwrap();
        let table: toml::Table = written.parse().unwrap();
        let mut found = BTreeSet::new();
        key_paths("", &toml::Value::Table(table.clone()), &mut found);
        (found, table, written, out)
    };
    let (plain, _, _, _) = keys(vec!["plain-model".into()]);
    let (hostile, table, written, out) = keys(vec![GATE_INJECTION.into(), "##[error]x".into()]);
    assert_eq!(hostile, plain, "only the keys init writes:\n{written}");
    assert_runs_nothing(&out);
    // init writes the [gate] section with every setting commented: no setting is set, by
    // init or by a model id that tries to close its string and write one.
    assert!(!hostile.iter().any(|k| k.starts_with("gate.")), "{written}");
    assert_eq!(
        table["gate"].as_table().map(|t| t.len()),
        Some(0),
        "{written}"
    );
    // The model is the id as the server said it, in a TOML string.
    assert_eq!(table["target"]["model"].as_str(), Some(GATE_INJECTION));
    assert!(
        written.lines().all(|l| !l.trim_start().starts_with("::")),
        "{written}"
    );
}

fn key_paths(prefix: &str, value: &toml::Value, out: &mut BTreeSet<String>) {
    if let toml::Value::Table(t) = value {
        for (k, v) in t {
            let path = if prefix.is_empty() {
                k.clone()
            } else {
                format!("{prefix}.{k}")
            };
            key_paths(&path, v, out);
            out.insert(path);
        }
    }
}

/// Fails when `markdown` renders a link, an image or HTML other than throughline's own, or a
/// heading that untrusted text started.
pub(crate) fn assert_renders_no_markup(markdown: &str, what: &str) {
    const OWN_HTML: [&str; 3] = ["<!-- throughline-verdict -->", "<sub>", "</sub>"];
    let mut heading: Option<String> = None;
    for event in Parser::new(markdown) {
        match &event {
            // throughline's own charts, linked by file name, are the only images or links.
            Event::Start(Tag::Link { dest_url, .. })
            | Event::Start(Tag::Image { dest_url, .. }) => {
                let own = dest_url.ends_with(".png")
                    && (dest_url.chars()).all(|c| c.is_ascii_alphanumeric() || "_./-".contains(c));
                assert!(own, "{what} renders a link or image: {event:?}\n{markdown}");
            }
            // throughline's own: its marker, `<sub>`, and a comment naming a check's file
            // (merge), whose text cannot end the comment early.
            Event::Html(h) | Event::InlineHtml(h) => {
                let h = h.trim();
                let comment = (h.strip_prefix("<!--").and_then(|c| c.strip_suffix("-->")))
                    .is_some_and(|c| !c.contains("--") && !c.contains('<') && !c.contains('>'));
                assert!(
                    OWN_HTML.contains(&h) || comment,
                    "{what} renders HTML {h:?}\n{markdown}"
                );
            }
            Event::Start(Tag::Heading { .. }) => heading = Some(String::new()),
            Event::End(TagEnd::Heading(_)) => {
                let h = heading.take().unwrap_or_default();
                // A name may be quoted inside throughline's own heading, as text; no heading
                // of its own may start from it.
                assert!(
                    !h.trim_start().starts_with("Approved"),
                    "{what} renders a heading from untrusted text: {h:?}\n{markdown}"
                );
            }
            Event::Text(t) | Event::Code(t) => {
                if let Some(h) = heading.as_mut() {
                    h.push_str(t);
                }
            }
            _ => {}
        }
    }
}

/// `ci` against a server with a hostile model id that fails every request with a hostile
/// body: the environment line and the refusal's message run nothing in the log, the
/// refusal's summary shows the body inside its code block, the annotation holds it on one
/// line.
#[test]
fn a_refused_ci_check_fences_the_servers_text() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path();
    git(repo, &["init", "-q"]);
    std::fs::create_dir_all(repo.join("baselines")).unwrap();
    let server = Server::start(Answers {
        models: vec![MODEL_INJECTION.into()],
        ..Answers::hostile()
    });
    let profile = write_profile(
        &repo.join("baselines"),
        "x",
        std::slice::from_ref(&server.url),
        "[workload]\ninput_tokens = 8\nmax_tokens = 16\n[sweep]\nconcurrency = [1]\ntrials = 2\n",
    );
    let hash = throughline::profile::Profile::load(&profile)
        .unwrap()
        .canonical_hash()
        .unwrap();
    std::fs::write(
        repo.join("baselines/x.toml"),
        format!(
            "schema_version = 1\nname = \"x\"\nprofile = \"x.profile.toml\"\nprofile_hash = \"{hash}\"\n\
             [environment]\nendpoints = 1\n[gate]\n[[sessions]]\nmeasured_at = \"2026-01-01T00:00:00Z\"\n\
             tool = \"t\"\n[[sessions.levels]]\nconcurrency = 1\ntok_per_s = [1.0, 1.0]\n"
        ),
    )
    .unwrap();
    git(repo, &["add", "."]);
    git(repo, &["commit", "-qm", "x"]);
    let o = command(repo, true)
        .args([
            "ci",
            "--allow-client-bound",
            "--baseline",
            "baselines/x.toml",
            "--baseline-ref",
            "HEAD",
        ])
        .args(["--out", "ci-out", "--wait-healthy", "5s", "--no-progress"])
        .output()
        .unwrap();
    assert_eq!(code(&o), 2, "{}", text(&o));
    assert_runs_nothing(&o);
    let summary = std::fs::read_to_string(repo.join("summary.md")).unwrap();
    assert!(summary.contains("stop-commands"), "{summary}");
    assert_renders_no_markup(&summary, "the refusal's summary");
    let md = std::fs::read_to_string(repo.join("ci-out/verdict.md")).unwrap();
    assert_renders_no_markup(&md, "the refusal's verdict.md");
}

/// The Markdown helpers: whatever the text, a fenced block is one code block holding it,
/// a code span one span, inline text one paragraph of text.
#[test]
fn markdown_helpers_hold_any_text() {
    use throughline::untrusted::{code_span, fenced_block, inline_text};
    let samples = [
        HOSTILE.to_string(),
        "`".repeat(7),
        "a ``` b\n````\n~~~\n# h".into(),
        "<script>alert(1)</script> &amp; ![x](y) [a][b]\n\n[b]: http://evil.invalid".into(),
        "* item\n1. two\n> quote\n---\n| a | b |".into(),
    ];
    for s in &samples {
        let block = fenced_block("text", s);
        let events: Vec<Event> = Parser::new(&block).collect();
        let blocks = (events.iter())
            .filter(|e| matches!(e, Event::Start(Tag::CodeBlock(_))))
            .count();
        assert_eq!(blocks, 1, "{block}\n{events:?}");
        assert!(
            matches!(events.first(), Some(Event::Start(Tag::CodeBlock(_))))
                && matches!(events.last(), Some(Event::End(TagEnd::CodeBlock))),
            "{block}\n{events:?}"
        );
        for inline in [
            format!("x {} y", code_span(s)),
            format!("- {}", inline_text(s)),
        ] {
            assert_renders_no_markup(&inline, "an inline sample");
            let spans = Parser::new(&inline)
                .filter(|e| matches!(e, Event::Code(_)))
                .count();
            assert!(spans <= 1, "{inline}");
            let structure: Vec<Event> = Parser::new(&inline)
                .filter(|e| matches!(e, Event::Start(_)))
                .collect();
            assert!(
                structure.len() <= 2,
                "one paragraph or list item: {inline}\n{structure:?}"
            );
        }
    }
}

/// Item 12: a job summary holds at most 1 MiB and says what it left out, its code block
/// closed.
#[test]
fn a_huge_summary_is_bounded_and_says_so() {
    use throughline::untrusted::{bound_summary, fenced_block, SUMMARY_LIMIT};
    let rows: String = (0..200_000)
        .map(|i| format!("| {i} | 1.0 | 1.0 | pass |\n"))
        .collect();
    let huge = format!(
        "## head\n\n{rows}\n{}",
        fenced_block("text", &"x\n".repeat(1 << 20))
    );
    assert!(huge.len() > 4 * SUMMARY_LIMIT);
    let out = bound_summary(&huge, SUMMARY_LIMIT, "verdict.json");
    assert!(out.len() <= SUMMARY_LIMIT, "{}", out.len());
    assert!(out.contains("left out") && out.contains("verdict.json"));
    // Cut inside the code block: the block is closed before the note, which is text.
    let tail = &huge[huge.len() - 3 * SUMMARY_LIMIT / 2..];
    let cut = bound_summary(tail, SUMMARY_LIMIT, "x");
    let mut inside = false;
    let mut note_outside = false;
    for e in Parser::new(&cut) {
        match e {
            Event::Start(Tag::CodeBlock(_)) => inside = true,
            Event::End(TagEnd::CodeBlock) => inside = false,
            Event::Text(t) if t.contains("left out") => note_outside = !inside,
            _ => {}
        }
    }
    assert!(note_outside, "the note is text after the closed block");
}
