//! The simulated prefix cache (`serve-sim --prefix-cache`), at message boundaries: a chat
//! request's messages before its last one (a shared system prompt, or a conversation's
//! history) are its cacheable prefix. A request whose prefix is cached prefills only the
//! rest of its prompt, as vLLM's automatic prefix caching does. What a request prefilled is
//! cached when it is admitted, and when it finishes, its prompt followed by its answer, as
//! an engine keeps the tokens it generated: the next turn of a conversation, which sends
//! that answer back, finds its whole history cached. Bounded: the least recently used entry
//! is forgotten past [`PREFIX_CACHE_ENTRIES`], so memory stays fixed however many distinct
//! prefixes arrive.

use std::hash::{Hash, Hasher};
use std::num::NonZeroUsize;

use lru::LruCache;

/// Most distinct prefixes one replica's cache holds.
pub const PREFIX_CACHE_ENTRIES: usize = 4096;

/// A request's cacheable prefix: its messages before the last one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prefix {
    /// [`chain`] over the messages' texts (the same texts, the same hash, in every process).
    pub hash: u64,
    /// Its prompt tokens, as the simulator counts them (words, or `--tokenizer` tokens).
    pub tokens: u32,
}

/// The hash of the messages so far (`previous`, 0 for none) followed by one more message
/// made of `texts` (its content, or its content parts in order). Chained, so a request's
/// prompt followed by its answer hashes as the next turn's history does.
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

/// A bounded LRU of prefixes (hash -> tokens), through the `lru` crate.
#[derive(Debug)]
pub struct PrefixCache {
    entries: LruCache<u64, u32>,
}

impl PrefixCache {
    pub fn new(capacity: usize) -> Self {
        let capacity = NonZeroUsize::new(capacity).unwrap_or(NonZeroUsize::MIN);
        PrefixCache {
            entries: LruCache::new(capacity),
        }
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// The prompt tokens `p` finds cached: all of them on a hit (the entry becomes the most
    /// recently used), none on a miss (the prefix is then cached, its prefill being done by
    /// this request, and the least recently used entry evicted past the bound).
    pub fn lookup(&mut self, p: Prefix) -> u32 {
        if let Some(tokens) = self.entries.get(&p.hash) {
            // Same text, same count; the min guards a hash collision.
            return (*tokens).min(p.tokens);
        }
        self.entries.put(p.hash, p.tokens);
        0
    }

    /// Caches `p` (a finished request's prompt and answer), the most recently used entry.
    pub fn insert(&mut self, p: Prefix) {
        if p.tokens > 0 {
            self.entries.put(p.hash, p.tokens);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prefix(text: &str) -> Prefix {
        Prefix::of([text], text.split_whitespace().count() as u32).unwrap()
    }

    #[test]
    fn the_first_request_misses_and_the_next_hit() {
        let mut c = PrefixCache::new(8);
        let a = prefix("you are a helpful assistant");
        assert_eq!(c.lookup(a), 0);
        assert_eq!(c.lookup(a), 5);
        assert_eq!(c.lookup(a), 5);
        assert_eq!(c.lookup(prefix("you are a terse assistant")), 0);
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

    /// A finished answer, inserted, is found by the next turn that carries it.
    #[test]
    fn an_inserted_answer_is_found_by_the_next_turn() {
        let mut c = PrefixCache::new(8);
        let history = chain(chain(0, ["q1"]), ["a1 "]);
        c.insert(Prefix {
            hash: history,
            tokens: 7,
        });
        c.insert(Prefix { hash: 5, tokens: 0 });
        assert_eq!(c.len(), 1, "nothing to cache in an empty prefix");
        let next_turn = Prefix {
            hash: history,
            tokens: 9,
        };
        assert_eq!(c.lookup(next_turn), 7);
    }

    /// Past the bound the least recently used prefix goes: a hit refreshes an entry.
    #[test]
    fn the_bound_evicts_the_least_recently_used() {
        let mut c = PrefixCache::new(2);
        let (a, b, d) = (prefix("a a"), prefix("b b b"), prefix("d"));
        assert_eq!(c.lookup(a), 0);
        assert_eq!(c.lookup(b), 0);
        assert_eq!(c.lookup(a), 2, "a is now the most recently used");
        assert_eq!(c.lookup(d), 0, "evicts b");
        assert_eq!(c.len(), 2);
        assert_eq!(c.lookup(a), 2);
        assert_eq!(c.lookup(b), 0, "b was evicted");
        let mut big = PrefixCache::new(PREFIX_CACHE_ENTRIES);
        for i in 0..3 * PREFIX_CACHE_ENTRIES {
            big.lookup(prefix(&format!("system {i}")));
        }
        assert_eq!(big.len(), PREFIX_CACHE_ENTRIES);
    }
}
