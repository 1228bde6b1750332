//! The console table of a run: one row per concurrency level, with the mean and spread
//! across trials (statistics are across trials, never across requests).

use std::io::IsTerminal;
use std::time::Duration;

use crate::profile::Profile;
use crate::record::analysis::{LevelMark, Shape};
use crate::record::telemetry::TrialTelemetry;
use crate::record::{Arm, LevelResult, RunResult, TrialResult};
use crate::stats::Spread;

/// The table header.
pub fn level_header() -> String {
    format!(
        "{:>6} | {:>22} | {:>13} | {:>10} | {:>8} | {:>7} | {:>6} | {:>6} | {:>9} | {:>9}",
        "C",
        "agg tok/s mean ± sd",
        "per-req tok/s",
        "tok/trial",
        "wall s",
        "ok",
        "failed",
        "err %",
        "TTFT p50",
        "ITL p50"
    )
}

/// The line above an arm's rows in a relative run.
pub fn arm_heading(arm: Option<Arm>) -> String {
    match arm {
        Some(Arm::Base) => "base (the target branch's server):".to_string(),
        Some(Arm::Head) => "head (this change's server):".to_string(),
        None => String::new(),
    }
}

/// One row for a level. Means are over trials; ok and failed are totals over trials.
pub fn level_row(level: &LevelResult) -> String {
    let trials = &level.trials;
    let tps: Vec<f64> = level.throughputs();
    let agg = match Spread::of(&tps) {
        Some(s) if s.n > 1 => format!("{:.1} ± {:.1} ({}x)", s.mean, s.sd, s.n),
        Some(s) => format!("{:.1} (1x)", s.mean),
        None => "no success".to_string(),
    };
    let mean = |f: &dyn Fn(&TrialResult) -> Option<f64>| level.trial_mean(f);
    let show = |v: Option<f64>, digits: usize, unit: &str| match v {
        Some(x) => format!("{x:.digits$}{unit}"),
        None => "-".to_string(),
    };
    let ok: u64 = trials.iter().map(|t| t.succeeded).sum();
    let failed: u64 = trials.iter().map(|t| t.failed_total()).sum();
    format!(
        "{:>6} | {:>22} | {:>13} | {:>10} | {:>8} | {:>7} | {:>6} | {:>6} | {:>9} | {:>9}",
        match level.rate {
            Some(r) => format!("{r}/s"),
            None => level.concurrency.to_string(),
        },
        agg,
        show(mean(&|t| t.per_request_tok_per_s), 1, ""),
        show(mean(&|t| Some(t.output_tokens as f64)), 0, ""),
        show(mean(&|t| Some(t.window_s)), 2, ""),
        ok,
        failed,
        format!("{:.1}", level.error_rate() * 100.0),
        show(mean(&|t| t.ttft_ms.as_ref().map(|p| p.p50)), 1, "ms"),
        show(mean(&|t| t.itl_ms.as_ref().map(|p| p.p50)), 2, "ms"),
    )
}

/// What the server's own metrics said at a level (saturation, token cross-check), how
/// much of the prompts its prefix cache served, and which latency percentiles were read
/// from a histogram, one indented line each under its row; None when none applies.
pub fn server_note(level: &LevelResult) -> Option<String> {
    let estimated = crate::record::estimated_percentiles_note(level);
    let lines: Vec<String> = [level_note(&level.trials), cache_note(level), estimated]
        .into_iter()
        .flatten()
        .map(|n| format!("{:>6}   {n}", ""))
        .collect();
    (!lines.is_empty()).then(|| lines.join("\n"))
}

/// The share of prompt tokens the server's prefix cache served at a level (mean over the
/// trials that reported it), where the server reported `cached_tokens`.
pub fn cache_note(level: &LevelResult) -> Option<String> {
    let shares: Vec<f64> = level
        .trials
        .iter()
        .filter_map(|t| t.prefix_cache.as_ref().map(|c| c.share))
        .collect();
    let mean = Spread::of(&shares)?.mean;
    Some(format!(
        "prefix cache: {:.1}% of prompt tokens served from the server's cache (mean over {} \
         trial(s), usage.prompt_tokens_details.cached_tokens)",
        mean * 100.0,
        shares.len()
    ))
}

/// One line on what the server's metrics said at a level, for the console.
fn level_note(trials: &[TrialResult]) -> Option<String> {
    let tele: Vec<&TrialTelemetry> = trials.iter().filter_map(|t| t.telemetry.as_ref()).collect();
    if tele.is_empty() {
        return None;
    }
    let mut reasons: Vec<String> = Vec::new();
    for t in &tele {
        for r in &t.saturation {
            let kind = r.split(" (").next().unwrap_or(r);
            if !reasons.iter().any(|x| x.starts_with(kind)) {
                reasons.push(r.clone());
            }
        }
    }
    let d: Vec<f64> = tele.iter().filter_map(|t| t.disagreement).collect();
    let check = if d.is_empty() {
        "no token cross-check (too few scrapes)".to_string()
    } else {
        let worst = d
            .iter()
            .fold(0.0f64, |m, v| if v.abs() > m.abs() { *v } else { m });
        format!(
            "client vs server tokens {:+.2}% (worst trial)",
            worst * 100.0
        )
    };
    let state = if reasons.is_empty() {
        "not saturated".to_string()
    } else {
        format!("saturated: {}", reasons.join(", "))
    };
    Some(format!("server: {state}; {check}"))
}

/// Colour on standard output only on a terminal, and never when `NO_COLOR` is set to
/// anything (no-color.org) or the terminal is "dumb": logs and pipes get plain text.
pub fn use_color() -> bool {
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    let dumb = std::env::var_os("TERM").is_some_and(|t| t == "dumb");
    !no_color && !dumb && std::io::stdout().is_terminal()
}

/// What a word of a verdict means, for its colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    Good,
    Bad,
    Unsure,
}

/// `word` in bold green, red or yellow when `color`, else as it is.
pub fn paint(word: &str, tone: Tone, color: bool) -> String {
    if !color {
        return word.to_string();
    }
    let hue = match tone {
        Tone::Good => anstyle::AnsiColor::Green,
        Tone::Bad => anstyle::AnsiColor::Red,
        Tone::Unsure => anstyle::AnsiColor::Yellow,
    };
    let style = anstyle::Style::new().bold().fg_color(Some(hue.into()));
    format!("{style}{word}{style:#}")
}

/// The per-stream decode speeds the up-front estimate is given at: a large model on one
/// GPU, and a small one (or a fast engine). Not measurements: the line says so.
pub const ASSUMED_STREAM_TOK_PER_S: [f64; 2] = [50.0, 300.0];

/// The line printed before a run starts: its size (levels x trials x requests) and a rough
/// estimate of its duration, stated as an estimate. Duration trials are timed by the
/// profile; request-count trials take, per stream, `ceil(requests / C)` requests of up to
/// `max_tokens` tokens each, in turn, at an assumed per-stream speed.
pub fn planned(profile: &Profile, arms: usize) -> String {
    let sweep = &profile.sweep;
    let arms = arms.max(1) as u64;
    let trials = u64::from(sweep.trials) * arms;
    let levels = sweep.levels();
    let arms_text = if arms > 1 { " x 2 arms" } else { "" };
    if let Some(t) = &sweep.trace {
        return format!(
            "planned: 1 level (a trace replayed at speedup {}) x {} trial(s){arms_text}; each \
             trial lasts the trace's span / speedup plus its last requests (the trace is read \
             when the run starts)",
            t.speedup, sweep.trials
        );
    }
    let head = format!(
        "planned: {} level(s) x {} trial(s){arms_text}",
        levels.len(),
        sweep.trials
    );
    let max_tokens = u64::from(profile.workload.max_tokens);
    let warmup = u64::from(sweep.warmup_requests) * levels.len() as u64 * arms;
    if let Some(span) = sweep.trial_span() {
        let each = span.as_secs_f64() + timed_tail(profile);
        let total = Duration::from_secs_f64(each * (levels.len() as u64 * trials) as f64);
        return format!(
            "{head} of {} each; estimate: about {} plus {warmup} warmup request(s) (an estimate: \
             trials are timed, plus the requests in flight when a window closes, one of \
             {max_tokens} tokens at {:.0} tok/s; the warmup requests are not)",
            humantime::format_duration(span),
            rough(total),
            ASSUMED_STREAM_TOK_PER_S[0]
        );
    }
    let (requests, scheduled_s, stream_tokens) = work(profile, arms);
    let at = |speed: f64| {
        rough(Duration::from_secs_f64(
            scheduled_s + stream_tokens as f64 / speed,
        ))
    };
    let [slow, fast] = ASSUMED_STREAM_TOK_PER_S;
    format!(
        "{head} = {} requests (+{warmup} warmup) of up to {max_tokens} output tokens; estimate: \
         about {} if every stream decodes at {slow:.0} tok/s, {} at {fast:.0} tok/s (an \
         estimate, not a measurement: the server's speed decides)",
        group(requests as f64),
        at(slow),
        at(fast),
    )
}

/// The requests a run of `profile` sends (`arms` in turn), the seconds of sending at a fixed
/// rate (open loop) and the tokens each stream decodes in turn (closed loop): the two parts
/// of the estimate.
fn work(profile: &Profile, arms: u64) -> (u64, f64, u64) {
    let sweep = &profile.sweep;
    let trials = u64::from(sweep.trials) * arms;
    let max_tokens = u64::from(profile.workload.max_tokens);
    let mut requests = 0u64;
    let (mut scheduled_s, mut stream_tokens) = (0.0f64, 0u64);
    for &(c, rate) in &sweep.levels() {
        let c_eff = if c == 0 { 1 } else { c };
        let per_trial = u64::from(sweep.requests_at(c_eff));
        requests += per_trial * trials;
        let warm_waves = u64::from(sweep.warmup_requests).div_ceil(u64::from(c_eff));
        match rate {
            Some(r) => {
                scheduled_s += per_trial as f64 / r * trials as f64;
                stream_tokens += max_tokens * (1 + warm_waves) * arms;
            }
            None => {
                let waves = per_trial.div_ceil(u64::from(c_eff));
                stream_tokens += max_tokens * (waves * trials + warm_waves * arms);
            }
        }
    }
    (requests, scheduled_s, stream_tokens)
}

/// A timed trial ends when the requests in flight as its window closes finish: about one
/// request of `max_tokens` at the slower assumed stream speed, in seconds.
fn timed_tail(profile: &Profile) -> f64 {
    f64::from(profile.workload.max_tokens) / ASSUMED_STREAM_TOK_PER_S[0]
}

/// The seconds [`planned`] estimates for a run of `profile` (`arms` in turn) at the slower
/// assumed stream speed; None for a trace replay (its length is the trace's).
pub fn estimate_seconds(profile: &Profile, arms: usize) -> Option<f64> {
    let sweep = &profile.sweep;
    if sweep.trace.is_some() {
        return None;
    }
    let arms = arms.max(1) as u64;
    if let Some(span) = sweep.trial_span() {
        let trials = sweep.levels().len() as f64 * f64::from(sweep.trials) * arms as f64;
        return Some((span.as_secs_f64() + timed_tail(profile)) * trials);
    }
    let (_, scheduled_s, stream_tokens) = work(profile, arms);
    Some(scheduled_s + stream_tokens as f64 / ASSUMED_STREAM_TOK_PER_S[0])
}

/// A duration rounded for an estimate: whole seconds under two minutes, whole minutes under
/// two hours, else quarter hours.
pub fn rough(d: Duration) -> String {
    let s = d.as_secs_f64().ceil() as u64;
    let rounded = match s {
        0..120 => s.max(1),
        120..7200 => s.div_ceil(60) * 60,
        _ => s.div_ceil(900).saturating_mul(900),
    };
    humantime::format_duration(Duration::from_secs(rounded)).to_string()
}

/// A number with thousands separators, no decimals: 1250.4 -> "1,250".
pub fn group(v: f64) -> String {
    let digits = format!("{:.0}", v.abs());
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if v < 0.0 && digits != "0" {
        out.insert(0, '-');
    }
    out
}

/// A level the analysis named: "C = 64" or "10 req/s".
fn mark_name(m: &LevelMark) -> String {
    match m.rate {
        Some(r) => format!("{r} req/s"),
        None => format!("C = {}", m.concurrency),
    }
}

/// Peak, knee (both from the run's analysis, `record::analysis`) and errors of one arm's
/// levels; None when no level measured anything.
fn found(levels: &[LevelResult], shape: Option<&Shape>) -> Option<String> {
    let shape = shape?;
    let peak = shape.peak;
    let mut said = format!("peak {} tok/s at {}", group(peak.tok_s), mark_name(&peak));
    if let Some(k) = &shape.knee {
        said.push_str(&format!(
            "; knee at {} ({:.0}% of the peak)",
            mark_name(k),
            k.tok_s / peak.tok_s * 100.0
        ));
    }
    let sent: u64 = levels
        .iter()
        .flat_map(|l| &l.trials)
        .map(|t| t.requests_sent)
        .sum();
    let failed: u64 = (levels.iter().flat_map(|l| &l.trials))
        .map(|t| t.failed_total())
        .sum();
    match failed {
        0 => said.push_str("; no errors"),
        n => said.push_str(&format!(
            "; {} failed request(s) of {} ({:.1}%)",
            group(n as f64),
            group(sent as f64),
            n as f64 / sent.max(1) as f64 * 100.0
        )),
    }
    Some(said)
}

/// The one line a run ends with, from measured figures only, like hyperfine's summary:
/// "peak 1,250 tok/s at C = 64; knee at C = 32 (93% of the peak); no errors". A relative run
/// says it of each arm; an incomplete run says so.
pub fn closing_line(result: &RunResult) -> String {
    let analysis = result.analysis.as_ref();
    let head = found(&result.levels, analysis.and_then(|a| a.head.as_ref()));
    let mut line = match (&result.base, head) {
        (Some(base), head) => format!(
            "head: {}; base: {}",
            head.unwrap_or_else(|| "nothing measured".into()),
            found(&base.levels, analysis.and_then(|a| a.base.as_ref()))
                .unwrap_or_else(|| "nothing measured".into())
        ),
        (None, Some(head)) => head,
        (None, None) => "nothing measured".to_string(),
    };
    if !result.complete {
        line.push_str(" (incomplete run)");
    }
    line
}

/// The most characters of a warning the console shows; the whole one is in the Markdown
/// report (report.md for a run, verdict.md for a verdict).
pub const WARNING_WIDTH: usize = 220;

/// A warning for the terminal: escaped, and cut at a word near [`WARNING_WIDTH`] with where
/// the whole one is, so that a run's warnings are a few lines, not pages.
pub fn short_warning(warning: &str, whole_in: &str) -> String {
    let text = crate::untrusted::for_terminal(warning);
    if text.chars().count() <= WARNING_WIDTH {
        return text.into_owned();
    }
    let cut: String = text.chars().take(WARNING_WIDTH).collect();
    let cut = match cut.rfind(' ') {
        Some(i) if i > WARNING_WIDTH / 2 => &cut[..i],
        _ => &cut[..],
    };
    format!(
        "{} ... (whole in {whole_in})",
        cut.trim_end_matches([',', ';', ' '])
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_rough_duration_of_any_size_is_said_not_overflowed() {
        use super::{rough, Duration};
        assert_eq!(rough(Duration::from_secs(61)), "1m 1s");
        assert_eq!(rough(Duration::from_secs(125)), "3m");
        // An estimate from a hand-edited record can be absurd: said, never a panic.
        assert!(!rough(Duration::MAX).is_empty());
    }

    #[test]
    fn a_long_warning_is_cut_and_says_where_the_rest_is() {
        let long = format!(
            "::error::{}",
            "client-bound: 216 of 8425 reads late, ".repeat(20)
        );
        let short = super::short_warning(&long, "verdict.md");
        assert!(
            short.chars().count() <= super::WARNING_WIDTH + 40,
            "{short}"
        );
        assert!(short.ends_with("... (whole in verdict.md)"), "{short}");
        assert!(!short.starts_with("::"), "escaped: {short}");
        assert_eq!(super::short_warning("short one", "x"), "short one");
    }

    use super::*;
    use crate::record::fake::trial;

    #[test]
    fn row_shows_mean_spread_and_totals() {
        let level = LevelResult {
            concurrency: 16,
            rate: None,
            trials: vec![trial(1, 100.0), trial(2, 110.0)],
        };
        let row = level_row(&level);
        assert!(row.contains("105.0 ± 7.1 (2x)"), "{row}");
        assert!(row.contains("     20 |"), "{row}");
        assert_eq!(row.len(), level_header().len());
    }

    #[test]
    fn closing_line_names_peak_knee_and_errors_from_the_data() {
        let mut run = crate::record::fake::run(&[
            (1, &[100.0, 102.0]),
            (8, &[700.0, 720.0]),
            (32, &[1180.0, 1200.0]),
            (64, &[1250.0, 1250.0]),
        ]);
        assert_eq!(
            closing_line(&run),
            "peak 1,250 tok/s at C = 64; knee at C = 32 (95% of the peak); no errors"
        );
        // Still climbing: no knee is named.
        run.levels[2]
            .trials
            .iter_mut()
            .for_each(|t| t.output_tok_per_s = 900.0);
        run.levels[0].trials[0].requests_sent = 12;
        run.levels[0].trials[0]
            .failed
            .insert(crate::record::ErrorClass::Timeout, 2);
        run.analyse();
        assert_eq!(
            closing_line(&run),
            "peak 1,250 tok/s at C = 64; 2 failed request(s) of 82 (2.4%)"
        );
        run.complete = false;
        assert!(closing_line(&run).ends_with("(incomplete run)"));
    }

    #[test]
    fn numbers_are_grouped_and_colour_is_only_asked_for() {
        assert_eq!(group(1250.4), "1,250");
        assert_eq!(group(999.0), "999");
        assert_eq!(group(1234567.0), "1,234,567");
        assert_eq!(paint("PASS", Tone::Good, false), "PASS");
        let red = paint("FAIL", Tone::Bad, true);
        assert!(red.starts_with("\u{1b}[") && red.contains("FAIL") && red.ends_with("\u{1b}[0m"));
    }

    #[test]
    fn the_plan_line_counts_requests_and_says_it_estimates() {
        let p = crate::profile::QuickStart::new("http://127.0.0.1:1")
            .profile()
            .unwrap();
        let line = planned(&p, 1);
        // C = 1, 8, 32 at 4 x C (at least 8) requests, 5 trials: (8 + 32 + 128) x 5 = 840.
        assert!(
            line.contains("3 level(s) x 5 trial(s) = 840 requests (+12 warmup)"),
            "{line}"
        );
        // Waves per stream: 8 + 4 + 4 per trial x 5, + warmup 4 + 1 + 1: 86 x 256 tokens
        // = 22,016 stream-tokens: 7m 21s at 50 tok/s -> 8m; 73.4 s at 300 tok/s -> 1m 14s.
        assert!(
            line.contains("about 8m if every stream decodes at 50 tok/s, 1m 14s at 300"),
            "{line}"
        );
        assert!(line.contains("an estimate"), "{line}");
    }
}
