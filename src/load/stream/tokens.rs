//! From chunk arrival times to per-token figures.
//!
//! A chunk may carry several tokens (speculative decoding, MTP, or a server that batches its
//! writes). Inter-token latency is per token: a chunk carrying k tokens after a gap g
//! contributes k gaps of g/k. The first chunk's extra tokens arrived with the first token, so
//! they contribute gaps of zero; that way the mean ITL of a request equals its TPOT.

use crate::record::TokenSource;

/// The content chunks of one response, as the client saw them, kept in 6 bytes a chunk (8
/// with per-chunk counts): a run holds this for every open stream (4,096 streams of 2,048
/// tokens are 8 million chunks), so it is stored in columns, not as one struct per chunk.
///
/// The first chunk's time is kept exactly; each later chunk's time is kept as whole
/// microseconds after the one before, rounded from its offset to the first chunk, so summing
/// the gaps never drifts. A single gap saturates at `u32::MAX` µs (71 minutes), far past any
/// stall timeout.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChunkLog {
    /// Seconds since the run started, of the first chunk.
    first_at_s: Option<f64>,
    /// The last chunk's offset from the first, in µs.
    last_offset_us: u64,
    /// One per chunk after the first: µs since the chunk before.
    gaps_us: Vec<u32>,
    /// Characters of generated text per chunk, saturating at 65,535 (only used to spread a
    /// total over chunks in proportion to their text; streamed chunks are a few characters).
    chars: Vec<u16>,
    /// Tokens each chunk added to the server's running count of completion tokens (vLLM's
    /// `continuous_usage_stats`; a count that went back adds none), kept only while every
    /// chunk so far carried a count.
    reported: Vec<u16>,
    /// The highest running count so far.
    running: u64,
    /// True once a chunk came without a running count (or added more than 65,535 tokens).
    some_chunk_uncounted: bool,
}

impl ChunkLog {
    pub fn new() -> Self {
        ChunkLog::default()
    }

    /// Records a chunk that arrived at `at_s` (seconds since the run started).
    pub fn push(&mut self, at_s: f64, text_chars: usize, cumulative_tokens: Option<u64>) {
        match self.first_at_s {
            None => self.first_at_s = Some(at_s),
            Some(first) => {
                let offset_us = ((at_s - first) * 1e6).round().max(0.0) as u64;
                let gap = offset_us.saturating_sub(self.last_offset_us);
                self.gaps_us.push(u32::try_from(gap).unwrap_or(u32::MAX));
                self.last_offset_us = self.last_offset_us.max(offset_us);
            }
        }
        self.chars
            .push(u16::try_from(text_chars).unwrap_or(u16::MAX));
        let added = cumulative_tokens.and_then(|n| {
            let added = n.saturating_sub(self.running);
            self.running = self.running.max(n);
            u16::try_from(added).ok()
        });
        match added {
            Some(k) if !self.some_chunk_uncounted => self.reported.push(k),
            _ => {
                self.some_chunk_uncounted = true;
                self.reported = Vec::new();
            }
        }
    }

    pub fn len(&self) -> usize {
        self.chars.len()
    }

    pub fn is_empty(&self) -> bool {
        self.chars.is_empty()
    }

    /// When the first content chunk arrived (seconds since the run started).
    pub fn first_at_s(&self) -> Option<f64> {
        self.first_at_s
    }

    /// When every chunk arrived (seconds since the run started).
    pub fn times_s(&self) -> impl Iterator<Item = f64> + '_ {
        let first = self.first_at_s.unwrap_or(0.0);
        let mut offset_us = 0u64;
        self.first_at_s
            .into_iter()
            .chain(self.gaps_us.iter().map(move |&g| {
                offset_us += u64::from(g);
                first + offset_us as f64 / 1e6
            }))
    }

    /// Tokens per chunk from the server's running count, when every chunk carried one.
    fn reported_per_chunk(&self) -> Option<&[u16]> {
        (!self.some_chunk_uncounted && !self.is_empty()).then_some(&self.reported[..])
    }
}

/// How many tokens each chunk carried, and where the total came from.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenAttribution {
    pub per_chunk: Vec<u64>,
    pub total: u64,
    pub source: TokenSource,
    /// True when per-chunk counts were spread by text length rather than reported.
    pub estimated_split: bool,
}

/// Decides the tokens per chunk from what the server reported.
pub fn attribute_tokens(chunks: &ChunkLog, final_usage: Option<u64>) -> TokenAttribution {
    // Exact: a running count on every chunk.
    if let Some(reported) = chunks.reported_per_chunk() {
        let per_chunk: Vec<u64> = reported.iter().map(|&k| u64::from(k)).collect();
        let counted: u64 = per_chunk.iter().sum();
        if final_usage.is_none_or(|u| u == counted) {
            return TokenAttribution {
                per_chunk,
                total: counted,
                source: TokenSource::Usage,
                estimated_split: false,
            };
        }
    }
    match final_usage {
        Some(total) if total as usize == chunks.len() => TokenAttribution {
            per_chunk: vec![1; chunks.len()],
            total,
            source: TokenSource::Usage,
            estimated_split: false,
        },
        Some(total) => TokenAttribution {
            per_chunk: split_by_text(chunks, total),
            total,
            source: TokenSource::Usage,
            estimated_split: !chunks.is_empty(),
        },
        None => one_per_chunk(chunks),
    }
}

/// One token per content chunk, whatever the server reported (a request whose reported
/// count was impossible is counted this way).
pub fn one_per_chunk(chunks: &ChunkLog) -> TokenAttribution {
    TokenAttribution {
        per_chunk: vec![1; chunks.len()],
        total: chunks.len() as u64,
        source: TokenSource::ChunkCount,
        estimated_split: false,
    }
}

/// Spreads `total` tokens over chunks in proportion to their text (largest remainder), each
/// chunk getting at least one token while tokens last.
fn split_by_text(chunks: &ChunkLog, total: u64) -> Vec<u64> {
    let n = chunks.len();
    if n == 0 {
        return Vec::new();
    }
    if total < n as u64 {
        // Fewer tokens than chunks: the server's count is what it is; give one to the first.
        return (0..n).map(|i| u64::from((i as u64) < total)).collect();
    }
    let spare = total - n as u64;
    let chars: f64 = chunks.chars.iter().map(|&c| f64::from(c.max(1))).sum();
    let shares: Vec<f64> = chunks
        .chars
        .iter()
        .map(|&c| spare as f64 * f64::from(c.max(1)) / chars)
        .collect();
    let mut counts: Vec<u64> = shares.iter().map(|s| 1 + s.floor() as u64).collect();
    let mut left = total - counts.iter().sum::<u64>();
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| {
        let fa = shares[a] - shares[a].floor();
        let fb = shares[b] - shares[b].floor();
        fb.total_cmp(&fa).then(a.cmp(&b))
    });
    for i in order {
        if left == 0 {
            break;
        }
        counts[i] += 1;
        left -= 1;
    }
    counts
}

/// Inter-token gaps in milliseconds, one per token after the first (f32: a trial keeps every
/// token's gap until it ends).
pub fn inter_token_gaps_ms(chunks: &ChunkLog, per_chunk: &[u64], out: &mut Vec<f32>) {
    if chunks.is_empty() {
        return;
    }
    // The counts come from the server (checked against max_tokens and the chunks in
    // outcome.rs): the reservation is capped anyway, never sized from a server number alone.
    let tokens = per_chunk.iter().fold(0u64, |sum, &k| sum.saturating_add(k));
    out.reserve(tokens.saturating_sub(1).min(1 << 16) as usize);
    for _ in 1..per_chunk.first().copied().unwrap_or(1) {
        out.push(0.0);
    }
    // µs since the last chunk that carried a token.
    let mut waited_us = 0u64;
    for (&gap_us, &k) in chunks.gaps_us.iter().zip(per_chunk.iter().skip(1)) {
        waited_us += u64::from(gap_us);
        if k == 0 {
            // A chunk with text but no new token (a detokeniser flush): its time belongs to
            // the next token's gap.
            continue;
        }
        let gap_ms = waited_us as f64 / 1000.0 / k as f64;
        for _ in 0..k {
            out.push(gap_ms as f32);
        }
        waited_us = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log(chunks: &[(f64, usize, Option<u64>)]) -> ChunkLog {
        let mut log = ChunkLog::new();
        for &(at_s, chars, cum) in chunks {
            log.push(at_s, chars, cum);
        }
        log
    }

    #[test]
    fn chunk_times_come_back_to_the_microsecond_without_drift() {
        let times: Vec<f64> = (0..10_000).map(|i| 3.25 + i as f64 * 0.0123456).collect();
        let mut l = ChunkLog::new();
        for &t in &times {
            l.push(t, 1, None);
        }
        assert_eq!(l.len(), times.len());
        assert_eq!(l.first_at_s(), Some(3.25));
        for (got, want) in l.times_s().zip(&times) {
            assert!((got - want).abs() <= 0.5e-6 + 1e-9, "{got} vs {want}");
        }
    }

    #[test]
    fn running_counts_are_kept_only_while_every_chunk_has_one() {
        let l = log(&[
            (0.0, 2, Some(1)),
            (0.1, 2, Some(4)),
            (0.2, 2, Some(3)),
            (0.3, 2, Some(5)),
        ]);
        assert_eq!(l.reported_per_chunk(), Some(&[1u16, 3, 0, 1][..]));
        let l = log(&[(0.0, 2, Some(1)), (0.1, 2, None), (0.2, 2, Some(3))]);
        assert_eq!(l.reported_per_chunk(), None);
        assert_eq!(ChunkLog::new().reported_per_chunk(), None);
        let l = log(&[(0.0, 2, Some(1)), (0.1, 2, Some(70_000))]);
        assert_eq!(
            l.reported_per_chunk(),
            None,
            "65,535 tokens in one chunk is not believed"
        );
        let mut wide = ChunkLog::new();
        wide.push(0.0, 1_000_000, None);
        assert_eq!(wide.chars, vec![u16::MAX]);
    }

    #[test]
    fn continuous_usage_gives_exact_multi_token_chunks() {
        // MTP: three chunks carrying 1, 3 and 2 tokens.
        let c = log(&[(1.0, 4, Some(1)), (1.03, 12, Some(4)), (1.05, 8, Some(6))]);
        let a = attribute_tokens(&c, Some(6));
        assert_eq!(a.per_chunk, vec![1, 3, 2]);
        assert!(!a.estimated_split);
        let mut gaps = Vec::new();
        inter_token_gaps_ms(&c, &a.per_chunk, &mut gaps);
        let expect = [10.0, 10.0, 10.0, 10.0, 10.0];
        assert_eq!(gaps.len(), expect.len());
        for (g, e) in gaps.iter().zip(expect) {
            assert!((f64::from(*g) - e).abs() < 1e-5, "{gaps:?}");
        }
    }

    #[test]
    fn mean_itl_equals_tpot_when_first_chunk_carries_several() {
        let c = log(&[(0.5, 8, Some(2)), (0.6, 4, Some(3)), (0.7, 4, Some(4))]);
        let a = attribute_tokens(&c, Some(4));
        let mut gaps = Vec::new();
        inter_token_gaps_ms(&c, &a.per_chunk, &mut gaps);
        assert_eq!(gaps.len(), 3);
        let mean = gaps.iter().map(|&g| f64::from(g)).sum::<f64>() / gaps.len() as f64;
        let tpot_ms = (0.7 - 0.5) * 1000.0 / (4.0 - 1.0);
        assert!((mean - tpot_ms).abs() < 1e-5);
    }

    #[test]
    fn usage_without_per_chunk_counts_spreads_by_text() {
        let c = log(&[(0.0, 5, None), (0.1, 25, None)]);
        let a = attribute_tokens(&c, Some(4));
        assert_eq!(a.per_chunk, vec![1, 3]);
        assert_eq!(a.total, 4);
        assert!(a.estimated_split);
        assert_eq!(a.source, TokenSource::Usage);
    }

    #[test]
    fn no_usage_falls_back_to_chunk_count() {
        let c = log(&[(0.0, 5, None), (0.1, 5, None), (0.2, 5, None)]);
        let a = attribute_tokens(&c, None);
        assert_eq!(a.total, 3);
        assert_eq!(a.source, TokenSource::ChunkCount);
    }

    #[test]
    fn split_always_sums_to_total() {
        for total in 0..40u64 {
            let c: Vec<_> = (0..7)
                .map(|i| (i as f64, (i * 3 + 1) as usize, None))
                .collect();
            let c = log(&c);
            let split = split_by_text(&c, total);
            assert_eq!(split.iter().sum::<u64>(), total, "{split:?}");
        }
    }
}
