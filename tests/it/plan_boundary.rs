//! The planner's boundary typed (issue 49 item 5): each of `plan`'s values is read by its
//! parser before the planner runs, so a bad duration, sum of money, count or length
//! distribution is refused by clap with the flag's name (exit 2), whatever else the command
//! line lacks; and a refusal of the planner's own still names the flag that gave the value.

use std::process::Output;

fn plan(args: &[&str]) -> Output {
    crate::common::command()
        .arg("plan")
        .args(args)
        .current_dir(std::env::temp_dir())
        .output()
        .expect("the binary runs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// No workload is given: before, the planner read the workload first and said only "no
/// workload", leaving the bad value unseen until that was mended; now the value's parser
/// refuses it first, naming its flag the way clap names every flag.
#[test]
fn a_bad_value_is_refused_with_its_flag_before_the_planner_runs() {
    // The flag and its bad value come last.
    for (args, said) in [
        (&["--deadline", "soon"][..], "as a duration"),
        (&["-r", "x.json", "--max-itl-p99", "fast"], "as a duration"),
        (&["--budget", "cheap"], "is not a number"),
        (&["--budget", "$0"], "must be a positive number"),
        (&["--sustained", "1.5"], "must be in (0, 1]"),
        (&["--compare-days", "0"], "positive"),
        (
            &[
                "--output-length",
                "fixed:value=100",
                "--input-length",
                "gamma:mean=5,sd=1",
            ],
            "unknown variant `gamma`",
        ),
        (&["--completions", "0.5"], "whole number"),
    ] {
        let o = plan(args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        let (flag, value) = (args[args.len() - 2], args[args.len() - 1]);
        assert!(
            err.contains(&format!("invalid value '{value}' for '{flag} ")),
            "{args:?}: {err}"
        );
        assert!(
            err.contains(said) && !err.contains("no workload"),
            "{args:?}: {err}"
        );
    }
}

/// The planner names the part of the question in words; the command line puts the flag that
/// gave it in front, and a value the planner only needs with another flag is refused by clap.
#[test]
fn the_planners_refusals_still_name_the_flag() {
    let o = plan(&["--output-tokens", "1e9", "--model", "gpt-9"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).starts_with("error: --model: no facts for the model \"gpt-9\""),
        "{}",
        stderr(&o)
    );
    let o = plan(&["--output-tokens", "1e9", "--gpus-per-node", "4"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--results"), "{}", stderr(&o));
}
