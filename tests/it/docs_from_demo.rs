//! The docs show the demo's verdict, and they must be what the code writes: the pull-request
//! comment (docs/charts/pr-comment.md) and the gate table of docs/demo.md (the demo output moved there from the README) are rendered here from one
//! demo run committed as docs/charts/demo-results.json, gated as the demo gates it (the
//! embedded baselines/demo.toml's settings). When a renderer changes on purpose, rewrite them:
//!
//!     THROUGHLINE_BLESS_DOCS=1 cargo test --test it docs_from_demo
//!
//! and commit the result. (A new demo run: `throughline demo -o DIR`, then copy
//! DIR/results.json over docs/charts/demo-results.json, its PNGs into docs/charts/ and its
//! console output into docs/demo.md's demo block, and bless as above.)

use std::path::{Path, PathBuf};

use throughline::commands::demo::DEMO_BASELINE;
use throughline::gate::baseline::Baseline;
use throughline::gate::evaluate;
use throughline::record::RunResult;
use throughline::report::{pr_comment, verdict};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn blessing() -> bool {
    std::env::var("THROUGHLINE_BLESS_DOCS").is_ok_and(|v| v == "1")
}

/// The demo's verdict on the committed run, as `throughline demo` computes it.
fn demo_verdict() -> throughline::gate::Verdict {
    let results = RunResult::load(&root().join("docs/charts/demo-results.json")).unwrap();
    let baseline = Baseline::parse(DEMO_BASELINE, "baselines/demo.toml (embedded)").unwrap();
    evaluate(&baseline, &results, &baseline.gate).unwrap()
}

/// Writes `want` to `path` when blessing, else fails unless the file holds it.
fn check_or_bless(path: &Path, have: &str, want: &str) {
    if have == want {
        return;
    }
    if blessing() {
        std::fs::write(path, want).unwrap();
        eprintln!("rewrote {}", path.display());
        return;
    }
    let (line, (written, committed)) = want
        .lines()
        .chain(std::iter::repeat("(end)"))
        .zip(have.lines().chain(std::iter::repeat("(end)")))
        .enumerate()
        .find(|(_, (w, h))| w != h)
        .unwrap_or((0, ("", "")));
    panic!(
        "{} is not what the code writes for docs/charts/demo-results.json, from line {}:\n\
         written:   {written}\ncommitted: {committed}\nIf the change is meant, run \
         `THROUGHLINE_BLESS_DOCS=1 cargo test --test it docs_from_demo` and commit.",
        path.display(),
        line + 1
    );
}

#[test]
fn the_pr_comment_in_the_docs_is_the_demo_verdicts() {
    let v = demo_verdict();
    // The demo writes these charts beside its comment, in this order (ratio.png first).
    let pngs = [
        "ratio.png",
        "throughput.png",
        "per_request.png",
        "latency.png",
    ]
    .map(String::from);
    let want = pr_comment::pr_comment(&v, &pngs, &Default::default());
    assert!(want.starts_with("<!-- throughline-verdict -->\n"), "{want}");
    let path = root().join("docs/charts/pr-comment.md");
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    check_or_bless(&path, &have, &want);
}

#[test]
fn the_readme_shows_the_demo_verdicts_gate_table() {
    let v = demo_verdict();
    let console = verdict::console_with(&v, false);
    // The table: the header, the rule and one row per level, up to the `gate:` line.
    let table: Vec<&str> = console
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("C |"))
        .take_while(|l| !l.starts_with("gate:"))
        .collect();
    assert!(table.len() >= 3, "{console}");
    let path = root().join("docs/demo.md");
    let readme = std::fs::read_to_string(&path).unwrap();
    // docs/demo.md's first gate table (in the demo's output) is the one to match.
    let lines: Vec<&str> = readme.lines().collect();
    // Found by its shape, not its headings (which the renderer may change): the first
    // line that starts a verdict table.
    let start = lines
        .iter()
        .position(|l| {
            let l = l.trim_start();
            l.starts_with("C |") && l.contains("ratio [bounds]") && l.contains("p (Holm)")
        })
        .expect("docs/demo.md shows the demo's gate table");
    let end = start
        + lines[start..]
            .iter()
            .position(|l| l.starts_with("gate:"))
            .expect("docs/demo.md's gate table ends with the gate: line");
    let mut want_lines: Vec<&str> = lines[..start].to_vec();
    want_lines.extend(&table);
    want_lines.extend(&lines[end..]);
    let mut want = want_lines.join("\n");
    if readme.ends_with('\n') {
        want.push('\n');
    }
    check_or_bless(&path, &readme, &want);
}
