//! The batching engine's logic without any clock: admission, step duration and token
//! emission. The real engine (`engine.rs`) sleeps for the durations this returns; the
//! calibration replay (`replay.rs`) adds them to a virtual clock. Sharing this code is
//! what lets the calibration tests check the logic the server actually runs.

use std::collections::VecDeque;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::config::SimConfig;
use super::draw::{mix_seed, standard_normal};
use super::prefix_cache::{chain, Candidates, Prefix, PrefixCache, PREFIX_CACHE_ENTRIES};
use super::text::token_text;

pub use super::config::step_seconds;

/// Why a request stopped, as OpenAI's `finish_reason` spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinishReason {
    Length,
    Stop,
}

impl FinishReason {
    pub fn as_str(self) -> &'static str {
        match self {
            FinishReason::Length => "length",
            FinishReason::Stop => "stop",
        }
    }
}

/// What a request asks of the engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GenParams {
    pub prompt_tokens: u32,
    pub max_tokens: u32,
    pub min_tokens: u32,
    pub ignore_eos: bool,
    /// A chat request's prefixes the prefix cache can serve, longest first (api.rs).
    pub prefixes: Candidates,
    /// A chat request's whole prompt: cached on admission and, with its answer, when it
    /// finishes (the next turn of its conversation carries both).
    pub conversation: Option<Prefix>,
}

/// Tokens one request gained in one step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Emission {
    /// Tokens generated before this step (index of the first new token).
    pub start: u32,
    /// New tokens in this step (several with MTP).
    pub tokens: u32,
    /// Set on the request's last step.
    pub finish: Option<FinishReason>,
    /// The request's prompt tokens served from the prefix cache (None: no cache).
    pub cached: Option<u32>,
}

/// What admitting requests into a step cost and found.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Step {
    /// The step's duration.
    pub secs: f64,
    /// Prompt tokens of the requests admitted in it, cached ones included.
    pub prompt_tokens: u64,
    /// Prompt tokens looked up in the prefix cache (every admitted request's, when it is on).
    pub cache_queries: u64,
    /// Of those, the tokens found cached (not prefilled).
    pub cache_hits: u64,
}

struct Job<H> {
    handle: H,
    prompt_tokens: u32,
    prefixes: Candidates,
    conversation: Option<Prefix>,
    cached: Option<u32>,
    target: u32,
    max_tokens: u32,
    generated: u32,
}

impl<H> Job<H> {
    /// Tokens the job holds in the KV cache: its prompt and what it generated.
    fn kv_tokens(&self) -> u64 {
        u64::from(self.prompt_tokens) + u64::from(self.generated)
    }
}

/// One engine's queues and random streams; `H` is whatever identifies a request's client.
pub struct Scheduler<H> {
    cfg: SimConfig,
    rng: ChaCha8Rng,
    waiting: VecDeque<Job<H>>,
    running: Vec<Job<H>>,
    submitted: u64,
    cache: Option<PrefixCache>,
    preemptions: u64,
}

impl<H> Scheduler<H> {
    pub fn new(cfg: SimConfig) -> Self {
        let rng = ChaCha8Rng::seed_from_u64(mix_seed(cfg.seed));
        let cache = cfg
            .prefix_cache
            .then(|| PrefixCache::new(PREFIX_CACHE_ENTRIES));
        Scheduler {
            cache,
            cfg,
            rng,
            waiting: VecDeque::new(),
            running: Vec::new(),
            submitted: 0,
            preemptions: 0,
        }
    }

    pub fn running(&self) -> usize {
        self.running.len()
    }

    pub fn waiting(&self) -> usize {
        self.waiting.len()
    }

    /// KV cache usage 0..1 with a bounded cache (`kv_cache_tokens`), else None.
    pub fn kv_usage(&self) -> Option<f64> {
        let cap = self.cfg.kv_cache_tokens?;
        Some((self.kv_used() as f64 / cap as f64).min(1.0))
    }

    /// Requests preempted so far (the KV cache overflowed).
    pub fn preemptions(&self) -> u64 {
        self.preemptions
    }

    fn kv_used(&self) -> u64 {
        self.running.iter().map(Job::kv_tokens).sum()
    }

    pub fn is_idle(&self) -> bool {
        self.running.is_empty() && self.waiting.is_empty()
    }

    /// Queues a request; its output length is fixed now, from its own seeded stream, so the
    /// n-th request of a replica always gets the same length.
    pub fn submit(&mut self, handle: H, p: GenParams) {
        let max = p.max_tokens.max(1);
        let target = if p.ignore_eos {
            max
        } else {
            let seed = mix_seed(self.cfg.seed ^ mix_seed(self.submitted));
            let natural = natural_length(&self.cfg, &mut ChaCha8Rng::seed_from_u64(seed));
            natural.clamp(p.min_tokens.min(max), max)
        };
        self.submitted += 1;
        self.waiting.push_back(Job {
            handle,
            prompt_tokens: p.prompt_tokens,
            prefixes: p.prefixes,
            conversation: p.conversation,
            cached: None,
            target: target.max(1),
            max_tokens: max,
            generated: 0,
        });
    }

    /// Drops every request (waiting or running) whose handle fails `keep`; returns how many.
    pub fn retain(&mut self, mut keep: impl FnMut(&H) -> bool) -> usize {
        let before = self.running.len() + self.waiting.len();
        self.running.retain(|j| keep(&j.handle));
        self.waiting.retain(|j| keep(&j.handle));
        before - self.running.len() - self.waiting.len()
    }

    /// Admits waiting requests into free slots (FIFO) and returns the coming step's
    /// duration with the prompt tokens it admitted, or `None` when nothing runs. With the
    /// prefix cache, each admitted request looks its prefixes up (in admission order, so the
    /// first of a group prefills a shared system prompt and the next ones, even in the same
    /// step, find it cached); only the tokens not found cached cost prefill time.
    pub fn begin_step(&mut self) -> Option<Step> {
        let (mut prompt, mut computed, mut hits) = (0u64, 0u64, 0u64);
        while self.running.len() < self.cfg.max_running {
            // A bounded KV cache admits a request only while it fits (one alone always runs).
            if let (Some(cap), Some(front)) = (self.cfg.kv_cache_tokens, self.waiting.front()) {
                if !self.running.is_empty() && self.kv_used() + front.kv_tokens() + 1 > cap {
                    break;
                }
            }
            let Some(mut job) = self.waiting.pop_front() else {
                break;
            };
            if let Some(cache) = &mut self.cache {
                let candidates: Vec<Prefix> = job.prefixes.iter().flatten().copied().collect();
                let cached = (cache.admit(&candidates, job.conversation)).min(job.prompt_tokens);
                job.cached = Some(cached);
                hits += u64::from(cached);
            }
            let tokens = u64::from(job.prompt_tokens);
            prompt += tokens;
            // A preempted request prefills its prompt and what it had generated again.
            computed += tokens - u64::from(job.cached.unwrap_or(0)) + u64::from(job.generated);
            self.running.push(job);
        }
        if self.running.is_empty() {
            return None;
        }
        Some(Step {
            secs: step_seconds(&self.cfg, self.running.len(), computed),
            prompt_tokens: prompt,
            cache_queries: if self.cache.is_some() { prompt } else { 0 },
            cache_hits: hits,
        })
    }

    /// Ends the step: every running request gains 1..=mtp_max tokens. `deliver` returns
    /// false when the client is gone; such requests, and finished ones, leave the batch.
    pub fn finish_step(&mut self, mut deliver: impl FnMut(&H, Emission) -> bool) {
        let mut i = 0;
        while i < self.running.len() {
            let k = self.draw_tokens_per_step();
            let job = &mut self.running[i];
            let tokens = k.min(job.target - job.generated);
            let (start, cached) = (job.generated, job.cached);
            job.generated += tokens;
            let finish = (job.generated >= job.target).then_some({
                if job.generated >= job.max_tokens {
                    FinishReason::Length
                } else {
                    FinishReason::Stop
                }
            });
            let delivered = deliver(
                &job.handle,
                Emission {
                    start,
                    tokens,
                    finish,
                    cached,
                },
            );
            if finish.is_some() || !delivered {
                let job = self.running.remove(i);
                if let (Some(cache), Some(prompt), true) = (
                    &mut self.cache,
                    job.conversation,
                    finish.is_some() && delivered,
                ) {
                    // The answer as the client received it: the generated tokens' text.
                    let answer = token_text(0, job.generated);
                    cache.keep_turn(Prefix {
                        hash: chain(prompt.hash, [answer.as_str()]),
                        tokens: prompt.tokens.saturating_add(job.generated),
                    });
                }
            } else {
                i += 1;
            }
        }
        // Growth past a bounded cache preempts the requests admitted last.
        if let Some(cap) = self.cfg.kv_cache_tokens {
            while self.running.len() > 1 && self.kv_used() > cap {
                let job = self.running.pop().expect("more than one running");
                self.waiting.push_front(job);
                self.preemptions += 1;
            }
        }
    }

    /// Accepted tokens this step: 1 + Binomial(mtp_max - 1, p), p giving the configured mean.
    fn draw_tokens_per_step(&mut self) -> u32 {
        if self.cfg.mtp_max <= 1 {
            return 1;
        }
        let extra = self.cfg.mtp_max - 1;
        let p = ((self.cfg.tokens_per_step_mean - 1.0) / extra as f64).clamp(0.0, 1.0);
        1 + (0..extra).filter(|_| self.rng.gen_bool(p)).count() as u32
    }
}

/// Lognormal output length with the configured mean (Box-Muller; no extra crate needed).
fn natural_length(cfg: &SimConfig, rng: &mut ChaCha8Rng) -> u32 {
    let s = cfg.natural_len_sigma;
    let mu = cfg.natural_len_mean.ln() - s * s / 2.0;
    let z = standard_normal(rng);
    (mu + s * z).exp().round().clamp(1.0, u32::MAX as f64) as u32
}

#[cfg(test)]
mod tests {
    use super::super::draw::session_factor;
    use super::*;

    fn params(max: u32, ignore_eos: bool) -> GenParams {
        GenParams {
            prompt_tokens: 10,
            max_tokens: max,
            min_tokens: 0,
            ignore_eos,
            prefixes: [None; 3],
            conversation: None,
        }
    }

    fn run_one(cfg: &SimConfig, p: GenParams) -> (Vec<u32>, FinishReason) {
        let mut s = Scheduler::new(cfg.clone());
        s.submit((), p);
        let (mut ks, mut fin) = (vec![], None);
        while s.begin_step().is_some() {
            s.finish_step(|_, e| {
                ks.push(e.tokens);
                fin = e.finish;
                true
            });
        }
        (ks, fin.unwrap())
    }

    #[test]
    fn a_small_kv_cache_admits_what_fits_and_preempts_on_growth() {
        let cfg = SimConfig {
            kv_cache_tokens: Some(100),
            max_running: 8,
            ..SimConfig::preset("fixed").unwrap()
        };
        let mut s = Scheduler::new(cfg);
        for id in 0..4u32 {
            s.submit(id, params(40, true));
        }
        let mut got = [0u32; 4];
        let mut steps = 0;
        while s.begin_step().is_some() {
            s.finish_step(|id, e| {
                got[*id as usize] += e.tokens;
                true
            });
            // After preemption what runs fits (one request alone always runs).
            assert!(s.running() <= 1 || s.kv_used() <= 100, "{}", s.kv_used());
            steps += 1;
            assert!(steps < 10_000, "the scheduler must make progress");
        }
        // Every request got exactly its tokens once, though some were preempted.
        assert_eq!(got, [40; 4]);
        assert!(
            s.preemptions() > 0,
            "4 x 50 tokens never fit in 100 at once"
        );
        // Unbounded: no usage, no preemption.
        let s = Scheduler::<u32>::new(SimConfig::preset("fixed").unwrap());
        assert_eq!((s.kv_usage(), s.preemptions()), (None, 0));
    }

    #[test]
    fn ignore_eos_generates_exactly_max_tokens_with_mtp_chunks() {
        let cfg = SimConfig::preset("rtxpro6000x4-qwen122b").unwrap();
        let (ks, fin) = run_one(&cfg, params(1000, true));
        assert_eq!(ks.iter().sum::<u32>(), 1000);
        assert_eq!(fin, FinishReason::Length);
        assert!(ks.iter().all(|&k| (1..=3).contains(&k)));
        let mean = 1000.0 / ks.len() as f64;
        assert!((mean - 2.0).abs() < 0.15, "mean tokens per step {mean}");
    }

    #[test]
    fn natural_lengths_are_deterministic_and_clamped() {
        let cfg = SimConfig::preset("fast").unwrap();
        let a = run_one(&cfg, params(100_000, false));
        assert_eq!(a, run_one(&cfg, params(100_000, false)));
        assert_eq!(a.1, FinishReason::Stop);
        let (ks, fin) = run_one(&cfg, params(3, false));
        assert_eq!((ks.iter().sum::<u32>(), fin), (3, FinishReason::Length));
        let p = GenParams {
            min_tokens: 5000,
            ..params(6000, false)
        };
        let (ks, _) = run_one(&cfg, p);
        assert!(ks.iter().sum::<u32>() >= 5000);
    }

    #[test]
    fn admission_is_capped_and_fifo() {
        let cfg = SimConfig {
            max_running: 2,
            ..SimConfig::preset("fast").unwrap()
        };
        let mut s = Scheduler::new(cfg);
        for id in 0..3u32 {
            s.submit(id, params(2, true));
        }
        s.begin_step().unwrap();
        assert_eq!((s.running(), s.waiting()), (2, 1));
        let mut seen = vec![];
        s.finish_step(|id, _| {
            seen.push(*id);
            true
        });
        assert_eq!(seen, vec![0, 1]);
        assert_eq!(s.retain(|id| *id != 2), 1);
    }

    /// With the prefix cache, the first request of a system prompt prefills all of it; the
    /// next ones (in the same step or later) find it cached: those tokens cost no prefill
    /// time and are reported per request. Without the cache nothing is cached or reported.
    #[test]
    fn the_prefix_cache_saves_the_prefill_of_a_shared_system_prompt() {
        let cfg = SimConfig {
            prefix_cache: true,
            max_running: 4,
            ..SimConfig::preset("fast").unwrap()
        };
        assert!(cfg.prefill_s_per_token > 0.0);
        let shared = Prefix::of(["you are a helpful assistant"], 200);
        let p = GenParams {
            prompt_tokens: 240,
            prefixes: [shared, None, None],
            ..params(1, true)
        };
        let emitted = |s: &mut Scheduler<u32>| {
            let mut seen = vec![];
            s.finish_step(|id, e| {
                seen.push((*id, e.cached));
                true
            });
            seen
        };
        let mut s = Scheduler::new(cfg.clone());
        s.submit(0, p);
        s.submit(1, p);
        let first = s.begin_step().unwrap();
        assert_eq!((first.prompt_tokens, first.cache_queries), (480, 480));
        assert_eq!(first.cache_hits, 200, "the second request of the step hits");
        let want = step_seconds(&cfg, 2, 480 - 200);
        assert!(
            (first.secs - want).abs() < 1e-12,
            "{} vs {want}",
            first.secs
        );
        assert_eq!(emitted(&mut s), vec![(0, Some(0)), (1, Some(200))]);
        s.submit(2, p);
        s.submit(
            3,
            GenParams {
                prefixes: [None; 3],
                ..p
            },
        );
        let later = s.begin_step().unwrap();
        assert_eq!((later.cache_queries, later.cache_hits), (480, 200));
        assert!((later.secs - step_seconds(&cfg, 2, 280)).abs() < 1e-12);
        assert_eq!(emitted(&mut s), vec![(2, Some(200)), (3, Some(0))]);

        let off = SimConfig {
            prefix_cache: false,
            ..cfg.clone()
        };
        let mut s = Scheduler::new(off.clone());
        s.submit(0, p);
        s.submit(1, p);
        let step = s.begin_step().unwrap();
        assert_eq!((step.cache_queries, step.cache_hits), (0, 0));
        assert!((step.secs - step_seconds(&off, 2, 480)).abs() < 1e-12);
        assert_eq!(emitted(&mut s), vec![(0, None), (1, None)]);
    }

    #[test]
    fn step_time_follows_usl_and_slowdown() {
        let cfg = SimConfig::preset("fast").unwrap();
        let t1 = step_seconds(&cfg, 1, 0);
        assert!((t1 - 1.0 / cfg.lambda).abs() < 1e-12);
        let slow = SimConfig {
            slowdown: 1.1,
            ..cfg.clone()
        };
        assert!((step_seconds(&slow, 8, 100) / step_seconds(&cfg, 8, 100) - 1.1).abs() < 1e-12);
        let fixed = SimConfig::preset("fixed").unwrap();
        assert_eq!(
            step_seconds(&fixed, 1, 0),
            step_seconds(&fixed, 500, 10_000)
        );
    }

    #[test]
    fn no_jitter_means_a_factor_of_exactly_one() {
        for seed in [0, 1, 2, u64::MAX] {
            assert_eq!(session_factor(seed, 0.0), 1.0);
            let cfg = SimConfig {
                seed,
                ..SimConfig::preset("fast").unwrap()
            };
            assert_eq!(cfg.session(), cfg);
        }
    }

    #[test]
    fn session_factors_are_lognormal_with_the_jitter_as_sd() {
        let x = 0.05;
        let logs: Vec<f64> = (0..200u64).map(|s| session_factor(s, x).ln()).collect();
        let n = logs.len() as f64;
        let mean = logs.iter().sum::<f64>() / n;
        let sd = (logs.iter().map(|l| (l - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
        assert!((sd / x - 1.0).abs() < 0.2, "sd of ln(factor) {sd}");
        // The mean's standard error is x / sqrt(200) = 0.0035.
        assert!(mean.abs() < 0.0106, "mean of ln(factor) {mean}");
    }

    #[test]
    fn the_same_seed_draws_the_same_factor_and_seeds_differ() {
        let a: Vec<f64> = (1..=20u64).map(|s| session_factor(s, 0.05)).collect();
        let b: Vec<f64> = (1..=20u64).map(|s| session_factor(s, 0.05)).collect();
        assert_eq!(a, b);
        let mut distinct = a.clone();
        distinct.sort_by(f64::total_cmp);
        distinct.dedup();
        assert_eq!(distinct.len(), a.len(), "{a:?}");
        assert!(a.iter().all(|f| (0.8..1.25).contains(f)), "{a:?}");
        // The factor scales with the jitter: one z per seed.
        let z1 = session_factor(7, 0.05).ln() / 0.05;
        let z2 = session_factor(7, 0.5).ln() / 0.5;
        assert!((z1 - z2).abs() < 1e-9);
    }

    #[test]
    fn the_session_multiplies_every_step_like_slowdown() {
        let cfg = SimConfig {
            session_jitter: 0.05,
            seed: 3,
            slowdown: 1.1,
            ..SimConfig::preset("fast").unwrap()
        };
        let f = cfg.session_factor();
        assert_ne!(f, 1.0);
        let session = cfg.session();
        assert_eq!(
            session.session(),
            session,
            "applying a session twice changes nothing"
        );
        for (b, prefill) in [(1, 0), (8, 100), (64, 5000)] {
            let ratio = step_seconds(&session, b, prefill) / step_seconds(&cfg, b, prefill);
            assert!((ratio - f).abs() < 1e-12, "{ratio} vs {f}");
        }
    }
}
