//! The TOML template `init` and `bench --endpoint` write: a profile made from a few flags.

use std::time::Duration;

use anyhow::Result;

use super::{ModelChoice, Profile};
use crate::engine::Engine;

/// What `bench --endpoint URL` (without a profile file) and `init` build a profile from: the
/// flags given, sensible defaults for the rest. The profile is made as commented TOML text and
/// parsed like any profile file, so what runs is exactly what `--save-profile` writes, and
/// keys added to the schema later take their defaults here too.
#[derive(Debug, Clone, PartialEq)]
pub struct QuickStart {
    pub endpoints: Vec<String>,
    /// The model id, or "auto" (asked of `/v1/models` at every run).
    pub model: ModelChoice,
    pub concurrency: Vec<u32>,
    pub max_tokens: u32,
    pub trials: u32,
    /// The name of the variable holding an API key, if any (commented out when None).
    pub api_key_env: Option<String>,
    /// What the probe found (engine, max context, ...), written as comments at the top.
    pub notes: Vec<String>,
    /// Timed trials (`init --budget`): each trial's measured window and the warmup window
    /// before it, in place of a request count, so that a run's length is known before it
    /// starts whatever the server's speed.
    pub trial_window: Option<(Duration, Duration)>,
}

impl QuickStart {
    /// Three levels that show single-stream speed, moderate batching and a loaded server.
    pub const CONCURRENCY: [u32; 3] = [1, 8, 32];
    /// Output tokens per request: long enough for steady decode, short enough for a quick run.
    pub const MAX_TOKENS: u32 = 256;
    /// Prompt words (about one token each).
    pub const INPUT_TOKENS: u32 = 256;
    /// Trials per level: the fewest the gate (and `baseline bless`) accepts, so the profile
    /// can become a baseline as it is.
    pub const TRIALS: u32 = 5;
    /// Requests before each level's first trial, not counted.
    pub const WARMUP_REQUESTS: u32 = 4;

    /// The defaults for one endpoint.
    pub fn new(endpoint: &str) -> QuickStart {
        QuickStart {
            endpoints: vec![endpoint.to_string()],
            model: ModelChoice::Auto,
            concurrency: Self::CONCURRENCY.to_vec(),
            max_tokens: Self::MAX_TOKENS,
            trials: Self::TRIALS,
            api_key_env: None,
            notes: Vec::new(),
            trial_window: None,
        }
    }

    /// The profile as commented TOML (what `init` and `--save-profile` write).
    pub fn toml(&self) -> String {
        let mut out = String::from(
            "# A throughline benchmark profile. Run it with:\n\
             #   throughline bench --profile THIS_FILE\n\
             # Every key is described in docs/profile.md; unknown keys are errors.\n",
        );
        // A note may quote a server (init's model ids): one comment line each, control
        // characters escaped, so no note becomes a key.
        for note in &self.notes {
            out.push_str(&format!("# {}\n", crate::untrusted::for_terminal(note)));
        }
        out.push('\n');
        out.push_str(&line("name = \"quick\"", "names reports and baselines"));
        self.target_section(&mut out);
        self.workload_section(&mut out);
        self.sweep_section(&mut out);
        gate_section(&mut out);
        out
    }

    /// `[target]`: where to send requests, the model, the API and its key, the engine.
    fn target_section(&self, out: &mut String) {
        out.push_str("\n[target]\n# Base URLs without /v1; several are data-parallel replicas, used in turn.\n");
        let endpoints: Vec<String> = self.endpoints.iter().map(|e| quote(e)).collect();
        out.push_str(&format!("endpoints = [{}]\n", endpoints.join(", ")));
        out.push_str(&line(
            &format!("model = {}", quote(&self.model.to_string())),
            "the id to request; \"auto\" asks /v1/models at every run",
        ));
        out.push_str(&line("api = \"chat\"", "or \"completions\""));
        match &self.api_key_env {
            Some(var) => out.push_str(&line(
                &format!("api_key_env = {}", quote(var)),
                "the *name* of the variable; unset = no key",
            )),
            None => {
                out.push_str(&line(
                    "# api_key_env = \"OPENAI_API_KEY\"",
                    "the *name* of a variable holding a key; unset = no key",
                ));
                out.push_str(&line(
                    "# api_key_required = true",
                    "make an unset variable an error",
                ));
            }
        }
        // Every engine `target.engine` accepts, from the one list of them.
        let engines: Vec<&str> = Engine::ALL.iter().map(|e| e.name()).collect();
        out.push_str(&line(
            "# engine = \"auto\"",
            &format!("or {}; auto: from /metrics", engines.join(", ")),
        ));
    }

    /// `[workload]`: the prompts and how many tokens each request generates.
    fn workload_section(&self, out: &mut String) {
        out.push_str("\n[workload]\n");
        out.push_str(&line(
            &format!("input_tokens = {}", Self::INPUT_TOKENS),
            "synthetic prompts of this many words (~1 token each)",
        ));
        out.push_str(&line(
            &format!("max_tokens = {}", self.max_tokens),
            "output tokens asked of every request",
        ));
        out.push_str(&line(
            "ignore_eos = true",
            "every request generates all max_tokens",
        ));
    }

    /// `[sweep]`: the levels, the trials, and the limits of a trial.
    fn sweep_section(&self, out: &mut String) {
        out.push_str("\n[sweep]\n");
        let levels: Vec<String> = self.concurrency.iter().map(u32::to_string).collect();
        out.push_str(&line(
            &format!("concurrency = [{}]", levels.join(", ")),
            "closed-loop levels: requests in flight",
        ));
        out.push_str(&line(
            &format!("trials = {}", self.trials),
            "independent trials per level (the gate wants 5 a side)",
        ));
        match self.trial_window {
            None => {
                out.push_str(&line(
                    "requests_per_level = 0",
                    "per trial; 0 = 4 x concurrency (at least 8)",
                ));
                out.push_str(&line(
                    &format!("warmup_requests = {}", Self::WARMUP_REQUESTS),
                    "before each level, not counted",
                ));
            }
            Some((measured, warmup)) => {
                let text = |d: Duration| humantime::format_duration(d).to_string();
                out.push_str(&line(
                    &format!("duration = \"{}\"", text(measured)),
                    "each trial's measured window (a timed trial: its length is known)",
                ));
                out.push_str(&line(
                    &format!("warmup = \"{}\"", text(warmup)),
                    "sent before the window in each trial, not counted",
                ));
            }
        }
        out.push_str(&line(
            "request_timeout = \"5m\"",
            "one request's time limit",
        ));
        out.push_str(&line(
            "stall_timeout = \"60s\"",
            "longest silence within a response",
        ));
        out.push_str(&line(
            "max_error_rate = 0.01",
            "a level with more failed requests did not measure",
        ));
    }

    /// The profile itself, validated like a profile file (errors name the field).
    pub fn profile(&self) -> Result<Profile> {
        Profile::parse(&self.toml())
    }
}

/// A string with a control character (a model id from a server) as one basic string with
/// escapes, not a multi-line string: JSON's escapes are TOML's.
fn quote(s: &str) -> String {
    match s.chars().any(char::is_control) {
        true => serde_json::to_string(s).unwrap_or_default(),
        false => toml::Value::String(s.to_string()).to_string(),
    }
}

/// A key line with its comment in a column, as people write them.
fn line(key: &str, comment: &str) -> String {
    format!("{key:<40}# {comment}\n")
}

/// `[gate]`: how the gate decides. The section itself, so that a key uncommented lands in
/// it, with every setting commented at its default (a key added to GateSettings belongs here
/// too: tests/it/init_gate.rs checks they are all shown). And the mode to gate in: a history
/// of a few blessed sessions catches a 10% drop rarely (the verdict says how rarely); base and
/// head measured in one job cancel what shifts a session.
fn gate_section(out: &mut String) {
    out.push_str(
        "\n# How `gate` and `ci` decide. Every key is shown at its default: uncomment one to \
         change it\n\
         # (a baseline keeps the settings it was blessed with).\n\
         # Gate pull requests in relative mode: `throughline ci --server-command '... {port}' \
         --base-server-command '... {port}'`\n\
         # measures base and head in the same job (in blocks, their slots swapped), which \
         cancels restarts and\n\
         # neighbours; history mode against a few blessed sessions misses most 10% drops \
         (its verdict says how often).\n\
         [gate]\n",
    );
    let d = super::GateSettings::default();
    for (key, comment) in [
        (
            format!("alpha = {}", d.alpha),
            "family-wise false-failure rate (Holm across levels)",
        ),
        (
            format!("min_effect = {}", d.min_effect),
            "the smallest drop that may fail",
        ),
        (
            format!("tolerance = {}", d.tolerance),
            "the drop a pass rules out",
        ),
        (
            format!("pass_confidence = {}", d.pass_confidence),
            "one-sided confidence of a pass, at every level",
        ),
        (
            format!("guard = {}", d.guard),
            "a drop beyond this fails even on one or two sessions",
        ),
        (
            format!("min_trials = {}", d.min_trials),
            "trials a side to fail a level",
        ),
        (
            format!("max_sessions = {}", d.max_sessions),
            "sessions `baseline bless --append` keeps",
        ),
        (
            format!("fail_on_inconclusive = {}", d.fail_on_inconclusive),
            "exit 3, not 0, when the data cannot tell",
        ),
        (
            "latency = { ttft_p99 = 0.1 }".to_string(),
            "latency gates, off unless set (also itl_p99, e2e_p99)",
        ),
    ] {
        out.push_str(&line(&format!("# {key}"), comment));
    }
}
