//! Percentiles in bounded memory: a trial's latencies (every token's gap at a million tokens a
//! second) are kept exactly while they are few, and folded into an HDR histogram once they
//! are many, so a trial's memory stops growing with its length.
//!
//! Exact path (up to [`EXACT_LIMIT`] values): the same figures as
//! [`Percentiles::from_values`], bit for bit. Sketched path: count, mean, min and max stay
//! exact; p50/p90/p99 are the value at the nearest rank, within [`RELATIVE_ERROR`] of it (an
//! HDR histogram at [`SIGNIFICANT_DIGITS`] significant digits, values in nanoseconds, as
//! HdrHistogram and wrk2 report latencies). Sketches merge (trials of a level, workers of a
//! trial) without losing that bound.

use hdrhistogram::Histogram;

use super::summary::{Percentiles, Sample};

/// Values kept exactly before the sketch takes over: 65,536 (256 KiB as f32, 512 KiB as
/// f64), so a trial holds at most that per figure whatever its length. A CI trial of a few
/// hundred requests stays exact, TTFT and E2E of up to 65,536 requests too; an hour's
/// trial is sketched, its percentiles marked with their error
/// ([`Percentiles::relative_error`]). Past this, the interpolation between neighbouring
/// ranks that the exact path does is far below the histogram's resolution.
pub const EXACT_LIMIT: usize = 1 << 16;

/// The histogram's precision: 3 significant digits, the field's usual setting.
pub const SIGNIFICANT_DIGITS: u8 = 3;

/// The largest relative error of a sketched percentile: 10^-3 (half a bucket either side of
/// the bucket's midpoint is 1/2048 or less at 3 significant digits; stated as 0.1%).
pub const RELATIVE_ERROR: f64 = 1e-3;

/// Values are recorded as whole nanoseconds of a millisecond figure.
const NS_PER_UNIT: f64 = 1e6;

/// A stream of latencies (ms) with its percentiles: exact while small, sketched when large.
#[derive(Debug, Clone)]
pub struct LatencySketch<T: Sample> {
    exact: Vec<T>,
    /// Present once the values outgrew [`EXACT_LIMIT`]; every value since the start is in it.
    sketch: Option<Sketched>,
    limit: usize,
}

#[derive(Debug, Clone)]
struct Sketched {
    hist: Histogram<u64>,
    sum: f64,
    min: f64,
    max: f64,
}

impl<T: Sample> Default for LatencySketch<T> {
    fn default() -> Self {
        Self::with_limit(EXACT_LIMIT)
    }
}

impl<T: Sample> LatencySketch<T> {
    pub fn new() -> Self {
        Self::default()
    }

    /// A sketch that keeps at most `limit` values exactly (tests use a small one).
    pub fn with_limit(limit: usize) -> Self {
        LatencySketch {
            exact: Vec::new(),
            sketch: None,
            limit,
        }
    }

    /// Values recorded (NaN is ignored).
    pub fn count(&self) -> u64 {
        match &self.sketch {
            Some(s) => s.hist.len(),
            None => self.exact.len() as u64,
        }
    }

    /// True once the values are summarised by the histogram (percentiles are then within
    /// [`RELATIVE_ERROR`]).
    pub fn is_sketched(&self) -> bool {
        self.sketch.is_some()
    }

    pub fn record(&mut self, value: T) {
        if value.is_nan() {
            return;
        }
        match &mut self.sketch {
            Some(s) => s.add(value.into()),
            None => {
                // Grown by doubling, but never past the limit (no 2x overshoot at the end).
                if self.exact.len() == self.exact.capacity() {
                    let want = (self.exact.len() * 2).clamp(64, self.limit + 1);
                    self.exact
                        .reserve_exact(want.saturating_sub(self.exact.len()).max(1));
                }
                self.exact.push(value);
                if self.exact.len() > self.limit {
                    self.spill();
                }
            }
        }
    }

    pub fn extend(&mut self, values: impl IntoIterator<Item = T>) {
        for v in values {
            self.record(v);
        }
    }

    /// Adds every value of `other`.
    pub fn merge(&mut self, other: LatencySketch<T>) {
        match other.sketch {
            None => self.extend(other.exact),
            Some(theirs) => {
                self.spill();
                if let Some(mine) = &mut self.sketch {
                    mine.merge(&theirs);
                }
            }
        }
    }

    /// The summary: exact figures while the values were kept, sketched ones after.
    pub fn percentiles(mut self) -> Option<Percentiles> {
        match self.sketch {
            None => Percentiles::from_values(&mut self.exact),
            Some(s) => s.percentiles(),
        }
    }

    /// Moves the exact values into the histogram and frees them.
    fn spill(&mut self) {
        let s = self.sketch.get_or_insert_with(Sketched::new);
        for v in std::mem::take(&mut self.exact) {
            s.add(v.into());
        }
    }
}

impl Sketched {
    fn new() -> Self {
        Sketched {
            // Auto-resizing: the range grows with the largest value seen.
            hist: Histogram::new(SIGNIFICANT_DIGITS).expect("3 significant digits is valid"),
            sum: 0.0,
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
        }
    }

    fn add(&mut self, ms: f64) {
        // Negative latencies cannot be measured; a clock step is clamped to zero.
        let ns = (ms * NS_PER_UNIT).round().clamp(0.0, u64::MAX as f64 / 4.0) as u64;
        // Auto-resizing histograms accept any u64 below their hard maximum.
        let _ = self.hist.record(ns);
        self.sum += ms;
        self.min = self.min.min(ms);
        self.max = self.max.max(ms);
    }

    fn merge(&mut self, other: &Sketched) {
        let _ = self.hist.add(&other.hist);
        self.sum += other.sum;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
    }

    fn percentiles(&self) -> Option<Percentiles> {
        let count = self.hist.len();
        if count == 0 {
            return None;
        }
        // The bucket's midpoint, clamped to what was seen, so p99 never passes the max.
        let at = |q: f64| {
            let v = self.hist.value_at_quantile(q);
            (self.hist.median_equivalent(v) as f64 / NS_PER_UNIT).clamp(self.min, self.max)
        };
        Some(Percentiles {
            p50: at(0.50),
            p90: at(0.90),
            p99: at(0.99),
            mean: self.sum / count as f64,
            min: self.min,
            max: self.max,
            count,
            relative_error: Some(RELATIVE_ERROR),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn values(n: usize, seed: u64) -> Vec<f64> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        // Lognormal-ish latencies from 0.05 ms to a few seconds.
        (0..n)
            .map(|_| (rng.gen::<f64>() * 10.0 - 3.0).exp())
            .collect()
    }

    #[test]
    fn small_streams_give_exactly_the_exact_figures() {
        let v: Vec<f32> = values(5_000, 1).into_iter().map(|x| x as f32).collect();
        let mut s = LatencySketch::new();
        s.extend(v.iter().copied());
        s.record(f32::NAN);
        assert!(!s.is_sketched());
        let want = Percentiles::from_values(&mut v.clone()).unwrap();
        assert_eq!(s.percentiles().unwrap(), want);
        assert!(LatencySketch::<f64>::new().percentiles().is_none());
    }

    #[test]
    fn large_streams_are_within_the_stated_relative_error() {
        let v = values(200_000, 2);
        let mut s = LatencySketch::with_limit(1_000);
        s.extend(v.iter().copied());
        assert!(s.is_sketched());
        assert_eq!(s.count(), 200_000);
        let got = s.percentiles().unwrap();
        let mut sorted = v.clone();
        sorted.sort_by(f64::total_cmp);
        let exact = Percentiles::from_values(&mut v.clone()).unwrap();
        for (q, g) in [(0.50, got.p50), (0.90, got.p90), (0.99, got.p99)] {
            // The nearest-rank value, as the histogram defines a quantile.
            let rank = ((q * sorted.len() as f64).ceil() as usize).max(1) - 1;
            let want = sorted[rank];
            assert!(
                (g - want).abs() <= RELATIVE_ERROR * want,
                "q={q}: {g} vs {want}"
            );
        }
        assert_eq!(
            (got.min, got.max, got.count),
            (exact.min, exact.max, 200_000)
        );
        // Said so: the exact path's figures carry no error, the histogram's carry its bound.
        assert_eq!(
            (got.relative_error, exact.relative_error),
            (Some(RELATIVE_ERROR), None)
        );
        assert!((got.mean - exact.mean).abs() <= 1e-9 * exact.mean);
    }

    #[test]
    fn merged_sketches_equal_one_sketch_of_all_values() {
        let v = values(30_000, 3);
        let mut whole = LatencySketch::with_limit(5_000);
        whole.extend(v.iter().copied());
        let mut parts: Vec<LatencySketch<f64>> = v
            .chunks(7_000)
            .map(|c| {
                let mut s = LatencySketch::with_limit(5_000);
                s.extend(c.iter().copied());
                s
            })
            .collect();
        let mut merged = parts.remove(0);
        for p in parts {
            merged.merge(p);
        }
        let (a, b) = (merged.percentiles().unwrap(), whole.percentiles().unwrap());
        assert_eq!(
            (a.p50, a.p90, a.p99, a.count),
            (b.p50, b.p90, b.p99, b.count)
        );
        assert!((a.mean - b.mean).abs() <= 1e-12 * b.mean);
        // Two small exact sketches merge exactly.
        let mut x = LatencySketch::<f64>::new();
        x.extend([3.0, 1.0]);
        let mut y = LatencySketch::new();
        y.extend([2.0]);
        x.merge(y);
        assert_eq!(x.percentiles().unwrap().p50, 2.0);
    }

    /// The memory a sketch holds does not grow with the values it has seen.
    #[test]
    fn memory_stops_growing_past_the_limit() {
        let mut s = LatencySketch::<f32>::with_limit(1_000);
        let mut rng = ChaCha8Rng::seed_from_u64(4);
        for _ in 0..2_000 {
            s.record(rng.gen_range(0.01f32..50.0));
        }
        let size = |s: &LatencySketch<f32>| {
            s.exact.capacity() * 4
                + s.sketch
                    .as_ref()
                    .map_or(0, |k| k.hist.distinct_values() * 8)
        };
        let before = size(&s);
        for _ in 0..200_000 {
            s.record(rng.gen_range(0.01f32..50.0));
        }
        assert_eq!(size(&s), before);
        assert_eq!(s.exact.capacity(), 0);
    }
}
