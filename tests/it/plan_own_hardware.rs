//! Issue 50 item 6: one machine, one answer. A batch-1 run is not planned as the node's
//! capacity without its row saying so; the user's own hardware leads the summary; node ids
//! name the RTX PRO 6000 Blackwell, and the old `rtx6000` ids are still read, with a note.

use crate::common::{code, run, text};

fn plan(args: &[&str]) -> String {
    let mut all = vec!["plan", "--output-tokens", "1.64e9"];
    all.extend_from_slice(args);
    let o = run(&all);
    assert_eq!(code(&o), 0, "{}", text(&o));
    text(&o)
}

/// The summary's lines, after its heading.
fn summary(out: &str) -> Vec<&str> {
    out.split("\nsummary:\n")
        .nth(1)
        .unwrap_or_else(|| panic!("no summary: {out}"))
        .lines()
        .take_while(|l| !l.is_empty())
        .collect()
}

#[test]
fn a_batch1_run_says_so_in_its_row_and_leads_the_summary() {
    // The seed's old name is read too (and said to be renamed).
    let out = plan(&["--results", "seed:rtx6000-8x-dp-qwen3.6-27b-batch1", "-v"]);
    let row = out
        .lines()
        .find(|l| l.starts_with("8x RTX PRO 6000 Blackwell (run)"))
        .unwrap_or_else(|| panic!("no run row: {out}"));
    assert!(
        row.contains("[b1]"),
        "the run's row does not say batch 1: {row}"
    );
    assert!(out.contains("[b1]: batch 1 only, not capacity"), "{out}");
    let lines = summary(&out);
    assert!(
        lines[0].starts_with("  your hardware (the run): 8x RTX PRO 6000 Blackwell (run)")
            && lines[0].contains("89.6 days"),
        "the summary does not start with the user's hardware: {lines:?}"
    );
    assert!(
        lines[1].contains("batch 1 only")
            && lines[1].contains("rtxpro6000-8x-dp (measured)")
            && lines[1].contains("2.0 days"),
        "{lines:?}"
    );
    assert!(
        out.contains("is now seed:rtxpro6000-8x-dp-qwen3.6-27b-batch1"),
        "{out}"
    );
    // Rows scaled from a batch-1 figure are batch-1 figures too.
    let h100 = out.lines().find(|l| l.starts_with("h100-8x")).unwrap();
    assert!(h100.contains("[b1]"), "{h100}");
}

#[test]
fn a_run_under_load_leads_the_summary_without_a_batch1_mark() {
    let out = plan(&["--results", "seed:rtxpro6000-4x-tp4-qwen3.5-122b"]);
    assert!(!out.contains("[b1]"), "{out}");
    let lines = summary(&out);
    assert!(
        lines[0].starts_with("  your hardware (the run): "),
        "{lines:?}"
    );
    assert!(lines[1].starts_with("  fastest on one node"), "{lines:?}");
}

#[test]
fn node_ids_name_the_rtx_pro_6000_and_old_ids_still_work() {
    let out = plan(&["--node", "rtxpro6000-8x-dp"]);
    assert!(out.contains("\nrtxpro6000-8x-dp "), "{out}");
    assert!(!out.contains("rtx6000"), "{out}");
    let old = plan(&["--node", "rtx6000-8x-dp", "-v"]);
    assert!(old.contains("\nrtxpro6000-8x-dp "), "{old}");
    assert!(
        old.contains("\"rtx6000-8x-dp\" is now \"rtxpro6000-8x-dp\"")
            && old.contains("RTX 6000 Ada"),
        "{old}"
    );
}
