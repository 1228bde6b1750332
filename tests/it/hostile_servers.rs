//! Issue 47: ways something other than the measurement could write the verdict through the
//! servers throughline starts itself (`--server-command`). A run in blocks picks a free
//! port, lets it go and tells the server to bind it: whatever answers there was measured,
//! even a process that is not the server's (seen: exit 0, model "SQUATTER"). And a started
//! server inherited the step's GitHub file commands (`$GITHUB_OUTPUT`, ...) and wrote the
//! step's outputs and summary. Everything on 127.0.0.1, every wait bounded.

use std::path::{Path, PathBuf};
use std::process::Command;

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
