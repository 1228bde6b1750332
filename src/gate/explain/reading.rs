//! The typed rules that read the moved figures as causes, likeliest first.

use serde::{Deserialize, Serialize};

use super::figure::Figure;
use super::moved::Moved;

/// A reading of the moved figures, from typed rules; the first is the likeliest cause.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cause {
    KvCacheFillsSooner,
    PromptLonger,
    SpeculationFell,
    FewerRunAtOnce,
    OutputLengthChanged,
    ErrorsRose,
    DecodeSlower,
    LongerWaitForFirstToken,
    SlowerEndToEnd,
}

impl Cause {
    fn reading(self) -> &'static str {
        match self {
            Cause::KvCacheFillsSooner => {
                "the KV cache fills sooner (a memory or max-num-seqs change?)"
            }
            Cause::PromptLonger => {
                "more prompt tokens are served: the chat template or tokenizer changed"
            }
            Cause::SpeculationFell => "speculative (MTP) acceptance fell",
            Cause::FewerRunAtOnce => {
                "requests queue for a slot: fewer run at once (a lower max batch, max-num-seqs?)"
            }
            Cause::OutputLengthChanged => {
                "answers have another length: EOS, stop strings or max_tokens handling changed"
            }
            Cause::ErrorsRose => "more requests fail",
            Cause::DecodeSlower => "each decode step is slower: kernels, clocks or a busier GPU",
            Cause::LongerWaitForFirstToken => {
                "requests wait longer for their first token: prefill or scheduling"
            }
            Cause::SlowerEndToEnd => {
                "requests of the same lengths take longer: the server is slower per request"
            }
        }
    }
}

/// One reading at one level: the cause and the figures it reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reading {
    pub cause: Cause,
    /// "batch size 14.2 -> 9.8 (-31%), preemptions 0 -> 0.212: the KV cache fills sooner (...)".
    pub said: String,
}

/// The typed rules: which causes the moved figures read as, likeliest first.
pub(super) fn read(moved: &[Moved]) -> Vec<Reading> {
    let find = |f: Figure| moved.iter().find(|m| m.figure == f);
    let up = |f: Figure| find(f).filter(|m| m.up());
    let down = |f: Figure| find(f).filter(|m| !m.up());
    let mut out = Vec::new();
    let mut say = |cause: Cause, figures: Vec<&Moved>| {
        let shown: Vec<String> = figures.iter().map(|m| m.said()).collect();
        out.push(Reading {
            cause,
            said: format!("{}: {}", shown.join(", "), cause.reading()),
        });
    };
    let kv: Vec<&Moved> = [
        down(Figure::BatchSize),
        up(Figure::KvCacheUsage),
        up(Figure::PreemptionsPerRequest),
    ]
    .into_iter()
    .flatten()
    .collect();
    let kv_cause = up(Figure::PreemptionsPerRequest).is_some()
        || (up(Figure::KvCacheUsage).is_some() && down(Figure::BatchSize).is_some());
    if kv_cause {
        say(Cause::KvCacheFillsSooner, kv);
    }
    if let Some(p) = up(Figure::PromptTokensPerRequest) {
        say(Cause::PromptLonger, vec![p]);
    }
    if let Some(c) = down(Figure::TokensPerChunk) {
        say(Cause::SpeculationFell, vec![c]);
    }
    // A smaller batch or requests queueing for a slot, the KV cache not filling: the batch
    // is capped. Either gauge suffices: each is read from a few scrapes under load.
    let capped: Vec<&Moved> = [down(Figure::BatchSize), up(Figure::Waiting)]
        .into_iter()
        .flatten()
        .collect();
    if !kv_cause && !capped.is_empty() {
        say(Cause::FewerRunAtOnce, capped.clone());
    }
    if let Some(o) = find(Figure::OutputTokensPerRequest) {
        say(Cause::OutputLengthChanged, vec![o]);
    }
    if let Some(e) = up(Figure::ErrorRate) {
        say(Cause::ErrorsRose, vec![e]);
    }
    // Latency alone, when nothing above explains it.
    let mut said_any = kv_cause
        || up(Figure::PromptTokensPerRequest).is_some()
        || down(Figure::TokensPerChunk).is_some()
        || !capped.is_empty()
        || find(Figure::OutputTokensPerRequest).is_some()
        || up(Figure::ErrorRate).is_some();
    // Decode time per token: the mean over every token (TPOT) and the median gap (ITL).
    let decode: Vec<&Moved> = [up(Figure::TpotMean), up(Figure::ItlP50)]
        .into_iter()
        .flatten()
        .collect();
    if !said_any && !decode.is_empty() {
        say(Cause::DecodeSlower, decode);
        said_any = true;
    }
    if !said_any {
        if let Some(t) = up(Figure::TtftP50) {
            say(Cause::LongerWaitForFirstToken, vec![t]);
            said_any = true;
        }
    }
    if !said_any {
        if let Some(e) = up(Figure::E2eP50) {
            say(Cause::SlowerEndToEnd, vec![e]);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::figure::Scale;
    use super::*;

    fn moved(figure: Figure, base: f64, head: f64) -> Moved {
        let ratio = figure.scale() == Scale::Ratio;
        let change = if ratio { head / base } else { head - base };
        Moved {
            figure,
            base,
            head,
            change,
            low: change,
            high: change,
            ratio_scale: ratio,
        }
    }

    fn causes(m: &[Moved]) -> Vec<Cause> {
        read(m).into_iter().map(|r| r.cause).collect()
    }

    #[test]
    fn each_cause_is_read_from_its_own_figures() {
        let kv = [
            moved(Figure::BatchSize, 14.2, 9.8),
            moved(Figure::KvCacheUsage, 0.61, 0.93),
            moved(Figure::PreemptionsPerRequest, 0.0, 0.212),
            moved(Figure::Waiting, 1.0, 6.0),
        ];
        let r = read(&kv);
        assert_eq!(r[0].cause, Cause::KvCacheFillsSooner);
        assert_eq!(
            r[0].said,
            "batch size 14.2 -> 9.8 (-31%), KV cache 61% -> 93%, preemptions per request \
             0.000 -> 0.212: the KV cache fills sooner (a memory or max-num-seqs change?)"
        );
        assert!(!causes(&kv).contains(&Cause::FewerRunAtOnce));
        let batch = [
            moved(Figure::BatchSize, 8.0, 4.0),
            moved(Figure::Waiting, 0.0, 4.0),
        ];
        assert_eq!(causes(&batch), vec![Cause::FewerRunAtOnce]);
        let template = [
            moved(Figure::TtftP50, 20.0, 31.0),
            moved(Figure::PromptTokensPerRequest, 100.0, 138.0),
        ];
        assert_eq!(causes(&template), vec![Cause::PromptLonger]);
        let mtp = [
            moved(Figure::ItlP50, 10.0, 14.0),
            moved(Figure::TokensPerChunk, 2.8, 1.9),
        ];
        assert_eq!(causes(&mtp), vec![Cause::SpeculationFell]);
        let slower = [moved(Figure::ItlP50, 10.0, 11.0)];
        assert_eq!(causes(&slower), vec![Cause::DecodeSlower]);
        let e2e = [moved(Figure::E2eP50, 160.0, 178.0)];
        assert_eq!(causes(&e2e), vec![Cause::SlowerEndToEnd]);
        assert!(read(&[]).is_empty());
    }
}
