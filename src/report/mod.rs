//! Turning results into things people read: console tables, Markdown, JSON, JUnit,
//! GitHub Actions annotations and PNG plots.

pub mod combined;
pub mod console;
pub mod export;
pub mod github;
pub mod junit;
pub mod markdown;
pub mod plan;
pub mod plots;
pub mod run;
pub mod trend;
pub mod verdict;
