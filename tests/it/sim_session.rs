//! `serve-sim --session-jitter` end to end on the real binary: each start draws one speed
//! factor from its seed, prints it before the URL lines and reports it in `/metrics`; and
//! out-of-range numeric flags are refused at startup (exit 2) instead of panicking the
//! engine on the first request.

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};

use crate::common::{code, http_get};

/// A serve-sim process, killed on drop.
struct Started {
    child: Child,
    url: String,
    /// The factor printed on the startup line.
    printed: f64,
}

impl Drop for Started {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(extra: &[&str]) -> Started {
    let mut child = crate::common::command()
        .args(["serve-sim", "--port", "0", "--preset", "instant"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start serve-sim");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().expect("a session line").unwrap();
    assert!(!first.contains(" on "), "{first}");
    let second = lines.next().expect("a URL line").unwrap();
    let url = second
        .split(" on ")
        .nth(1)
        .expect("the second line names the URL")
        .trim()
        .to_string();
    let printed = first
        .strip_prefix("session speed factor ")
        .and_then(|rest| rest.split(' ').next())
        .unwrap_or_else(|| panic!("no session factor in {second:?}"))
        .parse()
        .unwrap();
    Started {
        child,
        url,
        printed,
    }
}

fn metric(url: &str, name: &str) -> f64 {
    let body = http_get(&format!("{url}/metrics"));
    body.lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .unwrap_or_else(|| panic!("{name} not in /metrics:\n{body}"))
        .parse()
        .unwrap()
}

fn factor(seed: &str, jitter: &str) -> f64 {
    let s = start(&["--seed", seed, "--session-jitter", jitter]);
    let reported = metric(&s.url, "throughline_sim_session_factor");
    assert_eq!(reported, s.printed, "printed and /metrics agree");
    s.printed
}

#[test]
fn each_start_draws_its_factor_from_the_seed() {
    let (a, b, a_again) = (
        factor("1", "0.05"),
        factor("2", "0.05"),
        factor("1", "0.05"),
    );
    assert_eq!(a, a_again, "the same seed, the same session");
    assert_ne!(a, b, "another seed, another session");
    for f in [a, b] {
        assert!((0.8..1.25).contains(&f), "{f}");
        assert_ne!(f, 1.0);
    }
    let steady = start(&["--seed", "1"]);
    assert_eq!(steady.printed, 1.0);
    assert_eq!(metric(&steady.url, "throughline_sim_session_factor"), 1.0);
}

#[test]
fn out_of_range_numbers_are_refused_at_startup() {
    for (args, flag, range) in [
        (&["--slowdown", "1e300"][..], "--slowdown", "(0, 1000]"),
        (
            &["--token-delay-ms", "1e300"],
            "--token-delay-ms",
            "[0, 60000]",
        ),
        (&["--session-jitter=-0.1"], "--session-jitter", "[0, 1]"),
        (&["--session-jitter", "NaN"], "--session-jitter", "[0, 1]"),
        (&["--max-running", "0"], "--max-running", "[1, 1000000]"),
        (&["--replicas", "5000"], "--replicas", "[1, 1024]"),
        (&["--fault-stall", "2h"], "--fault-stall", "1h"),
    ] {
        let out = crate::common::command()
            .args(["serve-sim", "--port", "0"])
            .args(args)
            .output()
            .expect("run serve-sim");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(code(&out), 2, "{args:?}: {err}");
        assert!(err.contains(flag) && err.contains(range), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}
