//! The house follows the data flow (design.md): a module uses only modules on the floors
//! below its own, and no two modules use each other, at the top level or inside one.
//! Read from the sources' own `crate::` and `super::` paths (test code left out).
//!
//! Floors, top down: cli (the parser) -> commands -> bisect (a search of runs) -> runner ->
//! report -> gate | plan | load -> record -> stats, profile, sim, engine, exit, fsutil,
//! tokenize, untrusted, process.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Each top-level module's floor; a module may use only lower floors.
const FLOORS: &[(&str, u8)] = &[
    ("cli", 8),
    ("commands", 7),
    ("bisect", 6),
    ("runner", 5),
    ("report", 4),
    ("locks", 4),
    ("gate", 3),
    ("plan", 3),
    ("load", 3),
    ("record", 2),
    ("stats", 1),
    ("profile", 1),
    ("sim", 1),
    ("engine", 1),
    ("exit", 1),
    ("fsutil", 1),
    ("tokenize", 1),
    ("untrusted", 1),
    ("process", 1),
];

/// Leaves that use another leaf, each with its reason.
const LEAF_EDGES: &[(&str, &str)] = &[
    // A profile file is read with the bounded reader (a FIFO or /dev/zero is refused).
    ("profile", "fsutil"),
    // A profile's tokenizer may be a model id, found in the Hugging Face cache.
    ("profile", "tokenize"),
    // A tokenizer.json is read with the bounded reader.
    ("tokenize", "fsutil"),
    // The simulator counts prompt tokens with a model's tokenizer when given one.
    ("sim", "tokenize"),
    // A profile's comment notes may quote a server: written one line each (init -e).
    ("profile", "untrusted"),
    // `target.engine` is read as one of the engines (or "auto").
    ("profile", "engine"),
];

fn floor(module: &str) -> Option<u8> {
    FLOORS.iter().find(|(m, _)| *m == module).map(|(_, f)| *f)
}

/// Every .rs file under src/, with its module path (e.g. ["plan", "curve"]).
fn sources() -> Vec<(Vec<String>, PathBuf)> {
    fn walk(dir: &Path, prefix: &[String], out: &mut Vec<(Vec<String>, PathBuf)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if path.is_dir() {
                let mut p = prefix.to_vec();
                p.push(name);
                walk(&path, &p, out);
            } else if let Some(stem) = name.strip_suffix(".rs") {
                let mut p = prefix.to_vec();
                if stem != "mod" && stem != "lib" && stem != "main" {
                    p.push(stem.to_string());
                }
                out.push((p, path));
            }
        }
    }
    let mut out = Vec::new();
    walk(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &[],
        &mut out,
    );
    out
}

/// The source without its tests (everything from the first `#[cfg(test)]` on) and comments.
fn code(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let text = text.split("#[cfg(test)]").next().unwrap_or("");
    text.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Module paths a file names: `crate::a::b` and `super::b` (resolved), including the
/// members of grouped imports such as `crate::{a, b::c}`.
fn references(module: &[String], text: &str) -> BTreeSet<Vec<String>> {
    let mut out = BTreeSet::new();
    let bytes = text.as_bytes();
    for (root, start) in [("crate::", 0usize), ("super::", 1)] {
        let mut from = 0;
        while let Some(i) = text[from..].find(root) {
            let at = from + i;
            from = at + root.len();
            // `x::crate::` is no root, nor the second `super::` of `super::super::`.
            if at > 0 && (bytes[at - 1].is_ascii_alphanumeric() || b"_:".contains(&bytes[at - 1])) {
                continue;
            }
            let mut rest = &text[from..];
            let base: Vec<String> = if start == 0 {
                Vec::new()
            } else {
                // `super` of a file module is its folder (mod.rs is the folder itself);
                // each further `super::` goes one folder up.
                let mut up = 1;
                while let Some(r) = rest.strip_prefix("super::") {
                    rest = r;
                    up += 1;
                }
                module[..module.len().saturating_sub(up)].to_vec()
            };
            for path in expand(rest) {
                let mut full = base.clone();
                full.extend(path);
                out.insert(full);
            }
        }
    }
    out
}

/// `a::b::{c, d::e}` -> [[a, b, c], [a, b, d, e]]; `a::b` -> [[a, b]].
fn expand(rest: &str) -> Vec<Vec<String>> {
    let mut path = Vec::new();
    let mut s = rest;
    loop {
        if let Some(inner) = s.strip_prefix('{') {
            let mut depth = 1;
            let mut end = 0;
            for (i, c) in inner.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            end = i;
                            break;
                        }
                    }
                    _ => {}
                }
            }
            let mut out = Vec::new();
            let mut depth = 0;
            let mut item = String::new();
            for c in inner[..end].chars().chain([',']) {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    _ => {}
                }
                if c == ',' && depth == 0 {
                    let item_trim = item.trim().to_string();
                    if !item_trim.is_empty() {
                        for tail in expand(&item_trim) {
                            let mut p = path.clone();
                            p.extend(tail);
                            out.push(p);
                        }
                    }
                    item.clear();
                } else {
                    item.push(c);
                }
            }
            return out;
        }
        let ident: String = s
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if ident.is_empty() || ident == "self" {
            return vec![path];
        }
        path.push(ident.clone());
        s = &s[ident.len()..];
        match s.strip_prefix("::") {
            Some(next) => s = next,
            None => return vec![path],
        }
    }
}

/// The module (file) among `known` that `path` lands in: its longest known prefix.
fn owner(path: &[String], known: &BTreeSet<Vec<String>>) -> Option<Vec<String>> {
    (1..=path.len())
        .rev()
        .map(|n| path[..n].to_vec())
        .find(|p| known.contains(p))
}

fn graph() -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    let files = sources();
    let known: BTreeSet<Vec<String>> = files.iter().map(|(m, _)| m.clone()).collect();
    let mut edges = BTreeMap::new();
    for (module, path) in &files {
        if module.last().is_some_and(|m| m.ends_with("props")) {
            continue; // property tests: test code
        }
        let mut used = BTreeSet::new();
        for r in references(module, &code(path)) {
            if let Some(target) = owner(&r, &known) {
                if &target != module && !target.is_empty() {
                    used.insert(target);
                }
            }
        }
        edges.insert(module.clone(), used);
    }
    edges
}

#[test]
fn top_level_modules_use_only_the_floors_below_them() {
    let mut wrong = Vec::new();
    for (module, used) in graph() {
        let Some(me) = module.first() else { continue };
        let Some(my_floor) = floor(me) else {
            wrong.push(format!("src/{me}: not on any floor (add it to FLOORS)"));
            continue;
        };
        for target in used {
            let other = &target[0];
            if other == me {
                continue;
            }
            let Some(their_floor) = floor(other) else {
                wrong.push(format!(
                    "{}: uses {other}, which is on no floor",
                    module.join("::")
                ));
                continue;
            };
            let allowed = their_floor < my_floor && !(their_floor == 1 && my_floor == 1)
                || LEAF_EDGES.contains(&(me.as_str(), other.as_str()));
            if !allowed {
                wrong.push(format!(
                    "{} (floor {my_floor}) uses {} (floor {their_floor})",
                    module.join("::"),
                    target.join("::")
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports against the floors:\n{}",
        wrong.join("\n")
    );
}

/// The one module of commands/ that every command may use: the flag groups several commands
/// take, each converted there into the typed setup the library takes.
const SHARED_FLAGS: &str = "flags";

/// commands/ is parse -> call -> print: a command calls the library, never another command
/// (what two commands share lives below, in runner/ or the floors under it).
#[test]
fn commands_do_not_use_each_other() {
    let mut wrong = Vec::new();
    for (module, used) in graph() {
        if module.first().map(String::as_str) != Some("commands") || module.len() < 2 {
            continue;
        }
        for target in used {
            let is_command = target.first().map(String::as_str) == Some("commands");
            let other = target.get(1);
            if is_command && other.is_some_and(|o| *o != module[1] && o != SHARED_FLAGS) {
                wrong.push(format!("{} uses {}", module.join("::"), target.join("::")));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "commands that use another command (move what they share below commands/):\n{}",
        wrong.join("\n")
    );
}

/// Nodes of `edges` that can reach themselves, each with one path back.
fn cycles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let mut found = Vec::new();
    for start in edges.keys() {
        // Depth-first from `start`, keeping the path, until `start` comes round again.
        let mut stack = vec![(start.clone(), vec![start.clone()])];
        let mut seen = BTreeSet::new();
        while let Some((node, path)) = stack.pop() {
            for next in edges.get(&node).into_iter().flatten() {
                if next == start {
                    found.push(format!("{} -> {start}", path.join(" -> ")));
                } else if seen.insert(next.clone()) {
                    let mut p = path.clone();
                    p.push(next.clone());
                    stack.push((next.clone(), p));
                }
            }
        }
    }
    found
}

#[test]
fn no_modules_use_each_other() {
    let g = graph();
    // Across the top level: a module's files together.
    let mut top: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    // Inside one top-level module: its files, a folder's mod.rs apart from its own files.
    let mut inner: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (a, used) in &g {
        let Some(ta) = a.first() else { continue };
        top.entry(ta.clone()).or_default();
        for b in used {
            if b[0] != *ta {
                top.entry(ta.clone()).or_default().insert(b[0].clone());
            } else if !a.starts_with(b) && !b.starts_with(a) {
                inner.entry(a.join("::")).or_default().insert(b.join("::"));
            }
        }
    }
    let mut found = cycles(&top);
    found.extend(cycles(&inner));
    assert!(
        found.is_empty(),
        "modules that use each other:\n{}",
        found.join("\n")
    );
}

/// The engines (src/engine/) are the one list every other module reads, so the list itself
/// reads nothing: adding an engine never touches another module.
#[test]
fn the_engine_list_uses_nothing_else() {
    let g = graph();
    let in_engine = |m: &Vec<String>| m.first().is_some_and(|top| top == "engine");
    let engine_files: Vec<_> = g.keys().filter(|m| in_engine(m)).collect();
    assert!(
        engine_files.len() > 1,
        "no src/engine/ files: {engine_files:?}"
    );
    let outside: Vec<String> = g
        .iter()
        .filter(|(m, _)| in_engine(m))
        .flat_map(|(m, used)| {
            used.iter()
                .filter(|t| !in_engine(t))
                .map(move |t| format!("{} uses {}", m.join("::"), t.join("::")))
        })
        .collect();
    assert!(outside.is_empty(), "{}", outside.join("\n"));
}

#[test]
fn the_reader_sees_grouped_and_relative_imports() {
    let module = vec!["plan".to_string(), "curve".to_string()];
    let refs = references(
        &module,
        "use crate::{record::RunResult, stats::{fit_usl, Spread}};\nuse super::figures::Basis;",
    );
    let want: BTreeSet<Vec<String>> = [
        vec!["record", "RunResult"],
        vec!["stats", "fit_usl"],
        vec!["stats", "Spread"],
        vec!["plan", "figures", "Basis"],
    ]
    .iter()
    .map(|p| p.iter().map(|s| s.to_string()).collect())
    .collect();
    assert_eq!(refs, want);
}

#[test]
fn the_reader_climbs_nested_folders() {
    let module: Vec<String> = ["load", "run", "sweep"].map(String::from).to_vec();
    let refs = references(
        &module,
        "use super::trial::Asked;\nuse super::super::wire::http;\nuse crate::load::stream::{client::send, outcome};",
    );
    let want: BTreeSet<Vec<String>> = [
        vec!["load", "run", "trial", "Asked"],
        vec!["load", "wire", "http"],
        vec!["load", "stream", "client", "send"],
        vec!["load", "stream", "outcome"],
    ]
    .iter()
    .map(|p| p.iter().map(|s| s.to_string()).collect())
    .collect();
    assert_eq!(refs, want);
}

/// load/'s rooms, in a request's path: workload/ (what to ask), run/ (when and how many),
/// stream/ (one request and its answer), wire/ (body, connections, clock).
const LOAD_ROOMS: &[&str] = &["wire", "stream", "workload", "run"];

/// The wire is the lowest room: it carries bytes and knows nothing of answers or runs.
/// (workload/ is not forbidden: wire/body.rs writes a `workload::prompts::Prompt` into the
/// request body.)
const WIRE_MAY_NOT_USE: &[&str] = &["stream", "run"];

#[test]
fn load_has_its_rooms_and_the_wire_is_the_lowest() {
    let g = graph();
    let room_of = |m: &Vec<String>| (m.len() > 2 && m[0] == "load").then(|| m[1].clone());
    for room in LOAD_ROOMS {
        let files = g
            .keys()
            .filter(|m| room_of(m).as_deref() == Some(*room))
            .count();
        assert!(files >= 3, "src/load/{room}/ holds {files} files");
    }
    let wrong: Vec<String> = g
        .iter()
        .filter(|(m, _)| room_of(m).as_deref() == Some("wire"))
        .flat_map(|(m, used)| {
            used.iter()
                .filter(|t| room_of(t).is_some_and(|r| WIRE_MAY_NOT_USE.contains(&r.as_str())))
                .map(move |t| format!("{} uses {}", m.join("::"), t.join("::")))
        })
        .collect();
    assert!(
        wrong.is_empty(),
        "the wire uses a room above it:\n{}",
        wrong.join("\n")
    );
}

/// What a format file under report/export/ may use besides record/, gate/ and the leaves:
/// its folder's mod.rs (the trait and the shared figures) and the verdict table's one rule
/// for bounds and its words (report/tables.rs), so JUnit says what the verdict says.
const EXPORT_MAY_USE: &[&[&str]] = &[&["report", "export"], &["report", "tables"]];

#[test]
fn each_export_format_uses_only_record_gate_and_its_trait() {
    let mut wrong = Vec::new();
    let mut formats = 0;
    for (module, used) in graph() {
        if module.len() != 3 || module[..2] != ["report", "export"] {
            continue;
        }
        formats += 1;
        for target in used {
            let allowed = match target[0].as_str() {
                "record" | "gate" => true,
                "report" => EXPORT_MAY_USE.iter().any(|m| target == *m),
                other => floor(other) == Some(1),
            };
            if !allowed {
                wrong.push(format!("{} uses {}", module.join("::"), target.join("::")));
            }
        }
    }
    assert!(
        formats >= 4,
        "report/export/ holds the format files ({formats})"
    );
    assert!(
        wrong.is_empty(),
        "an export format uses more than record/ and gate/ (or another format):\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_export_rule_catches_a_format_that_uses_another() {
    let module: Vec<String> = ["report", "export", "bmf"].map(String::from).to_vec();
    let refs = references(
        &module,
        "use super::junit::junit;\nuse crate::report::console;",
    );
    let known: BTreeSet<Vec<String>> =
        [vec!["report", "export", "junit"], vec!["report", "console"]]
            .iter()
            .map(|p| p.iter().map(|s| s.to_string()).collect())
            .collect();
    let owners: Vec<Vec<String>> = refs.iter().filter_map(|r| owner(r, &known)).collect();
    assert_eq!(owners.len(), 2);
    for target in owners {
        assert!(!EXPORT_MAY_USE.iter().any(|m| target == *m), "{target:?}");
    }
}

/// What renderers may not use: the computations whose results they draw and print. A chart
/// and the plan once showed two different scaling fits (issue 28): each figure is computed
/// once, with the record (`record::analysis`: peak, knee, drift, the planner's USL fit) or
/// by its job (`plan`, `gate`), and reaches `report/` as data. `stats` helpers that summarise
/// the values drawn (means, intervals, percentiles) stay allowed: they fit nothing.
const FITTING: &[(&[&str], &str)] = &[
    (
        &["stats", "usl"],
        "the USL fit and its bootstrap: record::analysis and plan",
    ),
    (
        &["stats", "fit_usl"],
        "the USL fit: record::analysis::scaling_of",
    ),
    (
        &["stats", "bootstrap_throughput_at"],
        "the planner's bootstrap: plan::curve",
    ),
    (
        &["stats", "UslFit"],
        "a raw fit: renderers draw record::analysis::ScalingCurve or plan's FitReport",
    ),
    (
        &["stats", "changepoint"],
        "change points across sessions: gate::trend",
    ),
    (
        &["stats", "drift_check"],
        "the drift: RunResult::analyse stores it",
    ),
    (
        &["stats", "decision", "drift_check"],
        "the drift: RunResult::analyse stores it",
    ),
    (
        &["stats", "decision", "drift_check_at"],
        "the drift: RunResult::analyse stores it",
    ),
    (
        &["plan", "curve", "estimate"],
        "the planner's estimate: plan",
    ),
    (
        &["record", "analysis", "scaling_of"],
        "the scaling fit: read RunResult::analysis",
    ),
    (
        &["record", "analysis", "fit_of"],
        "the scaling fit: read RunResult::analysis",
    ),
    (
        &["record", "analysis", "fit_points"],
        "the fit's points: read RunResult::analysis",
    ),
    (
        &["record", "analysis", "points_per_replica"],
        "the fit's points: read RunResult::analysis",
    ),
    (
        &["record", "analysis", "wave_factor"],
        "the fit's steady rates: read RunResult::analysis",
    ),
    (
        &["record", "analysis", "shape"],
        "peak and knee: read RunResult::analysis",
    ),
];

/// Methods that compute a record's analysis; only the record's makers call them.
const ANALYSING_CALLS: &[&str] = &[".analyse()", ".drift()"];

/// A file of tests kept beside its module (`compare_tests.rs`, `props.rs`).
fn is_test_file(module: &[String]) -> bool {
    module
        .last()
        .is_some_and(|m| m.ends_with("tests") || m.ends_with("props"))
}

/// `name(` with no identifier character before `name`.
fn calls(text: &str, name: &str) -> bool {
    let pattern = format!("{name}(");
    text.match_indices(&pattern).any(|(at, _)| {
        at == 0 || {
            let b = text.as_bytes()[at - 1];
            !(b.is_ascii_alphanumeric() || b == b'_')
        }
    })
}

#[test]
fn renderers_import_no_statistics_fitting() {
    let mut wrong = Vec::new();
    for (module, path) in sources() {
        if module.first().map(String::as_str) != Some("report") || is_test_file(&module) {
            continue;
        }
        let text = code(&path);
        let refs = references(&module, &text);
        for (forbidden, why) in FITTING {
            let named = refs.iter().any(|r| {
                r.starts_with(&forbidden.iter().map(|s| s.to_string()).collect::<Vec<_>>())
            });
            let last = forbidden[forbidden.len() - 1];
            let called = last.starts_with(|c: char| c.is_ascii_lowercase()) && calls(&text, last);
            if named || called {
                wrong.push(format!(
                    "{}: uses {} ({why})",
                    module.join("::"),
                    forbidden.join("::")
                ));
            }
        }
        for call in ANALYSING_CALLS {
            if text.contains(call) {
                wrong.push(format!(
                    "{}: calls {call}: read RunResult::analysis and RunResult::drift instead",
                    module.join("::")
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "renderers computing what they should read:\n{}",
        wrong.join("\n")
    );
}

/// The gate reads the drift the record stores; it computes no second one.
#[test]
fn the_gate_reads_the_stored_drift() {
    for (module, path) in sources() {
        if module.first().map(String::as_str) != Some("gate") || is_test_file(&module) {
            continue;
        }
        let text = code(&path);
        for call in ANALYSING_CALLS {
            assert!(!text.contains(call), "{}: calls {call}", module.join("::"));
        }
        assert!(!calls(&text, "drift_check"), "{}", module.join("::"));
    }
}

#[test]
fn the_fitting_rule_sees_calls_and_paths() {
    assert!(calls("let f = fit_usl(&p);", "fit_usl"));
    assert!(!calls("let f = my_fit_usl(&p);", "fit_usl"));
    let module = vec!["report".to_string(), "run".to_string()];
    let refs = references(&module, "use crate::stats::{usl::UslFit, Spread};");
    assert!(refs.contains(&vec![
        "stats".to_string(),
        "usl".to_string(),
        "UslFit".to_string()
    ]));
}

/// The longest a source file may be, its tests included: past it a file holds more than one
/// job (split it by job, as record/ and gate/baseline/ are).
const MAX_FILE_LINES: usize = 800;
/// The longest a function may be, from its `fn` line to its closing brace: past it a
/// function does several things (give each its name).
const MAX_FN_LINES: usize = 120;

#[test]
fn no_source_file_is_over_800_lines() {
    let long: Vec<String> = (sources().into_iter())
        .filter_map(|(_, path)| {
            let n = std::fs::read_to_string(&path).unwrap().lines().count();
            (n > MAX_FILE_LINES).then(|| format!("{} ({n} lines)", path.display()))
        })
        .collect();
    assert!(
        long.is_empty(),
        "files over {MAX_FILE_LINES} lines:\n{}",
        long.join("\n")
    );
}

/// The longest a file of commands/ may be: a command parses, calls the library and prints
/// (issue 49); more than this and it is doing a lower floor's work.
const MAX_COMMAND_LINES: usize = 400;

#[test]
fn command_files_stay_under_400_lines() {
    let long: Vec<String> = (sources().into_iter())
        .filter(|(module, _)| module.first().map(String::as_str) == Some("commands"))
        .filter_map(|(_, path)| {
            let n = std::fs::read_to_string(&path).unwrap().lines().count();
            (n > MAX_COMMAND_LINES).then(|| format!("{} ({n} lines)", path.display()))
        })
        .collect();
    assert!(
        long.is_empty(),
        "commands/ files over {MAX_COMMAND_LINES} lines (move the work below):\n{}",
        long.join("\n")
    );
}

/// `text` without the items marked `#[cfg(test)]`: each such item (a `use` or `mod x;` line,
/// or a block up to its closing brace at the item's indentation) is left out, and the rest
/// of the file kept (an attribute near the top marks one item, not the file).
fn without_test_items(text: &str) -> Vec<&str> {
    let lines: Vec<&str> = text.lines().collect();
    let mut kept = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if lines[i].trim() != "#[cfg(test)]" {
            kept.push(lines[i]);
            i += 1;
            continue;
        }
        // The item: past its other attributes, to its `;` or its closing brace.
        let mut j = i + 1;
        while j < lines.len() && lines[j].trim_start().starts_with("#[") {
            j += 1;
        }
        let Some(item) = lines.get(j) else { break };
        let indent = &item[..item.len() - item.trim_start().len()];
        let close = format!("{indent}}}");
        let end = match item.trim_end().ends_with(';') {
            true => j,
            false => (j..lines.len())
                .find(|&k| {
                    lines[k].trim_end() == close || lines[k].trim_end() == format!("{close};")
                })
                .unwrap_or(lines.len() - 1),
        };
        i = end + 1;
    }
    kept
}

/// Each function in `text` (outside `#[cfg(test)]` items) with its length in lines: from a
/// line whose code starts `fn` (after `pub`, `async`, `const`...) to the first line after it
/// that closes at the same indentation. Declarations without a body are not functions.
fn function_lengths(text: &str) -> Vec<(String, usize)> {
    let lines = without_test_items(text);
    let mut found = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let indent = &line[..line.len() - line.trim_start().len()];
        let mut rest = line.trim_start();
        for prefix in [
            "pub(crate) ",
            "pub(super) ",
            "pub ",
            "const ",
            "async ",
            "unsafe ",
        ] {
            rest = rest.strip_prefix(prefix).unwrap_or(rest);
        }
        let Some(signature) = rest.strip_prefix("fn ") else {
            continue;
        };
        let name: String = (signature.chars())
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let body = (i..lines.len()).find(|&j| {
            let l = lines[j].trim_end();
            l.ends_with('{') || l.ends_with(';')
        });
        if body.is_none_or(|j| lines[j].trim_end().ends_with(';')) {
            continue;
        }
        let close = format!("{indent}}}");
        if let Some(end) = (i + 1..lines.len()).find(|&j| lines[j] == close) {
            found.push((name, end - i + 1));
        }
    }
    found
}

#[test]
fn no_function_is_over_120_lines() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut long = Vec::new();
    for (_, path) in sources() {
        let file = path.strip_prefix(root).unwrap().display().to_string();
        let text = std::fs::read_to_string(&path).unwrap();
        for (name, n) in function_lengths(&text) {
            if n > MAX_FN_LINES {
                long.push(format!("{file} {name} ({n} lines)"));
            }
        }
    }
    assert!(
        long.is_empty(),
        "functions over {MAX_FN_LINES} lines:\n{}",
        long.join("\n")
    );
}

#[test]
fn the_length_rule_measures_functions_whole() {
    let text = "#[cfg(test)]\nuse std::fmt;\n\
                pub async fn a() {\n    let x = {\n        1\n    };\n}\n\
                trait T {\n    fn declared(&self);\n    fn given(&self) {\n    }\n}\n\
                #[cfg(test)]\nfn in_tests() {\n}\n\
                fn after_a_test_item() {\n}\n\
                #[cfg(test)]\n#[path = \"t.rs\"]\nmod tests {\n    fn helper() {\n    }\n}\n";
    // A `#[cfg(test)]` on one item near the top leaves the rest of the file measured.
    assert_eq!(
        function_lengths(text),
        [
            ("a".to_string(), 5),
            ("given".to_string(), 2),
            ("after_a_test_item".to_string(), 2)
        ]
    );
}

/// The end-to-end test files (tests/it/, not its folders) that call the timing lock.
fn files_calling_the_timing_lock(dir: &Path) -> Vec<String> {
    let mut found: Vec<String> = (std::fs::read_dir(dir).unwrap())
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "rs"))
        .filter(|path| {
            let text = std::fs::read_to_string(path).unwrap();
            text.contains("timing_lock()") || text.contains("timing_lock_alone()")
        })
        .map(|path| path.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    found.sort();
    found
}

/// A timed test outside tests/it/alone/ would start among the tests that share the machine,
/// and every test thread would wait while it waits for them to end (alone/mod.rs).
#[test]
fn timed_tests_are_under_alone() {
    let it = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it");
    let stray: Vec<String> = files_calling_the_timing_lock(&it)
        .into_iter()
        .filter(|name| !["common.rs", "layout.rs"].contains(&name.as_str()))
        .collect();
    assert!(
        stray.is_empty(),
        "move the timed tests of these files to tests/it/alone/: {stray:?}"
    );
    // The search finds the calls it looks for.
    let timed = files_calling_the_timing_lock(&it.join("alone"));
    assert!(timed.contains(&"gate_cli.rs".to_string()), "{timed:?}");
    assert!(timed.contains(&"honest_gate.rs".to_string()), "{timed:?}");
}

/// Files below commands/ that still hold a clap type, each with its reason: none (the export
/// flags, generated from report/export's registry, live in commands/flags/export.rs).
const CLAP_BELOW_COMMANDS: &[&str] = &[];

/// Flags are parsed on the top floor: commands/ turns them into the typed setup the library
/// takes (commands/flags.rs), so nothing below sees a clap type or a derive of one.
#[test]
fn no_clap_type_below_commands() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut wrong = Vec::new();
    for (module, path) in sources() {
        let top = module.first().map(String::as_str);
        if matches!(top, None | Some("cli") | Some("commands")) {
            continue; // main.rs, lib.rs, the parser and the commands
        }
        let file = path.strip_prefix(&src).unwrap().display().to_string();
        if CLAP_BELOW_COMMANDS.contains(&file.as_str()) {
            continue;
        }
        let text = code(&path);
        if ["clap::", "use clap", "#[arg(", "#[command("]
            .iter()
            .any(|c| text.contains(c))
        {
            wrong.push(file);
        }
    }
    assert!(
        wrong.is_empty(),
        "clap types below commands/ (move the flags to commands/, pass a typed value down):\n{}",
        wrong.join("\n")
    );
}

/// Folders whose mod.rs defines, by design, what their files share: the engines' `Spec` and
/// its parts beside the `engines!` list, the export trait beside the `EXPORTERS` registry, and
/// the profile type whose sections are its files.
const DEFINED_IN_MOD: &[&[&str]] = &[&["engine"], &["report", "export"], &["profile"]];

/// The names a folder's mod.rs itself defines (outside its tests), not those it re-exports.
fn defined_in_mod(path: &Path) -> BTreeSet<String> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut names = BTreeSet::new();
    for line in without_test_items(&text) {
        let Some(rest) = line.strip_prefix("pub ") else {
            continue;
        };
        for kind in [
            "struct ", "enum ", "fn ", "trait ", "const ", "type ", "static ",
        ] {
            if let Some(name) = rest.strip_prefix(kind) {
                let name: String = (name.chars())
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                names.insert(name);
            }
        }
    }
    names
}

/// A file takes what it uses from the file that defines it, never back from its folder's
/// mod.rs: a type defined in mod.rs and imported by the folder's files is an arrow up inside
/// the folder (gate/mod.rs held `Verdict`, which every file of gate/ imported back).
#[test]
fn files_import_from_defining_files_not_from_their_folder() {
    let files = sources();
    let known: BTreeSet<Vec<String>> = files.iter().map(|(m, _)| m.clone()).collect();
    let mod_files: BTreeMap<Vec<String>, BTreeSet<String>> = (files.iter())
        .filter(|(_, p)| p.file_name().is_some_and(|n| n == "mod.rs"))
        .map(|(m, p)| (m.clone(), defined_in_mod(p)))
        .collect();
    let mut wrong = BTreeSet::new();
    for (module, path) in &files {
        if is_test_file(module) {
            continue;
        }
        for r in references(module, &code(path)) {
            let Some(folder) = owner(&r, &known) else {
                continue;
            };
            let upward = module.starts_with(&folder) && *module != folder;
            let allowed = DEFINED_IN_MOD.iter().any(|f| folder == *f);
            let defined = mod_files.get(&folder);
            if let (true, false, Some(names), Some(name)) =
                (upward, allowed, defined, r.get(folder.len()))
            {
                if names.contains(name) {
                    wrong.insert(format!("{} uses {}", module.join("::"), r.join("::")));
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "files that import from their folder's mod.rs what it defines (move it to a file of \
         its own and import it from there):\n{}",
        wrong.into_iter().collect::<Vec<_>>().join("\n")
    );
}

/// Where plan/ may still spell a flag of throughline's own command line, by file, each with
/// its reason. Everything else in plan/ names the part of the question in words and tags a
/// refusal with a `plan::field::Field`, which commands/plan.rs turns into the flag. Three
/// kinds are kept: (engine) a served engine's flags that plan/fit.rs reads from a server
/// command line and that happen to share a name with one of ours; (answer) the plan's printed
/// and plan.json text, which says which flag set a limit or what to pass to change it (kept
/// word for word: the answer is unchanged); (next) a refusal's advice of what to type next.
const PLAN_FLAGS_ALLOWED: &[(&str, &[&str])] = &[
    // (engine) `--model`, `--quantization` of vLLM/SGLang; (next) throughline's `--slots`.
    ("plan/fit.rs", &["--model", "--quantization", "--slots"]),
    // (answer) "planned at the lowest level" and the row's `limited_by`.
    ("plan/curve/choose.rs", &["--max-latency"]),
    // (answer) a note, and the row's `how` ("--max-concurrency 32", tests/it/plan_cli.rs).
    (
        "plan/curve/mod.rs",
        &[
            "--max-latency",
            "--avg-output-tokens",
            "--completions",
            "--max-concurrency",
        ],
    ),
    // (next) a config.json that cannot say its parameters or its format.
    (
        "plan/facts.rs",
        &["--params", "--active-params", "--quantization"],
    ),
    // (answer) a row's warning and infeasible reason.
    ("plan/finish.rs", &["--max-latency", "--max-concurrency"]),
    // (next) the estimate's node; (answer) the comparison's advice.
    (
        "plan/own_estimate.rs",
        &["--compare-node", "--node", "--sustained"],
    ),
    // (answer) notes; (next) nothing to plan from.
    (
        "plan/project.rs",
        &[
            "--avg-input-tokens",
            "--input-length",
            "--lengths-from",
            "--completions",
            "--avg-output-tokens",
            "--sustained",
            "--results",
            "--model",
        ],
    ),
    // (next) the run's node; (answer) the override warning and the price's note.
    (
        "plan/query.rs",
        &[
            "--model-config",
            "--node",
            "--gpus-per-node",
            "--replicas-per-node",
            "--results",
            "--gpu",
            "--usd-per-node-hour",
        ],
    ),
    // (next) a run of another model, a replica too small, the model to plan for.
    (
        "plan/rows.rs",
        &[
            "--results",
            "--gpus-per-node",
            "--replicas-per-node",
            "--quantization",
            "--model",
        ],
    ),
    // (next) a profile without output lengths.
    ("plan/lengths.rs", &["--output-length"]),
];

/// Every long flag of throughline's command line, all subcommands.
fn our_flags() -> BTreeSet<String> {
    fn walk(c: &clap::Command, out: &mut BTreeSet<String>) {
        for a in c.get_arguments() {
            if let Some(long) = a.get_long() {
                out.insert(format!("--{long}"));
            }
        }
        for s in c.get_subcommands() {
            walk(s, out);
        }
    }
    let mut out = BTreeSet::new();
    walk(
        &<throughline::cli::Cli as clap::CommandFactory>::command(),
        &mut out,
    );
    out
}

/// Each `--word` in `text` that is one of `flags`, with its count.
fn flags_in(text: &str, flags: &BTreeSet<String>) -> BTreeMap<String, usize> {
    let mut found = BTreeMap::new();
    for (i, _) in text.match_indices("--") {
        let boundary = i == 0 || !text[..i].ends_with(|c: char| c.is_alphanumeric() || c == '-');
        let word: String = text[i + 2..]
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-')
            .collect();
        let flag = format!("--{}", word.trim_end_matches('-'));
        if boundary && flags.contains(&flag) {
            *found.entry(flag).or_default() += 1;
        }
    }
    found
}

/// The planner takes a typed question (plan::query::PlanQuery, built once in
/// commands/plan.rs, each value read by clap), so plan/ spells no flag of ours but those in
/// [`PLAN_FLAGS_ALLOWED`]; and no entry there is stale (each is still used).
#[test]
fn the_planner_spells_no_flag_of_ours_but_the_allowed() {
    let flags = our_flags();
    assert!(
        flags.contains("--deadline") && flags.contains("--endpoint"),
        "{flags:?}"
    );
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let (mut wrong, mut used) = (Vec::new(), BTreeSet::new());
    for (module, path) in sources() {
        if module.first().map(String::as_str) != Some("plan") || is_test_file(&module) {
            continue;
        }
        let file = path.strip_prefix(&src).unwrap().display().to_string();
        let allowed = PLAN_FLAGS_ALLOWED
            .iter()
            .find(|(f, _)| *f == file)
            .map_or(&[][..], |(_, a)| a);
        for (flag, n) in flags_in(&code(&path), &flags) {
            match allowed.contains(&flag.as_str()) {
                true => drop(used.insert((file.clone(), flag))),
                false => wrong.push(format!("{file}: {flag} ({n}x)")),
            }
        }
    }
    let stale: Vec<String> = PLAN_FLAGS_ALLOWED
        .iter()
        .flat_map(|(f, a)| a.iter().map(move |x| (f.to_string(), x.to_string())))
        .filter(|p| !used.contains(p))
        .map(|(f, x)| format!("{f}: {x}"))
        .collect();
    assert!(
        wrong.is_empty(),
        "plan/ names flags of ours (say the field in words; tag a refusal with \
         plan::field::Field):\n{}",
        wrong.join("\n")
    );
    assert!(
        stale.is_empty(),
        "allowed but unused:\n{}",
        stale.join("\n")
    );
}

#[test]
fn the_flag_rule_sees_flags_in_text_and_not_inside_words() {
    let flags: BTreeSet<String> = ["--deadline", "--model"].map(String::from).into();
    let found = flags_in(
        "\"--deadline 2d\", \"--model-path x\", \"a--model\", \"(--model NAME)\", \"--max-{}\"",
        &flags,
    );
    assert_eq!(found.get("--deadline"), Some(&1));
    assert_eq!(found.get("--model"), Some(&1), "{found:?}");
}
