//! One run of a profile, in three steps: prepare (probe the server, fill the fingerprint,
//! build the clients, open the journal), sweep (each level: open its connections, warm up,
//! run its trials), finish (what could not be measured, the warnings, the result files).

use std::io::{BufWriter, IsTerminal};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::{bail, Context, Result};

use super::order::{open_loop_count, plan_steps, schedule, Slot};
use super::sweep::{run_batch, urls_for, Batch, Shared, Windows};
use super::trial::{TrialPlace, TrialTally};
use super::{headroom, interrupt, openloop, progress};
use crate::engine::Engine;
use crate::load::bench_setup::{now_rfc3339, write_results, BenchOutcome, BenchSetup};
use crate::load::stream::client::{self, RequestLimits};
use crate::load::wire::{fdlimit, http, preconnect};
use crate::load::workload::source;
use crate::load::{dialect, probe, telemetry};
use crate::profile::{Arrival, Profile, TrialOrder};
use crate::record::checks::level_problems;
use crate::record::files::{DERIVED_FILES, REQUESTS_FILE};
use crate::record::SCHEMA_VERSION;
use crate::record::{flag_summary, Arm, BaseArm, Environment, LevelResult, RunResult, TrialResult};

/// Runs the profile's sweep, writing `requests.jsonl` as requests finish and the result files
/// at the end. `on_level` sees each level once its trials are done (in a relative run, with
/// the arm it belongs to).
pub async fn run_bench(
    setup: BenchSetup,
    mut on_level: impl FnMut(Option<Arm>, &LevelResult),
) -> Result<BenchOutcome> {
    let profile = &setup.profile;
    let profile_hash = profile.canonical_hash()?;
    let mut run = Prepared::new(&setup).await?;
    let started_at = now_rfc3339();
    let arms = run.arms();
    let slots = run.slots.clone();
    run.shared.progress.start();
    // Each arm's levels, in the profile's order, filled as their trials run.
    let empty: Vec<LevelResult> = (run.levels.iter())
        .map(|&(concurrency, rate)| LevelResult::empty(concurrency, rate))
        .collect();
    let mut measured = vec![empty; arms.len()];
    let mut warmed = vec![vec![false; run.levels.len()]; arms.len()];
    let mut shown = warmed.clone();
    let last_slot =
        |arm: usize, level: usize| slots.iter().rposition(|s| s.arm == arm && s.level == level);
    // Why the sweep stopped before its end (the server went away), if it did.
    let mut stopped: Option<String> = None;
    for (at, slot) in slots.iter().enumerate() {
        let arm = arms[slot.arm];
        let (concurrency, rate) = run.levels[slot.level];
        let name = arm_label(arm, &measured[slot.arm][slot.level].label());
        run.open_connections(arm, concurrency).await;
        if !std::mem::replace(&mut warmed[slot.arm][slot.level], true) {
            if let Some(why) = run.warm(arm, concurrency, rate, &name).await? {
                stopped = why;
                break;
            }
        }
        let (t, unreachable) = run.trial(arm, concurrency, rate, slot, &name).await?;
        measured[slot.arm][slot.level].trials.extend(t);
        if run.shared.interrupt.signal().is_some() || unreachable.is_some() {
            stopped = unreachable.map(|why| format!("{name} trial {}: {why}", slot.round));
            break;
        }
        // Sequential runs finish a level at a time: show it now. Interleaved levels all
        // finish in the last round and are shown together, in the profile's order.
        if profile.sweep.order == TrialOrder::Sequential
            && last_slot(slot.arm, slot.level) == Some(at)
        {
            shown[slot.arm][slot.level] = true;
            let level = &measured[slot.arm][slot.level];
            run.shared.progress.suspend(|| on_level(arm, level));
        }
    }
    run.shared.progress.finish();
    let interrupted = run.shared.interrupt.signal();
    let complete = interrupted.is_none() && stopped.is_none();
    // The levels not shown yet, and a stopped run keeps those that measured something.
    for (a, levels) in measured.iter_mut().enumerate() {
        for (l, level) in levels.iter().enumerate() {
            if !shown[a][l] && !level.trials.is_empty() {
                run.shared.progress.suspend(|| on_level(arms[a], level));
            }
        }
        if !complete {
            levels.retain(|l| !l.trials.is_empty());
        }
    }
    let (head, base) = split_arms(&arms, measured);
    let mut problems = level_problems(&head, profile.sweep.max_error_rate);
    if let Some(base) = &base {
        problems.extend(
            level_problems(base, profile.sweep.max_error_rate)
                .into_iter()
                .map(|p| format!("base arm: {p}")),
        );
    }
    if let Some(why) = &stopped {
        problems.push(format!(
            "the run stopped early: {why}; the trials after it were not run (results marked incomplete)"
        ));
    }
    let mut warnings = run.warnings(&head, base.as_deref());
    if let Some(c) = &run.shared.conversations {
        warnings.extend(c.bound_warning());
    }
    let mut result = RunResult {
        schema_version: SCHEMA_VERSION,
        tool: format!("throughline {}", env!("CARGO_PKG_VERSION")),
        profile_name: profile.name.clone(),
        profile_hash,
        profile: profile.clone(),
        environment: run.environment.clone(),
        started_at,
        finished_at: now_rfc3339(),
        complete,
        levels: head,
        warnings,
        base: base.map(|levels| BaseArm {
            endpoints: setup.base_endpoints.len(),
            model: run.base_model.clone(),
            engine: run.base_engine.0.clone(),
            engine_version: run.base_engine.1.clone(),
            levels,
        }),
        drift: None,
        notes: run.notes.clone(),
        servers: None,
        analysis: None,
        run_id: Some(crate::record::run_id::run_id().to_string()),
    };
    result.analyse();
    if let Some(d) = result.drift.as_ref().filter(|d| d.flagged) {
        result.warnings.push(crate::record::drift_warning(d));
    }
    write_results(&result, &setup.out_dir)?;
    Ok(BenchOutcome {
        result,
        problems,
        interrupted,
    })
}

/// "C=8" in a one-server run, "base C=8" or "head C=8" in a relative one.
fn arm_label(arm: Option<Arm>, level: &str) -> String {
    match arm {
        Some(a) => format!("{} {level}", a.name()),
        None => level.to_string(),
    }
}

/// The head's levels (or the one server's) and, in a relative run, the base's.
fn split_arms(
    arms: &[Option<Arm>],
    mut measured: Vec<Vec<LevelResult>>,
) -> (Vec<LevelResult>, Option<Vec<LevelResult>>) {
    match arms.iter().position(|a| *a == Some(Arm::Base)) {
        Some(b) => {
            let base = measured.remove(b);
            (measured.remove(0), Some(base))
        }
        None => (measured.remove(0), None),
    }
}

/// What every trial of a run shares, fixed before its first request.
struct Prepared<'a> {
    profile: &'a Profile,
    shared: Arc<Shared>,
    /// The fingerprint: the user's fields, with model, endpoints and engine filled in.
    environment: Environment,
    /// The engine whose dialect and metrics are used: the profile's, or the one detected.
    engine: Option<Engine>,
    probe: probe::ProbeReport,
    /// Telemetry scrapes get their own connections, never one of the load's.
    scrape_client: reqwest::Client,
    keeps_connections: bool,
    dialect_warning: Option<String>,
    windows: Option<Windows>,
    /// (concurrency, rate) of each level: closed-loop levels are concurrencies; open-loop
    /// levels are rates (with the cap, if any, as their concurrency).
    levels: Vec<(u32, Option<f64>)>,
    /// Relative runs: the base arm's endpoints and the model its server reported.
    base_endpoints: &'a [String],
    base_model: Option<String>,
    /// The engine and version the base server reported (each arm speaks for itself).
    base_engine: (Option<String>, Option<String>),
    next_prompt: u64,
    /// `sweep.trace`: its send offsets at the speedup, and its length (a trial's first
    /// request number is a multiple of it, so request i takes the trace's row i).
    trace: Option<(Vec<f64>, u64)>,
    /// How the workload was made (input lengths in words or tokens, dataset, trace).
    notes: Vec<String>,
    /// The run's trials in the order they run.
    slots: Vec<Slot>,
    /// The progress step running now.
    step: usize,
}

/// What the probe found before anything is sent: the servers' models and engines, and the
/// fingerprint filled in from them.
struct Probed {
    api_key: Option<reqwest::header::HeaderValue>,
    report: probe::ProbeReport,
    model: String,
    base_model: Option<String>,
    base_engine: (Option<String>, Option<String>),
    environment: Environment,
    engine: Option<Engine>,
}

/// When the trials run: their windows, the trace's send offsets and rate, the levels and
/// the order of the trials.
struct Schedule {
    windows: Option<Windows>,
    trace: Option<(Vec<f64>, f64)>,
    levels: Vec<(u32, Option<f64>)>,
    slots: Vec<Slot>,
}

/// Reads the workload's files (a bad row is reported before anything is sent) and makes
/// sure the process may open the descriptors the run needs (a run that runs out of them
/// part way loses its results).
fn read_workload(setup: &BenchSetup) -> Result<source::Source> {
    let profile = &setup.profile;
    let uncapped = profile.sweep.is_open_loop() && profile.sweep.max_concurrency.is_none();
    let source = source::prepare(profile)?;
    let mut need = fdlimit::Need::of(profile, setup.base_endpoints.len());
    if let (Some(t), true) = (&source.trace, uncapped) {
        // Without a cap, every request of the trace may be in flight at once.
        need.in_flight = t.entries.len() as u64;
    }
    fdlimit::ensure(&need, uncapped)?;
    Ok(source)
}

/// Probes the server(s) (the base arm's too) with the probe's own client: the model, the
/// engine, and the fingerprint filled in.
async fn probe_servers(setup: &BenchSetup) -> Result<Probed> {
    let profile = &setup.profile;
    let api_key = client::api_key_header(profile)?;
    let probe_client = client::build_probe_client(api_key.as_ref())?;
    let report = probe::probe(
        &probe_client,
        &profile.target.endpoints,
        profile.target.api_key_env.as_deref(),
    )
    .await?;
    let model = report.model(&profile.target.model, &profile.target.endpoints[0])?;
    let base_probe = match setup.base_endpoints.is_empty() {
        true => None,
        false => Some(base_model(&probe_client, profile, &setup.base_endpoints, &model).await?),
    };
    let base_engine = (base_probe.as_ref())
        .map(|(_, r)| (r.engine.map(|e| e.to_string()), r.engine_version.clone()))
        .unwrap_or_default();
    let base_model = base_probe.map(|(m, _)| m);
    let mut environment = setup.environment.clone();
    environment.model = Some(model.clone());
    environment.endpoints = profile.target.endpoints.len();
    probe::fill_environment(&mut environment, &report, &profile.target.endpoints);
    let engine = profile.target.engine.or_detected(report.engine);
    Ok(Probed {
        api_key,
        report,
        model,
        base_model,
        base_engine,
        environment,
        engine,
    })
}

/// The load's client (keeping up to the largest concurrency's connections, where the
/// engine reuses them) and the telemetry scrapes' own client, never one of the load's.
fn build_clients(
    profile: &Profile,
    keeps_connections: bool,
) -> Result<(http::LoadClient, reqwest::Client)> {
    let max_concurrency = (profile.sweep.concurrency.iter().copied())
        .chain(profile.sweep.max_concurrency)
        .max()
        .unwrap_or(64) as usize;
    let client = http::build_load_client(if keeps_connections {
        max_concurrency
    } else {
        0
    })?;
    let scrape_client = reqwest::Client::builder()
        .connect_timeout(std::time::Duration::from_secs(5))
        .build()
        .context("cannot build the HTTP client")?;
    Ok((client, scrape_client))
}

/// Opens the run's journal (`requests.jsonl`) in a fresh start: what was derived from the
/// old one goes first, so no complete-looking results.json of the run before stays beside
/// the new journal.
fn open_journal(out_dir: &std::path::Path) -> Result<std::fs::File> {
    crate::fsutil::ensure_output_dir(out_dir)?;
    for name in DERIVED_FILES {
        crate::fsutil::remove_output(&out_dir.join(name))?;
    }
    crate::fsutil::create_output(&out_dir.join(REQUESTS_FILE))
}

/// The run's windows, levels and trial order; a trace replay says how long it will take.
fn schedule_trials(setup: &BenchSetup, source: &source::Source) -> Schedule {
    let sweep = &setup.profile.sweep;
    let windows = sweep.duration.map(|measure| Windows {
        warmup: sweep.warmup.unwrap_or_default(),
        measure,
        cooldown: sweep.cooldown.unwrap_or_default(),
    });
    let trace = (source.trace.as_ref())
        .zip(sweep.trace.as_ref())
        .map(|(t, spec)| source::trace_schedule(t, spec.speedup));
    let levels: Vec<(u32, Option<f64>)> = if let Some((_, rate)) = &trace {
        vec![(sweep.max_concurrency.unwrap_or(0), Some(*rate))]
    } else {
        sweep.levels()
    };
    let arms = if setup.base_endpoints.is_empty() {
        1
    } else {
        2
    };
    let slots = schedule(
        levels.len(),
        sweep.trials,
        arms,
        sweep.order,
        sweep.seed.unwrap_or(0),
    );
    if let Some((offsets, _)) = &trace {
        // A replay takes the trace's time: say how long before it starts.
        let per_trial = offsets.last().copied().unwrap_or(0.0);
        let round = |s: f64| std::time::Duration::from_millis((s * 1000.0).ceil() as u64);
        eprintln!(
            "trace replay: {} requests over {} per trial, {} trials: about {} of sending",
            offsets.len(),
            humantime::format_duration(round(per_trial)),
            slots.len(),
            humantime::format_duration(round(per_trial * slots.len() as f64))
        );
    }
    Schedule {
        windows,
        trace,
        levels,
        slots,
    }
}

/// The progress display: its steps and planned requests, as a bar on a terminal, lines
/// elsewhere, or nothing.
fn progress_of(setup: &BenchSetup, schedule: &Schedule) -> progress::Progress {
    let trace_len = schedule.trace.as_ref().map(|(o, _)| o.len() as u64);
    let (steps, planned_requests) =
        plan_steps(&setup.profile, &schedule.levels, &schedule.slots, trace_len);
    let mode = match setup.show_progress {
        false => progress::Mode::Off,
        true if std::io::stderr().is_terminal() => progress::Mode::Bar,
        true => progress::Mode::Lines {
            every: progress::line_interval(),
        },
    };
    progress::Progress::new(mode, steps, planned_requests)
}

impl<'a> Prepared<'a> {
    /// Reads the workload, probes the server(s), builds the clients, opens the journal and
    /// schedules the trials.
    async fn new(setup: &'a BenchSetup) -> Result<Prepared<'a>> {
        let profile = &setup.profile;
        let source = read_workload(setup)?;
        let probed = probe_servers(setup).await?;
        let engine = probed.engine;
        let keeps_connections = dialect::reuses_connections(engine);
        let (client, scrape_client) = build_clients(profile, keeps_connections)?;
        let (extra_fields, dialect_warning) =
            dialect::fixed_length_fields(engine, &profile.workload);
        let journal = open_journal(&setup.out_dir)?;
        let schedule = schedule_trials(setup, &source);
        let progress = progress_of(setup, &schedule);
        let model = probed.model;
        let base_model = probed.base_model;
        let shared = Arc::new(Shared {
            client,
            urls: urls_for(&profile.target.endpoints, profile.target.api)?,
            base_urls: urls_for(&setup.base_endpoints, profile.target.api)?,
            base_model: base_model.clone().unwrap_or_else(|| model.clone()),
            model,
            api: profile.target.api,
            workload: profile.workload.clone(),
            extra_fields,
            prompts: source.prompts,
            lengths: source.lengths,
            api_key: probed.api_key,
            limits: RequestLimits {
                request_timeout: profile.sweep.request_timeout,
                stall_timeout: profile.sweep.stall_timeout,
                answer_bytes: (source.conversations.as_ref()).map_or(0, |c| c.answer_bytes()),
                max_tokens: Some(profile.workload.max_tokens),
            },
            conversations: source.conversations,
            clock: Instant::now(),
            journal: Mutex::new(Box::new(BufWriter::new(journal))),
            progress,
            interrupt: interrupt::Interrupt::from_signals(),
            tally: Mutex::new(TrialTally::default()),
        });
        Ok(Prepared {
            profile,
            shared,
            environment: probed.environment,
            engine,
            probe: probed.report,
            scrape_client,
            keeps_connections,
            dialect_warning,
            windows: schedule.windows,
            levels: schedule.levels,
            base_endpoints: &setup.base_endpoints,
            base_model,
            base_engine: probed.base_engine,
            next_prompt: 0,
            trace: schedule.trace.map(|(offsets, _)| {
                let n = offsets.len() as u64;
                (offsets, n)
            }),
            notes: source.notes,
            slots: schedule.slots,
            step: 0,
        })
    }

    /// The run's arms, the base first (round 1 runs base then head): `[None]` for one server.
    fn arms(&self) -> Vec<Option<Arm>> {
        if self.base_endpoints.is_empty() {
            vec![None]
        } else {
            vec![Some(Arm::Base), Some(Arm::Head)]
        }
    }

    /// The endpoints an arm's requests go to.
    fn endpoints(&self, arm: Option<Arm>) -> &[String] {
        match arm {
            Some(Arm::Base) => self.base_endpoints,
            _ => &self.profile.target.endpoints,
        }
    }

    /// Opens the connections a trial of `concurrency` streams needs on the arm's endpoints
    /// that the pool does not hold yet (preconnect.rs): its requests start on open
    /// connections. An open-loop level without a cap has no number of connections to open.
    async fn open_connections(&self, arm: Option<Arm>, concurrency: u32) {
        if !self.keeps_connections || concurrency == 0 {
            return;
        }
        let endpoints = self.endpoints(arm);
        let per_endpoint = (concurrency as usize).div_ceil(endpoints.len());
        preconnect::open_connections(&self.shared.client, endpoints, per_endpoint).await;
    }

    /// Runs a level's warmup requests on one arm. `Some` when the run must stop there:
    /// `Some(None)` interrupted, `Some(Some(why))` the server went away.
    async fn warm(
        &mut self,
        arm: Option<Arm>,
        concurrency: u32,
        rate: Option<f64>,
        name: &str,
    ) -> Result<Option<Option<String>>> {
        let (profile, shared) = (self.profile, &self.shared);
        if profile.sweep.warmup_requests == 0 {
            return Ok(None);
        }
        shared.progress.begin(self.step, format!("{name} warmup"));
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
            arm,
        };
        shared.start_tally(TrialTally::new(None));
        run_batch(shared, batch).await?;
        let tally = shared.take_tally();
        shared.progress.end_step();
        self.step += 1;
        self.next_prompt += u64::from(batch.requests);
        if shared.interrupt.signal().is_some() {
            return Ok(Some(None));
        }
        Ok((tally.unreachable()).map(|why| Some(format!("{name} warmup: {why}"))))
    }

    /// Runs the trial of `slot`: its result (`None` when nothing was sent), and why the
    /// server looks gone when every request of it failed to connect.
    async fn trial(
        &mut self,
        arm: Option<Arm>,
        concurrency: u32,
        rate: Option<f64>,
        slot: &Slot,
        name: &str,
    ) -> Result<(Option<TrialResult>, Option<String>)> {
        let (profile, shared) = (self.profile, &self.shared);
        let trial = slot.round;
        if let Some((_, n)) = &self.trace {
            // Request i of the trial is the trace's row i.
            self.next_prompt = self.next_prompt.next_multiple_of((*n).max(1));
        }
        let label = format!("{name} trial {trial}/{}", profile.sweep.trials);
        shared.progress.begin(self.step, label);
        let batch = Batch {
            concurrency,
            trial,
            requests: profile.sweep.requests_at(concurrency),
            first_prompt: self.next_prompt,
            windows: self.windows,
            rate,
            arm,
        };
        let watch = telemetry::Watch::start(
            &self.scrape_client,
            self.endpoints(arm),
            self.engine,
            shared.clock,
        )
        .await;
        // The telemetry cross-check counts the client's tokens as the requests finish,
        // placed between the scrapes.
        shared.start_tally(TrialTally::new(watch.as_ref().map(|w| w.count())));
        let monitor = headroom::Monitor::start();
        match (rate, &self.trace) {
            (Some(_), Some((offsets, _))) => {
                let offsets = offsets.iter().copied();
                openloop::run_schedule(shared, batch, offsets, profile.sweep.max_concurrency)
                    .await?
            }
            (Some(r), None) => {
                let n = match self.windows {
                    Some(w) => open_loop_count(r, w.total()),
                    None => profile.sweep.requests_per_level as usize,
                };
                let arrival = profile.sweep.arrival.unwrap_or(Arrival::Poisson);
                let offsets = openloop::offsets(
                    arrival,
                    profile.sweep.gamma_shape.unwrap_or(1.0),
                    r,
                    n,
                    openloop::trial_seed(profile.sweep.seed.unwrap_or(0), r, trial),
                );
                openloop::run_schedule(shared, batch, offsets, profile.sweep.max_concurrency)
                    .await?
            }
            (None, _) => run_batch(shared, batch).await?,
        };
        let (client, reads) = monitor.finish();
        shared.progress.end_step();
        self.step += 1;
        let tally = shared.take_tally();
        // The server counted every request of the trial, warmup windows included.
        let server = match watch {
            Some(w) => w.finish().await,
            None => None,
        };
        self.next_prompt += tally.requests();
        let unreachable = tally.unreachable();
        if tally.requests() == 0 {
            return Ok((None, unreachable));
        }
        let arrival = match &self.trace {
            Some(_) => "trace".to_string(),
            None => (profile.sweep.arrival.unwrap_or(Arrival::Poisson).name()).to_string(),
        };
        let place = TrialPlace {
            trial,
            // The round places the trial in the run's time order; sequential runs have none.
            round: (profile.sweep.order == TrialOrder::Interleaved).then_some(slot.round),
            open_loop: rate.map(|r| (r, arrival)),
            // One length for all, unless drawn or given per row (a dataset, a trace).
            asked_output_tokens: (profile.workload.output_length.is_none()
                && shared.lengths.rows() == 0)
                .then_some(profile.workload.max_tokens),
            exact_input: shared.prompts.exact(),
        };
        let t = tally.into_result(&place, server, client, &reads);
        Ok((Some(t), unreachable))
    }

    /// The run's warnings: the dialect's, a missing token counter, length misses, and every
    /// trial's flags (the base arm's named so).
    fn warnings(&self, results: &[LevelResult], base: Option<&[LevelResult]>) -> Vec<String> {
        let mut warnings: Vec<String> = self.dialect_warning.iter().cloned().collect();
        warnings.extend(self.environment.override_lines());
        if self.profile.target.engine.is_auto() {
            warnings.extend(telemetry::missing_counter_warning(
                self.engine,
                &self.probe.metrics,
            ));
        }
        warnings.extend(dialect::length_miss_warning(results));
        warnings.extend(telemetry::cut_page_warning(results));
        warnings.extend(telemetry::impossible_values_warning(results));
        warnings.extend(flag_summary(results, None));
        if let Some(base) = base {
            warnings.extend(dialect::length_miss_warning(base).map(|w| format!("base arm: {w}")));
            warnings.extend(
                telemetry::impossible_values_warning(base).map(|w| format!("base arm: {w}")),
            );
            warnings.extend(
                flag_summary(base, None)
                    .into_iter()
                    .map(|w| format!("base arm: {w}")),
            );
        }
        warnings
    }
}

/// The model the base arm's requests name: the profile's, or (for "auto") the first the base
/// server lists. A base server that does not serve the head's model is refused: the two arms
/// would measure different things. Returned with what the base server said of itself.
async fn base_model(
    client: &reqwest::Client,
    profile: &Profile,
    endpoints: &[String],
    head_model: &str,
) -> Result<(String, probe::ProbeReport)> {
    let report = probe::probe(client, endpoints, profile.target.api_key_env.as_deref()).await?;
    let model = report.model(
        &profile.target.model,
        &format!("the base server {}", endpoints[0]),
    )?;
    if profile.target.model.named().is_none() && model != head_model {
        bail!(
            "the base server {} serves {model:?} but the head serves {head_model:?}: a relative \
             run compares one model on two servers (set target.model to name it)",
            endpoints[0]
        );
    }
    Ok((model, report))
}
