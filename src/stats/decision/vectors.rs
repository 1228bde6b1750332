//! Every case of `src/stats/reference/vectors.json` (written by `make_vectors.py` from
//! `reference.py`, values to 6 significant digits) reproduced to 1e-6 relative.

use serde_json::Value;

use super::*;

const VECTORS: &str = include_str!("../reference/vectors.json");

/// x rounded to 6 significant digits, as make_vectors.py's `sig` writes it.
fn sig6(x: f64) -> f64 {
    format!("{x:.5e}").parse().unwrap()
}

fn check_num(case: &str, key: &str, ours: Option<f64>, want: &Value) {
    match want {
        Value::Null => assert!(ours.is_none(), "{case}.{key}: want null, got {ours:?}"),
        Value::String(s) if s == "inf" || s == "nan" => {
            // Not estimable / unbounded: None (or +inf) on our side.
            assert!(
                ours.is_none_or(|x| x.is_infinite() || x.is_nan()),
                "{case}.{key}: want {s}, got {ours:?}"
            );
        }
        Value::Number(n) => {
            let w = n.as_f64().unwrap();
            let o = ours.unwrap_or_else(|| panic!("{case}.{key}: want {w}, got None"));
            let err = (sig6(o) - w).abs();
            assert!(
                err <= 1e-6 * w.abs(),
                "{case}.{key}: want {w}, got {o} (rounded {})",
                sig6(o)
            );
        }
        other => panic!("{case}.{key}: unexpected {other}"),
    }
}

fn outcome_name(o: LevelOutcome) -> &'static str {
    match o {
        LevelOutcome::Regression => "REGRESSION",
        LevelOutcome::NoRegression => "NO_REGRESSION",
        LevelOutcome::Inconclusive => "INCONCLUSIVE",
    }
}

fn check_levels(case: &str, levels: &[LevelTest], verdict: LevelOutcome, want: &Value) {
    assert_eq!(outcome_name(verdict), want["verdict"], "{case}: verdict");
    let wl = want["levels"].as_array().unwrap();
    assert_eq!(levels.len(), wl.len(), "{case}: level count");
    for (i, (lv, w)) in levels.iter().zip(wl).enumerate() {
        let c = format!("{case}[{i}]");
        let mode = match (lv.design, lv.sessions_base.max(lv.sessions_head) > 1) {
            (Design::History, _) => "history",
            (Design::Relative, false) => "relative",
            (Design::Relative, true) => "relative-restarts",
        };
        assert_eq!(mode, w["mode"], "{c}.mode");
        assert_eq!(outcome_name(lv.outcome), w["outcome"], "{c}.outcome");
        let nums: [(&str, Option<f64>); 20] = [
            ("ratio", lv.ratio),
            ("d", lv.d),
            ("se", lv.se),
            ("df", Some(lv.df)),
            ("p", Some(lv.p)),
            ("p_holm", Some(lv.p_holm)),
            ("p_guard", Some(lv.p_guard)),
            ("p_guard_holm", Some(lv.p_guard_holm)),
            ("lower", Some(lv.lower)),
            ("upper", lv.upper),
            ("pass_lower", Some(lv.pass_lower)),
            ("pass_upper", lv.pass_upper),
            ("mdd", lv.mdd),
            ("sigma_w", lv.sigma_w),
            ("sigma_b", lv.sigma_b),
            ("sigma_b2_raw", lv.sigma_b2_raw),
            ("sigma_b_df", lv.sigma_b_df),
            ("se_w", Some(lv.se_w)),
            ("df_w", Some(lv.df_w)),
            ("n_base", Some(lv.n_base as f64)),
        ];
        for (key, ours) in nums {
            // reference.py keeps se_w = NaN where the level is not estimable; ours is 0.
            if key == "se_w" && w[key] == "nan" {
                assert_eq!(lv.se_w, 0.0, "{c}.se_w");
                continue;
            }
            check_num(&c, key, ours, &w[key]);
        }
        for (key, ours) in [
            ("n_head", lv.n_head),
            ("dropped_base", lv.dropped_base),
            ("dropped_head", lv.dropped_head),
        ] {
            assert_eq!(Some(ours as u64), w[key].as_u64(), "{c}.{key}");
        }
        // A guard-only regression is the one the guard decided.
        if lv.outcome == LevelOutcome::Regression && lv.p_holm >= 0.008 {
            assert!(lv.guard_tripped, "{c}: regression without either test");
        }
    }
}

fn nested(v: &Value) -> Vec<Vec<f64>> {
    serde_json::from_value(v.clone()).unwrap()
}

fn logs(x: &[f64], sign: f64) -> Vec<f64> {
    x.iter().map(|v| sign * v.ln()).collect()
}

#[test]
fn every_reference_vector_is_reproduced() {
    let doc: Value = serde_json::from_str(VECTORS).unwrap();
    let s = DecisionSettings::default();
    assert_eq!(
        s.main_alpha(),
        doc["settings"]["alpha_main"].as_f64().unwrap()
    );
    assert_eq!(
        s.guard_alpha(),
        doc["settings"]["alpha_guard"].as_f64().unwrap()
    );
    assert_eq!(OUTLIER_Z, doc["settings"]["outlier_z"].as_f64().unwrap());
    let mut seen = 0;
    for case in doc["cases"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let input = &case["input"];
        let want = &case["expected"];
        match case["kind"].as_str().unwrap() {
            kind @ ("relative" | "relative-latency") => {
                let (bk, hk, sign) = if kind == "relative" {
                    ("base_tok_s", "head_tok_s", 1.0)
                } else {
                    ("base_latency_s", "head_latency_s", -1.0)
                };
                let (base, head) = (nested(&input[bk]), nested(&input[hk]));
                let sess = |k: &str, i: usize| -> Vec<u32> {
                    input
                        .get(k)
                        .map(|v| {
                            serde_json::from_value::<Vec<Vec<u32>>>(v.clone()).unwrap()[i].clone()
                        })
                        .unwrap_or_default()
                };
                let mut levels: Vec<LevelTest> = (0..base.len())
                    .map(|i| {
                        relative_level(
                            &logs(&base[i], sign),
                            &logs(&head[i], sign),
                            &sess("base_session", i),
                            &sess("head_session", i),
                            s.guard,
                        )
                    })
                    .collect();
                let settings = DecisionSettings {
                    min_effect: input["min_effect"].as_f64().unwrap_or(s.min_effect),
                    ..s
                };
                let verdict = decide(&mut levels, &settings);
                check_levels(name, &levels, verdict, want);
            }
            "history" => {
                let base: Vec<Vec<Vec<f64>>> =
                    serde_json::from_value(input["baseline_sessions_tok_s"].clone()).unwrap();
                let cand = nested(&input["candidate_tok_s"]);
                let mut levels: Vec<LevelTest> = base
                    .iter()
                    .zip(&cand)
                    .map(|(bs, c)| {
                        let bs: Vec<Vec<f64>> = bs.iter().map(|x| logs(x, 1.0)).collect();
                        history_level(&bs, &logs(c, 1.0), s.guard)
                    })
                    .collect();
                let verdict = decide(&mut levels, &s);
                check_levels(name, &levels, verdict, want);
            }
            "drift" => {
                let names: Vec<String> = serde_json::from_value(input["cell"].clone()).unwrap();
                let mut ids: Vec<&String> = Vec::new();
                let cells: Vec<u32> = names
                    .iter()
                    .map(|n| match ids.iter().position(|x| *x == n) {
                        Some(i) => i as u32,
                        None => {
                            ids.push(n);
                            ids.len() as u32 - 1
                        }
                    })
                    .collect();
                let vals: Vec<f64> = serde_json::from_value(input["tok_s"].clone()).unwrap();
                let rounds: Vec<u32> = serde_json::from_value(input["round"].clone()).unwrap();
                let sess: Vec<u32> = serde_json::from_value(input["session"].clone()).unwrap();
                let dc = drift_check_at(
                    &cells,
                    &logs(&vals, 1.0),
                    &rounds,
                    &sess,
                    input["alpha"].as_f64().unwrap(),
                    input["min_size"].as_f64().unwrap(),
                )
                .expect("df >= 1");
                for (key, ours) in [
                    ("slope", dc.slope),
                    ("t", dc.t),
                    ("df", dc.df),
                    ("p", dc.p),
                    ("size", dc.size),
                ] {
                    check_num(name, key, Some(ours), &want[key]);
                }
                assert_eq!(Some(dc.flagged), want["flag"].as_bool(), "{name}.flag");
            }
            "holm" => {
                let p: Vec<f64> = serde_json::from_value(input["p"].clone()).unwrap();
                let got = crate::stats::holm::holm(&p);
                let w: Vec<f64> = serde_json::from_value(want["p_holm"].clone()).unwrap();
                for (o, w) in got.iter().zip(&w) {
                    check_num(name, "p_holm", Some(*o), &Value::from(*w));
                }
            }
            other => panic!("{name}: unknown kind {other}"),
        }
        seen += 1;
    }
    assert_eq!(seen, 14, "vectors.json holds 14 cases");
}
