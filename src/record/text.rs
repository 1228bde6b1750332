//! The sentences a record is described with: flagged trials (one line each, or one line per
//! kind of flag), a drift, a figure too large to print in full.

use super::trial_flags;
use super::{LevelResult, RunResult, TrialResult};
use crate::stats::decision::Drift;
use crate::stats::Percentiles;

/// Concurrency levels for a message: `[1, 4]` as "C=1, C=4".
pub fn levels_text(levels: &[u32]) -> String {
    (levels.iter())
        .map(|c| format!("C={c}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A figure for a message: 1e308 as `1e308`, not 309 digits.
pub fn figure_text(v: f64) -> String {
    if v.is_finite() && v.abs() >= 1e9 {
        format!("{v:e}")
    } else {
        format!("{v}")
    }
}

/// What a flagged drift says, in results and verdicts alike.
pub fn drift_warning(d: &Drift) -> String {
    format!(
        "server drifted: tok/s moved {:+.1}% from the first round to the last, every level and \
         arm alike (trend p = {:.4}); trials interleaved across levels spread it evenly, but the \
         figures depend on when they were taken",
        (d.size.exp() - 1.0) * 100.0,
        d.p
    )
}

/// Which of a level's latency percentiles were read from an HDR histogram rather than
/// computed from every value (a trial with more values than `stats::sketch::EXACT_LIMIT`),
/// as one sentence; None when all are exact. Reports print it under the level.
pub fn estimated_percentiles_note(level: &LevelResult) -> Option<String> {
    type Pick = fn(&TrialResult) -> Option<&Percentiles>;
    let figures: [(&str, Pick); 4] = [
        ("TTFT", |t| t.ttft_ms.as_ref()),
        ("ITL", |t| t.itl_ms.as_ref()),
        ("TPOT", |t| t.tpot_ms.as_ref()),
        ("E2E", |t| t.e2e_ms.as_ref()),
    ];
    let mut names = Vec::new();
    let mut error: f64 = 0.0;
    let mut trials = 0;
    for t in &level.trials {
        let mut any = false;
        for (name, pick) in &figures {
            if let Some(e) = pick(t).and_then(|p| p.relative_error) {
                any = true;
                error = error.max(e);
                if !names.contains(name) {
                    names.push(*name);
                }
            }
        }
        trials += usize::from(any);
    }
    (trials > 0).then(|| {
        format!(
            "{} percentiles of {trials} of {} trial(s) read from an HDR histogram (over {}              values): each within {}% of the exact value (`relative_error` in results.json)",
            names.join(", "),
            level.trials.len(),
            crate::stats::sketch::EXACT_LIMIT,
            error * 100.0
        )
    })
}

/// Every trial flag of `kind` (all kinds when `None`) in `levels`, as "C=8 trial 2: message".
pub fn flag_lines(levels: &[LevelResult], kind: Option<trial_flags::FlagKind>) -> Vec<String> {
    let mut lines = Vec::new();
    for level in levels {
        for t in &level.trials {
            for flag in t.flags.iter().filter(|f| kind.is_none_or(|k| f.kind == k)) {
                lines.push(format!("{} trial {}: {flag}", level.label(), t.trial));
            }
        }
    }
    lines
}

/// The flags of `levels`' trials, one line per kind of flag (of `kind` only, when given): a
/// single flagged trial as [`flag_lines`] says it, else how many of the trials, which, and the
/// worst one's sentence (client-bound: the largest share of late reads or merged chunks;
/// other kinds: the first). Every trial keeps its own flag in results.json. Twelve lines of
/// 300 characters for one kind of doubt buried the rest of a run's output.
pub fn flag_summary(levels: &[LevelResult], kind: Option<trial_flags::FlagKind>) -> Vec<String> {
    let total: usize = levels.iter().map(|l| l.trials.len()).sum();
    let flagged: Vec<(&LevelResult, &TrialResult, &trial_flags::TrialFlag)> = (levels.iter())
        .flat_map(|l| l.trials.iter().map(move |t| (l, t)))
        .flat_map(|(l, t)| t.flags.iter().map(move |f| (l, t, f)))
        .filter(|(_, _, f)| kind.is_none_or(|k| f.kind == k))
        .collect();
    let mut kinds: Vec<trial_flags::FlagKind> = Vec::new();
    for (_, _, f) in &flagged {
        if !kinds.contains(&f.kind) {
            kinds.push(f.kind);
        }
    }
    let severity = |t: &TrialResult| -> f64 {
        let Some(c) = &t.client else { return 0.0 };
        let share = |part: Option<u64>, whole: Option<u64>| match (part, whole) {
            (Some(p), Some(w)) if w > 0 => p as f64 / w as f64,
            _ => 0.0,
        };
        share(c.late_reads, c.reads).max(share(c.late_merged_chunks, c.chunks))
    };
    kinds
        .into_iter()
        .map(|k| {
            let mine: Vec<_> = flagged.iter().filter(|(_, _, f)| f.kind == k).collect();
            let (l, t, f) = if k == trial_flags::FlagKind::ClientBound {
                // The first of the most severe.
                (mine.iter().copied())
                    .reduce(|best, x| {
                        if severity(x.1) > severity(best.1) {
                            x
                        } else {
                            best
                        }
                    })
                    .copied()
                    .expect("a kind has a flagged trial")
            } else {
                *mine[0]
            };
            // In a run in blocks each block numbers its trials from 1: name the block too.
            let trial = |t: &TrialResult| match t.block {
                Some(b) => format!("{} (block {b})", t.trial),
                None => t.trial.to_string(),
            };
            if mine.len() == 1 {
                return format!("{} trial {}: {f}", l.label(), trial(t));
            }
            let mut which: Vec<String> = Vec::new();
            for level in levels {
                let trials: Vec<String> = (mine.iter())
                    .filter(|(ml, _, _)| std::ptr::eq(*ml, level))
                    .map(|(_, mt, _)| trial(mt))
                    .collect();
                match trials.len() {
                    0 => {}
                    1 => which.push(format!("{} trial {}", level.label(), trials[0])),
                    _ => which.push(format!("{} trials {}", level.label(), trials.join(", "))),
                }
            }
            format!(
                "{} of {total} trials {} ({}); the {}, {} trial {}: {f}",
                mine.len(),
                k.word(),
                which.join("; "),
                if k == trial_flags::FlagKind::ClientBound {
                    "worst"
                } else {
                    "first"
                },
                l.label(),
                trial(t)
            )
        })
        .collect()
}

impl RunResult {
    /// form the run's warnings and the gate's report use.
    pub fn flag_lines(&self, kind: Option<trial_flags::FlagKind>) -> Vec<String> {
        flag_lines(&self.levels, kind)
    }
}

#[cfg(test)]
mod flag_summary_tests {
    use super::trial_flags::{FlagKind, TrialFlag};
    use super::*;
    use crate::record::{fake, ClientHeadroom};

    #[test]
    fn one_line_per_kind_names_the_trials_and_the_worst() {
        let level = |c: u32, flagged: &[(u32, u64)]| LevelResult {
            concurrency: c,
            rate: None,
            trials: (1..=4)
                .map(|n| {
                    let mut t = fake::trial(n, 100.0);
                    if let Some((_, late)) = flagged.iter().find(|(k, _)| *k == n) {
                        t.flags.push(TrialFlag::new(
                            FlagKind::ClientBound,
                            format!("client-bound: {late} of 1000 reads late"),
                        ));
                        t.client = Some(ClientHeadroom {
                            reads: Some(1000),
                            late_reads: Some(*late),
                            ..Default::default()
                        });
                    }
                    t
                })
                .collect(),
        };
        let levels = vec![
            level(32, &[(2, 12)]),
            level(64, &[(1, 26), (2, 22), (4, 14)]),
        ];
        assert_eq!(
            flag_summary(&levels, None),
            vec![
                "4 of 8 trials client-bound (C=32 trial 2; C=64 trials 1, 2, 4); the worst, \
                 C=64 trial 1: client-bound: 26 of 1000 reads late"
            ]
        );
        let one = vec![level(8, &[(3, 5)])];
        assert_eq!(
            flag_summary(&one, Some(FlagKind::ClientBound)),
            vec!["C=8 trial 3: client-bound: 5 of 1000 reads late"]
        );
        assert!(flag_summary(&one, Some(FlagKind::LengthMisses)).is_empty());
        // In blocks, trials are numbered per block: the block is named.
        let mut blocks = vec![level(8, &[(1, 5), (2, 9)])];
        blocks[0].trials[0].block = Some(1);
        blocks[0].trials[1].block = Some(3);
        assert_eq!(
            flag_summary(&blocks, None),
            vec![
                "2 of 4 trials client-bound (C=8 trials 1 (block 1), 2 (block 3)); the worst, \
                 C=8 trial 2 (block 3): client-bound: 9 of 1000 reads late"
            ]
        );
    }
}

#[cfg(test)]
mod estimated_tests {
    use super::*;
    use crate::record::fake;

    /// The note names the figures read from a histogram and how many trials had them; a
    /// level whose percentiles are all exact has none.
    #[test]
    fn percentiles_read_from_a_histogram_are_named() {
        let mut level = fake::run(&[(8, &[100.0, 101.0])]).levels.remove(0);
        let exact = Percentiles::from_values(&mut vec![1.0, 2.0, 3.0]);
        for t in &mut level.trials {
            (t.ttft_ms, t.itl_ms) = (exact.clone(), exact.clone());
        }
        assert_eq!(estimated_percentiles_note(&level), None);
        level.trials[1].itl_ms.as_mut().unwrap().relative_error = Some(0.001);
        let note = estimated_percentiles_note(&level).unwrap();
        assert!(
            note.starts_with("ITL percentiles of 1 of 2 trial(s) read from an HDR histogram")
                && note.contains("within 0.1% of the exact value"),
            "{note}"
        );
    }
}
