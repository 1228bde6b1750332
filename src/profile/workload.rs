//! `[workload]`: what each request asks for (prompts, lengths, datasets, shared prefixes).

use std::path::PathBuf;

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};

use super::limits;
use super::{Api, Sweep};

/// What each request asks for.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    /// Length of synthetic prompts, in words (a word is about one token for most tokenizers).
    #[serde(default = "default_input_tokens")]
    pub input_tokens: u32,
    /// A JSONL file of prompts (`{"prompt": "..."}` or `{"messages": [...]}` per line), relative
    /// to the profile file. Replaces synthetic prompts when set.
    #[serde(default)]
    pub prompts_file: Option<PathBuf>,
    pub max_tokens: u32,
    /// Ask the server to ignore end-of-sequence so every request generates `max_tokens`.
    #[serde(default)]
    pub ignore_eos: bool,
    #[serde(default)]
    pub min_tokens: Option<u32>,
    #[serde(default)]
    pub temperature: Option<f64>,
    #[serde(default)]
    pub top_p: Option<f64>,
    /// Stream responses (needed for TTFT and ITL).
    #[serde(default = "default_true")]
    pub stream: bool,
    /// A successful response with fewer output tokens than this is counted as a failure of
    /// class `degenerate` (a 6-token "OK" is not a completion).
    #[serde(default = "default_degenerate_below")]
    pub degenerate_below: u32,
    /// Fail a response without `usage` as `missing_usage`. When false (the default), its
    /// output tokens are counted one per content chunk and the trial is flagged. Left out of
    /// the serialized profile when false, so existing profile hashes do not change.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub require_usage: bool,
    /// Seed of the length draws (`output_length`, `input_length`; default 0): every run of
    /// the profile draws the same lengths for the same request numbers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Output lengths drawn per request (seeded by `seed`): each request asks for its
    /// drawn length as `max_tokens` (and, with `ignore_eos`, as the engine's minimum), capped
    /// at `max_tokens`. Absent: every request asks for `max_tokens`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_length: Option<LengthDist>,
    /// Synthetic prompt lengths (words) drawn per request, instead of `input_tokens` for all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_length: Option<LengthDist>,
    /// The served model's `tokenizer.json` (or a folder holding one), relative to the
    /// profile file, or a model id (`Qwen/Qwen3-8B`) found in the local Hugging Face cache
    /// when no such path exists: synthetic prompts (and drawn or traced input lengths) are then exactly
    /// that many tokens instead of words, and dataset answers are counted exactly. Hashed by
    /// content.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokenizer: Option<PathBuf>,
    /// Real requests from a dataset file, sent round-robin, each with its own output length.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dataset: Option<DatasetSpec>,
    /// A system prompt of this many tokens (words without `tokenizer`) opens every synthetic
    /// prompt, shared by the requests of a group (request n is in group n mod
    /// `prefix_groups`): a workload a server's prefix cache can serve, on purpose.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared_prefix_tokens: Option<u32>,
    /// With `shared_prefix_tokens`: how many different system prompts (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix_groups: Option<u32>,
}

/// `workload.dataset`: a ShareGPT JSON or JSONL file of requests (see load/workload/dataset.rs).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DatasetSpec {
    /// The file, relative to the profile file; hashed by content (SHA-256), not by path.
    pub path: PathBuf,
    pub format: DatasetFormat,
    /// Keep the first `rows` usable rows only (default: all, up to `limits::DATASET_ROWS`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows: Option<u32>,
    /// ShareGPT only: send up to this many user turns of each conversation, one after the
    /// answer to the one before, each carrying the conversation so far (default 1: the first
    /// turn alone). Multi-turn runs are closed loop: a turn waits for its predecessor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turns: Option<u32>,
    /// With `turns` above 1: which answers a later turn carries (default `server`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<History>,
}

/// The assistant turns a multi-turn conversation carries forward.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum History {
    /// The server's own answers, as a chat client sends them back (a server that caches
    /// what it generated serves the history from its prefix cache, as in real chats).
    #[default]
    Server,
    /// The dataset's reference answers: the same prompts every run, whatever the server said.
    Dataset,
}

/// Which format a dataset file is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DatasetFormat {
    /// ShareGPT JSON: the first human turn is the prompt, the answer after it sets the length.
    Sharegpt,
    /// One request a line: `prompt` or `messages`, optional `max_tokens` or `output`.
    Jsonl,
}

/// A distribution of lengths (tokens or words), drawn per request and rounded to a whole
/// number of at least 1.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "distribution", rename_all = "lowercase", deny_unknown_fields)]
pub enum LengthDist {
    /// Always `value`.
    Fixed { value: u32 },
    /// Whole numbers uniform on [mean (1 - range_ratio), mean (1 + range_ratio)], as vLLM's
    /// random dataset draws them.
    Uniform { mean: f64, range_ratio: f64 },
    /// Normal with this mean and standard deviation.
    Normal { mean: f64, sd: f64 },
    /// Lognormal with this mean and standard deviation (of the lengths, not of their log).
    Lognormal { mean: f64, sd: f64 },
    /// An empirical histogram: `[low, high, weight]` rows, a bin drawn by weight, then a
    /// whole number uniform in [low, high).
    Histogram { bins: Vec<[f64; 3]> },
}

impl LengthDist {
    /// The mean and standard deviation of the lengths the distribution describes (before
    /// rounding and the caps).
    pub fn moments(&self) -> (f64, f64) {
        match self {
            LengthDist::Fixed { value } => (f64::from(*value), 0.0),
            LengthDist::Uniform { mean, .. } => {
                let (lo, hi) = self.uniform_bounds().unwrap_or((*mean, *mean));
                let n = hi - lo + 1.0;
                ((lo + hi) / 2.0, ((n * n - 1.0) / 12.0).sqrt())
            }
            LengthDist::Normal { mean, sd } | LengthDist::Lognormal { mean, sd } => (*mean, *sd),
            LengthDist::Histogram { bins } => {
                let total: f64 = bins.iter().map(|b| b[2]).sum();
                let (mut m1, mut m2) = (0.0, 0.0);
                for [lo, hi, w] in bins {
                    // Whole numbers uniform on [lo, hi): mean (lo + hi - 1) / 2.
                    let (a, b) = (lo.ceil(), (hi.ceil() - 1.0).max(lo.ceil()));
                    let n = b - a + 1.0;
                    let mean = (a + b) / 2.0;
                    let var = (n * n - 1.0) / 12.0;
                    m1 += w / total * mean;
                    m2 += w / total * (var + mean * mean);
                }
                (m1, (m2 - m1 * m1).max(0.0).sqrt())
            }
        }
    }

    /// The whole-number bounds of a uniform distribution.
    pub fn uniform_bounds(&self) -> Option<(f64, f64)> {
        match self {
            LengthDist::Uniform { mean, range_ratio } => Some((
                (mean * (1.0 - range_ratio)).floor().max(1.0),
                (mean * (1.0 + range_ratio)).ceil().max(1.0),
            )),
            _ => None,
        }
    }

    /// Checks the parameters; `field` names the key in messages, `cap` is the largest length.
    fn validate(&self, field: &str, cap: u32) -> Result<()> {
        let cap = f64::from(cap);
        let bad = |what: String| Err(anyhow::anyhow!("field `{field}`: {what}"));
        match self {
            LengthDist::Fixed { value } if *value == 0 || f64::from(*value) > cap => {
                return bad(format!("value {value} is outside [1, {cap}]"));
            }
            LengthDist::Uniform { mean, range_ratio } => {
                if !(*range_ratio >= 0.0 && *range_ratio < 1.0) {
                    return bad(format!("range_ratio {range_ratio} is outside [0, 1)"));
                }
                if !(*mean >= 1.0 && mean * (1.0 + range_ratio) <= cap) {
                    return bad(format!(
                        "mean {mean} x (1 + range_ratio) must be in [1, {cap}] (the cap)"
                    ));
                }
            }
            LengthDist::Normal { mean, sd } | LengthDist::Lognormal { mean, sd } => {
                if !(*mean >= 1.0 && *mean <= cap) {
                    return bad(format!("mean {mean} is outside [1, {cap}] (the cap)"));
                }
                if !(sd.is_finite() && *sd >= 0.0) {
                    return bad(format!("sd {sd} must be a finite number >= 0"));
                }
            }
            LengthDist::Histogram { bins } => {
                if bins.is_empty() {
                    return bad("bins is empty; give [low, high, weight] rows".into());
                }
                for (i, [lo, hi, w]) in bins.iter().enumerate() {
                    if !(*lo >= 1.0 && lo < hi && *hi <= cap + 1.0) {
                        return bad(format!(
                            "bins[{i}] = [{lo}, {hi}, {w}]: needs 1 <= low < high <= {}",
                            cap + 1.0
                        ));
                    }
                    if !(w.is_finite() && *w >= 0.0) {
                        return bad(format!("bins[{i}]: weight {w} must be >= 0"));
                    }
                }
                let total = bins.iter().map(|b| b[2]).sum::<f64>();
                if total <= 0.0 {
                    return bad("bins: the weights sum to 0".into());
                }
                if !total.is_finite() {
                    return bad(format!(
                        "bins: the weights sum to {total}, past the largest number; only their \
                         ratios matter, so scale them down (e.g. to counts or shares)"
                    ));
                }
            }
            _ => {}
        }
        Ok(())
    }
}

fn default_input_tokens() -> u32 {
    128
}
fn default_true() -> bool {
    true
}
fn default_degenerate_below() -> u32 {
    8
}

impl Workload {
    /// Checks `[workload]`; `api` and `sweep` are the other sections some keys depend on (a
    /// trace gives the lengths, multi-turn needs chat and a closed loop).
    pub fn validate(&self, api: Api, sweep: &Sweep) -> Result<()> {
        self.validate_lengths()?;
        self.validate_dataset(api, sweep)?;
        self.validate_shared_prefix(sweep)?;
        self.validate_beside_trace(sweep)?;
        self.validate_sampling()
    }

    /// The lengths asked for: `max_tokens` and what must fit under it, drawn lengths.
    fn validate_lengths(&self) -> Result<()> {
        let w = self;
        if !(1..=limits::MAX_TOKENS).contains(&w.max_tokens) {
            bail!(
                "field `workload.max_tokens`: {} is outside [1, {}]",
                w.max_tokens,
                limits::MAX_TOKENS
            );
        }
        if w.input_tokens == 0 && w.prompts_file.is_none() {
            bail!("field `workload.input_tokens`: must be at least 1");
        }
        if w.input_tokens > limits::INPUT_TOKENS {
            bail!(
                "field `workload.input_tokens`: {} is outside [1, {}]",
                w.input_tokens,
                limits::INPUT_TOKENS
            );
        }
        if let Some(min) = w.min_tokens {
            if min > w.max_tokens {
                bail!(
                    "field `workload.min_tokens`: {min} is larger than max_tokens {}",
                    w.max_tokens
                );
            }
        }
        if w.degenerate_below > w.max_tokens {
            bail!(
                "field `workload.degenerate_below`: {} is larger than max_tokens {}; every \
                 response would count as degenerate",
                w.degenerate_below,
                w.max_tokens
            );
        }
        if let Some(d) = &w.output_length {
            d.validate("workload.output_length", w.max_tokens)?;
        }
        if let Some(d) = &w.input_length {
            if w.prompts_file.is_some() {
                bail!(
                    "field `workload.input_length`: draws synthetic prompt lengths, but \
                     workload.prompts_file gives the prompts; remove one"
                );
            }
            d.validate("workload.input_length", limits::INPUT_TOKENS)?;
        }
        Ok(())
    }

    /// A dataset gives the prompts (no other prompt source beside it) and its turns.
    fn validate_dataset(&self, api: Api, sweep: &Sweep) -> Result<()> {
        let w = self;
        if let Some(d) = &w.dataset {
            for (key, set) in [
                ("prompts_file", w.prompts_file.is_some()),
                ("input_length", w.input_length.is_some()),
            ] {
                if set {
                    bail!("field `workload.{key}`: workload.dataset gives the prompts; remove one");
                }
            }
            if let Some(r) = d.rows {
                if !(1..=limits::REQUESTS).contains(&r) {
                    bail!(
                        "field `workload.dataset`: rows {r} is outside [1, {}]",
                        limits::REQUESTS
                    );
                }
            }
            validate_turns(d, api, sweep)?;
        }
        Ok(())
    }

    /// A shared prefix opens synthetic prompts: bounded, and only where prompts are made.
    fn validate_shared_prefix(&self, sweep: &Sweep) -> Result<()> {
        let w = self;
        if w.prefix_groups.is_some() && w.shared_prefix_tokens.is_none() {
            bail!("field `workload.prefix_groups`: needs `workload.shared_prefix_tokens`");
        }
        if let Some(n) = w.shared_prefix_tokens {
            if !(1..=limits::INPUT_TOKENS).contains(&n) {
                bail!(
                    "field `workload.shared_prefix_tokens`: {n} is outside [1, {}]",
                    limits::INPUT_TOKENS
                );
            }
            let groups = w.prefix_groups.unwrap_or(1);
            if !(1..=limits::PREFIX_GROUPS).contains(&groups) {
                bail!(
                    "field `workload.prefix_groups`: {groups} is outside [1, {}]",
                    limits::PREFIX_GROUPS
                );
            }
            if u64::from(n) * u64::from(groups) > u64::from(limits::INPUT_TOKENS) {
                bail!(
                    "field `workload.prefix_groups`: {groups} prefixes of {n} tokens are more \
                     than {} tokens in all (every prefix is held in memory)",
                    limits::INPUT_TOKENS
                );
            }
            for (key, set) in [
                ("prompts_file", w.prompts_file.is_some()),
                ("dataset", w.dataset.is_some()),
                ("shared_prefix_tokens", sweep.trace.is_some()),
            ] {
                if set {
                    bail!("field `workload.{key}`: a shared prefix opens synthetic prompts only (not with prompts_file, dataset or sweep.trace)");
                }
            }
        }
        Ok(())
    }

    /// A trace gives every request's lengths: nothing else may give them.
    fn validate_beside_trace(&self, sweep: &Sweep) -> Result<()> {
        let w = self;
        if sweep.trace.is_some() {
            for (key, set) in [
                ("prompts_file", w.prompts_file.is_some()),
                ("dataset", w.dataset.is_some()),
                ("input_length", w.input_length.is_some()),
                ("output_length", w.output_length.is_some()),
            ] {
                if set {
                    bail!("field `workload.{key}`: sweep.trace gives every request's input and output length; remove one");
                }
            }
        }
        Ok(())
    }

    /// Sampling parameters within the ranges servers accept.
    fn validate_sampling(&self) -> Result<()> {
        let w = self;
        if let Some(t) = w.temperature {
            if !(0.0..=2.0).contains(&t) {
                bail!("field `workload.temperature`: {t} is outside 0..=2");
            }
        }
        if let Some(p) = w.top_p {
            if !(p > 0.0 && p <= 1.0) {
                bail!("field `workload.top_p`: {p} is outside (0, 1]");
            }
        }
        Ok(())
    }
}

/// Checks `workload.dataset.turns` and `history`: multi-turn conversations come from
/// ShareGPT files and run closed loop (a turn is sent when the answer before it is in).
fn validate_turns(d: &DatasetSpec, api: Api, sweep: &Sweep) -> Result<()> {
    let turns = d.turns.unwrap_or(1);
    if !(1..=limits::TURNS).contains(&turns) {
        bail!(
            "field `workload.dataset.turns`: {turns} is outside [1, {}]",
            limits::TURNS
        );
    }
    if turns == 1 {
        if d.history.is_some() {
            bail!("field `workload.dataset.history`: needs `turns` above 1 (one turn carries no history)");
        }
        return Ok(());
    }
    if d.format != DatasetFormat::Sharegpt {
        bail!(
            "field `workload.dataset.turns`: multi-turn conversations come from ShareGPT \
             files (a JSONL row's `messages` is sent as one request, its history included)"
        );
    }
    if api != Api::Chat {
        bail!(
            "field `workload.dataset.turns`: multi-turn conversations need the chat API \
             (target.api = \"chat\"): a completions prompt has no turns to carry"
        );
    }
    if sweep.is_open_loop() {
        bail!(
            "field `workload.dataset.turns`: multi-turn conversations run closed loop (a \
             turn is sent when the answer to the one before it has come back); use \
             `sweep.concurrency`, not `sweep.rates` or `sweep.trace`"
        );
    }
    Ok(())
}
