use super::*;
use crate::exit::{exit_for, Exit};
use crate::gate::baseline::{bless, BlessMode};
use crate::record::{fake, BaseArm, LevelResult};
use crate::stats::Percentiles;

const BASE: [f64; 5] = [100.0, 101.0, 99.5, 100.4, 99.8];
const BASE8: [f64; 5] = [700.0, 705.0, 698.0, 702.0, 699.0];

/// A baseline of `sessions` sessions, each shifted by its own few tenths of a percent.
fn baseline(sessions: usize) -> Baseline {
    let runs: Vec<RunResult> = (0..sessions)
        .map(|s| {
            let k = 1.0 + 0.002 * (s as f64 - (sessions as f64 - 1.0) / 2.0);
            let one: Vec<f64> = BASE.iter().map(|v| v * k).collect();
            let eight: Vec<f64> = BASE8.iter().map(|v| v * k).collect();
            fake::run(&[(1, &one), (8, &eight)])
        })
        .collect();
    bless(None, &runs, BlessMode::Replace, "b", None, None, false).unwrap()
}

fn scaled(values: &[f64], k: f64) -> Vec<f64> {
    values.iter().map(|v| v * k).collect()
}

/// A relative run: the base arm at BASE/BASE8, the head scaled by `k1` at C=1, `k8` at C=8.
fn relative(k1: f64, k8: f64) -> RunResult {
    let base = fake::run(&[(1, &BASE), (8, &BASE8)]);
    let mut head = fake::run(&[(1, &scaled(&BASE, k1)), (8, &scaled(&BASE8, k8))]);
    head.base = Some(BaseArm {
        endpoints: 1,
        model: None,
        engine: None,
        engine_version: None,
        levels: base.levels,
    });
    head.analyse();
    head
}

#[test]
fn same_speed_against_a_history_of_sessions_passes() {
    let cand = fake::run(&[
        (1, &[100.2, 99.7, 100.9, 100.1, 99.6]),
        (8, &[701.0, 699.0, 703.0, 700.0, 698.5]),
    ]);
    let v = evaluate(&baseline(6), &cand, &GateSettings::default()).unwrap();
    assert_eq!(v.outcome, Outcome::Pass, "{v:#?}");
    assert_eq!(v.design, Some(Design::History));
    assert!(v.levels.iter().all(|l| l.status == LevelStatus::Pass));
    let t = v.levels[0].test.as_ref().unwrap();
    assert_eq!(
        t.sigma_b_df,
        Some(5.0),
        "k - 1 degrees of freedom for sigma_b"
    );
}

#[test]
fn ten_percent_drop_fails_only_that_level() {
    let cand = fake::run(&[
        (1, &[100.2, 99.7, 100.9, 100.1, 99.6]),
        (8, &[630.0, 632.0, 628.0, 631.0, 629.0]),
    ]);
    let v = evaluate(&baseline(6), &cand, &GateSettings::default()).unwrap();
    assert_eq!(v.outcome, Outcome::Regression, "{v:#?}");
    assert_eq!(v.exit(), Exit::Regression);
    assert_eq!(v.levels[0].status, LevelStatus::Pass);
    assert_eq!(v.levels[1].status, LevelStatus::Regression);
    let r = v.levels[1].ratio.unwrap();
    assert!((r - 0.9).abs() < 0.005, "{r}");
    assert!(v.levels[1].ci_low.unwrap() < r && r < v.levels[1].ci_high.unwrap());
}

#[test]
fn one_session_cannot_tell_a_ten_percent_drop_but_the_guard_fails_a_gross_one() {
    let cand = fake::run(&[(1, &scaled(&BASE, 0.9)), (8, &BASE8)]);
    let v = evaluate(&baseline(1), &cand, &GateSettings::default()).unwrap();
    assert_eq!(v.outcome, Outcome::Inconclusive, "{v:#?}");
    assert_eq!(
        v.exit(),
        Exit::Pass,
        "inconclusive passes loudly by default"
    );
    assert!(v.warnings.iter().any(|w| w.contains("one session")));
    assert!(v.warnings.iter().any(|w| w.starts_with("inconclusive")));
    // It says how many sessions it would take, from the noise it saw, and what to do now.
    let need = v
        .history_need
        .as_ref()
        .expect("a one-session history is short");
    assert_eq!(need.sessions, 1);
    let n = need.needed.expect("a quiet server needs a few sessions");
    assert!((3..=10).contains(&n), "{need:?}");
    let line = &v.notices()[0];
    assert!(
        line.contains(&format!("about {n} sessions ({} more", n - 1)),
        "{line}"
    );
    assert!(line.contains("relative mode"), "{line}");
    // A long history of the same noise needs nothing more.
    let long = evaluate(&baseline(12), &cand, &GateSettings::default()).unwrap();
    assert_eq!(long.history_need, None, "{long:#?}");
    assert_eq!(v.levels[0].min_detectable_drop, None);
    let strict = GateSettings {
        fail_on_inconclusive: true,
        ..GateSettings::default()
    };
    assert_eq!(v.outcome.exit_with(&strict), Exit::NotComparable);

    let gross = fake::run(&[(1, &scaled(&BASE, 0.6)), (8, &BASE8)]);
    let v = evaluate(&baseline(1), &gross, &GateSettings::default()).unwrap();
    assert_eq!(v.outcome, Outcome::Regression, "{v:#?}");
    assert!(v.levels[0].note.as_deref().unwrap().contains("guard"));
}

/// The client's flagged trials, where the client could not have moved the verdict, are
/// notes (information: never an annotation), not warnings: the warnings keep the decision's
/// own (what a one-session history cannot tell, a fingerprint overridden) however many
/// trials the client flagged (issue 50 item 5).
#[test]
fn the_clients_notes_are_notes_and_the_decisions_warnings_stay() {
    let mut cand = fake::run(&[(1, &BASE), (8, &BASE8)]);
    for level in &mut cand.levels {
        for t in &mut level.trials {
            t.flags.push(crate::record::trial_flags::TrialFlag::new(
                crate::record::trial_flags::FlagKind::ClientBound,
                "client-bound: requests were held in the client for 1.2% of their time",
            ));
        }
    }
    let v = evaluate(&baseline(1), &cand, &GateSettings::default()).unwrap();
    client_notes_apart(&v, "one session", "this run: ");

    // A relative verdict alike (gate -r without a baseline, bisect's steps).
    let mut run = relative(1.0, 1.0);
    for t in run.levels.iter_mut().flat_map(|l| &mut l.trials) {
        t.flags.push(crate::record::trial_flags::TrialFlag::new(
            crate::record::trial_flags::FlagKind::ClientBound,
            "client-bound: requests were held in the client for 1.2% of their time",
        ));
    }
    run.environment.overridden.push(crate::record::Override {
        field: "gpu_model".into(),
        typed: "A".into(),
        detected: "B".into(),
    });
    let v = evaluate_relative(&run, &GateSettings::default()).unwrap();
    client_notes_apart(&v, "FINGERPRINT OVERRIDDEN", "head: ");
}

/// The warning holding `decision` stays a warning; the client's notes (each starting with
/// `client`) are among the notes and none is a warning.
fn client_notes_apart(v: &Verdict, decision: &str, client: &str) {
    assert!(
        v.warnings.iter().any(|w| w.contains(decision)),
        "{:#?}",
        v.warnings
    );
    assert!(
        v.notes.iter().any(|n| n.starts_with(client)),
        "{:#?}",
        v.notes
    );
    assert!(
        !v.warnings.iter().any(|w| w.starts_with(client)),
        "{:#?}",
        v.warnings
    );
}

#[test]
fn the_between_session_spread_widens_the_bound() {
    // Sessions 4% apart: a 5% drop is within what sessions differ by, so it cannot fail;
    // with the sessions 0.2% apart the same drop does.
    let spread: Vec<RunResult> = [0.96, 1.0, 1.04, 0.98]
        .iter()
        .map(|k| fake::run(&[(1, &scaled(&BASE, *k))]))
        .collect();
    let wide = bless(None, &spread, BlessMode::Replace, "w", None, None, false).unwrap();
    let cand = fake::run(&[(1, &scaled(&BASE, 0.95))]);
    let v = evaluate(&wide, &cand, &GateSettings::default()).unwrap();
    assert_ne!(v.outcome, Outcome::Regression, "{v:#?}");
    let t = v.levels[0].test.as_ref().unwrap();
    assert!(t.sigma_b.unwrap() > 0.02, "{t:?}");
    let tight = fake::run(&[(1, &scaled(&BASE, 0.95)), (8, &BASE8)]);
    let v = evaluate(&baseline(6), &tight, &GateSettings::default()).unwrap();
    assert_eq!(v.levels[0].status, LevelStatus::Regression, "{v:#?}");
}

#[test]
fn too_few_trials_cannot_fail() {
    let cand = fake::run(&[(1, &[80.0, 80.5, 79.5]), (8, &[701.0, 699.0, 703.0])]);
    let v = evaluate(&baseline(6), &cand, &GateSettings::default()).unwrap();
    assert_eq!(v.levels[0].status, LevelStatus::InsufficientTrials);
    assert_eq!(v.outcome, Outcome::NotComparable);
}

#[test]
fn different_profile_or_gpu_is_not_comparable() {
    let mut cand = fake::run(&[(1, &BASE), (8, &BASE)]);
    cand.profile_hash = "sha256:other".into();
    let err = evaluate(&baseline(2), &cand, &GateSettings::default()).unwrap_err();
    assert_eq!(exit_for(&err), Exit::NotComparable);
    let mut cand = fake::run(&[(1, &BASE), (8, &BASE)]);
    cand.environment.gpu_model = Some("OtherGPU".into());
    let err = evaluate(&baseline(2), &cand, &GateSettings::default()).unwrap_err();
    assert_eq!(exit_for(&err), Exit::NotComparable);
    assert!(format!("{err:#}").contains("OtherGPU"));
}

#[test]
fn failed_candidate_level_is_an_error_not_a_pass() {
    let mut cand = fake::run(&[(1, &BASE), (8, &BASE)]);
    cand.levels[1].trials[0].succeeded = 0;
    cand.levels[1].trials[0]
        .failed
        .insert(crate::record::ErrorClass::Http, 10);
    let err = evaluate(&baseline(2), &cand, &GateSettings::default()).unwrap_err();
    assert_eq!(exit_for(&err), Exit::Failure);
}

#[test]
fn relative_runs_compare_their_two_arms() {
    let same = evaluate_relative(&relative(1.0, 1.0), &GateSettings::default()).unwrap();
    assert_eq!(same.design, Some(Design::Relative));
    assert_ne!(same.outcome, Outcome::Regression, "{same:#?}");
    let slower = evaluate_relative(&relative(1.0, 0.9), &GateSettings::default()).unwrap();
    assert_eq!(slower.outcome, Outcome::Regression, "{slower:#?}");
    assert_eq!(slower.levels[1].status, LevelStatus::Regression);
    // A one-server run has nothing to compare on its own.
    assert!(evaluate_relative(&fake::run(&[(1, &BASE)]), &GateSettings::default()).is_err());
    // With a baseline given, a relative run is still gated arm against arm.
    let v = evaluate(&baseline(1), &relative(1.0, 0.9), &GateSettings::default()).unwrap();
    assert_eq!(v.design, Some(Design::Relative));
    assert_eq!(v.outcome, Outcome::Regression);
}

/// Relative mode gates an engine upgrade: the arms' versions differ from each other and the
/// head's from the baseline's, the verdict says so; history mode still refuses (exit 3).
#[test]
fn relative_mode_gates_an_engine_upgrade_and_history_refuses_it() {
    let mut b = baseline(1);
    b.environment.engine = Some("vllm".into());
    b.environment.engine_version = Some("0.1.0".into());
    let mut run = relative(1.0, 1.0);
    run.environment.engine = Some("vllm".into());
    run.environment.engine_version = Some("0.2.0".into());
    let base = run.base.as_mut().unwrap();
    base.engine = Some("vllm".into());
    base.engine_version = Some("0.1.0".into());
    let v = evaluate(&b, &run, &GateSettings::default()).unwrap();
    assert_eq!(v.design, Some(Design::Relative));
    let arms = v.arms.as_ref().unwrap();
    assert_eq!(arms.head_version.as_deref(), Some("0.2.0"));
    assert_eq!(arms.base_version.as_deref(), Some("0.1.0"));
    assert!(
        v.notices()
            .iter()
            .any(|l| l.contains("head: vllm 0.2.0, base: 0.1.0")),
        "{:?}",
        v.notices()
    );
    // The hardware still must match.
    let mut other_gpu = run.clone();
    other_gpu.environment.gpu_model = Some("OtherGPU".into());
    let err = evaluate(&b, &other_gpu, &GateSettings::default()).unwrap_err();
    assert_eq!(exit_for(&err), Exit::NotComparable);
    // Same versions: nothing to say.
    let mut same = run.clone();
    same.environment.engine_version = Some("0.1.0".into());
    let v = evaluate(&b, &same, &GateSettings::default()).unwrap();
    assert!(v.notices().is_empty(), "{:?}", v.notices());
    // History mode: the baseline vouches for the engine version.
    let mut history = run;
    history.base = None;
    let err = evaluate(&b, &history, &GateSettings::default()).unwrap_err();
    assert_eq!(exit_for(&err), Exit::NotComparable);
    assert!(format!("{err:#}").contains("engine_version"), "{err:#}");
}

/// Holm decides, not the raw p: a drop whose raw p passes the main alpha alone fails one
/// level, and the same drop among five gated levels does not.
#[test]
fn holm_decides_across_levels() {
    let settings = GateSettings::default();
    let main_alpha = settings.alpha * 0.8;
    let noise = [1.0, 1.03, 0.98, 1.02, 0.97, 1.01];
    let base: Vec<f64> = noise.iter().map(|n| 100.0 * n).collect();
    let mut found = None;
    for step in 30..300 {
        let k = 1.0 - step as f64 * 0.001;
        let head: Vec<f64> = noise.iter().rev().map(|n| 100.0 * n * k).collect();
        let mut run = fake::run(&[(1, &head)]);
        run.base = Some(BaseArm {
            endpoints: 1,
            model: None,
            engine: None,
            engine_version: None,
            levels: fake::run(&[(1, &base)]).levels,
        });
        let v = evaluate_relative(&run, &settings).unwrap();
        let p = v.levels[0].p_adjusted.unwrap();
        if p < main_alpha && 5.0 * p >= main_alpha {
            assert_eq!(v.levels[0].status, LevelStatus::Regression, "{v:#?}");
            found = Some(head);
            break;
        }
    }
    let head = found.expect("a drop with p between alpha/5 and alpha");
    let levels: Vec<(u32, Vec<f64>)> = (1..=5)
        .map(|c| (c, if c == 1 { head.clone() } else { base.clone() }))
        .collect();
    let as_refs: Vec<(u32, &[f64])> = levels.iter().map(|(c, v)| (*c, v.as_slice())).collect();
    let mut run = fake::run(&as_refs);
    let base_levels: Vec<(u32, &[f64])> = (1..=5).map(|c| (c, base.as_slice())).collect();
    run.base = Some(BaseArm {
        endpoints: 1,
        model: None,
        engine: None,
        engine_version: None,
        levels: fake::run(&base_levels).levels,
    });
    let v = evaluate_relative(&run, &settings).unwrap();
    let l = &v.levels[0];
    assert!(l.p_slower.unwrap() < main_alpha, "{l:?}");
    assert!(l.p_adjusted.unwrap() >= main_alpha, "{l:?}");
    assert_ne!(l.status, LevelStatus::Regression, "{v:#?}");
}

#[test]
fn a_latency_gate_fails_a_rise_in_ttft_p99() {
    let with_ttft = |run: &mut RunResult, ms: f64| {
        for l in run.levels.iter_mut() {
            for (i, t) in l.trials.iter_mut().enumerate() {
                let v = ms * (1.0 + 0.01 * i as f64);
                t.ttft_ms = Percentiles::from_values(&mut vec![v / 2.0, v]);
            }
        }
    };
    let settings = GateSettings {
        latency: crate::profile::LatencyGates {
            ttft_p99: Some(0.10),
            ..Default::default()
        },
        ..GateSettings::default()
    };
    let mut run = relative(1.0, 1.0);
    with_ttft(&mut run, 140.0);
    let mut base = run.base.take().unwrap();
    let mut base_run = fake::run(&[(1, &BASE), (8, &BASE8)]);
    with_ttft(&mut base_run, 100.0);
    base.levels = base_run.levels;
    run.base = Some(base);
    let v = evaluate_relative(&run, &settings).unwrap();
    let ttft: Vec<&LevelVerdict> = v
        .levels
        .iter()
        .filter(|l| l.metric == TrialMetric::TtftP99)
        .collect();
    assert_eq!(ttft.len(), 2);
    assert!(
        ttft.iter().all(|l| l.status == LevelStatus::Regression),
        "{v:#?}"
    );
    assert!(
        (ttft[0].ratio.unwrap() - 1.4).abs() < 0.01,
        "{:?}",
        ttft[0].ratio
    );
    assert_eq!(v.outcome, Outcome::Regression);
    // Throughput itself did not move.
    assert!(v
        .levels
        .iter()
        .filter(|l| l.metric.is_throughput())
        .all(|l| l.status != LevelStatus::Regression));
}

#[test]
fn a_drifting_server_is_reported() {
    let mut run = relative(1.0, 1.0);
    let base = &mut run.base.as_mut().unwrap().levels;
    let mut all: Vec<&mut LevelResult> = base.iter_mut().collect();
    all.extend(run.levels.iter_mut());
    for l in all {
        for (i, t) in l.trials.iter_mut().enumerate() {
            t.round = Some(i as u32 + 1);
            t.output_tok_per_s *= 1.0 - 0.02 * i as f64;
        }
    }
    run.analyse();
    let v = evaluate_relative(&run, &GateSettings::default()).unwrap();
    let d = v.drift.as_ref().expect("rounds were recorded");
    assert!(d.flagged && d.size < -0.05, "{d:?}");
    assert!(v.warnings.iter().any(|w| w.contains("server drifted")));
}
