//! A bench table's Markdown rows, printed as they come and, where `GATE_CROSSOVER_OUT` names
//! a folder, written there as `table-NAME.md` at the end: the files the docs' tables and the
//! figures they quote are checked against (tests/it/bench_tables.rs). Each bench takes it with
//! `#[path = "common/table_file.rs"] mod table_file;` (a bench is a crate of its own).

use std::fmt::Display;

pub struct TableFile {
    name: String,
    text: String,
}

impl TableFile {
    /// A table named `name` (`7`, `R1`, `relative`): letters and digits only, so that
    /// tests/it/bench_tables.rs can read the file's name back.
    pub fn new(name: impl Display) -> TableFile {
        let name = name.to_string();
        assert!(
            !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric()),
            "a table's name is letters and digits: {name:?}"
        );
        TableFile {
            name,
            text: String::new(),
        }
    }

    /// Prints `line` and keeps it for the file.
    pub fn line(&mut self, line: impl AsRef<str>) {
        let line = line.as_ref();
        println!("{line}");
        self.text.push_str(line);
        self.text.push('\n');
    }

    /// Writes the rows where `GATE_CROSSOVER_OUT` says; exits 2 when it cannot.
    pub fn write(self) {
        let Ok(dir) = std::env::var("GATE_CROSSOVER_OUT") else {
            return;
        };
        let path = std::path::Path::new(&dir).join(format!("table-{}.md", self.name));
        if let Err(e) = std::fs::write(&path, &self.text) {
            eprintln!("{}: {e}", path.display());
            std::process::exit(2);
        }
    }
}
