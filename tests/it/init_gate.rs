//! `throughline init` writes a `[gate]` section: the table itself (not a comment), with every
//! setting of the gate commented at its default, so that a user sees the knobs; the profile
//! still loads, and with every key uncommented it still means the defaults.

use throughline::profile::{GateSettings, LatencyGates, Profile};

use crate::common::*;

#[test]
fn init_writes_a_gate_section_with_every_default_commented() {
    let dir = tempfile::tempdir().unwrap();
    let o = command()
        .arg("init")
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(code(&o), 0, "{}", text(&o));
    let path = dir.path().join("throughline.toml");
    let written = std::fs::read_to_string(&path).unwrap();

    // A table of the file, and the profile loads with the gate's defaults.
    let table: toml::Table = written.parse().unwrap();
    assert!(
        table.get("gate").is_some_and(toml::Value::is_table),
        "no [gate] table in what init wrote:\n{written}"
    );
    let loaded = Profile::load(&path).unwrap();
    assert_eq!(loaded.gate, GateSettings::default());

    // The section's commented keys, uncommented: every setting of the gate is there, and
    // the values are the defaults (the latency gates, off by default, as an example).
    let section = written.split("\n[gate]\n").nth(1).unwrap();
    let mut keys = Vec::new();
    let mut uncommented = written.split("\n[gate]\n").next().unwrap().to_string();
    uncommented.push_str("\n[gate]\n");
    for line in section.lines().take_while(|l| !l.starts_with('[')) {
        let Some(rest) = line.strip_prefix("# ") else {
            continue;
        };
        let Some((key, _)) = rest.split_once(" = ") else {
            continue;
        };
        if key.chars().all(|c| c.is_ascii_lowercase() || c == '_') {
            keys.push(key.to_string());
            uncommented.push_str(rest);
            uncommented.push('\n');
        }
    }
    let defaults = toml::to_string(&GateSettings::default()).unwrap();
    let mut want: Vec<String> = (defaults.lines())
        .filter_map(|l| l.split_once(" = ").map(|(k, _)| k.to_string()))
        .collect();
    want.extend(["fail_on_inconclusive".to_string(), "latency".to_string()]);
    for key in &want {
        assert!(
            keys.contains(key),
            "[gate] does not show `{key}` ({keys:?}):\n{written}"
        );
    }
    let all = Profile::parse(&uncommented)
        .unwrap_or_else(|e| panic!("{e:#}\n{uncommented}"))
        .gate;
    assert!(!all.latency.is_empty(), "{uncommented}");
    assert_eq!(
        GateSettings {
            latency: LatencyGates::default(),
            ..all
        },
        GateSettings::default(),
        "{uncommented}"
    );
}

/// `init --budget`: a pilot on the server, timed trials sized so that the whole plan fits the
/// budget on the pairs given, the `ci` flags that keep to it, and the smallest drop stated;
/// the profile written loads and its own estimate (the run's up-front line) stays within it.
#[test]
fn init_sizes_a_gate_profile_to_a_budget_with_a_pilot() {
    let sim = Sim::start(1, &["--preset", "fast", "--token-delay-ms", "20"]);
    let dir = tempfile::tempdir().unwrap();
    let o = command()
        .args([
            "init",
            "-e",
            &sim.urls[0],
            "--budget",
            "12m",
            "--pairs",
            "4",
        ])
        .args(["--server-start", "5s", "-c", "1,4", "--max-tokens", "16"])
        .args(["-o", "gate.toml"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let said = text(&o);
    assert_eq!(code(&o), 0, "{said}");
    assert!(said.contains("measured by a pilot on"), "{said}");
    assert!(
        said.contains("ci flags: --blocks 4 --max-blocks 4"),
        "{said}"
    );
    assert!(said.contains("smallest drop at one level"), "{said}");
    let profile = Profile::load(&dir.path().join("gate.toml")).unwrap();
    let window = profile.sweep.duration.expect("timed trials");
    assert!(window.as_secs() >= 20, "{window:?}");
    assert_eq!(profile.sweep.concurrency, vec![1, 4]);
    // 12 minutes on 4 pairs hold one round: the first look's 4 blocks, one a pair, said.
    let plan = said.lines().find(|l| l.contains("at most")).unwrap();
    assert!(plan.contains("first look 4 blocks in 1 round(s)"), "{plan}");
    assert!(
        said.contains("one round only: each pair runs one way round"),
        "{said}"
    );
    // The written profile carries the same words, as comments.
    let written = std::fs::read_to_string(dir.path().join("gate.toml")).unwrap();
    assert!(
        written.contains("# Sized by `throughline init --budget 12m`"),
        "{written}"
    );

    // Too small a budget for the first look: refused, saying what it needs; no file.
    let o = command()
        .args([
            "init",
            "--budget",
            "1m",
            "--server-start",
            "0s",
            "-o",
            "small.toml",
        ])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(code(&o), 2, "{}", text(&o));
    assert!(text(&o).contains("too short"), "{}", text(&o));
    assert!(!dir.path().join("small.toml").exists());
    // A budget without the servers' start time is refused: it is a third of a big model's.
    let o = command()
        .args(["init", "--budget", "30m", "-o", "x.toml"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(code(&o), 2, "{}", text(&o));
    assert!(text(&o).contains("--server-start"), "{}", text(&o));
}
