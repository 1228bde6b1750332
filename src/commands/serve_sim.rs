//! `throughline serve-sim`: the simulator's flags, turned into its typed configuration and
//! faults, and the simulator served until Ctrl-C or SIGTERM (src/sim/).

use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};

use crate::sim::faults::Faults;
use crate::sim::{Listen, SimConfig};

/// `throughline serve-sim`: a simulated OpenAI-compatible server for demos, tests and CI.
#[derive(clap::Args, Debug, Clone)]
pub struct ServeSimArgs {
    /// Engine preset: fast, fixed, instant, rtxpro6000x4-qwen122b, rtxpro6000-27b.
    #[arg(long, default_value = "fast")]
    pub preset: String,
    /// Independent replicas, on consecutive ports; in [1, 1024].
    #[arg(long, default_value_t = 1)]
    pub replicas: usize,
    /// First port (0 = an ephemeral port per replica).
    #[arg(long, default_value_t = 30000)]
    pub port: u16,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: IpAddr,
    /// Seed for output lengths and MTP draws (each replica derives its own).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Multiply every step's duration (1.10 = 10% slower: fakes a regression), in (0, 1000].
    #[arg(long, default_value_t = 1.0)]
    pub slowdown: f64,
    /// Session-to-session variation, in [0, 1]: this start draws one speed factor
    /// exp(X * z), z ~ N(0, 1) from --seed, that multiplies every step like --slowdown (so
    /// restarts with --seed 1, 2, ... differ by a few percent at 0.05). 0 = factor 1.
    #[arg(long, default_value_t = 0.0, value_name = "X")]
    pub session_jitter: f64,
    /// Override the preset's number of concurrently running requests, in [1, 1000000].
    #[arg(long)]
    pub max_running: Option<usize>,
    /// Fixed cadence: every decode step lasts this long, whatever the batch; in [0, 60000].
    #[arg(long)]
    pub token_delay_ms: Option<f64>,
    /// Override the model id the server reports.
    #[arg(long)]
    pub model: Option<String>,
    /// Count prompt tokens (usage.prompt_tokens, prefill time) with this tokenizer.json (or a
    /// folder holding one, or a model id found in the local Hugging Face cache), as a real
    /// server does with its model's; without it, one token per word.
    #[arg(long, value_name = "FILE")]
    pub tokenizer: Option<std::path::PathBuf>,
    /// Cache chat prompts at message boundaries (a chained hash of the texts, 4,096 entries
    /// per replica, least recently used out): a request whose messages before its last (a
    /// system prompt, a conversation's history and answers) are cached prefills only the
    /// rest, and usage reports the cached part as `prompt_tokens_details.cached_tokens`.
    #[arg(long)]
    pub prefix_cache: bool,
    /// Tokens a chat template adds to every prompt (usage.prompt_tokens and prefill), in
    /// [0, 1000000]: a changed template, for `gate`'s explanation.
    #[arg(long, value_name = "N")]
    pub template_tokens: Option<u32>,
    /// KV cache capacity in tokens: requests are admitted only while they fit, and growth
    /// past it preempts the request admitted last (exported as a usage gauge and a
    /// preemption counter). Default: unbounded.
    #[arg(long, value_name = "TOKENS")]
    pub kv_cache_tokens: Option<u64>,
    /// Speculative decoding: the most tokens a request gains per step, in [1, 64].
    #[arg(long, value_name = "N")]
    pub mtp_max: Option<u32>,
    /// Mean tokens accepted per step, in [1, --mtp-max] (the acceptance; a step's duration
    /// stays the preset's under --token-delay-ms).
    #[arg(long, value_name = "X")]
    pub tokens_per_step: Option<f64>,
    /// The engine version the server reports at GET /version and in /metrics (default: this
    /// build's), e.g. to stand a "new engine" beside an old one in a relative run.
    #[arg(long, value_name = "VERSION")]
    pub engine_version: Option<String>,
    /// Keep each streamed chunk's send time per `user` and serve them at GET /sim/send-times
    /// (for `selfbench`).
    #[arg(long, hide = true)]
    pub record_send_times: bool,
    #[command(flatten)]
    pub faults: FaultArgs,
}

impl ServeSimArgs {
    pub fn to_config(&self) -> Result<SimConfig> {
        let Some(mut cfg) = SimConfig::preset(&self.preset) else {
            bail!(
                "unknown preset `{}`; known presets: {}",
                self.preset,
                SimConfig::preset_names().join(", ")
            );
        };
        cfg.seed = self.seed;
        cfg.slowdown = self.slowdown;
        cfg.session_jitter = self.session_jitter;
        if let Some(m) = self.max_running {
            cfg.max_running = m;
        }
        if let Some(d) = self.token_delay_ms {
            cfg.token_delay_ms = Some(d);
        }
        if let Some(m) = &self.model {
            cfg.model = m.clone();
        }
        cfg.record_send_times = self.record_send_times;
        if let Some(t) = self.template_tokens {
            cfg.template_tokens = t;
        }
        cfg.kv_cache_tokens = self.kv_cache_tokens.or(cfg.kv_cache_tokens);
        if let Some(m) = self.mtp_max {
            cfg.mtp_max = m;
        }
        if let Some(t) = self.tokens_per_step {
            cfg.tokens_per_step_mean = t;
        }
        cfg.engine_version = self.engine_version.clone();
        cfg.prefix_cache = self.prefix_cache;
        if let Some(path) = &self.tokenizer {
            let path =
                crate::tokenize::resolve(std::path::Path::new(""), path).context("--tokenizer")?;
            let t = crate::tokenize::ModelTokenizer::load(&path).context("--tokenizer")?;
            cfg.tokenizer = Some(crate::tokenize::SharedTokenizer(Arc::new(t)));
        }
        cfg.validate()?;
        Ok(cfg)
    }
}

/// `serve-sim` flags for faults and the API key check (flattened into `ServeSimArgs`).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct FaultArgs {
    /// Sim config file (TOML) with a `[faults]` table; the flags below override it.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Fraction of requests answered with an HTTP error (see --fault-http-statuses).
    #[arg(long)]
    pub fault_http_error_rate: Option<f64>,
    /// HTTP error statuses to draw from, e.g. 429,500,503.
    #[arg(long, value_delimiter = ',')]
    pub fault_http_statuses: Option<Vec<u16>>,
    /// Fraction of requests whose connection is cut mid-stream.
    #[arg(long)]
    pub fault_reset_rate: Option<f64>,
    /// Fraction of requests that stall (send nothing) after their first tokens.
    #[arg(long)]
    pub fault_stall_rate: Option<f64>,
    /// How long a stall lasts, e.g. 5s.
    #[arg(long, value_parser = humantime::parse_duration)]
    pub fault_stall: Option<Duration>,
    /// Fraction of requests with one malformed SSE line.
    #[arg(long)]
    pub fault_malformed_rate: Option<f64>,
    /// Fraction of streams ending without `data: [DONE]`.
    #[arg(long)]
    pub fault_no_done_rate: Option<f64>,
    /// Fraction of responses without usage.
    #[arg(long)]
    pub fault_no_usage_rate: Option<f64>,
    /// Fraction of requests stopping after a few tokens (--fault-degenerate-tokens).
    #[arg(long)]
    pub fault_degenerate_rate: Option<f64>,
    /// Tokens a degenerate answer has.
    #[arg(long)]
    pub fault_degenerate_tokens: Option<u32>,
    /// Fraction of requests whose first byte is late (--fault-slow-first-byte).
    #[arg(long)]
    pub fault_slow_first_byte_rate: Option<f64>,
    /// How late a slow first byte is, e.g. 2s.
    #[arg(long, value_parser = humantime::parse_duration)]
    pub fault_slow_first_byte: Option<Duration>,
    /// Exit the process abruptly (like a crash) when request N+1 arrives.
    #[arg(long, value_name = "N")]
    pub exit_after_requests: Option<u64>,
    /// Exit the process abruptly this long after starting, e.g. 5s.
    #[arg(long, value_parser = humantime::parse_duration)]
    pub exit_after: Option<Duration>,
    /// Answer 401 unless a request carries `Authorization: Bearer <the value of VAR>`.
    #[arg(long, value_name = "VAR")]
    pub require_api_key_env: Option<String>,
}

impl FaultArgs {
    /// The faults of the config file (if any) with the flags applied over them.
    pub fn to_faults(&self) -> Result<Faults> {
        let mut f = match &self.config {
            Some(path) => Faults::load(path)?,
            None => Faults::default(),
        };
        macro_rules! over {
            ($flag:ident => $field:ident) => {
                if let Some(v) = &self.$flag {
                    f.$field = v.clone();
                }
            };
        }
        over!(fault_http_error_rate => http_error_rate);
        over!(fault_http_statuses => http_statuses);
        over!(fault_reset_rate => reset_rate);
        over!(fault_stall_rate => stall_rate);
        over!(fault_stall => stall);
        over!(fault_malformed_rate => malformed_rate);
        over!(fault_no_done_rate => no_done_rate);
        over!(fault_no_usage_rate => no_usage_rate);
        over!(fault_degenerate_rate => degenerate_rate);
        over!(fault_degenerate_tokens => degenerate_tokens);
        over!(fault_slow_first_byte_rate => slow_first_byte_rate);
        over!(fault_slow_first_byte => slow_first_byte);
        if self.exit_after_requests.is_some() {
            f.exit_after_requests = self.exit_after_requests;
        }
        if self.exit_after.is_some() {
            f.exit_after = self.exit_after;
        }
        f.validate().context("invalid fault settings")?;
        Ok(f)
    }

    /// The API key the server requires, read from the named variable.
    pub fn required_key(&self) -> Result<Option<String>> {
        let Some(var) = &self.require_api_key_env else {
            return Ok(None);
        };
        match std::env::var(var) {
            Ok(k) if !k.is_empty() => Ok(Some(k)),
            _ => bail!("--require-api-key-env names {var}, but that variable is not set"),
        }
    }
}

/// Starts the simulator the flags describe and serves until a signal.
pub async fn run(args: ServeSimArgs) -> Result<()> {
    let cfg = args.to_config()?;
    let faults = args.faults.to_faults()?;
    let key = args.faults.required_key()?;
    let at = Listen {
        host: args.host,
        port: args.port,
        replicas: args.replicas,
    };
    crate::sim::serve(&cfg, faults, key, at).await
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;
    use crate::sim::SimCluster;

    const LOCAL: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

    /// The flags as `serve-sim` parses them (its defaults for the rest).
    fn parsed(flags: &[&str]) -> ServeSimArgs {
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            args: ServeSimArgs,
        }
        <Cli as clap::Parser>::parse_from(std::iter::once("serve-sim").chain(flags.iter().copied()))
            .args
    }

    #[tokio::test]
    async fn config_errors_are_clear() {
        let args = |preset: &str, slowdown: f64| ServeSimArgs {
            preset: preset.into(),
            slowdown,
            ..parsed(&[])
        };
        let e = args("nope", 1.0).to_config().unwrap_err().to_string();
        assert!(
            e.contains("nope") && e.contains("rtxpro6000x4-qwen122b"),
            "{e}"
        );
        assert!(args("fast", 0.0).to_config().is_err());
        let cfg = ServeSimArgs {
            token_delay_ms: Some(5.0),
            model: Some("m".into()),
            ..args("fast", 1.1)
        }
        .to_config()
        .unwrap();
        assert_eq!(
            (cfg.token_delay_ms, cfg.model.as_str(), cfg.slowdown),
            (Some(5.0), "m", 1.1)
        );
        let fast = SimConfig::preset("fast").unwrap();
        let e = SimCluster::start(&fast, LOCAL, 65535, 2)
            .await
            .err()
            .unwrap();
        assert!(e.to_string().contains("65535"), "{e}");
        assert!(SimCluster::start(&fast, LOCAL, 0, 0).await.is_err());
    }

    /// `--slowdown 1e300` and `--token-delay-ms 1e300` (issue 15) used to start a server whose
    /// engine panicked on the first request; now neither the flags nor a cluster start accept
    /// them, and the error names the flag and its range.
    #[tokio::test]
    async fn out_of_range_flags_are_refused_before_the_engine_runs() {
        let args = parsed(&["--preset", "fast"]);
        let cases = [
            (
                ServeSimArgs {
                    slowdown: 1e300,
                    ..args.clone()
                },
                "--slowdown",
                "(0, 1000]",
            ),
            (
                ServeSimArgs {
                    slowdown: f64::NAN,
                    ..args.clone()
                },
                "--slowdown",
                "(0, 1000]",
            ),
            (
                ServeSimArgs {
                    token_delay_ms: Some(1e300),
                    ..args.clone()
                },
                "--token-delay-ms",
                "[0, 60000]",
            ),
            (
                ServeSimArgs {
                    token_delay_ms: Some(-1.0),
                    ..args.clone()
                },
                "--token-delay-ms",
                "[0, 60000]",
            ),
            (
                ServeSimArgs {
                    session_jitter: 2.0,
                    ..args.clone()
                },
                "--session-jitter",
                "[0, 1]",
            ),
            (
                ServeSimArgs {
                    max_running: Some(0),
                    ..args.clone()
                },
                "--max-running",
                "[1, 1000000]",
            ),
        ];
        for (a, flag, range) in cases {
            let e = a.to_config().unwrap_err().to_string();
            assert!(e.contains(flag) && e.contains(range), "{e}");
            // The same values set in a SimConfig directly (as the demo or a test would).
            let mut cfg = SimConfig::preset(&a.preset).unwrap();
            cfg.slowdown = a.slowdown;
            cfg.session_jitter = a.session_jitter;
            cfg.token_delay_ms = a.token_delay_ms.or(cfg.token_delay_ms);
            cfg.max_running = a.max_running.unwrap_or(cfg.max_running);
            let e = SimCluster::start(&cfg, LOCAL, 0, 1)
                .await
                .err()
                .expect(flag);
            assert!(format!("{e:#}").contains(flag), "{e:#}");
        }
        let e = SimCluster::start(&SimConfig::preset("fast").unwrap(), LOCAL, 0, usize::MAX)
            .await
            .err()
            .unwrap();
        assert!(e.to_string().contains("--replicas"), "{e}");
    }
}
