//! `throughline selfbench`: a benchmark of the load generator itself, so that nobody has to
//! take "the client is never the bottleneck" on faith.
//!
//! The simulator runs as a separate `serve-sim` process on loopback (preset `instant`: no
//! engine delay; preset `fixed` for the timing error, see load/selfbench/timing.rs), so this process's
//! getrusage and VmRSS are the client's alone. Each case runs in a fresh child process of its
//! own (`--case`, load/selfbench/), so one case's freed-but-kept heap cannot hide the next one's
//! memory, and its CPU time starts from zero.

use std::path::PathBuf;

use anyhow::{bail, Result};

use crate::exit::Exit;
use crate::load::selfbench::{
    memory, run_case_here, run_on_client_runtime, run_timing_here, spawn_case, spawn_child,
    SelfbenchReport, SimProcess, TimingFigures,
};
use crate::process::open_files::raise_open_files;
use crate::process::pin::CoreSplit;
use crate::report::selfbench::{print_row, print_timing};

/// The examples `selfbench --help` ends with.
pub const EXAMPLES: &str = "\
Examples:
  # How fast is this client? (several minutes; see docs/client-benchmark.md)
  throughline selfbench
  # With two client threads, the figures also as JSON
  throughline selfbench --client-threads 2 --json selfbench.json";

#[derive(Debug, clap::Args, Clone)]
pub struct SelfbenchArgs {
    /// Worker threads of the client's tokio runtime (1 = the client on one core).
    #[arg(long, default_value_t = 1)]
    pub client_threads: usize,
    /// Concurrent streams of the throughput cases.
    #[arg(long, value_delimiter = ',', default_values_t = [1, 64, 1024, 4096])]
    pub levels: Vec<u32>,
    /// Output tokens of the long cases.
    #[arg(long, default_value_t = 2048)]
    pub long_tokens: u32,
    /// Output tokens of the short cases.
    #[arg(long, default_value_t = 32)]
    pub short_tokens: u32,
    /// Chunks to aim for per throughput case (at least one request per stream).
    #[arg(long, default_value_t = 400_000)]
    pub chunks: u64,
    /// Streams of the timing-error case (fixed cadence).
    #[arg(long, default_value_t = 1024)]
    pub timing_streams: u32,
    /// The simulator's cadence in the timing-error case, in ms.
    #[arg(long, default_value_t = 20.0)]
    pub token_delay_ms: f64,
    /// Output tokens per request in the timing-error case.
    #[arg(long, default_value_t = 100)]
    pub timing_tokens: u32,
    /// Start the timing case's streams on fresh connections, all opened at once, instead of
    /// on connections opened first (as `bench` opens a level's connections before it).
    #[arg(long)]
    pub cold_start: bool,
    /// Let the client and the simulator share all cores (by default, when there are more
    /// cores than client threads, the client's cases run on the first `--client-threads`
    /// cores and the simulator on the rest).
    #[arg(long)]
    pub shared_cores: bool,
    /// Also write the figures as JSON.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Peak RSS per trial length instead of the throughput cases: one closed-loop duration
    /// trial per length (e.g. `10s,60s`), each in a fresh process.
    #[arg(long, value_delimiter = ',', value_parser = humantime::parse_duration)]
    pub trial_lengths: Vec<std::time::Duration>,
    /// The simulator preset of the trial-length cases.
    #[arg(long, default_value = "fast")]
    pub memory_preset: String,
    /// Concurrent streams of the trial-length cases.
    #[arg(long, default_value_t = 64)]
    pub memory_streams: u32,
    /// Output tokens per request of the trial-length cases.
    #[arg(long, default_value_t = 1024)]
    pub memory_tokens: u32,
    /// `target.engine` of the trial-length cases: "openai" measures the load generator alone,
    /// "auto" adds the simulator's telemetry (its per-token cross-check).
    #[arg(long, default_value = "openai")]
    pub memory_engine: String,
    /// Internal: run one trial-length case as "ENDPOINT,STREAMS,TOKENS,SECONDS,ENGINE".
    #[arg(long, hide = true)]
    pub memory_case: Option<String>,
    /// Internal: run one case against ENDPOINT as "ENDPOINT,STREAMS,TOKENS,REQUESTS" and print
    /// its figures as JSON.
    #[arg(long, hide = true)]
    pub case: Option<String>,
    /// Internal: run the timing case as "ENDPOINT,STREAMS,TOKENS,CADENCE_MS,COLD" and print its
    /// figures as JSON.
    #[arg(long, hide = true)]
    pub timing_case: Option<String>,
}

pub fn run(args: SelfbenchArgs) -> Result<Exit> {
    if let Some(case) = &args.case {
        return run_case_here(case, args.client_threads);
    }
    if let Some(case) = &args.timing_case {
        return run_timing_here(case, args.client_threads);
    }
    if let Some(case) = args.memory_case.clone() {
        return run_on_client_runtime(args.client_threads, move || async move {
            memory::measure(&case).await
        });
    }
    if !args.trial_lengths.is_empty() {
        return run_memory(&args);
    }
    let limit = raise_open_files();
    let need = 2 * args.levels.iter().copied().max().unwrap_or(1) as u64 + 256;
    if limit < need {
        eprintln!(
            "warning: open-file limit is {limit}; the largest case needs about {need} \
             (raise the hard limit: ulimit -Hn)"
        );
    }
    let threads = args.client_threads.max(1);
    let cores = if args.shared_cores {
        None
    } else {
        CoreSplit::new(threads)
    };
    let placement = match &cores {
        Some(split) => format!(
            "client on core(s) {:?}, simulator on core(s) {:?}",
            split.client, split.simulator
        ),
        None => "client and simulator sharing all cores".to_string(),
    };
    println!(
        "throughline selfbench: client runtime with {threads} worker thread(s), simulator in a separate process; {placement}"
    );
    let cores = cores.as_ref();
    let instant = SimProcess::start(&["--preset", "instant"], cores)?;
    println!(
        "{:>7} {:>7} {:>9} {:>10} {:>12} {:>9} {:>10} {:>12} {:>11} {:>9} {:>8}",
        "streams",
        "tokens",
        "requests",
        "chunks",
        "chunks/s",
        "req/s",
        "CPU ms/1k",
        "chunks/CPU-s",
        "KiB/stream",
        "lag p99",
        "CPU %"
    );
    let mut cases = Vec::new();
    for &tokens in &[args.long_tokens, args.short_tokens] {
        for &streams in &args.levels {
            let per_stream = args.chunks.div_ceil(u64::from(tokens) * u64::from(streams));
            let requests = u64::from(streams) * per_stream.max(1);
            let c = spawn_case(&instant.url, streams, tokens, requests, threads, cores)?;
            print_row(&c);
            cases.push(c);
        }
    }
    drop(instant);

    let mut report = SelfbenchReport {
        client_threads: threads,
        cases,
        timing: None,
    };
    if args.timing_streams > 0 {
        let delay = args.token_delay_ms.to_string();
        let fixed = SimProcess::start(
            &[
                "--preset",
                "fixed",
                "--token-delay-ms",
                &delay,
                "--record-send-times",
            ],
            cores,
        )?;
        let spec = format!(
            "{},{},{},{},{}",
            fixed.url,
            args.timing_streams,
            args.timing_tokens,
            args.token_delay_ms,
            args.cold_start
        );
        let t: TimingFigures = spawn_child(&["--timing-case", &spec], threads, cores)?;
        print_timing(&t);
        report.timing = Some(t);
    }
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&report)?;
        crate::fsutil::write_atomic(path, text.as_bytes())?;
        println!("figures: {}", path.display());
    }
    let failed: u64 = report.cases.iter().map(|c| c.failed).sum::<u64>()
        + report.timing.as_ref().map_or(0, |t| t.failed);
    if failed > 0 {
        bail!("{failed} requests failed during the self-benchmark; its figures are not valid");
    }
    if let Some(t) = report.timing.as_ref().filter(|t| t.unpaired_requests > 0) {
        bail!(
            "{} timing requests could not be paired with the simulator's send times; \
             the client error figure is not valid",
            t.unpaired_requests
        );
    }
    Ok(Exit::Pass)
}

/// Peak RSS per trial length (`--trial-lengths`).
fn run_memory(args: &SelfbenchArgs) -> Result<Exit> {
    raise_open_files();
    let sim = memory::simulator(&args.memory_preset)?;
    println!(
        "throughline selfbench: peak RSS per trial length, closed loop at {} streams x {} \
         tokens, preset {}, {} client worker thread(s)",
        args.memory_streams, args.memory_tokens, args.memory_preset, args.client_threads
    );
    println!("{}", memory::header());
    let mut rows = Vec::new();
    for &length in &args.trial_lengths {
        let spec = memory::spec(
            &sim.url,
            args.memory_streams,
            args.memory_tokens,
            length,
            &args.memory_engine,
        );
        let m: memory::MemoryFigures =
            spawn_child(&["--memory-case", &spec], args.client_threads, None)?;
        println!("{}", memory::row(&m));
        rows.push(m);
    }
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&rows)?;
        crate::fsutil::write_atomic(path, text.as_bytes())?;
        println!("figures: {}", path.display());
    }
    let failed: u64 = rows.iter().map(|m| m.failed).sum();
    if failed > 0 {
        bail!("{failed} requests failed during the self-benchmark; its figures are not valid");
    }
    Ok(Exit::Pass)
}
