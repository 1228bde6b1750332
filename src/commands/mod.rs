//! One function per subcommand: read inputs, call the library, print, return the exit code.

pub mod baseline;
pub mod bench;
pub mod bisect;
pub mod ci;
pub mod cleanup;
pub mod demo;
pub mod flags;
pub mod gate;
pub mod init;
pub mod merge;
pub mod plan;
pub mod plot;
pub mod selfbench;
pub mod serve_sim;
pub mod trend;
