//! A newcomer's first hour (issue 20): a first number from flags, `init`, the README's
//! profile as written, an unset key variable, the planned size up front, earlier runs kept,
//! and the closing lines of a run and of a verdict. The real binary against the simulator.

use crate::common;

use std::process::Command;

use crate::common::{bin, code, read_json, text, Sim};

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `throughline ARGS` in `dir`, without the variables a developer's shell may carry.
fn throughline(dir: &std::path::Path, args: &[&str]) -> Command {
    let mut cmd = crate::common::command();
    cmd.args(args)
        .current_dir(dir)
        .env_remove("OPENAI_API_KEY")
        .env_remove("NO_COLOR");
    cmd
}

/// The sweep's output tok/s means per level of a results file, as (level, mean).
fn level_means(results: &serde_json::Value) -> Vec<(u64, f64)> {
    results["levels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            let tps: Vec<f64> = (l["trials"].as_array().unwrap().iter())
                .filter(|t| t["succeeded"].as_u64().unwrap() > 0)
                .map(|t| t["output_tok_per_s"].as_f64().unwrap())
                .collect();
            (
                l["concurrency"].as_u64().unwrap(),
                tps.iter().sum::<f64>() / tps.len() as f64,
            )
        })
        .collect()
}

/// The thousands-grouped figure the closing line prints.
fn grouped(v: f64) -> String {
    let digits = format!("{v:.0}");
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Item 1 and 8: a first number from flags alone, the model asked of the server, the
/// profile saved and runnable again (same hash), and the closing line from measured figures.
#[test]
fn bench_from_flags_runs_a_default_profile_saves_it_and_closes_with_what_it_found() {
    let _turn = common::timing_lock();
    let sim = Sim::start(1, &["--token-delay-ms", "1"]);
    let dir = tempfile::tempdir().unwrap();
    let out = throughline(
        dir.path(),
        &[
            "bench",
            "-e",
            &sim.urls[0],
            "-c",
            "1,2",
            "--max-tokens",
            "16",
            "--trials",
            "2",
            "--save-profile",
            "saved.toml",
            "-o",
            "first",
            "--no-plots",
        ],
    )
    .output()
    .unwrap();
    assert_eq!(code(&out), 0, "{}", text(&out));
    let said = stdout(&out);
    assert!(
        said.contains("model: sim-model (the first of 1 listed at"),
        "{said}"
    );
    // The planned size before the table: 2 levels x 2 trials of 8 requests, 4 warmup each.
    let planned = said.find("planned: 2 level(s) x 2 trial(s) = 32 requests (+8 warmup)");
    let table = said.find("agg tok/s");
    assert!(planned.is_some() && planned < table, "{said}");
    assert!(said.contains("an estimate"), "{said}");

    let results = read_json(&dir.path().join("first/results.json"));
    assert_eq!(results["profile"]["target"]["model"], "sim-model");
    assert_eq!(
        results["profile"]["sweep"]["concurrency"],
        serde_json::json!([1, 2])
    );
    assert_eq!(results["profile"]["workload"]["max_tokens"], 16);
    assert_eq!(results["profile"]["sweep"]["trials"], 2);

    // The closing line is the last line, from the results' own figures.
    let means = level_means(&results);
    let (peak_c, peak) = means
        .iter()
        .copied()
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .unwrap();
    let last = said.lines().last().unwrap();
    assert!(
        last.starts_with(&format!("peak {} tok/s at C = {peak_c}", grouped(peak))),
        "{last} vs {means:?}"
    );
    assert!(last.ends_with("; no errors"), "{last}");
    assert!(
        said.contains("wrote first: requests.jsonl, results.json, summary.csv"),
        "{said}"
    );

    // The saved profile is commented TOML and runs as a profile file, measuring the same.
    let saved = std::fs::read_to_string(dir.path().join("saved.toml")).unwrap();
    assert!(
        saved.starts_with("# A throughline benchmark profile"),
        "{saved}"
    );
    assert!(saved.contains("model = \"sim-model\""), "{saved}");
    let again = throughline(
        dir.path(),
        &["bench", "-p", "saved.toml", "-o", "second", "--no-plots"],
    )
    .output()
    .unwrap();
    assert_eq!(code(&again), 0, "{}", text(&again));
    let second = read_json(&dir.path().join("second/results.json"));
    assert_eq!(second["profile_hash"], results["profile_hash"]);
}

/// Neither a profile nor an endpoint: clap names both.
#[test]
fn bench_without_a_profile_or_an_endpoint_says_what_it_needs() {
    let dir = tempfile::tempdir().unwrap();
    let out = throughline(dir.path(), &["bench"]).output().unwrap();
    assert_eq!(code(&out), 2, "{}", text(&out));
    let err = stderr(&out);
    assert!(
        err.contains("--profile") && err.contains("--endpoint"),
        "{err}"
    );
}

/// Item 1: `init` writes a commented profile; with an endpoint it says what it found and
/// writes it in; it never replaces a file without --force.
#[test]
fn init_writes_a_commented_profile_probes_the_server_and_keeps_an_existing_file() {
    let sim = Sim::start(1, &[]);
    let dir = tempfile::tempdir().unwrap();
    let plain = throughline(dir.path(), &["init"]).output().unwrap();
    assert_eq!(code(&plain), 0, "{}", text(&plain));
    let written = std::fs::read_to_string(dir.path().join("throughline.toml")).unwrap();
    assert!(
        written.contains("endpoints = [\"http://127.0.0.1:8000\"]"),
        "{written}"
    );
    assert!(written.contains("model = \"auto\""), "{written}");
    assert!(
        written.lines().filter(|l| l.contains('#')).count() > 10,
        "{written}"
    );

    // An existing file stays as it is.
    let refused = throughline(dir.path(), &["init", "-e", &sim.urls[0]])
        .output()
        .unwrap();
    assert_eq!(code(&refused), 2, "{}", text(&refused));
    assert!(stderr(&refused).contains("--force"), "{}", text(&refused));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("throughline.toml")).unwrap(),
        written
    );

    let probed = throughline(dir.path(), &["init", "-e", &sim.urls[0], "--force"])
        .output()
        .unwrap();
    assert_eq!(code(&probed), 0, "{}", text(&probed));
    let said = stdout(&probed);
    assert!(
        said.contains("model: sim-model (from /v1/models)"),
        "{said}"
    );
    assert!(
        said.contains("engine: throughline-sim (recognised from /metrics"),
        "{said}"
    );
    assert!(
        said.contains("max context: not reported by the server"),
        "{said}"
    );
    let written = std::fs::read_to_string(dir.path().join("throughline.toml")).unwrap();
    assert!(
        written.contains(&format!("endpoints = [\"{}\"]", sim.urls[0])),
        "{written}"
    );
    assert!(written.contains("model = \"sim-model\""), "{written}");
    assert!(written.contains("#   engine: throughline-sim"), "{written}");
}

/// The example profile of docs/profile.md ("## The profile", moved there from the README), as
/// written.
fn readme_profile() -> String {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/profile.md")).unwrap();
    let section = readme
        .split("## The profile")
        .nth(1)
        .expect("docs/profile.md has `## The profile`");
    let block = section.split("```toml\n").nth(1).unwrap();
    block.split("```").next().unwrap().to_string()
}

/// Item 2: the README's profile runs as written against the simulator, with OPENAI_API_KEY
/// unset (a server without --api-key needs no key): said once on stderr, no Authorization
/// sent. `api_key_required = true` makes the unset variable today's error. The sweep is
/// shortened with flags (the profile as written runs minutes; its full run is measured in
/// the report of issue 20).
#[test]
fn the_readme_profile_runs_without_its_key_variable_unless_the_key_is_required() {
    let _turn = common::timing_lock();
    let sim = Sim::start(1, &["--preset", "instant"]);
    let dir = tempfile::tempdir().unwrap();
    let profile = readme_profile();
    assert!(
        profile.contains("api_key_env = \"OPENAI_API_KEY\""),
        "{profile}"
    );
    std::fs::write(dir.path().join("readme.toml"), &profile).unwrap();
    let short = [
        "-e",
        &sim.urls[0],
        "-c",
        "1,4",
        "--trials",
        "1",
        "--max-tokens",
        "16",
        "--no-plots",
    ];
    let mut args = vec!["bench", "-p", "readme.toml", "-o", "out"];
    args.extend_from_slice(&short);
    let out = throughline(dir.path(), &args).output().unwrap();
    assert_eq!(code(&out), 0, "{}", text(&out));
    let err = stderr(&out);
    assert_eq!(
        err.matches("OPENAI_API_KEY (target.api_key_env) is not set: sending no API key")
            .count(),
        1,
        "{err}"
    );
    // The planned size and estimate come before anything is measured.
    assert!(
        stdout(&out).contains("planned: 2 level(s) x 1 trial(s) = 24 requests (+8 warmup)"),
        "{}",
        text(&out)
    );

    let required = profile.replace(
        "api_key_env = \"OPENAI_API_KEY\"",
        "api_key_env = \"OPENAI_API_KEY\"\napi_key_required = true",
    );
    assert_ne!(required, profile);
    std::fs::write(dir.path().join("required.toml"), &required).unwrap();
    let mut args = vec!["bench", "-p", "required.toml", "-o", "out2"];
    args.extend_from_slice(&short);
    let out = throughline(dir.path(), &args).output().unwrap();
    assert_eq!(code(&out), 2, "{}", text(&out));
    assert!(
        stderr(&out).contains(
            "target.api_key_env names the environment variable OPENAI_API_KEY, but it is not set"
        ),
        "{}",
        text(&out)
    );
    assert!(!dir.path().join("out2/requests.jsonl").exists());

    // Required without a variable named is a profile error that names the field.
    std::fs::write(
        dir.path().join("bad.toml"),
        profile.replace(
            "api_key_env = \"OPENAI_API_KEY\"",
            "api_key_required = true",
        ),
    )
    .unwrap();
    let out = throughline(dir.path(), &["bench", "-p", "bad.toml"])
        .output()
        .unwrap();
    assert_eq!(code(&out), 2, "{}", text(&out));
    assert!(
        stderr(&out).contains("target.api_key_required"),
        "{}",
        text(&out)
    );
}

/// Item 6: a second run into the same folder keeps the first in earlier/<its started_at>/,
/// says so, and leaves no file of the first run beside the second's journal; a journal
/// without results (a killed run) is kept too.
#[test]
fn a_new_run_keeps_the_earlier_run_and_says_where_everything_is() {
    let _turn = common::timing_lock();
    let sim = Sim::start(1, &["--preset", "instant"]);
    let dir = tempfile::tempdir().unwrap();
    let bench = |extra: &[&str]| {
        let mut args = vec![
            "bench",
            "-e",
            &sim.urls[0],
            "-c",
            "1",
            "--trials",
            "1",
            "--max-tokens",
            "8",
            "-o",
            "out",
        ];
        args.extend_from_slice(extra);
        let out = throughline(dir.path(), &args).output().unwrap();
        assert_eq!(code(&out), 0, "{}", text(&out));
        out
    };
    bench(&[]);
    let out_dir = dir.path().join("out");
    let first = read_json(&out_dir.join("results.json"));
    let first_journal = std::fs::read_to_string(out_dir.join("requests.jsonl")).unwrap();
    assert!(out_dir.join("throughput.png").exists());

    let second = bench(&["--no-plots"]);
    let stamp = first["started_at"].as_str().unwrap().replace(':', "-");
    let kept = out_dir.join("earlier").join(&stamp);
    let said = stdout(&second);
    assert!(
        said.contains(&format!(
            "are kept: moved to {}",
            std::path::Path::new("out/earlier").join(&stamp).display()
        )),
        "{said}"
    );
    assert_eq!(read_json(&kept.join("results.json")), first);
    assert_eq!(
        std::fs::read_to_string(kept.join("requests.jsonl")).unwrap(),
        first_journal
    );
    assert!(kept.join("throughput.png").exists() && kept.join("summary.csv").exists());
    // The folder holds the new run only: its results, no chart of the run before.
    let now = read_json(&out_dir.join("results.json"));
    assert_ne!(now["started_at"], first["started_at"]);
    assert!(!out_dir.join("throughput.png").exists());
    assert!(
        said.contains(
            "wrote out: requests.jsonl, results.json, summary.csv; earlier runs are in out/earlier"
        ),
        "{said}"
    );

    // A journal without results (a run killed part way) is measured data too.
    std::fs::remove_file(out_dir.join("results.json")).unwrap();
    std::fs::remove_file(out_dir.join("summary.csv")).unwrap();
    let killed_journal = std::fs::read_to_string(out_dir.join("requests.jsonl")).unwrap();
    bench(&["--no-plots"]);
    let folders: Vec<_> = std::fs::read_dir(out_dir.join("earlier"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p != &kept)
        .collect();
    assert_eq!(folders.len(), 1, "{folders:?}");
    assert_eq!(
        std::fs::read_to_string(folders[0].join("requests.jsonl")).unwrap(),
        killed_journal
    );
    assert!(!folders[0].join("results.json").exists());
}

/// Item 8: the verdict ends with the worst level's ratio in words, from the verdict's own
/// figures; verdict words are coloured on a terminal only, and never with NO_COLOR.
#[test]
fn the_verdict_ends_with_the_worst_ratio_and_colours_only_a_terminal() {
    let _turn = common::timing_lock();
    let base = Sim::start(1, &["--preset", "fast"]);
    let head = Sim::start(1, &["--preset", "fast", "--slowdown", "1.5"]);
    let dir = tempfile::tempdir().unwrap();
    let out = throughline(
        dir.path(),
        &[
            "bench",
            "-e",
            &head.urls[0],
            "--base-endpoint",
            &base.urls[0],
            "-c",
            "1,2",
            "--trials",
            "3",
            "--max-tokens",
            "32",
            "-o",
            "ab",
            "--no-plots",
        ],
    )
    .output()
    .unwrap();
    assert_eq!(code(&out), 0, "{}", text(&out));
    let last = stdout(&out).lines().last().unwrap().to_string();
    assert!(
        last.starts_with("head: peak ") && last.contains("; base: peak "),
        "{last}"
    );

    let gate = |env: &[(&str, &str)], tty: bool| {
        let args =
            "gate -r ab/results.json --min-trials 3 --json verdict.json --allow-client-bound";
        let mut cmd = if tty {
            // `script` gives the command a terminal for its standard output.
            crate::common::share_machine();
            let mut c = Command::new("script");
            c.args(["-qec", &format!("{} {args}", bin()), "/dev/null"]);
            c
        } else {
            let mut c = crate::common::command();
            c.args(args.split(' '));
            c
        };
        cmd.current_dir(dir.path())
            .env_remove("NO_COLOR")
            .envs(env.iter().copied());
        cmd.output().unwrap()
    };
    let plain = gate(&[], false);
    assert_eq!(code(&plain), 1, "{}", text(&plain));
    let said = stdout(&plain);
    assert!(!said.contains('\u{1b}'), "{said}");
    let verdict = read_json(&dir.path().join("verdict.json"));
    let (c, ratio) = verdict["levels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["concurrency"].as_u64().unwrap(),
                l["ratio"].as_f64().unwrap(),
            )
        })
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .unwrap();
    let want = format!(
        "head is {ratio:.2}x the base at C = {c} ({:.1}% slower), its worst level",
        (1.0 - ratio) * 100.0
    );
    assert_eq!(said.lines().last().unwrap(), want, "{said}");
    assert!(said.contains("\nREGRESSION: "), "{said}");

    if Command::new("script").arg("--version").output().is_ok() {
        let coloured = gate(&[("TERM", "xterm")], true);
        let said = stdout(&coloured);
        assert!(
            said.contains("\u{1b}[1m\u{1b}[31mREGRESSION\u{1b}[0m:"),
            "{said:?}"
        );
        let no_color = gate(&[("TERM", "xterm"), ("NO_COLOR", "1")], true);
        let said = stdout(&no_color);
        assert!(
            said.contains("REGRESSION: ") && !said.contains('\u{1b}'),
            "{said:?}"
        );
    }
}
