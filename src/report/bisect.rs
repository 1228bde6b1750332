//! What a bisect says: one line per step on the console, the answer, and bisect.md.
//! Commit subjects are the repository's text: escaped wherever they are shown.

use crate::gate::bisect::{Answer, Report, Step, StepOutcome};
use crate::untrusted::{code_span_in_table, for_terminal, inline_text};

fn short(id: &str) -> &str {
    &id[..id.len().min(10)]
}

fn outcome_word(o: StepOutcome) -> &'static str {
    match o {
        StepOutcome::Good => "good",
        StepOutcome::Bad => "BAD",
        StepOutcome::Skip => "skip",
    }
}

/// The ratios of a step, "C=2 0.921 [0.905, 0.936]; C=8 ..." (the pass bounds).
fn ratios(step: &Step) -> String {
    let bound = |b: Option<f64>| b.filter(|v| v.is_finite()).map(|v| format!("{v:.3}"));
    (step.levels.iter())
        .filter_map(|l| {
            let r = l.ratio.filter(|r| r.is_finite())?;
            Some(match (bound(l.low), bound(l.high)) {
                (Some(lo), Some(hi)) => format!("C={} {r:.3} [{lo}, {hi}]", l.concurrency),
                _ => format!("C={} {r:.3}", l.concurrency),
            })
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// "step 3: 1a2b3c4d5e BAD: regression: C=2 0.921 (C=2 0.921 [0.905, 0.936]), 4 blocks, 12 s".
pub fn step_line(step: &Step) -> String {
    let r = ratios(step);
    let line = format!(
        "step {}: {} {}: {}{}{}",
        step.number,
        short(&step.commit),
        outcome_word(step.outcome),
        step.reason,
        if r.is_empty() {
            String::new()
        } else {
            format!(" ({r})")
        },
        if step.blocks > 0 {
            format!(", {} block(s), {:.0} s", step.blocks, step.seconds)
        } else {
            String::new()
        }
    );
    for_terminal(&line).into_owned()
}

/// The answer in one line (console).
pub fn answer_line(report: &Report, subject: &dyn Fn(&str) -> String) -> String {
    let measured = report.steps.len();
    let said = match &report.answer {
        Answer::Found { commit, subject } => format!(
            "first slower commit: {commit} {} ({measured} step(s); a clean search of {} \
             commit(s) takes {})",
            subject, report.commits, report.planned_steps
        ),
        Answer::Range { commits } => format!(
            "the first slower commit is one of {} (the others could not be measured): {}",
            commits.len(),
            commits
                .iter()
                .map(|c| format!("{} {}", short(c), subject(c)))
                .collect::<Vec<_>>()
                .join("; ")
        ),
        Answer::NotReproduced => format!(
            "no commit to find: {} is not slower than {} beyond noise",
            short(&report.bad),
            short(&report.good)
        ),
        Answer::BadUnmeasurable => format!(
            "no commit to find: {} could not be measured against {} (step 1 says why)",
            short(&report.bad),
            short(&report.good)
        ),
        Answer::OutOfTime { commits } => format!(
            "--max-duration spent after {measured} step(s): the first slower commit is one of \
             {} commit(s), {}..{} (run the same command again to continue)",
            commits.len(),
            commits.first().map_or("", |c| short(c)),
            commits.last().map_or("", |c| short(c)),
        ),
    };
    for_terminal(&said).into_owned()
}

/// bisect.md: the answer, then every step.
pub fn markdown(report: &Report, subject: &dyn Fn(&str) -> String) -> String {
    let mut md = String::from("# Which commit made it slower\n\n");
    md.push_str(&format!(
        "Good `{}`, bad `{}`: {} commit(s) after the good one; a clean search measures {}. \
         Each step measures a commit's server against the good commit's in a relative run \
         in blocks (both started fresh in each block, slots swapped), and the gate decides: \
         bad only on a regression verdict.\n\n",
        short(&report.good),
        short(&report.bad),
        report.commits,
        report.planned_steps
    ));
    let answer = match &report.answer {
        Answer::Found { commit, subject } => format!(
            "**First slower commit: `{}`** {}",
            commit,
            inline_text(subject)
        ),
        _ => format!(
            "**{}**",
            inline_text(&answer_line(report, subject).replace("**", ""))
        ),
    };
    md.push_str(&answer);
    // Why the culprit is slower: its step's reading of what changed besides tok/s.
    if let Answer::Found { commit, .. } = &report.answer {
        let culprit = report.steps.iter().rev().find(|s| &s.commit == commit);
        let changes = culprit.map(|s| s.changes.as_slice()).unwrap_or_default();
        if !changes.is_empty() {
            md.push_str("\n\nWhat changed besides tok/s at that commit, against the good one:\n\n");
            for c in changes {
                md.push_str(&format!("- {}\n", inline_text(c)));
            }
        }
    }
    md.push_str(
        "\n\n| step | commit | subject | outcome | ratio [pass bounds] | blocks | time | why |\n",
    );
    md.push_str("|---:|---|---|---|---|---:|---:|---|\n");
    for s in &report.steps {
        md.push_str(&format!(
            "| {} | `{}` | {} | {} | {} | {} | {:.0} s | {} |\n",
            s.number,
            short(&s.commit),
            code_span_in_table(&s.subject),
            outcome_word(s.outcome),
            inline_text(&ratios(s)),
            s.blocks,
            s.seconds,
            inline_text(&s.reason),
        ));
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::bisect::StepLevel;
    use crate::gate::LevelStatus;

    fn report() -> Report {
        Report {
            good: "a".repeat(40),
            bad: "f".repeat(40),
            commits: 16,
            planned_steps: 5,
            steps: vec![Step {
                number: 1,
                commit: "f".repeat(40),
                subject: "::error::owned | `x`".into(),
                outcome: StepOutcome::Bad,
                reason: "regression: C=2 0.921".into(),
                levels: vec![StepLevel {
                    concurrency: 2,
                    status: LevelStatus::Regression,
                    ratio: Some(0.921),
                    low: Some(0.905),
                    high: Some(f64::INFINITY),
                }],
                blocks: 4,
                seconds: 12.0,
                changes: vec![
                    "C=2: ITL p50 5.0 ms -> 5.6 ms (+12%): each decode step is slower".into(),
                ],
                undecided: false,
                more_blocks: false,
                calibration: None,
            }],
            answer: Answer::Found {
                commit: "f".repeat(40),
                subject: "::error::owned | `x`".into(),
            },
        }
    }

    #[test]
    fn subjects_never_act_on_a_runner_or_break_the_table() {
        let r = report();
        let md = markdown(&r, &|_| String::new());
        assert!(!md.lines().any(|l| l.starts_with("::")), "{md}");
        let row = md.lines().find(|l| l.starts_with("| 1 |")).unwrap();
        // 8 columns: 9 unescaped pipes.
        let pipes = row.matches('|').count() - row.matches("\\|").count();
        assert_eq!(pipes, 9, "{row}");
        assert!(row.contains("C=2 0.921"), "{row}");
        let line = answer_line(&r, &|_| String::new());
        assert!(
            !line.starts_with("::") && line.contains("first slower commit"),
            "{line}"
        );
        assert!(step_line(&r.steps[0]).contains("BAD: regression: C=2 0.921"));
        assert!(
            md.contains("- C=2: ITL p50 5.0 ms") && md.contains("each decode step is slower"),
            "{md}"
        );
    }
}
