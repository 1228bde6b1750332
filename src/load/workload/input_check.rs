//! Did the prompts have the length asked for? The server's `usage.prompt_tokens` against
//! the length each request asked for, per trial, flagged when the means differ by more than
//! [`INPUT_TOLERANCE`]: without the model's tokenizer a prompt's length is a word count, and
//! a chat template adds tokens the prompt does not hold, so a trial can quietly measure
//! other prompts than the profile names.

use crate::load::stream::outcome::Finished;
use crate::record::trial_flags::{FlagKind, TrialFlag};
use crate::record::{InputCheck, RequestRecord};

/// The largest relative gap between the achieved and the requested mean prompt length that
/// passes (1%, as the issue asks: a length off by more is another workload).
pub const INPUT_TOLERANCE: f64 = 0.01;

/// The trial's check over its successful requests whose server reported prompt tokens;
/// `requested` gives request `index`'s asked length (None: no length was asked, as for a
/// prompts file). None when no request can be checked.
pub fn check(
    measured: &[Finished],
    exact: bool,
    requested: impl Fn(u32) -> Option<u32>,
) -> Option<InputCheck> {
    let mut tally = InputTally::default();
    for f in measured {
        tally.add(&f.record, requested(f.record.index));
    }
    tally.finish(exact)
}

/// [`check`] folded as requests finish: a count and two sums (of whole numbers, so exact in
/// any order).
#[derive(Debug, Default)]
pub struct InputTally {
    n: u64,
    want: f64,
    got: f64,
}

impl InputTally {
    /// Adds a request that asked for `asked` prompt tokens (None: no length was asked).
    pub fn add(&mut self, r: &RequestRecord, asked: Option<u32>) {
        let (None, Some(achieved), Some(asked)) = (r.error, r.input_tokens, asked) else {
            return;
        };
        self.n += 1;
        self.want += f64::from(asked);
        self.got += achieved as f64;
    }

    /// The check, None when no request could be checked.
    pub fn finish(&self, exact: bool) -> Option<InputCheck> {
        (self.n > 0).then(|| InputCheck {
            requests: self.n,
            requested_mean: self.want / self.n as f64,
            achieved_mean: self.got / self.n as f64,
            exact,
        })
    }
}

/// The flag of a trial whose prompts were off their requested length.
pub fn judge(c: &InputCheck) -> Option<TrialFlag> {
    let off = (c.achieved_mean - c.requested_mean) / c.requested_mean;
    if off.abs() <= INPUT_TOLERANCE {
        return None;
    }
    let unit = if c.exact { "tokens" } else { "words" };
    let why = if c.exact {
        "a chat template or a different tokenizer on the server?"
    } else {
        "lengths are words without workload.tokenizer"
    };
    Some(TrialFlag::new(
        FlagKind::InputLengthOff,
        format!(
            "prompts averaged {:.1} tokens (usage.prompt_tokens) against {:.1} requested \
             {unit}, {:+.1}% ({why})",
            c.achieved_mean,
            c.requested_mean,
            off * 100.0
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::stream::outcome::a_finished_request;

    fn with_input(index: u32, tokens: Option<u64>) -> Finished {
        let mut f = a_finished_request(1.0, 10.0);
        f.record.index = index;
        f.record.input_tokens = tokens;
        f
    }

    #[test]
    fn means_compared_within_one_percent() {
        let reqs = vec![
            with_input(0, Some(100)),
            with_input(1, Some(101)),
            with_input(2, None),
        ];
        let c = check(&reqs, true, |_| Some(100)).unwrap();
        assert_eq!(c.requests, 2);
        assert_eq!((c.requested_mean, c.achieved_mean), (100.0, 100.5));
        assert!(judge(&c).is_none());
        let c = check(&reqs, false, |_| Some(98)).unwrap();
        let flag = judge(&c).expect("2.6% off");
        assert_eq!(flag.kind, FlagKind::InputLengthOff);
        assert!(flag.message.contains("words"), "{}", flag.message);
        // Lower is off too; nothing asked, nothing checked.
        assert!(judge(&check(&reqs, true, |_| Some(103)).unwrap()).is_some());
        assert!(check(&reqs, true, |_| None).is_none());
    }
}
