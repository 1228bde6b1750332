//! How long response data waited in the socket before the client read it: the kernel's
//! receive time (wire_clock.rs) to the read. It is the direct measure of a client falling
//! behind; `headroom::judge_reads` compares a trial's p99 with its token gap.
//!
//! With it, the count of chunks the client could have mistimed: a content chunk that came
//! in one read with the chunk before it, from a read that waited over a millisecond. The
//! kernel keeps only the later arrival time when two chunks wait unread together, so such
//! a pair is one gap too long and the next one zero. (A server that writes two chunks at
//! once also gives one read, but the client, reading promptly, does not count it.)

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// How long data waited in the socket before the client read it, for every kernel-stamped
/// read of this process: a histogram with four buckets per doubling (bucket i holds delays
/// up to 2^((i+1)/4) - 1 µs), so a trial's quantiles are exact to within 19%.
const DELAY_BUCKETS: usize = 128;
static READ_DELAY_US: [AtomicU64; DELAY_BUCKETS] = [const { AtomicU64::new(0) }; DELAY_BUCKETS];
/// Content chunks of finished streams, and how many of them came in a late read together
/// with the chunk before them.
static CHUNKS: AtomicU64 = AtomicU64::new(0);
static LATE_MERGED_CHUNKS: AtomicU64 = AtomicU64::new(0);

/// A read that waited longer than this was late: the client was behind, and a chunk it
/// carries together with the one before may have arrived well before it is timed.
pub const LATE_READ: Duration = Duration::from_millis(1);

fn delay_bucket(delay_us: u64) -> usize {
    ((4.0 * ((delay_us + 1) as f64).log2()) as usize).min(DELAY_BUCKETS - 1)
}

fn bucket_upper_us(i: usize) -> f64 {
    2f64.powf((i + 1) as f64 / 4.0) - 1.0
}

fn bucket_lower_us(i: usize) -> f64 {
    2f64.powf(i as f64 / 4.0) - 1.0
}

/// The read-delay histogram and the chunk counts at one moment; the difference of two is a
/// trial's.
#[derive(Debug, Clone)]
pub struct ReadDelays {
    delays: [u64; DELAY_BUCKETS],
    /// Content chunks of the streams that ended.
    pub chunks: u64,
    /// Of them, chunks that came in a late read with the chunk before them.
    pub late_merged: u64,
}

impl ReadDelays {
    pub fn now() -> ReadDelays {
        ReadDelays {
            delays: std::array::from_fn(|i| READ_DELAY_US[i].load(Ordering::Relaxed)),
            chunks: CHUNKS.load(Ordering::Relaxed),
            late_merged: LATE_MERGED_CHUNKS.load(Ordering::Relaxed),
        }
    }

    /// The reads between `earlier` and this snapshot.
    pub fn since(&self, earlier: &ReadDelays) -> ReadDelays {
        ReadDelays {
            delays: std::array::from_fn(|i| self.delays[i].saturating_sub(earlier.delays[i])),
            chunks: self.chunks.saturating_sub(earlier.chunks),
            late_merged: self.late_merged.saturating_sub(earlier.late_merged),
        }
    }

    pub fn count(&self) -> u64 {
        self.delays.iter().sum()
    }

    /// A histogram of (delay in µs, reads) pairs, for tests.
    #[cfg(test)]
    pub fn of(delays: &[(u64, u64)]) -> ReadDelays {
        let mut h = ReadDelays {
            delays: [0; DELAY_BUCKETS],
            chunks: 0,
            late_merged: 0,
        };
        for &(us, n) in delays {
            h.delays[delay_bucket(us)] += n;
        }
        h
    }

    /// Reads that waited more than `ms`: whole buckets above it, and the share of the bucket
    /// it falls in that lies above it (reads spread evenly across a bucket).
    pub fn count_over_ms(&self, ms: f64) -> u64 {
        let limit_us = ms * 1000.0;
        let over: f64 = (0..DELAY_BUCKETS)
            .map(|i| {
                let (lo, hi) = (bucket_lower_us(i), bucket_upper_us(i));
                let share = if lo >= limit_us {
                    1.0
                } else if hi <= limit_us {
                    0.0
                } else {
                    (hi - limit_us) / (hi - lo)
                };
                share * self.delays[i] as f64
            })
            .sum();
        over.round() as u64
    }

    /// The `q`-quantile (0..=1) in ms, as its bucket's upper bound (never under-stated);
    /// `None` without reads.
    pub fn quantile_ms(&self, q: f64) -> Option<f64> {
        let n = self.count();
        if n == 0 {
            return None;
        }
        let rank = ((q * n as f64).ceil() as u64).clamp(1, n);
        let mut seen = 0;
        for (i, &c) in self.delays.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Some(bucket_upper_us(i) / 1000.0);
            }
        }
        None
    }
}

/// Counts a finished stream's content chunks, and those of them that came in a late read
/// with the chunk before them.
pub fn record_chunks(chunks: u64, late_merged: u64) {
    CHUNKS.fetch_add(chunks, Ordering::Relaxed);
    LATE_MERGED_CHUNKS.fetch_add(late_merged, Ordering::Relaxed);
}

/// Counts one kernel-stamped read whose data waited `waited`.
pub fn record(waited: Duration) {
    let us = u64::try_from(waited.as_micros()).unwrap_or(u64::MAX);
    READ_DELAY_US[delay_bucket(us)].fetch_add(1, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_delay_quantiles_never_understate() {
        for us in [0u64, 1, 5, 99, 1_000, 12_345, 20_000, 1_000_000] {
            let upper = bucket_upper_us(delay_bucket(us));
            assert!(
                upper >= us as f64 && upper <= (us as f64 + 1.0) * 1.19 + 1.0,
                "{us}: {upper}"
            );
        }
        let h = ReadDelays::of(&[(100, 99), (20_000, 1)]);
        assert!(h.quantile_ms(0.5).unwrap() < 0.2);
        assert!(h.quantile_ms(0.99).unwrap() < 0.2);
        assert!(h.quantile_ms(1.0).unwrap() >= 20.0);
        assert_eq!(ReadDelays::of(&[]).quantile_ms(0.5), None);
        assert_eq!(h.count_over_ms(10.0), 1);
        assert_eq!(h.count_over_ms(30.0), 0);
        assert_eq!(h.count_over_ms(0.0), 100);
        // A limit inside a bucket counts the part of the bucket above it.
        let b = delay_bucket(10_000);
        let (lo, hi) = (bucket_lower_us(b), bucket_upper_us(b));
        let h = ReadDelays::of(&[(10_000, 1000)]);
        let mid = (lo + hi) / 2.0 / 1000.0;
        assert_eq!(h.count_over_ms(mid), 500);
        assert_eq!(h.count_over_ms(lo / 1000.0), 1000);
        assert_eq!(h.count_over_ms(hi / 1000.0), 0);
    }
}
