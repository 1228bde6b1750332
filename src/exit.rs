//! Exit codes, the same for every command (see the README).

use std::fmt;

/// How a command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// 0: pass (warnings allowed).
    Pass,
    /// 1: a regression was detected.
    Regression,
    /// 2: the job could not be done: bad input, unreachable server, too many errors.
    Failure,
    /// 3: not comparable: profile or environment differs from the baseline, too few trials.
    NotComparable,
    /// 125: `bisect --step` could not measure this commit (`git bisect run` skips it).
    BisectSkip,
    /// 130 / 143: stopped by SIGINT / SIGTERM, partial results written.
    Interrupted(i32),
}

impl Exit {
    pub fn code(self) -> i32 {
        match self {
            Exit::Pass => 0,
            Exit::Regression => 1,
            Exit::Failure => 2,
            Exit::NotComparable => 3,
            Exit::BisectSkip => 125,
            Exit::Interrupted(sig) => 128 + sig,
        }
    }
}

/// An error that carries its own exit code (anything else exits 2).
#[derive(Debug)]
pub struct CodedError {
    pub exit: Exit,
    pub message: String,
}

impl fmt::Display for CodedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CodedError {}

/// An error that exits 3: the inputs cannot be compared.
pub fn not_comparable(message: impl Into<String>) -> anyhow::Error {
    CodedError {
        exit: Exit::NotComparable,
        message: message.into(),
    }
    .into()
}

/// The exit code for an error: its own when it carries one, else 2.
pub fn exit_for(error: &anyhow::Error) -> Exit {
    error
        .chain()
        .find_map(|e| e.downcast_ref::<CodedError>())
        .map(|c| c.exit)
        .unwrap_or(Exit::Failure)
}
