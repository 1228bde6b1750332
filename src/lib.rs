//! throughline: truthful LLM inference server benchmarks, statistical regression gates
//! and capacity plans. The modules follow the data flow:
//! profile -> load generator -> record -> (gate | report | plan).

pub mod bisect;
pub mod cli;
pub mod commands;
pub mod engine;
pub mod exit;
pub mod fsutil;
pub mod gate;
pub mod load;
pub mod locks;
pub mod plan;
pub mod process;
pub mod profile;
pub mod record;
pub mod report;
pub mod runner;
pub mod sim;
pub mod stats;
pub mod tokenize;
pub mod untrusted;
