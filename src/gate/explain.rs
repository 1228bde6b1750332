//! What changed besides tok/s: beside a relative verdict, every figure the run recorded for
//! both arms (client latencies and lengths, the server's own telemetry) compared head with
//! base per level, with a bound from the same trials and the same estimator the gate uses:
//! in a run in blocks `crossover_level` on the blocks the gate reads (paired by slot
//! orientation, so a slot effect cancels and the start spread is in the bound), else
//! `relative_level` (Welch on the trials of one start per arm, whose start effect no bound
//! covers: the changes say so).
//! A figure is listed only when its bound excludes "unchanged" at a family level of 5% over
//! every figure and level (Bonferroni), and it moved by more than its floor; then typed
//! rules over the moved figures give ranked readings ("the KV cache fills sooner"), never a
//! match on text.

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, StudentsT};

use crate::record::{LevelResult, RunResult, TrialResult};
use crate::stats::basic::mean;
use crate::stats::decision::{crossover_level, relative_level};

/// The chance, over all figures and levels together, that an unchanged run lists a figure.
pub const EXPLAIN_ALPHA: f64 = 0.05;

/// A figure recorded for each trial of both arms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Figure {
    TtftP50,
    TtftP99,
    ItlP50,
    ItlP99,
    E2eP50,
    /// Output tokens per content chunk: above 1 with speculative decoding (MTP).
    TokensPerChunk,
    OutputTokensPerRequest,
    /// Prompt tokens the server reported serving (usage.prompt_tokens).
    PromptTokensPerRequest,
    ErrorRate,
    PrefixCacheShare,
    /// Requests running at once, per replica (the server's gauge, mean over the trial).
    BatchSize,
    /// Requests waiting for a slot, per replica.
    Waiting,
    /// KV cache usage 0..1 (the server's gauge, mean over the trial).
    KvCacheUsage,
    /// Preemptions (evictions) per request during the trial.
    PreemptionsPerRequest,
}

/// How a figure is compared: as a ratio (on logs) or as a difference (values near zero).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scale {
    Ratio,
    Difference,
}

impl Figure {
    pub const ALL: [Figure; 14] = [
        Figure::TtftP50,
        Figure::TtftP99,
        Figure::ItlP50,
        Figure::ItlP99,
        Figure::E2eP50,
        Figure::TokensPerChunk,
        Figure::OutputTokensPerRequest,
        Figure::PromptTokensPerRequest,
        Figure::ErrorRate,
        Figure::PrefixCacheShare,
        Figure::BatchSize,
        Figure::Waiting,
        Figure::KvCacheUsage,
        Figure::PreemptionsPerRequest,
    ];

    /// What people read.
    pub fn name(self) -> &'static str {
        match self {
            Figure::TtftP50 => "TTFT p50",
            Figure::TtftP99 => "TTFT p99",
            Figure::ItlP50 => "ITL p50",
            Figure::ItlP99 => "ITL p99",
            Figure::E2eP50 => "E2E p50",
            Figure::TokensPerChunk => "tokens per chunk",
            Figure::OutputTokensPerRequest => "output tokens per request",
            Figure::PromptTokensPerRequest => "prompt tokens per request",
            Figure::ErrorRate => "error rate",
            Figure::PrefixCacheShare => "prefix-cache share",
            Figure::BatchSize => "batch size",
            Figure::Waiting => "requests waiting",
            Figure::KvCacheUsage => "KV cache",
            Figure::PreemptionsPerRequest => "preemptions per request",
        }
    }

    fn scale(self) -> Scale {
        match self {
            Figure::ErrorRate
            | Figure::PrefixCacheShare
            | Figure::KvCacheUsage
            | Figure::PreemptionsPerRequest
            | Figure::Waiting => Scale::Difference,
            _ => Scale::Ratio,
        }
    }

    /// The smallest change worth a line: 5% for ratios; for differences, in the figure's
    /// own unit.
    fn floor(self) -> f64 {
        match self {
            Figure::ErrorRate => 0.01,
            Figure::PrefixCacheShare | Figure::KvCacheUsage => 0.05,
            Figure::PreemptionsPerRequest => 0.01,
            Figure::Waiting => 0.5,
            _ => 0.05,
        }
    }

    /// The trial's value, where it was recorded.
    fn of(self, t: &TrialResult) -> Option<f64> {
        let per_request = |x: u64| (t.succeeded > 0).then(|| x as f64 / t.succeeded as f64);
        let v = match self {
            Figure::TtftP50 => t.ttft_ms.as_ref().map(|p| p.p50),
            Figure::TtftP99 => t.ttft_ms.as_ref().map(|p| p.p99),
            Figure::ItlP50 => t.itl_ms.as_ref().map(|p| p.p50),
            Figure::ItlP99 => t.itl_ms.as_ref().map(|p| p.p99),
            Figure::E2eP50 => t.e2e_ms.as_ref().map(|p| p.p50),
            Figure::TokensPerChunk => (t.client.as_ref())
                .and_then(|c| c.chunks)
                .filter(|&c| c > 0)
                .map(|c| t.output_tokens as f64 / c as f64),
            Figure::OutputTokensPerRequest => per_request(t.output_tokens),
            Figure::PromptTokensPerRequest => per_request(t.input_tokens).filter(|&v| v > 0.0),
            Figure::ErrorRate => Some(t.error_rate),
            Figure::PrefixCacheShare => t.prefix_cache.as_ref().map(|p| p.share),
            Figure::BatchSize => gauge_mean(t, |s| s.running),
            Figure::Waiting => gauge_mean(t, |s| s.waiting),
            Figure::KvCacheUsage => gauge_mean(t, |s| s.cache_usage),
            Figure::PreemptionsPerRequest => preemptions(t)
                .filter(|_| t.succeeded > 0)
                .map(|p| p / t.succeeded as f64),
        };
        v.filter(|v| v.is_finite() && (self.scale() == Scale::Difference || *v > 0.0))
    }

    /// Formats a value of the figure.
    pub fn show(self, v: f64) -> String {
        match self {
            Figure::TtftP50
            | Figure::TtftP99
            | Figure::ItlP50
            | Figure::ItlP99
            | Figure::E2eP50 => format!("{v:.1} ms"),
            Figure::ErrorRate | Figure::PrefixCacheShare | Figure::KvCacheUsage => {
                format!("{:.0}%", v * 100.0)
            }
            Figure::PreemptionsPerRequest => format!("{v:.3}"),
            _ => format!("{v:.1}"),
        }
    }
}

/// The mean of a gauge under load, per replica (endpoints averaged): the samples taken
/// while the trial ran, without the first (scraped as it starts) and the last (as it ends),
/// which read an idle server and would pull both arms towards zero.
fn gauge_mean(
    t: &TrialResult,
    pick: impl Fn(&crate::record::telemetry::Sample) -> Option<f64>,
) -> Option<f64> {
    let tel = t.telemetry.as_ref()?;
    let values: Vec<f64> = (tel.endpoints.iter())
        .flat_map(|e| {
            let n = e.samples.len();
            e.samples.iter().take(n.saturating_sub(1)).skip(1)
        })
        .filter_map(&pick)
        .filter(|v| v.is_finite())
        .collect();
    (!values.is_empty()).then(|| mean(&values))
}

/// Preemptions counted during the trial: each endpoint's counter, last minus first sample.
fn preemptions(t: &TrialResult) -> Option<f64> {
    let tel = t.telemetry.as_ref()?;
    let mut total = None;
    for e in &tel.endpoints {
        let counts: Vec<f64> = (e.samples.iter())
            .filter_map(|s| s.preemptions_total)
            .collect();
        if let (Some(first), Some(last)) = (counts.first(), counts.last()) {
            *total.get_or_insert(0.0) += (last - first).max(0.0);
        }
    }
    total
}

/// One figure that moved beyond noise at one level.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Moved {
    pub figure: Figure,
    /// Geometric (ratios) or arithmetic (differences) means over the trials.
    pub base: f64,
    pub head: f64,
    /// head / base for a ratio figure, head - base for a difference, with its bounds.
    pub change: f64,
    pub low: f64,
    pub high: f64,
    pub ratio_scale: bool,
}

impl Moved {
    /// "batch size 14.2 -> 9.8 (-31%)", "KV cache 61% -> 93%".
    pub fn said(&self) -> String {
        let f = self.figure;
        let mut s = format!(
            "{} {} -> {}",
            f.name(),
            f.show(self.base),
            f.show(self.head)
        );
        if self.ratio_scale {
            s.push_str(&format!(" ({:+.0}%)", (self.change - 1.0) * 100.0));
        }
        s
    }

    fn up(&self) -> bool {
        if self.ratio_scale {
            self.change > 1.0
        } else {
            self.change > 0.0
        }
    }
}

/// A reading of the moved figures, from typed rules; the first is the likeliest cause.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cause {
    KvCacheFillsSooner,
    PromptLonger,
    SpeculationFell,
    FewerRunAtOnce,
    OutputLengthChanged,
    ErrorsRose,
    DecodeSlower,
    LongerWaitForFirstToken,
    SlowerEndToEnd,
}

impl Cause {
    fn reading(self) -> &'static str {
        match self {
            Cause::KvCacheFillsSooner => {
                "the KV cache fills sooner (a memory or max-num-seqs change?)"
            }
            Cause::PromptLonger => {
                "more prompt tokens are served: the chat template or tokenizer changed"
            }
            Cause::SpeculationFell => "speculative (MTP) acceptance fell",
            Cause::FewerRunAtOnce => {
                "requests queue for a slot: fewer run at once (a lower max batch, max-num-seqs?)"
            }
            Cause::OutputLengthChanged => {
                "answers have another length: EOS, stop strings or max_tokens handling changed"
            }
            Cause::ErrorsRose => "more requests fail",
            Cause::DecodeSlower => "each decode step is slower: kernels, clocks or a busier GPU",
            Cause::LongerWaitForFirstToken => {
                "requests wait longer for their first token: prefill or scheduling"
            }
            Cause::SlowerEndToEnd => {
                "requests of the same lengths take longer: the server is slower per request"
            }
        }
    }
}

/// One reading at one level: the cause and the figures it reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reading {
    pub cause: Cause,
    /// "batch size 14.2 -> 9.8 (-31%), preemptions 0 -> 0.212: the KV cache fills sooner (...)".
    pub said: String,
}

/// What changed at one level.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LevelChanges {
    pub concurrency: u32,
    /// Figures recorded for both arms that the blocks could not compare (too few blocks of
    /// each orientation and no calibration: the start spread unknown), so not listed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_estimable: Vec<Figure>,
    /// The figures that moved, largest first.
    pub moved: Vec<Moved>,
    /// Typed readings, likeliest first.
    pub readings: Vec<Reading>,
}

/// The "what changed" section of a relative verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Changes {
    /// Figures compared (per level) and the level of each comparison after Bonferroni.
    pub figures_compared: usize,
    pub per_test_alpha: f64,
    /// The run was in blocks (servers started fresh, slots swapped), so the bounds cover
    /// start and slot effects; false with one start per arm, where a start effect (one start
    /// of a server faster than another) can be listed as a change.
    #[serde(default)]
    pub starts_covered: bool,
    pub levels: Vec<LevelChanges>,
}

impl Changes {
    /// The likeliest reading over all levels (the highest level's first reading, levels
    /// with more load showing a cause most clearly).
    pub fn top(&self) -> Option<&Reading> {
        self.levels.iter().rev().find_map(|l| l.readings.first())
    }
}

/// Compares every figure of a relative run's two arms; None for a run of one arm.
pub fn explain(run: &RunResult) -> Option<Changes> {
    let base = run.base.as_ref()?;
    let pairs: Vec<(&LevelResult, &LevelResult)> = (run.levels.iter())
        .filter_map(|h| {
            let b = base
                .levels
                .iter()
                .find(|b| b.concurrency == h.concurrency)?;
            Some((b, h))
        })
        .collect();
    let tests = (pairs.len() * Figure::ALL.len()).max(1);
    let per_test_alpha = EXPLAIN_ALPHA / tests as f64;
    let in_blocks = (run.levels.iter().chain(&base.levels))
        .flat_map(|l| &l.trials)
        .any(|t| t.block.is_some());
    let levels = pairs
        .into_iter()
        .map(|(b, h)| {
            let mut moved = Vec::new();
            let mut not_estimable = Vec::new();
            for &f in &Figure::ALL {
                match compare(f, &b.trials, &h.trials, per_test_alpha) {
                    Compared::Moved(m) => moved.push(m),
                    Compared::NotEstimable => not_estimable.push(f),
                    Compared::Within | Compared::Absent => {}
                }
            }
            moved.sort_by(|x, y| size(y).total_cmp(&size(x)));
            let readings = read(&moved);
            LevelChanges {
                concurrency: h.concurrency,
                not_estimable,
                moved,
                readings,
            }
        })
        .collect();
    Some(Changes {
        figures_compared: Figure::ALL.len(),
        per_test_alpha,
        starts_covered: in_blocks,
        levels,
    })
}

/// What one figure's comparison at one level came to.
#[derive(Debug, Clone, PartialEq)]
enum Compared {
    /// Beyond noise and beyond the figure's floor.
    Moved(Moved),
    /// Compared, and not listed.
    Within,
    /// Recorded, but the blocks' design cannot bound it (the gate's level would not be
    /// estimable either): nothing is listed.
    NotEstimable,
    /// Fewer than 3 values in an arm.
    Absent,
}

/// How far a figure moved, in units comparable across figures (its floors).
fn size(m: &Moved) -> f64 {
    if m.ratio_scale {
        m.change.ln().abs() / m.figure.floor()
    } else {
        m.change.abs() / m.figure.floor()
    }
}

/// One figure at one level. In a run in blocks, the blocks as the gate groups them
/// (`gate::blocks::blocks_of`) and its estimator, `crossover_level`: the difference of block
/// means paired by slot orientation, so a slot effect cancels, with the blocks' own spread
/// (start effects) in its se and df. Ratio figures on logs, gauges and rates on their own
/// scale (the estimator only differences numbers within a block). Else Welch on the trials.
fn compare(f: Figure, base: &[TrialResult], head: &[TrialResult], alpha: f64) -> Compared {
    let ratio = f.scale() == Scale::Ratio;
    let on_scale = |t: &TrialResult| f.of(t).map(|v| if ratio { v.ln() } else { v });
    let values =
        |trials: &[TrialResult]| -> Vec<f64> { trials.iter().filter_map(on_scale).collect() };
    let (bv, hv) = (values(base), values(head));
    if bv.len() < 3 || hv.len() < 3 {
        return Compared::Absent;
    }
    let blocks = super::blocks::blocks_of(base, head, on_scale);
    let test = if blocks.is_empty() {
        relative_level(&bv, &hv, &[], &[], 0.0)
    } else {
        let test = crossover_level(&blocks, None, 0.0);
        if !test.estimable() {
            return Compared::NotEstimable;
        }
        test
    };
    let (Some(d), Some(se)) = (test.d, test.se) else {
        return Compared::Absent;
    };
    let half = if se > 0.0 {
        match StudentsT::new(0.0, 1.0, test.df.max(1.0)) {
            Ok(t) => t.inverse_cdf(1.0 - alpha / 2.0) * se,
            Err(_) => return Compared::Absent,
        }
    } else {
        0.0
    };
    let (low, high) = (d - half, d + half);
    let beyond_noise = low > 0.0 || high < 0.0;
    let beyond_floor = d.abs()
        >= if ratio {
            (1.0 + f.floor()).ln()
        } else {
            f.floor()
        };
    if !(beyond_noise && beyond_floor) {
        return Compared::Within;
    }
    let back = |x: f64| if ratio { x.exp() } else { x };
    Compared::Moved(Moved {
        figure: f,
        base: back(mean(&bv)),
        head: back(mean(&hv)),
        change: back(d),
        low: back(low),
        high: back(high),
        ratio_scale: ratio,
    })
}

/// The typed rules: which causes the moved figures read as, likeliest first.
fn read(moved: &[Moved]) -> Vec<Reading> {
    let find = |f: Figure| moved.iter().find(|m| m.figure == f);
    let up = |f: Figure| find(f).filter(|m| m.up());
    let down = |f: Figure| find(f).filter(|m| !m.up());
    let mut out = Vec::new();
    let mut say = |cause: Cause, figures: Vec<&Moved>| {
        let shown: Vec<String> = figures.iter().map(|m| m.said()).collect();
        out.push(Reading {
            cause,
            said: format!("{}: {}", shown.join(", "), cause.reading()),
        });
    };
    let kv: Vec<&Moved> = [
        down(Figure::BatchSize),
        up(Figure::KvCacheUsage),
        up(Figure::PreemptionsPerRequest),
    ]
    .into_iter()
    .flatten()
    .collect();
    let kv_cause = up(Figure::PreemptionsPerRequest).is_some()
        || (up(Figure::KvCacheUsage).is_some() && down(Figure::BatchSize).is_some());
    if kv_cause {
        say(Cause::KvCacheFillsSooner, kv);
    }
    if let Some(p) = up(Figure::PromptTokensPerRequest) {
        say(Cause::PromptLonger, vec![p]);
    }
    if let Some(c) = down(Figure::TokensPerChunk) {
        say(Cause::SpeculationFell, vec![c]);
    }
    // A smaller batch or requests queueing for a slot, the KV cache not filling: the batch
    // is capped. Either gauge suffices: each is read from a few scrapes under load.
    let capped: Vec<&Moved> = [down(Figure::BatchSize), up(Figure::Waiting)]
        .into_iter()
        .flatten()
        .collect();
    if !kv_cause && !capped.is_empty() {
        say(Cause::FewerRunAtOnce, capped.clone());
    }
    if let Some(o) = find(Figure::OutputTokensPerRequest) {
        say(Cause::OutputLengthChanged, vec![o]);
    }
    if let Some(e) = up(Figure::ErrorRate) {
        say(Cause::ErrorsRose, vec![e]);
    }
    // Latency alone, when nothing above explains it.
    let mut said_any = kv_cause
        || up(Figure::PromptTokensPerRequest).is_some()
        || down(Figure::TokensPerChunk).is_some()
        || !capped.is_empty()
        || find(Figure::OutputTokensPerRequest).is_some()
        || up(Figure::ErrorRate).is_some();
    if !said_any {
        if let Some(i) = up(Figure::ItlP50) {
            say(Cause::DecodeSlower, vec![i]);
            said_any = true;
        }
    }
    if !said_any {
        if let Some(t) = up(Figure::TtftP50) {
            say(Cause::LongerWaitForFirstToken, vec![t]);
            said_any = true;
        }
    }
    if !said_any {
        if let Some(e) = up(Figure::E2eP50) {
            say(Cause::SlowerEndToEnd, vec![e]);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn moved(figure: Figure, base: f64, head: f64) -> Moved {
        let ratio = figure.scale() == Scale::Ratio;
        let change = if ratio { head / base } else { head - base };
        Moved {
            figure,
            base,
            head,
            change,
            low: change,
            high: change,
            ratio_scale: ratio,
        }
    }

    fn causes(m: &[Moved]) -> Vec<Cause> {
        read(m).into_iter().map(|r| r.cause).collect()
    }

    /// A/A: both arms drawn from one distribution (latencies lognormal, CV 3 to 15%; tokens
    /// per chunk noisy; lengths fixed), 400 seeded replications of 5 trials a side: the share
    /// of runs that list any figure stays within the family level (issue 27: at most 1
    /// false line in 20 runs).
    #[test]
    fn an_unchanged_run_lists_nothing_in_at_least_19_of_20() {
        use crate::stats::summary::Percentiles;
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(27);
        let mut normal = move || {
            // Box-Muller, enough for a test.
            let (u, v): (f64, f64) = (rng.gen_range(1e-12..1.0), rng.gen_range(0.0..1.0));
            (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
        };
        let mut trial = |n: u32| {
            let mut t = crate::record::fake::trial(n, 1000.0 * (0.02 * normal()).exp());
            let mut p = |median: f64, cv: f64| {
                let p50 = median * (cv * normal()).exp();
                Some(Percentiles {
                    p50,
                    p90: p50 * 1.5,
                    p99: p50 * 2.0 * (cv * normal()).exp(),
                    mean: p50,
                    min: p50 / 2.0,
                    max: p50 * 3.0,
                    count: 100,
                })
            };
            t.ttft_ms = p(40.0, 0.15);
            t.itl_ms = p(10.0, 0.03);
            t.e2e_ms = p(400.0, 0.05);
            t.input_tokens = 40;
            t
        };
        let runs = 400;
        let mut listed = 0;
        for _ in 0..runs {
            let base: Vec<TrialResult> = (1..=5).map(&mut trial).collect();
            let head: Vec<TrialResult> = (1..=5).map(&mut trial).collect();
            let alpha = EXPLAIN_ALPHA / Figure::ALL.len() as f64;
            if Figure::ALL
                .iter()
                .any(|&f| matches!(compare(f, &base, &head, alpha), Compared::Moved(_)))
            {
                listed += 1;
            }
        }
        assert!(
            listed * 20 <= runs,
            "{listed} of {runs} unchanged runs listed a figure"
        );
    }

    /// One relative job in blocks, as `bench --server-command --base-server-command` runs
    /// it: `blocks` blocks of 3 trials an arm, the head on slot 1 in odd blocks. Slot 1 is
    /// `slot` faster (latencies shorter by that share, ln); each server start shifts its
    /// latencies by a normal of sd `start_sd` (ln); the head's ITL changed by `itl_change`.
    /// Within a trial: ITL p50 CV 1%, TTFT 5%, E2E 2%, p99s twice that.
    fn job_in_blocks(
        normal: &mut impl FnMut() -> f64,
        blocks: u32,
        slot: f64,
        start_sd: f64,
        itl_change: f64,
    ) -> (Vec<TrialResult>, Vec<TrialResult>) {
        use crate::stats::summary::Percentiles;
        let (mut base, mut head) = (Vec::new(), Vec::new());
        for b in 1..=blocks {
            let head_slot = b % 2;
            for (arm, on_slot, change) in [
                (&mut base, 1 - head_slot, 0.0),
                (&mut head, head_slot, itl_change),
            ] {
                let start = start_sd * normal();
                let shift = start - slot * f64::from(on_slot);
                for n in 1..=3 {
                    let mut t = crate::record::fake::trial(n, 1000.0 * (-shift).exp());
                    t.block = Some(b);
                    t.slot = Some(on_slot);
                    let mut p = |median: f64, cv: f64| {
                        let p50 = median * (shift + cv * normal()).exp();
                        Some(Percentiles {
                            p50,
                            p90: p50 * 1.5,
                            p99: p50 * 2.0 * (2.0 * cv * normal()).exp(),
                            mean: p50,
                            min: p50 / 2.0,
                            max: p50 * 3.0,
                            count: 100,
                        })
                    };
                    t.ttft_ms = p(40.0, 0.05);
                    t.itl_ms = p(10.0 * (1.0 + change), 0.01);
                    t.e2e_ms = p(400.0, 0.02);
                    t.input_tokens = 40;
                    arm.push(t);
                }
            }
        }
        (base, head)
    }

    /// Of `runs` seeded 4-block jobs (one level, so Bonferroni over the 14 figures): how
    /// many list ITL p50, how many list any figure, and how many would have listed ITL p50
    /// with the unpaired test on block means explain used before (for comparison).
    fn listed_in_blocks(
        seed: u64,
        runs: usize,
        slot: f64,
        itl_change: f64,
    ) -> (usize, usize, usize) {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let mut normal = move || {
            let (u, v): (f64, f64) = (rng.gen_range(1e-12..1.0), rng.gen_range(0.0..1.0));
            (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
        };
        let alpha = EXPLAIN_ALPHA / Figure::ALL.len() as f64;
        let (mut itl, mut any, mut unpaired) = (0, 0, 0);
        for _ in 0..runs {
            let (base, head) = job_in_blocks(&mut normal, 4, slot, 0.005, itl_change);
            let moved: Vec<Figure> = (Figure::ALL.iter())
                .filter_map(|&f| match compare(f, &base, &head, alpha) {
                    Compared::Moved(m) => Some(m.figure),
                    _ => None,
                })
                .collect();
            itl += usize::from(moved.contains(&Figure::ItlP50));
            any += usize::from(!moved.is_empty());
            let ln_itl = |trials: &[TrialResult]| -> (Vec<f64>, Vec<u32>) {
                (trials.iter())
                    .map(|t| (Figure::ItlP50.of(t).unwrap().ln(), t.block.unwrap()))
                    .unzip()
            };
            let ((bv, bl), (hv, hl)) = (ln_itl(&base), ln_itl(&head));
            let old = relative_level(&bv, &hv, &bl, &hl, 0.0);
            if let (Some(d), Some(se)) = (old.d, old.se) {
                let q = StudentsT::new(0.0, 1.0, old.df.max(1.0)).unwrap();
                let half = q.inverse_cdf(1.0 - alpha / 2.0) * se;
                unpaired += usize::from(d - half > 0.0 && d >= 1.05f64.ln());
            }
        }
        (itl, any, unpaired)
    }

    /// Issue 34: a 4% slot effect cancels by orientation instead of widening the bounds: a
    /// real +10% ITL change is listed as often as without it (the same seeded jobs), and an
    /// unchanged job lists anything in at most 5%. 200 seeded jobs each; the 2,000-job
    /// figures: `cargo test --lib explain_in_blocks_measured -- --ignored --nocapture`
    /// (67.5% listed with or without the slot effect, 0.0% of unchanged jobs: with 4
    /// blocks the bounds have 2 degrees of freedom, short of issue 34's 80%).
    #[test]
    fn in_blocks_a_slot_effect_neither_hides_nor_makes_a_change() {
        let (itl, _, _) = listed_in_blocks(34, 200, 0.04, 0.10);
        let (without, _, _) = listed_in_blocks(34, 200, 0.0, 0.10);
        assert_eq!(itl, without, "the slot effect moved the listing");
        assert!(itl * 100 >= 60 * 200, "+10% ITL listed in {itl} of 200");
        let (_, any, _) = listed_in_blocks(35, 200, 0.04, 0.0);
        assert!(
            any * 100 <= 5 * 200,
            "unchanged: {any} of 200 listed a figure"
        );
    }

    #[test]
    #[ignore = "a measurement: 8,000 simulated jobs"]
    fn explain_in_blocks_measured() {
        for slot in [0.0, 0.04] {
            let (itl, _, unpaired) = listed_in_blocks(340, 2000, slot, 0.10);
            let (_, any, _) = listed_in_blocks(341, 2000, slot, 0.0);
            println!(
                "slot effect {:.0}%: +10% ITL listed in {:.1}% of 2000 4-block jobs \
                 (the unpaired test on block means: {:.1}%); an unchanged job listed \
                 anything in {:.1}%",
                slot * 100.0,
                itl as f64 / 20.0,
                unpaired as f64 / 20.0,
                any as f64 / 20.0
            );
        }
    }

    #[test]
    fn one_block_lists_nothing_and_says_so() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        let mut normal = move || rng.gen_range(-1.0..1.0);
        // A 30% ITL change, but one block: one orientation, no calibration.
        let (base, head) = job_in_blocks(&mut normal, 1, 0.04, 0.005, 0.3);
        let alpha = EXPLAIN_ALPHA / Figure::ALL.len() as f64;
        assert_eq!(
            compare(Figure::ItlP50, &base, &head, alpha),
            Compared::NotEstimable
        );
    }

    #[test]
    fn a_real_change_is_listed_with_its_bounds() {
        let trials = |ttft: f64| -> Vec<TrialResult> {
            (1..=5)
                .map(|n| {
                    let mut t = crate::record::fake::trial(n, 1000.0);
                    let p50 = ttft * (1.0 + 0.01 * f64::from(n));
                    t.ttft_ms = Some(crate::stats::summary::Percentiles {
                        p50,
                        p90: p50,
                        p99: p50,
                        mean: p50,
                        min: p50,
                        max: p50,
                        count: 10,
                    });
                    t
                })
                .collect()
        };
        let Compared::Moved(m) = compare(Figure::TtftP50, &trials(40.0), &trials(60.0), 0.001)
        else {
            panic!("a 50% change not listed")
        };
        assert!((m.change - 1.5).abs() < 1e-9, "{m:?}");
        assert!(m.low < 1.5 && m.high > 1.5 && m.low > 1.0, "{m:?}");
        // 3% is below the 5% floor: not listed, however clear.
        assert_eq!(
            compare(Figure::TtftP50, &trials(40.0), &trials(41.2), 0.001),
            Compared::Within
        );
    }

    #[test]
    fn each_cause_is_read_from_its_own_figures() {
        let kv = [
            moved(Figure::BatchSize, 14.2, 9.8),
            moved(Figure::KvCacheUsage, 0.61, 0.93),
            moved(Figure::PreemptionsPerRequest, 0.0, 0.212),
            moved(Figure::Waiting, 1.0, 6.0),
        ];
        let r = read(&kv);
        assert_eq!(r[0].cause, Cause::KvCacheFillsSooner);
        assert_eq!(
            r[0].said,
            "batch size 14.2 -> 9.8 (-31%), KV cache 61% -> 93%, preemptions per request \
             0.000 -> 0.212: the KV cache fills sooner (a memory or max-num-seqs change?)"
        );
        assert!(!causes(&kv).contains(&Cause::FewerRunAtOnce));
        let batch = [
            moved(Figure::BatchSize, 8.0, 4.0),
            moved(Figure::Waiting, 0.0, 4.0),
        ];
        assert_eq!(causes(&batch), vec![Cause::FewerRunAtOnce]);
        let template = [
            moved(Figure::TtftP50, 20.0, 31.0),
            moved(Figure::PromptTokensPerRequest, 100.0, 138.0),
        ];
        assert_eq!(causes(&template), vec![Cause::PromptLonger]);
        let mtp = [
            moved(Figure::ItlP50, 10.0, 14.0),
            moved(Figure::TokensPerChunk, 2.8, 1.9),
        ];
        assert_eq!(causes(&mtp), vec![Cause::SpeculationFell]);
        let slower = [moved(Figure::ItlP50, 10.0, 11.0)];
        assert_eq!(causes(&slower), vec![Cause::DecodeSlower]);
        let e2e = [moved(Figure::E2eP50, 160.0, 178.0)];
        assert_eq!(causes(&e2e), vec![Cause::SlowerEndToEnd]);
        assert!(read(&[]).is_empty());
    }
}
