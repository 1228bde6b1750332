//! Server telemetry: `/metrics` scraped about once a second during each trial.
//!
//! Two reasons. The client's numbers only say how fast the server answered; the server's
//! gauges say *why* (a queue that never emptied, a KV cache at 99%, preemptions), so each level
//! can say whether the server was saturated. And the server's own token counter is an
//! independent measurement of the same thing the client counted: over the same window (first
//! to last scrape inside the trial) the two rates must agree, or one of them is wrong.
//!
//! Engines count generated tokens at different moments: vLLM, SGLang and the simulator as
//! tokens are produced, llama.cpp and TGI when a request finishes. The client side of the
//! cross-check counts the same way: tokens by arrival time, or whole requests by end time.

//! By job: `adapter` (an engine's names, and telling the engine from a page), `page` (the
//! Prometheus text parsed), `read` (a page read as it arrives), `watch` (the scrapers of a
//! trial), `count` (the client's tokens placed between the scrapes as requests finish),
//! `cross_check` (the cross-check and the saturation signs).

mod adapter;
mod count;
mod cross_check;
mod page;
mod read;
mod watch;

pub use crate::record::telemetry::{Counting, EndpointSeries, Sample, TrialTelemetry};
pub use adapter::{
    adapter, impossible_values_warning, missing_counter_warning, Adapter, Recognizer,
};
pub use count::ClientCount;
pub use cross_check::{attach, summarize, AGREEMENT, CACHE_NEAR_FULL};
pub use page::{Page, Series};
pub use read::{cut_page_warning, read_lines, MAX_PAGE_BYTES};
pub use watch::{Watch, INTERVAL, MAX_SAMPLES};
