//! The flag groups more than one command takes (clap's "low" arguments). Each converts once
//! into the typed setup the library takes (`to_environment`, `to_setup`, `apply`), so that
//! no command calls another, and nothing below commands/ sees a clap struct.

mod export;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use clap::Args;

use crate::gate::SettingOverride;
use crate::load::BenchSetup;
use crate::profile::{GateSettings, Profile};
use crate::record::Environment;
use crate::runner::{BlocksSetup, RunSetup};

pub use export::ExportArgs;

/// What every measuring command (`bench`, `ci`) takes: where the files go, the fingerprint,
/// the servers throughline starts, and the progress bar; made once into the runner's
/// `RunSetup`.
#[derive(Debug, Args, Clone)]
pub struct RunFlags {
    /// Folder for the run's files: results.json, requests.jsonl, summary.csv, the charts
    /// and report.md (and a check's verdict.json, verdict.md, junit.xml). An earlier run's
    /// files found there are moved into DIR/earlier/<its start time>/, never overwritten.
    #[arg(
        long,
        short = 'o',
        value_name = "DIR",
        default_value = "throughline-results"
    )]
    pub out: PathBuf,
    #[command(flatten)]
    pub environment: EnvironmentArgs,
    #[command(flatten)]
    pub servers: ServerArgs,
    /// Never draw a progress bar (it is drawn only on a terminal anyway).
    #[arg(long)]
    pub no_progress: bool,
}

impl RunFlags {
    /// The run these flags ask for, of `profile` (its endpoints final) beside
    /// `base_endpoints` (a relative run against servers that are up; empty: none).
    pub fn to_run(&self, profile: Profile, base_endpoints: Vec<String>) -> Result<RunSetup> {
        let blocks = self.servers.to_setup()?;
        let bench = BenchSetup {
            show_progress: !self.no_progress,
            base_endpoints,
            ..BenchSetup::new(profile, self.environment.to_environment(), self.out.clone())
        };
        Ok(RunSetup::new(bench, blocks))
    }
}

/// The environment fingerprint a baseline is compared on; what is not given is detected
/// from the server where possible.
#[derive(Debug, Args, Clone, Default)]
pub struct EnvironmentArgs {
    /// GPU model, e.g. "RTX PRO 6000".
    #[arg(long, env = "THROUGHLINE_GPU")]
    pub gpu: Option<String>,
    /// GPUs serving the model (all replicas together).
    #[arg(long, env = "THROUGHLINE_GPU_COUNT")]
    pub gpu_count: Option<u32>,
    /// GPU driver version.
    #[arg(long, env = "THROUGHLINE_DRIVER")]
    pub driver: Option<String>,
    /// Inference engine (vllm, sglang, llama.cpp, tgi); detected from /metrics when not given.
    #[arg(long, env = "THROUGHLINE_ENGINE")]
    pub engine: Option<String>,
    /// Inference engine version, e.g. 0.11.0 (part of the fingerprint a baseline is compared
    /// on: a run on another engine version is not comparable).
    #[arg(long, env = "THROUGHLINE_ENGINE_VERSION")]
    pub engine_version: Option<String>,
    /// Model precision, e.g. bf16, fp8.
    #[arg(long, env = "THROUGHLINE_PRECISION")]
    pub precision: Option<String>,
    /// Runner label or host name (GitHub's RUNNER_NAME is used when set).
    #[arg(long, env = "THROUGHLINE_RUNNER")]
    pub runner: Option<String>,
}

impl EnvironmentArgs {
    pub fn to_environment(&self) -> Environment {
        Environment {
            gpu_model: self.gpu.clone(),
            gpu_count: self.gpu_count,
            driver: self.driver.clone(),
            engine: self.engine.clone(),
            engine_version: self.engine_version.clone(),
            model: None,
            precision: self.precision.clone(),
            runner: self
                .runner
                .clone()
                .or_else(|| std::env::var("RUNNER_NAME").ok()),
            endpoints: 0,
            speculative: None,
            overridden: Vec::new(),
        }
    }
}

/// The server flags of `bench` and `ci`.
#[derive(Debug, Args, Clone, Default)]
pub struct ServerArgs {
    /// Start the server under test (the head) yourself: a shell command in which {port} is
    /// replaced by a free port, {slot} by the slot number (0, 1) and {gpus} by the slot's
    /// GPUs (--slots). It runs in its own process group, its output in
    /// OUT/servers/block-N-head.log; throughline waits until it answers, measures, and stops
    /// it (SIGTERM, then SIGKILL after 30 s). Replaces the profile's endpoints.
    #[arg(long, value_name = "COMMAND", conflicts_with_all = ["endpoints", "base_endpoints"])]
    pub server_command: Option<String>,
    /// The target branch's server (the base), started the same way: a relative run in
    /// blocks, both servers started fresh in each block, their slots swapped from one block
    /// to the next so that a faster GPU or a luckier start falls on both arms.
    #[arg(long, value_name = "COMMAND", requires = "server_command")]
    pub base_server_command: Option<String>,
    #[command(flatten)]
    pub blocks: BlockArgs,
    /// One deadline for the whole job, e.g. 45m: the wait for the GPUs, every server's
    /// start, the trials and the added blocks. No block starts that would pass it, a block
    /// still running at it is stopped and left out, and the run concludes (with its verdict)
    /// from the blocks it finished.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    pub max_duration: Option<Duration>,
    /// Measure only these levels of the profile, e.g. "1,8": a later wave's leg measures the
    /// levels an earlier `merge` left undecided (its `undecided` output), and `merge` pools
    /// them with the legs that measured every level. Each must be one of the profile's.
    #[arg(
        long,
        value_name = "C,C",
        value_delimiter = ',',
        requires = "base_server_command"
    )]
    pub levels: Vec<u32>,
}

/// Where the servers run and how many blocks a run takes: the flags `bench`, `ci` and
/// `bisect` (whose every step is such a run) share.
#[derive(Debug, Args, Clone, Default)]
pub struct BlockArgs {
    /// The slots the servers run on, `;` between slots, e.g. "0;1" (GPU 0 and GPU 1) or
    /// "0,1;2,3" (tensor-parallel pairs). With one slot ("0") both servers share it and
    /// the swap is of which starts first. Repeat it for every pair of the node, e.g.
    /// --slots "0;1" --slots "2;3" --slots "4;5" --slots "6;7": a round runs one block on
    /// each pair at once; on several pairs the first look waits until every pair has run
    /// both ways round (8 blocks in 2 rounds on 4 pairs) and each later look adds a round. The GPUs
    /// named are locked machine-wide for the run (a second run waits for them) [default:
    /// "0;1"; then the GPUs are locked only when a server command uses {gpus}: otherwise no
    /// GPU is named, and no GPU lock is taken].
    #[arg(long, value_name = "GPUS;GPUS")]
    pub slots: Vec<String>,
    /// Blocks to run before the gate looks [default: 4 in a relative run, else 1].
    #[arg(long = "blocks", value_name = "N")]
    pub first: Option<u32>,
    /// The most blocks in all: while a level is undecided after a look, two more blocks run
    /// for the undecided levels (on several pairs a round) [default: 16 in a relative run, or
    /// 8 more than the first look's where that is more (--blocks, on several pairs at least 2
    /// a pair): with a start spread near 3% (a real llama-server here) 8 blocks passed an
    /// unchanged server 43% of the time, 12 blocks 80%, 16 blocks 96% (benches/gate_crossover.rs,
    /// table 4)].
    #[arg(long = "max-blocks", value_name = "N")]
    pub max: Option<u32>,
    /// How long a started server may take to answer (GET /health or /v1/models).
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = humantime::parse_duration)]
    pub server_timeout: Duration,
}

impl ServerArgs {
    /// Whether throughline starts the servers.
    pub fn managed(&self) -> bool {
        self.server_command.is_some()
    }

    /// The run in blocks these flags ask for, checked before anything starts (a typo in a
    /// template fails at once); None when throughline starts no server.
    pub fn to_setup(&self) -> Result<Option<BlocksSetup>> {
        let Some(head) = &self.server_command else {
            return Ok(None);
        };
        let setup = self
            .blocks
            .to_setup(head, self.base_server_command.as_deref())?;
        BlockArgs::say_gpu_locks(&setup);
        let setup = setup.measuring_only(self.levels.clone());
        Ok(Some(setup.with_deadline(self.max_duration)))
    }
}

/// The slots when `--slots` is not given: GPU 0 and GPU 1.
const DEFAULT_SLOTS: &str = "0;1";

impl BlockArgs {
    /// A run in blocks of these servers on these slots (no time budget). The GPU locks are
    /// machine-wide, so they are taken only for GPUs the run named: by `--slots`, or by
    /// `{gpus}` in a server command (which puts the default slots' GPUs 0 and 1 in it).
    /// With neither, which GPUs the servers use is not known here (a CPU server, the
    /// simulator, a command that picks its own), and locking GPUs 0 and 1 would make every
    /// other run on the machine wait for GPUs this one may not use: none is locked.
    pub fn to_setup(&self, head: &str, base: Option<&str>) -> Result<BlocksSetup> {
        let named = !self.slots.is_empty()
            || [Some(head), base]
                .into_iter()
                .flatten()
                .any(|c| c.contains("{gpus}"));
        let slots = match self.slots.is_empty() {
            true => vec![DEFAULT_SLOTS.to_string()],
            false => self.slots.clone(),
        };
        let setup = BlocksSetup::new(
            head,
            base,
            &slots,
            (self.first, self.max),
            self.server_timeout,
        )?;
        crate::runner::refuse_unfit(&setup)?;
        Ok(setup.locking_gpus(named))
    }

    /// Says, once before the run, that no GPU lock is taken and why.
    pub fn say_gpu_locks(setup: &BlocksSetup) {
        if !setup.locks_gpus() {
            eprintln!(
                "note: no GPU lock taken: no --slots given and no server command uses {{gpus}}, \
                 so this run names no GPU (slots {DEFAULT_SLOTS} stand for the servers' places \
                 only); name them (--slots, {{gpus}} in the command) to hold them machine-wide"
            );
        }
    }
}

/// Gate settings given on the command line in place of the baseline's (`gate` and `ci`).
#[derive(Debug, Args, Clone, Default)]
pub struct GateOverrides {
    /// Family-wise significance level (default: the baseline's, 0.01).
    #[arg(long)]
    pub alpha: Option<f64>,
    /// Smallest relative drop that may fail the gate, e.g. 0.03 (default: the baseline's).
    #[arg(long)]
    pub min_effect: Option<f64>,
    /// Trials needed on each side to fail a level (default: the baseline's).
    #[arg(long)]
    pub min_trials: Option<u32>,
    /// The drop a pass rules out at every level, e.g. 0.05 (default: the baseline's).
    #[arg(long)]
    pub tolerance: Option<f64>,
}

impl GateOverrides {
    /// `settings` with these flags put in their place, checked (errors name the flag).
    pub fn apply(&self, settings: &GateSettings) -> Result<GateSettings> {
        settings.overridden(self.alpha, self.min_effect, self.min_trials, self.tolerance)
    }

    /// The flags given whose value differs from `settings` (the baseline's), for the verdict.
    pub fn listed(&self, settings: &GateSettings) -> Vec<SettingOverride> {
        let mut out = Vec::new();
        let mut push = |field: &str, value: Option<String>, was: String| {
            if let Some(value) = value.filter(|v| *v != was) {
                out.push(SettingOverride {
                    field: field.into(),
                    value,
                    was,
                });
            }
        };
        push(
            "alpha",
            self.alpha.map(|v| v.to_string()),
            settings.alpha.to_string(),
        );
        push(
            "min_effect",
            self.min_effect.map(|v| v.to_string()),
            settings.min_effect.to_string(),
        );
        push(
            "min_trials",
            self.min_trials.map(|v| v.to_string()),
            settings.min_trials.to_string(),
        );
        push(
            "tolerance",
            self.tolerance.map(|v| v.to_string()),
            settings.tolerance.to_string(),
        );
        out
    }
}
