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
pub mod merged_comment;
pub mod mermaid;
pub mod numbers;
pub mod plan;
pub mod plan_files;
pub mod plots;
pub mod pr_comment;
pub mod publish;
pub mod refusal;
pub mod run;
pub mod selfbench;
mod slot_groups;
pub mod tables;
pub mod trend;
pub mod verdict;
