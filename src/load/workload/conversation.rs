//! Multi-turn conversations (`workload.dataset.turns` above 1): a worker takes a
//! conversation and sends its user turns one after another, each once the answer to the one
//! before has come back, each carrying the whole conversation so far. The answers carried
//! are the server's own (what a chat client sends back, so a server that keeps what it
//! generated in its prefix cache serves the history from there) or, with
//! `history = "dataset"`, the dataset's reference answers (the same prompts every run).
//!
//! Every turn is one request, counted and journalled like any other, with its conversation
//! number and turn. A turn that fails ends its conversation (its successors would carry a
//! history the server never answered); the worker starts the next conversation. So does a
//! conversation whose history would pass [`MAX_HISTORY_BYTES`] (counted, and warned about).
//! A conversation's turns all go to one endpoint, as a chat's would with session affinity,
//! so the history a server cached is there for the next turn.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use serde_json::{json, Value};

use super::dataset::ChatTurn;
use super::prompts::Prompt;
use crate::profile::History;

/// The most bytes of one answer kept to carry forward, whatever `max_tokens` allows.
pub const MAX_ANSWER_BYTES: usize = 4 * 1024 * 1024;

/// Bytes kept per output token asked for: far above a real token's text (a few bytes), a
/// bound against a server that sends more text than its tokens could hold.
const ANSWER_BYTES_PER_TOKEN: usize = 32;

/// The most bytes of history one conversation carries (each worker holds one conversation):
/// about two million tokens of text, past any context window.
pub const MAX_HISTORY_BYTES: usize = 8 * 1024 * 1024;

/// The conversations of a run, used round-robin by conversation number.
#[derive(Debug, Clone)]
pub struct Conversations {
    list: Arc<[Vec<ChatTurn>]>,
    history: History,
    /// `workload.max_tokens`: no turn asks for more.
    max_tokens: u32,
    /// Conversations ended because their history reached [`MAX_HISTORY_BYTES`].
    ended_at_bound: Arc<AtomicU64>,
}

/// Where a request stands in its conversation, as journalled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct TurnOf {
    /// The conversation's number in the run (its dataset row is this modulo the rows).
    pub conversation: u64,
    /// 1-based.
    pub turn: u32,
}

/// One conversation in progress.
#[derive(Debug)]
pub struct Chat {
    number: u64,
    /// 0-based index of the turn to send next.
    turn: usize,
    /// The conversation so far: user and assistant messages, the next user turn last.
    messages: Vec<Value>,
    /// The bytes of text in `messages`.
    bytes: usize,
}

impl Chat {
    /// The endpoint its turns go to (the request's endpoint list, modulo its length).
    pub fn endpoint(&self) -> usize {
        self.number as usize
    }
}

impl Conversations {
    /// `list` holds each conversation's turns (empty ones are left out; None when none is
    /// left); `max_tokens` caps their lengths.
    pub fn new(
        list: Vec<Vec<ChatTurn>>,
        history: History,
        max_tokens: u32,
    ) -> Option<Conversations> {
        let list: Arc<[Vec<ChatTurn>]> = list.into_iter().filter(|c| !c.is_empty()).collect();
        (!list.is_empty()).then(|| Conversations {
            list,
            history,
            max_tokens,
            ended_at_bound: Arc::default(),
        })
    }

    /// How much of each answer the client keeps: none with the dataset's answers, else the
    /// asked length's worth of text (bounded by [`MAX_ANSWER_BYTES`]).
    pub fn answer_bytes(&self) -> usize {
        match self.history {
            History::Dataset => 0,
            History::Server => (self.max_tokens as usize)
                .saturating_mul(ANSWER_BYTES_PER_TOKEN)
                .clamp(4096, MAX_ANSWER_BYTES),
        }
    }

    /// The run's warning when conversations were cut short by the history bound.
    pub fn bound_warning(&self) -> Option<String> {
        match self.ended_at_bound.load(Ordering::Relaxed) {
            0 => None,
            n => Some(format!(
                "{n} conversation(s) ended before their last turn: their history reached \
                 {} MiB (a server sending far more text than its answers' tokens?)",
                MAX_HISTORY_BYTES >> 20
            )),
        }
    }

    fn turns(&self, number: u64) -> &[ChatTurn] {
        &self.list[(number % self.list.len() as u64) as usize]
    }

    /// Starts conversation `number`: its first user turn is the next to send.
    pub fn start(&self, number: u64) -> Chat {
        let first = &self.turns(number)[0];
        Chat {
            number,
            turn: 0,
            bytes: first.user.len(),
            messages: vec![json!({"role": "user", "content": first.user})],
        }
    }

    /// The next request of `chat`: its prompt (the conversation so far), its output length
    /// (the reference answer's, capped at `workload.max_tokens`) and its place.
    pub fn request(&self, chat: &Chat) -> (Prompt, u32, TurnOf) {
        let turn = &self.turns(chat.number)[chat.turn];
        (
            Prompt::Messages(chat.messages.clone()),
            turn.answer_tokens.clamp(1, self.max_tokens.max(1)),
            TurnOf {
                conversation: chat.number,
                turn: chat.turn as u32 + 1,
            },
        )
    }

    /// After a turn: `answer` is the server's text when the turn succeeded (None when it
    /// failed). Returns the conversation with its next user turn appended, or None when it
    /// is over (no turn left, or this one failed).
    pub fn advance(&self, mut chat: Chat, answer: Option<String>) -> Option<Chat> {
        let answer = answer?;
        let turns = self.turns(chat.number);
        let carried = match self.history {
            History::Server => answer,
            History::Dataset => turns[chat.turn].answer.clone(),
        };
        chat.turn += 1;
        let next = turns.get(chat.turn)?;
        chat.bytes = chat.bytes.saturating_add(carried.len() + next.user.len());
        if chat.bytes > MAX_HISTORY_BYTES {
            self.ended_at_bound.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        (chat.messages).push(json!({"role": "assistant", "content": carried}));
        (chat.messages).push(json!({"role": "user", "content": next.user}));
        Some(chat)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(user: &str, answer: &str, tokens: u32) -> ChatTurn {
        ChatTurn {
            user: user.into(),
            answer: answer.into(),
            answer_tokens: tokens,
        }
    }

    fn conversations(history: History) -> Conversations {
        Conversations::new(
            vec![
                vec![
                    turn("q1", "a1", 5),
                    turn("q2", "a2", 900),
                    turn("q3", "a3", 7),
                ],
                vec![],
                vec![turn("r1", "b1", 3)],
            ],
            history,
            64,
        )
        .unwrap()
    }

    fn contents(p: &Prompt) -> Vec<String> {
        let Prompt::Messages(m) = p else {
            panic!("{p:?}")
        };
        (m.iter())
            .map(|m| {
                format!(
                    "{}:{}",
                    m["role"].as_str().unwrap(),
                    m["content"].as_str().unwrap()
                )
            })
            .collect()
    }

    /// Each turn carries the conversation so far, with the server's answers by default.
    #[test]
    fn turns_carry_the_conversation_so_far() {
        let c = conversations(History::Server);
        assert_eq!(c.answer_bytes(), 4096, "64 tokens' worth, at least 4 KiB");
        let chat = c.start(0);
        let (p, tokens, at) = c.request(&chat);
        assert_eq!(contents(&p), ["user:q1"]);
        assert_eq!((tokens, at.conversation, at.turn), (5, 0, 1));
        let chat = c.advance(chat, Some("server said".into())).unwrap();
        let (p, tokens, at) = c.request(&chat);
        assert_eq!(
            contents(&p),
            ["user:q1", "assistant:server said", "user:q2"]
        );
        assert_eq!((tokens, at.turn), (64, 2), "capped at workload.max_tokens");
        let chat = c.advance(chat, Some("again".into())).unwrap();
        assert_eq!(c.request(&chat).2.turn, 3);
        assert!(
            c.advance(chat, Some("last".into())).is_none(),
            "no turn left"
        );
    }

    #[test]
    fn dataset_history_carries_the_reference_answers() {
        let c = conversations(History::Dataset);
        assert_eq!(c.answer_bytes(), 0);
        let chat = c.advance(c.start(0), Some(String::new())).unwrap();
        let (p, _, _) = c.request(&chat);
        assert_eq!(contents(&p), ["user:q1", "assistant:a1", "user:q2"]);
    }

    /// A failed turn ends its conversation; numbers wrap round the (non-empty) list.
    #[test]
    fn a_failed_turn_ends_the_conversation_and_numbers_wrap() {
        let c = conversations(History::Server);
        assert!(c.advance(c.start(0), None).is_none());
        let (p, tokens, at) = c.request(&c.start(3));
        assert_eq!(contents(&p), ["user:r1"], "3 mod 2 usable conversations");
        assert_eq!((tokens, at.conversation), (3, 3));
        assert!(c.advance(c.start(1), Some("x".into())).is_none());
        assert!(Conversations::new(vec![vec![]], History::Server, 8).is_none());
    }

    /// A history past the bound ends its conversation, counted in the run's warning; the
    /// kept answer is bounded by the asked length.
    #[test]
    fn a_history_past_the_bound_ends_the_conversation() {
        let c = conversations(History::Server);
        assert_eq!(c.bound_warning(), None);
        let huge = "x".repeat(MAX_HISTORY_BYTES);
        assert!(c.advance(c.start(0), Some(huge)).is_none());
        let w = c.bound_warning().unwrap();
        assert!(w.starts_with("1 conversation(s) ended"), "{w}");
        let big = Conversations::new(vec![vec![turn("q", "a", 1)]], History::Server, u32::MAX);
        assert_eq!(big.unwrap().answer_bytes(), MAX_ANSWER_BYTES);
        assert_eq!(c.start(7).endpoint(), 7);
    }
}
