//! The capacity planner: how many days, how many nodes, what cost, for a token budget.
//!
//! The data flow: a request ([`request`]: the workload from [`workload`], the limits, the
//! facts and the catalog) and throughput from a run result (USL fit and bootstrap, [`curve`])
//! or from the node catalog ([`catalog`]) become rows ([`rows`]); each row is finished into
//! time, nodes, money, latency and a check against the physical bound computed from GPU and
//! model facts ([`finish`], [`facts`], [`roofline`]; prompt length and prefill in [`prefill`]); the comparison with the user's estimate
//! ([`compare`]) and the answers in words ([`summary`]) close the plan ([`answer`]).
//! [`project`] runs that sequence; [`figures`] holds the small value types and the day
//! arithmetic. `report::plan` prints the plan.

pub mod answer;
pub mod catalog;
pub mod curve;
pub mod facts;
pub mod field;
pub mod figures;
pub mod finish;
pub mod fit;
pub mod in_words;
pub mod lengths;
pub mod mix;
pub mod own_estimate;
pub mod prefill;
pub mod project;
pub mod query;
pub mod request;
pub mod roofline;
pub mod rows;
pub mod scaled;
pub mod seed_runs;
// Only tests build the seed results (one keeps fixtures/seeds/ equal to them).
#[cfg(test)]
pub mod seeds;
pub mod slo;
pub mod toml_error;
pub mod values;
pub mod workload;

pub use answer::Plan;
pub use catalog::Catalog;
pub use facts::Facts;
pub use project::plan;
pub use request::PlanRequest;
pub use workload::{TokenBudget, Workload};
