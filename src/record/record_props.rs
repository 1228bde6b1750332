//! Property tests of the results reader: arbitrary bytes and mutated valid results never
//! panic; a refusal names the file (and the field where the schema is broken); anything
//! accepted keeps the accounting invariant.

use proptest::prelude::*;
use serde_json::{json, Value};

use super::{fake, RunResult};

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<u64>().prop_map(|n| json!(n)),
        (-1e6f64..1e6).prop_map(|f| json!(f)),
        ".{0,8}".prop_map(Value::String),
        Just(json!([])),
        Just(json!({})),
        Just(json!({"connect": 3})),
    ]
}

/// Every path (object keys and array indices) into `v`.
fn paths(v: &Value, at: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    out.push(at.clone());
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                at.push(k.clone());
                paths(x, at, out);
                at.pop();
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                at.push(i.to_string());
                paths(x, at, out);
                at.pop();
            }
        }
        _ => {}
    }
}

/// Replaces (or, with `None`, removes) the value at `path`.
pub fn set_at(v: &mut Value, path: &[String], new: Option<Value>) {
    let Some((last, head)) = path.split_last() else {
        if let Some(n) = new {
            *v = n;
        }
        return;
    };
    let mut cur = v;
    for p in head {
        cur = match cur {
            Value::Object(m) => m.get_mut(p).unwrap(),
            Value::Array(a) => &mut a[p.parse::<usize>().unwrap()],
            _ => return,
        };
    }
    match (cur, new) {
        (Value::Object(m), Some(n)) => {
            m.insert(last.clone(), n);
        }
        (Value::Object(m), None) => {
            m.remove(last);
        }
        (Value::Array(a), Some(n)) => a[last.parse::<usize>().unwrap()] = n,
        (Value::Array(a), None) => {
            a.remove(last.parse::<usize>().unwrap());
        }
        _ => {}
    }
}

/// A valid result as JSON, with two levels of two trials.
fn valid() -> Value {
    serde_json::to_value(fake::run(&[(1, &[10.0, 11.0]), (4, &[30.0, 31.0])])).unwrap()
}

fn load_text(text: &[u8]) -> (anyhow::Result<RunResult>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mutated-results.json");
    std::fs::write(&path, text).unwrap();
    (RunResult::load(&path), dir)
}

fn check(result: anyhow::Result<RunResult>) -> Result<(), TestCaseError> {
    match result {
        Ok(r) => {
            for l in &r.levels {
                for t in &l.trials {
                    prop_assert!(t.is_accounted());
                }
            }
        }
        Err(e) => {
            let msg = format!("{e:#}");
            prop_assert!(msg.contains("mutated-results.json"), "{}", msg);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        let (r, _dir) = load_text(&bytes);
        check(r)?;
    }

    #[test]
    fn mutated_results_never_panic(pick in any::<prop::sample::Index>(), new in prop::option::weighted(0.8, leaf())) {
        let mut v = valid();
        let mut all = Vec::new();
        paths(&v, &mut Vec::new(), &mut all);
        let path = pick.get(&all).clone();
        let removed = new.is_none();
        set_at(&mut v, &path, new);
        let (r, _dir) = load_text(v.to_string().as_bytes());
        // A schema error names the field it found broken.
        if let Err(e) = &r {
            let msg = format!("{e:#}");
            let named = msg.contains("field") || msg.contains("level") || msg.contains("not valid JSON");
            prop_assert!(named || removed, "{:?}: {}", path, msg);
        }
        check(r)?;
    }

    #[test]
    fn truncated_results_never_panic(cut in any::<prop::sample::Index>()) {
        let text = serde_json::to_string_pretty(&valid()).unwrap();
        let cut = cut.index(text.len());
        let (r, _dir) = load_text(&text.as_bytes()[..cut]);
        prop_assert!(r.is_err());
        check(r)?;
    }
}
