//! Service-level objectives: the highest load per replica whose measured TTFT p99 and ITL p99
//! meet the limits (interpolated between measured levels, never extrapolated past the last),
//! which one binds, and the goodput there: the share of requests that met every SLO, counted
//! from the run's `requests.jsonl` (a request's ITL is its mean inter-token gap, TPOT, as in
//! AIPerf's goodput).

use std::io::BufRead;
use std::path::Path;

use anyhow::{bail, Result};
use serde::Serialize;

use super::field::Field;
use crate::record::files::REQUESTS_FILE;
use crate::record::{Arm, RequestRecord, RunResult, Window};

/// The limits, seconds.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct Slo {
    pub max_ttft_p99_s: Option<f64>,
    pub max_itl_p99_s: Option<f64>,
}

impl Slo {
    pub fn any(&self) -> bool {
        self.max_ttft_p99_s.is_some() || self.max_itl_p99_s.is_some()
    }
}

/// The most concurrency per replica the SLOs allow.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SloCap {
    /// Concurrent requests per replica (fractional: interpolated between levels).
    pub concurrency: f64,
    /// The SLO that sets it, or None when every measured level meets them all.
    pub binding: Option<String>,
    pub how: String,
}

/// The share of requests at one level that met every SLO.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Goodput {
    /// Concurrency of the measured level counted (the whole run's, all endpoints).
    pub level: u32,
    pub requests: usize,
    pub met: usize,
    pub share: f64,
}

/// One level's p99s (mean over its trials, seconds) at its concurrency per replica.
struct LevelP99 {
    concurrency: f64,
    ttft: Option<f64>,
    itl: Option<f64>,
}

/// Which p99 of a level an SLO reads.
type Pick = fn(&LevelP99) -> Option<f64>;

fn level_p99s(run: &RunResult, origin: &str) -> Result<Vec<LevelP99>> {
    let endpoints = run.environment.endpoints.max(1) as f64;
    let mut out = Vec::new();
    for l in &run.levels {
        let ttft = l.trial_mean(|t| t.ttft_ms.as_ref().map(|p| p.p99 / 1e3));
        let itl = l.trial_mean(|t| t.itl_ms.as_ref().map(|p| p.p99 / 1e3));
        out.push(LevelP99 {
            concurrency: l.concurrency as f64 / endpoints,
            ttft,
            itl,
        });
    }
    out.sort_by(|a, b| a.concurrency.total_cmp(&b.concurrency));
    if out.is_empty() {
        return Err(Field::Results.error(format!("the run {origin}: no levels")));
    }
    Ok(out)
}

/// The highest concurrency per replica at which the measured p99s meet the SLOs.
pub fn cap(run: &RunResult, origin: &str, slo: &Slo) -> Result<SloCap> {
    let levels = level_p99s(run, origin)?;
    let mut best: Option<(f64, Option<String>, String)> = None;
    let pickers: [(&str, Option<f64>, Pick, Field); 2] = [
        (
            "TTFT p99",
            slo.max_ttft_p99_s,
            |l| l.ttft,
            Field::MaxTtftP99,
        ),
        ("ITL p99", slo.max_itl_p99_s, |l| l.itl, Field::MaxItlP99),
    ];
    for (name, limit, pick, field) in pickers {
        let Some(limit) = limit else { continue };
        let mut values = Vec::new();
        for l in &levels {
            match pick(l) {
                Some(v) => values.push((l.concurrency, v)),
                None => {
                    return Err(Field::Results.error(format!(
                        "the run {origin}: level {} has no {name} (a transcribed run or one \
                     without per-request timing): the SLO cannot be checked",
                        l.concurrency
                    )))
                }
            }
        }
        let first_over = values.iter().position(|(_, v)| *v > limit);
        let (c, binding, how) = match first_over {
            Some(0) => {
                return Err(field.error(format!(
                    "the {name} limit: even the lowest level measured ({} per replica) has {name} \
                 {:.3} s, over the {limit} s limit: no load in the measured curve meets it",
                    values[0].0, values[0].1
                )))
            }
            None => {
                let last = values[values.len() - 1];
                (
                    last.0,
                    None,
                    format!(
                        "{name} {:.3} s at the largest level measured ({}) meets {limit} s; not \
                         extrapolated beyond it",
                        last.1, last.0
                    ),
                )
            }
            Some(i) => {
                let (c0, v0) = values[i - 1];
                let (c1, v1) = values[i];
                let c = c0 + (limit - v0) / (v1 - v0) * (c1 - c0);
                (
                    c,
                    Some(name.to_string()),
                    format!(
                        "{name} <= {limit} s: {v0:.3} s at {c0} and {v1:.3} s at {c1} per \
                         replica, so at most {c:.1} (linear between the two levels)"
                    ),
                )
            }
        };
        if best.as_ref().is_none_or(|b| c < b.0) {
            best = Some((c, binding, how));
        }
    }
    let Some((concurrency, binding, how)) = best else {
        bail!("no SLO given")
    };
    Ok(SloCap {
        concurrency,
        binding,
        how,
    })
}

/// Goodput share at the measured level `level` (whole-run concurrency), from the
/// `requests.jsonl` beside the results file; None when there is no such file or no request.
pub fn goodput(results: &Path, level: u32, slo: &Slo) -> Option<Goodput> {
    let path = results.parent()?.join(REQUESTS_FILE);
    // A regular file only (a FIFO or a device would be read forever), one line at a time.
    let (file, _) = crate::fsutil::open_regular(&path).ok()?;
    let mut reader = std::io::BufReader::new(file);
    let (mut requests, mut met) = (0usize, 0usize);
    let mut line = Vec::new();
    while let Some(whole) = next_line(&mut reader, &mut line) {
        let Some(r) = whole
            .then(|| serde_json::from_slice::<RequestRecord>(&line).ok())
            .flatten()
        else {
            continue;
        };
        // The measured requests of this level on the run's own server: not warm-up, not a
        // duration sweep's ramp, not the base arm of a relative run.
        if r.warmup
            || r.concurrency != level
            || r.rate.is_some()
            || r.arm == Some(Arm::Base)
            || r.window.is_some_and(|w| w != Window::Measure)
        {
            continue;
        }
        requests += 1;
        let ok = r.error.is_none()
            && slo
                .max_ttft_p99_s
                .is_none_or(|l| r.ttft_ms.is_some_and(|t| t / 1e3 <= l))
            && slo
                .max_itl_p99_s
                .is_none_or(|l| r.tpot_ms.is_none_or(|t| t / 1e3 <= l));
        if ok {
            met += 1;
        }
    }
    (requests > 0).then(|| Goodput {
        level,
        requests,
        met,
        share: met as f64 / requests as f64,
    })
}

/// The longest line of requests.jsonl read: a request's record is a few hundred bytes; a
/// longer line (a hand-edited or hostile file) is skipped, never held.
const MAX_LINE_BYTES: u64 = 1 << 20;

/// Reads the next line into `line`: Some(true) for a line of at most [`MAX_LINE_BYTES`],
/// Some(false) for a longer one (read past, not kept), None at the end or on a read error.
fn next_line(reader: &mut impl std::io::BufRead, line: &mut Vec<u8>) -> Option<bool> {
    use std::io::Read;
    line.clear();
    let n = reader
        .take(MAX_LINE_BYTES + 1)
        .read_until(b'\n', line)
        .ok()?;
    if n == 0 {
        return None;
    }
    if line.last() == Some(&b'\n') || (line.len() as u64) <= MAX_LINE_BYTES {
        return Some(true);
    }
    // Past the limit: the rest of the line is skipped in buffer-sized steps.
    loop {
        let buf = reader.fill_buf().ok()?;
        if buf.is_empty() {
            return Some(false);
        }
        match buf.iter().position(|&b| b == b'\n') {
            Some(i) => {
                reader.consume(i + 1);
                return Some(false);
            }
            None => {
                let all = buf.len();
                reader.consume(all);
            }
        }
    }
}

/// What the plan says about the SLOs.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SloReport {
    pub slo: Slo,
    pub cap: SloCap,
    /// The concurrency per replica the plan uses (the SLO cap, or lower for other limits).
    pub planned_concurrency_per_replica: u32,
    pub goodput: Option<Goodput>,
    /// Requests per second per node that meet every SLO, at the P50 throughput.
    pub goodput_requests_per_s_per_node: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One request line as `requests.jsonl` holds it.
    fn line(concurrency: u32, ttft_ms: f64, tpot_ms: f64, extra: &str) -> String {
        format!(
            r#"{{"concurrency": {concurrency}, "trial": 1, "index": 0, "warmup": false,
            "endpoint": 0, "sent_s": 0.0, "first_byte_s": null, "first_chunk_s": null,
            "first_token_s": null, "end_s": 1.0, "ttft_ms": {ttft_ms}, "e2e_ms": 1000.0,
            "tpot_ms": {tpot_ms}, "output_tokens": 32, "input_tokens": 8,
            "token_source": "usage", "chunks": 32, "finish_reason": "length",
            "http_status": 200, "error": null, "error_message": null{extra}}}"#
        )
        .replace('\n', " ")
    }

    #[test]
    fn goodput_counts_the_level_s_own_requests_meeting_every_slo() {
        let dir = tempfile::tempdir().unwrap();
        let results = dir.path().join("results.json");
        let lines = [
            line(8, 100.0, 10.0, ""),                   // meets both
            line(8, 3000.0, 10.0, ""),                  // TTFT over
            line(8, 100.0, 80.0, ""),                   // ITL over
            line(8, 100.0, 10.0, r#", "arm": "base""#), // base arm: not counted
            line(16, 100.0, 10.0, ""),                  // another level
        ];
        std::fs::write(dir.path().join(REQUESTS_FILE), lines.join("\n")).unwrap();
        let slo = Slo {
            max_ttft_p99_s: Some(2.0),
            max_itl_p99_s: Some(0.05),
        };
        let g = goodput(&results, 8, &slo).unwrap();
        assert_eq!((g.requests, g.met), (3, 1), "{g:?}");
        assert!((g.share - 1.0 / 3.0).abs() < 1e-12);
        assert!(goodput(&results, 64, &slo).is_none());
    }

    /// A line past the limit is read past, not held, and the lines after it still count;
    /// a FIFO in the file's place is not read at all (it would never end).
    #[test]
    fn an_endless_line_is_skipped_and_a_fifo_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let results = dir.path().join("results.json");
        let long = "x".repeat(MAX_LINE_BYTES as usize * 3);
        let text = [long.clone(), line(8, 100.0, 10.0, ""), long].join("\n");
        std::fs::write(dir.path().join(REQUESTS_FILE), text).unwrap();
        let slo = Slo {
            max_ttft_p99_s: Some(2.0),
            max_itl_p99_s: None,
        };
        let g = goodput(&results, 8, &slo).unwrap();
        assert_eq!((g.requests, g.met), (1, 1), "{g:?}");

        let mut reader = std::io::Cursor::new(format!("{}\nab\n", "y".repeat(3 << 20)));
        let mut held = Vec::new();
        assert_eq!(next_line(&mut reader, &mut held), Some(false));
        assert!(held.len() as u64 <= MAX_LINE_BYTES + 1);
        assert_eq!(next_line(&mut reader, &mut held), Some(true));
        assert_eq!(held, b"ab\n");
        assert_eq!(next_line(&mut reader, &mut held), None);

        let fifo = dir.path().join("fifo");
        std::fs::create_dir(&fifo).unwrap();
        let c = std::ffi::CString::new(fifo.join(REQUESTS_FILE).to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert!(goodput(&fifo.join("results.json"), 8, &slo).is_none());
    }
}
