//! The seed runs, built into the binary: `plan --results seed:NAME` reads one without the
//! repository's `fixtures/seeds/` folder (after `cargo install`, from any folder), so "how many
//! days on this hardware?" has an answer before a run of one's own. The text is the committed
//! file's (`include_str!`), which src/plan/seeds.rs keeps equal to its transcription.

use std::path::Path;

use anyhow::{bail, Result};

use crate::record::RunResult;

/// What `--results` starts with to name a built-in seed run instead of a file.
pub const PREFIX: &str = "seed:";

/// Each seed run: its name (the file's, without `.json`) and the file's text.
const SEEDS: [(&str, &str); 2] = [
    (
        "rtxpro6000-4x-tp4-qwen3.5-122b",
        include_str!("../../fixtures/seeds/rtxpro6000-4x-tp4-qwen3.5-122b.json"),
    ),
    (
        "rtxpro6000-8x-dp-qwen3.6-27b-batch1",
        include_str!("../../fixtures/seeds/rtxpro6000-8x-dp-qwen3.6-27b-batch1.json"),
    ),
];

/// Seed names before issue 50 (see catalog::RENAMED_NODES), still read.
const RENAMED: [(&str, &str); 2] = [
    (
        "rtx6000-4x-tp4-qwen3.5-122b",
        "rtxpro6000-4x-tp4-qwen3.5-122b",
    ),
    (
        "rtx6000-8x-dp-qwen3.6-27b-batch1",
        "rtxpro6000-8x-dp-qwen3.6-27b-batch1",
    ),
];

/// The note for a `--results` that names a seed by its old name; None otherwise.
pub fn renamed_note(arg: &str) -> Option<String> {
    let name = arg.strip_prefix(PREFIX)?;
    let name = name.strip_suffix(".json").unwrap_or(name);
    let (old, new) = RENAMED.iter().find(|(old, _)| *old == name)?;
    Some(format!(
        "{PREFIX}{old} is now {PREFIX}{new} (the RTX PRO 6000 Blackwell; \"rtx6000\" is also the \
         older 48 GB RTX 6000 Ada): the old name still works"
    ))
}

/// The names `seed:NAME` takes.
pub fn names() -> Vec<&'static str> {
    SEEDS.iter().map(|(name, _)| *name).collect()
}

/// `--results ARG`: `seed:NAME` is a built-in seed run (`NAME.json` is taken too), anything
/// else a results file.
pub fn load(arg: &Path) -> Result<RunResult> {
    let Some(name) = arg.to_str().and_then(|a| a.strip_prefix(PREFIX)) else {
        return RunResult::load(arg);
    };
    let name = name.strip_suffix(".json").unwrap_or(name);
    let name = RENAMED
        .iter()
        .find(|(old, _)| *old == name)
        .map_or(name, |(_, new)| *new);
    let Some((_, text)) = SEEDS.iter().find(|(n, _)| *n == name) else {
        let known: Vec<String> = names().iter().map(|n| format!("{PREFIX}{n}")).collect();
        bail!(
            "no seed run {PREFIX}{}; built in: {}",
            crate::untrusted::for_terminal(name),
            known.join(", ")
        );
    };
    // Read as a file is: checked, and its derived figures computed here, never read.
    RunResult::from_text(text, &format!("the seed run {PREFIX}{name}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each built-in seed is the committed file as `RunResult::load` reads it, and every file
    /// of fixtures/seeds/ is built in.
    #[test]
    fn the_built_in_seeds_are_the_committed_files() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/seeds");
        let mut files: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter_map(|n| n.strip_suffix(".json").map(str::to_string))
            .collect();
        files.sort();
        let mut built_in = names();
        built_in.sort();
        assert_eq!(files, built_in);
        for name in names() {
            let from_file = RunResult::load(&dir.join(format!("{name}.json"))).unwrap();
            let built = load(Path::new(&format!("seed:{name}"))).unwrap();
            assert_eq!(
                serde_json::to_value(&built).unwrap(),
                serde_json::to_value(&from_file).unwrap(),
                "{name}"
            );
            let with_ext = load(Path::new(&format!("seed:{name}.json"))).unwrap();
            assert_eq!(with_ext.levels.len(), built.levels.len());
        }
        let old = load(Path::new("seed:rtx6000-4x-tp4-qwen3.5-122b")).unwrap();
        assert_eq!(old.levels.len(), 5);
        assert!(renamed_note("seed:rtx6000-4x-tp4-qwen3.5-122b.json").is_some());
        let err = load(Path::new("seed:nope")).unwrap_err().to_string();
        assert!(
            err.contains("seed:nope") && err.contains("seed:rtxpro6000-4x-tp4-qwen3.5-122b"),
            "{err}"
        );
    }
}
