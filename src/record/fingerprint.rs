//! The fingerprint fields: what a baseline and a run must agree on before their numbers are
//! compared (the hardware, the server, the model). One list, read by `baseline bless` and the
//! gate (which fields may differ), the probe (which it fills from detection) and `ci` (the
//! one-line fingerprint), so a field added here is compared, detected and shown everywhere.

use super::{Environment, Override};

/// One field of [`Environment`] the fingerprint compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FingerprintField {
    GpuModel,
    GpuCount,
    Driver,
    Engine,
    EngineVersion,
    Model,
    Precision,
}

impl FingerprintField {
    /// Every field, in the order messages and the one-line fingerprint list them.
    pub const ALL: [FingerprintField; 7] = [
        FingerprintField::GpuModel,
        FingerprintField::GpuCount,
        FingerprintField::Driver,
        FingerprintField::Engine,
        FingerprintField::EngineVersion,
        FingerprintField::Model,
        FingerprintField::Precision,
    ];

    /// The field's name in results and baseline files (`environment.gpu_model`).
    pub fn name(self) -> &'static str {
        match self {
            FingerprintField::GpuModel => "gpu_model",
            FingerprintField::GpuCount => "gpu_count",
            FingerprintField::Driver => "driver",
            FingerprintField::Engine => "engine",
            FingerprintField::EngineVersion => "engine_version",
            FingerprintField::Model => "model",
            FingerprintField::Precision => "precision",
        }
    }

    /// Its word in the one-line fingerprint ("gpu H100, gpu_count 8, ...").
    pub fn label(self) -> &'static str {
        match self {
            FingerprintField::GpuModel => "gpu",
            other => other.name(),
        }
    }

    /// The flag that types it (each has a THROUGHLINE_ variable too).
    pub fn flag(self) -> String {
        format!("--{}", self.label().replace('_', "-"))
    }

    /// The field's value in an environment, as text.
    pub fn read(self, env: &Environment) -> Option<String> {
        match self {
            FingerprintField::GpuModel => env.gpu_model.clone(),
            FingerprintField::GpuCount => env.gpu_count.map(|n| n.to_string()),
            FingerprintField::Driver => env.driver.clone(),
            FingerprintField::Engine => env.engine.clone(),
            FingerprintField::EngineVersion => env.engine_version.clone(),
            FingerprintField::Model => env.model.clone(),
            FingerprintField::Precision => env.precision.clone(),
        }
    }
}

impl Environment {
    /// Fills a field from detection: a missing value takes the detected one; a typed value
    /// is kept, and a different detected value is recorded in `overridden`. The model and
    /// precision are never detected (the model is resolved before, from the profile).
    pub fn take_detected(&mut self, field: FingerprintField, detected: Option<String>) {
        let Some(detected) = detected else { return };
        let typed = match field {
            FingerprintField::GpuModel => &mut self.gpu_model,
            FingerprintField::Driver => &mut self.driver,
            FingerprintField::Engine => &mut self.engine,
            FingerprintField::EngineVersion => &mut self.engine_version,
            FingerprintField::GpuCount => {
                let n: Option<u32> = detected.parse().ok();
                match (self.gpu_count, n) {
                    (None, n) => self.gpu_count = n,
                    (Some(t), Some(d)) if t != d => self.overridden.push(Override {
                        field: field.name().into(),
                        typed: t.to_string(),
                        detected,
                    }),
                    _ => {}
                }
                return;
            }
            FingerprintField::Model | FingerprintField::Precision => return,
        };
        match typed {
            None => *typed = Some(detected),
            Some(t) if *t != detected => {
                let t = t.clone();
                self.overridden.push(Override {
                    field: field.name().into(),
                    typed: t,
                    detected,
                })
            }
            Some(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_field_reads_its_own_value_and_names_its_flag() {
        let env = Environment {
            gpu_model: Some("H100".into()),
            gpu_count: Some(8),
            driver: Some("550".into()),
            engine: Some("vllm".into()),
            engine_version: Some("0.6.3".into()),
            model: Some("m".into()),
            precision: Some("bf16".into()),
            ..Environment::default()
        };
        let read: Vec<String> = FingerprintField::ALL
            .iter()
            .map(|f| format!("{}={}", f.name(), f.read(&env).unwrap()))
            .collect();
        assert_eq!(
            read.join(" "),
            "gpu_model=H100 gpu_count=8 driver=550 engine=vllm engine_version=0.6.3 model=m \
             precision=bf16"
        );
        let flags: Vec<String> = FingerprintField::ALL.iter().map(|f| f.flag()).collect();
        assert_eq!(
            flags,
            [
                "--gpu",
                "--gpu-count",
                "--driver",
                "--engine",
                "--engine-version",
                "--model",
                "--precision"
            ]
        );
    }
}
