//! throughline: truthful LLM inference server benchmarks, statistical regression gates
//! and capacity plans. The modules follow the data flow:
//! profile -> load generator -> record -> (gate | report | plan).

pub mod sim;
pub mod stats;
