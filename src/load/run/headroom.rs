//! The client's own headroom during a trial: if the load generator is the bottleneck, its
//! figures describe itself, not the server. Two signals, both cheap:
//! - scheduler lag: a task sleeps 10 ms in a loop and records how late it wakes. Every
//!   response chunk is timestamped by a task on the same runtime, so this lag is roughly
//!   how late those timestamps are;
//! - CPU use: process CPU time (getrusage) over the trial's wall time, per runtime worker.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::load::stream::outcome::Finished;
use crate::load::wire::read_delay::ReadDelays;
use crate::process::usage::process_cpu;
use crate::record::trial_flags::{FlagKind, TrialFlag};
use crate::record::{ClientHeadroom, RequestRecord};
use crate::stats::{LatencySketch, Percentiles};

/// The probe's sleep period: short enough to sample a trial of a second many times, long
/// enough that the probe itself costs nothing measurable.
pub const PROBE_PERIOD: Duration = Duration::from_millis(10);

/// Lag median above which a trial is client-bound. tokio's timer has 1 ms resolution, so an
/// idle runtime wakes about 1 ms late; a median over 3 ms means most wakes wait behind other
/// work: a sustained backlog that delays every timestamp and slows the sending itself.
pub const LAG_P50_LIMIT_MS: f64 = 3.0;

/// Lag p99 above which a trial is client-bound: 20 ms is one typical inter-token gap, so
/// tail latencies (TTFT p99, ITL p99) would be off by a whole token. Lower limits (5 ms was
/// tried) flag runs on any busy CI host where the OS briefly deschedules the process, which
/// moves no throughput figure; the median and CPU limits catch a client that cannot keep up.
pub const LAG_P99_LIMIT_MS: f64 = 20.0;

/// CPU fraction (CPU time / (wall x worker threads)) at or above which the client is
/// saturated: at 90% busy, queueing inside the client delays every timestamp it takes.
pub const CPU_SATURATED_FRACTION: f64 = 0.9;

/// Worker threads of the current tokio runtime (1 for a current-thread runtime), capped by
/// the cores this process may use: more workers than cores cannot add CPU time.
pub fn worker_threads() -> usize {
    let workers = tokio::runtime::Handle::try_current()
        .map(|h| h.metrics().num_workers())
        .unwrap_or(1)
        .max(1);
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(workers);
    workers.min(cores)
}

/// A running headroom measurement; [`Monitor::finish`] stops it and summarises. The probe's
/// lags (100 a second) go into a sketch of a fixed size, not a list: a trial of a day holds
/// what one of a minute holds.
pub struct Monitor {
    lags_ms: Arc<Mutex<LatencySketch<f64>>>,
    task: tokio::task::JoinHandle<()>,
    wall: Instant,
    cpu: Duration,
    workers: usize,
    reads: ReadDelays,
}

impl Monitor {
    /// Starts the lag probe on the current runtime and notes the CPU time so far.
    pub fn start() -> Monitor {
        let lags_ms = Arc::new(Mutex::new(LatencySketch::new()));
        let sink = Arc::clone(&lags_ms);
        let task = tokio::spawn(async move {
            let mut target = tokio::time::Instant::now() + PROBE_PERIOD;
            loop {
                tokio::time::sleep_until(target).await;
                let now = tokio::time::Instant::now();
                let lag = now.saturating_duration_since(target).as_secs_f64() * 1000.0;
                sink.lock().unwrap_or_else(|e| e.into_inner()).record(lag);
                // The next wake is relative to now, so one long stall counts once, not as a
                // burst of catch-up wakes.
                target = now + PROBE_PERIOD;
            }
        });
        Monitor {
            lags_ms,
            task,
            wall: Instant::now(),
            cpu: process_cpu(),
            workers: worker_threads(),
            reads: ReadDelays::now(),
        }
    }

    /// Stops the probe and returns the trial's headroom, and its reads' delays (for
    /// [`judge_reads`] once the trial's inter-token gap is known).
    pub fn finish(self) -> (ClientHeadroom, ReadDelays) {
        self.task.abort();
        let wall = self.wall.elapsed().as_secs_f64();
        let cpu = process_cpu().saturating_sub(self.cpu).as_secs_f64();
        let lags = std::mem::take(&mut *self.lags_ms.lock().unwrap_or_else(|e| e.into_inner()));
        let cpu_fraction = if wall > 0.0 {
            cpu / (wall * self.workers as f64)
        } else {
            0.0
        };
        let mut h = judge_lags(lags.percentiles(), cpu_fraction);
        let reads = ReadDelays::now().since(&self.reads);
        h.read_delay_p50_ms = reads.quantile_ms(0.50);
        h.read_delay_p99_ms = reads.quantile_ms(0.99);
        (h, reads)
    }
}

/// Below this, late reads cannot cost the figures a millisecond (see [`judge_reads`]).
const READ_DELAY_FLOOR_MS: f64 = 1.0;

/// Fewer late reads, late-merged chunks or held requests than this are noise (one
/// descheduling of the process makes a few), even in a short trial where they are more than
/// their share.
const MIN_LATE: u64 = 10;

/// `late` of `all` is enough to mark a trial: at least [`MIN_LATE`] and over `share` of all.
fn too_many(late: Option<u64>, all: Option<u64>, share: f64) -> bool {
    match (late, all) {
        (Some(late), Some(all)) => late >= MIN_LATE && late as f64 > share * all as f64,
        _ => false,
    }
}

/// Marks the trial client-bound when over 1% of its reads (and at least 10) came more than
/// half the median inter-token gap (and more than 1 ms) after their data arrived: then a
/// chunk can still be unread when the next one arrives, the kernel merges them, and both get
/// the later one's arrival time (one gap too long, the next one zero). Two chunks merge only
/// when the second arrived within the first one's wait, so the error is never more than the
/// wait: waits under 1 ms cannot cost 1 ms (an instant simulator, with gaps of microseconds,
/// stays unflagged at low load). This is the direct measure; the lag probe and CPU use are
/// the indirect one (and the only one where the kernel gives no receive times).
///
/// Late reads miss one case: a client behind by several token gaps reads a connection
/// only after its next chunks have arrived too, so its read delay (measured to the last
/// of them) stays under one gap while the first chunk waited much longer. That shows as
/// chunks read together in a late read: over 0.5% of the chunks (each makes two gaps wrong,
/// so 1% of the gaps) and at least 10 also mark the trial client-bound.
pub fn judge_reads(h: &mut ClientHeadroom, reads: &ReadDelays, itl_p50_ms: Option<f64>) {
    if reads.chunks > 0 {
        h.chunks = Some(reads.chunks);
        h.late_merged_chunks = Some(reads.late_merged);
        if merged_too_often(h) {
            h.client_bound = true;
        }
    }
    let Some(itl) = itl_p50_ms.filter(|i| *i >= 0.0) else {
        return;
    };
    let all = reads.count();
    if all == 0 {
        return;
    }
    let limit = (itl / 2.0).max(READ_DELAY_FLOOR_MS);
    h.read_delay_limit_ms = Some(limit);
    h.late_reads = Some(reads.count_over_ms(limit));
    h.reads = Some(all);
    if reads_too_late(h) {
        h.client_bound = true;
    }
}

fn merged_too_often(h: &ClientHeadroom) -> bool {
    too_many(h.late_merged_chunks, h.chunks, LATE_MERGED_SHARE)
}

/// The share of a trial's chunks that may come in late reads with the chunk before them.
const LATE_MERGED_SHARE: f64 = 0.005;

/// The share of a trial's reads that may wait past the limit.
const LATE_READ_SHARE: f64 = 0.01;

fn reads_too_late(h: &ClientHeadroom) -> bool {
    too_many(h.late_reads, h.reads, LATE_READ_SHARE)
}

/// A request held longer than this by the client was held up by it.
const LATE_SEND_MS: f64 = 1.0;

/// The share of the trial's request time that may pass in the client before requests leave.
const HELD_SHARE: f64 = 0.01;

/// Marks the trial client-bound when its requests were held by the client for over 1% of
/// their time (and at least 10 over 1 ms). Held: in a closed loop, from the end of the
/// worker's previous response to the request's first byte out; otherwise (a worker's first
/// request, open loop) from the request's start to its first byte out. TTFT and E2E count
/// from the first byte out, so this distorts no latency; but while a closed-loop worker's
/// request is held, the server has one request fewer than the level asks for, and the
/// trial's throughput is that much short. Requests that opened their connection are left
/// out: their wait is the TCP and TLS handshakes, the network's time.
pub fn judge_sends(h: &mut ClientHeadroom, finished: &[Finished]) {
    let mut sends = SendTally::default();
    for f in finished {
        sends.add(&f.record);
    }
    sends.judge(h);
}

/// [`judge_sends`] folded as requests finish, so a trial keeps its send delays (exact while
/// few, sketched past [`crate::stats::sketch::EXACT_LIMIT`]) and three sums, not its requests.
#[derive(Debug, Default)]
pub struct SendTally {
    delays: LatencySketch<f64>,
    held: f64,
    total: f64,
    late: u64,
}

impl SendTally {
    pub fn add(&mut self, r: &RequestRecord) {
        if r.new_connection {
            return;
        }
        let Some(delay) = r.send_delay_ms else {
            return;
        };
        self.delays.record(delay);
        let this = r.idle_before_ms.unwrap_or(delay);
        self.held += this;
        self.total += this + r.e2e_ms;
        if this > LATE_SEND_MS {
            self.late += 1;
        }
    }

    /// Writes the send figures into `h` and marks it client-bound when requests were held.
    pub fn judge(self, h: &mut ClientHeadroom) {
        let Some(delays) = self.delays.percentiles() else {
            return;
        };
        h.send_delay_p50_ms = Some(delays.p50);
        h.send_delay_p99_ms = Some(delays.p99);
        h.relative_error = h.relative_error.or(delays.relative_error);
        h.held_share = Some(if self.total > 0.0 {
            self.held / self.total
        } else {
            0.0
        });
        h.late_sends = Some(self.late);
        if held_too_long(h) {
            h.client_bound = true;
        }
    }
}

fn held_too_long(h: &ClientHeadroom) -> bool {
    h.late_sends.unwrap_or(0) >= MIN_LATE && h.held_share.unwrap_or(0.0) > HELD_SHARE
}

/// Summarises lag samples and CPU use and decides whether the client was the bottleneck.
pub fn judge(lags_ms: &mut [f64], cpu_fraction: f64) -> ClientHeadroom {
    judge_lags(
        Percentiles::from_values(&mut lags_ms.to_vec()),
        cpu_fraction,
    )
}

/// [`judge`] from the lags' percentiles (exact for a trial of up to 65,536 probe wakes, about
/// 11 minutes; within 0.1% past that).
pub fn judge_lags(lags_ms: Option<Percentiles>, cpu_fraction: f64) -> ClientHeadroom {
    let (p50, p99, max) = lags_ms
        .as_ref()
        .map_or((0.0, 0.0, 0.0), |p| (p.p50, p.p99, p.max));
    let mut h = ClientHeadroom {
        lag_p50_ms: p50,
        lag_p99_ms: p99,
        lag_max_ms: max,
        cpu_fraction,
        client_bound: false,
        relative_error: lags_ms.and_then(|p| p.relative_error),
        ..ClientHeadroom::default()
    };
    h.client_bound = lagging(&h);
    // A sustained backlog or used-up CPU delays everything the client does, by an amount
    // nothing here bounds; a late p99 alone (a brief descheduling) moves tail timings only.
    h.saturated = Some(h.lag_p50_ms > LAG_P50_LIMIT_MS || h.cpu_fraction >= CPU_SATURATED_FRACTION);
    h
}

/// The indirect measure: the runtime woke late, or the process used its threads' CPU.
fn lagging(h: &ClientHeadroom) -> bool {
    h.lag_p50_ms > LAG_P50_LIMIT_MS
        || h.lag_p99_ms > LAG_P99_LIMIT_MS
        || h.cpu_fraction >= CPU_SATURATED_FRACTION
}

/// The trial flag for a client-bound trial (it contains "client-bound": `baseline bless`
/// refuses such runs and the gate repeats the warning).
pub fn flag(h: &ClientHeadroom) -> Option<TrialFlag> {
    if !h.client_bound {
        return None;
    }
    let mut why = Vec::new();
    if lagging(h) {
        why.push(format!(
            "the load generator lagged (scheduler delay p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms; \
             CPU {:.0}% of its worker threads)",
            h.lag_p50_ms,
            h.lag_p99_ms,
            h.lag_max_ms,
            h.cpu_fraction * 100.0
        ));
    }
    if reads_too_late(h) {
        let (late, all) = (h.late_reads.unwrap_or(0), h.reads.unwrap_or(0));
        why.push(format!(
            "{late} of {all} reads ({:.1}%) came more than {:.1} ms after their data arrived \
             (half the median inter-token gap, at least 1 ms; read delay p99 {:.1} ms), so some \
             chunks were read together and timed as one",
            100.0 * late as f64 / all.max(1) as f64,
            h.read_delay_limit_ms.unwrap_or(0.0),
            h.read_delay_p99_ms.unwrap_or(0.0)
        ));
    }
    if merged_too_often(h) {
        let (merged, all) = (h.late_merged_chunks.unwrap_or(0), h.chunks.unwrap_or(0));
        why.push(format!(
            "{merged} of {all} chunks ({:.2}%) were read late together with the chunk before \
             them and timed as one, so some token gaps are too long and others zero",
            100.0 * merged as f64 / all.max(1) as f64
        ));
    }
    if held_too_long(h) {
        why.push(format!(
            "requests were held in the client for {:.1}% of their time (between a worker's \
             response and its next request's first byte out; send delay p99 {:.1} ms), so \
             the server had fewer requests in flight than the level asks for",
            100.0 * h.held_share.unwrap_or(0.0),
            h.send_delay_p99_ms.unwrap_or(0.0)
        ));
    }
    Some(TrialFlag::new(
        FlagKind::ClientBound,
        format!(
            "client-bound: {}; the figures may describe the client, not the server",
            why.join("; and ")
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Finished requests with the given send delays (ms) and 100 ms E2E each.
    fn sends(delays: &[f64], new_connection: bool) -> Vec<Finished> {
        delays
            .iter()
            .map(|d| {
                let mut f = crate::load::stream::outcome::a_finished_request(1.0, 100.0);
                f.record.send_delay_ms = Some(*d);
                f.record.new_connection = new_connection;
                f
            })
            .collect()
    }

    #[test]
    fn requests_held_in_the_client_mark_the_trial() {
        // 2 ms of 102 ms per request: 2% of the request time, 100 late sends.
        let mut h = judge(&mut [1.0; 100], 0.3);
        judge_sends(&mut h, &sends(&[2.0; 100], false));
        assert!(h.client_bound);
        assert_eq!(h.late_sends, Some(100));
        assert!((h.held_share.unwrap() - 2.0 / 102.0).abs() < 1e-9);
        assert!(flag(&h).unwrap().message.contains("held in the client"));

        // 0.5 ms each: under 1%.
        let mut h = judge(&mut [1.0; 100], 0.3);
        judge_sends(&mut h, &sends(&[0.5; 100], false));
        assert!(!h.client_bound);
        assert_eq!(h.send_delay_p99_ms, Some(0.5));

        // 9 requests 20 ms late: a large share, but too few to be more than a hiccup.
        let mut h = judge(&mut [1.0; 100], 0.3);
        let mut few = sends(&[20.0; 9], false);
        few.extend(sends(&[0.01; 20], false));
        judge_sends(&mut h, &few);
        assert!(!h.client_bound);

        // Waits for new connections are the network's handshakes, not the client's.
        let mut h = judge(&mut [1.0; 100], 0.3);
        judge_sends(&mut h, &sends(&[30.0; 100], true));
        assert!(!h.client_bound);
        assert_eq!(h.held_share, None);

        // Closed loop: sent at once (0.05 ms) but 3 ms after the worker's previous response
        // ended: held 3 ms of 103.
        let mut h = judge(&mut [1.0; 100], 0.3);
        let mut turned = sends(&[0.05; 100], false);
        for f in &mut turned {
            f.record.idle_before_ms = Some(3.0);
        }
        judge_sends(&mut h, &turned);
        assert!(h.client_bound);
        assert_eq!(h.send_delay_p99_ms, Some(0.05));
        assert!((h.held_share.unwrap() - 3.0 / 103.0).abs() < 1e-9);
    }

    #[test]
    fn judges_lag_and_cpu() {
        let mut calm = vec![1.0; 100];
        assert!(!judge(&mut calm, 0.3).client_bound);
        // A brief OS hiccup: the tail moves, the median does not.
        let mut hiccup = vec![1.0; 100];
        hiccup[99] = 9.0;
        hiccup[98] = 8.0;
        assert!(!judge(&mut hiccup, 0.3).client_bound);
        let mut lagging = vec![1.0; 100];
        lagging[99] = 40.0;
        lagging[98] = 30.0;
        let h = judge(&mut lagging, 0.3);
        let bound = flag(&h).unwrap();
        assert!(bound.kind == FlagKind::ClientBound && bound.message.contains("client-bound"));
        let mut backlog = vec![4.0; 100];
        assert!(judge(&mut backlog, 0.3).client_bound);
        assert!(judge(&mut calm, 0.95).client_bound);
        assert!(flag(&judge(&mut calm, 0.2)).is_none());
    }

    #[test]
    fn late_reads_against_the_token_gap() {
        let calm = || judge(&mut [1.0; 100], 0.3);
        // 20 ms gaps: the limit is 10 ms. 1.5% of 2,000 reads at 4 ms: fine.
        let mut h = calm();
        judge_reads(
            &mut h,
            &ReadDelays::of(&[(500, 1970), (4_000, 30)]),
            Some(20.0),
        );
        assert!(!h.client_bound && h.read_delay_limit_ms == Some(10.0));
        assert_eq!((h.late_reads, h.reads), (Some(0), Some(2000)));
        // 1.5% at 12 ms: client-bound, and the flag says why.
        let mut h = calm();
        judge_reads(
            &mut h,
            &ReadDelays::of(&[(500, 1970), (12_000, 30)]),
            Some(20.0),
        );
        assert!(h.client_bound && h.late_reads == Some(30));
        let msg = flag(&h).unwrap().message;
        assert!(
            msg.contains("30 of 2000 reads") && !msg.contains("scheduler"),
            "{msg}"
        );
        // A short trial with a few late reads (one descheduling): noise, not judged.
        let mut h = calm();
        judge_reads(
            &mut h,
            &ReadDelays::of(&[(100, 90), (30_000, 3)]),
            Some(20.0),
        );
        assert!(!h.client_bound);
        // Gaps of microseconds (an instant server): waits under 1 ms are not judged.
        let mut h = calm();
        judge_reads(
            &mut h,
            &ReadDelays::of(&[(50, 900), (800, 100)]),
            Some(0.02),
        );
        assert!(!h.client_bound && h.read_delay_limit_ms == Some(1.0));
        let mut h = calm();
        judge_reads(
            &mut h,
            &ReadDelays::of(&[(50, 900), (3_000, 100)]),
            Some(0.02),
        );
        assert!(h.client_bound);
        // Without kernel receive times, or without streamed tokens, there is nothing to judge.
        let mut h = calm();
        judge_reads(&mut h, &ReadDelays::of(&[]), Some(20.0));
        judge_reads(&mut h, &ReadDelays::of(&[(50_000, 100)]), None);
        assert!(!h.client_bound && flag(&h).is_none());
    }

    /// The case late reads miss (read delays under the limit) is caught by chunks read late
    /// together with the chunk before them: over 0.5% of the chunks, and at least 10.
    #[test]
    fn chunks_read_late_together() {
        let calm = || judge(&mut [1.0; 100], 0.3);
        let reads = |chunks, late_merged| {
            let mut r = ReadDelays::of(&[(500, 2000)]);
            (r.chunks, r.late_merged) = (chunks, late_merged);
            r
        };
        let mut h = calm();
        judge_reads(&mut h, &reads(2000, 9), Some(20.0));
        assert!(!h.client_bound, "0.45% is under the limit");
        assert_eq!((h.late_merged_chunks, h.chunks), (Some(9), Some(2000)));
        let mut h = calm();
        judge_reads(&mut h, &reads(2000, 11), Some(20.0));
        assert!(h.client_bound && h.late_reads == Some(0), "{h:?}");
        let msg = flag(&h).unwrap().message;
        assert!(
            msg.contains("11 of 2000 chunks (0.55%)") && !msg.contains("reads ("),
            "{msg}"
        );
        // Too few to be more than noise, even as a share of a short trial.
        let mut h = calm();
        judge_reads(&mut h, &reads(100, 9), Some(20.0));
        assert!(!h.client_bound);
        // Judged without a token gap too (a trial whose ITL is unknown).
        let mut h = calm();
        judge_reads(&mut h, &reads(2000, 40), None);
        assert!(h.client_bound);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_hogged_runtime_is_client_bound() {
        let m = Monitor::start();
        tokio::time::sleep(Duration::from_millis(30)).await;
        // Block the only thread: the probe cannot wake on time.
        std::thread::sleep(Duration::from_millis(60));
        tokio::time::sleep(Duration::from_millis(30)).await;
        let (h, _) = m.finish();
        assert!(h.lag_max_ms >= 40.0, "{h:?}");
        assert!(h.client_bound, "{h:?}");
    }
}
