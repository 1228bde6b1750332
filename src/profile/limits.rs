//! The bounds validation puts on profile numbers: each one sizes memory, a timer or the
//! sockets a run opens, and a value past it would overflow a clock, exhaust memory or run out
//! of file descriptors instead of measuring. The README's "Limits on inputs" lists them.

use std::time::Duration;

/// The largest profile file read (bytes): a profile is a few hundred bytes of TOML.
pub const PROFILE_FILE_BYTES: u64 = 1024 * 1024;
/// The largest workload file (prompts, dataset, trace, tokenizer) the profile hash reads:
/// above the largest any reader takes (a 2 GiB trace), a bound on the hash's work.
pub const WORKLOAD_FILE_BYTES: u64 = 4 * 1024 * 1024 * 1024;
/// `sweep.request_timeout` and `sweep.stall_timeout`: at most a day.
pub const TIMEOUT: Duration = Duration::from_secs(24 * 3600);
/// `sweep.duration + warmup + cooldown`: at most a week.
pub const TRIAL_SPAN: Duration = Duration::from_secs(7 * 24 * 3600);
/// `sweep.rates`, requests/s.
pub const RATE_MIN: f64 = 1e-3;
pub const RATE_MAX: f64 = 1e6;
/// Requests one open-loop duration trial schedules (rate x span): every request of a
/// trial is held in memory until the trial ends.
pub const OPEN_LOOP_REQUESTS: f64 = 1_000_000.0;
/// `sweep.gamma_shape`: below 0.01 a schedule collapses into one burst.
pub const GAMMA_SHAPE_MIN: f64 = 0.01;
pub const GAMMA_SHAPE_MAX: f64 = 100.0;
/// `workload.input_tokens` (words of a synthetic prompt, built for every request).
pub const INPUT_TOKENS: u32 = 10_000_000;
/// `workload.prefix_groups`: distinct shared prefixes, each built once and held.
pub const PREFIX_GROUPS: u32 = 100_000;
/// `workload.max_tokens` (and so `min_tokens`, `degenerate_below`).
pub const MAX_TOKENS: u32 = 10_000_000;
/// `sweep.concurrency` levels and `sweep.max_concurrency`: each a socket and a task.
pub const CONCURRENCY: u32 = 65_536;
/// `sweep.requests_per_level` and `sweep.warmup_requests` (held in memory, as above).
pub const REQUESTS: u32 = 1_000_000;
/// `sweep.trials`.
pub const TRIALS: u32 = 1000;
/// `workload.dataset.turns`: user turns sent per conversation (each carries the ones
/// before it, so a conversation's last prompt holds all of them).
pub const TURNS: u32 = 256;
