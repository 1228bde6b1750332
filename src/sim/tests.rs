//! Real-time HTTP tests against in-process replicas (SSE parsed by hand, on purpose).

use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::{SimCluster, SimConfig};

const LOCAL: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

async fn start(cfg: &SimConfig) -> (SimCluster, String) {
    let c = SimCluster::start(cfg, LOCAL, 0, 1).await.unwrap();
    let url = c.base_urls().remove(0);
    (c, url)
}

/// `data:` payloads of an SSE body, checking the framing as it goes.
fn sse_payloads(body: &str) -> Vec<String> {
    assert!(body.ends_with("\n\n"), "unterminated stream: {body:?}");
    body.split("\n\n")
        .filter(|e| !e.is_empty())
        .map(|e| e.strip_prefix("data: ").expect(e).to_string())
        .collect()
}

async fn metric(url: &str, name: &str) -> f64 {
    let text = reqwest::get(format!("{url}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(text.contains(&format!("# TYPE {name} ")), "{text}");
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .unwrap_or_else(|| panic!("{name} missing"))
        .parse()
        .unwrap()
}

fn words(v: &Value) -> u64 {
    v.as_str().unwrap().split_whitespace().count() as u64
}

#[tokio::test]
async fn chat_stream_with_usage_matches_metrics() {
    let (cluster, url) = start(&SimConfig::preset("fast").unwrap()).await;
    let body = json!({
        "model": "sim-model", "stream": true, "max_tokens": 20, "ignore_eos": true,
        "messages": [{"role": "user", "content": "count these five words"}, {"role": "user", "content": "two more"}],
        "stream_options": {"include_usage": true, "continuous_usage_stats": true},
    });
    let resp = reqwest::Client::new()
        .post(format!("{url}/v1/chat/completions"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert!(resp.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/event-stream"));
    let events = sse_payloads(&resp.text().await.unwrap());
    assert_eq!(events.last().unwrap(), "[DONE]");
    let chunks: Vec<Value> = events[..events.len() - 1]
        .iter()
        .map(|e| serde_json::from_str(e).unwrap())
        .collect();
    assert_eq!(
        chunks[0]["choices"][0]["delta"],
        json!({"role": "assistant", "content": ""})
    );
    let (content, tail) = chunks[1..].split_at(chunks.len() - 2);
    let mut seen = 0;
    for (i, c) in content.iter().enumerate() {
        assert_eq!(c["object"], "chat.completion.chunk");
        assert!(c["id"].as_str().unwrap().starts_with("cmpl-"));
        seen += words(&c["choices"][0]["delta"]["content"]);
        assert_eq!(c["usage"]["completion_tokens"], seen, "cumulative usage");
        let last = i == content.len() - 1;
        let finish = &c["choices"][0]["finish_reason"];
        assert_eq!(finish, &if last { json!("length") } else { Value::Null });
    }
    assert_eq!(seen, 20);
    let usage = &tail[0];
    assert_eq!(usage["choices"], json!([]));
    assert_eq!(
        usage["usage"],
        json!({"prompt_tokens": 6, "completion_tokens": 20, "total_tokens": 26})
    );
    let m = |name| metric(&url, name);
    assert_eq!(m("throughline_sim_generation_tokens_total").await, 20.0);
    assert_eq!(m("throughline_sim_prompt_tokens_total").await, 6.0);
    assert_eq!(m("throughline_sim_requests_total").await, 1.0);
    assert_eq!(m("throughline_sim_num_requests_running").await, 0.0);
    cluster.shutdown().await;
}

#[tokio::test]
async fn mtp_chunks_carry_several_tokens() {
    let cfg = SimConfig {
        mtp_max: 3,
        tokens_per_step_mean: 2.0,
        ..SimConfig::preset("fast").unwrap()
    };
    let (cluster, url) = start(&cfg).await;
    let body = json!({"prompt": "a b c", "max_tokens": 200, "ignore_eos": true, "stream": true,
        "stream_options": {"continuous_usage_stats": true}});
    let text = reqwest::Client::new()
        .post(format!("{url}/v1/completions"))
        .json(&body)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let events = sse_payloads(&text);
    let chunks: Vec<Value> = events[..events.len() - 1]
        .iter()
        .map(|e| serde_json::from_str(e).unwrap())
        .collect();
    let per_chunk: Vec<u64> = chunks
        .iter()
        .map(|c| words(&c["choices"][0]["text"]))
        .collect();
    assert_eq!(per_chunk.iter().sum::<u64>(), 200);
    assert!(per_chunk.iter().any(|&k| k > 1), "{per_chunk:?}");
    assert!(per_chunk.len() < 150, "mean > 1 token per chunk");
    let last = chunks.last().unwrap();
    assert_eq!(last["usage"]["completion_tokens"], 200);
    assert_eq!(
        metric(&url, "throughline_sim_generation_tokens_total").await,
        200.0
    );
    cluster.shutdown().await;
}

#[tokio::test]
async fn non_streaming_models_health_and_errors() {
    let (cluster, url) = start(&SimConfig::preset("instant").unwrap()).await;
    let client = reqwest::Client::new();
    let v: Value = client
        .post(format!("{url}/v1/completions"))
        .json(&json!({"prompt": "hello world", "max_tokens": 50, "min_tokens": 10}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let n = v["usage"]["completion_tokens"].as_u64().unwrap();
    assert!((10..=50).contains(&n));
    assert_eq!(words(&v["choices"][0]["text"]), n);
    assert_eq!(v["usage"]["prompt_tokens"], 2);
    let fin = if n == 50 { "length" } else { "stop" };
    assert_eq!(v["choices"][0]["finish_reason"], fin);

    let models: Value = reqwest::get(format!("{url}/v1/models"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(models["data"][0]["id"], "sim-model");
    assert_eq!(models["data"][0]["owned_by"], "throughline-sim");
    assert_eq!(
        reqwest::get(format!("{url}/health"))
            .await
            .unwrap()
            .status(),
        200
    );

    for (path, body) in [
        ("chat/completions", "{not json"),
        ("chat/completions", r#"{"prompt": "x"}"#),
        ("completions", r#"{"prompt": "x", "max_tokens": 0}"#),
    ] {
        let r = client
            .post(format!("{url}/v1/{path}"))
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 400, "{body}");
        let e: Value = r.json().await.unwrap();
        assert_eq!(e["error"]["type"], "invalid_request_error");
        assert!(e["error"]["message"].is_string());
    }
    cluster.shutdown().await;
}

/// Starts a stream that would run for a million tokens and waits for its first chunk.
async fn open_endless_stream(url: &str) -> reqwest::Response {
    let body = json!({"prompt": "x", "max_tokens": 1_000_000, "ignore_eos": true, "stream": true});
    let mut resp = reqwest::Client::new()
        .post(format!("{url}/v1/completions"))
        .json(&body)
        .send()
        .await
        .unwrap();
    resp.chunk().await.unwrap().expect("a first chunk");
    resp
}

/// Waits (5 s at most) until the engine runs no request: a disconnect must free its slot.
async fn wait_until_no_request_runs(url: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while metric(url, "throughline_sim_num_requests_running").await != 0.0 {
        assert!(Instant::now() < deadline, "slot leaked after disconnect");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn disconnect_mid_stream_frees_the_slot() {
    let (cluster, url) = start(&SimConfig::preset("fast").unwrap()).await;
    let resp = open_endless_stream(&url).await;
    assert_eq!(
        metric(&url, "throughline_sim_num_requests_running").await,
        1.0
    );
    drop(resp);
    wait_until_no_request_runs(&url).await;
    assert_eq!(
        metric(&url, "throughline_sim_requests_aborted_total").await,
        1.0
    );
    assert_eq!(metric(&url, "throughline_sim_requests_total").await, 0.0);
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixed_cadence_keeps_its_delay_without_drift() {
    let cfg = SimConfig {
        token_delay_ms: Some(20.0),
        ..SimConfig::preset("fixed").unwrap()
    };
    let (cluster, url) = start(&cfg).await;
    let body = json!({"prompt": "x", "max_tokens": 50, "ignore_eos": true, "stream": true});
    let mut resp = reqwest::Client::new()
        .post(format!("{url}/v1/completions"))
        .json(&body)
        .send()
        .await
        .unwrap();
    let mut stamps = vec![];
    let mut buf = String::new();
    while let Some(bytes) = resp.chunk().await.unwrap() {
        buf.push_str(std::str::from_utf8(&bytes).unwrap());
        while let Some(end) = buf.find("\n\n") {
            if !buf[..end].contains("[DONE]") {
                stamps.push(Instant::now());
            }
            buf.drain(..end + 2);
        }
    }
    assert_eq!(stamps.len(), 50);
    let mut gaps: Vec<f64> = stamps
        .windows(2)
        .map(|w| (w[1] - w[0]).as_secs_f64() * 1e3)
        .collect();
    gaps.sort_by(f64::total_cmp);
    let median = gaps[gaps.len() / 2];
    assert!((median - 20.0).abs() < 4.0, "median ITL {median} ms");
    let span = (stamps[49] - stamps[0]).as_secs_f64() * 1e3;
    assert!(
        (span - 49.0 * 20.0).abs() < 100.0,
        "49 steps took {span} ms"
    );
    cluster.shutdown().await;
}

#[tokio::test]
async fn replicas_get_distinct_ports() {
    let c = SimCluster::start(&SimConfig::preset("instant").unwrap(), LOCAL, 0, 3)
        .await
        .unwrap();
    let urls = c.base_urls();
    assert_eq!(urls.len(), 3);
    assert!(urls.iter().all(|u| u.starts_with("http://127.0.0.1:")));
    assert_eq!(
        urls.iter().collect::<std::collections::HashSet<_>>().len(),
        3
    );
    c.shutdown().await;
}

/// The real engine over HTTP and the virtual-time replay agree: the replay's calibration
/// says something about the server clients actually hit. The fast preset slowed 4x (steps
/// of ~8 ms instead of ~2 ms, the replay scales exactly with the slowdown): a timer that
/// wakes a millisecond late beside CPU-heavy tests costs ~12% of a 2 ms step, ~3% of 8 ms.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_engine_matches_the_replay() {
    let cfg = SimConfig {
        slowdown: 4.0,
        ..SimConfig::preset("fast").unwrap()
    };
    let (concurrency, per_client, max_tokens) = (4, 3, 100u32);
    let expected = super::simulated_closed_loop_throughput(
        &cfg,
        concurrency,
        concurrency * per_client,
        100,
        max_tokens,
    );
    let (cluster, url) = start(&cfg).await;
    let client = reqwest::Client::new();
    let prompt = vec!["w"; 100].join(" ");
    let t0 = Instant::now();
    let tasks: Vec<_> = (0..concurrency)
        .map(|_| {
            let (client, url, prompt) = (client.clone(), url.clone(), prompt.clone());
            tokio::spawn(async move {
                let mut tokens = 0;
                for _ in 0..per_client {
                    let body =
                        json!({"prompt": prompt, "max_tokens": max_tokens, "ignore_eos": true});
                    let v: Value = client
                        .post(format!("{url}/v1/completions"))
                        .json(&body)
                        .send()
                        .await
                        .unwrap()
                        .json()
                        .await
                        .unwrap();
                    tokens += v["usage"]["completion_tokens"].as_u64().unwrap();
                }
                tokens
            })
        })
        .collect();
    let mut tokens = 0;
    for t in tasks {
        tokens += t.await.unwrap();
    }
    let measured = tokens as f64 / t0.elapsed().as_secs_f64();
    assert_eq!(tokens, 1200);
    let err = measured / expected - 1.0;
    println!(
        "HTTP {measured:.0} tok/s, replay {expected:.0} tok/s ({:+.1}%)",
        err * 100.0
    );
    assert!(
        err.abs() < 0.05,
        "HTTP {measured:.0} tok/s vs replay {expected:.0} tok/s"
    );
    cluster.shutdown().await;
}

#[tokio::test]
async fn abandoned_non_streaming_request_frees_the_slot() {
    let (cluster, url) = start(&SimConfig::preset("fast").unwrap()).await;
    let body = json!({"prompt": "x", "max_tokens": 1_000_000, "ignore_eos": true});
    let r = reqwest::Client::new()
        .post(format!("{url}/v1/completions"))
        .timeout(Duration::from_millis(200))
        .json(&body)
        .send()
        .await;
    assert!(r.is_err(), "the request should have timed out");
    wait_until_no_request_runs(&url).await;
    cluster.shutdown().await;
}

#[tokio::test]
async fn shutdown_ends_open_streams() {
    let (cluster, url) = start(&SimConfig::preset("fast").unwrap()).await;
    let mut resp = open_endless_stream(&url).await;
    let t0 = Instant::now();
    cluster.shutdown().await;
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    let drained = tokio::time::timeout(Duration::from_secs(5), async {
        while let Ok(Some(_)) = resp.chunk().await {}
    })
    .await;
    assert!(drained.is_ok(), "stream still open after shutdown");
}

/// Every replica of one start reports the factor the start drew, and the factor is applied:
/// a stream of n fixed-cadence steps cannot end sooner than n steps times the factor (the
/// engine's clock only ever waits, so this lower bound does not depend on machine load).
#[tokio::test]
async fn session_factor_is_reported_and_slows_every_replica() {
    let seed = (0..)
        .find(|&s| super::draw::session_factor(s, 1.0) > 2.0)
        .unwrap();
    let cfg = SimConfig {
        token_delay_ms: Some(10.0),
        session_jitter: 1.0,
        seed,
        ..SimConfig::preset("fixed").unwrap()
    };
    let factor = cfg.session_factor();
    let c = SimCluster::start(&cfg, LOCAL, 0, 2).await.unwrap();
    assert_eq!(c.session_factor(), factor);
    let urls = c.base_urls();
    for url in &urls {
        assert_eq!(metric(url, "throughline_sim_session_factor").await, factor);
    }
    let body = json!({"prompt": "x", "max_tokens": 20, "ignore_eos": true});
    let t0 = Instant::now();
    let v: Value = reqwest::Client::new()
        .post(format!("{}/v1/completions", urls[1]))
        .json(&body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["usage"]["completion_tokens"], 20);
    let took = t0.elapsed().as_secs_f64();
    let floor = 20.0 * 0.010 * factor;
    assert!(
        took >= floor * 0.99,
        "{took} s < {floor} s: factor {factor} not applied"
    );
    c.shutdown().await;

    let steady = SimCluster::start(&SimConfig::preset("instant").unwrap(), LOCAL, 0, 1)
        .await
        .unwrap();
    assert_eq!(steady.session_factor(), 1.0);
    let url = steady.base_urls().remove(0);
    assert_eq!(metric(&url, "throughline_sim_session_factor").await, 1.0);
    steady.shutdown().await;
}
