//! The gate stays honest when runs differ from day to day (issue "An honest gate"), end to end
//! on the simulator with session jitter: every run starts its servers afresh, and each start
//! draws a speed factor (sd 5%) from its seed, as a restarted real server would.
//!
//! - Relative mode (base and head measured in one job, trials interleaved): 20 runs of an
//!   unchanged server never fail, and 20 runs of a head made 10% slower fail at least 19
//!   times. The machine's session factor is shared by both arms of a run (both servers start
//!   with the run's seed), which is what relative mode cancels.
//! - History mode: a baseline of two sessions (two starts) cannot tell a third unchanged start
//!   from a regression, and says "inconclusive" instead of failing it.

use std::net::{IpAddr, Ipv4Addr};

use throughline::gate::baseline::{bless, BlessMode};
use throughline::gate::{evaluate, evaluate_relative, Outcome};
use throughline::load::{run_bench, BenchSetup};
use throughline::profile::{GateSettings, Profile};
use throughline::record::RunResult;
use throughline::sim::{SimCluster, SimConfig};

const RUNS: u64 = 20;
const JITTER: f64 = 0.05;

/// One level, 6 trials a side of 8 short requests at concurrency 4 (~0.05 s a trial at 2 ms
/// steps, ~0.1 s at 4 ms).
const PROFILE: &str = "name = \"honest\"\n[target]\nendpoints = [\"http://127.0.0.1:1\"]\n\
    [workload]\ninput_tokens = 8\nmax_tokens = 12\nignore_eos = true\n\
    [sweep]\nconcurrency = [4]\nrequests_per_level = 8\ntrials = 6\n\
    request_timeout = \"20s\"\n[gate]\nmin_trials = 5\n";

/// The relative runs' decode step. These tests run alone, in a process of their own
/// (`in_turn`); there 2 ms steps caught 40 of 40 slowed heads and passed 39 of 40 unchanged
/// ones, the other inconclusive, in half the time of 4 ms steps.
const RELATIVE_STEP_MS: f64 = 2.0;
/// The history test's decode step. The session factor scales the steps, not the request's
/// fixed costs (HTTP, the client): at 2 ms steps those diluted it until a third start passed
/// against two sessions now and then, which is not what this test is about.
const HISTORY_STEP_MS: f64 = 4.0;

/// A simulator start: the fixed-cadence engine, `step_ms` a decode step (on deadlines counted
/// from the first while it is busy) slowed by `slowdown`, its session factor drawn from `seed`.
fn config(seed: u64, slowdown: f64, step_ms: f64) -> SimConfig {
    let mut c = SimConfig::preset("fixed").unwrap();
    c.token_delay_ms = Some(step_ms);
    c.session_jitter = JITTER;
    c.seed = seed;
    c.slowdown = slowdown;
    c
}

/// Measures `head` (and `base`, when given, in the same job) with the profile above.
async fn measure(head: &SimCluster, base: Option<&SimCluster>) -> RunResult {
    let dir = tempfile::tempdir().unwrap();
    let mut profile = Profile::parse(PROFILE).unwrap();
    profile.target.endpoints = head.base_urls();
    let setup = BenchSetup {
        profile,
        environment: Default::default(),
        out_dir: dir.path().to_path_buf(),
        show_progress: false,
        base_endpoints: base.map(|b| b.base_urls()).unwrap_or_default(),
    };
    let outcome = run_bench(setup, |_, _| {}).await.unwrap();
    assert!(outcome.problems.is_empty(), "{:?}", outcome.problems);
    outcome.result
}

async fn start(seed: u64, slowdown: f64, step_ms: f64) -> SimCluster {
    SimCluster::start(
        &config(seed, slowdown, step_ms),
        IpAddr::V4(Ipv4Addr::LOCALHOST),
        0,
        1,
    )
    .await
    .unwrap()
}

/// A relative run on fresh servers started with `seed`; the head slowed by `slowdown`.
async fn relative_run(seed: u64, slowdown: f64) -> Outcome {
    let base = start(seed, 1.0, RELATIVE_STEP_MS).await;
    let head = start(seed, slowdown, RELATIVE_STEP_MS).await;
    let result = measure(&head, Some(&base)).await;
    head.shutdown().await;
    base.shutdown().await;
    // Trials of a busy test machine can be flagged client-bound; the gate only warns then.
    let verdict = evaluate_relative(&result, &GateSettings::default()).unwrap();
    verdict.outcome
}

/// Runs `test` (the test function `name` of this module) on a runtime of its own, in a
/// process of its own that runs only it, while holding the machine alone (no other timed test
/// beside it either: the rates asserted here were calibrated so). These tests count false
/// failures over many runs of 2 to 4 ms steps, measured in-process, and in the test binary
/// the tests that start no process (which take no lock) run beside them, in the same memory
/// and allocator.
fn in_turn(name: &str, test: impl std::future::Future<Output = ()>) {
    // Held by the test binary that starts the child, not again in the child.
    let _turn = match crate::common::is_own_process() {
        true => None,
        false => Some(crate::common::timing_lock_alone()),
    };
    crate::common::in_own_process(module_path!(), name, || {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap()
            .block_on(test)
    });
}

#[test]
fn relative_mode_passes_unchanged_servers_and_catches_a_ten_percent_slowdown() {
    in_turn(
        "relative_mode_passes_unchanged_servers_and_catches_a_ten_percent_slowdown",
        relative_mode_passes_unchanged_and_catches_a_slowdown(),
    );
}

async fn relative_mode_passes_unchanged_and_catches_a_slowdown() {
    let mut same_failed = 0;
    let mut same_passed = 0;
    let mut slow_caught = 0;
    let mut outcomes = Vec::new();
    for seed in 1..=RUNS {
        let same = relative_run(seed, 1.0).await;
        let slow = relative_run(1000 + seed, 1.10).await;
        same_failed += u32::from(same == Outcome::Regression);
        same_passed += u32::from(same == Outcome::Pass);
        slow_caught += u32::from(slow == Outcome::Regression);
        outcomes.push((same, slow));
    }
    eprintln!(
        "relative mode over {RUNS} fresh starts each: A/A failed {same_failed}, 10% slower \
         caught {slow_caught}; outcomes {outcomes:?}"
    );
    // A statistical check of the gate's false-alarm rate, not a zero-tolerance one: at the
    // design's rate (at most alpha = 1% per run), 2 or more false failures in 20 runs happen
    // with probability 1.7%; at a rate of 10% they happen with probability 61%. Seen on this
    // 2-core machine at load average 10 (two builds beside the suite): 1 of 20.
    assert!(
        same_failed <= 1,
        "A/A runs that failed: {same_failed}: {outcomes:?}"
    );
    // Not failing is not enough: an unchanged server that is mostly "cannot tell" would mean
    // the trials got too noisy to decide (at 2 ms steps 19 and 20 of 20 passed in two runs).
    assert!(
        same_passed >= 15,
        "A/A runs that passed: {same_passed} of {RUNS}: {outcomes:?}"
    );
    assert!(
        slow_caught >= 19,
        "10% slower caught {slow_caught} of 20: {outcomes:?}"
    );
}

#[test]
fn history_of_two_sessions_says_inconclusive_for_an_unchanged_server() {
    in_turn(
        "history_of_two_sessions_says_inconclusive_for_an_unchanged_server",
        history_of_two_sessions_is_inconclusive(),
    );
}

async fn history_of_two_sessions_is_inconclusive() {
    let mut runs = Vec::new();
    for seed in [11, 12] {
        let sim = start(seed, 1.0, HISTORY_STEP_MS).await;
        runs.push(measure(&sim, None).await);
        sim.shutdown().await;
    }
    // The client, its simulators and this test binary share one process and runtime here, so
    // the client's self-check (its process CPU, its runtime's lag over 0.1 s trials) measures
    // them too and once refused a session as "saturated": taken knowingly, as a user would
    // with --allow-client-bound. The client rule has tests of its own (headroom, gate_cli).
    let allow_client_bound = true;
    let baseline = bless(
        None,
        &runs,
        BlessMode::Replace,
        "two",
        None,
        None,
        allow_client_bound,
    )
    .unwrap();
    assert_eq!(baseline.sessions.len(), 2);
    // Starts whose factor differs from both baseline sessions': each alone would look like a
    // regression or an improvement of a few percent to a test that ignored sessions.
    for seed in [13, 14, 15] {
        let sim = start(seed, 1.0, HISTORY_STEP_MS).await;
        let candidate = measure(&sim, None).await;
        sim.shutdown().await;
        let verdict = evaluate(&baseline, &candidate, &GateSettings::default()).unwrap();
        assert_ne!(verdict.outcome, Outcome::Regression, "{verdict:#?}");
        assert_eq!(verdict.outcome, Outcome::Inconclusive, "{verdict:#?}");
        let test = verdict.levels[0].test.as_ref().unwrap();
        assert_eq!(test.sigma_b_df, Some(1.0), "k - 1 = 1 degree of freedom");
    }
}
