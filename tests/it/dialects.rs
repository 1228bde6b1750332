//! Each engine's streaming dialect, replayed through the client's own parsing path
//! (`StreamReader`, then `outcome::finish`) with the arrival times recorded in the fixture, so
//! TTFT, ITL, TPOT and token counts are checked against values computed by hand below.
//!
//! Fixture format (`fixtures/streams/*.sse`): `#` comments; otherwise one line per SSE write,
//! `<ms since the request was sent> data: <payload>`. Consecutive lines with the same time are
//! one write (several events in one network read).

use std::path::PathBuf;

use throughline::load::run::trial::summarize_trial;
use throughline::load::stream::client::{Observed, StreamReader};
use throughline::load::stream::outcome::{finish, Finished, Slot};

/// (arrival in seconds, bytes) for each write of a fixture.
fn writes(name: &str) -> Vec<(f64, Vec<u8>)> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/streams")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    let mut out: Vec<(f64, Vec<u8>)> = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let (ms, rest) = line
            .split_once(' ')
            .unwrap_or_else(|| panic!("{name}:{}: no time", n + 1));
        let at = ms
            .parse::<f64>()
            .unwrap_or_else(|_| panic!("{name}:{}: bad time {ms:?}", n + 1))
            / 1000.0;
        let event = format!("{rest}\n\n").into_bytes();
        match out.last_mut() {
            Some((t, bytes)) if *t == at => bytes.extend(event),
            _ => out.push((at, event)),
        }
    }
    out
}

/// Replays writes through the stream reader as the network loop would, the request sent at 0.
fn replay(writes: &[(f64, Vec<u8>)]) -> Observed {
    let mut obs = Observed {
        sent_s: 0.0,
        first_byte_s: writes.first().map(|w| w.0),
        http_status: Some(200),
        ..Observed::default()
    };
    let mut reader = StreamReader::new();
    for (at, bytes) in writes {
        obs.end_s = *at;
        if reader.push(*at, bytes, &mut obs) {
            return obs;
        }
    }
    reader.finish(obs.end_s, &mut obs);
    obs
}

fn measure(name: &str) -> Finished {
    let obs = replay(&writes(name));
    let slot = Slot {
        concurrency: 1,
        trial: 1,
        index: 0,
        warmup: false,
        endpoint: 0,
    };
    // Streamed, no usage required, any length a success (the lengths are checked below).
    let profile = throughline::profile::Profile::parse(
        "name = \"d\"\n[target]\nendpoints = [\"http://127.0.0.1:1\"]\n[workload]\nmax_tokens = 16\ndegenerate_below = 1\n[sweep]\nconcurrency = [1]\n",
    )
    .unwrap();
    finish(obs, slot, &profile.workload)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-6
}

/// The checks every fixture gets: success, and the figures computed by hand.
#[track_caller]
fn check(f: &Finished, ttft_ms: f64, tokens: u64, gaps: &[f64], e2e_ms: f64) {
    let r = &f.record;
    assert_eq!(r.error, None, "{:?}", r.error_message);
    assert!(close(r.ttft_ms.unwrap(), ttft_ms), "ttft {:?}", r.ttft_ms);
    assert_eq!(r.output_tokens, tokens);
    assert_eq!(
        f.gaps_ms.len() as u64,
        tokens - 1,
        "one gap per token after the first"
    );
    for (g, e) in f.gaps_ms.iter().zip(gaps) {
        assert!(
            close(f64::from(*g), *e),
            "gaps {:?}, expected {gaps:?}",
            f.gaps_ms
        );
    }
    assert!(close(r.e2e_ms, e2e_ms), "e2e {}", r.e2e_ms);
    let tpot = (e2e_ms - ttft_ms) / (tokens - 1) as f64;
    assert!(close(r.tpot_ms.unwrap(), tpot), "tpot {:?}", r.tpot_ms);
    assert!(!f.estimated_split, "token split should be exact here");
}

#[test]
fn vllm_role_chunk_is_not_the_first_token_and_think_end_counts() {
    let f = measure("vllm_chat_reasoning.sse");
    // First chunk at 40 ms is role-only; the first token (reasoning) is at 100 ms.
    assert!(close(f.record.first_chunk_s.unwrap(), 0.040));
    // Tokens 1,1,1 then 2 in one chunk (</think> sends no delta), then 1,1: seven tokens, six
    // gaps of 20 ms each (the 40 ms gap at 180 ms is two tokens of 20).
    check(&f, 100.0, 7, &[20.0; 6], 221.0);
    // TPOT = (221 - 100) / 6.
    assert!(close(f.record.tpot_ms.unwrap(), 121.0 / 6.0));
    assert_eq!(f.record.input_tokens, Some(12));
    assert_eq!(f.record.finish_reason.as_deref(), Some("length"));
    assert_eq!(f.record.chunks, 6);
}

#[test]
fn vllm_speculative_chunks_give_per_token_itl() {
    let f = measure("vllm_mtp.sse");
    // Chunks carry 1, 2, 3, 1, 3 tokens at 50, 80, 110, 125, 155 ms.
    let gaps = [15.0, 15.0, 10.0, 10.0, 10.0, 15.0, 10.0, 10.0, 10.0];
    check(&f, 50.0, 10, &gaps, 156.0);
    assert_eq!(f.record.chunks, 5);
    // Per chunk, ITL would be 30, 30, 15, 30 ms (mean 26.25); per token the mean is
    // (155 - 50) / 9 = 11.67 ms, the median 10 ms.
    let t = summarize_trial(1, vec![f]);
    let itl = t.itl_ms.unwrap();
    assert_eq!(itl.count, 9);
    assert!(close(itl.mean, 105.0 / 9.0), "{itl:?}");
    assert!(close(itl.p50, 10.0), "{itl:?}");
    assert_eq!(t.output_tokens, 10);
    assert!(t.flags.is_empty(), "{:?}", t.flags);
}

#[test]
fn sglang_separate_finish_chunk_and_usage_without_per_chunk_counts() {
    let f = measure("sglang_chat_reasoning.sse");
    assert!(close(f.record.first_chunk_s.unwrap(), 0.055));
    check(&f, 90.0, 6, &[25.0; 5], 217.0);
    assert_eq!(f.record.input_tokens, Some(31));
    assert_eq!(f.record.finish_reason.as_deref(), Some("length"));
}

#[test]
fn llamacpp_role_and_first_token_in_one_write_and_timings_ignored() {
    let f = measure("llamacpp_chat.sse");
    // Role-only and first token share the write at 25 ms: TTFT is 25 ms, not the next chunk.
    assert!(close(f.record.first_chunk_s.unwrap(), 0.025));
    check(&f, 25.0, 5, &[20.0, 21.0, 20.0, 21.0], 108.0);
    assert_eq!(f.record.input_tokens, Some(18));
}

#[test]
fn tgi_first_chunk_carries_role_and_token() {
    let f = measure("tgi_chat.sse");
    check(&f, 70.0, 5, &[25.0; 4], 171.0);
    assert_eq!(f.record.chunks, 5, "no chunk may be skipped as role-only");
}

/// However the network splits the writes (mid-event, mid-line), the figures are the same
/// when every piece arrives at the time of the write it belongs to.
#[test]
fn split_reads_do_not_change_the_figures() {
    for name in [
        "vllm_chat_reasoning.sse",
        "vllm_mtp.sse",
        "sglang_chat_reasoning.sse",
        "llamacpp_chat.sse",
        "tgi_chat.sse",
    ] {
        let whole = writes(name);
        let reference = replay(&whole);
        for cut in [1usize, 7, 33, 101] {
            let split: Vec<(f64, Vec<u8>)> = whole
                .iter()
                .flat_map(|(t, b)| {
                    let c = cut.min(b.len());
                    [(*t, b[..c].to_vec()), (*t, b[c..].to_vec())]
                })
                .collect();
            let obs = replay(&split);
            assert_eq!(obs.chunks, reference.chunks, "{name} cut {cut}");
            assert_eq!(obs.usage, reference.usage, "{name} cut {cut}");
            assert_eq!(obs.first_chunk_s, reference.first_chunk_s);
            assert!(obs.failure.is_none(), "{name}: {:?}", obs.failure);
        }
    }
}

/// A stream cut before `[DONE]` is a protocol failure, not a short success.
#[test]
fn truncated_stream_is_a_failure() {
    let mut w = writes("vllm_mtp.sse");
    w.truncate(3);
    let obs = replay(&w);
    assert!(obs.failure.is_some());
}
