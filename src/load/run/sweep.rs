//! The closed-loop sweep: for each concurrency level, warmup requests (not counted), then
//! independent trials. In a trial, `concurrency` workers each send a request, wait for it to
//! finish, and send the next, until the trial's request count is reached.

use std::io::Write;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use reqwest::header::HeaderValue;

use super::interrupt::Interrupt;
use super::trial::{Asked, TrialTally};
use crate::load::stream::client::{send, Observed, RequestLimits};
use crate::load::stream::outcome::{finish, Finished, Slot};
use crate::load::wire::body::{api_url, request_body};
use crate::load::workload::conversation::{Chat, Conversations, TurnOf};
use crate::load::workload::lengths::{Drawn, Lengths};
use crate::load::workload::prompts::{Prompt, Prompts};
use crate::profile::{Api, Workload};
use crate::record::{Arm, ErrorClass, RequestRecord, Window};

/// Everything the workers share during a run.
pub struct Shared {
    pub client: crate::load::wire::http::LoadClient,
    /// The API URL on each endpoint (of the head, in a relative run).
    pub urls: Vec<hyper::Uri>,
    /// Relative (A/B) runs: the API URL on each endpoint of the base arm.
    pub base_urls: Vec<hyper::Uri>,
    pub model: String,
    /// Relative (A/B) runs: the model the base arm's requests name.
    pub base_model: String,
    pub api: Api,
    pub workload: Workload,
    /// Per-engine request fields (dialect.rs), applied over the generic body.
    pub extra_fields: serde_json::Map<String, serde_json::Value>,
    pub prompts: Prompts,
    /// The per-request lengths drawn from the profile's distributions, if any.
    pub lengths: Lengths,
    /// Multi-turn datasets: the conversations a worker sends turn by turn.
    pub conversations: Option<Conversations>,
    pub api_key: Option<HeaderValue>,
    pub limits: RequestLimits,
    /// The run's time origin.
    pub clock: Instant,
    /// Where every finished request is written, one JSON line each, as it finishes.
    pub journal: Mutex<Box<dyn Write + Send>>,
    pub progress: super::progress::Progress,
    /// Stops the sweep on SIGINT/SIGTERM (workers send nothing new once it is set).
    pub interrupt: Interrupt,
    /// The running batch's tally: each request is folded in as it finishes, then dropped
    /// (batches run one at a time).
    pub tally: Mutex<TrialTally>,
}

impl Shared {
    /// Starts a batch's tally (the one before is dropped).
    pub fn start_tally(&self, tally: TrialTally) {
        *self.tally.lock().unwrap_or_else(|e| e.into_inner()) = tally;
    }

    /// The finished batch's tally.
    pub fn take_tally(&self) -> TrialTally {
        std::mem::take(&mut *self.tally.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// What happens to every request as it finishes: written to `requests.jsonl`, counted
    /// by the progress display, and folded into the batch's tally, which drops it.
    pub(crate) fn finished(
        &self,
        batch: Batch,
        f: Finished,
        drawn: Drawn,
        turn: Option<TurnOf>,
    ) -> Result<()> {
        self.journal(&f.record, drawn, turn)?;
        self.progress.request_done(&f.record);
        let number = batch.first_prompt + u64::from(f.record.index);
        let misses = crate::load::dialect::length_misses(
            std::slice::from_ref(&f),
            &self.workload,
            &self.lengths,
            batch.first_prompt,
        );
        let asked = Asked {
            input_tokens: self.asked_input(number),
            missed_length: misses > 0,
        };
        (self.tally.lock().unwrap_or_else(|e| e.into_inner())).add(f, asked);
        Ok(())
    }

    /// The prompt length request `number` of the run asked for: synthetic prompts ask for
    /// their drawn length (else `input_tokens`) plus the shared prefix; a prompts file or a
    /// dataset asks for none.
    fn asked_input(&self, number: u64) -> Option<u32> {
        match &self.prompts {
            Prompts::Synthetic { words, .. } => {
                let own = self.lengths.draw(number).input_words.unwrap_or(*words);
                Some(own.saturating_add(self.prompts.prefix_tokens()))
            }
            Prompts::File(_) => None,
        }
    }

    /// Writes a finished request, with the lengths drawn for it (`requested_input_words`,
    /// or `requested_input_tokens` with the model's tokenizer, and `requested_output_tokens`;
    /// absent where the profile draws none) and, in multi-turn runs, its `conversation` and
    /// `turn`.
    pub(crate) fn journal(
        &self,
        record: &RequestRecord,
        drawn: Drawn,
        turn: Option<TurnOf>,
    ) -> Result<()> {
        #[derive(serde::Serialize)]
        struct Line<'a> {
            #[serde(flatten)]
            record: &'a RequestRecord,
            #[serde(flatten, skip_serializing_if = "Option::is_none")]
            turn: Option<TurnOf>,
            #[serde(skip_serializing_if = "Option::is_none")]
            requested_input_words: Option<u32>,
            #[serde(skip_serializing_if = "Option::is_none")]
            requested_input_tokens: Option<u32>,
            #[serde(skip_serializing_if = "Option::is_none")]
            requested_output_tokens: Option<u32>,
        }
        // With the model's tokenizer the asked length is tokens, else words.
        let exact = self.prompts.exact();
        let mut line = serde_json::to_vec(&Line {
            record,
            turn,
            requested_input_words: drawn.input_words.filter(|_| !exact),
            requested_input_tokens: drawn.input_words.filter(|_| exact),
            requested_output_tokens: drawn.output_tokens,
        })?;
        line.push(b'\n');
        let mut journal = self.journal.lock().unwrap_or_else(|e| e.into_inner());
        journal
            .write_all(&line)
            .and_then(|_| journal.flush())
            .context("cannot write requests.jsonl")
    }
}

/// Which requests a batch sends.
#[derive(Debug, Clone, Copy)]
pub struct Batch {
    pub concurrency: u32,
    /// 1-based trial number, 0 for warmup.
    pub trial: u32,
    pub requests: u32,
    /// Prompt number of the batch's first request (prompts never repeat within a run, so a
    /// prefix cache cannot make later trials look faster).
    pub first_prompt: u64,
    /// Duration trials: the windows; `requests` is then ignored (closed loop sends until
    /// the windows are over).
    pub windows: Option<Windows>,
    /// Open loop: the level's target rate, recorded on every request.
    pub rate: Option<f64>,
    /// Relative (A/B) runs: the server the batch goes to, recorded on every request.
    pub arm: Option<Arm>,
}

/// The windows of a duration trial: warmup, measured, cooldown, back to back.
#[derive(Debug, Clone, Copy)]
pub struct Windows {
    pub warmup: Duration,
    pub measure: Duration,
    pub cooldown: Duration,
}

impl Windows {
    pub fn total(&self) -> Duration {
        self.warmup + self.measure + self.cooldown
    }

    /// The window of a request sent `offset_s` seconds after the trial started.
    pub fn window_at(&self, offset_s: f64) -> Window {
        if offset_s < self.warmup.as_secs_f64() {
            Window::Warmup
        } else if offset_s < (self.warmup + self.measure).as_secs_f64() {
            Window::Measure
        } else {
            Window::Cooldown
        }
    }
}

/// Sends a batch closed-loop, each request handed to [`Shared::finished`] as it finishes.
pub async fn run_batch(shared: &Arc<Shared>, batch: Batch) -> Result<()> {
    let next = Arc::new(AtomicU32::new(0));
    let next_conversation = Arc::new(AtomicU64::new(0));
    let (limit, workers) = match batch.windows {
        Some(_) => (u32::MAX, batch.concurrency),
        None => (batch.requests, batch.concurrency.min(batch.requests.max(1))),
    };
    let start = Instant::now();
    let mut handles = Workers(Vec::with_capacity(workers as usize));
    for _ in 0..workers {
        let shared = Arc::clone(shared);
        let next = Arc::clone(&next);
        let next_conversation = Arc::clone(&next_conversation);
        handles.0.push(tokio::spawn(async move {
            // When this worker's previous response ended (seconds on the run's clock).
            let mut previous_end: Option<f64> = None;
            // Multi-turn runs: this worker's conversation in progress.
            let mut chat = None;
            loop {
                if shared.interrupt.is_stopping() {
                    break;
                }
                let window = match batch.windows {
                    Some(w) => {
                        let offset = start.elapsed();
                        if offset >= w.total() {
                            break;
                        }
                        Some(w.window_at(offset.as_secs_f64()))
                    }
                    None => None,
                };
                let index = next.fetch_add(1, Ordering::Relaxed);
                if index >= limit {
                    break;
                }
                let (mut finished, drawn, turn) = match &shared.conversations {
                    None => {
                        let drawn = shared.lengths.draw(batch.first_prompt + u64::from(index));
                        let f = send_one(&shared, batch, index, None, window).await;
                        (f, drawn, None)
                    }
                    Some(conversations) => {
                        let c = chat.take().unwrap_or_else(|| {
                            let n = next_conversation.fetch_add(1, Ordering::Relaxed);
                            conversations.start(batch.first_prompt + n)
                        });
                        let (f, drawn, turn, next) =
                            send_turn(&shared, conversations, c, batch, index, window).await;
                        chat = next;
                        (f, drawn, Some(turn))
                    }
                };
                let record = &mut finished.record;
                record.idle_before_ms =
                    previous_end.map(|end| ((record.sent_s - end) * 1000.0).max(0.0));
                previous_end = Some(record.end_s);
                shared.finished(batch, finished, drawn, turn)?;
            }
            anyhow::Ok(())
        }));
    }
    for handle in handles.0.iter_mut() {
        handle.await.context("a request worker panicked")??;
    }
    Ok(())
}

/// A batch's request workers, aborted when the batch is dropped before they end (a job's
/// deadline drops the block it was measuring): none goes on sending to a server that is
/// stopped, or writing into a block that was left out.
struct Workers(Vec<tokio::task::JoinHandle<Result<()>>>);

impl Drop for Workers {
    fn drop(&mut self) {
        for handle in &self.0 {
            handle.abort();
        }
    }
}

/// Sends the next turn of `chat` as request `index` of the batch, to the conversation's
/// endpoint; returns it with the length it asked for, its place, and the conversation with
/// its answer carried (None when the conversation is over).
async fn send_turn(
    shared: &Shared,
    conversations: &Conversations,
    chat: Chat,
    batch: Batch,
    index: u32,
    window: Option<Window>,
) -> (Finished, Drawn, TurnOf, Option<Chat>) {
    let (prompt, tokens, turn) = conversations.request(&chat);
    let body = body_for(shared, batch, &prompt, Some(tokens));
    let endpoint = Some(chat.endpoint());
    let mut f = send_built(shared, batch, index, body, None, window, endpoint).await;
    // Taken whatever the outcome: a failed turn's partial answer is not held until the
    // trial ends.
    let answer = f.answer.take().unwrap_or_default();
    let next = conversations.advance(chat, f.record.error.is_none().then_some(answer));
    f.requested_output_tokens = Some(tokens);
    let drawn = Drawn {
        input_words: None,
        output_tokens: Some(tokens),
    };
    (f, drawn, turn, next)
}

/// Sends request `index` of the batch; `scheduled_s` (open loop) and `window` (duration
/// trials) are recorded with it.
pub(crate) async fn send_one(
    shared: &Shared,
    batch: Batch,
    index: u32,
    scheduled_s: Option<f64>,
    window: Option<Window>,
) -> Finished {
    let body = build_body(shared, batch, index);
    send_built(shared, batch, index, body, scheduled_s, window, None).await
}

/// The body of request `index` of the batch. Built apart from the send so an open-loop
/// schedule can build it before the send time (cutting a prompt at N tokens takes a
/// tokenizer pass, which would otherwise count as send lag).
pub(crate) fn build_body(shared: &Shared, batch: Batch, index: u32) -> bytes::Bytes {
    let number = batch.first_prompt + u64::from(index);
    let drawn = shared.lengths.draw(number);
    let prompt = shared.prompts.get_sized(number, drawn.input_words);
    body_for(shared, batch, &prompt, drawn.output_tokens)
}

/// The body that sends `prompt` to the batch's arm, asking for `output_tokens` when given.
fn body_for(
    shared: &Shared,
    batch: Batch,
    prompt: &Prompt,
    output_tokens: Option<u32>,
) -> bytes::Bytes {
    let model = match batch.arm {
        Some(Arm::Base) => &shared.base_model,
        _ => &shared.model,
    };
    let mut body = request_body(shared.api, model, &shared.workload, prompt);
    crate::load::dialect::merge_fields(&mut body, &shared.extra_fields);
    if let Some(tokens) = output_tokens {
        crate::load::dialect::set_output_length(&mut body, tokens, shared.workload.ignore_eos);
    }
    bytes::Bytes::from(serde_json::to_vec(&body).unwrap_or_default())
}

/// Sends a built request body as request `index` of the batch, to `endpoint` (by default
/// the endpoints take turns by request index).
pub(crate) async fn send_built(
    shared: &Shared,
    batch: Batch,
    index: u32,
    body: bytes::Bytes,
    scheduled_s: Option<f64>,
    window: Option<Window>,
    endpoint: Option<usize>,
) -> Finished {
    let urls = match batch.arm {
        Some(Arm::Base) => &shared.base_urls,
        _ => &shared.urls,
    };
    let endpoint = endpoint.unwrap_or(index as usize) % urls.len();
    let sent_s = shared.clock.elapsed().as_secs_f64();
    let request = send(
        &shared.client,
        &urls[endpoint],
        body,
        shared.api_key.as_ref(),
        shared.workload.stream,
        shared.limits,
        shared.clock,
    );
    // A request still in flight when an interrupted run gives up is counted, not dropped.
    let observed = tokio::select! {
        biased;
        o = request => o,
        _ = shared.interrupt.abandoned() => Observed {
            sent_s,
            end_s: shared.clock.elapsed().as_secs_f64(),
            failure: Some((
                ErrorClass::Cancelled,
                "still in flight when the interrupted run stopped waiting".into(),
            )),
            ..Observed::default()
        },
    };
    let slot = Slot {
        concurrency: batch.concurrency,
        trial: batch.trial,
        index,
        warmup: batch.trial == 0,
        endpoint,
    };
    let mut finished = finish(observed, slot, &shared.workload);
    finished.record.rate = batch.rate;
    finished.record.scheduled_s = scheduled_s;
    finished.record.window = window;
    finished.record.arm = batch.arm;
    finished
}

/// The API URL for each endpoint, checked once before anything is sent.
pub fn urls_for(endpoints: &[String], api: Api) -> Result<Vec<hyper::Uri>> {
    endpoints
        .iter()
        .map(|e| {
            crate::record::redact::register_endpoint(e);
            let url = api_url(e, api);
            url.parse::<hyper::Uri>().with_context(|| {
                let e = crate::record::redact::redact_url(e);
                let url = crate::record::redact::redact_url(&url);
                format!("endpoint {e:?} does not make a valid URL ({url})")
            })
        })
        .collect()
}
