//! Checks on a result that every reader of it applies the same way: `bench` to choose its
//! exit code, `gate` and `baseline bless` to refuse what did not measure.

use std::collections::BTreeMap;

use super::{ErrorClass, LevelResult};

/// Levels that did not measure: no successful request in a trial, or an error rate over
/// the limit. Each message says what the failures were.
pub fn level_problems(levels: &[LevelResult], max_error_rate: f64) -> Vec<String> {
    let mut problems = Vec::new();
    for level in levels {
        let rate = level.error_rate();
        let empty = level.trials.iter().filter(|t| !t.measured()).count();
        if empty == 0 && rate <= max_error_rate {
            continue;
        }
        let mut classes = BTreeMap::<ErrorClass, u64>::new();
        let mut examples = BTreeMap::<ErrorClass, &str>::new();
        for t in &level.trials {
            for (c, n) in &t.failed {
                *classes.entry(*c).or_insert(0) += n;
            }
            for (c, msg) in &t.error_examples {
                examples.entry(*c).or_insert(msg);
            }
        }
        let by_class = classes
            .iter()
            .map(|(c, n)| match examples.get(c) {
                Some(msg) => format!("{c} {n}, e.g. \"{msg}\""),
                None => format!("{c} {n}"),
            })
            .collect::<Vec<_>>()
            .join("; ");
        if empty > 0 {
            problems.push(format!(
                "{}: {empty} of {} trials had no successful request (failures: {by_class})",
                level.label(),
                level.trials.len()
            ));
        } else {
            problems.push(format!(
                "{}: error rate {:.1}% is over the profile's max_error_rate {:.1}% (failures: {by_class})",
                level.label(),
                rate * 100.0,
                max_error_rate * 100.0
            ));
        }
    }
    problems
}
