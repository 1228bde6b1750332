//! Client-bound trials, one rule for `baseline bless` and the gate (`gate`, `ci`): a trial
//! the load generator limited measured the client, not the server, so neither a baseline nor
//! a verdict takes it unless told to with `--allow-client-bound` (then both take it and say
//! so). The refusal says what to do, since "limited by the client" alone leaves a team stuck.

use anyhow::{bail, Result};

use crate::record::flags::FlagKind;
use crate::record::{flag_lines, RunResult};

/// The flag both commands take to accept client-bound trials.
pub const ALLOW_FLAG: &str = "--allow-client-bound";

/// What to do about a client-bound run, said in every refusal.
pub const ADVICE: &str = "give the client room and run again: fewer concurrent streams per \
     client core (lower the sweep's top levels, or run on a machine with more cores), the \
     client on cores of its own, away from the server's (e.g. `taskset`, or another machine); \
     `throughline selfbench --client-threads N` measures what N client cores sustain. Or accept \
     the trials knowingly with --allow-client-bound (`baseline bless`, `gate` and `ci` all take \
     it, and the verdict says so)";

/// The client-bound flag lines of a run, both arms, each prefixed with its arm.
pub fn lines(run: &RunResult) -> Vec<String> {
    let head = run.flag_lines(Some(FlagKind::ClientBound));
    let base = (run.base.as_ref())
        .map(|b| flag_lines(&b.levels, Some(FlagKind::ClientBound)))
        .unwrap_or_default();
    let prefix = |arm: &str, v: Vec<String>| -> Vec<String> {
        v.into_iter().map(|l| format!("{arm}{l}")).collect()
    };
    let head_arm = if run.base.is_some() { "head: " } else { "" };
    let mut out = prefix(head_arm, head);
    out.extend(prefix("base arm: ", base));
    out
}

/// The gate's refusal of a client-bound run (`gate`, `ci`): exit 3, not comparable, since its
/// figures measured the client, not the server the baseline or base arm measured.
pub fn check_for_gate(which: &str, run: &RunResult, allow: bool) -> Result<()> {
    check(which, run, allow).map_err(|e| crate::exit::not_comparable(format!("{e:#}")))
}

/// Refuses (exit 2, as bless refuses what it cannot keep) a run with client-bound trials
/// unless `allow`; `which` names the run ("results #1", "the run").
pub fn check(which: &str, run: &RunResult, allow: bool) -> Result<()> {
    if allow {
        return Ok(());
    }
    let found = lines(run);
    let Some(first) = found.first() else {
        return Ok(());
    };
    bail!(
        "{which} was limited by the client, not the server ({} trial(s) flagged client-bound; \
         the first: {first}): its figures describe the load generator. To fix it, {ADVICE}",
        found.len()
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::fake;
    use crate::record::flags::TrialFlag;

    fn flagged() -> RunResult {
        let mut run = fake::run(&[(1, &[100.0, 101.0, 99.0])]);
        run.levels[0].trials[1].flags.push(TrialFlag {
            kind: FlagKind::ClientBound,
            message: "client-bound: scheduler lag".into(),
        });
        run
    }

    #[test]
    fn a_client_bound_run_is_refused_with_what_to_do_unless_allowed() {
        let err = check("the run", &flagged(), false).unwrap_err().to_string();
        for said in [
            "client-bound",
            "fewer concurrent streams",
            "--client-threads",
            ALLOW_FLAG,
        ] {
            assert!(err.contains(said), "{said}: {err}");
        }
        check("the run", &flagged(), true).unwrap();
        let err = check_for_gate("the run", &flagged(), false).unwrap_err();
        assert_eq!(
            crate::exit::exit_for(&err),
            crate::exit::Exit::NotComparable
        );
        check("the run", &fake::run(&[(1, &[100.0, 101.0, 99.0])]), false).unwrap();
    }
}
