//! Turning what the client observed into a request record: success or a named failure,
//! token counts, TTFT, TPOT and the per-token gaps.

use super::client::Observed;
use super::tokens::{attribute_tokens, inter_token_gaps_ms, one_per_chunk};
use crate::profile::Workload;
use crate::record::redact::redact;
use crate::record::{ErrorClass, RequestRecord, TokenSource};

/// Where a request sits in the run.
#[derive(Debug, Clone, Copy)]
pub struct Slot {
    pub concurrency: u32,
    pub trial: u32,
    pub index: u32,
    pub warmup: bool,
    pub endpoint: usize,
}

/// A finished request with the figures the trial summary needs.
#[derive(Debug, Clone)]
pub struct Finished {
    pub record: RequestRecord,
    /// Inter-token gaps in ms (successful streaming requests only).
    pub gaps_ms: Vec<f32>,
    /// Per-chunk token counts were spread by text length, not reported by the server.
    pub estimated_split: bool,
    /// The answer's text, when the client was asked to keep it (multi-turn runs take it
    /// at once, so trials do not hold answers).
    pub answer: Option<String>,
    /// The output length this request asked for, where it is not the one drawn for its
    /// number (a multi-turn run's turns); length checks read it first.
    pub requested_output_tokens: Option<u32>,
}

/// Classifies one observed request under the profile's workload rules: a response without
/// usage fails as `missing_usage` when `require_usage` is set (checked before the length, since
/// without usage the length is only an estimate), one shorter than `degenerate_below` fails as
/// `degenerate`.
///
/// A token count over the request's `max_tokens` fails the request as `over_length` (the
/// stream reader has usually stopped it already), one of more than
/// [`MAX_TOKENS_PER_CHUNK`] per content chunk received as `protocol`; its tokens are then
/// counted one per chunk: a server number never sizes an allocation or a sum. Texts that came from the server or an error chain are redacted of
/// the API key and endpoint credentials here, where they enter the record.
pub fn finish(mut obs: Observed, slot: Slot, workload: &Workload) -> Finished {
    let (degenerate_below, streamed) = (workload.degenerate_below, workload.stream);
    if let Some((_, msg)) = &mut obs.failure {
        if let std::borrow::Cow::Owned(clean) = redact(msg) {
            *msg = clean;
        }
    }
    let mut failure = obs.failure.clone();
    let impossible = obs
        .usage
        .and_then(|u| impossible_count(u.completion_tokens, obs.chunks.len(), workload));
    if impossible.is_some() {
        obs.usage = None;
    }
    let mut attribution = attribute_tokens(&obs.chunks, obs.usage.map(|u| u.completion_tokens));
    // Per-chunk running counts (continuous usage) without a final count are checked too.
    let impossible = impossible.or_else(|| {
        let reported = attribution.source == TokenSource::Usage;
        reported
            .then(|| impossible_count(attribution.total, obs.chunks.len(), workload))
            .flatten()
    });
    if let Some(why) = impossible {
        if failure.is_none() {
            failure = Some(why);
        }
        obs.usage = None;
        attribution = one_per_chunk(&obs.chunks);
    }
    let output_tokens = attribution.total;
    if failure.is_none() && workload.require_usage && obs.usage.is_none() {
        failure = Some((
            ErrorClass::MissingUsage,
            format!(
                "the response carried no usage ({output_tokens} tokens counted one per chunk); \
                 the profile sets workload.require_usage = true"
            ),
        ));
    }
    if failure.is_none() && output_tokens < u64::from(degenerate_below) {
        failure = Some((
            ErrorClass::Degenerate,
            format!("only {output_tokens} output tokens (degenerate_below = {degenerate_below})"),
        ));
    }
    let e2e_ms = (obs.end_s - obs.sent_s) * 1000.0;
    let first_token_s = if streamed {
        obs.chunks.first_at_s()
    } else {
        None
    };
    let ttft_ms = first_token_s.map(|t| (t - obs.sent_s) * 1000.0);
    let tpot_ms = match (ttft_ms, output_tokens) {
        (Some(ttft), n) if n > 1 => Some((e2e_ms - ttft) / (n - 1) as f64),
        _ => None,
    };
    let mut gaps_ms = Vec::new();
    if failure.is_none() && streamed {
        inter_token_gaps_ms(&obs.chunks, &attribution.per_chunk, &mut gaps_ms);
    }
    let (error, error_message) = match failure {
        Some((class, msg)) => (Some(class), Some(msg)),
        None => (None, None),
    };
    Finished {
        answer: obs.answer.take(),
        requested_output_tokens: None,
        estimated_split: attribution.estimated_split && error.is_none(),
        gaps_ms,
        record: RequestRecord {
            concurrency: slot.concurrency,
            trial: slot.trial,
            index: slot.index,
            warmup: slot.warmup,
            endpoint: slot.endpoint,
            sent_s: obs.sent_s,
            send_delay_ms: obs.send_delay_s.map(|d| d * 1000.0),
            new_connection: obs.new_connection,
            idle_before_ms: None,
            first_byte_s: obs.first_byte_s,
            first_chunk_s: obs.first_chunk_s,
            first_token_s,
            end_s: obs.end_s,
            ttft_ms,
            e2e_ms,
            tpot_ms,
            output_tokens,
            input_tokens: obs.usage.and_then(|u| u.prompt_tokens),
            cached_tokens: obs.usage.and_then(cached_tokens),
            token_source: attribution.source,
            chunks: obs.chunks.len() as u32,
            finish_reason: obs.finish_reason,
            http_status: obs.http_status,
            error,
            error_message,
            rate: None,
            scheduled_s: None,
            window: None,
            arm: None,
        },
    }
}

/// The most tokens one streamed content chunk is believed to carry. Real chunks carry one
/// token, a few with speculative decoding or MTP (vLLM's deepest drafts are under 16), and
/// some more where a server batches its writes or holds back tokens that make no text yet;
/// 64 leaves four times the deepest speculation as room, while a count thousands of times
/// the chunks received is plainly wrong.
pub const MAX_TOKENS_PER_CHUNK: u64 = 64;

/// Why a server's `usage.completion_tokens` cannot be credited, if it cannot, and the class
/// the request fails in: more than the request's `max_tokens` (no slack: the server was
/// asked for at most that many) is `over_length`; for a streamed response, more than
/// [`MAX_TOKENS_PER_CHUNK`] per content chunk received is `protocol`.
fn impossible_count(
    tokens: u64,
    chunks: usize,
    workload: &Workload,
) -> Option<(ErrorClass, String)> {
    let max = u64::from(workload.max_tokens);
    if tokens > max {
        return Some((
            ErrorClass::OverLength,
            format!(
                "usage.completion_tokens = {tokens} is more than the request's max_tokens = {max}"
            ),
        ));
    }
    let bound = (chunks as u64).saturating_mul(MAX_TOKENS_PER_CHUNK);
    if workload.stream && tokens > bound {
        return Some((
            ErrorClass::Protocol,
            format!(
                "usage.completion_tokens = {tokens} is more than {MAX_TOKENS_PER_CHUNK} per \
                 content chunk received ({chunks} chunks)"
            ),
        ));
    }
    None
}

/// The prompt tokens the server's prefix cache served, when the count can be true: at most
/// the prompt tokens the same usage reports (a count without them, or above them, is
/// dropped rather than believed; a side figure does not fail the request).
fn cached_tokens(u: super::chunk::Usage) -> Option<u64> {
    u.cached_tokens
        .filter(|&c| u.prompt_tokens.is_some_and(|p| c <= p))
}

/// When every request of a batch failed to connect, the server is gone (or was never
/// there): says so, with the first error, so the run can stop instead of sweeping on.
pub fn unreachable(batch: &[Finished]) -> Option<String> {
    let mut failures = ConnectFailures::default();
    for f in batch {
        failures.add(&f.record);
    }
    failures.verdict()
}

/// [`unreachable`] folded as requests finish, so a batch's requests need not be kept: how
/// many there were, how many did not fail to connect, and the message of the first (lowest
/// index) request.
#[derive(Debug, Default)]
pub struct ConnectFailures {
    requests: u64,
    others: u64,
    first: Option<(u32, Option<String>)>,
}

impl ConnectFailures {
    pub fn add(&mut self, r: &RequestRecord) {
        self.requests += 1;
        if r.error != Some(ErrorClass::Connect) {
            // One request that reached the server settles it; no message is needed.
            self.others += 1;
            self.first = None;
            return;
        }
        if self.others == 0 && self.first.as_ref().is_none_or(|(i, _)| r.index < *i) {
            self.first = Some((r.index, r.error_message.clone()));
        }
    }

    /// Why the server looks gone, when every request failed to connect.
    pub fn verdict(&self) -> Option<String> {
        if self.requests == 0 || self.others > 0 {
            return None;
        }
        let message = self.first.as_ref().and_then(|(_, m)| m.as_deref());
        Some(format!(
            "all {} requests failed to connect (e.g. \"{}\"); the server went away",
            self.requests,
            message.unwrap_or("")
        ))
    }
}

/// A successful 10-token request sent at `sent_s` that took `e2e_ms`, for other modules'
/// tests.
#[cfg(test)]
pub(crate) fn a_finished_request(sent_s: f64, e2e_ms: f64) -> Finished {
    let mut obs = tests::observed(10);
    obs.sent_s = sent_s;
    obs.end_s = sent_s + e2e_ms / 1000.0;
    finish(obs, tests::slot(), &tests::workload(false))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::stream::chunk::Usage;
    use crate::load::stream::tokens::ChunkLog;

    pub(super) fn workload(require_usage: bool) -> Workload {
        let text = format!(
            "name = \"t\"\n[target]\nendpoints = [\"http://127.0.0.1:1\"]\n[workload]\nmax_tokens = 64\nrequire_usage = {require_usage}\n[sweep]\nconcurrency = [1]\n"
        );
        crate::profile::Profile::parse(&text).unwrap().workload
    }

    pub(super) fn slot() -> Slot {
        Slot {
            concurrency: 1,
            trial: 1,
            index: 0,
            warmup: false,
            endpoint: 0,
        }
    }

    pub(super) fn observed(tokens: u64) -> Observed {
        Observed {
            sent_s: 1.0,
            first_byte_s: Some(1.01),
            first_chunk_s: Some(1.02),
            end_s: 2.0,
            chunks: {
                let mut log = ChunkLog::new();
                for i in 0..tokens {
                    log.push(1.1 + 0.1 * i as f64, 3, None);
                }
                log
            },
            usage: Some(Usage {
                prompt_tokens: Some(10),
                completion_tokens: tokens,
                cached_tokens: None,
            }),
            ..Observed::default()
        }
    }

    #[test]
    fn success_has_ttft_tpot_and_gaps() {
        let f = finish(observed(10), slot(), &workload(false));
        let r = &f.record;
        assert_eq!(r.error, None);
        assert!((r.ttft_ms.unwrap() - 100.0).abs() < 1e-6);
        assert!((r.e2e_ms - 1000.0).abs() < 1e-6);
        assert!((r.tpot_ms.unwrap() - 100.0).abs() < 1e-6);
        assert_eq!(f.gaps_ms.len(), 9);
        assert_eq!(r.token_source, TokenSource::Usage);
    }

    /// Cached prompt tokens are recorded when they can be true: at most the prompt tokens.
    #[test]
    fn cached_tokens_are_kept_only_within_the_prompt() {
        let with = |prompt: Option<u64>, cached: Option<u64>| {
            let mut obs = observed(10);
            obs.usage = obs.usage.map(|u| Usage {
                prompt_tokens: prompt,
                cached_tokens: cached,
                ..u
            });
            finish(obs, slot(), &workload(false)).record.cached_tokens
        };
        assert_eq!(with(Some(10), Some(8)), Some(8));
        assert_eq!(with(Some(10), Some(10)), Some(10));
        assert_eq!(with(Some(10), None), None);
        assert_eq!(with(Some(10), Some(11)), None);
        assert_eq!(with(None, Some(3)), None);
    }

    #[test]
    fn short_answer_is_degenerate() {
        let f = finish(observed(6), slot(), &workload(false));
        assert_eq!(f.record.error, Some(ErrorClass::Degenerate));
        assert!(f.gaps_ms.is_empty());
    }

    #[test]
    fn missing_usage_fails_only_when_required() {
        let mut obs = observed(10);
        obs.usage = None;
        let f = finish(obs.clone(), slot(), &workload(false));
        assert_eq!(f.record.error, None);
        assert_eq!(f.record.token_source, TokenSource::ChunkCount);
        assert_eq!(f.record.output_tokens, 10);
        let f = finish(obs, slot(), &workload(true));
        assert_eq!(f.record.error, Some(ErrorClass::MissingUsage));
        assert!(f.gaps_ms.is_empty());
    }

    /// Running counts on every chunk (no final usage) that add up past max_tokens are as
    /// much over the length as a final count would be; the tokens are then counted one per
    /// chunk.
    #[test]
    fn running_counts_past_max_tokens_fail_as_over_length() {
        let mut obs = observed(10);
        obs.usage = None;
        let mut log = ChunkLog::new();
        for i in 0..10u64 {
            log.push(1.1 + 0.1 * i as f64, 3, Some(60_000 * (i + 1)));
        }
        obs.chunks = log;
        let f = finish(obs, slot(), &workload(false));
        assert_eq!(f.record.error, Some(ErrorClass::OverLength));
        let msg = f.record.error_message.unwrap();
        assert!(msg.contains("max_tokens = 64"), "{msg}");
        assert_eq!(f.record.output_tokens, 10);
        assert_eq!(f.record.token_source, TokenSource::ChunkCount);
    }

    #[test]
    fn earlier_failure_keeps_its_class() {
        let mut obs = observed(3);
        obs.usage = None;
        obs.failure = Some((ErrorClass::Reset, "cut".into()));
        let f = finish(obs, slot(), &workload(true));
        assert_eq!(f.record.error, Some(ErrorClass::Reset));
        assert_eq!(f.record.error_message.as_deref(), Some("cut"));
    }
}
