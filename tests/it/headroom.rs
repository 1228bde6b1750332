//! A deliberately starved client: one runtime thread, hogged by a task that blocks it, so
//! every timestamp the client takes is late. The trials must say "client-bound", and
//! `baseline bless` and the gate must act on it, end to end.

use std::time::Duration;

use crate::common::*;
use throughline::load::{run_bench, BenchSetup};
use throughline::profile::Profile;
use throughline::record::trial_flags::FlagKind;

const BODY: &str = "[workload]\ninput_tokens = 16\nmax_tokens = 16\nignore_eos = true\n\
                    [sweep]\nconcurrency = [2]\nrequests_per_level = 12\ntrials = 2\n\
                    request_timeout = \"20s\"\n[gate]\nmin_trials = 2\n";

#[test]
fn a_starved_client_marks_its_trials_client_bound_and_cannot_be_blessed() {
    // In a process of its own: the library run installs the signal handlers for good.
    in_own_process(
        module_path!(),
        "a_starved_client_marks_its_trials_client_bound_and_cannot_be_blessed",
        starved_client,
    );
}

fn starved_client() {
    let sim = Sim::start(1, &["--preset", "fast"]);
    let dir = tempfile::tempdir().unwrap();
    let profile_path = write_profile(dir.path(), "starved", &sim.urls, BODY);
    let out_dir = dir.path().join("out");
    let setup = BenchSetup {
        profile: Profile::load(&profile_path).unwrap(),
        environment: Default::default(),
        out_dir: out_dir.clone(),
        show_progress: false,
        base_endpoints: Vec::new(),
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let outcome = rt.block_on(async {
        let hog = tokio::spawn(async {
            loop {
                // Blocks the runtime's only thread, as a CPU-bound client would.
                std::thread::sleep(Duration::from_millis(15));
                tokio::task::yield_now().await;
            }
        });
        let outcome = run_bench(setup, |_, _| {}).await.unwrap();
        hog.abort();
        outcome
    });
    for t in &outcome.result.levels[0].trials {
        let h = t.client.as_ref().expect("headroom measured");
        assert!(h.client_bound && h.lag_p50_ms > 3.0, "{h:?}");
        assert!(
            t.flags.iter().any(|f| f.kind == FlagKind::ClientBound),
            "{:?}",
            t.flags
        );
        assert!(t.is_accounted());
    }
    assert!(
        outcome
            .result
            .warnings
            .iter()
            .any(|w| w.contains("client-bound")),
        "{:?}",
        outcome.result.warnings
    );

    // Bless refuses the run, saying what to do.
    let results = out_dir.join("results.json");
    let baseline = dir.path().join("starved.toml");
    let out = bless(&results, &baseline, &["--commit", "test"]);
    assert_eq!(code(&out), 2, "{}", text(&out));
    for said in [
        "client-bound",
        "fewer concurrent streams",
        "--client-threads",
        "--allow-client-bound",
    ] {
        assert!(text(&out).contains(said), "{said}: {}", text(&out));
    }
    assert!(!baseline.exists());
    // With the flag it blesses them, and says so.
    let allowed = dir.path().join("allowed.toml");
    let out = bless(
        &results,
        &allowed,
        &["--commit", "test", "--allow-client-bound"],
    );
    assert_eq!(code(&out), 0, "{}", text(&out));
    assert!(
        text(&out).contains("client-bound blessed"),
        "{}",
        text(&out)
    );

    // The same figures without the flags bless; the gate holds the candidate's client-bound
    // trials to the same rule: refused with the same advice, gated with the flag.
    let clean_path = without_client_flags(&results);
    let out = bless(&clean_path, &baseline, &["--commit", "test"]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    let gate = |extra: &[&str]| {
        let mut args = vec![
            "gate",
            "--results",
            results.to_str().unwrap(),
            "--baseline",
            baseline.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        run(&args)
    };
    let out = gate(&[]);
    assert_eq!(code(&out), 3, "{}", text(&out));
    for said in [
        "client-bound",
        "fewer concurrent streams",
        "--allow-client-bound",
    ] {
        assert!(text(&out).contains(said), "{said}: {}", text(&out));
    }
    let out = gate(&["--allow-client-bound"]);
    // The same figures as the baseline's one session: inconclusive, exit 0 (a warning is
    // not a failure).
    assert_eq!(code(&out), 0, "{}", text(&out));
    assert!(text(&out).contains("client-bound"), "{}", text(&out));
}
