//! Fingerprint comparison: whether a run measured the same hardware, model and server as a
//! baseline (or as another run), and what to say loudly when it only looks so.

use crate::record::fingerprint::FingerprintField;
use crate::record::Environment;

/// Compares two fingerprints. Returns the differences that make results incomparable
/// (hardware, model, server) and warnings for the rest (runner, fields one side lacks).
pub fn fingerprint_differences(
    baseline: &Environment,
    candidate: &Environment,
) -> (Vec<String>, Vec<String>) {
    fingerprint_differences_except(baseline, candidate, &[])
}

/// The fingerprint fields each arm of a relative run reports for itself: a relative run
/// gates exactly a change of engine or version, so the baseline does not vouch for them.
pub const ARM_FIELDS: [&str; 2] = ["engine", "engine_version"];

/// [`fingerprint_differences`] leaving out the fields in `skip` (e.g. [`ARM_FIELDS`]).
pub fn fingerprint_differences_except(
    baseline: &Environment,
    candidate: &Environment,
    skip: &[&str],
) -> (Vec<String>, Vec<String>) {
    let mut differ = Vec::new();
    let mut warn = Vec::new();
    for field in FingerprintField::ALL {
        let name = field.name();
        if skip.contains(&name) {
            continue;
        }
        match (field.read(baseline), field.read(candidate)) {
            (Some(b), Some(c)) if b != c => differ.push(format!("{name}: baseline {b:?}, this run {c:?}")),
            (Some(b), None) => differ.push(format!(
                "{name}: baseline {b:?}, this run does not say (pass {} or its THROUGHLINE_ variable)",
                field.flag()
            )),
            (None, Some(c)) => warn.push(format!("{name}: this run says {c:?}, the baseline does not record it")),
            _ => {}
        }
    }
    if baseline.endpoints != candidate.endpoints {
        differ.push(format!(
            "endpoints (replicas): baseline {}, this run {}",
            baseline.endpoints, candidate.endpoints
        ));
    }
    if let (Some(b), Some(c)) = (&baseline.runner, &candidate.runner) {
        if b != c {
            warn.push(format!("runner: baseline {b:?}, this run {c:?}"));
        }
    }
    // The recorded values agree, but the engines themselves may not (a typed value can be
    // stale; the engine's own word cannot): never compare across what the engines said.
    let arm_fields = [FingerprintField::Engine, FingerprintField::EngineVersion];
    for field in arm_fields.into_iter().filter(|f| !skip.contains(&f.name())) {
        let name = field.name();
        if let (Some(b), Some(c)) = (engine_word(baseline, field), engine_word(candidate, field)) {
            let said = differ.iter().any(|d| d.starts_with(&format!("{name}:")));
            if b != c && !said {
                differ.push(format!(
                    "{name}: the baseline's server said {b:?}, this run's says {c:?} (a typed \
                     value hides it): this would compare across engine versions; update the \
                     typed value or bless a new baseline"
                ));
            }
        }
    }
    override_differences(candidate, &mut warn);
    (differ, warn)
}

/// What an environment's engine said of itself for `field` (engine, engine_version): the
/// detected value where a typed one overrode it, else the recorded value.
pub(in crate::gate) fn engine_word(env: &Environment, field: FingerprintField) -> Option<String> {
    match env.overridden.iter().find(|o| o.field == field.name()) {
        Some(o) => Some(o.detected.clone()),
        None => field.read(env),
    }
}

/// Every typed value that hides a different detected one is said loudly.
fn override_differences(candidate: &Environment, warn: &mut Vec<String>) {
    warn.extend(candidate.overridden.iter().map(override_warning));
}

/// The verdict's line for a typed value that hides a different detected one.
pub fn override_warning(o: &crate::record::Override) -> String {
    format!(
        "FINGERPRINT OVERRIDDEN: {} typed {:?} but detected {:?}; the comparison uses the \
         typed value",
        o.field, o.typed, o.detected
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprint_names_what_differs() {
        let b = Environment {
            gpu_model: Some("H100".into()),
            endpoints: 2,
            ..Default::default()
        };
        let c = Environment {
            gpu_model: Some("H200".into()),
            endpoints: 2,
            ..Default::default()
        };
        let (differ, _) = fingerprint_differences(&b, &c);
        assert_eq!(
            differ,
            vec!["gpu_model: baseline \"H100\", this run \"H200\"".to_string()]
        );
        let missing = Environment {
            endpoints: 2,
            ..Default::default()
        };
        let (differ, _) = fingerprint_differences(&b, &missing);
        assert!(differ[0].contains("--gpu"), "{differ:?}");
        // A stale typed engine version that matches the baseline while the server says
        // otherwise is refused, not compared.
        let base = Environment {
            engine_version: Some("0.6.3".into()),
            ..Default::default()
        };
        let mut stale = base.clone();
        stale.take_detected(FingerprintField::EngineVersion, Some("0.7.0".into()));
        assert_eq!(stale.engine_version.as_deref(), Some("0.6.3"));
        let (differ, _) = fingerprint_differences(&base, &stale);
        assert!(
            differ[0].contains("across engine versions") && differ[0].contains("0.7.0"),
            "{differ:?}"
        );
        // A GPU name typed differently from nvidia-smi's is said loudly, not refused.
        let mut named = base.clone();
        named.gpu_model = Some("H200".into());
        let mut b2 = base.clone();
        b2.gpu_model = Some("H200".into());
        named.take_detected(FingerprintField::GpuModel, Some("NVIDIA H200".into()));
        let (differ, warn) = fingerprint_differences(&b2, &named);
        assert!(differ.is_empty(), "{differ:?}");
        assert!(warn[0].starts_with("FINGERPRINT OVERRIDDEN"), "{warn:?}");
        // The same wrong typed value on both sides, the same engine underneath: compared
        // (said loudly), not refused. A typed value that changed is refused even where the
        // engine did not change: either side saying "different" is enough.
        let mut wrong = Environment {
            engine_version: Some("1.0".into()),
            ..Default::default()
        };
        wrong.take_detected(FingerprintField::EngineVersion, Some("0.1.0".into()));
        let (differ, warn) = fingerprint_differences(&wrong, &wrong.clone());
        assert!(differ.is_empty(), "{differ:?}");
        assert_eq!(warn.len(), 1, "{warn:?}");
        let mut retyped = Environment {
            engine_version: Some("2.0".into()),
            ..Default::default()
        };
        retyped.take_detected(FingerprintField::EngineVersion, Some("0.1.0".into()));
        let (differ, _) = fingerprint_differences(&wrong, &retyped);
        assert_eq!(differ.len(), 1, "{differ:?}");
        let (differ, warn) = fingerprint_differences(&missing, &b);
        assert!(differ.is_empty() && warn.len() == 1);
    }
}
