//! Golden test of the examples every `--help` ends with: each example is read from the help
//! text itself and run, as written, by a shell in one scratch folder against two simulators
//! (the examples' http://127.0.0.1:8000 and :8001 become the simulators' URLs). Examples
//! that cannot run here in seconds are listed in SKIPPED with the reason; an entry there that
//! no help shows any more fails the test, so the list cannot go stale.

use crate::common;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{bin, Sim};

/// The subcommands, in the order their examples run (later ones read earlier ones' files).
const ORDER: &[&str] = &[
    "init",
    "bench",
    "baseline",
    "gate",
    "trend",
    "plot",
    "plan",
    "ci",
    "bisect",
    "cleanup",
    "merge",
    "completions",
    "serve-sim",
    "demo",
    "selfbench",
];

/// Nested subcommands whose own `--help` ends with examples (run after their parent's).
const NESTED: &[&[&str]] = &[&["baseline", "bless"]];

/// Examples not run here, each with the reason and where it is run instead.
const SKIPPED: &[(&str, &str)] = &[
    (
        "throughline demo",
        "about 80 s (two simulators, 4 levels x 5 trials x 2 arms, then 4 blocks); \
         tests/it/demo_cli.rs runs it",
    ),
    (
        "throughline demo -o /tmp/throughline-demo",
        "the demo, into a folder outside the scratch folder; tests/it/demo_cli.rs runs it",
    ),
    (
        "throughline ci -b baselines/main.toml --baseline-ref origin/main --server-command 'throughline serve-sim --port {port}' --base-server-command 'throughline serve-sim --port {port}' --slots '0;1' -o ci-blocks",
        "4 to 8 blocks of the profile, each starting two simulators; tests/it/crossover_cli.rs runs \
         runs in blocks",
    ),
    (
        "throughline baseline calibrate -r aa/results.json -b baselines/main.toml",
        "needs an A/A run in blocks; tests/it/crossover_cli.rs runs calibrate on one",
    ),
    (
        "throughline bisect --good v0.4.0 --bad main -p bench.toml --build-command 'python -m venv .venv && .venv/bin/pip install -e .' --server-command '.venv/bin/vllm serve MODEL --port {port}' --slots '0;1'",
        "needs a git repository whose commits build a server; tests/it/alone/bisect_cli.rs bisects one",
    ),
    (
        "throughline bisect --good v0.4.0 -p bench.toml --server-command './serve.sh {port}' --max-duration 6h -o ../bisect-out",
        "as above; tests/it/alone/bisect_cli.rs runs a bisect and continues one from its log",
    ),
    (
        "throughline selfbench",
        "measures the client for minutes; tests/it/selfbench_cli.rs runs short cases",
    ),
    (
        "throughline selfbench --client-threads 2 --json selfbench.json",
        "minutes, as above; tests/it/selfbench_cli.rs runs short cases",
    ),
];

/// Exit codes an example may end with: a verdict's (0 pass, 1 regression, 3 not comparable
/// or too few trials) for the commands that decide, else 0.
fn allowed_exits(example: &str) -> &'static [i32] {
    let sub = example.split_whitespace().nth(1).unwrap_or("");
    match sub {
        "gate" | "ci" | "merge" => &[0, 1, 3],
        "trend" => &[0, 1],
        _ => &[0],
    }
}

/// The example lines of one help text (after "Examples:"), comments left out.
fn examples_in(help: &str) -> Vec<String> {
    let Some(section) = help.split("Examples:").nth(1) else {
        return Vec::new();
    };
    // An example starts a line; a line ending in `\\` continues on the next, as in a shell.
    let mut examples: Vec<String> = Vec::new();
    let mut continued = false;
    for line in section.lines().map(str::trim) {
        if continued {
            let last = examples.last_mut().unwrap();
            last.push(' ');
            last.push_str(line.trim_end_matches('\\').trim_end());
        } else if line.starts_with("throughline ") || line.contains("<(throughline ") {
            examples.push(line.trim_end_matches('\\').trim_end().to_string());
        } else {
            continue;
        }
        continued = line.ends_with('\\');
    }
    examples
}

fn help_of(sub: &[&str]) -> String {
    let mut cmd = crate::common::command();
    cmd.args(sub).arg("--help");
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{sub:?} --help failed");
    String::from_utf8(out.stdout).unwrap()
}

/// Runs `line` with bash in `dir`, the binary first on PATH and HOME in `dir`.
fn shell(dir: &Path, line: &str) -> std::process::Output {
    let bin_dir = Path::new(bin()).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    crate::common::share_machine();
    let child = Command::new("bash")
        .args(["-c", line])
        .current_dir(dir)
        .env("PATH", path)
        .env("HOME", dir)
        .env_remove("OPENAI_API_KEY")
        .env_remove("GITHUB_BASE_REF")
        .env_remove("GITHUB_STEP_SUMMARY")
        .env_remove("GITHUB_OUTPUT")
        .env_remove("GITHUB_ACTIONS")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    common::wait_with_deadline(child, Duration::from_secs(300), line)
}

/// A server example (serve-sim runs until stopped): start it on free ports, see it serve,
/// stop it.
fn start_and_stop_server(dir: &Path, line: &str) {
    let line = line
        .replace("--port 8000", "--port 0")
        .replace("--port 8001", "--port 0");
    let args: Vec<&str> = line.split_whitespace().skip(1).collect();
    let mut child = crate::common::command()
        .args(&args)
        .current_dir(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    crate::common::share_machine();
    let started = Instant::now();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    // It says its session speed first, then where each replica serves.
    let serving = lines
        .by_ref()
        .take(4)
        .map_while(Result::ok)
        .find(|l| l.contains(" on http://"))
        .unwrap_or_default();
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        serving.contains(" on http://127.0.0.1:"),
        "`{line}` did not say where it serves: {serving:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(30));
}

#[test]
fn every_help_example_runs_against_the_simulator() {
    let dir = tempfile::tempdir().unwrap();
    let a = Sim::start(1, &["--token-delay-ms", "0.1"]);
    let b = Sim::start(1, &["--token-delay-ms", "0.1"]);

    // Every subcommand has examples, and the list above names every subcommand.
    let top = help_of(&[]);
    let listed: BTreeSet<String> = top
        .split("Commands:")
        .nth(1)
        .unwrap()
        .split("\n\n")
        .next()
        .unwrap()
        .lines()
        // A name starts its line; a wrapped description is indented further.
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_string)
        .collect();
    let ordered: BTreeSet<String> = ORDER.iter().map(|s| s.to_string()).collect();
    assert_eq!(listed, ordered, "ORDER must name every subcommand");

    let mut all: Vec<String> = Vec::new();
    for sub in ORDER {
        let found = examples_in(&help_of(&[sub]));
        assert!(
            (2..=3).contains(&found.len()),
            "`{sub} --help` shows {} examples: {found:?}",
            found.len()
        );
        all.extend(found);
        // Subcommands of a subcommand with examples of their own run right after it.
        for nested in NESTED.iter().filter(|n| n[0] == *sub) {
            let found = examples_in(&help_of(nested));
            assert!(
                (2..=3).contains(&found.len()),
                "`{} --help` shows {} examples: {found:?}",
                nested.join(" "),
                found.len()
            );
            all.extend(found);
        }
    }
    all.extend(examples_in(&top));
    for (skipped, _) in SKIPPED {
        assert!(
            all.iter().any(|e| e == skipped),
            "SKIPPED names `{skipped}`, which no help shows"
        );
    }

    let mut seen = BTreeSet::new();
    let mut ran = 0;
    for example in &all {
        if !seen.insert(example.clone()) {
            continue;
        }
        if let Some((_, why)) = SKIPPED.iter().find(|(e, _)| e == example) {
            eprintln!("skipped: {example} ({why})");
            continue;
        }
        prepare_for(dir.path(), example);
        if example.starts_with("throughline serve-sim") {
            start_and_stop_server(dir.path(), example);
            ran += 1;
            continue;
        }
        let line = example
            .replace("http://127.0.0.1:8000", &a.urls[0])
            .replace("http://127.0.0.1:8001", &b.urls[0]);
        crate::common::share_machine();
        let started = Instant::now();
        let out = shell(dir.path(), &line);
        let code = out.status.code().unwrap_or(-1);
        eprintln!(
            "ran in {:.1} s, exit {code}: {example}",
            started.elapsed().as_secs_f64()
        );
        assert!(
            allowed_exits(example).contains(&code),
            "`{example}` exited {code}\n{}",
            common::text(&out)
        );
        ran += 1;
    }
    assert!(ran >= 20, "only {ran} examples ran");
    // What the examples say they write is there.
    for file in [
        "throughline.toml",
        "quick.toml",
        "throughline-results/results.json",
        "ab/results.json",
        "ab/verdict.md",
        "baselines/main.toml",
        "junit.xml",
        "charts/throughput.png",
        "plan/capacity.png",
        "ci-out/verdict.json",
        "ci-ab/verdict.json",
        "merged/report.md",
        ".zfunc/_throughline",
        ".config/fish/completions/throughline.fish",
    ] {
        assert!(dir.path().join(file).exists(), "{file} was not written");
    }
}

/// What the scratch folder needs before an example that a user would have already: a git
/// repository with the baseline on main (for --baseline-ref origin/main), the folders a
/// completion script goes into, and a baseline-worthy run.
fn prepare_for(dir: &Path, example: &str) {
    if example.starts_with("throughline baseline bless") && !dir.join("baselines").exists() {
        // `bless` refuses runs flagged client-bound, which the tiny runs here may be on a busy
        // machine (what the flags do is tested in tests/it/headroom.rs).
        let results = dir.join("throughline-results/results.json");
        let clean = common::without_client_flags(&results);
        std::fs::rename(clean, results).unwrap();
    }
    if example.starts_with("throughline gate -r ") {
        // `gate` refuses client-bound trials as `bless` does (tests/it/headroom.rs), and the
        // example is about what it writes: gate the same figures without the busy machine's
        // flags.
        let run = example.split_whitespace().nth(3).unwrap();
        let results = dir.join(run);
        let clean = common::without_client_flags(&results);
        std::fs::rename(clean, results).unwrap();
    }
    if example.contains("--baseline-ref origin/main") && !dir.join(".git").exists() {
        common::git(dir, &["init", "-q"]);
        common::git(dir, &["add", "throughline.toml", "baselines"]);
        common::git(dir, &["commit", "-qm", "the profile and its baseline"]);
        common::git(dir, &["update-ref", "refs/remotes/origin/main", "HEAD"]);
    }
    if example.contains("completions") {
        std::fs::create_dir_all(dir.join(".zfunc")).unwrap();
        std::fs::create_dir_all(dir.join(".config/fish/completions")).unwrap();
    }
}
