//! What differs between engines that all claim the OpenAI API: the extra request fields that
//! make an output length fixed, and checking that they worked.
//!
//! A benchmark that asks for 1,000 output tokens and assumes it got them overstates throughput
//! whenever the server stopped early (an end-of-sequence token, a field the engine silently
//! ignored). So the fields are chosen per engine, and every successful response is checked
//! against the length it was asked for.

use serde_json::{json, Map, Value};

use super::stream::outcome::Finished;
use super::workload::lengths::Lengths;
use crate::engine::{Engine, FixedLength};
use crate::profile::Workload;
use crate::record::trial_flags::{FlagKind, TrialFlag};
use crate::record::TrialResult;

/// The share of requests that may miss the requested length before a run-level warning.
pub const LENGTH_MISS_WARN: f64 = 0.05;

/// Extra request fields (a null value removes the field) that make each response exactly
/// `max_tokens` long when the profile sets `ignore_eos`, for the given engine (None: unknown,
/// the OpenAI-compatible minimum). The second value is a warning when the engine cannot be
/// asked for a fixed length. Which fields each engine takes is in its file in src/engine/.
pub fn fixed_length_fields(
    engine: Option<Engine>,
    workload: &Workload,
) -> (Map<String, Value>, Option<String>) {
    let mut fields = Map::new();
    if !workload.ignore_eos {
        return (fields, None);
    }
    let min = workload.min_tokens.unwrap_or(workload.max_tokens);
    let how = engine.map_or(FixedLength::IgnoreEos, |e| e.spec().fixed_length);
    match how {
        FixedLength::MinTokens => {
            fields.insert("ignore_eos".into(), Value::Bool(true));
            fields.insert("min_tokens".into(), json!(min));
        }
        FixedLength::NPredict => {
            fields.insert("ignore_eos".into(), Value::Bool(true));
            fields.insert("n_predict".into(), json!(workload.max_tokens));
        }
        FixedLength::Unsupported { warning } => {
            fields.insert("ignore_eos".into(), Value::Null);
            return (fields, Some(warning.into()));
        }
        FixedLength::IgnoreEos => {
            fields.insert("ignore_eos".into(), Value::Bool(true));
        }
    }
    (fields, None)
}

/// Whether the load may reuse keep-alive connections (llama-server closes them after a
/// streamed answer: see src/engine/llama_cpp.rs). An unknown engine may.
pub fn reuses_connections(engine: Option<Engine>) -> bool {
    engine.is_none_or(|e| e.spec().reuses_connections)
}

/// Applies `extra` to a request body: the per-engine fields win over the generic ones, and a
/// null removes a field the engine does not know.
pub fn merge_fields(body: &mut Value, extra: &Map<String, Value>) {
    if let Some(obj) = body.as_object_mut() {
        for (k, v) in extra {
            if v.is_null() {
                obj.remove(k);
            } else {
                obj.insert(k.clone(), v.clone());
            }
        }
    }
}

/// Sets a request's output length to a drawn one: `max_tokens`, and the engine's own fields
/// where the dialect added them (`min_tokens` to the same length with `ignore_eos`, else no
/// more than it; llama.cpp's `n_predict`).
pub fn set_output_length(body: &mut Value, tokens: u32, ignore_eos: bool) {
    let Some(obj) = body.as_object_mut() else {
        return;
    };
    obj.insert("max_tokens".into(), json!(tokens));
    if let Some(min) = obj.get("min_tokens").and_then(Value::as_u64) {
        let min = if ignore_eos {
            u64::from(tokens)
        } else {
            min.min(u64::from(tokens))
        };
        obj.insert("min_tokens".into(), json!(min));
    }
    if obj.contains_key("n_predict") {
        obj.insert("n_predict".into(), json!(tokens));
    }
}

/// Successful requests whose output was not the requested length, when the profile asks
/// for fixed lengths (`ignore_eos`); zero otherwise. The requested length is the drawn one
/// where the profile draws lengths (request n of the batch is request `first + n` of the run),
/// or the one the request itself records (multi-turn turns).
pub fn length_misses(
    finished: &[Finished],
    workload: &Workload,
    lengths: &Lengths,
    first: u64,
) -> u64 {
    if !workload.ignore_eos {
        return 0;
    }
    finished
        .iter()
        .filter(|f| {
            let want = (f.requested_output_tokens)
                .or_else(|| (lengths.draw(first + u64::from(f.record.index))).output_tokens)
                .unwrap_or(workload.max_tokens);
            f.record.error.is_none() && f.record.output_tokens != u64::from(want)
        })
        .count() as u64
}

/// Records the misses on the trial and flags it.
/// `max_tokens` is the one length every request asked for, `None` where lengths are drawn.
pub fn note_length_misses(trial: &mut TrialResult, misses: u64, max_tokens: Option<u32>) {
    trial.length_misses = misses;
    let asked = match max_tokens {
        Some(n) => format!("the requested {n} output tokens"),
        None => "their drawn output lengths".to_string(),
    };
    if misses > 0 {
        trial.flags.push(TrialFlag::new(
            FlagKind::LengthMisses,
            format!(
                "{misses} of {} successful requests did not generate {asked} (ignore_eos not \
                 honoured?)",
                trial.succeeded
            ),
        ));
    }
}

/// A run-level warning when more than 5% of successful requests missed the length.
pub fn length_miss_warning(levels: &[crate::record::LevelResult]) -> Option<String> {
    let (misses, ok) = levels
        .iter()
        .flat_map(|l| &l.trials)
        .fold((0u64, 0u64), |(m, o), t| {
            (m + t.length_misses, o + t.succeeded)
        });
    if ok > 0 && misses as f64 > LENGTH_MISS_WARN * ok as f64 {
        Some(format!(
            "{misses} of {ok} successful requests ({:.1}%) missed the requested output length: \
             throughput per request is not comparable; check that the server honours ignore_eos",
            misses as f64 * 100.0 / ok as f64
        ))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::Profile;

    fn workload(ignore_eos: bool) -> Workload {
        let text = format!(
            "name = \"x\"\n[target]\nendpoints = [\"http://127.0.0.1:1\"]\n[workload]\nmax_tokens = 64\nignore_eos = {ignore_eos}\n[sweep]\nconcurrency = [1]\n"
        );
        Profile::parse(&text).unwrap().workload
    }

    #[test]
    fn fields_per_engine() {
        let w = workload(true);
        let (f, warn) = fixed_length_fields(Some(Engine::Vllm), &w);
        assert_eq!(f["ignore_eos"], true);
        assert_eq!(f["min_tokens"], 64);
        assert!(warn.is_none());
        let (f, _) = fixed_length_fields(Some(Engine::Sglang), &w);
        assert_eq!(f["min_tokens"], 64);
        let (f, _) = fixed_length_fields(Some(Engine::LlamaCpp), &w);
        assert_eq!(f["n_predict"], 64);
        assert!(f.get("min_tokens").is_none());
        let (f, warn) = fixed_length_fields(Some(Engine::Tgi), &w);
        assert!(f["ignore_eos"].is_null() && warn.is_some());
        let mut body = json!({"ignore_eos": true, "max_tokens": 64});
        merge_fields(&mut body, &f);
        assert_eq!(body, json!({"max_tokens": 64}));
        let (f, _) = fixed_length_fields(None, &w);
        assert_eq!(f.len(), 1);
        let (f, _) = fixed_length_fields(Some(Engine::Vllm), &workload(false));
        assert!(f.is_empty());
    }
}
