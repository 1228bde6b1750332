//! Property tests of the profile parser: arbitrary text and mutated valid profiles never
//! panic; a refusal read from a file names the file, and names the line or the field.

use proptest::prelude::*;

use super::Profile;

const VALID: &str = include_str!("../../baselines/demo.profile.toml");

/// Values that break a field in some way: wrong type, out of range, unparsable.
fn bad_value() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("-1".to_string()),
        Just("0".to_string()),
        Just("\"\"".to_string()),
        Just("1e400".to_string()),
        Just("nan".to_string()),
        Just("[]".to_string()),
        Just("[0, -3]".to_string()),
        Just("{}".to_string()),
        Just("\"soon\"".to_string()),
        Just("true".to_string()),
        Just("99999999999999999999".to_string()),
        Just("\"ftp://x\"".to_string()),
        "[a-z0-9\"\\[\\]{}=., -]{0,12}",
    ]
}

#[derive(Debug, Clone)]
enum Mutation {
    /// Replace the value of the nth `key = value` line.
    Value(usize, String),
    DeleteLine(usize),
    InsertLine(usize, String),
    Truncate(usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        4 => (any::<usize>(), bad_value()).prop_map(|(i, v)| Mutation::Value(i, v)),
        2 => any::<usize>().prop_map(Mutation::DeleteLine),
        2 => (any::<usize>(), ".{0,30}").prop_map(|(i, l)| Mutation::InsertLine(i, l)),
        1 => any::<usize>().prop_map(Mutation::Truncate),
    ]
}

fn apply(text: &str, m: &Mutation) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    match m {
        Mutation::Value(i, v) => {
            let kv: Vec<usize> = (0..lines.len())
                .filter(|&j| lines[j].contains(" = ") && !lines[j].starts_with('#'))
                .collect();
            let j = kv[i % kv.len()];
            let key = lines[j].split(" = ").next().unwrap_or("").to_string();
            lines[j] = format!("{key} = {v}");
        }
        Mutation::DeleteLine(i) => {
            let j = i % lines.len();
            lines.remove(j);
        }
        Mutation::InsertLine(i, l) => {
            let j = i % (lines.len() + 1);
            lines.insert(j, l.clone());
        }
        Mutation::Truncate(i) => {
            let cut = i % text.len();
            let cut = (0..=cut)
                .rev()
                .find(|c| text.is_char_boundary(*c))
                .unwrap_or(0);
            return text[..cut].to_string();
        }
    }
    lines.join("\n")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn arbitrary_text_never_panics(text in ".{0,300}") {
        let _ = Profile::parse(&text);
    }

    #[test]
    fn arbitrary_toml_lines_never_panic(lines in prop::collection::vec(
        prop_oneof![
            Just("[target]".to_string()), Just("[workload]".to_string()),
            Just("[sweep]".to_string()), Just("[gate]".to_string()),
            ("(name|endpoints|model|api|max_tokens|input_tokens|concurrency|trials|request_timeout|max_error_rate|alpha|min_trials|require_usage)", bad_value())
                .prop_map(|(k, v)| format!("{k} = {v}")),
        ], 0..16)) {
        let _ = Profile::parse(&lines.join("\n"));
    }

    /// A mutated profile read from a file: accepted, or refused naming the file and the
    /// line or field.
    #[test]
    fn mutated_profiles_name_file_and_place(m in mutation()) {
        let text = apply(VALID, &m);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mutated.profile.toml");
        std::fs::write(&path, &text).unwrap();
        if let Err(e) = Profile::load(&path) {
            let msg = format!("{e:#}");
            prop_assert!(msg.contains("mutated.profile.toml"), "{}", msg);
            prop_assert!(msg.contains("line ") || msg.contains("field"), "{:?}\n{}\n---\n{}", m, msg, text);
        }
    }
}
