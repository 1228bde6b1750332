//! What a run shows while it runs: on a terminal, a bar with the current trial's live tok/s,
//! its errors and the whole run's ETA; off a terminal (CI logs), one line every ~30 s with
//! the same figures, so a long level is not silent until it ends.
//!
//! The time a run will take is an estimate and is always called one: timed trials (duration,
//! open-loop counts) are known up front; closed-loop trials of N requests are estimated from
//! the requests that finished so far (per level once a level has run, else from the mean
//! request time scaled by the level's concurrency), and refined as levels finish.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::record::RequestRecord;

/// How progress is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// An indicatif bar on stderr (a terminal).
    Bar,
    /// A line on stderr every `every` (CI logs).
    Lines { every: Duration },
    /// Nothing (`--no-progress`, self-benchmarks).
    Off,
}

/// The interval of progress lines off a terminal: `THROUGHLINE_PROGRESS_INTERVAL` (a
/// humantime duration such as `200ms`, for tests) or 30 s.
pub fn line_interval() -> Duration {
    std::env::var("THROUGHLINE_PROGRESS_INTERVAL")
        .ok()
        .and_then(|v| humantime::parse_duration(v.trim()).ok())
        .filter(|d| !d.is_zero())
        .unwrap_or(Duration::from_secs(30))
}

/// One piece of the run's work, in the order it runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Step {
    /// An index naming the level (and arm) whose speed the step shares.
    pub level: usize,
    pub kind: StepKind,
}

/// How long a step takes, as far as it is known before it runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum StepKind {
    /// A trial of fixed length (duration windows, or an open-loop schedule), in seconds.
    Timed { seconds: f64, requests: Option<u64> },
    /// `requests` sent closed-loop by `concurrency` workers (trials and warmups).
    Closed { requests: u64, concurrency: u32 },
}

impl Step {
    fn requests(&self) -> Option<u64> {
        match self.kind {
            StepKind::Timed { requests, .. } => requests,
            StepKind::Closed { requests, .. } => Some(requests),
        }
    }
}

/// What the finished steps taught about speed.
#[derive(Debug, Default, Clone)]
struct Learned {
    /// Per level: (seconds, requests) of its finished closed-loop steps.
    per_level: Vec<(f64, u64)>,
    /// Sum and count of every finished request's E2E (seconds).
    e2e_sum: f64,
    e2e_n: u64,
}

impl Learned {
    /// Seconds `step` is expected to take; `None` while nothing tells.
    fn estimate(&self, step: &Step) -> Option<f64> {
        match step.kind {
            StepKind::Timed { seconds, .. } => Some(seconds),
            StepKind::Closed {
                requests,
                concurrency,
            } => {
                if let Some(&(s, n)) = self.per_level.get(step.level).filter(|(_, n)| *n > 0) {
                    return Some(s / n as f64 * requests as f64);
                }
                (self.e2e_n > 0).then(|| {
                    let rounds = requests.div_ceil(u64::from(concurrency.max(1)));
                    rounds as f64 * self.e2e_sum / self.e2e_n as f64
                })
            }
        }
    }
}

/// The state the bar and the lines read.
#[derive(Debug)]
struct State {
    steps: Vec<Step>,
    learned: Learned,
    /// The step running now (index into `steps`), its name and when it started.
    current: usize,
    label: String,
    started: Instant,
    done: u64,
    errors: u64,
    tokens: u64,
}

impl State {
    /// Seconds left in the run (the current step's remainder and every later step), and
    /// whether every step could be estimated.
    fn remaining(&self) -> (f64, bool) {
        let mut known = true;
        let mut left = 0.0;
        for (i, step) in self.steps.iter().enumerate().skip(self.current) {
            match self.learned.estimate(step) {
                Some(s) if i == self.current => {
                    let elapsed = self.started.elapsed().as_secs_f64();
                    left += match (step.requests(), step.kind) {
                        // Closed loop: what the requests so far say about the rest.
                        (Some(n), StepKind::Closed { .. }) if self.done > 0 => {
                            elapsed / self.done as f64 * n.saturating_sub(self.done) as f64
                        }
                        _ => (s - elapsed).max(0.0),
                    };
                }
                Some(s) => left += s,
                None => known = false,
            }
        }
        (left, known)
    }

    fn tok_per_s(&self) -> f64 {
        let elapsed = self.started.elapsed().as_secs_f64();
        if elapsed > 0.0 {
            self.tokens as f64 / elapsed
        } else {
            0.0
        }
    }

    fn eta(&self) -> String {
        match self.remaining() {
            (s, true) => format!("ETA ~{} (estimate)", short(s)),
            (s, false) if s > 0.0 => format!("ETA over {} (estimate)", short(s)),
            _ => "ETA after the first requests".to_string(),
        }
    }

    /// "C=8 trial 2/5: 120/400 requests, 1,234 tok/s, 0 errors; run ETA ~2m10s (estimate)".
    fn line(&self) -> String {
        let total = match self.steps.get(self.current).and_then(Step::requests) {
            Some(n) => format!("{}/{n}", self.done),
            None => self.done.to_string(),
        };
        format!(
            "{}: {total} requests, {} tok/s so far, {} errors; run {}",
            self.label,
            thousands(self.tok_per_s()),
            self.errors,
            self.eta()
        )
    }

    fn message(&self) -> String {
        format!(
            "{}  {} tok/s  {} errors  {}",
            self.label,
            thousands(self.tok_per_s()),
            self.errors,
            self.eta()
        )
    }
}

/// The run's progress display, shared by the workers.
pub struct Progress {
    mode: Mode,
    bar: indicatif::ProgressBar,
    state: Arc<Mutex<State>>,
    ticker: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Progress {
    /// A display for `steps`, with `requests` the requests the run plans to send (0 when
    /// its trials are timed).
    pub fn new(mode: Mode, steps: Vec<Step>, requests: u64) -> Progress {
        let bar = match mode {
            Mode::Bar => indicatif::ProgressBar::new(requests),
            _ => indicatif::ProgressBar::hidden(),
        };
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} requests  {msg}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        let state = State {
            steps,
            learned: Learned::default(),
            current: 0,
            label: String::new(),
            started: Instant::now(),
            done: 0,
            errors: 0,
            tokens: 0,
        };
        Progress {
            mode,
            bar,
            state: Arc::new(Mutex::new(state)),
            ticker: Mutex::new(None),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts the periodic lines. (The run's size and first estimate are said once, before
    /// the table, by `report::console::planned`.)
    pub fn start(&self) {
        if self.mode == Mode::Off {
            return;
        }
        if let Mode::Lines { every } = self.mode {
            let state = Arc::clone(&self.state);
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                let task = rt.spawn(async move {
                    let mut tick = tokio::time::interval(every);
                    tick.tick().await;
                    loop {
                        tick.tick().await;
                        let line = state.lock().unwrap_or_else(|e| e.into_inner()).line();
                        eprintln!("progress: {line}");
                    }
                });
                *self.ticker.lock().unwrap_or_else(|e| e.into_inner()) = Some(task);
            }
        }
    }

    /// Step `index` of the plan begins, named `label` ("C=8 trial 2/5").
    pub fn begin(&self, index: usize, label: String) {
        let mut s = self.state();
        s.current = index.min(s.steps.len());
        s.label = label;
        s.started = Instant::now();
        (s.done, s.errors, s.tokens) = (0, 0, 0);
        self.bar.set_message(s.message());
    }

    /// A request finished.
    pub fn request_done(&self, r: &RequestRecord) {
        let mut s = self.state();
        s.done += 1;
        match r.error {
            Some(_) => s.errors += 1,
            None => s.tokens += r.output_tokens,
        }
        s.learned.e2e_sum += r.e2e_ms.max(0.0) / 1000.0;
        s.learned.e2e_n += 1;
        self.bar.set_message(s.message());
        self.bar.inc(1);
    }

    /// The current step ended: its speed refines the estimate of the steps left.
    pub fn end_step(&self) {
        let mut s = self.state();
        let Some(step) = s.steps.get(s.current).copied() else {
            return;
        };
        if let StepKind::Closed { .. } = step.kind {
            let (elapsed, done) = (s.started.elapsed().as_secs_f64(), s.done);
            let learned = &mut s.learned;
            if learned.per_level.len() <= step.level {
                learned.per_level.resize(step.level + 1, (0.0, 0));
            }
            learned.per_level[step.level] = (elapsed, done);
        }
        let first = s.current == 0;
        s.current += 1;
        let (left, known) = s.remaining();
        // The first estimate of a closed-loop run's length, once there is one.
        if first && self.mode != Mode::Off && s.current < s.steps.len() && known {
            let line = format!(
                "Estimated time left: ~{} (an estimate from the requests so far; refined as \
                 levels finish)",
                short(left)
            );
            self.bar.suspend(|| eprintln!("{line}"));
        }
    }

    /// Runs `f` with the bar hidden (for printing a level's table).
    pub fn suspend<R>(&self, f: impl FnOnce() -> R) -> R {
        self.bar.suspend(f)
    }

    /// Clears the bar and stops the lines.
    pub fn finish(&self) {
        if let Some(task) = self.ticker.lock().unwrap_or_else(|e| e.into_inner()).take() {
            task.abort();
        }
        self.bar.finish_and_clear();
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(task) = self.ticker.lock().unwrap_or_else(|e| e.into_inner()).take() {
            task.abort();
        }
    }
}

/// "2m10s", "45s", "1h03m": whole seconds, short.
fn short(seconds: f64) -> String {
    let s = seconds.max(0.0).round() as u64;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}

/// 1234567.8 -> "1,234,568".
fn thousands(x: f64) -> String {
    let digits = (x.max(0.0).round() as u64).to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn closed(level: usize, requests: u64, concurrency: u32) -> Step {
        Step {
            level,
            kind: StepKind::Closed {
                requests,
                concurrency,
            },
        }
    }

    #[test]
    fn timed_steps_are_known_up_front_and_closed_ones_learned() {
        let timed = Step {
            level: 0,
            kind: StepKind::Timed {
                seconds: 60.0,
                requests: None,
            },
        };
        let mut l = Learned::default();
        assert_eq!(l.estimate(&timed), Some(60.0));
        assert_eq!(l.estimate(&closed(0, 40, 8)), None);
        // Mean request 2 s: 40 requests by 8 workers are 5 rounds of 2 s.
        l.e2e_sum = 20.0;
        l.e2e_n = 10;
        assert_eq!(l.estimate(&closed(1, 40, 8)), Some(10.0));
        // A level that ran: its own speed (30 s for 60 requests) wins.
        l.per_level = vec![(0.0, 0), (30.0, 60)];
        assert_eq!(l.estimate(&closed(1, 40, 8)), Some(20.0));
    }

    #[test]
    fn numbers_read_well() {
        assert_eq!(short(59.4), "59s");
        assert_eq!(short(130.0), "2m10s");
        assert_eq!(short(3780.0), "1h03m");
        assert_eq!(thousands(1234567.8), "1,234,568");
        assert_eq!(thousands(12.0), "12");
    }
}
