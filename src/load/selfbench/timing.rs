//! The timing case of `selfbench`: how far the client's inter-token latency is off.
//!
//! Measured ITL minus the simulator's configured cadence mixes two errors: the client's
//! (reading late, timestamping late) and the simulator's own (writing a chunk late when a
//! thousand streams share its cores). To separate them, the simulator runs with
//! `--record-send-times` and keeps, per request (named by the OpenAI `user` field), when it
//! handed each content chunk to the connection. The client's error is then, token by token,
//! the gap it measured minus the gap the simulator actually sent: what the client adds.
//!
//! The requests go through the load's own `client::send` (the same HTTP client, SSE reader,
//! chunk log and per-token gap code as `bench`), one per stream, all started together, on a
//! runtime of `--client-threads` workers.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::load::run::headroom::Monitor;
use crate::load::stream::client::{build_probe_client, send, Observed, RequestLimits};
use crate::load::stream::tokens::{attribute_tokens, inter_token_gaps_ms};
use crate::load::wire::http::{build_load_client, LoadClient};
use crate::process::usage::process_cpu;
use crate::process::usage::PeakRss;
use crate::record::ClientHeadroom;
use crate::stats::Percentiles;

/// What the timing case measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TimingFigures {
    pub streams: u32,
    /// The streams started cold, on fresh connections (else on connections opened first, as
    /// `bench` does before every level).
    #[serde(default)]
    pub cold_start: bool,
    pub tokens: u32,
    pub cadence_ms: f64,
    pub requests: u64,
    pub succeeded: u64,
    pub failed: u64,
    #[serde(default)]
    pub failures: Vec<String>,
    /// ITL as the client measured it (the same code as `bench`).
    pub itl_ms: Option<Percentiles>,
    /// Measured ITL minus the configured cadence: the definition, which also holds
    /// the simulator's lateness.
    pub error_vs_cadence_p50_ms: Option<f64>,
    pub error_vs_cadence_p99_ms: Option<f64>,
    /// The gaps between the simulator's own sends of consecutive chunks of a stream.
    pub sim_send_gap_ms: Option<Percentiles>,
    /// Per token: the gap the client measured minus the gap the simulator sent.
    pub client_error_ms: Option<Percentiles>,
    /// The same, as absolute values (p99 of |error|).
    pub client_abs_error_ms: Option<Percentiles>,
    /// Token gaps paired with the simulator's send times.
    pub paired_gaps: u64,
    /// Successful requests whose chunk count did not match the simulator's record.
    pub unpaired_requests: u64,
    /// Reads timed by the kernel's receive timestamp, and reads timed when read.
    pub kernel_stamped_reads: u64,
    pub read_time_reads: u64,
    pub cpu_s: f64,
    pub bytes_per_stream: f64,
    pub headroom: ClientHeadroom,
}

/// Runs the timing case against `url` (a simulator started with `--record-send-times`).
///
/// Unless `cold`, the streams' connections are opened first, as `bench` does before every
/// level (preconnect.rs), and nothing else is sent before the measured streams. A cold start
/// is a different figure (`--cold-start`): a thousand TCP handshakes keep one core busy for
/// over 100 ms, long enough for the first streams' tokens to wait unread.
pub async fn measure_timing(
    url: &str,
    streams: u32,
    tokens: u32,
    cadence_ms: f64,
    cold: bool,
) -> Result<TimingFigures> {
    let client = build_load_client(streams as usize)?;
    let target: hyper::Uri = format!("{url}/v1/chat/completions")
        .parse()
        .context("bad simulator URL")?;
    let limits = RequestLimits {
        request_timeout: Duration::from_secs(600),
        stall_timeout: Duration::from_secs(60),
        answer_bytes: 0,
        // The client's own benchmark against its own simulator: not held to a length.
        max_tokens: None,
    };
    let rss = PeakRss::start();
    if !cold {
        let opened = client.open(&target, streams as usize).await;
        if opened < streams as usize {
            bail!("opened {opened} of {streams} connections to the simulator");
        }
    }
    let cpu0 = process_cpu();
    let monitor = Monitor::start();
    let tasks = start_streams(&client, &target, streams, tokens, limits);
    let mut observed = Vec::with_capacity(tasks.len());
    for t in tasks {
        observed.push(t.await.context("a timing request panicked")?);
    }
    let (headroom, reads) = monitor.finish();
    let cpu_s = process_cpu().saturating_sub(cpu0).as_secs_f64();
    let (idle, peak) = rss.finish();
    let bytes_per_stream = (peak - idle) as f64 / f64::from(streams.max(1));

    let (kernel_stamped_reads, read_time_reads) = crate::load::wire::wire_clock::read_counts();
    let sent = fetch_send_times(url).await?;
    let mut figures = TimingFigures {
        streams,
        cold_start: cold,
        tokens,
        cadence_ms,
        requests: observed.len() as u64,
        succeeded: 0,
        failed: 0,
        failures: Vec::new(),
        itl_ms: None,
        error_vs_cadence_p50_ms: None,
        error_vs_cadence_p99_ms: None,
        sim_send_gap_ms: None,
        client_error_ms: None,
        client_abs_error_ms: None,
        paired_gaps: 0,
        unpaired_requests: 0,
        kernel_stamped_reads,
        read_time_reads,
        cpu_s,
        bytes_per_stream,
        headroom,
    };
    let (mut itl, mut sim_gaps, mut errors) = (Vec::new(), Vec::new(), Vec::new());
    let mut failures: HashMap<String, (u64, String)> = HashMap::new();
    for (i, obs) in observed.iter().enumerate() {
        if let Some((class, msg)) = &obs.failure {
            figures.failed += 1;
            let entry = failures
                .entry(format!("{class:?}"))
                .or_insert_with(|| (0, msg.clone()));
            entry.0 += 1;
            continue;
        }
        figures.succeeded += 1;
        collect_gaps(obs, &mut itl);
        match sent.get(&user(i as u32)) {
            Some(s) if s.len() == obs.chunks.len() => {
                pair(obs, s, &mut sim_gaps, &mut errors);
            }
            _ => figures.unpaired_requests += 1,
        }
    }
    figures.failures = failures
        .into_iter()
        .map(|(class, (n, msg))| format!("{class} {n}: {msg}"))
        .collect();
    figures.paired_gaps = errors.len() as u64;
    figures.itl_ms = Percentiles::from_values(&mut itl);
    let itl_p50 = figures.itl_ms.as_ref().map(|p| p.p50);
    crate::load::run::headroom::judge_reads(&mut figures.headroom, &reads, itl_p50);
    if let Some(p) = &figures.itl_ms {
        figures.error_vs_cadence_p50_ms = Some(p.p50 - cadence_ms);
        figures.error_vs_cadence_p99_ms = Some(p.p99 - cadence_ms);
    }
    figures.sim_send_gap_ms = Percentiles::from_values(&mut sim_gaps);
    let mut abs: Vec<f64> = errors.iter().map(|e: &f64| e.abs()).collect();
    figures.client_error_ms = Percentiles::from_values(&mut errors);
    figures.client_abs_error_ms = Percentiles::from_values(&mut abs);
    Ok(figures)
}

/// The OpenAI `user` of stream i: the simulator records send times by user.
fn user(i: u32) -> String {
    format!("selfbench-{i}")
}

/// Starts one streaming request of `tokens` tokens per stream, all at once, stream i as the
/// OpenAI `user` named [`user`]`(i)`.
fn start_streams(
    client: &LoadClient,
    target: &hyper::Uri,
    streams: u32,
    tokens: u32,
    limits: RequestLimits,
) -> Vec<tokio::task::JoinHandle<Observed>> {
    let clock = Instant::now();
    (0..streams)
        .map(|i| {
            let (client, target) = (client.clone(), target.clone());
            let body = json!({
                "model": "selfbench",
                "messages": [{"role": "user", "content": format!("selfbench stream {i}")}],
                "max_tokens": tokens,
                "ignore_eos": true,
                "stream": true,
                "stream_options": {"include_usage": true, "continuous_usage_stats": true},
                "user": user(i),
            });
            let body = bytes::Bytes::from(body.to_string());
            tokio::spawn(
                async move { send(&client, &target, body, None, true, limits, clock).await },
            )
        })
        .collect()
}

/// The client's per-token gaps, exactly as `bench` computes them.
fn collect_gaps(obs: &Observed, out: &mut Vec<f64>) {
    let attribution = attribute_tokens(&obs.chunks, obs.usage.map(|u| u.completion_tokens));
    let mut gaps = Vec::new();
    inter_token_gaps_ms(&obs.chunks, &attribution.per_chunk, &mut gaps);
    out.extend(gaps.iter().map(|&g| f64::from(g)));
}

/// Pairs each gap between consecutive chunks as received with the same gap as sent.
fn pair(obs: &Observed, sent_ns: &[u64], sim_gaps: &mut Vec<f64>, errors: &mut Vec<f64>) {
    let received: Vec<f64> = obs.chunks.times_s().collect();
    for j in 1..received.len() {
        let client_ms = (received[j] - received[j - 1]) * 1000.0;
        let sim_ms = sent_ns[j].saturating_sub(sent_ns[j - 1]) as f64 / 1e6;
        sim_gaps.push(sim_ms);
        errors.push(client_ms - sim_ms);
    }
}

async fn fetch_send_times(url: &str) -> Result<HashMap<String, Vec<u64>>> {
    let client = build_probe_client(None)?;
    let response = client
        .get(format!("{url}/sim/send-times"))
        .send()
        .await
        .context("cannot fetch the simulator's send times")?;
    if !response.status().is_success() {
        bail!(
            "the simulator did not give its send times: HTTP {}",
            response.status()
        );
    }
    response
        .json()
        .await
        .context("the simulator's send times are not JSON")
}
