//! The client's side of the token cross-check, counted as the trial goes: each finished
//! request's tokens are placed, by arrival time, between the endpoint's scrapes, so the
//! trial keeps one count per scrape instead of its requests.
//!
//! The cross-check compares the server's counter, first to last scrape with a counter, with
//! the tokens the client received over the same span, counted the way the server counts
//! (`Counting`): every token at its arrival time, or a request's tokens when it ends. The
//! span is known only when the trial ends, so each token goes into the interval between two
//! scrapes it arrived in (or onto a scrape's own time), and the span's count is a sum of
//! whole intervals: the same figure as counting every token against the span, exactly.
//!
//! A token is placed once no scrape still to come can be earlier than it: a scrape's time
//! is the middle of its GET, so it is never before the GET began, and a GET not yet begun
//! begins after every token already received. So a request's tokens are placed as it
//! finishes, except those that arrived after the start of a GET still in flight: they wait
//! in a short list until it ends, at most the tokens of one GET (its timeout is 2 s), never
//! a growing share of the trial, however far apart the scrapes.

use std::sync::Mutex;

use crate::load::stream::outcome::Finished;
use crate::record::telemetry::Counting;

/// The tokens one trial's requests received, per endpoint, placed between its scrapes.
#[derive(Debug)]
pub struct ClientCount {
    counting: Counting,
    endpoints: Vec<Mutex<Placed>>,
}

/// One endpoint's tokens between its scrapes.
#[derive(Debug, Default)]
struct Placed {
    /// The scrapes' times so far (seconds since the run started), in order.
    scrapes: Vec<f64>,
    /// `before[k]`: tokens after scrape k - 1 (from the start, for k = 0) and before scrape
    /// k; one more than the scrapes, the last for the tokens after the last scrape.
    before: Vec<u64>,
    /// `at[k]`: tokens at scrape k's very time.
    at: Vec<u64>,
    /// When the GET in flight began, if one is.
    in_flight: Option<f64>,
    /// Tokens at or after that, not placed yet: (time, tokens).
    waiting: Vec<(f64, u64)>,
}

impl Placed {
    fn new() -> Placed {
        Placed {
            before: vec![0],
            ..Placed::default()
        }
    }

    fn add(&mut self, t: f64, tokens: u64) {
        if !t.is_finite() || tokens == 0 {
            return;
        }
        match self.in_flight {
            Some(began) if t >= began => self.waiting.push((t, tokens)),
            _ => self.place(t, tokens),
        }
    }

    fn place(&mut self, t: f64, tokens: u64) {
        let k = self.scrapes.partition_point(|&s| s < t);
        match self.scrapes.get(k) {
            Some(&s) if s == t => self.at[k] += tokens,
            _ => self.before[k] += tokens,
        }
    }

    fn began(&mut self, t: f64) {
        self.in_flight = Some(t);
    }

    /// The GET in flight ended, with a sample at `sample` if it gave one: the tokens that
    /// waited for it are placed (a GET begun later begins after all of them).
    fn ended(&mut self, sample: Option<f64>) {
        if let Some(t) = sample {
            self.scrapes.push(t);
            self.at.push(0);
            self.before.push(0);
        }
        self.in_flight = None;
        for (t, n) in std::mem::take(&mut self.waiting) {
            self.place(t, n);
        }
    }

    /// Tokens in `[scrape a, scrape b]`, both ends included.
    fn between(&self, a: usize, b: usize) -> u64 {
        if a > b || b >= self.scrapes.len() {
            return 0;
        }
        let at: u64 = self.at[a..=b].iter().sum();
        let inside: u64 = self.before[a + 1..=b].iter().sum();
        at + inside
    }

    /// Keeps the scrapes `keep` says (one flag a scrape); a dropped scrape's tokens join the
    /// interval it stood in, so the counts between the kept ones do not change.
    fn thin(&mut self, keep: &[bool]) {
        let mut scrapes = Vec::new();
        let mut at = Vec::new();
        let mut before = vec![self.before.first().copied().unwrap_or(0)];
        for (k, &s) in self.scrapes.iter().enumerate() {
            let last = before.len() - 1;
            if keep.get(k).copied().unwrap_or(true) {
                scrapes.push(s);
                at.push(self.at[k]);
                before.push(self.before[k + 1]);
            } else {
                before[last] += self.at[k] + self.before[k + 1];
            }
        }
        (self.scrapes, self.at, self.before) = (scrapes, at, before);
    }
}

impl ClientCount {
    pub fn new(counting: Counting, endpoints: usize) -> ClientCount {
        ClientCount {
            counting,
            endpoints: (0..endpoints).map(|_| Mutex::new(Placed::new())).collect(),
        }
    }

    fn endpoint(&self, i: usize) -> Option<std::sync::MutexGuard<'_, Placed>> {
        let e = self.endpoints.get(i)?;
        Some(e.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// A scrape of endpoint `i` begins at `t`: its sample, if it gives one, is not earlier.
    pub fn scrape_began(&self, i: usize, t: f64) {
        if let Some(mut e) = self.endpoint(i) {
            e.began(t);
        }
    }

    /// A scrape of endpoint `i` ended, with a sample at `sample` when it gave one.
    pub fn scrape_ended(&self, i: usize, sample: Option<f64>) {
        if let Some(mut e) = self.endpoint(i) {
            e.ended(sample);
        }
    }

    /// Drops scrapes of endpoint `i` (`keep`: one flag a scrape, in order), their tokens kept
    /// in the intervals around them.
    pub fn thin(&self, i: usize, keep: &[bool]) {
        if let Some(mut e) = self.endpoint(i) {
            e.thin(keep);
        }
    }

    /// Places a finished request's tokens: at their arrival times (the first token, then the
    /// per-token gaps) where the server counts as tokens are made, else all at its end. A
    /// request without its gaps (failed, not streamed) is placed at its end.
    pub fn add(&self, f: &Finished) {
        let r = &f.record;
        let Some(mut e) = self.endpoint(r.endpoint) else {
            return;
        };
        match (self.counting, r.first_token_s) {
            (Counting::PerToken, Some(first)) if f.gaps_ms.len() as u64 + 1 == r.output_tokens => {
                let mut t = first;
                e.add(t, 1);
                for g in &f.gaps_ms {
                    t += f64::from(*g) / 1000.0;
                    e.add(t, 1);
                }
            }
            _ => e.add(r.end_s, r.output_tokens),
        }
    }

    /// Tokens endpoint `i` received from its scrape `a` to its scrape `b`, both included.
    pub fn between(&self, i: usize, a: usize, b: usize) -> u64 {
        self.endpoint(i).map_or(0, |e| e.between(a, b))
    }

    /// Tokens still waiting to be placed, over all endpoints (a test looks at it).
    #[cfg(test)]
    pub fn waiting(&self) -> usize {
        (0..self.endpoints.len())
            .filter_map(|i| self.endpoint(i).map(|e| e.waiting.len()))
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every token counted against the span, the way the cross-check did before.
    fn direct(tokens: &[f64], from: f64, to: f64) -> u64 {
        tokens.iter().filter(|&&t| t >= from && t <= to).count() as u64
    }

    /// Tokens placed in any order against scrapes made as the trial goes give, for every
    /// span of scrapes, the count of the tokens inside it, ends included.
    #[test]
    fn placed_tokens_count_as_the_tokens_inside_every_span() {
        let scrapes = [(0.0, 0.1), (1.0, 1.2), (2.0, 2.05), (3.5, 3.6), (5.0, 5.2)];
        // Tokens on scrape times, between them, before the first and after the last.
        let tokens = [
            -1.0, 0.05, 0.5, 1.1, 1.1, 1.9, 2.025, 2.5, 3.55, 3.7, 5.1, 6.0,
        ];
        let mut p = Placed::new();
        let mut next = 0;
        for &(began, ended) in &scrapes {
            // The tokens before the GET, and those during it, come in while it is in flight.
            p.began(began);
            while next < tokens.len() && tokens[next] <= ended {
                p.add(tokens[next], 1);
                next += 1;
            }
            assert!(p.waiting.iter().all(|&(t, _)| t >= began));
            p.ended(Some((began + ended) / 2.0));
            assert!(p.waiting.is_empty());
        }
        for &t in &tokens[next..] {
            p.add(t, 1);
        }
        let times: Vec<f64> = scrapes.iter().map(|(b, e)| (b + e) / 2.0).collect();
        for a in 0..times.len() {
            for b in a..times.len() {
                assert_eq!(
                    p.between(a, b),
                    direct(&tokens, times[a], times[b]),
                    "{a}..{b}"
                );
            }
        }
        assert_eq!(p.between(3, 1), 0);
        assert_eq!(p.between(0, 9), 0);
        // A failed scrape places what waited for it too.
        p.began(7.0);
        p.add(7.5, 1);
        p.ended(None);
        assert!(p.waiting.is_empty());
        // Thinned, the spans between the scrapes kept count the same.
        let keep = [true, false, true, false, true];
        p.thin(&keep);
        let kept: Vec<f64> = (times.iter().zip(keep))
            .filter(|(_, k)| *k)
            .map(|(t, _)| *t)
            .collect();
        assert_eq!(p.scrapes, kept);
        for a in 0..kept.len() {
            for b in a..kept.len() {
                assert_eq!(p.between(a, b), direct(&tokens, kept[a], kept[b]));
            }
        }
    }

    /// A request's tokens are placed at their times (per-token counters) or at its end
    /// (counters that move when a request finishes).
    #[test]
    fn requests_are_placed_the_way_the_server_counts() {
        let mut f = crate::load::stream::outcome::a_finished_request(0.0, 4000.0);
        f.record.first_token_s = Some(0.5);
        f.record.output_tokens = 4;
        f.gaps_ms = vec![1000.0; 3];
        for (counting, want) in [(Counting::PerToken, 2), (Counting::AtCompletion, 0)] {
            let c = ClientCount::new(counting, 1);
            for t in [1.0, 3.0] {
                c.scrape_began(0, t);
                c.scrape_ended(0, Some(t));
            }
            // A scrape in flight since 3.2 s: the tokens after that wait for its end.
            c.scrape_began(0, 3.2);
            c.add(&f);
            assert_eq!(c.between(0, 0, 1), want, "{counting:?}");
            assert_eq!(c.waiting(), 1);
            c.scrape_ended(0, Some(4.5));
            assert_eq!(c.waiting(), 0);
            assert_eq!(c.between(0, 0, 2), 3 + u64::from(want == 0), "{counting:?}");
        }
    }
}
