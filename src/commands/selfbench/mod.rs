//! `throughline selfbench`: a benchmark of the load generator itself, so that nobody has to
//! take "the client is never the bottleneck" on faith.
//!
//! The simulator runs as a separate `serve-sim` process on loopback (preset `instant`: no
//! engine delay; preset `fixed` for the timing error, see `timing.rs`), so this process's
//! getrusage and VmRSS are the client's alone. Each case runs in a fresh child process of its
//! own (`--case`, process.rs), so one case's freed-but-kept heap cannot hide the next one's
//! memory, and its CPU time starts from zero.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::exit::Exit;
use crate::load::{run_bench, BenchSetup};
use crate::process::usage::process_cpu;
use crate::profile::Profile;
use crate::record::files::REQUESTS_FILE;
use crate::record::{ClientHeadroom, Environment};

mod memory;
mod process;
mod timing;
use crate::process::limits::raise_open_files;
use crate::process::pin::CoreSplit;
use crate::process::usage::PeakRss;
use process::{run_on_client_runtime, spawn_child, SimProcess};
use timing::{measure_timing, TimingFigures};

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

fn show(v: Option<f64>) -> String {
    v.map(|x| format!("{x:+.3}")).unwrap_or_else(|| "-".into())
}

fn print_timing(t: &TimingFigures) {
    for f in &t.failures {
        eprintln!("  timing case: failed {f}");
    }
    let p = |x: &Option<crate::stats::Percentiles>, f: fn(&crate::stats::Percentiles) -> f64| {
        show(x.as_ref().map(f))
    };
    println!(
        "timing at {} streams x {} tokens, {} ms cadence, {} ({} token gaps paired with the simulator's send times):",
        t.streams,
        t.tokens,
        t.cadence_ms,
        if t.cold_start {
            "started cold"
        } else {
            "on connections opened first"
        },
        t.paired_gaps
    );
    println!(
        "  measured ITL            p50 {} ms, p99 {} ms (minus the cadence: p50 {} ms, p99 {} ms)",
        p(&t.itl_ms, |x| x.p50),
        p(&t.itl_ms, |x| x.p99),
        show(t.error_vs_cadence_p50_ms),
        show(t.error_vs_cadence_p99_ms)
    );
    println!(
        "  simulator's send gaps   p50 {} ms, p99 {} ms, max {} ms",
        p(&t.sim_send_gap_ms, |x| x.p50),
        p(&t.sim_send_gap_ms, |x| x.p99),
        p(&t.sim_send_gap_ms, |x| x.max)
    );
    println!(
        "  client error per token  p50 {} ms, p99 {} ms; |error| p99 {} ms, max {} ms",
        p(&t.client_error_ms, |x| x.p50),
        p(&t.client_error_ms, |x| x.p99),
        p(&t.client_abs_error_ms, |x| x.p99),
        p(&t.client_abs_error_ms, |x| x.max)
    );
    println!(
        "  arrival times: the kernel's on {} reads, the read's own on {}",
        t.kernel_stamped_reads, t.read_time_reads
    );
    let h = &t.headroom;
    println!(
        "  client: {:.2} s CPU, {:.1} KiB/stream, lag p99 {:.1} ms, CPU {:.0}%, read delay p50 {} ms, p99 {} ms, \
         {} of {} chunks read late with the one before{}",
        t.cpu_s,
        t.bytes_per_stream / 1024.0,
        h.lag_p99_ms,
        h.cpu_fraction * 100.0,
        show(h.read_delay_p50_ms),
        show(h.read_delay_p99_ms),
        h.late_merged_chunks.unwrap_or(0),
        h.chunks.unwrap_or(0),
        if h.client_bound { " (client-bound)" } else { "" }
    );
}

fn print_row(c: &CaseFigures) {
    for f in &c.failures {
        eprintln!("  {} streams x {} tokens: failed {f}", c.streams, c.tokens);
    }
    let h = c.headroom.clone().unwrap_or_default();
    println!(
        "{:>7} {:>7} {:>9} {:>10} {:>12.0} {:>9.1} {:>10.2} {:>12.0} {:>11.1} {:>9.1} {:>8.0}",
        c.streams,
        c.tokens,
        c.requests,
        c.chunks,
        c.chunks_per_s,
        c.requests_per_s,
        c.cpu_ms_per_1000_chunks,
        c.chunks_per_cpu_s,
        c.bytes_per_stream / 1024.0,
        h.lag_p99_ms,
        h.cpu_fraction * 100.0
    );
}

fn spawn_case(
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

fn run_timing_here(spec: &str, threads: usize) -> Result<Exit> {
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
fn run_case_here(spec: &str, threads: usize) -> Result<Exit> {
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
    let wall0 = Instant::now();
    let outcome = run_bench(setup, |_, _| {}).await;
    let cpu_s = process_cpu().saturating_sub(cpu0).as_secs_f64();
    let _wall = wall0.elapsed();
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
pub(super) fn quiet_setup(profile: crate::profile::Profile, out: &std::path::Path) -> BenchSetup {
    BenchSetup {
        profile,
        environment: Environment::default(),
        out_dir: out.to_path_buf(),
        show_progress: false,
        base_endpoints: Vec::new(),
    }
}
