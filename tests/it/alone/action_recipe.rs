//! The composite action (action.yml, its logic in scripts/action.sh) as a job would run it,
//! following docs/github-actions.md: the binary installed from "release assets" (a file://
//! folder holding this build, packed as .github/workflows/release.yml packs it) with its
//! checksum checked, then `throughline ci` against two simulators the job started (relative
//! mode), and the 1-GPU recipe in which throughline starts both servers in blocks. The docs'
//! `uses:` examples are checked against the inputs action.yml declares.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::common::*;

/// QUICK_BODY's run (one level, 5 trials of 8 requests), with the same generous minimum
/// effect as tests/it/alone/ci_cli.rs so that a busy test machine does not fail the same-speed run.
fn profile_body() -> String {
    format!("{QUICK_BODY}[gate]\nmin_effect = 0.08\nmin_trials = 5\n")
}

/// A fixed cadence: 3 ms per token, 30 ms a request. The slow head takes 12 ms, a quarter of
/// the speed: at half the speed a busy machine's stalls (a 400 ms scheduler lag in a 0.4 s
/// trial, seen under the full suite beside five builds) left the 5 trials "cannot tell".
fn sim(token_delay_ms: &str) -> Sim {
    Sim::start(
        1,
        &["--preset", "fixed", "--token-delay-ms", token_delay_ms],
    )
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/action.sh")
}

/// scripts/action.sh STEP in `repo`, with only the Actions variables a runner sets plus `env`.
fn action(repo: &Path, step: &str, env: &[(&str, &str)]) -> (Output, String) {
    let outputs = repo.join(format!("../github-output-{step}"));
    let _ = std::fs::remove_file(&outputs);
    crate::common::share_machine();
    let mut cmd = Command::new("bash");
    cmd.arg(script()).arg(step).current_dir(repo);
    for (k, _) in std::env::vars() {
        if k.starts_with("THROUGHLINE_") || k.starts_with("GITHUB_") || k.starts_with("INPUT_") {
            cmd.env_remove(k);
        }
    }
    cmd.env("GITHUB_ACTIONS", "true")
        .env("GITHUB_OUTPUT", &outputs)
        .env("GITHUB_PATH", repo.join("../github-path"))
        .env("GITHUB_STEP_SUMMARY", repo.join("../summary.md"))
        .env("RUNNER_TEMP", repo.join(".."))
        // Never the machine's own tool cache (a CI runner has one): a test's own folder.
        .env("RUNNER_TOOL_CACHE", repo.join("../tool-cache"))
        // Nor the machine's GPU locks: another suite or a real run may hold GPU 0.
        .env("THROUGHLINE_LOCK_DIR", repo.join("../gpu-locks"))
        .envs(env.iter().copied());
    let out = cmd.output().expect("run scripts/action.sh");
    (out, std::fs::read_to_string(&outputs).unwrap_or_default())
}

/// A release folder as release.yml lays it out: VERSION/ASSET and VERSION/ASSET.sha256.
fn release_assets(dir: &Path, version: &str, tamper: bool) -> String {
    let arch = std::env::consts::ARCH;
    let name = format!("throughline-{arch}-unknown-linux-musl");
    let stage = dir.join("stage").join(&name);
    std::fs::create_dir_all(&stage).unwrap();
    std::fs::copy(bin(), stage.join("throughline")).unwrap();
    let rel = dir.join("release").join(version);
    std::fs::create_dir_all(&rel).unwrap();
    let asset = format!("{name}.tar.gz");
    crate::common::share_machine();
    let pack = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "tar -cf - -C '{}' '{name}' | gzip -1 > '{}' && cd '{}' && sha256sum '{asset}' > '{asset}.sha256'",
            dir.join("stage").display(),
            rel.join(&asset).display(),
            rel.display()
        ))
        .output()
        .unwrap();
    assert!(pack.status.success(), "{}", text(&pack));
    if tamper {
        let sum = rel.join(format!("{asset}.sha256"));
        let good = std::fs::read_to_string(&sum).unwrap();
        let flipped = if good.starts_with('0') { "1" } else { "0" };
        std::fs::write(&sum, format!("{flipped}{}", &good[1..])).unwrap();
    }
    format!("file://{}", dir.join("release").display())
}

/// A repository with a profile and a baseline blessed from `base`, committed on main.
fn repository(dir: &Path, base: &Sim) -> PathBuf {
    let repo = dir.join("repo");
    let baselines = repo.join("baselines");
    std::fs::create_dir_all(&baselines).unwrap();
    let profile = write_profile(&baselines, "quick", &base.urls, &profile_body());
    let first = dir.join("first");
    bench_ok(&profile, &first);
    let results = without_client_flags(&first.join("results.json"));
    let baseline = baselines.join("quick.toml");
    let o = bless(&results, &baseline, &["--profile", "quick.profile.toml"]);
    assert_eq!(code(&o), 0, "{}", text(&o));
    git(&repo, &["init", "-q"]);
    commit_as_origin_main(&repo, "profile and baseline");
    repo
}

#[test]
fn the_recipe_runs_end_to_end_through_the_action_script() {
    let _turn = timing_lock();
    let dir = tempfile::tempdir().unwrap();
    let base = sim("3");
    let repo = repository(dir.path(), &base);

    // Install: a tampered checksum is refused and installs nothing; the right one installs.
    let bad = dir.path().join("bad");
    let url = release_assets(&bad, "v9.9.9", true);
    let (o, outputs) = action(
        &repo,
        "install",
        &[
            ("INPUT_VERSION", "v9.9.9"),
            ("THROUGHLINE_DOWNLOAD_URL", &url),
        ],
    );
    assert_eq!(code(&o), 2, "{}", text(&o));
    assert!(text(&o).contains("checksum mismatch"), "{}", text(&o));
    assert!(!outputs.contains("bin="), "{outputs}");

    let good = dir.path().join("good");
    let url = release_assets(&good, "v9.9.9", false);
    // The version comes from the `uses:` tag when the input is empty.
    let (o, outputs) = action(
        &repo,
        "install",
        &[("ACTION_REF", "v9.9.9"), ("THROUGHLINE_DOWNLOAD_URL", &url)],
    );
    assert_eq!(code(&o), 0, "{}", text(&o));
    let installed = String::from_utf8_lossy(&o.stdout).trim().to_string();
    assert!(installed.ends_with("/throughline"), "{installed}");
    assert_ne!(installed, bin(), "it must run the unpacked copy");
    assert!(outputs.contains(&format!("bin={installed}\n")), "{outputs}");
    let path_file = std::fs::read_to_string(dir.path().join("github-path")).unwrap();
    assert!(
        installed.starts_with(path_file.trim()),
        "{path_file} vs {installed}"
    );

    // Relative mode against servers the job started: same speed passes (exit 0) ...
    let head = sim("3");
    let run = |head_url: &str, out: &str| {
        action(
            &repo,
            "run",
            &[
                ("THROUGHLINE_BIN", installed.as_str()),
                ("INPUT_BASELINE", "baselines/quick.toml"),
                ("INPUT_BASELINE_REF", "origin/main"),
                ("INPUT_ENDPOINTS", head_url),
                ("INPUT_BASE_ENDPOINTS", base.urls[0].as_str()),
                ("INPUT_OUT", out),
                ("INPUT_ARGS", "--wait-healthy '20s'"),
            ],
        )
    };
    // Arguments are split by a fixed rule, never by a shell: an unterminated quote is refused
    // before anything runs.
    let (o, _) = action(
        &repo,
        "run",
        &[
            ("THROUGHLINE_BIN", installed.as_str()),
            ("INPUT_BASELINE", "baselines/quick.toml"),
            ("INPUT_ARGS", "--wait-healthy '20s"),
        ],
    );
    assert_eq!(code(&o), 2, "{}", text(&o));
    assert!(text(&o).contains("args: unterminated '"), "{}", text(&o));
    let (o, outputs) = run(&head.urls[0], "same");
    assert_eq!(code(&o), 0, "same speed must not fail: {}", text(&o));
    assert!(
        outputs.contains("verdict=pass\n") || outputs.contains("verdict=inconclusive\n"),
        "{outputs}"
    );
    assert!(outputs.contains("out=same\n"), "{outputs}");
    for f in ["results.json", "verdict.md", "junit.xml", "pr-comment.md"] {
        assert!(repo.join("same").join(f).is_file(), "{f} missing");
    }
    let results = read_json(&repo.join("same/results.json"));
    let base_trials = results["base"]["levels"][0]["trials"].as_array();
    assert_eq!(
        base_trials.map(Vec::len),
        Some(5),
        "the base arm was not measured: {}",
        results["base"]
    );

    // ... and a head at a quarter of the speed fails the step with exit 1.
    let slow = sim("12");
    let (o, outputs) = run(&slow.urls[0], "slow");
    assert_eq!(
        code(&o),
        1,
        "a quarter of the speed must fail: {}",
        text(&o)
    );
    assert!(outputs.contains("verdict=regression\n"), "{outputs}");
}

#[test]
fn the_one_gpu_recipe_starts_both_servers_in_blocks_through_the_action_script() {
    let _turn = timing_lock();
    let dir = tempfile::tempdir().unwrap();
    let base = sim("3");
    let repo = repository(dir.path(), &base);
    drop(base);
    // As docs/github-actions.md's 1-GPU recipe: one slot shared, each arm its own command.
    let server = format!(
        "exec {} serve-sim --port {{port}} --preset fixed --token-delay-ms 3",
        bin()
    );
    let (o, outputs) = action(
        &repo,
        "run",
        &[
            ("INPUT_BINARY", bin()),
            ("THROUGHLINE_BIN", bin()),
            ("INPUT_BASELINE", "baselines/quick.toml"),
            ("INPUT_BASELINE_REF", "origin/main"),
            ("INPUT_SERVER_COMMAND", server.as_str()),
            ("INPUT_BASE_SERVER_COMMAND", server.as_str()),
            ("INPUT_SLOTS", "0"),
            ("INPUT_OUT", "blocks"),
            ("INPUT_ARGS", "--blocks 2 --max-blocks 2"),
        ],
    );
    assert_eq!(code(&o), 0, "same server must not fail: {}", text(&o));
    assert!(outputs.contains("verdict="), "{outputs}");
    for b in 1..=2 {
        for arm in ["head", "base"] {
            let log = repo.join(format!("blocks/servers/block-{b}-{arm}.log"));
            assert!(log.is_file(), "{} missing", log.display());
        }
    }
    // The `binary` input installs nothing and names the binary it was given.
    let (o, outputs) = action(&repo, "install", &[("INPUT_BINARY", bin())]);
    assert_eq!(code(&o), 0, "{}", text(&o));
    assert!(outputs.contains(&format!("bin={}\n", bin())), "{outputs}");
}

/// The install keeps the verified binary in the runner's tool cache
/// ($RUNNER_TOOL_CACHE/throughline/VERSION/ARCH/), and a later job reuses it without
/// downloading anything; a cached copy that no longer matches the checksum recorded beside it
/// is not run but downloaded (and verified) again.
#[test]
fn the_install_keeps_the_binary_in_the_tool_cache_and_reuses_it() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    let cache = dir.path().join("cache");
    let release = dir.path().join("assets");
    let url = release_assets(&release, "v9.9.8", false);
    let cache_dir = cache.display().to_string();
    let env = [
        ("INPUT_VERSION", "v9.9.8"),
        ("THROUGHLINE_DOWNLOAD_URL", url.as_str()),
        ("RUNNER_TOOL_CACHE", cache_dir.as_str()),
    ];
    let installed = |o: &Output| String::from_utf8_lossy(&o.stdout).trim().to_string();
    let (o, outputs) = action(&repo, "install", &env);
    assert_eq!(code(&o), 0, "{}", text(&o));
    let arch = std::env::consts::ARCH;
    let cached = cache.join(format!("throughline/v9.9.8/{arch}/throughline"));
    assert!(cached.is_file(), "nothing in the tool cache: {}", text(&o));
    assert_eq!(installed(&o), cached.display().to_string(), "{}", text(&o));
    assert!(
        outputs.contains(&format!("bin={}\n", cached.display())),
        "{outputs}"
    );

    // The next job: the release cannot be reached, the cached copy is used as it is.
    std::fs::remove_dir_all(release.join("release")).unwrap();
    let (o, outputs) = action(&repo, "install", &env);
    assert_eq!(code(&o), 0, "{}", text(&o));
    assert_eq!(installed(&o), cached.display().to_string(), "{}", text(&o));
    assert!(text(&o).contains("tool cache"), "{}", text(&o));
    assert!(
        outputs.contains(&format!("bin={}\n", cached.display())),
        "{outputs}"
    );

    // A damaged copy is not run: with the release unreachable the install fails ...
    let mut bytes = std::fs::read(&cached).unwrap();
    bytes.extend_from_slice(b"tampered");
    std::fs::write(&cached, &bytes).unwrap();
    let (o, outputs) = action(&repo, "install", &env);
    assert_eq!(code(&o), 2, "{}", text(&o));
    assert!(text(&o).contains("could not download"), "{}", text(&o));
    assert!(!outputs.contains("bin="), "{outputs}");
    // ... and with the release back it is downloaded, verified and cached again.
    release_assets(&release, "v9.9.8", false);
    let (o, _) = action(&repo, "install", &env);
    assert_eq!(code(&o), 0, "{}", text(&o));
    assert_eq!(installed(&o), cached.display().to_string(), "{}", text(&o));
    assert_eq!(
        std::fs::read(&cached).unwrap(),
        std::fs::read(bin()).unwrap()
    );
}

/// An input is data: a version or binary path holding a line break and a workflow command
/// stays inside the one `::error` annotation (escaped as GitHub reads it), never a command
/// of its own.
#[test]
fn a_hostile_input_stays_inside_its_annotation() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    for (input, value) in [
        ("INPUT_VERSION", "v1\n::add-mask::x\r::stop-commands::y%"),
        ("INPUT_BINARY", "/nowhere\n::set-output name=bin::/bin/sh"),
    ] {
        let (o, outputs) = action(&repo, "install", &[(input, value)]);
        assert_eq!(code(&o), 2, "{input}: {}", text(&o));
        let stderr = String::from_utf8_lossy(&o.stderr);
        let commands: Vec<&str> = stderr.lines().filter(|l| l.starts_with("::")).collect();
        assert_eq!(commands.len(), 1, "{input}: {stderr}");
        assert!(
            commands[0].starts_with("::error title=throughline action::"),
            "{stderr}"
        );
        assert!(commands[0].contains("%0A::"), "{input}: {stderr}");
        assert!(!outputs.contains("bin="), "{outputs}");
    }
}

/// Every `with:` key under a `uses: your-org/throughline@` line in the docs is an input
/// action.yml declares, and every required input is given.
#[test]
fn the_docs_use_only_inputs_the_action_declares() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let action = std::fs::read_to_string(root.join("action.yml")).unwrap();
    let inputs_block = action
        .split("\ninputs:\n")
        .nth(1)
        .unwrap()
        .split("\noutputs:\n")
        .next()
        .unwrap();
    let declared: Vec<&str> = inputs_block
        .lines()
        .filter(|l| l.starts_with("  ") && !l.starts_with("   ") && l.ends_with(':'))
        .map(|l| l.trim().trim_end_matches(':'))
        .collect();
    assert!(declared.contains(&"baseline"), "{declared:?}");
    let mut checked = 0;
    for doc in ["docs/github-actions.md", "README.md"] {
        let text = std::fs::read_to_string(root.join(doc)).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let step = line.trim_start().trim_start_matches("- ");
            if !step.starts_with("uses: your-org/throughline@") {
                continue;
            }
            let indent = line.find("uses:").unwrap();
            let mut keys = Vec::new();
            let mut j = i + 1;
            // Skip to `with:` at the step's indentation, then read its keys.
            while j < lines.len() && lines[j].trim() != "with:" {
                j += 1;
            }
            j += 1;
            while j < lines.len() {
                let l = lines[j];
                let lead = l.len() - l.trim_start().len();
                if l.trim().is_empty() || lead <= indent {
                    break;
                }
                if lead == indent + 2 && !l.trim_start().starts_with('#') {
                    keys.push(l.trim().split(':').next().unwrap().to_string());
                }
                j += 1;
            }
            for k in &keys {
                assert!(
                    declared.contains(&k.as_str()),
                    "{doc}:{}: `{k}` is not an input of action.yml ({declared:?})",
                    i + 1
                );
            }
            assert!(
                keys.iter().any(|k| k == "baseline"),
                "{doc}:{}: no baseline",
                i + 1
            );
            checked += 1;
        }
    }
    assert!(checked >= 2, "the docs show the action {checked} times");
}

/// Each workflow in docs/workflows/ (linted by .ci/run) is shown in docs/github-actions.md
/// exactly as it is, or linked; all but the 1-GPU recipe (a three-line variant) in full.
#[test]
fn the_docs_show_the_linted_workflow_files_as_they_are() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("docs/github-actions.md")).unwrap();
    let mut embedded = Vec::new();
    for entry in std::fs::read_dir(root.join("docs/workflows")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_string();
        let file = std::fs::read_to_string(&path).unwrap();
        if doc.contains(&format!("```yaml\n{file}```\n")) {
            embedded.push(name);
        } else {
            assert!(
                doc.contains(&format!("(workflows/{name})")),
                "docs/github-actions.md neither shows docs/workflows/{name} as it is nor links it"
            );
        }
    }
    embedded.sort();
    assert_eq!(
        embedded,
        [
            "nightly-bless.yml",
            "nightly-trend.yml",
            "throughput-2gpu.yml",
            "throughput-matrix.yml",
            "throughput-reusable.yml"
        ]
    );
    // The 1-GPU recipe is the 2-GPU one with one slot and half the memory per server.
    let one = std::fs::read_to_string(root.join("docs/workflows/throughput-1gpu.yml")).unwrap();
    assert!(one.contains("slots: '0'\n"), "{one}");
    assert_eq!(one.matches("--gpu-memory-utilization 0.45").count(), 2);
    assert!(one.contains("if: always()\n") && one.contains("venv-base/bin/vllm"));
}

/// release.yml packs the names scripts/action.sh downloads (and this file's release_assets
/// mimics): throughline-ARCH-unknown-linux-musl.tar.gz holding a folder of that name, with
/// NAME.sha256 beside it, for both architectures the script knows.
#[test]
fn the_release_builds_what_the_action_downloads() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let release = std::fs::read_to_string(root.join(".github/workflows/release.yml")).unwrap();
    let script = std::fs::read_to_string(root.join("scripts/action.sh")).unwrap();
    for arch in ["x86_64", "aarch64"] {
        assert!(release.contains(&format!("- arch: {arch}\n")), "{arch}");
        assert!(script.contains(&format!(") arch={arch} ;;")), "{arch}");
    }
    assert!(release.contains("TARGET: ${{ matrix.arch }}-unknown-linux-musl"));
    assert!(release.contains(r#"name="throughline-$TARGET""#));
    assert!(release.contains(r#"sha256sum "$name.tar.gz" > "$name.tar.gz.sha256""#));
    assert!(script.contains(r#"asset="throughline-$arch-unknown-linux-musl.tar.gz""#));
    assert!(script.contains(r#"bin="$dir/throughline-$arch-unknown-linux-musl/throughline""#));
    assert!(script.contains(r#""$url.sha256""#));
}

/// action.yml passes every input it declares to scripts/action.sh, refers to no input it
/// does not declare, and every INPUT_ variable it sets is one the script reads.
#[test]
fn the_action_passes_each_declared_input_to_the_script() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let action = std::fs::read_to_string(root.join("action.yml")).unwrap();
    let script = std::fs::read_to_string(root.join("scripts/action.sh")).unwrap();
    let (head, runs) = action.split_once("\nruns:\n").unwrap();
    let inputs = head
        .split("\ninputs:\n")
        .nth(1)
        .unwrap()
        .split("\noutputs:\n")
        .next()
        .unwrap();
    let declared: Vec<&str> = inputs
        .lines()
        .filter(|l| l.starts_with("  ") && !l.starts_with("   ") && l.ends_with(':'))
        .map(|l| l.trim().trim_end_matches(':'))
        .collect();
    let used: Vec<&str> = runs
        .split("${{ inputs.")
        .skip(1)
        .map(|rest| rest.split(' ').next().unwrap())
        .collect();
    for d in &declared {
        assert!(used.contains(d), "input `{d}` is declared but never used");
    }
    for u in &used {
        assert!(declared.contains(u), "input `{u}` is used but not declared");
    }
    for var in runs
        .lines()
        .filter_map(|l| l.trim().strip_prefix("INPUT_"))
        .map(|rest| rest.split(':').next().unwrap())
    {
        assert!(
            script.contains(&format!("INPUT_{var}:-"))
                || script.contains(&format!("INPUT_{var}\"")),
            "action.yml sets INPUT_{var}, which scripts/action.sh never reads"
        );
    }
}

/// The docs' tables of inputs list every input: the action's (section 4.4) and the reusable
/// workflow's (section 5), so that a new input (e.g. `allow-slowdown`) is never undocumented.
#[test]
fn the_docs_tables_list_every_input() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("docs/github-actions.md")).unwrap();
    let section = |from: &str, to: &str| -> String {
        let start = doc
            .find(from)
            .unwrap_or_else(|| panic!("no section {from}"));
        let rest = &doc[start..];
        let end = rest.find(to).unwrap_or_else(|| panic!("no section {to}"));
        // The table rows' first cells: "| `a`, `b` | ..." gives a and b.
        (rest[..end].lines())
            .filter(|l| l.starts_with("| `"))
            .map(|l| l.split('|').nth(1).unwrap().to_string())
            .collect::<Vec<_>>()
            .join(",")
    };
    let keys = |text: &str, head: &str, end: &str, indent: usize| -> Vec<String> {
        let block = text.split(head).nth(1).unwrap().split(end).next().unwrap();
        let pad = " ".repeat(indent);
        (block.lines())
            .filter(|l| l.starts_with(&pad) && !l[indent..].starts_with(' ') && l.ends_with(':'))
            .map(|l| l.trim().trim_end_matches(':').to_string())
            .collect()
    };
    let action = std::fs::read_to_string(root.join("action.yml")).unwrap();
    let workflow =
        std::fs::read_to_string(root.join(".github/workflows/throughput-gate.yml")).unwrap();
    for (inputs, table, name) in [
        (
            keys(&action, "\ninputs:\n", "\noutputs:\n", 2),
            section("### 4.4 ", "### 4.5 "),
            "action.yml (section 4.4)",
        ),
        (
            keys(&workflow, "\n    inputs:\n", "\n    secrets:\n", 6),
            section("## 5. ", "## 6. "),
            "throughput-gate.yml (section 5)",
        ),
    ] {
        assert!(inputs.len() >= 14, "{name}: {inputs:?}");
        assert!(inputs.iter().any(|i| i == "allow-slowdown"), "{name}");
        for input in &inputs {
            assert!(
                table.contains(&format!("`{input}`")),
                "{name}: input `{input}` is not in the docs' table ({table})"
            );
        }
    }
}

/// A stand-in for the binary that records its arguments (one a line) and what it sees of
/// THROUGHLINE_ALLOW_REGRESSION, then exits 0: what scripts/action.sh asks of `ci`.
fn recording_binary(dir: &Path) -> (PathBuf, PathBuf) {
    let bin = dir.join("fake-throughline");
    let said = dir.join("fake-args.txt");
    std::fs::write(
        &bin,
        format!(
            "#!/usr/bin/env bash\nprintf '%s\\n' \"$@\" > '{}'\n\
             echo \"env=${{THROUGHLINE_ALLOW_REGRESSION-unset}}\" >> '{}'\n",
            said.display(),
            said.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    (bin, said)
}

/// Issue 50 item 2: the action's `allow-slowdown` input reaches `ci` through the script's
/// own INPUT_ALLOW_SLOWDOWN, so that running scripts/action.sh by hand with the action's
/// INPUT_* variables does what the action does (`--allow-regression`). The input alone
/// decides: a THROUGHLINE_ALLOW_REGRESSION left in the job's environment does not let a
/// regression through when the input says 'false', and a value other than true or false is
/// refused before anything runs.
#[test]
fn the_allow_slowdown_input_is_read_by_the_script_itself() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    let (fake, said) = recording_binary(dir.path());
    let run = |allow: &str, job_env: &str| {
        let _ = std::fs::remove_file(&said);
        let (o, _) = action(
            &repo,
            "run",
            &[
                ("THROUGHLINE_BIN", fake.to_str().unwrap()),
                ("INPUT_BASELINE", "baselines/quick.toml"),
                ("INPUT_ALLOW_SLOWDOWN", allow),
                ("THROUGHLINE_ALLOW_REGRESSION", job_env),
            ],
        );
        (o, std::fs::read_to_string(&said).unwrap_or_default())
    };
    for allow in ["true", "TRUE"] {
        let (o, args) = run(allow, "");
        assert_eq!(code(&o), 0, "{}", text(&o));
        assert!(args.lines().any(|l| l == "--allow-regression"), "{args}");
    }
    for allow in ["false", ""] {
        let (o, args) = run(allow, "true");
        assert_eq!(code(&o), 0, "{}", text(&o));
        assert!(!args.contains("--allow-regression"), "{allow:?}: {args}");
        assert!(args.contains("env=unset"), "{allow:?}: {args}");
    }
    let (o, args) = run("yes", "");
    assert_eq!(code(&o), 2, "{}", text(&o));
    assert!(text(&o).contains("allow-slowdown"), "{}", text(&o));
    assert!(args.is_empty(), "{args}");
}
