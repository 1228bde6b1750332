//! The capacity planner: how many days, how many nodes, what cost, for a token budget.
//!
//! The data flow: a workload (token budget and limits, [`workload`]) and throughput from a
//! run result (USL fit and bootstrap, [`curve`]) or from the node catalog ([`catalog`]) go
//! into the projection ([`project`]), which checks every figure against the physical bound
//! computed from GPU and model facts ([`facts`], [`roofline`]); [`output`] prints it.

pub mod catalog;
pub mod curve;
pub mod facts;
pub mod output;
pub mod project;
pub mod roofline;
pub mod seeds;
pub mod toml_error;
pub mod workload;

pub use catalog::Catalog;
pub use facts::Facts;
pub use project::{plan, Plan, PlanRequest};
pub use workload::Workload;
