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

/// `::error` / `::warning` workflow commands, aggregated: one per outcome and at most a few
/// warnings, so the pull request page is not flooded.
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
                super::signed_percent((r - 1.0) * 100.0)
            ),
            None => format!("C={}", l.concurrency),
        })
        .collect();
    // Against what: the base server of the same job, or the baseline's sessions.
    let against = match verdict.design {
        Some(crate::stats::decision::Design::Relative) => "the base server".to_string(),
        _ => format!("baseline {}", escape_data(&verdict.baseline_name)),
    };
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
        Outcome::Inconclusive => out.push(format!(
            "::warning title=Throughput inconclusive::the data cannot tell whether {} is slower than {}: see the job summary for the smallest drop it could see",
            escape_data(&verdict.profile_name),
            escape_data(&verdict.baseline_name)
        )),
        Outcome::Pass => {}
    }
    for w in verdict.warnings.iter().take(MAX_WARNINGS) {
        out.push(format!("::warning title=throughline::{}", escape_data(w)));
    }
    if verdict.warnings.len() > MAX_WARNINGS {
        out.push(format!(
            "::warning title=throughline::{} more warnings in the job summary",
            verdict.warnings.len() - MAX_WARNINGS
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
