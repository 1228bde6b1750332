//! How the tests share this machine. A timed test (`timing_lock`) runs with no other test's
//! processes beside it, but with at most one other timed test: each is mostly asleep, waiting
//! on simulated servers (a relative bench of gate_cli used 0.5 s of CPU in 11.5 s; the
//! machine's load was about 0.5 while they ran one at a time). Every other test shares the
//! machine (`share_machine`) from its first process on, as many at once as libtest runs.

use std::sync::{Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

/// Timed tests that may run at once, where `THROUGHLINE_TEST_TIMED_AT_ONCE` does not say
/// (1: each alone, as before this was measured). Never more than the machine's cores.
const TIMED_AT_ONCE: usize = 2;

struct State {
    /// Tests running beside each other that started a process (they took a share).
    sharing: usize,
    /// Of the [`timed_slots`], those the running timed tests hold: one each, all for one
    /// that wants the machine to itself.
    slots_held: usize,
    /// Timed tests waiting for their turn: while one waits no share is given, so the timed
    /// tests go first (otherwise one waits until no test at all wants the machine).
    timed_waiting: usize,
    /// Timed tests waiting for the machine to themselves: no other timed test starts
    /// meanwhile.
    alone_waiting: usize,
}

static STATE: Mutex<State> = Mutex::new(State {
    sharing: 0,
    slots_held: 0,
    timed_waiting: 0,
    alone_waiting: 0,
});
static CHANGED: Condvar = Condvar::new();

fn state() -> MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(|e| e.into_inner())
}

fn wait(guard: MutexGuard<'static, State>) -> MutexGuard<'static, State> {
    CHANGED.wait(guard).unwrap_or_else(|e| e.into_inner())
}

/// How many timed tests may run at once, read once for the whole binary.
fn timed_slots() -> usize {
    static SLOTS: OnceLock<usize> = OnceLock::new();
    *SLOTS.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        std::env::var("THROUGHLINE_TEST_TIMED_AT_ONCE")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(TIMED_AT_ONCE)
            .clamp(1, cores)
    })
}

/// A share of the machine, given back when the test's thread ends.
struct Share;

impl Drop for Share {
    fn drop(&mut self) {
        state().sharing -= 1;
        CHANGED.notify_all();
    }
}

/// What the current test thread holds of the machine.
enum Hold {
    Nothing,
    Shared(#[allow(dead_code)] Share),
    Timed,
}

thread_local! {
    static HOLD: std::cell::RefCell<Hold> = const { std::cell::RefCell::new(Hold::Nothing) };
}

/// Held by a timing-sensitive test while it runs.
pub struct TimingGuard {
    /// The slots it holds (`State::slots_held`).
    slots: usize,
    waited: Duration,
    since: Instant,
}

impl Drop for TimingGuard {
    fn drop(&mut self) {
        HOLD.with(|h| *h.borrow_mut() = Hold::Nothing);
        state().slots_held -= self.slots;
        CHANGED.notify_all();
        // Where the suite's time goes (THROUGHLINE_TEST_LOCK_LOG=FILE): each timing test's
        // wait for the machine and how long it held it, a line each.
        if let Some(log) = std::env::var_os("THROUGHLINE_TEST_LOCK_LOG") {
            let line = format!(
                "{}\twaited {:.1}\theld {:.1}\n",
                std::thread::current().name().unwrap_or("?"),
                self.waited.as_secs_f64(),
                self.since.elapsed().as_secs_f64()
            );
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(log);
            let _ = file.and_then(|mut f| std::io::Write::write_all(&mut f, line.as_bytes()));
        }
    }
}

/// Timing-sensitive tests run with no other test's processes beside them: a bench beside
/// another test's processes on a 2-core machine measures them too (an in-process client was
/// refused as saturated, explain read a neighbour as a change; beside other tests in Linux's
/// idle scheduling class, a bisect step and a same-speed check came out undecided). Another
/// timed test may run beside one ([`TIMED_AT_ONCE`]). Waits until no other test has a process
/// running and keeps every other test from starting one until the guard drops. The timed
/// tests live under tests/it/alone/, whose name libtest starts first: they run from the
/// start, and the rest after them, `TEST_THREADS` (main.rs) at a time.
pub fn timing_lock() -> TimingGuard {
    take_turn(false)
}

/// [`timing_lock`] for a test that wants the machine to itself, no other timed test beside
/// it: one whose assertion is a rate calibrated so (honest_gate's).
pub fn timing_lock_alone() -> TimingGuard {
    take_turn(true)
}

fn take_turn(alone: bool) -> TimingGuard {
    // A share this thread took earlier would wait for itself.
    HOLD.with(|h| *h.borrow_mut() = Hold::Nothing);
    let asked = Instant::now();
    let slots = if alone { timed_slots() } else { 1 };
    let mut s = state();
    s.timed_waiting += 1;
    s.alone_waiting += usize::from(alone);
    while s.sharing > 0 || s.slots_held + slots > timed_slots() || (!alone && s.alone_waiting > 0) {
        s = wait(s);
    }
    s.timed_waiting -= 1;
    s.alone_waiting -= usize::from(alone);
    s.slots_held += slots;
    drop(s);
    HOLD.with(|h| *h.borrow_mut() = Hold::Timed);
    TimingGuard {
        slots,
        waited: asked.elapsed(),
        since: Instant::now(),
    }
}

/// Called before a test starts a process, a server thread or a clock: from then until the
/// test ends (libtest runs each test on a thread of its own, whose end drops the share), no
/// timing test runs beside it. A timing test's own processes need nothing more. Waits while
/// a timing test runs or waits to run: so a test that times something takes its share
/// before its clock starts, or the wait is timed too (two tests failed so, at 107 s and
/// 54 s, with 4 test threads).
pub fn share_machine() {
    HOLD.with(|h| {
        let mut h = h.borrow_mut();
        if matches!(*h, Hold::Nothing) {
            let mut s = state();
            while s.slots_held > 0 || s.timed_waiting > 0 {
                s = wait(s);
            }
            s.sharing += 1;
            *h = Hold::Shared(Share);
        }
    });
}
