//! The GPUs of this machine, read from `nvidia-smi` (or `rocm-smi` where that is what is
//! installed), so the fingerprint a baseline is compared on is taken, not typed.
//!
//! Only asked when every endpoint is on this machine (loopback): a client benchmarking a
//! remote server would otherwise record its own GPUs. Each tool runs with a time limit and
//! its output is read up to a bound: a wedged driver must not hang the run.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long a GPU tool may take.
pub const TOOL_TIMEOUT: Duration = Duration::from_secs(10);
/// How much of its output is read.
const MAX_OUTPUT: u64 = 64 * 1024;

/// What the GPU tool said.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Gpus {
    /// The model, e.g. "NVIDIA H200"; distinct models joined with " + ".
    pub model: Option<String>,
    pub count: Option<u32>,
    pub driver: Option<String>,
}

/// Runs a command with a time limit; its standard output (bounded), or `None` when it is
/// not installed, fails, or takes too long.
pub fn run_bounded(program: &str, args: &[&str], timeout: Duration) -> Option<String> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let stdout = child.stdout.take()?;
    let reader = std::thread::spawn(move || {
        let mut out = Vec::new();
        let _ = stdout.take(MAX_OUTPUT).read_to_end(&mut out);
        out
    });
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
        }
    };
    // A killed child's pipe closes, so the reader ends; one that forked a holder of the pipe
    // is not waited for.
    let out = if status.is_some_and(|s| s.success()) {
        reader.join().ok()?
    } else {
        return None;
    };
    String::from_utf8(out).ok()
}

/// Parses `nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader`.
pub fn parse_nvidia_smi(text: &str) -> Gpus {
    let mut models: Vec<String> = Vec::new();
    let mut driver = None;
    let mut count = 0u32;
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let fields: Vec<&str> = line.split(',').map(str::trim).collect();
        let [name, drv, ..] = fields.as_slice() else {
            continue;
        };
        if name.is_empty() || !printable(name) {
            continue;
        }
        count += 1;
        if !models.iter().any(|m| m == name) {
            models.push(name.to_string());
        }
        if driver.is_none() && !drv.is_empty() && printable(drv) {
            driver = Some(drv.to_string());
        }
    }
    Gpus {
        model: (!models.is_empty()).then(|| models.join(" + ")),
        count: (count > 0).then_some(count),
        driver,
    }
}

/// Parses `rocm-smi --showproductname --showdriverversion --csv`: a header row naming a
/// "Card series" (or "Card SKU") column, one row per GPU ("card0,..."), and a driver line.
pub fn parse_rocm_smi(text: &str) -> Gpus {
    let mut gpus = Gpus::default();
    let mut column = None;
    let mut models: Vec<String> = Vec::new();
    let mut count = 0u32;
    for line in text.lines().map(str::trim) {
        let fields: Vec<&str> = line.split(',').map(str::trim).collect();
        let lower = line.to_ascii_lowercase();
        if lower.starts_with("device") {
            column = fields.iter().position(|f| {
                let f = f.to_ascii_lowercase();
                f == "card series" || f == "card sku"
            });
        } else if lower.starts_with("card") {
            count += 1;
            if let Some(name) = column.and_then(|c| fields.get(c)) {
                if !name.is_empty() && printable(name) && !models.iter().any(|m| m == name) {
                    models.push(name.to_string());
                }
            }
        } else if lower.contains("driver version") {
            gpus.driver = fields
                .last()
                .map(|v| v.rsplit(':').next().unwrap_or(v).trim().to_string())
                .filter(|v| !v.is_empty() && printable(v));
        }
    }
    gpus.model = (!models.is_empty()).then(|| models.join(" + "));
    gpus.count = (count > 0).then_some(count);
    gpus
}

/// The GPUs of this machine: nvidia-smi first, then rocm-smi. `CUDA_VISIBLE_DEVICES` (a
/// list of devices) limits the count to the devices the server can see.
pub fn detect() -> Option<Gpus> {
    let nvidia = run_bounded(
        "nvidia-smi",
        &[
            "--query-gpu=name,driver_version,memory.total",
            "--format=csv,noheader",
        ],
        TOOL_TIMEOUT,
    )
    .map(|t| parse_nvidia_smi(&t));
    let mut gpus = match nvidia {
        Some(g) if g.count.is_some() => g,
        _ => run_bounded(
            "rocm-smi",
            &["--showproductname", "--showdriverversion", "--csv"],
            TOOL_TIMEOUT,
        )
        .map(|t| parse_rocm_smi(&t))
        .filter(|g| g.count.is_some())?,
    };
    if let Ok(visible) = std::env::var("CUDA_VISIBLE_DEVICES") {
        let n = visible.split(',').filter(|d| !d.trim().is_empty()).count() as u32;
        gpus.count = gpus.count.map(|c| c.min(n));
    }
    Some(gpus)
}

fn printable(s: &str) -> bool {
    s.len() <= 128 && s.chars().all(|c| !c.is_control())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_nvidia_smi_lines() {
        let g = parse_nvidia_smi(
            "NVIDIA H200, 550.54.15, 143771 MiB\nNVIDIA H200, 550.54.15, 143771 MiB\n",
        );
        assert_eq!(g.model.as_deref(), Some("NVIDIA H200"));
        assert_eq!(g.count, Some(2));
        assert_eq!(g.driver.as_deref(), Some("550.54.15"));
        assert_eq!(parse_nvidia_smi("garbage\n"), Gpus::default());
    }

    #[test]
    fn reads_rocm_smi_csv() {
        let g = parse_rocm_smi(
            "device,Card series,Card model,Card vendor,Card SKU\n\
             card0,AMD Instinct MI300X,0x74a1,Advanced Micro Devices,MI3SRIOV\n\
             card1,AMD Instinct MI300X,0x74a1,Advanced Micro Devices,MI3SRIOV\n\
             Driver version,6.8.5\n",
        );
        assert_eq!(g.model.as_deref(), Some("AMD Instinct MI300X"));
        assert_eq!(g.count, Some(2));
        assert_eq!(g.driver.as_deref(), Some("6.8.5"));
    }

    #[test]
    fn a_tool_that_hangs_is_given_up() {
        let started = Instant::now();
        assert_eq!(
            run_bounded("sleep", &["30"], Duration::from_millis(300)),
            None
        );
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(run_bounded("no-such-tool-here", &[], TOOL_TIMEOUT), None);
    }
}
