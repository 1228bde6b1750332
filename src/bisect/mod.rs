//! `throughline bisect`'s machinery: the git walk and each commit's checkout and build
//! (checkout.rs), the log of steps a killed bisect continues from (journal.rs, its hash
//! chain in chain.rs). The command (commands/bisect/) parses its flags and calls it; the
//! search's rules are gate/bisect.rs's.

pub mod chain;
pub mod checkout;
pub mod journal;
