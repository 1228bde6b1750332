//! The node catalog (TOML): the node types a job could run on, with their throughput figures
//! (measured or stated, with source and date) and illustrative prices.
//!
//! The default catalog is `fixtures/catalog.toml`, embedded in the binary so that `plan`
//! works from any folder. Errors name the file, the line and the field.

use std::path::Path;

use anyhow::{anyhow, Result};
use serde::{Deserialize, Serialize};

use super::facts::Facts;
use super::field::Field;
use super::toml_error::toml_error;

/// The built-in catalog's text.
pub const BUILTIN_CATALOG: &str = include_str!("../../fixtures/catalog.toml");
/// Most GPUs a node may have: beyond it a count is a typing error.
pub const MAX_GPUS_PER_NODE: u32 = 1024;
/// How the built-in catalog is named in messages.
pub const BUILTIN_NAME: &str = "fixtures/catalog.toml (built in)";

/// Node ids before issue 50, and the ids that replaced them: "rtx6000" is also the older
/// RTX 6000 Ada (48 GB), so the ids name the RTX PRO 6000 Blackwell (96 GB). The old ids
/// are still read (a `--node` flag, a script), with a note.
pub const RENAMED_NODES: [(&str, &str); 3] = [
    ("rtx6000-8x-dp", "rtxpro6000-8x-dp"),
    ("rtx6000-4x-dp-mtp", "rtxpro6000-4x-dp-mtp"),
    ("rtx6000-4x-tp4", "rtxpro6000-4x-tp4"),
];

/// The id an old node id (see [`RENAMED_NODES`]) now has.
pub fn renamed_node(old: &str) -> Option<&'static str> {
    let n = super::facts::normalize(old);
    RENAMED_NODES
        .iter()
        .find(|(o, _)| super::facts::normalize(o) == n)
        .map(|(_, new)| *new)
}

/// The note for a node asked by its old id, None for any other name.
pub fn renamed_note(asked: &str) -> Option<String> {
    renamed_node(asked).map(|new| {
        format!(
            "node {asked:?} is now {new:?} (the RTX PRO 6000 Blackwell, 96 GB; \"rtx6000\" is also \
             the older 48 GB RTX 6000 Ada): the old id still works, the new one is the one to \
             write"
        )
    })
}

/// What kind of throughput figure a catalog entry carries.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum FigureBasis {
    /// Measured on this configuration.
    Measured,
    /// Claimed on a spec sheet or estimated: not a measurement.
    Stated,
}

/// One node type as written in the catalog.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Node {
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    /// GPU model (looked up in the GPU facts).
    pub gpu: String,
    pub gpus_per_node: u32,
    /// Model replicas (servers) per node; each spans gpus_per_node / replicas_per_node GPUs.
    #[serde(default = "one")]
    pub replicas_per_node: u32,
    /// The model the throughput figure is for.
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub basis: Option<FigureBasis>,
    #[serde(default)]
    pub tok_s_per_node: Option<f64>,
    #[serde(default)]
    pub tok_s_per_replica: Option<f64>,
    /// The high end of a stated range (per node); the figure itself is the low end.
    #[serde(default)]
    pub tok_s_high: Option<f64>,
    /// Concurrent requests per replica the figure was obtained at.
    #[serde(default)]
    pub concurrency_per_replica: Option<u32>,
    /// Single-request decode speed per replica, checked against the batch-1 roofline.
    #[serde(default)]
    pub batch1_tok_s_per_replica: Option<f64>,
    /// Speculative decoding (MTP, draft models): more than one token per step is possible.
    #[serde(default)]
    pub speculative: bool,
    #[serde(default)]
    pub source: String,
    #[serde(default)]
    pub date: Option<String>,
    /// Illustrative price per node-hour, USD.
    #[serde(default)]
    pub usd_per_node_hour: Option<f64>,
    #[serde(default)]
    pub price_note: Option<String>,
    /// Nodes of this type that can be had (for `plan --cheapest-mix`); absent = as many as
    /// needed.
    #[serde(default)]
    pub available: Option<u32>,
    /// 1-based line of the entry in its file (set when read).
    #[serde(skip)]
    pub line: usize,
}

fn one() -> u32 {
    1
}

impl Node {
    pub fn gpus_per_replica(&self) -> u32 {
        (self.gpus_per_node / self.replicas_per_node.max(1)).max(1)
    }

    /// The throughput figure for the whole node (low end of a stated range), if any.
    pub fn tok_s(&self) -> Option<f64> {
        self.tok_s_per_node.or_else(|| {
            self.tok_s_per_replica
                .map(|r| r * self.replicas_per_node as f64)
        })
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CatalogFile {
    node: Vec<toml::Spanned<Node>>,
}

/// A parsed, validated catalog.
#[derive(Debug, Clone)]
pub struct Catalog {
    /// Where it came from (a path, or the built-in name).
    pub origin: String,
    pub nodes: Vec<Node>,
}

fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

/// The line where `field` is set inside the byte range of one entry (else the entry's line).
fn field_line(text: &str, span: std::ops::Range<usize>, field: &str) -> usize {
    let start = span.start.min(text.len());
    let end = span.end.min(text.len());
    let mut offset = start;
    for line in text[start..end].split_inclusive('\n') {
        if let Some((key, _)) = line.split_once('=') {
            if key.trim() == field {
                return line_of(text, offset);
            }
        }
        offset += line.len();
    }
    line_of(text, start)
}

/// The largest catalog file read (a catalog is a few kilobytes of TOML).
pub const CATALOG_FILE_BYTES: u64 = 16 * 1024 * 1024;

impl Catalog {
    /// Whether this is the built-in catalog (whose prices are illustrative).
    pub fn is_builtin(&self) -> bool {
        self.origin == BUILTIN_NAME
    }

    /// The built-in catalog.
    pub fn builtin(facts: &Facts) -> Result<Catalog> {
        Catalog::parse(BUILTIN_CATALOG, BUILTIN_NAME, facts)
    }

    /// Reads a catalog file, or the built-in one when `path` is None.
    pub fn load(path: Option<&Path>, facts: &Facts) -> Result<Catalog> {
        match path {
            None => Catalog::builtin(facts),
            Some(p) => {
                let text = crate::fsutil::read_bounded(p, CATALOG_FILE_BYTES)
                    .map_err(|e| Field::Catalog.wrap(format!("cannot read {}", p.display()), e))?;
                Catalog::parse(&text, &p.display().to_string(), facts)
            }
        }
    }

    pub fn parse(text: &str, origin: &str, facts: &Facts) -> Result<Catalog> {
        let file: CatalogFile = toml::from_str(text).map_err(|e| toml_error(origin, e))?;
        let mut nodes: Vec<Node> = Vec::new();
        for spanned in file.node {
            let span = spanned.span();
            let mut node = spanned.into_inner();
            node.line = line_of(text, span.start);
            let fail = |field: &str, why: String| -> anyhow::Error {
                anyhow!(
                    "{origin}: line {}: node {:?}, field `{field}`: {why}",
                    field_line(text, span.clone(), field),
                    node.name
                )
            };
            if let Some((field, why)) =
                (node.shape_problem(&nodes, facts)).or_else(|| node.figure_problem())
            {
                return Err(fail(field, why));
            }
            nodes.push(node);
        }
        Ok(Catalog {
            origin: origin.to_string(),
            nodes,
        })
    }

    /// A node by name (exact, else normalized, else an old id's new one: [`RENAMED_NODES`]).
    pub fn node(&self, name: &str) -> Result<&Node> {
        let n = super::facts::normalize(name);
        let renamed = renamed_node(name);
        self.nodes
            .iter()
            .find(|x| x.name == name)
            .or_else(|| {
                self.nodes
                    .iter()
                    .find(|x| super::facts::normalize(&x.name) == n)
            })
            .or_else(|| self.nodes.iter().find(|x| Some(x.name.as_str()) == renamed))
            .ok_or_else(|| {
                Field::Node.error(format!(
                    "unknown node type {name:?} in {}; known: {}",
                    self.origin,
                    self.nodes
                        .iter()
                        .map(|x| x.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            })
    }
}

impl Node {
    /// The first field that does not make a node (`others`: the nodes read before it), and
    /// why: its name, GPU and GPU counts.
    fn shape_problem(&self, others: &[Node], facts: &Facts) -> Option<(&'static str, String)> {
        if self.name.trim().is_empty() {
            return Some(("name", "must not be empty".into()));
        }
        if others.iter().any(|n| n.name == self.name) {
            return Some(("name", "another node has this name".into()));
        }
        if facts.gpu(&self.gpu).is_none() {
            return Some((
                "gpu",
                format!(
                    "unknown GPU {:?}; known: {}",
                    self.gpu,
                    facts.gpu_names().join(", ")
                ),
            ));
        }
        if self.gpus_per_node == 0 {
            return Some(("gpus_per_node", "must be at least 1".into()));
        }
        if self.gpus_per_node > MAX_GPUS_PER_NODE {
            return Some((
                "gpus_per_node",
                format!(
                    "{} is more than a node holds (at most {MAX_GPUS_PER_NODE}); a node is \
                 one machine, the plan gives how many of them",
                    self.gpus_per_node
                ),
            ));
        }
        if self.replicas_per_node == 0 || self.gpus_per_node % self.replicas_per_node != 0 {
            return Some((
                "replicas_per_node",
                format!(
                    "{} does not divide gpus_per_node {} into whole GPUs per replica",
                    self.replicas_per_node, self.gpus_per_node
                ),
            ));
        }
        None
    }

    /// The first of its figures (throughputs, price, counts) that is not one, and why.
    fn figure_problem(&self) -> Option<(&'static str, String)> {
        for (field, value) in [
            ("tok_s_per_node", self.tok_s_per_node),
            ("tok_s_per_replica", self.tok_s_per_replica),
            ("tok_s_high", self.tok_s_high),
            ("batch1_tok_s_per_replica", self.batch1_tok_s_per_replica),
        ] {
            if let Some(v) = value {
                // 1e308 is finite, but days = tokens / it print as 0.0 s.
                if !(v.is_finite() && v > 0.0 && v <= crate::record::FIGURE_MAX) {
                    return Some((
                        field,
                        format!(
                            "{} must be a positive number up to {:e}",
                            crate::record::figure_text(v),
                            crate::record::FIGURE_MAX
                        ),
                    ));
                }
            }
        }
        if let Some(p) = self.usd_per_node_hour {
            if !(p.is_finite() && p >= 0.0) {
                return Some(("usd_per_node_hour", format!("{p} must be zero or more")));
            }
        }
        if self.available == Some(0) {
            return Some((
                "available",
                "must be at least 1 (leave the node out, or the field for as many as needed)"
                    .into(),
            ));
        }
        if self.concurrency_per_replica == Some(0) {
            return Some(("concurrency_per_replica", "must be at least 1".into()));
        }
        if self.tok_s_per_node.is_some() && self.tok_s_per_replica.is_some() {
            return Some((
                "tok_s_per_replica",
                "give tok_s_per_node or tok_s_per_replica, not both".into(),
            ));
        }
        match (self.tok_s(), self.basis) {
            (Some(_), None) => {
                return Some((
                    "basis",
                    "a throughput figure needs `basis = \"measured\"` or `\"stated\"`".into(),
                ))
            }
            (Some(_), Some(_)) if self.model.is_none() => {
                return Some((
                    "model",
                    "a throughput figure needs the model it was obtained with".into(),
                ))
            }
            _ => {}
        }
        if let (Some(low), Some(high)) = (self.tok_s(), self.tok_s_high) {
            if high < low {
                return Some((
                    "tok_s_high",
                    format!("{high} is below the figure itself ({low})"),
                ));
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_catalog_parses() {
        let facts = Facts::builtin();
        let c = Catalog::builtin(&facts).unwrap();
        assert!(c.nodes.len() >= 8);
        let b200 = c.node("b200-7x").unwrap();
        assert_eq!(b200.basis, Some(FigureBasis::Stated));
        assert_eq!(b200.tok_s(), Some(15_000.0));
        assert_eq!(c.node("rtxpro6000-8x-dp").unwrap().tok_s(), Some(9_440.0));
        assert!(c.node("rtxpro6000-8x-dp").unwrap().line > 1);
        // The ids before issue 50 still find their nodes.
        assert_eq!(c.node("rtx6000-8x-dp").unwrap().name, "rtxpro6000-8x-dp");
        assert_eq!(c.node("RTX6000-4x-TP4").unwrap().name, "rtxpro6000-4x-tp4");
        assert!(renamed_note("rtx6000-4x-tp4")
            .unwrap()
            .contains("RTX 6000 Ada"));
        assert_eq!(renamed_note("rtxpro6000-4x-tp4"), None);
        let err = c.node("tpu-v9").unwrap_err();
        let field = crate::plan::field::field_of(&err);
        assert_eq!(field, Some(crate::plan::field::Field::Node), "{err:#}");
        assert!(format!("{err:#}").contains("tpu-v9"), "{err:#}");
    }

    #[test]
    fn errors_name_file_line_and_field() {
        let facts = Facts::builtin();
        let text = "[[node]]\nname = \"a\"\ngpu = \"H100\"\ngpus_per_node = 8\n\n[[node]]\nname = \"b\"\ngpu = \"Voodoo 2\"\ngpus_per_node = 1\n";
        let err = format!("{:#}", Catalog::parse(text, "my.toml", &facts).unwrap_err());
        assert!(
            err.contains("my.toml") && err.contains("line 8") && err.contains("`gpu`"),
            "{err}"
        );

        let text = "[[node]]\nname = \"a\"\ngpu = \"H100\"\ngpus_per_node = 8\ntok_s = 5\n";
        let err = format!("{:#}", Catalog::parse(text, "my.toml", &facts).unwrap_err());
        assert!(
            err.contains("my.toml") && err.contains("line 5") && err.contains("tok_s"),
            "{err}"
        );

        let text = "[[node]]\nname = \"a\"\ngpu = \"H100\"\ngpus_per_node = 8\nmodel = \"x\"\nbasis = \"measured\"\ntok_s_per_node = -3\n";
        let err = format!("{:#}", Catalog::parse(text, "my.toml", &facts).unwrap_err());
        assert!(
            err.contains("line 7") && err.contains("tok_s_per_node"),
            "{err}"
        );

        let text = "[[node]]\nname = \"a\"\ngpu = \"H100\"\ngpus_per_node = 4000000000\n";
        let err = format!("{:#}", Catalog::parse(text, "my.toml", &facts).unwrap_err());
        assert!(
            err.contains("line 4") && err.contains("at most 1024"),
            "{err}"
        );

        let text =
            "[[node]]\nname = \"a\"\ngpu = \"H100\"\ngpus_per_node = 8\nreplicas_per_node = 3\n";
        let err = format!("{:#}", Catalog::parse(text, "my.toml", &facts).unwrap_err());
        assert!(
            err.contains("line 5") && err.contains("replicas_per_node"),
            "{err}"
        );
    }
}
