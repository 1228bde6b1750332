//! A run against servers that are already up: the sweep measured with each level's row
//! printed as it finishes, then what it wrote and what went wrong, said the same way by
//! `bench`, `ci` and `demo`.

use std::path::Path;

use anyhow::{Context, Result};

use crate::exit::Exit;
use crate::load::{run_bench, BenchOutcome, BenchSetup};
use crate::profile::Profile;
use crate::record::files::{DERIVED_FILES, REQUESTS_FILE, RESULTS_FILE};
use crate::report::console;

/// "wrote DIR/: results.json, ..." with the run's files that are there.
pub fn wrote_line(out: &Path) -> String {
    let there: Vec<&str> = std::iter::once(REQUESTS_FILE)
        .chain(DERIVED_FILES)
        .filter(|n| out.join(n).is_file())
        .collect();
    let earlier = out.join(super::earlier::EARLIER_DIR);
    format!(
        "wrote {}: {}{}",
        out.display(),
        if there.is_empty() {
            "nothing".to_string()
        } else {
            there.join(", ")
        },
        if earlier.is_dir() {
            format!("; earlier runs are in {}", earlier.display())
        } else {
            String::new()
        }
    )
}

/// Checks base endpoints as the profile's own are checked (errors name the flag).
pub fn check_base_endpoints(profile: &Profile, base: &[String]) -> Result<()> {
    if base.is_empty() {
        return Ok(());
    }
    let mut probe = profile.clone();
    probe.target.endpoints = base.to_vec();
    probe.validate().context("--base-endpoint")?;
    Ok(())
}

/// Runs the sweep, printing each level's row as it finishes; `notes`: with each level's
/// server note (saturation, the client/server token cross-check) under its row.
pub async fn measure_with(setup: BenchSetup, notes: bool) -> Result<BenchOutcome> {
    crate::locks::hold_output(&setup.out_dir)?;
    if let Some((kept, names)) = super::earlier::keep_earlier_run(&setup.out_dir)? {
        println!(
            "the earlier run's files in {} ({}) are kept: moved to {}",
            setup.out_dir.display(),
            names.join(", "),
            kept.display()
        );
    }
    let p = &setup.profile;
    println!(
        "throughline bench: profile {}, {} level(s) x {} trial(s), {} endpoint(s){}",
        crate::untrusted::for_terminal(&format!("{:?}", p.name)),
        p.sweep.level_count(),
        p.sweep.trials,
        p.target.endpoints.len(),
        match setup.base_endpoints.len() {
            0 => String::new(),
            n => format!("; relative run against {n} base endpoint(s), trials interleaved (ABBA)"),
        }
    );
    let arms = if setup.base_endpoints.is_empty() {
        1
    } else {
        2
    };
    println!("{}", console::planned(p, arms));
    println!("{}", console::level_header());
    println!("{}", "-".repeat(console::level_header().len()));
    let mut last_arm = None;
    run_bench(setup, |arm, level| {
        if arm.is_some() && arm != last_arm {
            last_arm = arm;
            println!("{}", console::arm_heading(arm));
        }
        println!("{}", console::level_row(level));
        if let Some(note) = console::server_note(level).filter(|_| notes) {
            println!("{}", crate::untrusted::for_terminal_lines(&note));
        }
    })
    .await
}

/// Prints warnings and problems; returns 2 when a level could not be measured.
pub fn conclude(outcome: &BenchOutcome, out: &Path) -> Exit {
    for w in &outcome.result.warnings {
        eprintln!("warning: {}", console::short_warning(w, "report.md"));
    }
    println!("results: {}", out.join(RESULTS_FILE).display());
    if let Some(sig) = outcome.interrupted {
        let name = crate::load::run::interrupt::signal_name(sig);
        let t = outcome.result.levels.iter().flat_map(|l| &l.trials);
        let (sent, cancelled): (u64, u64) = t.fold((0, 0), |(s, c), t| {
            let n = t.failed.get(&crate::record::ErrorClass::Cancelled);
            (s + t.requests_sent, c + n.copied().unwrap_or(0))
        });
        eprintln!(
            "interrupted by {name}: stopped sending; {sent} requests written ({cancelled} abandoned in flight, counted as cancelled); results marked incomplete"
        );
        return Exit::Interrupted(sig);
    }
    if outcome.problems.is_empty() {
        return Exit::Pass;
    }
    eprintln!("error: the run could not measure every level:");
    for p in &outcome.problems {
        eprintln!("  {}", crate::untrusted::for_terminal(p));
    }
    Exit::Failure
}

/// Draws the PNGs and report.md beside the results (with the USL curve when it fits, and the
/// baseline's trials when given). A plot that cannot be drawn is a warning: the measurement
/// stands without it.
pub fn write_plots(
    result: &crate::record::RunResult,
    baseline: Option<&[(u32, Vec<f64>)]>,
    out: &Path,
) {
    match crate::report::run::write_run_files(result, baseline, None, out) {
        Ok(paths) => println!(
            "plots: {}",
            paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Err(e) => eprintln!("warning: plots not written: {e:#}"),
    }
}

/// The signal that asked the process to stop, if one came (after the measurement too: while
/// the gate decided or the charts were drawn, the files are whole and the exit says so).
pub fn signal_received() -> Option<i32> {
    crate::load::run::interrupt::Interrupt::installed().and_then(|i| i.signal())
}
