//! The docs' `plan` example runs as a user who ran `cargo install` would run it: from a
//! folder that holds nothing of the repository. The example is read from docs/plan.md ("## The
//! capacity plan", moved there from the README), so the test follows the docs; and the
//! README's own one-line example plans too.

use crate::common::*;

/// The first `$ throughline plan ...` command of the section (its `\` continuations joined)
/// and the line the README shows it printing first.
fn readme_example() -> (Vec<String>, String) {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/plan.md")).unwrap();
    let section = readme
        .split("\n## The capacity plan\n")
        .nth(1)
        .expect("docs/plan.md has `## The capacity plan`");
    let mut lines = section
        .lines()
        .skip_while(|l| !l.starts_with("$ throughline plan "));
    let mut command = String::new();
    for line in lines.by_ref() {
        let (part, more) = match line.trim_end().strip_suffix('\\') {
            Some(p) => (p, true),
            None => (line, false),
        };
        command.push_str(part.trim());
        command.push(' ');
        if !more {
            break;
        }
    }
    let first = lines.next().expect("the example's output").to_string();
    let words: Vec<String> = command.split_whitespace().map(str::to_string).collect();
    assert_eq!(words[..3], ["$", "throughline", "plan"], "{command}");
    // Split at blanks: the example quotes nothing a shell would expand.
    assert!(!command[1..].contains(['\'', '"', '$', '`']), "{command}");
    (words[2..].to_vec(), first)
}

#[test]
fn the_readme_plan_example_runs_from_any_folder() {
    let (args, first) = readme_example();
    let dir = tempfile::tempdir().unwrap();
    let o = command()
        .args(&args)
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(code(&o), 0, "throughline {}\n{}", args.join(" "), text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(out.lines().next(), Some(first.as_str()), "{out}");
}

/// Every seed run of fixtures/seeds/ is built in by name: `plan --help` lists each, and each
/// plans from an empty folder; an unknown name is refused with the names there are.
#[test]
fn every_seed_run_is_built_in_by_name() {
    let seeds = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/seeds");
    let mut names: Vec<String> = std::fs::read_dir(seeds)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter_map(|n| n.strip_suffix(".json").map(str::to_string))
        .collect();
    names.sort();
    assert!(names.len() >= 2, "{names:?}");
    let help = run(&["plan", "--help"]);
    let help = String::from_utf8_lossy(&help.stdout).into_owned();
    let dir = tempfile::tempdir().unwrap();
    for name in &names {
        assert!(
            help.contains(&format!("seed:{name}")) || help.contains(name.as_str()),
            "{name} not in plan --help:\n{help}"
        );
        let o = command()
            .args([
                "plan",
                "--results",
                &format!("seed:{name}"),
                "--output-tokens",
                "1e9",
            ])
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert_eq!(code(&o), 0, "seed:{name}\n{}", text(&o));
    }
    let o = command()
        .args(["plan", "--results", "seed:nope", "--output-tokens", "1e9"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(code(&o), 2, "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("seed:nope") && err.contains(names[0].as_str()),
        "{err}"
    );
}

/// The README's one-line `plan` example (section 6) plans from an empty folder, and the
/// user's run leads its summary.
#[test]
fn the_readme_one_line_plan_runs_from_any_folder() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let at = readme
        .find("`throughline plan ")
        .expect("the README shows a plan command");
    let command = readme[at + 1..].split('`').next().unwrap();
    let args: Vec<&str> = command.split_whitespace().skip(1).collect();
    let dir = tempfile::tempdir().unwrap();
    let o = command_in(&args, dir.path());
    assert_eq!(code(&o), 0, "{command}\n{}", text(&o));
    assert!(
        text(&o).contains("\nsummary:\n  your hardware (the run): "),
        "{}",
        text(&o)
    );
}

fn command_in(args: &[&str], dir: &std::path::Path) -> std::process::Output {
    command().args(args).current_dir(dir).output().unwrap()
}
