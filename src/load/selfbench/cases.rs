//! The throughput cases: each run in a child process of its own (a fresh runtime of the
//! chosen size, pinned where asked), which measures its chunks, CPU time and peak memory
//! against the simulator and prints its figures as one JSON line.

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use super::process::{run_on_client_runtime, spawn_child};
use super::timing::{measure_timing, TimingFigures};
use crate::exit::Exit;
use crate::load::bench_setup::BenchSetup;
use crate::load::run::run_bench;
use crate::process::pin::CoreSplit;
use crate::process::usage::{process_cpu, PeakRss};
use crate::profile::Profile;
use crate::record::files::REQUESTS_FILE;
use crate::record::{ClientHeadroom, Environment};

/// What one case measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CaseFigures {
    pub streams: u32,
    pub tokens: u32,
    pub requests: u64,
    pub succeeded: u64,
    pub failed: u64,
    /// Failures by class, with the first message of each.
    #[serde(default)]
    pub failures: Vec<String>,
    /// Content chunks received by counted requests.
    pub chunks: u64,
    /// The trial's window: first send to last completion.
    pub window_s: f64,
    pub chunks_per_s: f64,
    pub requests_per_s: f64,
    /// Client process CPU time (user + system) over the whole case.
    pub cpu_s: f64,
    pub cpu_ms_per_1000_chunks: f64,
    /// Chunks per second of client CPU: what one fully busy core would sustain.
    pub chunks_per_cpu_s: f64,
    pub rss_idle_bytes: u64,
    pub rss_peak_bytes: u64,
    /// (peak RSS - idle RSS) / streams.
    pub bytes_per_stream: f64,
    pub itl_p50_ms: Option<f64>,
    pub itl_p99_ms: Option<f64>,
    pub itl_min_ms: Option<f64>,
    pub headroom: Option<ClientHeadroom>,
}

/// The whole benchmark.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SelfbenchReport {
    pub client_threads: usize,
    pub cases: Vec<CaseFigures>,
    pub timing: Option<TimingFigures>,
}

pub fn spawn_case(
    url: &str,
    streams: u32,
    tokens: u32,
    requests: u64,
    threads: usize,
    cores: Option<&CoreSplit>,
) -> Result<CaseFigures> {
    let spec = format!("{url},{streams},{tokens},{requests}");
    spawn_child(&["--case", &spec], threads, cores)
        .with_context(|| format!("the case with {streams} streams x {tokens} tokens failed"))
}

pub fn run_timing_here(spec: &str, threads: usize) -> Result<Exit> {
    let parts: Vec<&str> = spec.split(',').collect();
    let [url, streams, tokens, cadence, cold] = parts[..] else {
        bail!("--timing-case wants ENDPOINT,STREAMS,TOKENS,CADENCE_MS,COLD, got {spec:?}");
    };
    let url = url.to_string();
    let streams: u32 = streams.parse().context("--timing-case streams")?;
    let tokens: u32 = tokens.parse().context("--timing-case tokens")?;
    let cadence: f64 = cadence.parse().context("--timing-case cadence")?;
    let cold: bool = cold.parse().context("--timing-case cold")?;
    run_on_client_runtime(threads, move || async move {
        measure_timing(&url, streams, tokens, cadence, cold).await
    })
}

/// Runs one throughput case in this process and prints its figures.
pub fn run_case_here(spec: &str, threads: usize) -> Result<Exit> {
    let parts: Vec<&str> = spec.split(',').collect();
    let [url, streams, tokens, requests] = parts[..] else {
        bail!("--case wants ENDPOINT,STREAMS,TOKENS,REQUESTS, got {spec:?}");
    };
    let streams: u32 = streams.parse().context("--case streams")?;
    let tokens: u32 = tokens.parse().context("--case tokens")?;
    let requests: u64 = requests.parse().context("--case requests")?;
    let url = url.to_string();
    run_on_client_runtime(threads, move || async move {
        measure_case(&url, streams, tokens, requests).await
    })
}

async fn measure_case(url: &str, streams: u32, tokens: u32, requests: u64) -> Result<CaseFigures> {
    let requests_u32 = u32::try_from(requests).context("too many requests for one case")?;
    let text = format!(
        "name = \"selfbench\"\n[target]\nendpoints = [{url:?}]\n[workload]\ninput_tokens = 16\n\
         max_tokens = {tokens}\nignore_eos = true\ndegenerate_below = 1\n[sweep]\n\
         concurrency = [{streams}]\nrequests_per_level = {requests_u32}\ntrials = 1\n\
         request_timeout = \"30m\"\nmax_error_rate = 0.0\n"
    );
    let profile = Profile::parse(&text)?;
    let dir = tempfile::tempdir().context("cannot create a temporary folder")?;
    let setup = quiet_setup(profile, dir.path());

    let rss = PeakRss::start();
    let cpu0 = process_cpu();
    let outcome = run_bench(setup, |_, _| {}).await;
    let cpu_s = process_cpu().saturating_sub(cpu0).as_secs_f64();
    let (idle, rss_peak) = rss.finish();
    let outcome = outcome?;

    let journal = std::fs::read_to_string(dir.path().join(REQUESTS_FILE))?;
    let mut chunks = 0u64;
    for line in journal.lines() {
        let v: serde_json::Value = serde_json::from_str(line)?;
        if v["warmup"] == false && v["error"].is_null() {
            chunks += v["chunks"].as_u64().unwrap_or(0);
        }
    }
    let level = outcome
        .result
        .levels
        .first()
        .context("the case measured no level")?;
    let t = level.trials.first().context("the case measured no trial")?;
    let per_s = |x: f64| {
        if t.window_s > 0.0 {
            x / t.window_s
        } else {
            0.0
        }
    };
    Ok(CaseFigures {
        streams,
        tokens,
        requests: t.requests_sent,
        succeeded: t.succeeded,
        failed: t.failed_total(),
        failures: t
            .failed
            .iter()
            .map(|(c, n)| match t.error_examples.get(c) {
                Some(msg) => format!("{c} {n}: {msg}"),
                None => format!("{c} {n}"),
            })
            .collect(),
        chunks,
        window_s: t.window_s,
        chunks_per_s: per_s(chunks as f64),
        requests_per_s: per_s(t.succeeded as f64),
        cpu_s,
        cpu_ms_per_1000_chunks: if chunks > 0 {
            cpu_s * 1e6 / chunks as f64
        } else {
            0.0
        },
        chunks_per_cpu_s: if cpu_s > 0.0 {
            chunks as f64 / cpu_s
        } else {
            0.0
        },
        rss_idle_bytes: idle,
        rss_peak_bytes: rss_peak,
        bytes_per_stream: (rss_peak - idle) as f64 / f64::from(streams.max(1)),
        itl_p50_ms: t.itl_ms.as_ref().map(|p| p.p50),
        itl_p99_ms: t.itl_ms.as_ref().map(|p| p.p99),
        itl_min_ms: t.itl_ms.as_ref().map(|p| p.min),
        headroom: t.client.clone(),
    })
}

/// A run of the client under measurement: no progress output, default fingerprint, one arm,
/// results into `out` (a temporary folder).
pub fn quiet_setup(profile: crate::profile::Profile, out: &std::path::Path) -> BenchSetup {
    BenchSetup::new(profile, Environment::default(), out.to_path_buf())
}
