//! One request's answer: send it over the wire, read the stream chunk by chunk, count its
//! tokens, and turn what was observed into a request record (success or a named failure).
//! Next, run/ folds the records into a trial's figures.

mod body;
pub mod chunk;
pub mod client;
mod observed;
pub mod outcome;
mod probe_client;
mod reader;
pub mod tokens;
