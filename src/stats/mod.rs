//! Statistics across trials: summaries, the two-sample test, the USL fit.

pub mod summary;
pub use summary::{percentile, Percentiles, Spread};
