//! Starting and stopping replicas, and the `serve-sim` command.

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use super::config::SimConfig;
use super::draw::mix_seed;
use super::engine;
use super::faults::{FaultState, Faults};
use super::http::{router, AppState};
use super::metrics::Metrics;

struct Replica {
    addr: SocketAddr,
    server: JoinHandle<()>,
    engine: JoinHandle<()>,
}

/// Independent simulated servers, one engine each, like data-parallel replicas.
pub struct SimCluster {
    replicas: Vec<Replica>,
    stop: watch::Sender<bool>,
    session_factor: f64,
}

/// Most replicas one process starts (each is an engine task and a listener).
pub const MAX_REPLICAS: usize = 1024;

/// How long `shutdown` lets open streams finish before cutting them.
const DRAIN: Duration = Duration::from_secs(2);

impl SimCluster {
    /// Start `replicas` independent engines+servers on host:port..port+replicas-1 (port 0 =
    /// ephemeral ports for each). Replica i's random draws are seeded from (seed, i); the
    /// session's speed factor (see [`SimConfig::session_jitter`]) is drawn once from the seed
    /// and slows every replica alike.
    pub async fn start(
        config: &SimConfig,
        host: IpAddr,
        port: u16,
        replicas: usize,
    ) -> Result<SimCluster> {
        let faults = Arc::new(FaultState::default());
        SimCluster::start_with_faults(config, faults, host, port, replicas).await
    }

    /// [`SimCluster::start`] with fault injection and an API key check shared by the replicas.
    pub async fn start_with_faults(
        config: &SimConfig,
        faults: Arc<FaultState>,
        host: IpAddr,
        port: u16,
        replicas: usize,
    ) -> Result<SimCluster> {
        config
            .validate()
            .context("invalid simulator configuration")?;
        if !(1..=MAX_REPLICAS).contains(&replicas) {
            bail!("--replicas must lie in [1, {MAX_REPLICAS}], got {replicas}");
        }
        if port != 0 && u32::from(port) + replicas as u32 - 1 > u32::from(u16::MAX) {
            bail!(
                "{replicas} replicas from port {port} would need ports above {}",
                u16::MAX
            );
        }
        let (stop, _) = watch::channel(false);
        let session_factor = config.session_factor();
        let session = config.session();
        let mut cluster = SimCluster {
            replicas: Vec::with_capacity(replicas),
            stop,
            session_factor,
        };
        for i in 0..replicas {
            let p = if port == 0 { 0 } else { port + i as u16 };
            let cfg = SimConfig {
                seed: mix_seed(config.seed ^ mix_seed(i as u64)),
                ..session.clone()
            };
            let addr = SocketAddr::new(host, p);
            let stop = cluster.stop.subscribe();
            match start_replica(cfg, session_factor, faults.clone(), addr, stop).await {
                Ok(r) => cluster.replicas.push(r),
                Err(e) => {
                    cluster.shutdown().await;
                    return Err(e);
                }
            }
        }
        Ok(cluster)
    }

    /// The speed factor this start drew: every step of every replica lasts this many times
    /// longer (exactly 1 without session jitter).
    pub fn session_factor(&self) -> f64 {
        self.session_factor
    }

    /// "http://HOST:PORT" for each replica; a wildcard bind is reported as loopback.
    pub fn base_urls(&self) -> Vec<String> {
        self.replicas
            .iter()
            .map(|r| {
                let mut a = r.addr;
                if a.ip().is_unspecified() {
                    a.set_ip(match a.ip() {
                        IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::LOCALHOST),
                        IpAddr::V6(_) => IpAddr::V6(std::net::Ipv6Addr::LOCALHOST),
                    });
                }
                format!("http://{a}")
            })
            .collect()
    }

    /// Stops accepting, lets open responses drain briefly, then stops the engines.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        let stops = self.replicas.into_iter().map(|r| async move {
            let abort = r.server.abort_handle();
            if tokio::time::timeout(DRAIN, r.server).await.is_err() {
                abort.abort();
            }
            r.engine.abort();
            let _ = r.engine.await;
        });
        futures::future::join_all(stops).await;
    }
}

/// Thousands of streams connect at once when a level starts; tokio's default backlog of 1,024
/// made the kernel drop the rest of the burst (the client then timed out connecting), so the
/// backlog is as large as the kernel allows (it caps it at `net.core.somaxconn`).
const LISTEN_BACKLOG: u32 = 65_535;

fn listen(addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}

async fn start_replica(
    cfg: SimConfig,
    session_factor: f64,
    faults: Arc<FaultState>,
    addr: SocketAddr,
    mut stop: watch::Receiver<bool>,
) -> Result<Replica> {
    let listener = listen(addr).with_context(|| format!("cannot listen on {addr}"))?;
    let addr = listener.local_addr()?;
    // Without TCP_NODELAY, Nagle holds each small SSE write until the client's delayed ACK
    // (about 40 ms): TTFT would measure the kernel, not the engine.
    let connections = Arc::new(AtomicU64::new(0));
    let accepted = Arc::clone(&connections);
    let listener = axum::serve::ListenerExt::tap_io(listener, move |tcp| {
        let _ = tcp.set_nodelay(true);
        accepted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    });
    let metrics = Arc::new(Metrics::default());
    let (submit, rx) = mpsc::unbounded_channel();
    let state = Arc::new(AppState {
        model: cfg.model.clone(),
        preset: cfg.preset.clone(),
        default_max_tokens: cfg.default_max_tokens,
        template_tokens: cfg.template_tokens,
        tokenizer: cfg.tokenizer.clone(),
        submit,
        metrics: metrics.clone(),
        next_id: AtomicU64::new(0),
        faults,
        seed: cfg.seed,
        send_times: cfg.record_send_times.then(Default::default),
        connections,
        session_factor,
        version: cfg.version(),
    });
    let engine = tokio::spawn(engine::run(cfg, rx, metrics));
    let app = router(state);
    let server = tokio::spawn(async move {
        let shutdown = async move {
            let _ = stop.wait_for(|s| *s).await;
        };
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(shutdown)
            .await;
    });
    Ok(Replica {
        addr,
        server,
        engine,
    })
}

/// Where `serve-sim` listens: the first port (0: an ephemeral one per replica) on `host`.
pub struct Listen {
    pub host: IpAddr,
    pub port: u16,
    pub replicas: usize,
}

/// The `throughline serve-sim` command's server: start, print one line per replica, run
/// until Ctrl-C or SIGTERM. `key`: the API key a request must carry, if any.
pub async fn serve(cfg: &SimConfig, faults: Faults, key: Option<String>, at: Listen) -> Result<()> {
    let exit_after = faults.exit_after;
    let state = Arc::new(FaultState::new(faults, cfg.seed, key));
    let cluster = SimCluster::start_with_faults(cfg, state, at.host, at.port, at.replicas).await?;
    // Before the URL lines, and with no " on " in it: readers take the first lines holding
    // " on " as the URLs and may close the pipe once they have them. A reader that went away
    // must not stop the server, so nothing here panics on a closed stdout.
    let mut out = std::io::stdout().lock();
    let _ = writeln!(
        out,
        "session speed factor {} (seed {}, --session-jitter {})",
        cluster.session_factor(),
        cfg.seed,
        cfg.session_jitter
    );
    for url in cluster.base_urls() {
        let _ = writeln!(out, "serving preset {} on {url}", cfg.preset);
    }
    let _ = out.flush();
    drop(out);
    if let Some(after) = exit_after {
        tokio::spawn(async move {
            tokio::time::sleep(after).await;
            super::faults::crash("--exit-after elapsed");
        });
    }
    wait_for_signal().await?;
    cluster.shutdown().await;
    Ok(())
}

async fn wait_for_signal() -> Result<()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate()).context("cannot watch SIGTERM")?;
        tokio::select! {
            r = tokio::signal::ctrl_c() => r.context("cannot watch Ctrl-C")?,
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    tokio::signal::ctrl_c()
        .await
        .context("cannot watch Ctrl-C")?;
    Ok(())
}
