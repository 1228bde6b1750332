//! What the requests ask: prompts, datasets, traces, conversations and the lengths drawn
//! for each, decided before the first request (source.rs), and the check afterwards that the
//! prompts had the length asked for. Next, run/ schedules them.

pub mod conversation;
pub mod data_error;
pub mod dataset;
pub mod input_check;
mod jsonl;
pub mod lengths;
pub mod prompts;
pub mod source;
pub mod trace;
