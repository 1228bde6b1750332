//! `throughline selfbench` end to end, at a tiny size: it starts its own simulators, every
//! request is accounted for, and the timing case pairs every token gap with the simulator's
//! send times.

use crate::common::{code, read_json, run, text, Sim};

#[test]
fn a_small_selfbench_accounts_for_every_chunk_and_pairs_every_gap() {
    let tmp = tempfile::tempdir().unwrap();
    let json = tmp.path().join("selfbench.json");
    let out = run(&[
        "selfbench",
        "--levels",
        "1,4",
        "--chunks",
        "64",
        "--long-tokens",
        "16",
        "--short-tokens",
        "4",
        "--timing-streams",
        "4",
        "--timing-tokens",
        "10",
        "--token-delay-ms",
        "10",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    let report = read_json(&json);
    let cases = report["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 4, "two levels x long and short");
    for c in cases {
        let (requests, tokens) = (
            c["requests"].as_u64().unwrap(),
            c["tokens"].as_u64().unwrap(),
        );
        assert_eq!(c["failed"], 0, "{c}");
        assert_eq!(c["succeeded"].as_u64(), Some(requests), "{c}");
        // The instant simulator sends one token per chunk.
        assert_eq!(c["chunks"].as_u64(), Some(requests * tokens), "{c}");
        assert!(c["chunks_per_s"].as_f64().unwrap() > 0.0, "{c}");
    }
    let t = &report["timing"];
    assert_eq!(t["failed"], 0, "{t}");
    assert_eq!(t["succeeded"], 4, "{t}");
    assert_eq!(t["unpaired_requests"], 0, "{t}");
    // Ten tokens a stream give nine gaps, each paired with the simulator's.
    assert_eq!(t["paired_gaps"], 4 * 9, "{t}");
    let sim_p50 = t["sim_send_gap_ms"]["p50"].as_f64().unwrap();
    assert!(
        (sim_p50 - 10.0).abs() < 3.0,
        "the simulator's own cadence: {t}"
    );
    assert!(t["client_abs_error_ms"]["max"].as_f64().is_some(), "{t}");
    let reads =
        t["kernel_stamped_reads"].as_u64().unwrap() + t["read_time_reads"].as_u64().unwrap();
    // Every stream's reads were stamped. Not one read a token chunk: a read may hold the
    // role chunk, the usage or [DONE] alone (44 reads for 40 chunks were seen), or several
    // chunks the simulator sent microseconds apart (39 for 40, none late); the gaps'
    // pairing above accounts for every chunk.
    assert!(reads >= 4, "every stream's reads were stamped: {t}");
    let shown = text(&out);
    assert!(shown.contains("client error per token"), "{shown}");
}

/// The send-time record exists only when asked for, and names each stream by its `user`.
#[test]
fn send_times_are_recorded_only_when_asked() {
    let client = reqwest::blocking::Client::new();
    let plain = Sim::start(1, &["--preset", "instant"]);
    let status = client
        .get(format!("{}/sim/send-times", plain.urls[0]))
        .send()
        .unwrap()
        .status();
    assert_eq!(status, 404);

    let sim = Sim::start(1, &["--preset", "instant", "--record-send-times"]);
    let body = serde_json::json!({
        "model": "m", "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 5, "ignore_eos": true, "stream": true, "user": "stream-7",
    });
    let streamed = client
        .post(format!("{}/v1/chat/completions", sim.urls[0]))
        .json(&body)
        .send()
        .unwrap()
        .text()
        .unwrap();
    assert!(streamed.contains("[DONE]"), "{streamed}");
    let times: serde_json::Value = client
        .get(format!("{}/sim/send-times", sim.urls[0]))
        .send()
        .unwrap()
        .json()
        .unwrap();
    let sent = times["stream-7"]
        .as_array()
        .expect("the stream is recorded by its user");
    assert_eq!(sent.len(), 5, "one time per content chunk: {times}");
    let ns: Vec<u64> = sent.iter().map(|v| v.as_u64().unwrap()).collect();
    assert!(ns.windows(2).all(|w| w[0] <= w[1]), "{ns:?}");
}
