//! One run of a profile, in three steps: prepare (probe the server, fill the fingerprint,
//! build the clients, open the journal), sweep (each level: open its connections, warm up,
//! run its trials), finish (what could not be measured, the warnings, the result files).

use std::io::BufWriter;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use reqwest::header::HeaderValue;

use super::client::{self, RequestLimits};
use super::prompts::Prompts;
use super::sweep::{measured_only, run_batch, urls_for, Batch, Shared, Windows};
use super::trial::summarize_trial;
use super::{
    dialect, headroom, http, interrupt, now_rfc3339, openloop, outcome, preconnect, probe,
    telemetry, write_results, BenchOutcome, BenchSetup,
};
use crate::profile::{Arrival, Profile};
use crate::record::checks::level_problems;
use crate::record::files::REQUESTS_FILE;
use crate::record::SCHEMA_VERSION;
use crate::record::{flag_lines, Environment, LevelResult, RunResult, TrialResult};

/// Runs the profile's sweep, writing `requests.jsonl` as requests finish and the result files
/// at the end. `on_level` sees each level as soon as its trials are done.
pub async fn run_bench(
    setup: BenchSetup,
    mut on_level: impl FnMut(&LevelResult),
) -> Result<BenchOutcome> {
    let profile = &setup.profile;
    let profile_hash = profile.canonical_hash()?;
    let mut run = Prepared::new(&setup).await?;
    let started_at = now_rfc3339();
    let mut results = Vec::new();
    // Why the sweep stopped before its end (the server went away), if it did.
    let mut stopped: Option<String> = None;
    for &(concurrency, rate) in &run.levels.clone() {
        let mut level = LevelResult {
            concurrency,
            rate,
            trials: Vec::new(),
        };
        let name = level.label();
        if let Some(why) = run.open_and_warm(&level).await? {
            stopped = why;
            break;
        }
        let mut stop = None;
        for trial in 1..=profile.sweep.trials {
            let (t, unreachable) = run.trial(&level, trial).await?;
            level.trials.extend(t);
            if run.shared.interrupt.signal().is_some() || unreachable.is_some() {
                stop = Some(unreachable.map(|why| format!("{name} trial {trial}: {why}")));
                break;
            }
        }
        let stopping = stop.is_some();
        if !stopping || !level.trials.is_empty() {
            run.shared.progress.suspend(|| on_level(&level));
            results.push(level);
        }
        if let Some(why) = stop {
            stopped = why;
            break;
        }
    }
    run.shared.progress.finish_and_clear();
    let interrupted = run.shared.interrupt.signal();
    let mut problems = level_problems(&results, profile.sweep.max_error_rate);
    if let Some(why) = &stopped {
        problems.push(format!(
            "the run stopped early: {why}; the levels after it were not measured (results marked incomplete)"
        ));
    }
    let warnings = run.warnings(&results);
    let result = RunResult {
        schema_version: SCHEMA_VERSION,
        tool: format!("throughline {}", env!("CARGO_PKG_VERSION")),
        profile_name: profile.name.clone(),
        profile_hash,
        profile: profile.clone(),
        environment: run.environment,
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

/// What every trial of a run shares, fixed before its first request.
struct Prepared<'a> {
    profile: &'a Profile,
    shared: Arc<Shared>,
    /// The fingerprint: the user's fields, with model, endpoints and engine filled in.
    environment: Environment,
    /// The engine whose dialect and metrics are used: the profile's, or the one detected.
    engine: Option<String>,
    probe: probe::ProbeReport,
    /// Telemetry scrapes get their own connections, never one of the load's.
    scrape_client: reqwest::Client,
    keeps_connections: bool,
    dialect_warning: Option<String>,
    windows: Option<Windows>,
    /// (concurrency, rate) of each level: closed-loop levels are concurrencies; open-loop
    /// levels are rates (with the cap, if any, as their concurrency).
    levels: Vec<(u32, Option<f64>)>,
    next_prompt: u64,
}

impl<'a> Prepared<'a> {
    /// Probes the server(s), builds the clients and opens the journal.
    async fn new(setup: &'a BenchSetup) -> Result<Prepared<'a>> {
        let profile = &setup.profile;
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

        let sweep = &profile.sweep;
        let windows = sweep.duration.map(|measure| Windows {
            warmup: sweep.warmup.unwrap_or_default(),
            measure,
            cooldown: sweep.cooldown.unwrap_or_default(),
        });
        let levels: Vec<(u32, Option<f64>)> = if sweep.is_open_loop() {
            let cap = sweep.max_concurrency.unwrap_or(0);
            sweep.rates.iter().map(|&r| (cap, Some(r))).collect()
        } else {
            sweep.concurrency.iter().map(|&c| (c, None)).collect()
        };
        let progress = progress_bar(profile, &levels, setup.show_progress);
        let shared = Arc::new(Shared {
            client,
            urls: urls_for(&profile.target.endpoints, profile.target.api)?,
            model,
            api: profile.target.api,
            workload: profile.workload.clone(),
            extra_fields,
            prompts,
            api_key,
            limits: RequestLimits {
                request_timeout: profile.sweep.request_timeout,
                stall_timeout: profile.sweep.stall_timeout,
            },
            clock: Instant::now(),
            journal: Mutex::new(Box::new(BufWriter::new(journal))),
            progress,
            interrupt: interrupt::Interrupt::from_signals(),
        });
        Ok(Prepared {
            profile,
            shared,
            environment,
            engine,
            probe: report,
            scrape_client,
            keeps_connections,
            dialect_warning,
            windows,
            levels,
            next_prompt: 0,
        })
    }

    /// Opens the level's connections and runs its warmup requests. `Some` when the run must
    /// stop there: `Some(None)` interrupted, `Some(Some(why))` the server went away.
    async fn open_and_warm(&mut self, level: &LevelResult) -> Result<Option<Option<String>>> {
        let (profile, shared) = (self.profile, &self.shared);
        let (concurrency, rate, name) = (level.concurrency, level.rate, level.label());
        // The level's requests start on open connections (preconnect.rs). An open-loop
        // level without a cap has no number of connections to open.
        if self.keeps_connections && concurrency > 0 {
            shared
                .progress
                .set_message(format!("{name} opening connections"));
            let per_endpoint = (concurrency as usize).div_ceil(profile.target.endpoints.len());
            preconnect::open_connections(&shared.client, &profile.target.endpoints, per_endpoint)
                .await;
        }
        if profile.sweep.warmup_requests == 0 {
            return Ok(None);
        }
        shared.progress.set_message(format!("{name} warmup"));
        let batch = Batch {
            // Warmup runs closed loop, at the cap or at a concurrency matching the rate.
            concurrency: match rate {
                Some(r) if concurrency == 0 => (r.ceil() as u32).max(1),
                _ => concurrency,
            },
            trial: 0,
            requests: profile.sweep.warmup_requests,
            first_prompt: self.next_prompt,
            windows: None,
            rate,
        };
        let finished = run_batch(shared, batch).await?;
        self.next_prompt += u64::from(batch.requests);
        if shared.interrupt.signal().is_some() {
            return Ok(Some(None));
        }
        Ok(outcome::unreachable(&finished).map(|why| Some(format!("{name} warmup: {why}"))))
    }

    /// Runs one trial of `level`: its result (`None` when nothing was sent), and why the
    /// server looks gone when every request of it failed to connect.
    async fn trial(
        &mut self,
        level: &LevelResult,
        trial: u32,
    ) -> Result<(Option<TrialResult>, Option<String>)> {
        let (profile, shared) = (self.profile, &self.shared);
        let (concurrency, rate) = (level.concurrency, level.rate);
        shared.progress.set_message(format!(
            "{} trial {trial}/{}",
            level.label(),
            profile.sweep.trials
        ));
        let batch = Batch {
            concurrency,
            trial,
            requests: profile.sweep.requests_at(concurrency),
            first_prompt: self.next_prompt,
            windows: self.windows,
            rate,
        };
        let watch = telemetry::Watch::start(
            &self.scrape_client,
            &profile.target.endpoints,
            self.engine.as_deref(),
            shared.clock,
        )
        .await;
        let monitor = headroom::Monitor::start();
        let finished = match rate {
            Some(r) => {
                let n = match self.windows {
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
                openloop::run_schedule(shared, batch, &offsets, profile.sweep.max_concurrency)
                    .await?
            }
            None => run_batch(shared, batch).await?,
        };
        let (mut client, reads) = monitor.finish();
        // The server counted every request of the trial, warmup windows included.
        let server = match watch {
            Some(w) => w.finish(&finished).await,
            None => None,
        };
        self.next_prompt += finished.len() as u64;
        let unreachable = outcome::unreachable(&finished);
        if finished.is_empty() {
            return Ok((None, unreachable));
        }
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
        Ok((Some(t), unreachable))
    }

    /// The run's warnings: the dialect's, a missing token counter, length misses, and every
    /// trial's flags.
    fn warnings(&self, results: &[LevelResult]) -> Vec<String> {
        let mut warnings: Vec<String> = self.dialect_warning.iter().cloned().collect();
        if self.profile.target.engine == "auto" {
            warnings.extend(telemetry::missing_counter_warning(
                self.engine.as_deref(),
                &self.probe.metrics,
            ));
        }
        warnings.extend(dialect::length_miss_warning(results));
        warnings.extend(flag_lines(results, None));
        warnings
    }
}

/// The progress bar: every request the sweep will send (warmups included), drawn only when
/// asked.
fn progress_bar(
    profile: &Profile,
    levels: &[(u32, Option<f64>)],
    show: bool,
) -> indicatif::ProgressBar {
    let sweep = &profile.sweep;
    let total: u64 = levels
        .iter()
        .map(|&(c, rate)| {
            let per_trial = match (rate, sweep.trial_span()) {
                (Some(r), Some(span)) => open_loop_count(r, span) as u64,
                (_, Some(_)) => 0,
                _ => u64::from(sweep.requests_at(c)),
            };
            u64::from(sweep.warmup_requests) + per_trial * u64::from(sweep.trials)
        })
        .sum();
    let progress = if show {
        indicatif::ProgressBar::new(total)
    } else {
        indicatif::ProgressBar::hidden()
    };
    progress.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} requests  {msg}",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    progress
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
