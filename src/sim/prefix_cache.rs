//! The simulated prefix cache (`serve-sim --prefix-cache`), at message boundaries. A chat
//! request's cacheable prefixes are its messages before the last (a conversation's history,
//! or a shared system prompt), those before the last two (the previous turn's prompt, when
//! the history carries someone else's answer) and its opening message (a system prompt
//! ahead of a longer history); the longest one found cached is not prefilled, as vLLM's
//! automatic prefix caching skips the blocks it holds.
//!
//! Two bounded LRUs of [`PREFIX_CACHE_ENTRIES`] each keep memory fixed whatever arrives:
//! `prefixes` holds the prefixes requests prefilled, `turns` each request's whole prompt
//! (on admission) and, when it finishes, its prompt followed by its answer, as an engine
//! keeps the tokens it generated: the next turn of a conversation, which sends that answer
//! back, finds its whole history cached. Apart, so that one-off prompts and answers cannot
//! evict the shared system prompts of up to 4,096 groups.

use std::hash::{Hash, Hasher};
use std::num::NonZeroUsize;

use lru::LruCache;

/// Most entries each of the two LRUs of one replica holds.
pub const PREFIX_CACHE_ENTRIES: usize = 4096;

/// Messages a request's prompt starts with, known by their texts' chained hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prefix {
    /// [`chain`] over the messages' texts (the same texts, the same hash, in every process).
    pub hash: u64,
    /// Its prompt tokens, as the simulator counts them (words, or `--tokenizer` tokens).
    pub tokens: u32,
}

/// A chat request's cacheable prefixes, longest first: its messages before the last, before
/// the last two, and its opening message (duplicates and empty ones left out).
pub type Candidates = [Option<Prefix>; 3];

/// The hash of the messages so far (`previous`, 0 for none) followed by one more message
/// made of `texts` (its content, or its content parts in order). Chained, so a request's
/// prompt followed by its answer hashes as the next turn's history does. Roles are not
/// hashed: the cache, like an engine's, sees the text.
pub fn chain<'a>(previous: u64, texts: impl IntoIterator<Item = &'a str>) -> u64 {
    // Fixed keys: the same hash in every process of a build, unlike RandomState.
    let mut h = std::hash::DefaultHasher::new();
    previous.hash(&mut h);
    for t in texts {
        t.hash(&mut h);
    }
    h.finish()
}

impl Prefix {
    /// The prefix of one message made of `texts` that counts `tokens`; None for an empty
    /// one (nothing to cache).
    #[cfg(test)]
    pub fn of<'a>(texts: impl IntoIterator<Item = &'a str>, tokens: u32) -> Option<Prefix> {
        (tokens > 0).then(|| Prefix {
            hash: chain(0, texts),
            tokens,
        })
    }
}

/// The two bounded LRUs (hash -> tokens), through the `lru` crate.
#[derive(Debug)]
pub struct PrefixCache {
    prefixes: LruCache<u64, u32>,
    turns: LruCache<u64, u32>,
}

impl PrefixCache {
    pub fn new(capacity: usize) -> Self {
        let capacity = NonZeroUsize::new(capacity).unwrap_or(NonZeroUsize::MIN);
        PrefixCache {
            prefixes: LruCache::new(capacity),
            turns: LruCache::new(capacity),
        }
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.prefixes.len() + self.turns.len()
    }

    /// Admits a request: returns the prompt tokens its longest cached prefix holds (0 on a
    /// miss; the entry found becomes the most recently used). The prefixes longer than the
    /// one found are cached now, their prefill being done by this request, and so is the
    /// whole prompt. `candidates` are longest first; the min guards a hash collision.
    pub fn admit(&mut self, candidates: &[Prefix], whole: Option<Prefix>) -> u32 {
        let mut cached = 0;
        let mut longer = 0;
        for p in candidates {
            let found =
                (self.prefixes.get(&p.hash).copied()).or_else(|| self.turns.get(&p.hash).copied());
            if let Some(tokens) = found {
                cached = tokens.min(p.tokens);
                break;
            }
            longer += 1;
        }
        for p in &candidates[..longer] {
            self.prefixes.put(p.hash, p.tokens);
        }
        if let Some(w) = whole {
            self.keep_turn(w);
        }
        cached
    }

    /// Caches a prompt, or a finished request's prompt and answer, as the most recently
    /// used turn.
    pub fn keep_turn(&mut self, p: Prefix) {
        if p.tokens > 0 {
            self.turns.put(p.hash, p.tokens);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prefix(text: &str) -> Prefix {
        Prefix::of([text], text.split_whitespace().count() as u32).unwrap()
    }

    fn lookup(c: &mut PrefixCache, p: Prefix) -> u32 {
        c.admit(&[p], None)
    }

    #[test]
    fn the_first_request_misses_and_the_next_hit() {
        let mut c = PrefixCache::new(8);
        let a = prefix("you are a helpful assistant");
        assert_eq!(lookup(&mut c, a), 0);
        assert_eq!(lookup(&mut c, a), 5);
        assert_eq!(lookup(&mut c, a), 5);
        assert_eq!(lookup(&mut c, prefix("you are a terse assistant")), 0);
        assert_eq!(c.len(), 2);
    }

    #[test]
    fn hashes_depend_on_the_text_only() {
        assert_eq!(prefix("a b c"), prefix("a b c"));
        assert_ne!(prefix("a b c").hash, prefix("a b d").hash);
        // Content parts are hashed in order, apart: ["ab", "c"] is not ["a", "bc"].
        assert_ne!(
            Prefix::of(["ab", "c"], 2).unwrap().hash,
            Prefix::of(["a", "bc"], 2).unwrap().hash
        );
        assert_eq!(Prefix::of([""], 0), None);
        // Chained per message: [a][b] is not [b][a], and not the one message [a, b].
        let (a, b) = (chain(0, ["a"]), chain(0, ["b"]));
        assert_ne!(chain(a, ["b"]), chain(b, ["a"]));
        assert_ne!(chain(a, ["b"]), chain(0, ["a", "b"]));
    }

    /// A finished answer, kept, is found by the next turn that carries it; the longest
    /// cached candidate wins, and the longer ones are cached for the next request.
    #[test]
    fn the_longest_cached_prefix_is_found() {
        let mut c = PrefixCache::new(8);
        let system = prefix("be brief");
        let history = Prefix {
            hash: chain(chain(system.hash, ["q1"]), ["a1 "]),
            tokens: 7,
        };
        c.keep_turn(history);
        c.keep_turn(Prefix { hash: 5, tokens: 0 });
        assert_eq!(c.len(), 1, "nothing to cache in an empty prefix");
        let longer = Prefix {
            hash: chain(history.hash, ["q2"]),
            tokens: 9,
        };
        assert_eq!(c.admit(&[longer, history, system], None), 7);
        assert_eq!(
            c.admit(&[longer, history, system], None),
            9,
            "cached on the miss"
        );
        // Only the system prompt is known: it is what is found.
        let mut c = PrefixCache::new(8);
        lookup(&mut c, system);
        assert_eq!(c.admit(&[longer, history, system], None), 2);
    }

    /// Past the bound the least recently used entry goes (a hit refreshes it); whole prompts
    /// and answers go to their own LRU, so one-off turns do not evict shared prefixes.
    #[test]
    fn the_bounds_evict_the_least_recently_used() {
        let mut c = PrefixCache::new(2);
        let (a, b, d) = (prefix("a a"), prefix("b b b"), prefix("d"));
        assert_eq!(lookup(&mut c, a), 0);
        assert_eq!(lookup(&mut c, b), 0);
        assert_eq!(lookup(&mut c, a), 2, "a is now the most recently used");
        assert_eq!(lookup(&mut c, d), 0, "evicts b");
        assert_eq!(c.len(), 2);
        assert_eq!(lookup(&mut c, a), 2);
        assert_eq!(lookup(&mut c, b), 0, "b was evicted");
        for i in 0..10 {
            c.keep_turn(prefix(&format!("one-off turn {i}")));
        }
        assert_eq!(lookup(&mut c, a), 2, "turns do not evict prefixes");
        let mut big = PrefixCache::new(PREFIX_CACHE_ENTRIES);
        for i in 0..3 * PREFIX_CACHE_ENTRIES {
            let p = prefix(&format!("system {i}"));
            big.admit(&[p], Some(prefix(&format!("system {i} and more"))));
        }
        assert_eq!(big.len(), 2 * PREFIX_CACHE_ENTRIES);
    }
}
