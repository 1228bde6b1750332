//! The fingerprint is taken, not typed (a fake `nvidia-smi` on PATH, serve-sim's /version),
//! a typed value that hides a different detected one is recorded and said, a stale typed
//! engine version is refused by the gate, and the exports come out in the published shapes.

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::common::*;

const PROFILE: &str = r#"
[workload]
input_tokens = 8
max_tokens = 8
ignore_eos = true
[sweep]
concurrency = [2]
warmup_requests = 1
trials = 5
request_timeout = "20s"
"#;

/// A folder with a fake `nvidia-smi` that answers like two H200s.
fn fake_nvidia_smi(dir: &Path) -> PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let tool = bin.join("nvidia-smi");
    std::fs::write(
        &tool,
        "#!/bin/sh\n\
         case \"$*\" in *--query-gpu=name,driver_version,memory.total*) ;; *) exit 9;; esac\n\
         echo 'NVIDIA H200, 550.54.15, 143771 MiB'\n\
         echo 'NVIDIA H200, 550.54.15, 143771 MiB'\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    bin
}

/// `bench` with the fake tool first on PATH, no typed fingerprint but `typed`.
fn bench(dir: &Path, sim: &Sim, name: &str, typed: &[(&str, &str)], extra: &[&str]) -> Output {
    let profile = write_profile(dir, "fp", &sim.urls, PROFILE);
    let path = format!(
        "{}:{}",
        fake_nvidia_smi(dir).display(),
        std::env::var("PATH").unwrap()
    );
    let mut cmd = bench_command(&profile, &dir.join(name));
    for var in [
        "THROUGHLINE_GPU",
        "THROUGHLINE_GPU_COUNT",
        "THROUGHLINE_DRIVER",
        "THROUGHLINE_ENGINE",
        "THROUGHLINE_ENGINE_VERSION",
        "CUDA_VISIBLE_DEVICES",
    ] {
        cmd.env_remove(var);
    }
    cmd.env("PATH", path)
        .envs(typed.iter().copied())
        .args(["--no-plots"])
        .args(extra)
        .output()
        .expect("run bench")
}

#[test]
fn the_fingerprint_is_detected_and_typed_values_that_differ_are_said() {
    let _turn = timing_lock();
    let dir = tempfile::tempdir().unwrap();
    let sim = Sim::start(1, &["--preset", "instant"]);
    let out = bench(dir.path(), &sim, "detected", &[], &[]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    let env = &read_json(&dir.path().join("detected/results.json"))["environment"];
    assert_eq!(env["gpu_model"], "NVIDIA H200", "{env}");
    assert_eq!(env["gpu_count"], 2, "{env}");
    assert_eq!(env["driver"], "550.54.15", "{env}");
    assert_eq!(env["engine"], "throughline-sim", "{env}");
    assert_eq!(env["engine_version"], env!("CARGO_PKG_VERSION"), "{env}");
    assert!(env.get("overridden").is_none(), "{env}");

    // Typed values still win; where they differ from what was detected, it is recorded.
    let typed = [
        ("THROUGHLINE_GPU", "H200"),
        ("THROUGHLINE_ENGINE_VERSION", "9.9.9"),
    ];
    let out = bench(dir.path(), &sim, "typed", &typed, &[]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    let env = &read_json(&dir.path().join("typed/results.json"))["environment"];
    assert_eq!(env["gpu_model"], "H200");
    assert_eq!(env["engine_version"], "9.9.9");
    let fields: Vec<&str> = (env["overridden"].as_array().unwrap().iter())
        .map(|o| o["field"].as_str().unwrap())
        .collect();
    assert_eq!(fields, ["engine_version", "gpu_model"], "{env}");
    assert!(
        text(&out).contains("engine_version: typed \"9.9.9\" but detected"),
        "{}",
        text(&out)
    );
}

#[test]
fn a_stale_typed_engine_version_is_not_compared_across_versions() {
    let _turn = timing_lock();
    let dir = tempfile::tempdir().unwrap();
    let sim = Sim::start(1, &["--preset", "instant"]);
    // The baseline was blessed when the engine was 9.9.9 (typed, and then true); the engine
    // has since been upgraded (it says so) but the workflow still types 9.9.9.
    let stale = [("THROUGHLINE_ENGINE_VERSION", "9.9.9")];
    let out = bench(dir.path(), &sim, "old", &[], &[]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    let old = dir.path().join("old/results.json");
    let mut blessed = read_json(&old);
    blessed["environment"]["engine_version"] = "9.9.9".into();
    let blessed_path = dir.path().join("old/as-blessed.json");
    std::fs::write(&blessed_path, blessed.to_string()).unwrap();
    let baseline = dir.path().join("fp.toml");
    let o = bless(&without_client_flags(&blessed_path), &baseline, &[]);
    assert_eq!(code(&o), 0, "{}", text(&o));

    let out = bench(dir.path(), &sim, "new", &stale, &[]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    let results = without_client_flags(&dir.path().join("new/results.json"));
    let o = run(&[
        "gate",
        "--allow-client-bound",
        "--results",
        results.to_str().unwrap(),
        "--baseline",
        baseline.to_str().unwrap(),
    ]);
    let said = text(&o);
    assert_eq!(code(&o), 3, "{said}");
    assert!(said.contains("across engine versions"), "{said}");
    assert!(said.contains(env!("CARGO_PKG_VERSION")), "{said}");
}

#[test]
fn exports_come_out_in_the_published_shapes() {
    let _turn = timing_lock();
    let dir = tempfile::tempdir().unwrap();
    let sim = Sim::start(1, &["--preset", "instant"]);
    let bmf = dir.path().join("bmf.json");
    let bigger = dir.path().join("bigger.json");
    let smaller = dir.path().join("smaller.json");
    let out = bench(
        dir.path(),
        &sim,
        "run",
        &[],
        &[
            "--export-bmf",
            bmf.to_str().unwrap(),
            "--export-github-benchmark-bigger",
            bigger.to_str().unwrap(),
            "--export-github-benchmark-smaller",
            smaller.to_str().unwrap(),
        ],
    );
    assert_eq!(code(&out), 0, "{}", text(&out));
    let results = read_json(&dir.path().join("run/results.json"));
    let trials = results["levels"][0]["trials"].as_array().unwrap();
    let mean = trials
        .iter()
        .map(|t| t["output_tok_per_s"].as_f64().unwrap())
        .sum::<f64>()
        / trials.len() as f64;

    // BMF (bencher.dev/bmf.json): benchmark -> measure -> { value, lower_value, upper_value }.
    let v = read_json(&bmf);
    let m = &v["fp C=2"]["output-tokens-per-second"];
    assert!(
        (m["value"].as_f64().unwrap() - mean).abs() < 1e-9 * mean,
        "{v}"
    );
    let (lo, hi) = (
        m["lower_value"].as_f64().unwrap(),
        m["upper_value"].as_f64().unwrap(),
    );
    assert!(lo <= mean && mean <= hi, "{m}");
    for (_, measures) in v.as_object().unwrap() {
        for (slug, metric) in measures.as_object().unwrap() {
            assert!(
                slug.len() <= 64 && metric["value"].is_number(),
                "{slug}: {metric}"
            );
        }
    }
    assert!(v["fp C=2"]["ttft-p99-ms"]["value"].is_number(), "{v}");

    // github-action-benchmark: [ { name, unit, value, range?, extra? } ], one file a direction.
    for (file, unit) in [(&bigger, "tok/s"), (&smaller, "ms")] {
        let v = read_json(file);
        let list = v.as_array().unwrap();
        assert!(!list.is_empty());
        for e in list {
            assert!(e["name"].is_string() && e["unit"].is_string(), "{e}");
            assert!(e["value"].is_number(), "{e}");
            assert!(e.get("range").is_none_or(|r| r.is_string()), "{e}");
        }
        assert!(list.iter().any(|e| e["unit"] == unit), "{v}");
    }

    // From gate: the same figures and the verdict's ratio.
    let baseline = dir.path().join("fp.toml");
    let clean = without_client_flags(&dir.path().join("run/results.json"));
    let o = bless(&clean, &baseline, &[]);
    assert_eq!(code(&o), 0, "{}", text(&o));
    let gate_bmf = dir.path().join("gate-bmf.json");
    let o = crate::common::command()
        .args(["gate", "--allow-client-bound", "--results"])
        .arg(&clean)
        .arg("--baseline")
        .arg(&baseline)
        .arg("--export-bmf")
        .arg(&gate_bmf)
        .output()
        .unwrap();
    assert!(code(&o) == 0 || code(&o) == 1, "{}", text(&o));
    let v = read_json(&gate_bmf);
    assert!(
        v["fp C=2"]["throughput-ratio"]["value"].is_number(),
        "{v}\n{}",
        text(&o)
    );
}
