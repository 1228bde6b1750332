//! Why a trial's figures are less trustworthy, typed: decisions (bless refuses a client-bound
//! run, the gate warns about one) read the kind, people read the message.

use std::fmt;

use serde::{Deserialize, Serialize};

/// What kind of doubt a flag raises.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FlagKind {
    /// The load generator, not the server, limited the trial (headroom check).
    ClientBound,
    /// Tokens per chunk were estimated from text length: ITL is approximate.
    TokensEstimated,
    /// The server reported no usage: output tokens counted one per chunk.
    TokensCountedByChunk,
    /// Requests did not generate the requested length although the profile asked for it.
    LengthMisses,
    /// The client's token count and the server's counter disagree.
    CountersDisagree,
    /// Open loop: the achieved request rate missed the target rate (the schedule collapsed
    /// into a burst, or the client or a concurrency cap could not keep up).
    ScheduleMissed,
    /// The prompt tokens the server counted are off the requested ones by more than 1% on
    /// average (no tokenizer, a chat template, or a different tokenizer).
    InputLengthOff,
    /// Not measured by throughline: transcribed from someone's report.
    Transcribed,
    /// A flag from an older results file whose kind was not recorded.
    Unclassified,
}

impl FlagKind {
    /// The kind in words, as a summary line names it.
    pub fn word(self) -> &'static str {
        match self {
            FlagKind::ClientBound => "client-bound",
            FlagKind::TokensEstimated => "tokens estimated from text",
            FlagKind::TokensCountedByChunk => "tokens counted one per chunk",
            FlagKind::LengthMisses => "output length missed",
            FlagKind::CountersDisagree => "client and server counters disagree",
            FlagKind::ScheduleMissed => "open-loop schedule missed",
            FlagKind::InputLengthOff => "prompt length off",
            FlagKind::Transcribed => "transcribed",
            FlagKind::Unclassified => "flagged",
        }
    }
}

/// One flag on a trial: its kind and a sentence for people.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TrialFlag {
    pub kind: FlagKind,
    pub message: String,
}

impl TrialFlag {
    pub fn new(kind: FlagKind, message: impl Into<String>) -> TrialFlag {
        TrialFlag {
            kind,
            message: message.into(),
        }
    }
}

impl fmt::Display for TrialFlag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// Results files of schema version 1 stored flags as bare sentences. They still load: the
/// client-bound flag is recognised by the fixed prefix every version wrote ("client-bound:"),
/// the only kind a decision reads; the rest are kept as unclassified.
impl<'de> Deserialize<'de> for TrialFlag {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Typed {
            kind: FlagKind,
            message: String,
        }
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Stored {
            Typed(Typed),
            Legacy(String),
        }
        Ok(match Stored::deserialize(d)? {
            Stored::Typed(t) => TrialFlag::new(t.kind, t.message),
            Stored::Legacy(text) => {
                let kind = if text.starts_with(LEGACY_CLIENT_BOUND) {
                    FlagKind::ClientBound
                } else {
                    FlagKind::Unclassified
                };
                TrialFlag::new(kind, text)
            }
        })
    }
}

/// How schema-1 files began a client-bound flag.
const LEGACY_CLIENT_BOUND: &str = "client-bound:";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_round_trip_with_their_kind() {
        let flag = TrialFlag::new(FlagKind::LengthMisses, "3 of 10 missed");
        let json = serde_json::to_string(&flag).unwrap();
        assert_eq!(
            json,
            r#"{"kind":"length-misses","message":"3 of 10 missed"}"#
        );
        assert_eq!(serde_json::from_str::<TrialFlag>(&json).unwrap(), flag);
        assert_eq!(flag.to_string(), "3 of 10 missed");
    }

    #[test]
    fn version_1_sentences_still_load() {
        let bound: TrialFlag =
            serde_json::from_str(r#""client-bound: the load generator lagged""#).unwrap();
        assert_eq!(bound.kind, FlagKind::ClientBound);
        let other: TrialFlag = serde_json::from_str(r#""transcribed from a report""#).unwrap();
        assert_eq!(other.kind, FlagKind::Unclassified);
        assert_eq!(other.message, "transcribed from a report");
    }
}
