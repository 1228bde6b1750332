//! The bisect's log, OUT/bisect-log.jsonl: a header naming the search (the two ends, the
//! profile, the commands), then one line per step, each synced as it is written. A bisect
//! killed mid-way (a runner's timeout, Ctrl-C) continues from it: the steps there are not
//! measured again. A log of another search is refused rather than mixed in.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::gate::bisect::Step;

/// The log's file name under OUT.
pub const LOG_FILE: &str = "bisect-log.jsonl";

/// The most bytes of log read back (a log of 200,000 steps is under 100 MiB).
const MAX_LOG_BYTES: u64 = 128 << 20;

/// What the steps in a log were measured for: a log is continued only by the same search.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Header {
    pub good: String,
    pub bad: String,
    pub profile_hash: String,
    /// The commands as written in the log: secrets masked (record/redact.rs).
    pub server_command: String,
    pub build_command: Option<String>,
    /// The `--baseline` calibration each step's verdict used (its rows' count and hash): a
    /// log decided under another calibration, or none, is another search.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibration: Option<String>,
}

/// The log, open for appending.
pub struct Journal {
    path: PathBuf,
    /// The steps read back from an earlier, interrupted run of the same search.
    pub steps: Vec<Step>,
}

impl Journal {
    /// Opens OUT's log for `header`: the steps of an earlier run of the same search, or a
    /// new log.
    pub fn open(out: &Path, header: &Header) -> Result<Journal> {
        let path = out.join(LOG_FILE);
        // A link there is no earlier search: it goes, and a new log starts in its place.
        crate::fsutil::remove_link(&path)?;
        if std::fs::symlink_metadata(&path).is_err() {
            let line = serde_json::to_string(header)?;
            crate::fsutil::write_atomic(&path, format!("{line}\n").as_bytes())?;
            return Ok(Journal {
                path,
                steps: Vec::new(),
            });
        }
        let mut text = crate::fsutil::read_bounded(&path, MAX_LOG_BYTES)
            .with_context(|| format!("cannot read the bisect log {}", path.display()))?;
        mend_cut_line(&path, &mut text)?;
        let mut lines = text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty());
        let Some((_, first)) = lines.next() else {
            bail!(
                "{}: an empty bisect log; delete it to start afresh",
                path.display()
            );
        };
        let earlier: Header = serde_json::from_str(first).with_context(|| {
            format!(
                "{} line 1: not a bisect log header (good, bad, profile_hash, server_command)",
                path.display()
            )
        })?;
        let same_but_calibration = Header {
            calibration: header.calibration.clone(),
            ..earlier.clone()
        } == *header;
        if earlier.calibration != header.calibration && same_but_calibration {
            let said = |c: &Option<String>| c.clone().unwrap_or_else(|| "none".into());
            bail!(
                "{} was decided with another --baseline calibration (the log's: {}; this \
                 run's: {}): give the same --baseline, use another --out, or delete the log to \
                 start afresh",
                path.display(),
                said(&earlier.calibration),
                said(&header.calibration)
            );
        }
        if &earlier != header {
            bail!(
                "{} is the log of another search (good {}, bad {}, profile {}, or other \
                 commands): use another --out, or delete the log to start afresh",
                path.display(),
                short(&earlier.good),
                short(&earlier.bad),
                short(&earlier.profile_hash)
            );
        }
        let mut steps = Vec::new();
        for (i, line) in lines {
            match serde_json::from_str::<Step>(line) {
                Ok(step) => steps.push(step),
                Err(e) => bail!("{} line {}: not a bisect step: {e}", path.display(), i + 1),
            }
        }
        Ok(Journal { path, steps })
    }

    /// Appends a step and syncs it to disk before the next step starts.
    pub fn append(&mut self, step: Step) -> Result<()> {
        let mut file = crate::fsutil::open_output_append(&self.path)
            .with_context(|| format!("cannot append to {}", self.path.display()))?;
        let line = serde_json::to_string(&step)?;
        writeln!(file, "{line}")
            .and_then(|_| file.sync_data())
            .with_context(|| format!("cannot append to {}", self.path.display()))?;
        self.steps.push(step);
        Ok(())
    }
}

/// A log whose last line has no newline was killed while writing it. A step line cut short
/// is cut away from the file (its step is measured again), so that the next step is not
/// appended onto its text; a whole one is given its newline. `text` is left as the file is.
fn mend_cut_line(path: &Path, text: &mut String) -> Result<()> {
    if text.is_empty() || text.ends_with('\n') {
        return Ok(());
    }
    // The header is written whole (write_atomic): a log of one cut line is no log.
    let Some(end) = text.rfind('\n').map(|i| i + 1) else {
        return Ok(());
    };
    let cut = &text[end..];
    let file = std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .with_context(|| format!("cannot mend the bisect log {}", path.display()))?;
    let whole = cut.trim().is_empty() || serde_json::from_str::<Step>(cut).is_ok();
    let mended = match whole {
        true => (&file).write_all(b"\n").map(|_| text.push('\n')),
        false => file.set_len(end as u64).map(|_| text.truncate(end)),
    };
    mended
        .and_then(|_| file.sync_data())
        .with_context(|| format!("cannot mend the bisect log {}", path.display()))?;
    if !whole {
        eprintln!(
            "note: {}: its last line was cut off (the bisect was killed while writing it); \
             it is removed, and that step is measured again",
            path.display()
        );
    }
    Ok(())
}

fn short(id: &str) -> String {
    crate::untrusted::for_terminal(&id.chars().take(16).collect::<String>()).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::bisect::StepOutcome;

    fn header() -> Header {
        Header {
            good: "a".repeat(40),
            bad: "b".repeat(40),
            profile_hash: "sha256:1".into(),
            server_command: "serve --port {port}".into(),
            build_command: None,
            calibration: None,
        }
    }

    fn step(n: usize) -> Step {
        Step {
            number: n,
            commit: format!("{n:040}"),
            subject: "a change".into(),
            outcome: StepOutcome::Good,
            reason: "passed".into(),
            levels: vec![],
            blocks: 4,
            seconds: 1.5,
            changes: Vec::new(),
            undecided: false,
            more_blocks: false,
        }
    }

    #[test]
    fn a_log_continues_only_the_same_search() {
        let dir = tempfile::tempdir().unwrap();
        let mut j = Journal::open(dir.path(), &header()).unwrap();
        j.append(step(1)).unwrap();
        j.append(step(2)).unwrap();
        let again = Journal::open(dir.path(), &header()).unwrap();
        assert_eq!(again.steps, vec![step(1), step(2)]);
        let other = Header {
            bad: "c".repeat(40),
            ..header()
        };
        let e = Journal::open(dir.path(), &other).err().unwrap().to_string();
        assert!(e.contains("another search"), "{e}");
        // Resumed with a --baseline calibration the steps were not decided with.
        let calibrated = Header {
            calibration: Some("40 rows, sha256:00".into()),
            ..header()
        };
        let e = Journal::open(dir.path(), &calibrated)
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("another --baseline calibration")
                && e.contains("the log's: none")
                && e.contains("40 rows"),
            "{e}"
        );
    }

    #[test]
    fn a_line_cut_by_a_kill_is_cut_away_and_a_bad_line_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let mut j = Journal::open(dir.path(), &header()).unwrap();
        j.append(step(1)).unwrap();
        let path = dir.path().join(LOG_FILE);
        let whole = std::fs::read_to_string(&path).unwrap();
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        write!(f, "{{\"number\":2,\"comm").unwrap();
        let mut j = Journal::open(dir.path(), &header()).unwrap();
        assert_eq!(j.steps.len(), 1);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), whole, "cut away");
        // The step measured again follows the last whole line: the log reads back whole.
        j.append(step(2)).unwrap();
        let again = Journal::open(dir.path(), &header()).unwrap();
        assert_eq!(again.steps, vec![step(1), step(2)]);
        // A whole step that lost only its newline is kept, and given one.
        let line = serde_json::to_string(&step(3)).unwrap();
        write!(f, "{line}").unwrap();
        let mut j = Journal::open(dir.path(), &header()).unwrap();
        assert_eq!(j.steps.len(), 3);
        j.append(step(4)).unwrap();
        assert_eq!(Journal::open(dir.path(), &header()).unwrap().steps.len(), 4);
        // A bad line before the end is named, not dropped.
        writeln!(f, "not a step").unwrap();
        writeln!(f, "{line}").unwrap();
        let e = format!("{:#}", Journal::open(dir.path(), &header()).err().unwrap());
        assert!(e.contains("line 6"), "{e}");
    }
}
