//! The figures the crossover bench produces, in the docs and the README, against the tables it
//! wrote (issue 48). `GATE_CROSSOVER_OUT=benches/tables/gate_crossover GATE_CROSSOVER_TABLES=N
//! cargo test --bench gate_crossover` writes table N's rows to `table-N.md` there; each such
//! file must stand verbatim in docs/gate-calibration.md, and every figure a prose passage
//! quotes from it (a bold percentage between `<!-- bench: gate_crossover table N -->` and
//! `<!-- /bench -->`, in the README or any file of docs/) must be one of its cells.

use std::path::{Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The tables the benches wrote: (N, rows); N a number (gate_crossover, explain_blocks) or a
/// name (gate_runners: R1, R1b).
fn tables() -> Vec<(String, String)> {
    let dir = root().join("benches/tables/gate_crossover");
    let mut out = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let number = name
            .strip_prefix("table-")
            .and_then(|n| n.strip_suffix(".md"))
            .filter(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_alphanumeric()))
            .unwrap_or_else(|| panic!("{name}: not a table-N.md"))
            .to_string();
        out.push((number, read(&path)));
    }
    out.sort();
    out
}

/// The cells of a table's rows (percentages as printed, e.g. "1.10%"), and the figures of a
/// cell that holds two: "96.0% / 3.7%" (no-reg / inc) and "100.0% (100.0%)" (power, oracle)
/// give each of theirs too. A cell of blocks, "9.96 / 12", stays whole as well.
fn cells(rows: &str) -> Vec<String> {
    let mut out = Vec::new();
    for cell in rows.lines().flat_map(|l| l.split('|')).map(str::trim) {
        if cell.is_empty() {
            continue;
        }
        out.push(cell.to_string());
        if cell.contains('%') && cell.contains(' ') {
            for part in cell
                .split([' ', '/', '(', ')'])
                .filter(|p| p.ends_with('%'))
            {
                out.push(part.to_string());
            }
        }
    }
    out
}

/// Every `<!-- bench: gate_crossover table N -->` ... `<!-- /bench -->` passage of `text`:
/// (N, the passage).
fn passages(text: &str) -> Vec<(String, String)> {
    const OPEN: &str = "<!-- bench: gate_crossover table ";
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find(OPEN) {
        let after = &rest[at + OPEN.len()..];
        let close = after.find("-->").expect("an unclosed bench marker");
        let n = after[..close].trim().to_string();
        assert!(!n.is_empty(), "a bench marker without its table");
        let body = &after[close + 3..];
        let end = body
            .find("<!-- /bench -->")
            .expect("a bench passage without its end");
        out.push((n, body[..end].to_string()));
        rest = &body[end..];
    }
    out
}

/// The bold figures of a passage: percentages (`**1.10%**`, and each figure of
/// `**0.75-1.10%**`) and blocks as the tables print them (`**9.96 / 12**`, mean / p95, or
/// a mean alone, `**12.5**`).
fn bold_figures(passage: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (i, part) in passage.split("**").enumerate() {
        if i % 2 == 0 {
            continue;
        }
        let blocks = part.contains(" / ") || part.parse::<f64>().is_ok();
        if blocks
            && part
                .chars()
                .all(|c| c.is_ascii_digit() || " ./".contains(c))
        {
            out.push(part.to_string());
            continue;
        }
        if !part.ends_with('%') {
            continue;
        }
        let body = part.trim_end_matches('%');
        for figure in body.split('-') {
            out.push(format!("{figure}%"));
        }
    }
    out
}

fn documents() -> Vec<PathBuf> {
    let mut docs = vec![root().join("README.md")];
    for entry in std::fs::read_dir(root().join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            docs.push(path);
        }
    }
    docs
}

#[test]
fn the_docs_tables_are_the_benchs() {
    let docs = read(&root().join("docs/gate-calibration.md"));
    let tables = tables();
    assert!(
        !tables.is_empty(),
        "no table in benches/tables/gate_crossover"
    );
    for (n, rows) in &tables {
        assert!(
            docs.contains(rows.as_str()),
            "docs/gate-calibration.md does not hold table {n} as the bench wrote it:\n{rows}"
        );
    }
}

#[test]
fn every_quoted_figure_is_in_its_table() {
    let tables = tables();
    let mut quoted = 0;
    for doc in documents() {
        for (n, passage) in passages(&read(&doc)) {
            let (_, rows) = (tables.iter().find(|(t, _)| *t == n))
                .unwrap_or_else(|| panic!("{}: table {n} was not written", doc.display()));
            let cells = cells(rows);
            for figure in bold_figures(&passage) {
                assert!(
                    cells.contains(&figure),
                    "{}: {figure} is quoted from table {n} but is not one of its cells",
                    doc.display()
                );
                quoted += 1;
            }
        }
    }
    assert!(quoted > 0, "no figure quoted from the bench's tables");
}

#[test]
fn the_reader_finds_what_it_should() {
    let text = "a <!-- bench: gate_crossover table 9 --> **1.10%** and **0.75-1.05%**, \
                 **9.96 / 12** blocks, **12.5**, **not a figure**, target 1% <!-- /bench --> \
                 **9.9%**";
    let p = passages(text);
    assert_eq!(p.len(), 1);
    assert_eq!(p[0].0, "9");
    assert_eq!(
        bold_figures(&p[0].1),
        ["1.10%", "0.75%", "1.05%", "9.96 / 12", "12.5"]
    );
    assert_eq!(cells("| 1 / 9 | 1.10% | x |"), ["1 / 9", "1.10%", "x"]);
    assert_eq!(
        cells("| 96.0% / 3.7% | 100.0% (99.5%) |"),
        [
            "96.0% / 3.7%",
            "96.0%",
            "3.7%",
            "100.0% (99.5%)",
            "100.0%",
            "99.5%"
        ]
    );
}
