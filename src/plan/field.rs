//! What a refusal is about: the planner says it in words ("the deadline 30.0 s cannot be
//! met"), and tags the error with the part of the question it concerns, so the command line
//! can put the flag that gave that part in front (`commands/plan.rs`) while the planner
//! knows no flag.

use std::fmt;

/// A part of the planner's question ([`super::query::PlanQuery`]) an error can be about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    LengthsFrom,
    Deadline,
    CheapestMix,
    Results,
    Node,
    Gpu,
    ReplicasPerNode,
    MaxTtftP99,
    MaxItlP99,
    Catalog,
    Model,
    ModelConfig,
    Quantization,
    KvCacheDtype,
    CompareDays,
    CompareNode,
}

impl Field {
    /// An error about this part, saying `message` (and `source` below it, when given).
    pub fn error(self, message: impl fmt::Display) -> anyhow::Error {
        FieldError {
            field: self,
            message: message.to_string(),
            source: None,
        }
        .into()
    }

    /// `source`, said to be about this part: `message` in front of it.
    pub fn wrap(self, message: impl fmt::Display, source: anyhow::Error) -> anyhow::Error {
        FieldError {
            field: self,
            message: message.to_string(),
            source: Some(source),
        }
        .into()
    }
}

/// An error tagged with the part of the question it is about.
#[derive(Debug)]
pub struct FieldError {
    pub field: Field,
    message: String,
    source: Option<anyhow::Error>,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for FieldError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.as_ref().map(|e| e.as_ref())
    }
}

/// The part of the question `error` is about, if it was tagged (anywhere in its chain).
pub fn field_of(error: &anyhow::Error) -> Option<Field> {
    error
        .chain()
        .find_map(|e| e.downcast_ref::<FieldError>())
        .map(|e| e.field)
}

#[cfg(test)]
mod tests {
    use anyhow::Context;

    use super::*;

    #[test]
    fn the_tag_is_found_under_context_and_the_source_is_said() {
        let inner = anyhow::anyhow!("no such file");
        let e = Field::Catalog.wrap("the catalog", inner);
        assert_eq!(format!("{e:#}"), "the catalog: no such file");
        let e = Err::<(), _>(e).context("planning").unwrap_err();
        assert_eq!(field_of(&e), Some(Field::Catalog));
        assert_eq!(field_of(&anyhow::anyhow!("plain")), None);
    }
}
