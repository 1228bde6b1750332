//! The load generator: probe the server(s), run the sweep, account for every request.

pub mod arrival;
pub mod body;
pub mod chunk;
pub mod client;
pub mod dialect;
pub mod headroom;
pub mod http;
pub mod interrupt;
pub mod openloop;
pub mod outcome;
pub mod preconnect;
pub mod probe;
pub mod read_delay;
pub mod sse;
pub mod sweep;
pub mod telemetry;
#[cfg(test)]
mod test_server;
pub mod tokens;
pub mod workload;

use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use reqwest::header::HeaderValue;

use crate::profile::{Arrival, Profile};
use crate::record::{Environment, ErrorClass, LevelResult, RunResult, SCHEMA_VERSION};
use client::Limits;
use sweep::{measured_only, run_batch, summarize_trial, urls_for, Batch, Shared, Windows};
use workload::Prompts;

/// The files a run writes into its folder.
pub const RESULTS_FILE: &str = "results.json";
pub const REQUESTS_FILE: &str = "requests.jsonl";
pub const SUMMARY_FILE: &str = "summary.csv";

/// How to run a benchmark.
pub struct BenchSetup {
    pub profile: Profile,
    /// Fingerprint fields given by the user; the rest is filled from the server.
    pub environment: Environment,
    pub out_dir: PathBuf,
    pub show_progress: bool,
}

/// A finished (or stopped) run and what makes it unusable, if anything.
pub struct BenchOutcome {
    pub result: RunResult,
    /// Levels that could not be measured (no success, or too many errors), or why the run
    /// stopped early (the server went away): exit 2.
    pub problems: Vec<String>,
    /// The signal (SIGINT 2, SIGTERM 15) that stopped the run: exit 128 + signal.
    pub interrupted: Option<i32>,
}

/// Runs the profile's sweep, writing `requests.jsonl` as requests finish and the result files
/// at the end. `on_level` sees each level as soon as its trials are done.
pub async fn run_bench(
    setup: BenchSetup,
    mut on_level: impl FnMut(&LevelResult),
) -> Result<BenchOutcome> {
    let profile = &setup.profile;
    let profile_hash = profile.canonical_hash()?;
    let max_concurrency = (profile.sweep.concurrency.iter().copied())
        .chain(profile.sweep.max_concurrency)
        .max()
        .unwrap_or(64) as usize;
    let api_key = api_key_header(profile)?;
    let probe_client = client::build_probe_client(api_key.as_ref())?;

    let report = probe::probe(&probe_client, &profile.target.endpoints).await?;
    let model = if profile.target.model == "auto" {
        match report.models.first() {
            Some(m) => m.clone(),
            None => bail!(
                "target.model is \"auto\" but {} lists no models at /v1/models; set target.model",
                profile.target.endpoints[0]
            ),
        }
    } else {
        profile.target.model.clone()
    };
    let mut environment = setup.environment.clone();
    environment.model = Some(model.clone());
    environment.endpoints = profile.target.endpoints.len();
    if environment.engine.is_none() {
        environment.engine = report.engine.clone();
    }
    // The engine whose dialect and metrics are used: the profile's, or the one detected.
    let engine = match profile.target.engine.as_str() {
        "auto" => report.engine.clone(),
        named => Some(named.to_string()),
    };
    let keeps_connections = dialect::reuses_connections(engine.as_deref());
    let client = http::build_load_client(if keeps_connections {
        max_concurrency
    } else {
        0
    })?;
    // Telemetry scrapes get their own connections, never one of the load's.
    let scrape_client = reqwest::Client::builder()
        .connect_timeout(std::time::Duration::from_secs(5))
        .build()
        .context("cannot build the HTTP client")?;
    let (extra_fields, dialect_warning) =
        dialect::fixed_length_fields(engine.as_deref(), &profile.workload);

    let prompts = Prompts::load(
        profile.workload.input_tokens,
        profile.workload.prompts_file.as_deref(),
    )?;
    std::fs::create_dir_all(&setup.out_dir)
        .with_context(|| format!("cannot create output folder {}", setup.out_dir.display()))?;
    let journal_path = setup.out_dir.join(REQUESTS_FILE);
    let journal = std::fs::File::create(&journal_path)
        .with_context(|| format!("cannot create {}", journal_path.display()))?;

    let sweep_cfg = &profile.sweep;
    let windows = sweep_cfg.duration.map(|measure| Windows {
        warmup: sweep_cfg.warmup.unwrap_or_default(),
        measure,
        cooldown: sweep_cfg.cooldown.unwrap_or_default(),
    });
    // Closed-loop levels are concurrencies; open-loop levels are rates (with the cap, if
    // any, as their concurrency).
    let levels: Vec<(u32, Option<f64>)> = if sweep_cfg.is_open_loop() {
        let cap = sweep_cfg.max_concurrency.unwrap_or(0);
        sweep_cfg.rates.iter().map(|&r| (cap, Some(r))).collect()
    } else {
        sweep_cfg.concurrency.iter().map(|&c| (c, None)).collect()
    };
    let per_level: u64 = levels
        .iter()
        .map(|&(c, rate)| {
            let per_trial = match (rate, sweep_cfg.trial_span()) {
                (Some(r), Some(span)) => open_loop_count(r, span) as u64,
                (_, Some(_)) => 0,
                _ => u64::from(sweep_cfg.requests_at(c)),
            };
            u64::from(sweep_cfg.warmup_requests) + per_trial * u64::from(sweep_cfg.trials)
        })
        .sum();
    let progress = if setup.show_progress {
        indicatif::ProgressBar::new(per_level)
    } else {
        indicatif::ProgressBar::hidden()
    };
    progress.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} requests  {msg}",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let shared = Arc::new(Shared {
        client,
        urls: urls_for(&profile.target.endpoints, profile.target.api)?,
        model,
        api: profile.target.api,
        workload: profile.workload.clone(),
        extra_fields,
        prompts,
        api_key,
        limits: Limits {
            request_timeout: profile.sweep.request_timeout,
            stall_timeout: profile.sweep.stall_timeout,
        },
        clock: Instant::now(),
        journal: Mutex::new(Box::new(BufWriter::new(journal))),
        progress: progress.clone(),
        interrupt: interrupt::Interrupt::from_signals(),
    });

    let started_at = now_rfc3339();
    let mut next_prompt = 0u64;
    let mut results = Vec::new();
    // Why the sweep stopped before its end (the server went away), if it did.
    let mut stopped: Option<String> = None;
    'levels: for &(concurrency, rate) in &levels {
        let name = match rate {
            Some(r) => format!("rate={r}/s"),
            None => format!("C={concurrency}"),
        };
        // The level's requests start on open connections (preconnect.rs). An open-loop
        // level without a cap has no number of connections to open.
        if keeps_connections && concurrency > 0 {
            progress.set_message(format!("{name} opening connections"));
            let per_endpoint = (concurrency as usize).div_ceil(profile.target.endpoints.len());
            preconnect::open_connections(&shared.client, &profile.target.endpoints, per_endpoint)
                .await;
        }
        if profile.sweep.warmup_requests > 0 {
            progress.set_message(format!("{name} warmup"));
            let batch = Batch {
                // Warmup runs closed loop, at the cap or at a concurrency matching the rate.
                concurrency: match rate {
                    Some(r) if concurrency == 0 => (r.ceil() as u32).max(1),
                    _ => concurrency,
                },
                trial: 0,
                requests: profile.sweep.warmup_requests,
                first_prompt: next_prompt,
                windows: None,
                rate,
            };
            let finished = run_batch(&shared, batch).await?;
            next_prompt += u64::from(batch.requests);
            if shared.interrupt.signal().is_some() {
                break 'levels;
            }
            if let Some(why) = outcome::unreachable(&finished) {
                stopped = Some(format!("{name} warmup: {why}"));
                break 'levels;
            }
        }
        let mut level = LevelResult {
            concurrency,
            rate,
            trials: Vec::new(),
        };
        for trial in 1..=profile.sweep.trials {
            progress.set_message(format!("{name} trial {trial}/{}", profile.sweep.trials));
            let batch = Batch {
                concurrency,
                trial,
                requests: profile.sweep.requests_at(concurrency),
                first_prompt: next_prompt,
                windows,
                rate,
            };
            let watch = telemetry::Watch::start(
                &scrape_client,
                &profile.target.endpoints,
                engine.as_deref(),
                shared.clock,
            )
            .await;
            let monitor = headroom::Monitor::start();
            let finished = match rate {
                Some(r) => {
                    let n = match windows {
                        Some(w) => open_loop_count(r, w.total()),
                        None => profile.sweep.requests_per_level as usize,
                    };
                    let arrival = profile.sweep.arrival.unwrap_or(Arrival::Poisson);
                    let offsets = openloop::schedule(
                        arrival,
                        profile.sweep.gamma_shape.unwrap_or(1.0),
                        r,
                        n,
                        openloop::trial_seed(profile.sweep.seed.unwrap_or(0), r, trial),
                    );
                    openloop::run_schedule(&shared, batch, &offsets, profile.sweep.max_concurrency)
                        .await?
                }
                None => run_batch(&shared, batch).await?,
            };
            let (mut client, reads) = monitor.finish();
            // The server counted every request of the trial, warmup windows included.
            let server = match watch {
                Some(w) => w.finish(&finished).await,
                None => None,
            };
            next_prompt += finished.len() as u64;
            let unreachable = outcome::unreachable(&finished);
            if !finished.is_empty() {
                let (measured, excluded) = measured_only(finished);
                let open_loop = rate.map(|r| {
                    openloop::stats(
                        r,
                        profile.sweep.arrival.unwrap_or(Arrival::Poisson),
                        &measured,
                    )
                });
                headroom::judge_sends(&mut client, &measured);
                let misses = dialect::length_misses(&measured, &profile.workload);
                let mut t = summarize_trial(trial, measured);
                dialect::note_length_misses(&mut t, misses, profile.workload.max_tokens);
                telemetry::attach(&mut t, server);
                t.excluded_requests = excluded;
                t.open_loop = open_loop;
                headroom::judge_reads(&mut client, &reads, t.itl_ms.as_ref().map(|p| p.p50));
                t.flags.extend(headroom::flag(&client));
                t.client = Some(client);
                level.trials.push(t);
            }
            if shared.interrupt.signal().is_some() || unreachable.is_some() {
                if let Some(why) = unreachable {
                    stopped = Some(format!("{name} trial {trial}: {why}"));
                }
                if !level.trials.is_empty() {
                    progress.suspend(|| on_level(&level));
                    results.push(level);
                }
                break 'levels;
            }
        }
        progress.suspend(|| on_level(&level));
        results.push(level);
    }
    progress.finish_and_clear();

    let interrupted = shared.interrupt.signal();
    let mut problems = level_problems(&results, profile.sweep.max_error_rate);
    if let Some(why) = &stopped {
        problems.push(format!(
            "the run stopped early: {why}; the levels after it were not measured (results marked incomplete)"
        ));
    }
    let mut warnings: Vec<String> = dialect_warning.into_iter().collect();
    if profile.target.engine == "auto" {
        warnings.extend(telemetry::missing_counter_warning(
            engine.as_deref(),
            &report.metrics,
        ));
    }
    warnings.extend(dialect::length_miss_warning(&results));
    for level in &results {
        for t in &level.trials {
            for flag in &t.flags {
                warnings.push(format!("{} trial {}: {flag}", level.label(), t.trial));
            }
        }
    }
    let result = RunResult {
        schema_version: SCHEMA_VERSION,
        tool: format!("throughline {}", env!("CARGO_PKG_VERSION")),
        profile_name: profile.name.clone(),
        profile_hash,
        profile: profile.clone(),
        environment,
        started_at,
        finished_at: now_rfc3339(),
        complete: interrupted.is_none() && stopped.is_none(),
        levels: results,
        warnings,
    };
    write_results(&result, &setup.out_dir)?;
    Ok(BenchOutcome {
        result,
        problems,
        interrupted,
    })
}

/// Writes `results.json` and `summary.csv` into `dir`, atomically.
pub fn write_results(result: &RunResult, dir: &Path) -> Result<()> {
    result.save(&dir.join(RESULTS_FILE))?;
    result.save_csv(&dir.join(SUMMARY_FILE))
}

/// Levels that did not measure: no successful request in a trial, or an error rate over
/// the limit. Each message says what the failures were.
pub fn level_problems(levels: &[LevelResult], max_error_rate: f64) -> Vec<String> {
    let mut problems = Vec::new();
    for level in levels {
        let rate = level.error_rate();
        let empty = level.trials.iter().filter(|t| t.succeeded == 0).count();
        if empty == 0 && rate <= max_error_rate {
            continue;
        }
        let mut classes = std::collections::BTreeMap::<ErrorClass, u64>::new();
        let mut examples = std::collections::BTreeMap::<ErrorClass, &str>::new();
        for t in &level.trials {
            for (c, n) in &t.failed {
                *classes.entry(*c).or_insert(0) += n;
            }
            for (c, msg) in &t.error_examples {
                examples.entry(*c).or_insert(msg);
            }
        }
        let by_class = classes
            .iter()
            .map(|(c, n)| match examples.get(c) {
                Some(msg) => format!("{c} {n}, e.g. \"{msg}\""),
                None => format!("{c} {n}"),
            })
            .collect::<Vec<_>>()
            .join("; ");
        if empty > 0 {
            problems.push(format!(
                "{}: {empty} of {} trials had no successful request (failures: {by_class})",
                level.label(),
                level.trials.len()
            ));
        } else {
            problems.push(format!(
                "{}: error rate {:.1}% is over the profile's max_error_rate {:.1}% (failures: {by_class})",
                level.label(),
                rate * 100.0,
                max_error_rate * 100.0
            ));
        }
    }
    problems
}

/// Requests in an open-loop duration trial: the rate times the whole span (at least one).
fn open_loop_count(rate: f64, span: std::time::Duration) -> usize {
    ((rate * span.as_secs_f64()).round() as usize).max(1)
}

fn api_key_header(profile: &Profile) -> Result<Option<HeaderValue>> {
    let Some(var) = &profile.target.api_key_env else {
        return Ok(None);
    };
    let key = std::env::var(var).map_err(|_| {
        anyhow::anyhow!(
            "target.api_key_env names the environment variable {var}, but it is not set"
        )
    })?;
    let mut value = HeaderValue::from_str(&format!("Bearer {key}")).map_err(|_| {
        anyhow::anyhow!("the API key in {var} holds characters not allowed in an HTTP header")
    })?;
    value.set_sensitive(true);
    Ok(Some(value))
}

/// The current UTC time as RFC 3339 text.
pub fn now_rfc3339() -> String {
    time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_else(|_| "unknown".to_string())
}
