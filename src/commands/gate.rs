//! `throughline gate`: compare a run with a baseline and decide.

use anyhow::Result;

use crate::baseline::Baseline;
use crate::cli::GateArgs;
use crate::exit::Exit;
use crate::fsutil::write_atomic;
use crate::gate::{evaluate, Verdict};
use crate::record::RunResult;
use crate::report::{github, junit, verdict as text};

pub async fn run(args: GateArgs) -> Result<Exit> {
    let candidate = RunResult::load(&args.results)?;
    let baseline = match &args.baseline_ref {
        Some(r) => Baseline::load_at_ref(&args.baseline, r)?,
        None => Baseline::load(&args.baseline)?,
    };
    let mut settings = baseline.gate.clone();
    if let Some(a) = args.alpha {
        settings.alpha = a;
    }
    if let Some(e) = args.min_effect {
        settings.min_effect = e;
    }
    if let Some(n) = args.min_trials {
        settings.min_trials = n;
    }
    let mut verdict = evaluate(&baseline, &candidate, &settings)?;
    verdict.baseline_ref = args.baseline_ref.clone();
    publish(&verdict, &args, &[])?;
    Ok(verdict.outcome.exit())
}

/// Prints the verdict and writes every requested or expected output.
pub fn publish(verdict: &Verdict, args: &GateArgs, images: &[String]) -> Result<()> {
    print!("{}", text::console(verdict));
    if let Some(path) = &args.json {
        write_atomic(path, serde_json::to_string_pretty(verdict)?.as_bytes())?;
    }
    if let Some(path) = &args.junit {
        write_atomic(path, junit::junit(verdict).as_bytes())?;
    }
    let markdown = text::markdown(verdict, images);
    if let Some(path) = &args.markdown {
        write_atomic(path, markdown.as_bytes())?;
    }
    github::append_step_summary(&markdown)?;
    github::write_outputs(verdict)?;
    if github::in_actions() {
        for line in github::annotations(verdict) {
            println!("{line}");
        }
    }
    Ok(())
}
