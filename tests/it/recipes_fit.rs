//! Issue 50 item 1: every recipe's model, precision and memory split fit the GPU it names
//! (docs/workflows/*.yml and the YAML shown in docs/ and the README), read with the facts
//! tables' figures; and the tool refuses, before the first server starts, servers that
//! cannot hold their weights on this machine's GPUs.

use std::path::Path;
use std::process::Command;

use throughline::plan::fit::{misfit, read_command};
use throughline::plan::Facts;

fn read(rel: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(rel))
        .unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// One server command of a recipe, with the runner labels and slots it runs under.
#[derive(Debug)]
struct Recipe {
    at: String,
    command: String,
    labels: String,
    slots: Option<String>,
}

fn unquote(v: &str) -> String {
    v.trim().trim_matches(['\'', '"']).to_string()
}

/// The server commands of a YAML text: `server-command:`, `base-server-command:` and a
/// matrix's `server:` (inline, or a folded `>-` block), and a `vllm serve` line in a script;
/// each with the last `runs-on:` naming more than ubuntu-latest and the last `slots:` above it.
fn recipes(at: &str, text: &str) -> Vec<Recipe> {
    let lines: Vec<&str> = text.lines().collect();
    let (mut labels, mut slots, mut out) = (String::new(), None, Vec::new());
    // A matrix's literal `slots:` (read above its job's `runs-on:`), for `${{ matrix.slots }}`.
    let mut matrix_slots: Option<String> = None;
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let t = line.trim_start().trim_start_matches("- ");
        let indent = line.len() - line.trim_start().len();
        let key_value = t
            .split_once(": ")
            .or_else(|| t.strip_suffix(':').map(|k| (k, "")));
        i += 1;
        let Some((key, value)) = key_value else {
            continue;
        };
        match key {
            "runs-on" if !value.contains("ubuntu-latest") && !value.contains("${{") => {
                labels = value.to_string();
                slots = None;
            }
            "slots" if value.contains("${{ matrix.slots }}") => slots = matrix_slots.clone(),
            "slots" => {
                slots = Some(unquote(value));
                matrix_slots = slots.clone();
            }
            "server-command" | "base-server-command" | "server" if !value.contains("${{") => {
                let mut command = String::new();
                if value.trim() == ">-" {
                    while i < lines.len() && lines[i].len() - lines[i].trim_start().len() > indent {
                        command.push_str(lines[i].trim());
                        command.push(' ');
                        i += 1;
                    }
                } else {
                    command = unquote(value);
                }
                out.push(Recipe {
                    at: format!("{at}:{} ({key})", i),
                    command: command.trim().to_string(),
                    labels: labels.clone(),
                    slots: slots.clone(),
                });
            }
            _ => {}
        }
    }
    out
}

/// The GPU a runner's labels name ("rtxpro6000", "2xrtxpro6000", "b200"), by the facts.
fn gpu_of(facts: &Facts, labels: &str) -> Option<String> {
    labels
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .filter(|l| !l.is_empty())
        .find_map(|l| facts.gpu(l).map(|g| g.name.clone()))
}

/// The YAML blocks of a Markdown file.
fn yaml_blocks(text: &str) -> Vec<String> {
    text.split("```yaml\n")
        .skip(1)
        .map(|b| b.split("```").next().unwrap_or("").to_string())
        .collect()
}

/// Checks every recipe of `texts`; the number checked.
fn check(facts: &Facts, texts: &[(String, String)]) -> Result<usize, String> {
    let mut checked = 0;
    for (at, text) in texts {
        let all = recipes(at, text);
        for r in &all {
            let Some(shape) = read_command(&r.command, facts) else {
                return Err(format!(
                    "{}: the model of {:?} is not read",
                    r.at, r.command
                ));
            };
            let gpu = gpu_of(facts, &r.labels)
                .ok_or_else(|| format!("{}: no GPU in the runner labels {:?}", r.at, r.labels))?;
            // Two commands under one `slots:` with a single slot share its GPUs.
            let partners: Vec<(&str, &str)> = all
                .iter()
                .filter(|o| o.labels == r.labels && o.slots == r.slots && o.slots.is_some())
                .map(|o| ("server", o.command.as_str()))
                .collect();
            let shared = r.slots.as_deref().is_some_and(|s| !s.contains(';')) && partners.len() > 1;
            let commands = match shared {
                true => partners,
                false => vec![("server", r.command.as_str())],
            };
            if let Some(why) = misfit(facts, &commands, &gpu, shared) {
                return Err(format!("{}: {why}", r.at));
            }
            assert!(shape.weight_bytes > 0.0);
            checked += 1;
        }
    }
    Ok(checked)
}

#[test]
fn every_recipe_fits_the_gpu_it_names() {
    let facts = Facts::builtin();
    let mut texts = Vec::new();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/workflows");
    for entry in std::fs::read_dir(root).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        let rel = format!("docs/workflows/{name}");
        texts.push((rel.clone(), read(&rel)));
    }
    for doc in ["README.md", "docs/github-actions.md"] {
        for (n, block) in yaml_blocks(&read(doc)).into_iter().enumerate() {
            texts.push((format!("{doc} yaml block {}", n + 1), block));
        }
    }
    let checked = check(&facts, &texts).unwrap_or_else(|e| panic!("{e}"));
    // docs/workflows/: 1-GPU 2, 2-GPU 2, matrix 2, reusable 2, nightly bless 1; the docs show
    // all but the 1-GPU file in full, and the 1-GPU variant's head command.
    assert!(checked >= 17, "only {checked} server commands checked");
    // The check sees the recipe the issue found: BF16 Qwen3.6-27B, twice at 0.45 of one
    // 96 GB GPU.
    let old = read("docs/workflows/throughput-1gpu.yml").replace("Qwen3.6-27B-FP8", "Qwen3.6-27B");
    assert_ne!(old, read("docs/workflows/throughput-1gpu.yml"));
    let why = check(&facts, &[("old 1-GPU recipe".to_string(), old)]).unwrap_err();
    assert!(why.contains("54 GB") && why.contains("43.2 GB"), "{why}");
}

/// A folder with a fake `nvidia-smi` (one RTX PRO 6000 Blackwell) and a fake `vllm` that
/// leaves a mark when it is started.
fn fake_tools(dir: &Path) -> std::path::PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let smi =
        "#!/bin/sh\necho 'NVIDIA RTX PRO 6000 Blackwell Server Edition, 575.57.08, 97887 MiB'\n";
    let vllm = format!(
        "#!/bin/sh\ntouch {}\nexit 1\n",
        dir.join("started").display()
    );
    for (name, body) in [("nvidia-smi", smi.to_string()), ("vllm", vllm)] {
        let path = bin.join(name);
        std::fs::write(&path, body).unwrap();
        let mut perms = std::fs::metadata(&path).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
        std::fs::set_permissions(&path, perms).unwrap();
    }
    bin
}

fn bench_with(
    dir: &Path,
    tools: &Path,
    server: &str,
    base: &str,
    slots: &str,
) -> std::process::Output {
    use crate::common::{bench_command, write_profile, QUICK_BODY};
    let profile = write_profile(dir, "p", &["http://127.0.0.1:1".to_string()], QUICK_BODY);
    let path = format!("{}:{}", tools.display(), std::env::var("PATH").unwrap());
    let mut cmd: Command = bench_command(&profile, &dir.join("out"));
    cmd.args(["--no-progress", "--server-timeout", "5s"])
        .args(["--server-command", server, "--base-server-command", base])
        .args(["--slots", slots])
        .env("PATH", path)
        .output()
        .unwrap()
}

#[test]
fn servers_that_cannot_fit_are_refused_before_they_start() {
    use crate::common::{code, text};
    let dir = tempfile::tempdir().unwrap();
    let bin = fake_tools(dir.path());
    let bf16 = "CUDA_VISIBLE_DEVICES={gpus} exec vllm serve Qwen/Qwen3.6-27B --port {port} \
                --max-model-len 8192 --gpu-memory-utilization 0.45";
    let o = bench_with(dir.path(), &bin, bf16, bf16, "0");
    let t = text(&o);
    assert_eq!(code(&o), 2, "{t}");
    for part in [
        "Qwen3.6-27B",
        "BF16",
        "54 GB",
        "--gpu-memory-utilization 0.45",
        "43.2 GB",
        "96 GB",
    ] {
        assert!(t.contains(part), "the refusal does not say {part}: {t}");
    }
    assert!(
        !dir.path().join("started").exists(),
        "a server was started: {t}"
    );
    // Two full-memory servers on one shared GPU: the fractions add up past the GPU.
    let full = bf16.replace("0.45", "0.90");
    let o = bench_with(dir.path(), &bin, &full, &full, "0");
    assert_eq!(code(&o), 2, "{}", text(&o));
    assert!(text(&o).contains("add up to 1.80"), "{}", text(&o));
    assert!(!dir.path().join("started").exists());
    // What fits is started (and the fake engine then fails as engines do).
    let fp8 = bf16.replace("Qwen3.6-27B", "Qwen3.6-27B-FP8");
    let o = bench_with(dir.path(), &bin, &fp8, &fp8, "0");
    assert!(!text(&o).contains("would not fit"), "{}", text(&o));
    assert!(dir.path().join("started").exists(), "{}", text(&o));
}
