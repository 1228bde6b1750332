//! The workflow's server steps (scripts/gate-server.sh), run directly: arguments split
//! without evaluation, a server that dies while loading fails within seconds with its log
//! tail, a taken port is refused, a real server (serve-sim) is waited for and stopped, and the
//! sticky comment is updated in place or posted once.

use crate::common;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/gate-server.sh")
}

fn gate_server(args: &[&str], env: &[(&str, &str)]) -> Output {
    crate::common::share_machine();
    Command::new("bash")
        .arg(script())
        .args(args)
        .envs(env.iter().copied())
        .env("THROUGHLINE_POLL_SECONDS", "0.2")
        .output()
        .expect("run gate-server.sh")
}

fn split(s: &str) -> Result<Vec<String>, String> {
    let out = gate_server(&["split-args", s], &[]);
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    let text = String::from_utf8(out.stdout).unwrap();
    Ok(text
        .split_terminator('\0')
        .map(str::to_string)
        .collect::<Vec<_>>())
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn arguments_are_split_by_the_documented_rule_and_never_run() {
    let dir = tempfile::tempdir().unwrap();
    let witness = dir.path().join("ran");
    let w = witness.display();
    assert_eq!(
        split("--gpu 'RTX PRO 6000'  --engine-version 0.11.0").unwrap(),
        ["--gpu", "RTX PRO 6000", "--engine-version", "0.11.0"]
    );
    assert_eq!(
        split(r#"--runner "gpu \"a\" \\ b" it\'s a\ b ''"#).unwrap(),
        ["--runner", r#"gpu "a" \ b"#, "it's", "a b", ""]
    );
    // Command substitution, backticks, separators and globs are plain characters.
    let hostile = format!("--x $(touch {w}) `touch {w}`; touch {w} | * ~");
    assert_eq!(
        split(&hostile).unwrap(),
        [
            "--x".to_string(),
            "$(touch".into(),
            format!("{w})"),
            "`touch".into(),
            format!("{w}`;"),
            "touch".into(),
            w.to_string(),
            "|".into(),
            "*".into(),
            "~".into(),
        ]
    );
    assert!(!witness.exists(), "an argument was run");
    assert!(split("--gpu 'RTX").unwrap_err().contains("unterminated '"));
    assert!(split("--gpu \"RTX")
        .unwrap_err()
        .contains("unterminated \""));
    assert!(split("trailing \\").unwrap_err().contains("end in a \\"));
    assert_eq!(split("").unwrap(), Vec::<String>::new());
}

#[test]
fn a_server_that_dies_while_loading_fails_within_seconds_with_its_log() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("server.log");
    let url = format!("http://127.0.0.1:{}", free_port());
    crate::common::share_machine();
    let started = Instant::now();
    let out = gate_server(
        &[
            "start",
            log.to_str().unwrap(),
            &url,
            "echo loading weights; echo 'CUDA out of memory' >&2; exit 3",
        ],
        &[],
    );
    assert!(out.status.success(), "{}", common::text(&out));
    let pid = String::from_utf8(out.stdout).unwrap().trim().to_string();
    assert!(pid.parse::<u32>().is_ok(), "{pid:?}");
    let out = gate_server(&["wait", &pid, log.to_str().unwrap(), "600", &url], &[]);
    let text = common::text(&out);
    assert_eq!(common::code(&out), 2, "{text}");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    assert!(text.contains("Server exited"), "{text}");
    assert!(text.contains("CUDA out of memory"), "the log tail: {text}");
}

#[test]
fn a_taken_port_is_refused_and_nothing_is_started() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("server.log");
    let witness = dir.path().join("started");
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let command = format!("touch {}", witness.display());
    let out = gate_server(
        &[
            "start",
            log.to_str().unwrap(),
            &format!("http://localhost:{port}/v1"),
            &command,
        ],
        &[],
    );
    let text = common::text(&out);
    assert_eq!(common::code(&out), 2, "{text}");
    assert!(text.contains(&format!("port {port}")), "{text}");
    assert!(text.contains("already in use by"), "{text}");
    std::thread::sleep(Duration::from_millis(300));
    assert!(!witness.exists(), "the server command ran");
}

#[test]
fn a_real_server_is_waited_for_and_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("server.log");
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let command = format!("exec '{}' serve-sim --port {port}", common::bin());
    let out = gate_server(&["start", log.to_str().unwrap(), &url, &command], &[]);
    assert!(out.status.success(), "{}", common::text(&out));
    let pid = String::from_utf8(out.stdout).unwrap().trim().to_string();
    let out = gate_server(&["wait", &pid, log.to_str().unwrap(), "60", &url], &[]);
    let healthy = out.status.success();
    let stop = gate_server(&["stop", &pid], &[]);
    assert!(healthy, "{}", common::text(&out));
    assert!(stop.status.success(), "{}", common::text(&stop));
    // Gone, or a zombie waiting for a parent that is not this test to reap it.
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let state = stat.rsplit_once(") ").map(|(_, rest)| &rest[..1]);
    let gone = matches!(state, None | Some("Z") | Some("X"));
    assert!(gone, "the server {pid} still runs");
}

/// A fake `gh` on PATH: the listing applies its `--jq` filter (with the real jq) to the
/// comments in `$FAKE_GH_COMMENTS` (JSON); every call is logged.
fn fake_gh(dir: &Path) -> PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let gh = bin.join("gh");
    std::fs::write(
        &gh,
        "#!/usr/bin/env bash\n\
         printf '%s\\n' \"$*\" >> \"$FAKE_GH_LOG\"\n\
         if [[ \" $* \" == *\" --paginate \"* ]]; then\n\
           while [[ $# -gt 0 && $1 != --jq ]]; do shift; done\n\
           printf '%s' \"$FAKE_GH_COMMENTS\" | jq -r \"$2\"\n\
         fi\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&gh, std::fs::Permissions::from_mode(0o755)).unwrap();
    bin
}

/// The sticky comment: the bot's own earlier comment is updated, a new one posted when it has
/// none; a comment someone else wrote starting with the marker is never edited (issue 47 item
/// 11), and a body that does not name the gate's run is never posted (item 2).
#[test]
fn the_sticky_comment_is_updated_in_place_or_posted_once() {
    let dir = tempfile::tempdir().unwrap();
    let bin = fake_gh(dir.path());
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let body = dir.path().join("pr-comment.md");
    let run_id = "0123456789abcdef";
    std::fs::write(
        &body,
        format!("<!-- throughline-verdict -->\n<!-- throughline-run: {run_id} -->\n## pass\n"),
    )
    .unwrap();
    let log = dir.path().join("gh.log");
    let comment = |user: &str, id: u64| {
        serde_json::json!({"id": id, "user": {"login": user},
            "body": "<!-- throughline-verdict -->\n## FAIL"})
    };
    let run = |comments: serde_json::Value, run: &str| {
        let _ = std::fs::remove_file(&log);
        let out = gate_server(
            &["comment", body.to_str().unwrap()],
            &[
                ("PATH", &path),
                ("FAKE_GH_LOG", log.to_str().unwrap()),
                ("FAKE_GH_COMMENTS", &comments.to_string()),
                ("GITHUB_REPOSITORY", "org/repo"),
                ("PR_NUMBER", "42"),
                ("THROUGHLINE_RUN_ID", run),
            ],
        );
        (out, std::fs::read_to_string(&log).unwrap_or_default())
    };
    let bot = "github-actions[bot]";
    let (out, calls) = run(
        serde_json::json!([comment("someone", 7), comment(bot, 9001)]),
        run_id,
    );
    assert!(out.status.success(), "{}", common::text(&out));
    assert!(
        calls.contains("--paginate repos/org/repo/issues/42/comments"),
        "{calls}"
    );
    assert!(
        calls.contains("--method PATCH repos/org/repo/issues/comments/9001 -F body=@"),
        "{calls}"
    );
    assert!(!calls.contains("POST"), "{calls}");
    // Only another user's comment with the marker: a new one, theirs left alone.
    let (out, calls) = run(serde_json::json!([comment("someone", 7)]), run_id);
    assert!(out.status.success(), "{}", common::text(&out));
    assert!(
        calls.contains("--method POST repos/org/repo/issues/42/comments -F body=@"),
        "{calls}"
    );
    assert!(!calls.contains("PATCH"), "{calls}");
    // A body of another run (a committed pr-comment.md), or no run id: nothing posted.
    for other in ["ffffffffffffffff", ""] {
        let (out, calls) = run(serde_json::json!([]), other);
        assert_eq!(common::code(&out), 2, "{}", common::text(&out));
        assert!(calls.is_empty(), "{calls}");
    }
    // A body without the marker would never be found again: refused.
    std::fs::write(&body, "## pass\n").unwrap();
    let (out, _) = run(serde_json::json!([]), run_id);
    assert_eq!(common::code(&out), 2, "{}", common::text(&out));
}

/// Issue 50 item 4: the comment is posted with the GitHub CLI; where it is not installed the
/// step says so (and where it is: GitHub's runners), rather than "gh: command not found".
#[test]
fn a_comment_without_the_github_cli_says_what_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    // A PATH with what the script uses, and no gh.
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    for tool in ["bash", "head", "sed", "cat"] {
        let found = ["/usr/bin", "/bin"]
            .iter()
            .map(|d| Path::new(d).join(tool))
            .find(|p| p.exists())
            .unwrap();
        std::os::unix::fs::symlink(found, bin.join(tool)).unwrap();
    }
    let body = dir.path().join("pr-comment.md");
    let run_id = "0123456789abcdef";
    std::fs::write(
        &body,
        format!("<!-- throughline-verdict -->\n<!-- throughline-run: {run_id} -->\n## pass\n"),
    )
    .unwrap();
    let out = gate_server(
        &["comment", body.to_str().unwrap()],
        &[
            ("PATH", bin.to_str().unwrap()),
            ("GITHUB_REPOSITORY", "org/repo"),
            ("PR_NUMBER", "42"),
            ("THROUGHLINE_RUN_ID", run_id),
        ],
    );
    assert_eq!(common::code(&out), 2, "{}", common::text(&out));
    let said = common::text(&out);
    assert!(
        said.contains("GitHub CLI") && said.contains("ubuntu-latest"),
        "{said}"
    );
}
