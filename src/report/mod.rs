//! Turning results into things people read: console tables, Markdown, JSON, JUnit,
//! GitHub Actions annotations, the pull-request comment, Mermaid charts and PNG plots.

pub mod bisect;
pub mod combined;
pub mod console;
pub mod explain;
pub mod export;
pub mod github;
pub mod links;
pub mod markdown;
pub mod mermaid;
pub mod numbers;
pub mod plan;
pub mod plots;
pub mod pr_comment;
pub mod run;
pub mod selfbench;
pub mod tables;
pub mod trend;
pub mod verdict;
