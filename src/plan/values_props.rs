//! Property tests of the planner's count and duration parsers: no text makes them panic, a
//! refusal quotes what it could not read or says what the value must be, an accepted value
//! is a finite positive number.

use proptest::prelude::*;

use super::{parse_count, parse_duration};

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        ".{0,24}",
        "[0-9.,_eE+-]{0,16}",
        "([0-9]{1,4}(\\.[0-9]{0,3})?[ ]?(d|h|m|s|min|days|hours|x|)){1,4}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn counts_never_panic(t in text()) {
        match parse_count(&t) {
            Ok(v) => prop_assert!(v.is_finite() && v > 0.0, "{t:?} -> {v}"),
            Err(e) => {
                let said = e.to_string();
                prop_assert!(said.contains(&format!("{t:?}")) || said.contains("must be"), "{said}")
            }
        }
    }

    #[test]
    fn durations_never_panic(t in text()) {
        match parse_duration(&t) {
            Ok(v) => prop_assert!(v.as_secs_f64().is_finite() && !v.is_zero(), "{t:?} -> {v:?}"),
            Err(e) => prop_assert!(e.to_string().contains(&format!("{t:?}")), "{e}"),
        }
    }
}
