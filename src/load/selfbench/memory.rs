//! `selfbench --trial-lengths 10s,60s`: peak RSS of the client per trial length, to show that
//! a trial's memory does not grow with its tokens (per-trial percentiles come from a bounded
//! sketch, stats/sketch.rs). Each length runs in a fresh child process against one
//! simulator, closed loop, one duration trial.

use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use super::cases::quiet_setup;
use super::process::SimProcess;
use crate::load::run::run_bench;
use crate::process::usage::PeakRss;
use crate::profile::Profile;

/// What one trial length measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MemoryFigures {
    pub trial_s: f64,
    pub streams: u32,
    pub tokens: u32,
    /// "openai" (no server telemetry) or "auto" (the simulator's counters cross-checked).
    pub engine: String,
    pub requests: u64,
    pub failed: u64,
    pub output_tokens: u64,
    pub itl_count: u64,
    pub rss_idle_bytes: u64,
    pub rss_peak_bytes: u64,
    pub wall_s: f64,
}

/// The spec a child runs: "ENDPOINT,STREAMS,TOKENS,SECONDS,ENGINE".
pub fn spec(url: &str, streams: u32, tokens: u32, length: Duration, engine: &str) -> String {
    format!("{url},{streams},{tokens},{},{engine}", length.as_secs_f64())
}

/// Runs one trial length in this process.
pub async fn measure(spec: &str) -> Result<MemoryFigures> {
    let parts: Vec<&str> = spec.split(',').collect();
    let [url, streams, tokens, seconds, engine] = parts[..] else {
        bail!("--memory-case wants ENDPOINT,STREAMS,TOKENS,SECONDS,ENGINE, got {spec:?}");
    };
    let streams: u32 = streams.parse().context("--memory-case streams")?;
    let tokens: u32 = tokens.parse().context("--memory-case tokens")?;
    let seconds: f64 = seconds.parse().context("--memory-case seconds")?;
    let text = format!(
        "name = \"selfbench-memory\"\n[target]\nendpoints = [{url:?}]\nengine = {engine:?}\n\
         [workload]\ninput_tokens = 16\nmax_tokens = {tokens}\nignore_eos = true\n\
         degenerate_below = 1\n[sweep]\nconcurrency = [{streams}]\nduration = \"{seconds}s\"\n\
         trials = 1\nwarmup_requests = 0\nrequest_timeout = \"30m\"\n"
    );
    let profile = Profile::parse(&text)?;
    let dir = tempfile::tempdir().context("cannot create a temporary folder")?;
    let setup = quiet_setup(profile, dir.path());
    let rss = PeakRss::start();
    let wall = Instant::now();
    let outcome = run_bench(setup, |_, _| {}).await;
    let wall_s = wall.elapsed().as_secs_f64();
    let (idle, peak) = rss.finish();
    let outcome = outcome?;
    let t = (outcome.result.levels.first())
        .and_then(|l| l.trials.first())
        .context("the case measured no trial")?;
    Ok(MemoryFigures {
        trial_s: seconds,
        streams,
        tokens,
        engine: engine.to_string(),
        requests: t.requests_sent,
        failed: t.failed_total(),
        output_tokens: t.output_tokens,
        itl_count: t.itl_ms.as_ref().map_or(0, |p| p.count),
        rss_idle_bytes: idle,
        rss_peak_bytes: peak,
        wall_s,
    })
}

/// The table's header and one row.
pub fn header() -> String {
    format!(
        "{:>8} {:>7} {:>7} {:>8} {:>9} {:>12} {:>10} {:>10} {:>11}",
        "trial s",
        "engine",
        "streams",
        "tokens",
        "requests",
        "out tokens",
        "idle MiB",
        "peak MiB",
        "B/token"
    )
}

pub fn row(m: &MemoryFigures) -> String {
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    let per_token = if m.output_tokens > 0 {
        (m.rss_peak_bytes.saturating_sub(m.rss_idle_bytes)) as f64 / m.output_tokens as f64
    } else {
        0.0
    };
    format!(
        "{:>8.0} {:>7} {:>7} {:>8} {:>9} {:>12} {:>10.1} {:>10.1} {:>11.2}",
        m.trial_s,
        m.engine,
        m.streams,
        m.tokens,
        m.requests,
        m.output_tokens,
        mib(m.rss_idle_bytes),
        mib(m.rss_peak_bytes),
        per_token
    )
}

/// Starts the simulator with `preset` for the memory cases.
pub fn simulator(preset: &str) -> Result<SimProcess> {
    SimProcess::start(&["--preset", preset], None)
}
