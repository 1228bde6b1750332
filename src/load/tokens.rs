//! From chunk arrival times to per-token figures.
//!
//! A chunk may carry several tokens (speculative decoding, MTP, or a server that batches its
//! writes). Inter-token latency is per token: a chunk carrying k tokens after a gap g
//! contributes k gaps of g/k. The first chunk's extra tokens arrived with the first token, so
//! they contribute gaps of zero; that way the mean ITL of a request equals its TPOT.

use crate::record::TokenSource;

/// One content chunk as the client saw it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ChunkArrival {
    /// Seconds since the run started.
    pub at_s: f64,
    pub text_chars: usize,
    /// The server's running count of completion tokens, when it sends one with every chunk
    /// (vLLM's `continuous_usage_stats`).
    pub cumulative_tokens: Option<u64>,
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
pub fn attribute_tokens(chunks: &[ChunkArrival], final_usage: Option<u64>) -> TokenAttribution {
    // Exact: a running count on every chunk.
    if !chunks.is_empty() && chunks.iter().all(|c| c.cumulative_tokens.is_some()) {
        let mut prev = 0u64;
        let per_chunk: Vec<u64> = chunks
            .iter()
            .map(|c| {
                let now = c.cumulative_tokens.unwrap_or(prev).max(prev);
                let k = now - prev;
                prev = now;
                k
            })
            .collect();
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
        None => TokenAttribution {
            per_chunk: vec![1; chunks.len()],
            total: chunks.len() as u64,
            source: TokenSource::ChunkCount,
            estimated_split: false,
        },
    }
}

/// Spreads `total` tokens over chunks in proportion to their text (largest remainder), each
/// chunk getting at least one token while tokens last.
fn split_by_text(chunks: &[ChunkArrival], total: u64) -> Vec<u64> {
    let n = chunks.len();
    if n == 0 {
        return Vec::new();
    }
    if total < n as u64 {
        // Fewer tokens than chunks: the server's count is what it is; give one to the first.
        return (0..n).map(|i| u64::from((i as u64) < total)).collect();
    }
    let spare = total - n as u64;
    let chars: f64 = chunks.iter().map(|c| c.text_chars.max(1) as f64).sum();
    let shares: Vec<f64> = chunks
        .iter()
        .map(|c| spare as f64 * c.text_chars.max(1) as f64 / chars)
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

/// Inter-token gaps in milliseconds, one per token after the first.
pub fn inter_token_gaps_ms(chunks: &[ChunkArrival], per_chunk: &[u64], out: &mut Vec<f64>) {
    let Some(first) = chunks.first() else { return };
    for _ in 1..per_chunk.first().copied().unwrap_or(1) {
        out.push(0.0);
    }
    let mut prev = first.at_s;
    for (chunk, &k) in chunks.iter().zip(per_chunk).skip(1) {
        if k == 0 {
            // A chunk with text but no new token (a detokeniser flush): its time belongs to
            // the next token's gap.
            continue;
        }
        let gap_ms = (chunk.at_s - prev) * 1000.0 / k as f64;
        for _ in 0..k {
            out.push(gap_ms);
        }
        prev = chunk.at_s;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(at_s: f64, chars: usize, cum: Option<u64>) -> ChunkArrival {
        ChunkArrival {
            at_s,
            text_chars: chars,
            cumulative_tokens: cum,
        }
    }

    #[test]
    fn continuous_usage_gives_exact_multi_token_chunks() {
        // MTP: three chunks carrying 1, 3 and 2 tokens.
        let c = [
            chunk(1.0, 4, Some(1)),
            chunk(1.03, 12, Some(4)),
            chunk(1.05, 8, Some(6)),
        ];
        let a = attribute_tokens(&c, Some(6));
        assert_eq!(a.per_chunk, vec![1, 3, 2]);
        assert!(!a.estimated_split);
        let mut gaps = Vec::new();
        inter_token_gaps_ms(&c, &a.per_chunk, &mut gaps);
        let expect = [10.0, 10.0, 10.0, 10.0, 10.0];
        assert_eq!(gaps.len(), expect.len());
        for (g, e) in gaps.iter().zip(expect) {
            assert!((g - e).abs() < 1e-9, "{gaps:?}");
        }
    }

    #[test]
    fn mean_itl_equals_tpot_when_first_chunk_carries_several() {
        let c = [
            chunk(0.5, 8, Some(2)),
            chunk(0.6, 4, Some(3)),
            chunk(0.7, 4, Some(4)),
        ];
        let a = attribute_tokens(&c, Some(4));
        let mut gaps = Vec::new();
        inter_token_gaps_ms(&c, &a.per_chunk, &mut gaps);
        assert_eq!(gaps.len(), 3);
        let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
        let tpot_ms = (0.7 - 0.5) * 1000.0 / (4.0 - 1.0);
        assert!((mean - tpot_ms).abs() < 1e-9);
    }

    #[test]
    fn usage_without_per_chunk_counts_spreads_by_text() {
        let c = [chunk(0.0, 5, None), chunk(0.1, 25, None)];
        let a = attribute_tokens(&c, Some(4));
        assert_eq!(a.per_chunk, vec![1, 3]);
        assert_eq!(a.total, 4);
        assert!(a.estimated_split);
        assert_eq!(a.source, TokenSource::Usage);
    }

    #[test]
    fn no_usage_falls_back_to_chunk_count() {
        let c = [
            chunk(0.0, 5, None),
            chunk(0.1, 5, None),
            chunk(0.2, 5, None),
        ];
        let a = attribute_tokens(&c, None);
        assert_eq!(a.total, 3);
        assert_eq!(a.source, TokenSource::ChunkCount);
    }

    #[test]
    fn split_always_sums_to_total() {
        for total in 0..40u64 {
            let c: Vec<_> = (0..7)
                .map(|i| chunk(i as f64, (i * 3 + 1) as usize, None))
                .collect();
            let split = split_by_text(&c, total);
            assert_eq!(split.iter().sum::<u64>(), total, "{split:?}");
        }
    }
}
