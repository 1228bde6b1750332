//! Fault injection for `serve-sim`: the failures a real inference server shows under load
//! (HTTP 429/500/503, a connection cut mid-stream, a stalled stream, a malformed SSE line, a
//! stream without `[DONE]` or without usage, a degenerate few-token answer, a slow first
//! byte, the whole server exiting mid-run), so the load generator can be tested against them.
//!
//! Each request draws at most one fault. The draw is deterministic given the seed and the
//! request's arrival number at its replica: `u = uniform(seed, n)`, and the fault is the one
//! whose slice of [0, 1) holds `u`, the slices laid end to end in the order of [`Kind::ALL`]
//! with widths equal to the rates (which may therefore sum to at most 1).
//!
//! Faults come from `serve-sim` flags (`--fault-*`, `--exit-after*`) and from the `[faults]`
//! table of a sim config file (`--config FILE`); a flag overrides the file.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Deserialize;

use super::draw::mix_seed;

/// One kind of injected fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Answer with an HTTP error status (drawn from `http_statuses`) before any token.
    Http,
    /// Cut the connection after the first tokens (the body ends with an error, so the
    /// client sees a broken chunked stream).
    Reset,
    /// After the first tokens, send nothing for `stall`.
    Stall,
    /// After the first tokens, send one `data:` line that is not JSON.
    Malformed,
    /// End the stream normally but without `data: [DONE]`.
    NoDone,
    /// Leave out the usage (the `include_usage` chunk, or `usage` of a whole response).
    NoUsage,
    /// Stop after `degenerate_tokens` tokens (a complete, well-formed, too short answer).
    Degenerate,
    /// Wait `slow_first_byte` before the response headers.
    SlowFirstByte,
}

impl Kind {
    pub const ALL: [Kind; 8] = [
        Kind::Http,
        Kind::Reset,
        Kind::Stall,
        Kind::Malformed,
        Kind::NoDone,
        Kind::NoUsage,
        Kind::Degenerate,
        Kind::SlowFirstByte,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Http => "http",
            Kind::Reset => "reset",
            Kind::Stall => "stall",
            Kind::Malformed => "malformed",
            Kind::NoDone => "no_done",
            Kind::NoUsage => "no_usage",
            Kind::Degenerate => "degenerate",
            Kind::SlowFirstByte => "slow_first_byte",
        }
    }
}

/// The fault configuration: the `[faults]` table of a sim config file.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Faults {
    /// Fraction of requests answered with an HTTP error.
    pub http_error_rate: f64,
    /// The statuses HTTP errors are drawn from (uniformly).
    pub http_statuses: Vec<u16>,
    /// Fraction of requests whose connection is cut mid-stream.
    pub reset_rate: f64,
    /// Fraction of requests that stall after their first tokens.
    pub stall_rate: f64,
    /// How long a stall lasts, e.g. "5s".
    #[serde(with = "humantime_serde_text")]
    pub stall: Duration,
    /// Fraction of requests with one malformed SSE line.
    pub malformed_rate: f64,
    /// Fraction of streams that end without `[DONE]`.
    pub no_done_rate: f64,
    /// Fraction of responses without usage.
    pub no_usage_rate: f64,
    /// Fraction of requests that stop after `degenerate_tokens` tokens.
    pub degenerate_rate: f64,
    pub degenerate_tokens: u32,
    /// Fraction of requests whose headers wait `slow_first_byte`.
    pub slow_first_byte_rate: f64,
    #[serde(with = "humantime_serde_text")]
    pub slow_first_byte: Duration,
    /// Exit the whole process (abruptly, like a crash) when request number N+1 arrives.
    pub exit_after_requests: Option<u64>,
    /// Exit the whole process (abruptly) this long after starting, e.g. "5s".
    #[serde(with = "humantime_serde_opt")]
    pub exit_after: Option<Duration>,
    /// Bytes of another exporter's series (about 60 bytes each) after the engine's own on
    /// `/metrics`: a page of 100k unrelated series, for the load generator's bounds.
    pub metrics_padding: usize,
}

impl Default for Faults {
    fn default() -> Self {
        Faults {
            http_error_rate: 0.0,
            http_statuses: vec![429, 500, 503],
            reset_rate: 0.0,
            stall_rate: 0.0,
            stall: Duration::from_secs(5),
            malformed_rate: 0.0,
            no_done_rate: 0.0,
            no_usage_rate: 0.0,
            degenerate_rate: 0.0,
            degenerate_tokens: 2,
            slow_first_byte_rate: 0.0,
            slow_first_byte: Duration::from_secs(2),
            exit_after_requests: None,
            exit_after: None,
            metrics_padding: 0,
        }
    }
}

mod humantime_serde_text {
    use serde::{Deserialize, Deserializer};
    use std::time::Duration;

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let text = String::deserialize(d)?;
        humantime::parse_duration(&text).map_err(|e| {
            serde::de::Error::custom(format!(
                "invalid duration {text:?} ({e}); expected e.g. \"5s\" or \"500ms\""
            ))
        })
    }
}

mod humantime_serde_opt {
    use serde::Deserializer;
    use std::time::Duration;

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        super::humantime_serde_text::deserialize(d).map(Some)
    }
}

/// The longest stall or late first byte a fault may inject.
pub const MAX_FAULT_DELAY: Duration = Duration::from_secs(3600);
/// The latest `exit_after` may fire.
pub const MAX_EXIT_AFTER: Duration = Duration::from_secs(30 * 86_400);
/// The most tokens a degenerate answer may have.
pub const MAX_DEGENERATE_TOKENS: u32 = 1_000_000;
/// The most bytes of padding `/metrics` may carry.
pub const MAX_METRICS_PADDING: usize = 64 << 20;

/// A sim config file. Only `[faults]` for now; unknown tables are errors, not ignored.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct SimFile {
    #[serde(default)]
    faults: Faults,
}

/// The largest sim config file read (a few lines of TOML).
const CONFIG_FILE_BYTES: u64 = 1024 * 1024;

/// Reads a config file of at most [`CONFIG_FILE_BYTES`], refusing a special file (a FIFO
/// would wait for a writer, `/dev/zero` never ends) before reading it: the checks of
/// `fsutil::read_bounded`, here because `sim/` uses nothing else of the crate.
fn read_config(path: &Path) -> Result<String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let regular = |m: std::fs::Metadata| {
        if m.is_file() {
            Ok(m)
        } else {
            Err(anyhow::anyhow!(
                "{} is not a regular file; expected a TOML file",
                path.display()
            ))
        }
    };
    regular(std::fs::metadata(path)?)?;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    regular(file.metadata()?)?;
    let mut bytes = Vec::new();
    file.take(CONFIG_FILE_BYTES + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > CONFIG_FILE_BYTES {
        bail!("over the limit of {CONFIG_FILE_BYTES} bytes for a sim config");
    }
    String::from_utf8(bytes).context("not UTF-8 text")
}

impl Faults {
    /// Reads the `[faults]` table of a sim config file; errors name the file, line and field.
    pub fn load(path: &Path) -> Result<Faults> {
        let text = read_config(path)
            .with_context(|| format!("cannot read sim config {}", path.display()))?;
        Faults::parse(&text).with_context(|| format!("invalid sim config {}", path.display()))
    }

    /// Parses sim config text (see [`Faults::load`]).
    pub fn parse(text: &str) -> Result<Faults> {
        let file: SimFile = toml::from_str(text).map_err(|e| anyhow::anyhow!("{e}"))?;
        file.faults.validate()?;
        Ok(file.faults)
    }

    fn rate(&self, kind: Kind) -> f64 {
        match kind {
            Kind::Http => self.http_error_rate,
            Kind::Reset => self.reset_rate,
            Kind::Stall => self.stall_rate,
            Kind::Malformed => self.malformed_rate,
            Kind::NoDone => self.no_done_rate,
            Kind::NoUsage => self.no_usage_rate,
            Kind::Degenerate => self.degenerate_rate,
            Kind::SlowFirstByte => self.slow_first_byte_rate,
        }
    }

    /// Rates in 0..=1 summing to at most 1, usable statuses, a degenerate answer of
    /// 1..=[`MAX_DEGENERATE_TOKENS`] tokens, delays of at most [`MAX_FAULT_DELAY`] and an
    /// exit at most [`MAX_EXIT_AFTER`] after the start. Errors name the file key and the flag.
    pub fn validate(&self) -> Result<()> {
        let mut sum = 0.0;
        for kind in Kind::ALL {
            let r = self.rate(kind);
            if !(0.0..=1.0).contains(&r) {
                let name = match kind {
                    Kind::Http => "http_error",
                    k => k.name(),
                };
                let flag = name.replace('_', "-");
                bail!("field `faults.{name}_rate` (--fault-{flag}-rate): {r} is outside 0..=1");
            }
            sum += r;
        }
        for (key, flag, d) in [
            ("stall", "--fault-stall", self.stall),
            (
                "slow_first_byte",
                "--fault-slow-first-byte",
                self.slow_first_byte,
            ),
        ] {
            if d > MAX_FAULT_DELAY {
                bail!(
                    "field `faults.{key}` ({flag}): {} is longer than the {} allowed",
                    humantime::format_duration(d),
                    humantime::format_duration(MAX_FAULT_DELAY)
                );
            }
        }
        if let Some(d) = self.exit_after.filter(|d| *d > MAX_EXIT_AFTER) {
            bail!(
                "field `faults.exit_after` (--exit-after): {} is longer than the {} allowed",
                humantime::format_duration(d),
                humantime::format_duration(MAX_EXIT_AFTER)
            );
        }
        if sum > 1.0 + 1e-9 {
            bail!("the fault rates sum to {sum}; each request draws at most one fault, so the sum must be at most 1");
        }
        if self.http_error_rate > 0.0 && self.http_statuses.is_empty() {
            bail!("field `faults.http_statuses`: needs at least one status");
        }
        if let Some(s) = self
            .http_statuses
            .iter()
            .find(|s| !(400..=599).contains(*s))
        {
            bail!("field `faults.http_statuses`: {s} is not an HTTP error status (400-599)");
        }
        if !(1..=MAX_DEGENERATE_TOKENS).contains(&self.degenerate_tokens) {
            bail!(
                "field `faults.degenerate_tokens` (--fault-degenerate-tokens): must lie in \
                 [1, {MAX_DEGENERATE_TOKENS}], got {}",
                self.degenerate_tokens
            );
        }
        if self.metrics_padding > MAX_METRICS_PADDING {
            bail!(
                "field `faults.metrics_padding`: {} bytes is more than the {MAX_METRICS_PADDING} \
                 allowed",
                self.metrics_padding
            );
        }
        if self.exit_after_requests == Some(0) {
            bail!("field `faults.exit_after_requests` (--exit-after-requests): must be at least 1");
        }
        Ok(())
    }

    pub fn is_active(&self) -> bool {
        Kind::ALL.iter().any(|k| self.rate(*k) > 0.0)
            || self.exit_after_requests.is_some()
            || self.exit_after.is_some()
    }

    /// The fault drawn for request number `n` under `seed`, if any.
    pub fn draw(&self, seed: u64, n: u64) -> Option<Fault> {
        let mut rng = ChaCha8Rng::seed_from_u64(mix_seed(seed ^ mix_seed(n)));
        let u: f64 = rng.gen();
        let mut edge = 0.0;
        for kind in Kind::ALL {
            edge += self.rate(kind);
            if u < edge {
                let status = if self.http_statuses.is_empty() {
                    500
                } else {
                    self.http_statuses[rng.gen_range(0..self.http_statuses.len())]
                };
                return Some(Fault { kind, status });
            }
        }
        None
    }
}

/// The fault one request gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fault {
    pub kind: Kind,
    /// The status of an HTTP-error fault.
    pub status: u16,
}

/// What every replica of a process shares: the fault plan, the process-wide request count
/// (for `exit_after_requests`), per-kind counters and the key check.
#[derive(Debug, Default)]
pub struct FaultState {
    pub faults: Faults,
    pub seed: u64,
    /// Requests seen by all replicas of this process.
    arrived: AtomicU64,
    injected: [AtomicU64; 8],
    /// `Bearer <key>` a request must carry, when set.
    pub required_key: Option<String>,
    /// The unrelated series `/metrics` ends with (`faults.metrics_padding`), made once.
    padding: String,
}

/// What to do with one arriving request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    /// Go ahead, with this fault (or none).
    Serve(Option<Fault>),
    /// The process must exit now (exit_after_requests reached).
    Exit,
}

impl FaultState {
    pub fn new(faults: Faults, seed: u64, required_key: Option<String>) -> FaultState {
        let padding = padding(faults.metrics_padding);
        FaultState {
            faults,
            seed,
            required_key,
            padding,
            ..FaultState::default()
        }
    }

    /// Counts an arriving request and draws its fault. `replica_seed` and `n` (the
    /// replica's own request number) make the draw reproducible per replica.
    pub fn admit(&self, replica_seed: u64, n: u64) -> Admit {
        let total = self.arrived.fetch_add(1, Relaxed) + 1;
        if let Some(limit) = self.faults.exit_after_requests {
            if total > limit {
                return Admit::Exit;
            }
        }
        let fault = self.faults.draw(replica_seed, n);
        if let Some(f) = fault {
            let i = Kind::ALL.iter().position(|k| *k == f.kind).unwrap_or(0);
            self.injected[i].fetch_add(1, Relaxed);
        }
        Admit::Serve(fault)
    }

    /// Whether an `Authorization` header value is acceptable; `None` when no key is required.
    pub fn authorized(&self, header: Option<&str>) -> Option<bool> {
        let key = self.required_key.as_ref()?;
        Some(header.and_then(|h| h.strip_prefix("Bearer ")) == Some(key.as_str()))
    }

    /// Prometheus text: injected faults by kind.
    pub fn render(&self) -> String {
        let mut out = String::from(
            "# HELP throughline_sim_faults_injected_total Faults injected, by kind (process-wide).\n\
             # TYPE throughline_sim_faults_injected_total counter\n",
        );
        for (i, k) in Kind::ALL.iter().enumerate() {
            out.push_str(&format!(
                "throughline_sim_faults_injected_total{{kind=\"{}\"}} {}\n",
                k.name(),
                self.injected[i].load(Relaxed)
            ));
        }
        out.push_str(&self.padding);
        out
    }
}

/// At least `bytes` of another exporter's counters, one series a line.
fn padding(bytes: usize) -> String {
    let mut out = String::with_capacity(bytes + 128);
    if bytes > 0 {
        out.push_str("# TYPE node_exporter_unrelated_total counter\n");
    }
    let mut n = 0u64;
    while out.len() < bytes {
        out.push_str(&format!(
            "node_exporter_unrelated_total{{shard=\"{n}\",host=\"node-{:04}\"}} {n}\n",
            n % 9973
        ));
        n += 1;
    }
    out
}

/// Ends the process at once, as a crashed server would (no drain, no goodbye on open
/// connections beyond what the kernel sends).
pub fn crash(why: &str) -> ! {
    eprintln!("serve-sim: exiting on purpose ({why})");
    std::process::exit(3)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_are_deterministic_and_near_their_rates() {
        let f = Faults {
            http_error_rate: 0.2,
            reset_rate: 0.1,
            ..Faults::default()
        };
        let a: Vec<_> = (0..2000).map(|n| f.draw(7, n)).collect();
        let b: Vec<_> = (0..2000).map(|n| f.draw(7, n)).collect();
        assert_eq!(a, b);
        let http = a.iter().flatten().filter(|x| x.kind == Kind::Http).count();
        let reset = a.iter().flatten().filter(|x| x.kind == Kind::Reset).count();
        assert!((300..500).contains(&http), "{http}");
        assert!((130..270).contains(&reset), "{reset}");
        let other: Vec<_> = (0..2000).map(|n| f.draw(8, n)).collect();
        assert_ne!(a, other);
    }

    #[test]
    fn full_rate_always_faults() {
        let f = Faults {
            no_done_rate: 1.0,
            ..Faults::default()
        };
        assert!((0..100).all(|n| f.draw(1, n).map(|x| x.kind) == Some(Kind::NoDone)));
    }

    #[test]
    fn config_file_errors_name_line_and_field() {
        let err = format!(
            "{:#}",
            Faults::parse("[faults]\nreset_rate = 0.5\nstal = \"1s\"\n").unwrap_err()
        );
        assert!(err.contains("line 3") && err.contains("stal"), "{err}");
        let err = format!(
            "{:#}",
            Faults::parse("[faults]\nreset_rate = 0.7\nstall_rate = 0.7\n").unwrap_err()
        );
        assert!(err.contains("sum"), "{err}");
        let err = format!(
            "{:#}",
            Faults::parse("[faults]\nhttp_error_rate = 1.5\n").unwrap_err()
        );
        assert!(err.contains("faults.http_error_rate"), "{err}");
        let err = format!(
            "{:#}",
            Faults::parse("[faults]\nstall = \"soon\"\n").unwrap_err()
        );
        assert!(err.contains("stall") && err.contains("soon"), "{err}");
        let f = Faults::parse("[faults]\nexit_after = \"5s\"\nhttp_statuses = [429]\n").unwrap();
        assert_eq!(f.exit_after, Some(Duration::from_secs(5)));
        assert_eq!(f.http_statuses, vec![429]);
    }

    #[test]
    fn every_fault_setting_is_bounded_and_names_key_and_flag() {
        let d = Faults::default;
        let hour = Duration::from_secs(3600);
        let cases: Vec<(Faults, &str, &str)> = vec![
            (
                Faults {
                    reset_rate: f64::NAN,
                    ..d()
                },
                "faults.reset_rate",
                "--fault-reset-rate",
            ),
            (
                Faults {
                    http_error_rate: -0.1,
                    ..d()
                },
                "faults.http_error_rate",
                "--fault-http-error-rate",
            ),
            (
                Faults {
                    slow_first_byte_rate: 1.5,
                    ..d()
                },
                "faults.slow_first_byte_rate",
                "--fault-slow-first-byte-rate",
            ),
            (
                Faults {
                    stall: hour + Duration::from_nanos(1),
                    ..d()
                },
                "faults.stall",
                "--fault-stall",
            ),
            (
                Faults {
                    slow_first_byte: Duration::MAX,
                    ..d()
                },
                "faults.slow_first_byte",
                "--fault-slow-first-byte",
            ),
            (
                Faults {
                    exit_after: Some(Duration::MAX),
                    ..d()
                },
                "faults.exit_after",
                "--exit-after",
            ),
            (
                Faults {
                    degenerate_tokens: 0,
                    ..d()
                },
                "faults.degenerate_tokens",
                "--fault-degenerate-tokens",
            ),
            (
                Faults {
                    degenerate_tokens: u32::MAX,
                    ..d()
                },
                "faults.degenerate_tokens",
                "--fault-degenerate-tokens",
            ),
            (
                Faults {
                    exit_after_requests: Some(0),
                    ..d()
                },
                "faults.exit_after_requests",
                "--exit-after-requests",
            ),
        ];
        for (f, key, flag) in cases {
            let e = f.validate().unwrap_err().to_string();
            assert!(e.contains(key) && e.contains(flag), "{e}");
        }
        let edge = Faults {
            stall: hour,
            slow_first_byte: hour,
            exit_after: Some(MAX_EXIT_AFTER),
            degenerate_tokens: MAX_DEGENERATE_TOKENS,
            reset_rate: 1.0,
            ..d()
        };
        edge.validate().unwrap();
        let e = format!(
            "{:#}",
            Faults::parse("[faults]\nstall = \"2h\"\n").unwrap_err()
        );
        assert!(e.contains("faults.stall") && e.contains("1h"), "{e}");
    }

    #[test]
    fn exit_after_requests_counts_process_wide() {
        let s = FaultState::new(
            Faults {
                exit_after_requests: Some(2),
                ..Faults::default()
            },
            0,
            None,
        );
        assert_eq!(s.admit(1, 0), Admit::Serve(None));
        assert_eq!(s.admit(2, 0), Admit::Serve(None));
        assert_eq!(s.admit(1, 1), Admit::Exit);
    }

    #[test]
    fn key_check() {
        let s = FaultState::new(Faults::default(), 0, Some("k1".into()));
        assert_eq!(s.authorized(Some("Bearer k1")), Some(true));
        assert_eq!(s.authorized(Some("Bearer k2")), Some(false));
        assert_eq!(s.authorized(None), Some(false));
        assert_eq!(FaultState::default().authorized(None), None);
    }
}
