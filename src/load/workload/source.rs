//! Where a run's requests come from, decided once before the first is sent: synthetic
//! prompts (words, or exact tokens with the model's tokenizer), a prompts file, a dataset,
//! or a trace's lengths; the per-request lengths that go with them; and the notes that tell
//! the reader how exact those lengths are.

use std::sync::Arc;

use anyhow::Result;

use super::conversation::Conversations;
use super::dataset::{self, EstimatedTokens, TokenCounter};
use super::lengths::{Drawn, Lengths};
use super::prompts::Prompts;
use super::trace::{self, Trace};
use crate::profile::{limits, DatasetFormat, DatasetSpec, History, Profile, TraceSpec, Workload};
use crate::tokenize::{ModelTokenizer, SharedTokenizer};

/// The requests of a run, ready to send.
pub struct Source {
    pub prompts: Prompts,
    pub lengths: Lengths,
    /// `sweep.trace`: the replayed trace (its lengths are in `lengths`, row i for request i
    /// of a trial whose first request number is a multiple of the trace's length).
    pub trace: Option<Trace>,
    /// `workload.dataset.turns` above 1: the conversations, sent turn by turn.
    pub conversations: Option<Conversations>,
    /// For the run's notes.
    pub notes: Vec<String>,
}

impl TokenCounter for ModelTokenizer {
    fn count(&self, text: &str) -> usize {
        ModelTokenizer::count(self, text)
    }
    fn describe(&self) -> String {
        format!("exact (tokenizer {})", self.source)
    }
}

/// Reads the profile's tokenizer, dataset and trace (errors name the file, line and field).
pub fn prepare(profile: &Profile) -> Result<Source> {
    let w = &profile.workload;
    let tokenizer = match &w.tokenizer {
        Some(p) => Some(SharedTokenizer(Arc::new(ModelTokenizer::load(p)?))),
        None => None,
    };
    let lengths = Lengths::new(w, w.seed.unwrap_or(0), limits::INPUT_TOKENS);
    let mut notes = Vec::new();
    if let Some(d) = &w.dataset {
        return from_dataset(w, d, tokenizer.as_ref(), lengths, notes);
    }
    let prompts = prompts_of(w, &tokenizer, &mut notes)?;
    let Some(spec) = &profile.sweep.trace else {
        return Ok(Source {
            prompts,
            lengths,
            trace: None,
            conversations: None,
            notes,
        });
    };
    let (trace, lengths) = read_trace(spec, w, lengths, &mut notes)?;
    Ok(Source {
        prompts,
        lengths,
        trace: Some(trace),
        conversations: None,
        notes,
    })
}

/// The requests of a dataset (`workload.dataset`): its prompts, its rows' output lengths,
/// and its conversations when rows have several turns.
fn from_dataset(
    w: &Workload,
    d: &DatasetSpec,
    tokenizer: Option<&SharedTokenizer>,
    lengths: Lengths,
    mut notes: Vec<String>,
) -> Result<Source> {
    let counter: &dyn TokenCounter = match tokenizer {
        Some(t) => &*t.0,
        None => &EstimatedTokens,
    };
    let max_rows = d.rows.unwrap_or(limits::REQUESTS) as usize;
    let turns = d.turns.unwrap_or(1) as usize;
    let rows = dataset::load(&d.path, d.format, max_rows, turns, counter)?;
    let capped = (rows.iter())
        .filter(|r| r.max_tokens.is_some_and(|m| m > w.max_tokens))
        .count();
    let answers = match d.format {
        DatasetFormat::Sharegpt => "the reference answers' lengths",
        DatasetFormat::Jsonl => "each row's max_tokens (or its `output` answer's length)",
    };
    notes.push(format!(
        "dataset {}: {} requests sent round-robin; output lengths from {answers}, answers \
         counted {}",
        d.path.display(),
        rows.len(),
        counter.describe()
    ));
    if capped > 0 && turns == 1 {
        notes.push(format!(
            "{capped} of {} dataset rows ask for more than workload.max_tokens = {}; they \
             ask for {} instead",
            rows.len(),
            w.max_tokens,
            w.max_tokens
        ));
    }
    let lengths = lengths.with_rows(
        (rows.iter())
            .map(|r| Drawn {
                input_words: None,
                output_tokens: r.max_tokens,
            })
            .collect(),
    );
    let conversations = (turns > 1).then(|| {
        let history = d.history.unwrap_or_default();
        let list: Vec<_> = rows.iter().map(|r| r.turns.clone()).collect();
        let capped = (list.iter().flatten())
            .filter(|t| t.answer_tokens > w.max_tokens)
            .count();
        if capped > 0 {
            notes.push(format!(
                "{capped} turns ask for more than workload.max_tokens = {} (their \
                 reference answers are longer); they ask for {} instead",
                w.max_tokens, w.max_tokens
            ));
        }
        let sent: usize = list.iter().map(Vec::len).sum();
        notes.push(format!(
            "multi-turn: {} conversations of up to {turns} turns ({sent} turns in all, {:.1} \
             on average), each turn sent after the answer to the one before and carrying \
             the conversation so far, with {}; a failed turn ends its conversation",
            list.len(),
            sent as f64 / list.len().max(1) as f64,
            match history {
                History::Server => "the server's own answers",
                History::Dataset => "the dataset's reference answers",
            }
        ));
        Conversations::new(list, history, w.max_tokens)
    });
    let conversations = conversations.flatten();
    Ok(Source {
        prompts: Prompts::File(rows.into_iter().map(|r| r.prompt).collect()),
        lengths,
        trace: None,
        conversations,
        notes,
    })
}

/// Synthetic prompts (cut by the tokenizer when there is one) or the prompts file's, with
/// the shared prefixes when the profile asks for them.
fn prompts_of(
    w: &Workload,
    tokenizer: &Option<SharedTokenizer>,
    notes: &mut Vec<String>,
) -> Result<Prompts> {
    let mut prompts = Prompts::load(w.input_tokens, w.prompts_file.as_deref())?;
    if let Prompts::Synthetic { tokenizer: t, .. } = &mut prompts {
        *t = tokenizer.clone();
        notes.push(match &tokenizer {
            Some(t) => format!(
                "input lengths are exact: synthetic prompts cut at the requested number of \
                 tokens of {}",
                t.0.source
            ),
            None => "input lengths are words of synthetic text, not tokens (an estimate; name \
                     the model's tokenizer.json in workload.tokenizer for exact lengths); the \
                     prompt tokens the server counts are checked per trial"
                .to_string(),
        });
    }
    if let Some(tokens) = w.shared_prefix_tokens {
        let groups = w.prefix_groups.unwrap_or(1);
        prompts = prompts.with_prefixes(tokens, groups);
        notes.push(format!(
            "shared prefix: every prompt opens with one of {groups} system prompts of {tokens} \
             {} (request n takes prefix n mod {groups}), which a server's prefix cache can \
             serve; the cache's effect is what this run measures against one without it",
            if tokenizer.is_some() {
                "tokens"
            } else {
                "words"
            }
        ));
    }
    Ok(prompts)
}

/// Reads `sweep.trace` (within the cap on a trial's span) and takes its rows' lengths.
fn read_trace(
    spec: &TraceSpec,
    w: &Workload,
    lengths: Lengths,
    notes: &mut Vec<String>,
) -> Result<(Trace, Lengths)> {
    let max_rows = spec.rows.unwrap_or(limits::REQUESTS) as usize;
    let trace = trace::load(&spec.path, max_rows)?;
    // A replay is a duration trial: the cap on `sweep.duration` holds for it too.
    let replay = trace.span().as_secs_f64() / spec.speedup;
    if replay > limits::TRIAL_SPAN.as_secs_f64() {
        anyhow::bail!(
            "field `sweep.trace`: trace {} spans {:.0} s; replayed at speedup {} a trial would \
             take {:.0} s, past the cap of {} that holds for `sweep.duration` too; replay fewer \
             rows (`rows`) or raise `speedup`",
            spec.path.display(),
            trace.span().as_secs_f64(),
            spec.speedup,
            replay,
            humantime::format_duration(limits::TRIAL_SPAN)
        );
    }
    notes.push(format!(
        "trace {}: {} requests over {:.3} s, replayed at speedup {}{}",
        spec.path.display(),
        trace.entries.len(),
        trace.span().as_secs_f64(),
        spec.speedup,
        match trace.out_of_order {
            0 => String::new(),
            n => format!(" ({n} rows out of time order, sorted into place)"),
        }
    ));
    let capped = (trace.entries.iter())
        .filter(|e| e.output_tokens > w.max_tokens)
        .count();
    if capped > 0 {
        notes.push(format!(
            "{capped} of {} trace rows ask for more output tokens than workload.max_tokens = \
             {}; they ask for {} instead",
            trace.entries.len(),
            w.max_tokens,
            w.max_tokens
        ));
    }
    let lengths = lengths.with_rows(
        (trace.entries.iter())
            .map(|e| Drawn {
                input_words: Some(e.input_tokens),
                output_tokens: Some(e.output_tokens),
            })
            .collect(),
    );
    Ok((trace, lengths))
}

/// A trace's send offsets (seconds from the trial's start) at `speedup`, and the level's
/// rate: its requests over its span (requests at one instant: their count per second).
pub fn trace_schedule(trace: &Trace, speedup: f64) -> (Vec<f64>, f64) {
    let offsets: Vec<f64> = (trace.entries.iter())
        .map(|e| e.at.as_secs_f64() / speedup)
        .collect();
    let span = offsets.last().copied().unwrap_or(0.0);
    let rate = match offsets.len() {
        n if n > 1 && span > 0.0 => (n - 1) as f64 / span,
        n => n.max(1) as f64,
    };
    (offsets, rate)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_trace_schedule_is_its_timestamps_over_the_speedup() {
        let entry = |s: f64| trace::TraceEntry {
            at: Duration::from_secs_f64(s),
            input_tokens: 1,
            output_tokens: 1,
        };
        let t = Trace {
            entries: vec![entry(0.0), entry(1.0), entry(4.0)],
            out_of_order: 0,
        };
        let (offsets, rate) = trace_schedule(&t, 2.0);
        assert_eq!(offsets, vec![0.0, 0.5, 2.0]);
        assert!((rate - 1.0).abs() < 1e-12);
    }
}
