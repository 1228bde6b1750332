//! A trial's requests stream to `requests.jsonl` as they finish and are not held: the tally
//! folds each request in and drops it, and past its sketches' exact limit holds no more
//! (measured with a counting allocator, live heap bytes of the measuring thread, not a
//! clock, so the test is fast and steady), and a journal that cannot be written fails the
//! run.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::os::unix::process::CommandExt;

use crate::common::*;

use throughline::load::run::trial::{Asked, TrialTally};
use throughline::load::stream::outcome::Finished;
use throughline::record::{ErrorClass, RequestRecord, TokenSource};

/// The system allocator, counting the bytes each thread allocated and freed.
struct Counting;

thread_local! {
    /// Bytes this thread allocated minus those it freed. Per thread, because every test of
    /// the `it` binary shares this allocator: a global count also saw the other tests'
    /// buffers come and go, and CI once read 189 bytes a request here (stop 44).
    static LIVE: Cell<isize> = const { Cell::new(0) };
}

/// Adds `bytes` to this thread's count. `try_with`: an allocation while the thread's
/// locals are torn down is not counted, and never panics inside the allocator.
fn count(bytes: isize) {
    let _ = LIVE.try_with(|live| live.set(live.get() + bytes));
}

fn live() -> isize {
    LIVE.with(Cell::get)
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            count(layout.size() as isize);
        }
        p
    }

    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        unsafe { System.dealloc(p, layout) };
        count(-(layout.size() as isize));
    }

    unsafe fn realloc(&self, p: *mut u8, layout: Layout, size: usize) -> *mut u8 {
        let q = unsafe { System.realloc(p, layout, size) };
        if !q.is_null() {
            count(size as isize - layout.size() as isize);
        }
        q
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Request `i` as a trial sees it finish: 8 token gaps, a finish reason, and every tenth one
/// failed with a 200-byte message.
fn request(i: u32) -> Finished {
    let sent_s = f64::from(i) * 1e-3;
    let failed = i % 10 == 9;
    Finished {
        record: RequestRecord {
            concurrency: 64,
            trial: 1,
            index: i,
            warmup: false,
            endpoint: 0,
            sent_s,
            send_delay_ms: Some(0.05 + f64::from(i % 7) * 0.01),
            new_connection: false,
            idle_before_ms: Some(0.1),
            first_byte_s: Some(sent_s + 0.01),
            first_chunk_s: Some(sent_s + 0.01),
            first_token_s: Some(sent_s + 0.012),
            end_s: sent_s + 0.05,
            ttft_ms: Some(12.0 + f64::from(i % 13)),
            e2e_ms: 50.0 + f64::from(i % 17),
            tpot_ms: Some(4.0 + f64::from(i % 5) * 0.1),
            output_tokens: 9,
            input_tokens: Some(16),
            cached_tokens: None,
            token_source: TokenSource::Usage,
            chunks: 9,
            finish_reason: Some("length".to_string()),
            http_status: Some(200),
            error: failed.then_some(ErrorClass::Reset),
            error_message: failed.then(|| format!("connection reset {i:>180}")),
            rate: None,
            scheduled_s: None,
            window: None,
            arm: None,
        },
        gaps_ms: if failed { Vec::new() } else { vec![4.5; 8] },
        estimated_split: false,
        answer: None,
        requested_output_tokens: None,
    }
}

/// Live heap bytes per request added to `tally` over `n` more requests. The tally runs on
/// this thread alone, so this thread's count is its memory.
fn growth_per_request(tally: &mut TrialTally, from: u32, n: u32) -> f64 {
    let before = live();
    for i in from..from + n {
        tally.add(request(i), Asked::default());
    }
    (live() - before) as f64 / f64::from(n)
}

/// What a trial may keep per request while its sketches are exact: TTFT, TPOT, E2E and the
/// send delay as f64 and the 8 gaps as f32 (64 bytes), twice that for the vectors' doubling.
/// A record held to the end of the trial costs its struct and its strings on top.
const KEPT_PER_REQUEST: f64 = 2.0 * (4.0 * 8.0 + 8.0 * 4.0);

/// Requests after which every sketch of the tally holds a histogram, not values: the
/// figures of successful requests (9 in 10) have passed `EXACT_LIMIT` (65,536) values.
const PAST_EXACT: u32 = 80_000;

/// Bytes this thread's count moved while another thread allocated 16 MiB and held them.
fn counted_of_a_neighbours_allocation() -> isize {
    use std::sync::{Arc, Barrier};
    let step = Arc::new(Barrier::new(2));
    let theirs = Arc::clone(&step);
    let neighbour = std::thread::spawn(move || {
        theirs.wait();
        let held = vec![1u8; 16 << 20];
        theirs.wait();
        theirs.wait();
        drop(held);
    });
    let before = live();
    step.wait();
    step.wait();
    let counted = live() - before;
    step.wait();
    neighbour.join().unwrap();
    counted
}

#[test]
fn a_trial_keeps_no_request_records() {
    // The other tests of this binary allocate beside this one: the measure must not see them.
    let counted = counted_of_a_neighbours_allocation();
    assert!(
        counted.abs() < 1024,
        "a neighbour's 16 MiB moved this count by {counted} bytes"
    );
    let record = std::mem::size_of::<Finished>() as f64;
    assert!(record > KEPT_PER_REQUEST, "a record is {record} bytes");
    // Streaming: only the sketches' values grow, and only up to their limit.
    let mut tally = TrialTally::new(None);
    growth_per_request(&mut tally, 0, 1_000);
    let grew = growth_per_request(&mut tally, 1_000, 40_000);
    eprintln!("streaming: {grew:.1} bytes a request (a record is {record} bytes)");
    assert!(
        grew <= KEPT_PER_REQUEST,
        "the tally grew {grew:.0} bytes a request (at most {KEPT_PER_REQUEST} expected; a \
         held record is {record} bytes and its strings)"
    );
    assert_eq!(tally.requests(), 41_000);
    let t = tally.summary(1);
    assert_eq!((t.succeeded, t.failed_total()), (36_900, 4_100));
    assert_eq!(t.itl_ms.unwrap().count, 36_900 * 8);
}

/// Past the sketches' exact limit a trial's memory stops growing: a trial of an hour holds
/// what one of a few minutes holds, with the telemetry cross-check's count too (it places
/// each request's tokens between the scrapes and keeps nothing of the request).
#[test]
fn a_long_trial_holds_what_a_short_one_holds() {
    use std::sync::Arc;
    use throughline::load::telemetry::{ClientCount, Counting};
    let counted = counted_of_a_neighbours_allocation();
    assert!(
        counted.abs() < 1024,
        "a neighbour moved this count by {counted}"
    );
    for watched in [false, true] {
        let count = Arc::new(ClientCount::new(Counting::PerToken, 1));
        // A first scrape before the trial, and one begun after its last request.
        count.scrape_began(0, -1.0);
        count.scrape_ended(0, Some(-1.0));
        count.scrape_began(0, 1e6);
        let mut tally = TrialTally::new(watched.then(|| Arc::clone(&count)));
        growth_per_request(&mut tally, 0, PAST_EXACT);
        let grew = growth_per_request(&mut tally, PAST_EXACT, 200_000);
        eprintln!("past the exact limit, telemetry {watched}: {grew:.2} bytes a request");
        assert!(
            grew.abs() < 1.0,
            "telemetry {watched}: the tally grew {grew:.1} bytes a request past the limit"
        );
        let t = tally.summary(1);
        let itl = t.itl_ms.unwrap();
        assert_eq!(itl.count, u64::from(PAST_EXACT + 200_000) / 10 * 9 * 8);
        assert_eq!(
            itl.relative_error,
            Some(0.001),
            "read from the histogram: said so"
        );
        if watched {
            count.scrape_ended(0, Some(1e6));
            // 9 tokens a request, failed ones at their end: all inside the two scrapes.
            assert_eq!(count.between(0, 0, 1), u64::from(PAST_EXACT + 200_000) * 9);
        }
    }
}

/// A figure with more values than a trial keeps exactly (ITL: 80 requests of 1,000 tokens,
/// 79,920 gaps) is read from the histogram and says so, in results.json (`relative_error`)
/// and under its level on the console; one with few (TTFT: 80 values) stays exact.
#[test]
fn percentiles_read_from_the_histogram_say_so() {
    let sim = Sim::start(1, &["--preset", "instant"]);
    let tmp = tempfile::tempdir().unwrap();
    let body = "[workload]\ninput_tokens = 4\nmax_tokens = 1000\nignore_eos = true\n\
                [sweep]\nconcurrency = [8]\nrequests_per_level = 80\ntrials = 1\n\
                warmup_requests = 0\n";
    let profile = write_profile(tmp.path(), "many-gaps", &sim.urls, body);
    let out_dir = tmp.path().join("out");
    let o = bench_ok(&profile, &out_dir);
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("results.json")).unwrap())
            .unwrap();
    let trial = &results["levels"][0]["trials"][0];
    assert_eq!(trial["itl_ms"]["count"], 79_920, "{}", trial["itl_ms"]);
    assert_eq!(
        trial["itl_ms"]["relative_error"], 0.001,
        "{}",
        trial["itl_ms"]
    );
    assert!(
        trial["ttft_ms"].get("relative_error").is_none(),
        "{}",
        trial["ttft_ms"]
    );
    let said = String::from_utf8_lossy(&o.stdout);
    assert!(
        said.contains("ITL percentiles of 1 of 1 trial(s) read from an HDR histogram"),
        "{said}"
    );
}

/// A write to `requests.jsonl` that fails (here: past the file-size limit, EFBIG) stops the
/// run with exit 2 naming the file, and no results.json claims the run was measured.
#[test]
fn a_journal_that_cannot_be_written_fails_the_run() {
    let sim = Sim::start(1, &["--preset", "instant"]);
    let tmp = tempfile::tempdir().unwrap();
    let profile = write_profile(tmp.path(), "quick", &sim.urls, QUICK_BODY);
    let out_dir = tmp.path().join("out");
    let mut bench = bench_command(&profile, &out_dir);
    bench.arg("--no-progress");
    // The 40 lines take ~16 KiB; the limit stops the journal a few lines in.
    unsafe {
        bench.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: 4096,
                rlim_max: libc::RLIM_INFINITY,
            };
            // Past the limit a write fails with EFBIG instead of raising SIGXFSZ.
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            if libc::setrlimit(libc::RLIMIT_FSIZE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = bench.output().unwrap();
    assert_eq!(code(&out), 2, "{}", text(&out));
    assert!(
        text(&out).contains("cannot write requests.jsonl"),
        "{}",
        text(&out)
    );
    assert!(!out_dir.join("results.json").exists());
}
