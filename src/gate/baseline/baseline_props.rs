//! Property tests of the baseline parser: arbitrary text and mutated valid baselines never
//! panic, and a refusal names the baseline it read.

use proptest::prelude::*;

use super::Baseline;

const VALID: &str = include_str!("../../../baselines/demo.toml");

fn bad_value() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("-1".to_string()),
        Just("0".to_string()),
        Just("\"\"".to_string()),
        Just("nan".to_string()),
        Just("inf".to_string()),
        Just("[]".to_string()),
        Just("[1.0, -2.0]".to_string()),
        Just("[\"x\"]".to_string()),
        Just("{}".to_string()),
        Just("2".to_string()),
        Just("99999999999999999999".to_string()),
        "[a-z0-9\"\\[\\]{}=., -]{0,12}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn arbitrary_text_never_panics(text in ".{0,300}") {
        if let Err(e) = Baseline::parse(&text, "fuzz.toml") {
            let msg = format!("{e:#}");
            prop_assert!(msg.contains("fuzz.toml"), "{}", msg);
        }
    }

    #[test]
    fn mutated_baselines_name_the_file(line in any::<prop::sample::Index>(), v in bad_value(), delete in any::<bool>()) {
        let mut lines: Vec<String> = VALID.lines().map(str::to_string).collect();
        let j = line.index(lines.len());
        if delete {
            lines.remove(j);
        } else if let Some((key, _)) = lines[j].split_once(" = ") {
            lines[j] = format!("{key} = {v}");
        } else {
            lines[j] = v;
        }
        if let Err(e) = Baseline::parse(&lines.join("\n"), "mutated.toml") {
            let msg = format!("{e:#}");
            prop_assert!(msg.contains("mutated.toml"), "{}", msg);
        }
    }
}
