//! Stopping a run cleanly on Ctrl-C (SIGINT) or SIGTERM: stop sending, give requests in
//! flight a short grace period, abandon the rest (counted as `cancelled`, so every request
//! sent is still accounted for), then write what was measured, marked incomplete.
//!
//! A second signal during the grace period abandons in-flight requests at once, and hurries
//! every other phase: servers and builds are killed rather than asked to stop.
//!
//! One switch serves the whole process ([`Interrupt::from_signals`]): once it listens, the
//! signals no longer kill throughline, so every phase that waits (a server loading, a
//! measurement, a build, the pause between blocks) must look at it.

use std::sync::atomic::{AtomicI32, AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::sync::watch;

/// How long requests in flight may still finish after the first signal.
pub const GRACE: Duration = Duration::from_secs(3);

/// Phases of a run, in order.
const RUNNING: u8 = 0;
const STOPPING: u8 = 1;
const ABANDON: u8 = 2;

/// The run's stop switch, shared by the sweep's workers.
#[derive(Clone)]
pub struct Interrupt {
    phase: watch::Sender<u8>,
    signal: Arc<AtomicI32>,
    /// How many stop requests came (the second one hurries).
    signals: Arc<AtomicU32>,
    grace: Duration,
}

/// The process's switch, listening to SIGINT and SIGTERM once [`Interrupt::from_signals`]
/// was first called.
static PROCESS: OnceLock<Interrupt> = OnceLock::new();

impl Default for Interrupt {
    fn default() -> Self {
        Interrupt::manual(GRACE)
    }
}

impl Interrupt {
    /// A switch nothing flips but [`Interrupt::trigger`] (tests, and runs without signals).
    pub fn manual(grace: Duration) -> Interrupt {
        Interrupt {
            phase: watch::Sender::new(RUNNING),
            signal: Arc::new(AtomicI32::new(0)),
            signals: Arc::new(AtomicU32::new(0)),
            grace,
        }
    }

    /// The process's switch, flipped by SIGINT or SIGTERM: the same one for every caller,
    /// so that a signal in any phase (a server loading, a build, between blocks) is seen by
    /// the next. The first call must be inside the tokio runtime; the listening task ends
    /// with the runtime. Once installed, the signals no longer kill the process: the run
    /// decides when to exit.
    pub fn from_signals() -> Interrupt {
        PROCESS
            .get_or_init(|| {
                let this = Interrupt::default();
                let listener = this.clone();
                tokio::spawn(async move {
                    loop {
                        match next_signal().await {
                            Some(sig) => listener.trigger(sig),
                            None => return,
                        }
                    }
                });
                this
            })
            .clone()
    }

    /// The process's switch if something installed it (None: signals still kill).
    pub fn installed() -> Option<Interrupt> {
        PROCESS.get().cloned()
    }

    /// Records a stop request for signal `sig` (2 = SIGINT, 15 = SIGTERM). The first starts
    /// the grace period; a second abandons in-flight requests at once.
    pub fn trigger(&self, sig: i32) {
        self.signals.fetch_add(1, Ordering::SeqCst);
        let first = self
            .signal
            .compare_exchange(0, sig, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok();
        if first {
            self.phase.send_replace(STOPPING);
            let phase = self.phase.clone();
            let grace = self.grace;
            tokio::spawn(async move {
                tokio::time::sleep(grace).await;
                phase.send_replace(ABANDON);
            });
        } else {
            self.phase.send_replace(ABANDON);
        }
    }

    /// The signal that stopped the run, if one did.
    pub fn signal(&self) -> Option<i32> {
        match self.signal.load(Ordering::SeqCst) {
            0 => None,
            s => Some(s),
        }
    }

    /// True once a stop was requested: send nothing new.
    pub fn is_stopping(&self) -> bool {
        *self.phase.borrow() >= STOPPING
    }

    /// Resolves when requests still in flight must be abandoned (never, if no stop comes).
    pub async fn abandoned(&self) {
        let mut rx = self.phase.subscribe();
        let _ = rx.wait_for(|p| *p >= ABANDON).await;
    }

    /// Resolves once a stop is requested (never, if none comes).
    pub async fn stopping(&self) {
        let mut rx = self.phase.subscribe();
        let _ = rx.wait_for(|p| *p >= STOPPING).await;
    }

    /// True once a second stop request came: kill rather than ask, exit now.
    pub fn is_hurried(&self) -> bool {
        self.signals.load(Ordering::SeqCst) >= 2
    }

    /// Resolves once a second stop request came (never, if none comes).
    pub async fn hurried(&self) {
        let mut rx = self.phase.subscribe();
        loop {
            if self.is_hurried() {
                return;
            }
            if rx.changed().await.is_err() {
                return std::future::pending().await;
            }
        }
    }

    /// An error that carries the exit code of the signal that stopped the run (130, 143), so
    /// that callers tell a stop from a failure. None when no stop was requested.
    pub fn error(&self, what: impl std::fmt::Display) -> Option<anyhow::Error> {
        let sig = self.signal()?;
        Some(
            crate::exit::CodedError {
                exit: crate::exit::Exit::Interrupted(sig),
                message: format!("interrupted by {}: {what}", signal_name(sig)),
            }
            .into(),
        )
    }
}

/// "SIGINT", "SIGTERM": a signal's name for messages.
pub fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGINT => "SIGINT",
        libc::SIGTERM => "SIGTERM",
        _ => "a signal",
    }
}

/// The next SIGINT or SIGTERM as its number; None when signals cannot be watched.
async fn next_signal() -> Option<i32> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let mut int = signal(SignalKind::interrupt()).ok()?;
        let mut term = signal(SignalKind::terminate()).ok()?;
        tokio::select! {
            _ = int.recv() => Some(libc::SIGINT),
            _ = term.recv() => Some(libc::SIGTERM),
        }
    }
    #[cfg(not(unix))]
    {
        tokio::signal::ctrl_c().await.ok()?;
        Some(2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn first_signal_stops_second_abandons() {
        let i = Interrupt::manual(Duration::from_secs(60));
        assert!(!i.is_stopping() && i.signal().is_none());
        i.trigger(15);
        assert!(i.is_stopping());
        assert_eq!(i.signal(), Some(15));
        let early = tokio::time::timeout(Duration::from_millis(50), i.abandoned()).await;
        assert!(early.is_err(), "abandoned before the grace period ended");
        i.trigger(2);
        assert_eq!(
            i.signal(),
            Some(15),
            "the first signal decides the exit code"
        );
        tokio::time::timeout(Duration::from_secs(1), i.abandoned())
            .await
            .expect("second signal abandons at once");
    }

    #[tokio::test]
    async fn grace_period_ends_in_abandon() {
        let i = Interrupt::manual(Duration::from_millis(20));
        i.trigger(2);
        tokio::time::timeout(Duration::from_secs(1), i.abandoned())
            .await
            .expect("abandon after the grace period");
    }
}
