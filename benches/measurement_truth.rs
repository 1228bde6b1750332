//! Measurement truth: does the client measure what the server did?
//!
//! Runs the simulator with a fixed decode cadence (every step exactly `CADENCE_MS`, whatever
//! the batch) in its own runtime, drives it with the real load generator, and compares:
//! - the median per-token ITL with the configured cadence (target: within 0.5 ms);
//! - the client's aggregate output tok/s with the rate of the simulator's own
//!   `throughline_sim_generation_tokens_total` counter (target: within 2%). The server's rate
//!   is measured independently of the client's clock: a second thread scrapes `/metrics` every
//!   5 ms, and the server's window runs from the first scrape that saw tokens move to the first
//!   scrape that saw the final count (each end known to +-2.5 ms).
//!
//! Run: `cargo bench --bench measurement_truth` (prints a table; exits 1 if a target is missed).

use std::net::{IpAddr, Ipv4Addr};
use std::time::Instant;

use throughline::commands::flags::EnvironmentArgs;
use throughline::load::{run_bench, BenchSetup};
use throughline::profile::Profile;
use throughline::sim::{SimCluster, SimConfig};

const CADENCE_MS: f64 = 20.0;

fn main() {
    // The simulator runs on its own runtime thread, so the client's runtime is the client's.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(async {
            let mut config = SimConfig::preset("fixed").unwrap();
            config.token_delay_ms = Some(CADENCE_MS);
            let cluster = SimCluster::start(&config, IpAddr::V4(Ipv4Addr::LOCALHOST), 0, 1)
                .await
                .unwrap();
            tx.send(cluster.base_urls()[0].clone()).unwrap();
            std::future::pending::<()>().await;
        });
    });
    let url = rx.recv().unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let counter_url = url.clone();
    let counter = move || -> f64 { read_counter(&counter_url) };

    let _ = &counter;
    println!("fixed cadence {CADENCE_MS} ms, 64-token outputs, one trial per row\n");
    println!(
        "{:>6} | {:>12} | {:>12} | {:>8} | {:>12} | {:>10}",
        "C", "client tok/s", "server tok/s", "diff %", "ITL p50 ms", "error ms"
    );
    let mut ok = true;
    for concurrency in [1u32, 16, 64, 256] {
        let text = format!(
            "name = \"truth\"\n[target]\nendpoints = [\"{url}\"]\n[workload]\ninput_tokens = 16\nmax_tokens = 64\nignore_eos = true\n\
             [sweep]\nconcurrency = [{concurrency}]\nrequests_per_level = {}\ntrials = 1\nrequest_timeout = \"60s\"\n",
            concurrency * 4
        );
        let profile = Profile::parse(&text).unwrap();
        let out = tempfile::tempdir().unwrap();
        let setup = BenchSetup {
            profile,
            environment: EnvironmentArgs::default().to_environment(),
            out_dir: out.path().to_path_buf(),
            show_progress: false,
            base_endpoints: Vec::new(),
        };
        let before = counter();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let scraper = {
            let (stop, url) = (stop.clone(), url.clone());
            std::thread::spawn(move || {
                let mut samples = Vec::new();
                let start = Instant::now();
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    samples.push((start.elapsed().as_secs_f64(), read_counter(&url)));
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
                samples
            })
        };
        let t0 = Instant::now();
        let outcome = rt.block_on(run_bench(setup, |_, _| {})).unwrap();
        let wall = t0.elapsed().as_secs_f64();
        std::thread::sleep(std::time::Duration::from_millis(50));
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let samples = scraper.join().unwrap();
        let after = counter();
        let trial = &outcome.result.levels[0].trials[0];
        let first_move = samples.iter().find(|s| s.1 > before).unwrap().0;
        let last_move = samples.iter().find(|s| s.1 >= after).unwrap().0;
        let server_rate = (after - before) / (last_move - first_move);
        let client_rate = trial.output_tok_per_s;
        let diff = (client_rate / server_rate - 1.0) * 100.0;
        let itl = trial.itl_ms.as_ref().unwrap().p50;
        let err = itl - CADENCE_MS;
        println!(
            "{concurrency:>6} | {client_rate:>12.1} | {server_rate:>12.1} | {diff:>8.3} | {itl:>12.3} | {err:>10.3}   (run wall {wall:.1}s)"
        );
        ok &= diff.abs() <= 2.0 && err.abs() <= 0.5;
    }
    println!(
        "\ntargets: |diff| <= 2%, |ITL p50 - cadence| <= 0.5 ms: {}",
        if ok { "met" } else { "MISSED" }
    );
    if !ok {
        std::process::exit(1);
    }
}

fn read_counter(url: &str) -> f64 {
    let text = reqwest::blocking::get(format!("{url}/metrics"))
        .unwrap()
        .text()
        .unwrap();
    text.lines()
        .find(|l| l.starts_with("throughline_sim_generation_tokens_total "))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap()
}
