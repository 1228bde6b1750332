//! Turning results into things people read: console tables (and, later, Markdown, JSON,
//! JUnit and PNG plots).

pub mod console;
pub mod markdown;
pub mod plots;
