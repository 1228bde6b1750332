//! What this process uses: its CPU time (getrusage) and its resident memory (/proc), read
//! once or sampled for a peak.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// User + system CPU time of this process so far (all threads).
pub fn process_cpu() -> Duration {
    // SAFETY: getrusage writes into the zeroed struct we own; RUSAGE_SELF is always valid.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    if rc != 0 {
        return Duration::ZERO;
    }
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// The resident set size of this process, from /proc/self/status (Linux), in bytes.
pub fn rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Peak resident memory of this process above what it held at the start, sampled every 5 ms
/// on a thread of its own.
pub struct PeakRss {
    idle: u64,
    peak: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    sampler: std::thread::JoinHandle<()>,
}

impl PeakRss {
    pub fn start() -> PeakRss {
        let stop = Arc::new(AtomicBool::new(false));
        let peak = Arc::new(AtomicU64::new(0));
        let idle = rss_bytes().unwrap_or(0);
        let sampler = {
            let (stop, peak) = (Arc::clone(&stop), Arc::clone(&peak));
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    if let Some(rss) = rss_bytes() {
                        peak.fetch_max(rss, Ordering::Relaxed);
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
            })
        };
        PeakRss {
            idle,
            peak,
            stop,
            sampler,
        }
    }

    /// (idle RSS, peak RSS).
    pub fn finish(self) -> (u64, u64) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.sampler.join();
        let peak = self.peak.load(Ordering::Relaxed).max(self.idle);
        (self.idle, peak)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_and_rss_are_read() {
        let before = process_cpu();
        let mut x = 0u64;
        for i in 0..5_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        assert!(process_cpu() > before);
        assert!(rss_bytes().unwrap() > 1024 * 1024);
    }
}
