//! The README's first promise: `throughline demo` runs the main job on the embedded default.

use crate::common::*;

#[test]
fn demo_measures_gates_plots_and_plans() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("demo");
    let out = run(&["demo", "--out", out_dir.to_str().unwrap()]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("agg tok/s"), "{stdout}");
    assert!(
        stdout.contains("gating head against base, measured in the same job"),
        "{stdout}"
    );
    // The head is 10% slower than the base: the relative gate catches it. On a quiet machine
    // at every level (the README's output); on a busy one the high levels' trials can be
    // client-bound and too noisy to tell (seen at load 12 on 2 cores: C=32 and C=64 "cannot
    // tell"), but no level may pass, and C=1 (the least load on the client) must fail.
    assert!(stdout.contains("REGRESSION: slower at C=1"), "{stdout}");
    let gate_table = stdout
        .split("gating head against base")
        .nth(1)
        .and_then(|rest| rest.split("\ndemo: ").next())
        .unwrap_or_default();
    let verdicts: Vec<(u32, &str)> = gate_table
        .lines()
        .filter_map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            let c = cells.first()?.parse().ok()?;
            (cells.len() == 7).then(|| (c, *cells.last().unwrap()))
        })
        .collect();
    let gated: Vec<u32> = verdicts.iter().map(|(c, _)| *c).collect();
    assert_eq!(gated, [1, 8, 32, 64], "{stdout}");
    for (c, v) in &verdicts {
        // The verdict word, without a note such as "(0 base and 1 head trial(s) set aside
        // as outliers)", which the README's own output shows at C=64.
        let word = v.split(" (").next().unwrap_or(v);
        assert!(
            ["FAIL", "cannot tell"].contains(&word),
            "C={c}: {v}\n{stdout}"
        );
    }
    // Last, an unchanged change in 4 blocks on a runner whose slot 1 is 4% faster: the slot
    // is named, cancels, and the verdict passes with what it rules out.
    let blocks = stdout
        .split("an unchanged pull request in blocks")
        .nth(1)
        .unwrap_or_default();
    assert!(
        blocks.contains("block 4: head on slot 0, base on slot 1"),
        "{stdout}"
    );
    assert!(blocks.contains("slots: C=1: slot 1 "), "{stdout}");
    // A pass on a quiet machine (the README's output); a very busy one may leave a level
    // undecided, but an unchanged server never fails on its slot.
    assert!(!blocks.contains("REGRESSION"), "{stdout}");
    assert!(
        blocks.contains("PASS: no regression") || blocks.contains("INCONCLUSIVE"),
        "{stdout}"
    );
    // The plan ran: its own output, not the demo's question printed before it, and no error
    // swallowed by the demo (which prints "plan not run" and still exits 0).
    assert!(!stdout.contains("plan not run"), "{stdout}");
    assert!(!stdout.contains("gate not run"), "{stdout}");
    assert!(
        stdout
            .contains("throughline plan: 1.640e9 output tokens (902,087 completions x 1,818 avg)"),
        "{stdout}"
    );
    // The plan in brief: its summary names the measured node with its days at P50.
    let row = stdout
        .lines()
        .find(|l| l.contains("fastest on one node: 2x GPU (run) (measured), "))
        .unwrap_or_else(|| panic!("no plan summary for the measured node:\n{stdout}"));
    let days: f64 = row
        .split_whitespace()
        .zip(row.split_whitespace().skip(1))
        .find(|(_, unit)| *unit == "days")
        .and_then(|(n, _)| n.parse().ok())
        .unwrap_or_else(|| panic!("no P50 days in {row:?}"));
    assert!(days > 0.0 && days.is_finite(), "{row}");
    assert!(
        stdout.contains("fastest on one node: 2x GPU (run)"),
        "{stdout}"
    );
    for file in [
        "results.json",
        "requests.jsonl",
        "summary.csv",
        "verdict.md",
        "throughput.png",
        "report.md",
        "ratio.png",
        "pr-comment.md",
        "capacity.png",
        "plan.json",
    ] {
        assert!(out_dir.join(file).is_file(), "{file} missing");
    }
    // One screen (issue 37: it printed 122 lines): the whole verdicts, the plan's table and
    // notes and every block's trials are in the files, and `demo -v` prints them.
    let lines = stdout.lines().count();
    assert!(lines <= 64, "{lines} lines:\n{stdout}");
    let md = std::fs::read_to_string(out_dir.join("verdict.md")).unwrap();
    assert!(
        md.contains("p (Holm)"),
        "verdict.md keeps the whole table: {md}"
    );
    let result = read_json(&out_dir.join("results.json"));
    assert_eq!(result["levels"].as_array().unwrap().len(), 4);
    assert_eq!(result["base"]["levels"].as_array().unwrap().len(), 4);
    assert_eq!(result["complete"], true);
}
