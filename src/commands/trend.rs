//! `throughline trend`: main's history of a baseline per level, and whether it shifted.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

use crate::exit::Exit;
use crate::fsutil::write_atomic;
use crate::gate::trend::{analyse_latest, collect, MAX_WINDOW, WINDOW};
use crate::record::files::{TREND_JSON, TREND_MD, TREND_PNG};
use crate::report::plots::trend_chart;
use crate::stats::changepoint::ChangePointSettings;

#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    throughline trend -b baselines/main.toml -o trend\n  \
    throughline trend -b baselines/main.toml --no-git --alpha 0.01 -o trend\n\n\
    Exit codes: 0 no lasting slowdown, 1 the latest shift at some level is a slowdown of at \
    least the baseline's minimum effect, 2 the history could not be read.")]
pub struct TrendArgs {
    /// The baseline file (TOML) whose sessions are main's history.
    #[arg(long, short = 'b')]
    pub baseline: PathBuf,
    /// Folder for trend.md, trend.json and trend.png.
    #[arg(long, short = 'o', default_value = "throughline-trend")]
    pub out: PathBuf,
    /// Read only the file's current sessions, not the ones its earlier commits held.
    #[arg(long)]
    pub no_git: bool,
    /// The chance of a false alarm on an unchanged history, over all levels together.
    #[arg(long, default_value_t = 0.05)]
    pub alpha: f64,
    /// The fewest sessions on each side of a shift.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u16).range(2..=1000))]
    pub min_segment: u16,
    /// Shuffles per permutation test.
    #[arg(long, default_value_t = 999, value_parser = clap::value_parser!(u32).range(99..=100_000))]
    pub permutations: u32,
    /// Search each level's latest N sessions for shifts (earlier ones are drawn, not
    /// tested): the search's work grows with N squared per shuffle.
    #[arg(long, default_value_t = WINDOW as u32, value_parser = clap::value_parser!(u32).range(12..=MAX_WINDOW as i64))]
    pub window: u32,
}

pub fn run(args: TrendArgs) -> Result<Exit> {
    let history = collect(&args.baseline, !args.no_git)?;
    for problem in &history.unreadable {
        let said = format!("{}: {problem}", args.baseline.display());
        eprintln!("warning: {}", crate::untrusted::for_terminal(&said));
    }
    let settings = ChangePointSettings {
        min_segment: usize::from(args.min_segment),
        permutations: args.permutations as usize,
        ..ChangePointSettings::default()
    };
    let trend = analyse_latest(&history, args.alpha, &settings, args.window as usize)?;
    crate::fsutil::ensure_output_dir(&args.out)?;
    let json = serde_json::to_vec_pretty(&trend)?;
    write_atomic(&args.out.join(TREND_JSON), &json)?;
    // The profile the bisect command names: the baseline's, relative to where we run.
    let profile = crate::gate::baseline::Baseline::load(&args.baseline)
        .ok()
        .and_then(|b| b.profile)
        .map(|p| {
            let dir = args.baseline.parent().unwrap_or(std::path::Path::new(""));
            dir.join(p).to_string_lossy().into_owned()
        });
    write_atomic(
        &args.out.join(TREND_MD),
        crate::report::trend::markdown_with(&trend, profile.as_deref()).as_bytes(),
    )?;
    let tool = format!("throughline {}", env!("CARGO_PKG_VERSION"));
    trend_chart(&trend, &tool, &args.out.join(TREND_PNG))?;
    let from = if args.no_git {
        String::from("the file")
    } else {
        format!(
            "the file and {} committed version(s)",
            history.versions_read
        )
    };
    println!(
        "{} sessions from {from}; wrote {}",
        trend.sessions,
        args.out.display()
    );
    if trend.windowed() {
        println!(
            "shifts were searched in the latest {} of {} sessions of each level (--window); \
             the earlier ones are drawn, not tested",
            trend.window, trend.sessions
        );
    }
    let said = crate::report::trend::headline(&trend);
    println!("{}", crate::untrusted::for_terminal(&said));
    for (range, command) in crate::report::trend::commit_ranges(&trend, profile.as_deref()) {
        println!(
            "{}; find the commit with:",
            crate::untrusted::for_terminal(&range)
        );
        println!("  {}", crate::untrusted::for_terminal_lines(&command));
    }
    Ok(if trend.slower_levels().is_empty() {
        Exit::Pass
    } else {
        Exit::Regression
    })
}
