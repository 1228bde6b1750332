//! The bisect's log, OUT/bisect-log.jsonl: a header naming the search (the two ends, the
//! profile, the commands), then one line per step, each synced as it is written. A bisect
//! killed mid-way (a runner's timeout, Ctrl-C) continues from it: the steps there are not
//! measured again. A log of another search is refused rather than mixed in.
//!
//! Each step line ends with `"chain"`, a keyed checksum over the header and the steps
//! before it (chain.rs says why and where the key lives). Read back, the steps are trusted
//! up to the first whose checksum does not verify; that one and those after it are moved
//! aside to [`UNTRUSTED_FILE`] and measured again, and the run says so.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use super::chain::{hex, unhex, LogKey};
use crate::gate::bisect::Step;

/// The log's file name under OUT.
pub const LOG_FILE: &str = "bisect-log.jsonl";
/// Where the step lines that did not verify are moved, under OUT (kept to be looked at).
pub const UNTRUSTED_FILE: &str = "bisect-log.untrusted.jsonl";
/// How a step line ends: `,"chain":"<64 hex digits>"}`.
const CHAIN_START: &str = ",\"chain\":\"";
const CHAIN_SUFFIX: usize = CHAIN_START.len() + 64 + 2;

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
    /// The steps read back from an earlier, interrupted run of the same search (those whose
    /// checksums verified).
    pub steps: Vec<Step>,
    /// The key and the chain's latest checksum; None where no key could be had (steps are
    /// then written without one, and measured again when read back).
    chain: Option<(LogKey, [u8; 32])>,
}

impl Journal {
    /// Opens OUT's log for `header`: the steps of an earlier run of the same search whose
    /// checksums verify under `key`, or a new log. `key` is why not, where there is none.
    pub fn open(out: &Path, header: &Header, key: Result<LogKey, String>) -> Result<Journal> {
        let path = out.join(LOG_FILE);
        let header_line = serde_json::to_string(header)?;
        let chain = match key {
            Ok(key) => {
                let seed = key.seed(&header_line);
                Ok((key, seed))
            }
            Err(why) => Err(why),
        };
        // A link there is no earlier search: it goes, and a new log starts in its place.
        crate::fsutil::remove_link(&path)?;
        if std::fs::symlink_metadata(&path).is_err() {
            crate::fsutil::write_atomic(&path, format!("{header_line}\n").as_bytes())?;
            if let Err(why) = &chain {
                eprintln!(
                    "note: the bisect log's steps carry no checksum (its key: {}): a bisect \
                     continued from it measures them again",
                    crate::untrusted::for_terminal(why)
                );
            }
            return Ok(Journal {
                path,
                steps: Vec::new(),
                chain: chain.ok(),
            });
        }
        let mut text = crate::fsutil::read_bounded(&path, MAX_LOG_BYTES)
            .with_context(|| format!("cannot read the bisect log {}", path.display()))?;
        mend_cut_line(&path, &mut text)?;
        let mut lines = numbered_lines(&text).filter(|l| !l.text.trim().is_empty());
        let Some(Line { text: first, .. }) = lines.next() else {
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
        let mut chain = chain;
        let mut first_untrusted = None;
        for line in lines {
            let step = match serde_json::from_str::<Step>(line.text) {
                Ok(step) => step,
                Err(e) => bail!(
                    "{} line {}: not a bisect step: {e}",
                    path.display(),
                    line.number
                ),
            };
            let verified = match &mut chain {
                Ok((key, previous)) => verify(key, previous, line.text),
                Err(_) => false,
            };
            if !verified {
                first_untrusted = Some(line);
                break;
            }
            steps.push(step);
        }
        if let Some(first) = first_untrusted {
            set_aside(&path, &text, first, chain.as_ref().err())?;
        }
        Ok(Journal {
            path,
            steps,
            chain: chain.ok(),
        })
    }

    /// Appends a step, with its checksum, and syncs it to disk before the next step starts.
    pub fn append(&mut self, step: Step) -> Result<()> {
        let mut file = crate::fsutil::open_output_append(&self.path)
            .with_context(|| format!("cannot append to {}", self.path.display()))?;
        let text = serde_json::to_string(&step)?;
        let (line, checksum) = match &self.chain {
            Some((key, previous)) => {
                let checksum = key.next(previous, &text);
                let open = text.strip_suffix('}').unwrap_or(&text);
                (
                    format!("{open}{CHAIN_START}{}\"}}", hex(&checksum)),
                    Some(checksum),
                )
            }
            None => (text, None),
        };
        writeln!(file, "{line}")
            .and_then(|_| file.sync_data())
            .with_context(|| format!("cannot append to {}", self.path.display()))?;
        if let (Some((_, previous)), Some(checksum)) = (&mut self.chain, checksum) {
            *previous = checksum;
        }
        self.steps.push(step);
        Ok(())
    }
}

/// One line of the log: its number (from 1), where it starts, and its text.
#[derive(Clone, Copy)]
struct Line<'a> {
    number: usize,
    start: usize,
    text: &'a str,
}

fn numbered_lines(text: &str) -> impl Iterator<Item = Line<'_>> {
    let mut start = 0;
    text.split_inclusive('\n').enumerate().map(move |(i, raw)| {
        let line = Line {
            number: i + 1,
            start,
            text: raw.trim_end_matches(['\n', '\r']),
        };
        start += raw.len();
        line
    })
}

/// Whether step line `line` carries the checksum that follows `previous` under `key`
/// (moving `previous` on when it does).
fn verify(key: &LogKey, previous: &mut [u8; 32], line: &str) -> bool {
    let Some(cut) = line.len().checked_sub(CHAIN_SUFFIX) else {
        return false;
    };
    let (Some(open), Some(tail)) = (line.get(..cut), line.get(cut..)) else {
        return false;
    };
    let Some(said) = (tail.strip_prefix(CHAIN_START))
        .and_then(|t| t.strip_suffix("\"}"))
        .and_then(unhex)
    else {
        return false;
    };
    let expected = key.next(previous, &format!("{open}}}"));
    // Both are public once written; a timing difference tells nothing worth hiding.
    if expected != said {
        return false;
    }
    *previous = expected;
    true
}

/// Moves the log's lines from `first` on (steps that did not verify) to [`UNTRUSTED_FILE`],
/// leaving the log to end with the last that did, and says so: they are measured again.
fn set_aside(path: &Path, text: &str, first: Line<'_>, no_key: Option<&String>) -> Result<()> {
    let rest = &text[first.start..];
    let lines = rest.lines().filter(|l| !l.trim().is_empty()).count();
    let aside = path.with_file_name(UNTRUSTED_FILE);
    crate::fsutil::write_atomic(&aside, rest.as_bytes())?;
    crate::fsutil::write_atomic(path, &text.as_bytes()[..first.start])?;
    let why = match no_key {
        Some(why) => format!(
            "no key to check them with ({})",
            crate::untrusted::for_terminal(why)
        ),
        None => "their checksum does not verify: written by another account or machine, \
                 by a version without checksums, or not by throughline"
            .to_string(),
    };
    eprintln!(
        "note: {}: {lines} step line(s) from line {} on are not trusted ({why}); they are \
         moved to {} and measured again",
        path.display(),
        first.number,
        aside.display()
    );
    Ok(())
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

    fn key() -> Result<LogKey, String> {
        Ok(LogKey::fixed(7))
    }

    /// The line `step` is written as after the last line of `log` (under [`key`]).
    fn chained_after(log: &str, step: &Step) -> String {
        let last = log.lines().last().unwrap();
        let previous = unhex(&last[last.len() - 66..last.len() - 2]).unwrap();
        let text = serde_json::to_string(step).unwrap();
        let checksum = LogKey::fixed(7).next(&previous, &text);
        format!(
            "{}{CHAIN_START}{}\"}}",
            &text[..text.len() - 1],
            hex(&checksum)
        )
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
            calibration: None,
        }
    }

    #[test]
    fn a_log_continues_only_the_same_search() {
        let dir = tempfile::tempdir().unwrap();
        let mut j = Journal::open(dir.path(), &header(), key()).unwrap();
        j.append(step(1)).unwrap();
        j.append(step(2)).unwrap();
        let again = Journal::open(dir.path(), &header(), key()).unwrap();
        assert_eq!(again.steps, vec![step(1), step(2)]);
        let other = Header {
            bad: "c".repeat(40),
            ..header()
        };
        let e = Journal::open(dir.path(), &other, key())
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("another search"), "{e}");
        // Resumed with a --baseline calibration the steps were not decided with.
        let calibrated = Header {
            calibration: Some("40 rows, sha256:00".into()),
            ..header()
        };
        let e = Journal::open(dir.path(), &calibrated, key())
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
        let mut j = Journal::open(dir.path(), &header(), key()).unwrap();
        j.append(step(1)).unwrap();
        let path = dir.path().join(LOG_FILE);
        let whole = std::fs::read_to_string(&path).unwrap();
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        write!(f, "{{\"number\":2,\"comm").unwrap();
        let mut j = Journal::open(dir.path(), &header(), key()).unwrap();
        assert_eq!(j.steps.len(), 1);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), whole, "cut away");
        // The step measured again follows the last whole line: the log reads back whole.
        j.append(step(2)).unwrap();
        let again = Journal::open(dir.path(), &header(), key()).unwrap();
        assert_eq!(again.steps, vec![step(1), step(2)]);
        // A whole step that lost only its newline is kept, and given one.
        let line = chained_after(&std::fs::read_to_string(&path).unwrap(), &step(3));
        write!(f, "{line}").unwrap();
        let mut j = Journal::open(dir.path(), &header(), key()).unwrap();
        assert_eq!(j.steps.len(), 3);
        j.append(step(4)).unwrap();
        assert_eq!(
            Journal::open(dir.path(), &header(), key())
                .unwrap()
                .steps
                .len(),
            4
        );
        // A bad line before the end is named, not dropped.
        writeln!(f, "not a step").unwrap();
        writeln!(f, "{line}").unwrap();
        let e = format!(
            "{:#}",
            Journal::open(dir.path(), &header(), key()).err().unwrap()
        );
        assert!(e.contains("line 6"), "{e}");
    }

    /// Issue 47: a step line a pull request wrote (no checksum, a checksum it made up, or
    /// one made with another key) is not trusted: it and every line after it are moved
    /// aside, the log keeps the steps that verify, and the next steps continue the chain.
    #[test]
    fn steps_that_do_not_verify_are_set_aside_and_measured_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LOG_FILE);
        let mut j = Journal::open(dir.path(), &header(), key()).unwrap();
        j.append(step(1)).unwrap();
        let trusted = std::fs::read_to_string(&path).unwrap();
        assert!(trusted.contains("\"chain\":\""), "{trusted}");
        let bare = serde_json::to_string(&step(2)).unwrap();
        for forged in [
            bare.clone(),
            format!(
                "{}{CHAIN_START}{}\"}}",
                &bare[..bare.len() - 1],
                "0".repeat(64)
            ),
            format!("{}{CHAIN_START}zz\"}}", &bare[..bare.len() - 1]),
        ] {
            std::fs::write(&path, format!("{trusted}{forged}\n{bare}\n")).unwrap();
            let j = Journal::open(dir.path(), &header(), key()).unwrap();
            assert_eq!(j.steps, vec![step(1)], "{forged}");
            assert_eq!(std::fs::read_to_string(&path).unwrap(), trusted);
            let aside = std::fs::read_to_string(dir.path().join(UNTRUSTED_FILE)).unwrap();
            assert_eq!(aside, format!("{forged}\n{bare}\n"));
        }
        // A line chained with another key does not verify either.
        let elsewhere = tempfile::tempdir().unwrap();
        let mut j = Journal::open(elsewhere.path(), &header(), Ok(LogKey::fixed(8))).unwrap();
        j.append(step(1)).unwrap();
        let theirs = std::fs::read_to_string(elsewhere.path().join(LOG_FILE)).unwrap();
        std::fs::write(&path, &theirs).unwrap();
        assert!(Journal::open(dir.path(), &header(), key())
            .unwrap()
            .steps
            .is_empty());
        // The chain goes on from the last step that verified: the log reads back whole.
        std::fs::write(&path, &trusted).unwrap();
        let mut j = Journal::open(dir.path(), &header(), key()).unwrap();
        j.append(step(2)).unwrap();
        j.append(step(3)).unwrap();
        let again = Journal::open(dir.path(), &header(), key()).unwrap();
        assert_eq!(again.steps, vec![step(1), step(2), step(3)]);
        // Reordered steps break the chain: from the first out of place on, measured again.
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        std::fs::write(&path, format!("{}\n{}\n{}\n", lines[0], lines[2], lines[1])).unwrap();
        assert!(Journal::open(dir.path(), &header(), key())
            .unwrap()
            .steps
            .is_empty());
        // Without a key nothing read back is trusted.
        std::fs::write(&path, &text).unwrap();
        let j = Journal::open(dir.path(), &header(), Err("no home".into())).unwrap();
        assert!(j.steps.is_empty());
    }
}
