//! The file-descriptor limit, checked before a run sends anything: every request in flight
//! holds a socket, and a run that hits the limit part way loses its results to "Too many open
//! files". The soft limit is raised as far as the hard limit allows; past that, the run is
//! refused with the number to raise it to.

use anyhow::{bail, Result};

use crate::process::open_files;
use crate::profile::Profile;

/// Descriptors besides the load's sockets: standard streams, the journal, the runtime's own,
/// the probe, DNS, result files.
pub const MARGIN: u64 = 64;

/// What a run of `profile` holds open at most, with the parts named for the error message.
#[derive(Debug, Clone, PartialEq)]
pub struct Need {
    /// Requests in flight at once, per arm.
    pub in_flight: u64,
    pub arms: u64,
    /// Telemetry scrapes: one connection per endpoint, both arms.
    pub scrapes: u64,
}

impl Need {
    pub fn of(profile: &Profile, base_endpoints: usize) -> Need {
        let sweep = &profile.sweep;
        let in_flight = match (sweep.max_concurrency, sweep.is_open_loop()) {
            (Some(cap), true) => u64::from(cap),
            // No cap: the requests of a trial that can be in flight within a request timeout.
            (None, true) => (sweep.rates.iter())
                .map(|&r| {
                    let per_trial = match sweep.trial_span() {
                        Some(span) => r * span.as_secs_f64(),
                        None => f64::from(sweep.requests_per_level),
                    };
                    let within_timeout = r * sweep.request_timeout.as_secs_f64();
                    per_trial.min(within_timeout).ceil().max(1.0) as u64
                })
                .max()
                .unwrap_or(1),
            _ => sweep.concurrency.iter().copied().max().map_or(1, u64::from),
        };
        let arms = if base_endpoints > 0 { 2 } else { 1 };
        Need {
            in_flight,
            arms,
            scrapes: (profile.target.endpoints.len() + base_endpoints) as u64,
        }
    }

    pub fn total(&self) -> u64 {
        self.in_flight * self.arms + self.scrapes + MARGIN
    }
}

/// Makes sure the process may open `need.total()` files: raises the soft limit toward the hard
/// one when it is lower, and refuses (naming `ulimit -n`) when even the hard limit is too low.
pub fn ensure(need: &Need, open_loop_uncapped: bool) -> Result<()> {
    let total = need.total();
    let Some(lim) = open_files::limits() else {
        return Ok(()); // Unknown: nothing to check against.
    };
    let enough = |v: libc::rlim_t| v == libc::RLIM_INFINITY || v >= total;
    if enough(lim.soft) {
        return Ok(());
    }
    if enough(lim.hard) && open_files::raise_to_hard(lim) {
        return Ok(());
    }
    let lower = if open_loop_uncapped {
        "set `sweep.max_concurrency` (without it, every request of a trial that a request \
         timeout covers may be in flight at once)"
    } else {
        "lower `sweep.concurrency`"
    };
    bail!(
        "this run may hold about {total} files open ({} requests in flight x {} arm(s) + {} \
         telemetry connection(s) + {MARGIN} for the rest), but the file-descriptor limit is \
         {} (hard limit {}): raise it with `ulimit -n {total}` before the run, or {lower}",
        need.in_flight,
        need.arms,
        need.scrapes,
        lim.soft,
        lim.hard
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn need_counts_each_kind_of_sweep() {
        let base = "name = \"x\"\n[target]\nendpoints = [\"http://127.0.0.1:1\", \"http://127.0.0.1:2\"]\n[workload]\nmax_tokens = 8\n[sweep]\n";
        for (sweep, base_endpoints, in_flight, total) in [
            ("concurrency = [1, 500, 64]", 0, 500, 500 + 2 + MARGIN),
            ("concurrency = [100]", 1, 100, 200 + 3 + MARGIN),
            (
                "rates = [10.0]\nrequests_per_level = 50\nmax_concurrency = 7",
                0,
                7,
                7 + 2 + MARGIN,
            ),
            // Uncapped: the smaller of a trial's requests and those one timeout covers.
            (
                "rates = [10.0]\nrequests_per_level = 50",
                0,
                50,
                50 + 2 + MARGIN,
            ),
            (
                "rates = [10.0]\nduration = \"1h\"\nrequest_timeout = \"30s\"",
                0,
                300,
                300 + 2 + MARGIN,
            ),
        ] {
            let p = Profile::parse(&format!("{base}{sweep}")).unwrap();
            let need = Need::of(&p, base_endpoints);
            assert_eq!(
                (need.in_flight, need.total()),
                (in_flight, total),
                "{sweep}"
            );
        }
    }

    #[test]
    fn a_small_need_passes() {
        let need = Need {
            in_flight: 1,
            arms: 1,
            scrapes: 1,
        };
        ensure(&need, false).unwrap();
    }
}
