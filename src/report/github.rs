//! GitHub Actions integration: the job summary, step outputs and workflow annotations.
//! Each is written only when its environment variable says we are inside Actions.

use std::io::Write;

use anyhow::{Context, Result};

use crate::gate::{LevelStatus, Outcome, Verdict};
use crate::untrusted;

/// Appends Markdown to `$GITHUB_STEP_SUMMARY` when it is set, at most what GitHub shows of
/// one step's summary (1 MiB, counting what the step wrote before): past that, a line says
/// what was left out (src/untrusted.rs `bound_summary`).
pub fn append_step_summary(markdown: &str) -> Result<()> {
    let Some(path) = std::env::var_os("GITHUB_STEP_SUMMARY") else {
        return Ok(());
    };
    let before = std::fs::metadata(&path).map_or(0, |m| m.len() as usize);
    let room = untrusted::SUMMARY_LIMIT.saturating_sub(before).max(4096);
    let text = untrusted::bound_summary(
        markdown,
        room,
        "in the job's artifact (verdict.md, verdict.json) or in the log",
    );
    append_to_env_file("GITHUB_STEP_SUMMARY", &text)
}

/// Where a check ran, for the pull-request comment: the run's page and the commits compared.
/// Read from GitHub Actions' environment (GITHUB_SERVER_URL, GITHUB_REPOSITORY,
/// GITHUB_RUN_ID; THROUGHLINE_HEAD_SHA / THROUGHLINE_BASE_SHA where the workflow sets them
/// from the pull request, else GITHUB_SHA for the head); each value is checked for its shape
/// first, so nothing else reaches a link.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunContext {
    pub run_url: Option<String>,
    pub head_sha: Option<String>,
    pub base_sha: Option<String>,
}

impl RunContext {
    /// From the environment (empty outside Actions).
    pub fn from_env() -> RunContext {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        RunContext::from_values(
            var("GITHUB_SERVER_URL").as_deref(),
            var("GITHUB_REPOSITORY").as_deref(),
            var("GITHUB_RUN_ID").as_deref(),
            var("THROUGHLINE_HEAD_SHA")
                .or_else(|| var("GITHUB_SHA"))
                .as_deref(),
            var("THROUGHLINE_BASE_SHA").as_deref(),
        )
    }

    /// From the values, each kept only when it has its expected shape.
    pub fn from_values(
        server: Option<&str>,
        repository: Option<&str>,
        run_id: Option<&str>,
        head: Option<&str>,
        base: Option<&str>,
    ) -> RunContext {
        let server = server.filter(|s| {
            s.starts_with("https://")
                && s.len() < 200
                && s[8..]
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b".-:".contains(&b))
        });
        let repository = repository.filter(|r| {
            r.len() < 200
                && r.matches('/').count() == 1
                && r.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"._-/".contains(&b))
        });
        let run_id = run_id
            .filter(|r| !r.is_empty() && r.len() < 30 && r.bytes().all(|b| b.is_ascii_digit()));
        let sha = |s: Option<&str>| {
            s.filter(|s| (7..=64).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_hexdigit()))
                .map(str::to_string)
        };
        RunContext {
            run_url: match (server, repository, run_id) {
                (Some(s), Some(r), Some(id)) => Some(format!("{s}/{r}/actions/runs/{id}")),
                _ => None,
            },
            head_sha: sha(head),
            base_sha: sha(base),
        }
    }
}

/// Writes the verdict's outputs to `$GITHUB_OUTPUT` when it is set: `verdict=`,
/// `worst_ratio=`, `accepted=` (`true` beside `verdict=regression` when the check let the
/// regression through, `ci --allow-regression`: the verdict output keeps the truth, this key
/// says why the step still succeeded) and `run_id=`.
pub fn write_outputs(verdict: &Verdict) -> Result<()> {
    write_verdict_outputs(
        verdict.outcome.word(),
        verdict.worst_ratio,
        verdict.regression_accepted(),
        verdict.run_id.as_deref(),
    )
}

/// Writes every output key at once, each with a value (empty where there is none): a key
/// left unwritten would keep whatever another process of the step put in the file first
/// (a server that inherited `$GITHUB_OUTPUT` once wrote `accepted=true`), and the runner
/// takes a key's last line. The one writer of step outputs (`gate`, `ci` and `merge` all
/// come here). The ratio is written rounded to 4 decimals, and only when it is one a
/// measurement can give (finite, within [`super::verdict::shown_ratio`]'s bounds): a
/// hand-edited 1e308 is left out, not written as 309 digits.
pub fn write_verdict_outputs(
    word: &str,
    worst_ratio: Option<f64>,
    accepted: bool,
    run_id: Option<&str>,
) -> Result<()> {
    let ratio = worst_ratio.and_then(super::verdict::shown_ratio);
    write_output_keys(&[
        ("verdict", word.to_string()),
        (
            "worst_ratio",
            ratio.map(|r| format!("{r:.4}")).unwrap_or_default(),
        ),
        ("accepted", if accepted { "true" } else { "" }.to_string()),
        ("run_id", run_id.unwrap_or_default().to_string()),
    ])
}

/// `undecided=` for `merge`: the levels a further wave of legs would measure ("1,8"), empty
/// when none is (all decided, or one regressed, or a leg did not measure). A workflow's next
/// wave reads it in its `if:` (docs/workflows/throughput-waves.yml).
pub fn write_undecided_output(levels: &[u32]) -> Result<()> {
    let list: Vec<String> = levels.iter().map(u32::to_string).collect();
    write_output_keys(&[("undecided", list.join(","))])
}

/// The `$GITHUB_OUTPUT` keys this process wrote: each is written once, the first value
/// standing (a failure after the verdict was written is said by the exit code and the
/// summary, not by a second `verdict=` line that readers would take either way).
static OUTPUTS_WRITTEN: std::sync::Mutex<Vec<&'static str>> = std::sync::Mutex::new(Vec::new());

fn write_output_keys(keys: &[(&'static str, String)]) -> Result<()> {
    if std::env::var_os("GITHUB_OUTPUT").is_none() {
        return Ok(());
    }
    let mut written = OUTPUTS_WRITTEN.lock().unwrap_or_else(|e| e.into_inner());
    let mut text = String::new();
    for (key, value) in keys {
        if written.contains(key) {
            continue;
        }
        // One line a key: a value never holds a line break (words and numbers only).
        let value: String = value.chars().filter(|c| !c.is_control()).collect();
        text.push_str(&format!("{key}={value}\n"));
        written.push(key);
    }
    if text.is_empty() {
        return Ok(());
    }
    append_to_env_file("GITHUB_OUTPUT", &text)
}

/// An `::error` workflow command with its data escaped.
pub fn error_annotation(title: &str, message: &str) -> String {
    format!("::error title={title}::{}", escape_data(message))
}

/// `::error` / `::warning` workflow commands, aggregated: one for the outcome and at most a
/// few warnings, so the pull request page is not flooded. Only what a reviewer must act on
/// is annotated: the verdict's `notes` (the plan, why the blocks stopped, the client's
/// notes) never are, and a pass with no warning annotates nothing. An inconclusive verdict
/// (exit 0) says in its title that it is not a pass, and a history that cannot be trusted to
/// catch a 10% drop says so in the title of the outcome's annotation (a pass's too).
pub fn annotations(verdict: &Verdict) -> Vec<String> {
    const MAX_WARNINGS: usize = 3;
    let mut out = Vec::new();
    let failed: Vec<String> = verdict
        .levels
        .iter()
        .filter(|l| l.status == LevelStatus::Regression)
        .map(|l| match l.ratio.and_then(super::verdict::shown_ratio) {
            Some(r) => format!(
                "C={} {}",
                l.concurrency,
                super::numbers::signed_percent((r - 1.0) * 100.0)
            ),
            None => format!("C={}", l.concurrency),
        })
        .collect();
    // Against what: the base server of the same job, or the baseline's sessions.
    let against = match verdict.design {
        Some(crate::stats::decision::Design::Relative) => "the base server".to_string(),
        _ => format!("baseline {}", escape_data(&verdict.baseline_name)),
    };
    // A weak history, in the outcome's title; its whole sentence (what to do) the message.
    let weak = super::verdict::weak_history(verdict);
    let weak_line = (verdict.history_need.as_ref().map(|n| n.line()))
        .or_else(|| verdict.history_power.as_ref().map(|p| p.line()));
    let titled = |title: &str| match &weak {
        Some(w) => escape_property(&format!("{title} - {w}")),
        None => escape_property(title),
    };
    let mut said_weak = false;
    match verdict.outcome {
        // Let through on purpose: a warning (the step succeeds), the size still said.
        Outcome::Regression if verdict.regression_accepted() => out.push(format!(
            "::warning title=Throughput regression accepted::{} regressed against {against}: {}; {}",
            escape_data(&verdict.profile_name),
            failed.join(", "),
            super::verdict::ACCEPTED
        )),
        Outcome::Regression => out.push(format!(
            "::error title=Throughput regression::{} regressed against {against}: {}",
            escape_data(&verdict.profile_name),
            failed.join(", ")
        )),
        Outcome::NotComparable => out.push(format!(
            "::warning title=Throughput not comparable::some levels of {} could not be gated against {}",
            escape_data(&verdict.profile_name),
            escape_data(&verdict.baseline_name)
        )),
        Outcome::Inconclusive => {
            let mut message = format!(
                "the data cannot tell whether this change is slower than {against}: the check \
                 is not failed, and it is not a pass; the job summary gives the smallest drop \
                 each level could see"
            );
            if let Some(line) = &weak_line {
                message = format!("{}. {message}", escape_data(line));
                said_weak = true;
            }
            out.push(format!(
                "::warning title={}::{message}",
                titled("Throughput inconclusive (not a pass)")
            ));
        }
        Outcome::Pass => {
            if let Some(line) = weak.as_ref().and(weak_line.as_ref()) {
                out.push(format!(
                    "::warning title={}::{}",
                    titled("Throughput pass"),
                    escape_data(line)
                ));
                said_weak = true;
            }
        }
    }
    let warnings: Vec<&String> = (verdict.warnings.iter())
        .filter(|w| !(said_weak && weak_line.as_ref() == Some(*w)))
        .collect();
    for w in warnings.iter().take(MAX_WARNINGS) {
        out.push(format!("::warning title=throughline::{}", escape_data(w)));
    }
    if warnings.len() > MAX_WARNINGS {
        out.push(format!(
            "::warning title=throughline::{} more warnings in the job summary",
            warnings.len() - MAX_WARNINGS
        ));
    }
    out
}

/// True inside GitHub Actions.
pub fn in_actions() -> bool {
    std::env::var("GITHUB_ACTIONS").is_ok_and(|v| v == "true")
}

/// Escapes workflow-command data (`%`, CR, LF: GitHub's own escapes, so a multi-line message
/// shows as lines in the annotation), other control characters as `\u{..}` and every `##[`
/// defused (src/untrusted.rs): the runner looks for `##[` anywhere in a line.
fn escape_data(text: &str) -> String {
    let text = text
        .replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A");
    untrusted::for_terminal(&text).into_owned()
}

/// Escapes a workflow-command property (an annotation's `title`): as data, and `:` and `,`,
/// which would end the property.
fn escape_property(text: &str) -> String {
    escape_data(text).replace(':', "%3A").replace(',', "%2C")
}

fn append_to_env_file(var: &str, text: &str) -> Result<()> {
    let Some(path) = std::env::var_os(var) else {
        return Ok(());
    };
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .with_context(|| format!("cannot open ${var} ({})", path.to_string_lossy()))?;
    file.write_all(text.as_bytes())
        .with_context(|| format!("cannot write ${var}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::plots::ratio_tests::mixed;
    use crate::report::verdict::tests::{one_session, weak_power};

    /// Issue 50 item 3: the annotation of an inconclusive verdict says in its title that it
    /// is not a pass and that this history cannot catch a 10% drop (the need's sentence its
    /// message, not a second annotation); a pass against such a history says so too.
    #[test]
    fn an_inconclusive_title_is_not_a_pass_and_names_a_weak_history() {
        let said = annotations(&one_session(Outcome::Inconclusive));
        assert_eq!(said.len(), 1, "{said:#?}");
        assert!(
            said[0].starts_with(
                "::warning title=Throughput inconclusive (not a pass) - this baseline cannot \
                 catch a 10%25 drop (1 session)::"
            ),
            "{}",
            said[0]
        );
        assert!(
            said[0].contains("the baseline holds one session"),
            "{}",
            said[0]
        );
        let said = annotations(&weak_power(Outcome::Pass));
        assert_eq!(said.len(), 1, "{said:#?}");
        assert!(
            said[0].starts_with(
                "::warning title=Throughput pass - this baseline catches a 10%25 drop at its \
                 weakest level only 35%25 of the time::history mode is weak here"
            ),
            "{}",
            said[0]
        );
    }

    /// Issue 50 item 5: notes are information, never annotations: a pass with notes and no
    /// warning annotates nothing.
    #[test]
    fn notes_are_never_annotations() {
        let mut v = mixed();
        v.outcome = Outcome::Pass;
        v.warnings.clear();
        v.notes = vec![
            "sequential: up to 5 looks".into(),
            "blocks: 4 block(s) run; stopped: decided after 4 block(s)".into(),
            "base arm: 2 of 20 trials client-bound".into(),
        ];
        assert_eq!(annotations(&v), Vec::<String>::new());
    }

    /// A title is a property: `:` and `,` would end it, `%` starts an escape.
    #[test]
    fn a_title_escapes_what_would_end_it() {
        assert_eq!(escape_property("a: b, 10% c"), "a%3A b%2C 10%25 c");
    }
}
