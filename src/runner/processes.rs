//! The record of the process groups a run in blocks started (OUT/servers/processes.txt),
//! written as each server starts and read by `throughline cleanup`, which stops what a run
//! left running: a job cancelled past its grace, or throughline killed outright (SIGKILL, an
//! out-of-memory kill), cannot stop its own servers. Each group still there is stopped with
//! its whole tree (SIGTERM, the grace, SIGKILL). Nothing is chosen by name: another job's
//! server with the same command line is never touched. A process is signalled only if its
//! environment holds the run's token (`THROUGHLINE_RUN`, which every server process
//! inherits): the record sits in a checkout, and a pull request could commit one listing the
//! runner's own processes.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::process::tree::{self, Proc};
use anyhow::{Context, Result};

/// The record of the process groups a run started, in its servers/ folder: one line per
/// start, `PGID START_TICKS TOKEN LABEL` (START_TICKS: the leader's start time,
/// /proc/PID/stat's 22nd field, so that a reused pid is told from the leader; TOKEN: the run's
/// token, which every process of its servers has in its environment).
pub const PROCESSES_FILE: &str = "servers/processes.txt";
/// The most of the record read (a run starts at most 2 x 64 blocks' servers).
const RECORD_BYTES: u64 = 1 << 20;

/// Stops every recorded group of the run in `out` that is still there, whole trees
/// (SIGTERM, `grace`, SIGKILL), saying what it found and did.
pub async fn stop_recorded(out: &Path, grace: Duration) -> Result<()> {
    let path = out.join(PROCESSES_FILE);
    let text = match crate::fsutil::read_bounded(&path, RECORD_BYTES) {
        Ok(text) => text,
        Err(_) if !path.exists() => {
            println!(
                "cleanup: {} does not exist: this run started no server",
                path.display()
            );
            return Ok(());
        }
        Err(e) => return Err(e),
    };
    let (groups, skipped) = parse(&text, &path);
    for line in &skipped {
        println!("cleanup: {}", crate::untrusted::for_terminal(line));
    }
    let procs = tree::table();
    let mut found: Vec<Proc> = Vec::new();
    let mut left_alone = 0;
    for (pgid, start, token, label) in &groups {
        let Some(token) = token else {
            // A record an older throughline wrote: nothing in it tells its processes from
            // others that took the group id since, so nothing is stopped on its word.
            left_alone += 1;
            println!(
                "cleanup: group {pgid} was recorded by an older throughline (no run token): \
                 left alone; if it is this run's server, stop it yourself (kill -- -{pgid})"
            );
            continue;
        };
        let label = crate::untrusted::for_terminal(label);
        let ours = own_group(*pgid, *start, &procs);
        let mut tree = tree::tree_of(&[], ours.then_some(*pgid), &procs);
        // Only the run's own processes, whatever the record says; the others are said, not
        // passed over in silence (a server started under another user, or with its
        // environment cleared, holds no readable token and may still hold the GPUs).
        let before = tree.len();
        tree.retain(|p| tree::has_run_token(p.pid, token));
        if tree.len() < before {
            left_alone += before - tree.len();
            println!(
                "cleanup: {label}: {} process(es) in group {pgid} do not show this run's token \
                 (another user's, or started with a cleared environment): left alone; if they \
                 are this run's server, stop them yourself (kill -- -{pgid})",
                before - tree.len()
            );
        }
        if !tree.is_empty() {
            println!(
                "cleanup: {label} is still running ({} process(es), group {pgid}): stopping it",
                tree.len()
            );
        }
        found.extend(tree);
    }
    // The run's processes outside its recorded groups: a helper that called setsid and was
    // reparented to init after throughline was killed keeps the run's token in its
    // environment, and only that finds it.
    let tokens: Vec<&str> = {
        let mut t: Vec<&str> = groups.iter().filter_map(|g| g.2.as_deref()).collect();
        t.sort_unstable();
        t.dedup();
        t
    };
    let me = std::process::id() as libc::pid_t;
    let strays: Vec<Proc> = (procs.iter())
        .filter(|p| !p.zombie && p.pid != me && !found.iter().any(|f| f.pid == p.pid))
        .filter(|p| tokens.iter().any(|t| tree::has_run_token(p.pid, t)))
        .copied()
        .collect();
    if !strays.is_empty() {
        println!(
            "cleanup: {} process(es) of the run outside its recorded groups (a daemon that left \
             its group): stopping them",
            strays.len()
        );
        found.extend(strays);
    }
    if found.is_empty() {
        match left_alone {
            0 => println!(
                "cleanup: none of the {} server(s) {} recorded is still running",
                groups.len(),
                out.display()
            ),
            n => println!("cleanup: nothing stopped; {n} left alone (above)"),
        }
        return Ok(());
    }
    tree::signal_each(&found, libc::SIGTERM);
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline && found.iter().any(tree::still_there) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let left: Vec<&Proc> = found.iter().filter(|p| tree::still_there(p)).collect();
    if !left.is_empty() {
        println!(
            "cleanup: {} process(es) still there after {}: SIGKILL",
            left.len(),
            humantime::format_duration(grace)
        );
        tree::signal_each(&found, libc::SIGKILL);
        // A killed process is gone only once the kernel has torn it down: "stopped" is said
        // when it is (a check right after the signal still saw one, under load).
        let killed = Instant::now() + KILL_WAIT;
        while Instant::now() < killed && found.iter().any(tree::still_there) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let left = found.iter().filter(|p| tree::still_there(p)).count();
        if left > 0 {
            println!(
                "cleanup: {left} process(es) still there {} after SIGKILL (stuck in the kernel?)",
                humantime::format_duration(KILL_WAIT)
            );
        }
    }
    println!("cleanup: stopped {} process(es)", found.len());
    Ok(())
}

/// How long cleanup waits for SIGKILLed processes to be gone before it says so.
const KILL_WAIT: Duration = Duration::from_secs(5);

/// Whether group `pgid` recorded with leader start `start` can only be the run's: its
/// leader is there and the same process, or gone (then the id stays reserved while any
/// member lives, and no new process could have taken it as its pid).
fn own_group(pgid: libc::pid_t, start: u64, procs: &[Proc]) -> bool {
    match procs.iter().find(|p| p.pid == pgid) {
        Some(leader) => leader.start == start,
        None => true,
    }
}

/// One recorded start: group, leader start ticks, run token (none in an older record), label.
type Recorded = (libc::pid_t, u64, Option<String>, String);

/// The record's lines, and a message for each line that is not `PGID START_TICKS TOKEN
/// LABEL` (skipped: one bad line, planted or torn by a kill mid-write, must not keep cleanup
/// from stopping the groups on the other lines).
fn parse(text: &str, path: &Path) -> (Vec<Recorded>, Vec<String>) {
    let mut groups = Vec::new();
    let mut skipped = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let mut fields = line.splitn(4, ' ');
        let pgid = fields.next().and_then(|f| f.parse::<libc::pid_t>().ok());
        let start = fields.next().and_then(|f| f.parse::<u64>().ok());
        let (Some(pgid), Some(start)) = (pgid, start) else {
            skipped.push(format!(
                "{} line {}: expected `PGID START_TICKS TOKEN LABEL` (two whole numbers, a \
                 token, then text): skipped",
                path.display(),
                n + 1
            ));
            continue;
        };
        // The older `PGID START LABEL` has no run token (its group is said, never stopped).
        let rest = fields.collect::<Vec<_>>();
        let (token, label) = match rest.split_first() {
            Some((t, label)) if tree::is_run_token(t) => (Some(t.to_string()), label.join(" ")),
            _ => (None, rest.join(" ")),
        };
        // Group ids below 2 are the kernel's and init's; never a server's.
        if pgid > 1 {
            groups.push((pgid, start, token, label));
        }
    }
    (groups, skipped)
}

/// Appends `pgid`'s line to OUT/servers/processes.txt as the server starts (before it is
/// waited for: a run killed while the server loads must have left its record).
pub fn record_start(out: &Path, pgid: u32, label: &str) -> Result<()> {
    use std::io::Write;
    let path = out.join(PROCESSES_FILE);
    let start = tree::read_proc(pgid as libc::pid_t).map_or(0, |p| p.start);
    let mut file = crate::fsutil::open_output_append(&path)?;
    writeln!(
        file,
        "{pgid} {start} {} {}",
        tree::run_token(),
        label.replace(['\n', '\r'], " ")
    )
    .with_context(|| format!("cannot write {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_record_reads_back_and_a_bad_line_is_named() {
        let p = Path::new("out/servers/processes.txt");
        let (got, skipped) = parse(
            "123 456 00000000000000ab block 1 head server (slot 1)\n\n1 9 00000000000000ff init\n",
            p,
        );
        assert!(skipped.is_empty());
        assert_eq!(
            got,
            vec![(
                123,
                456,
                Some("00000000000000ab".into()),
                "block 1 head server (slot 1)".into()
            )]
        );
        // The older record had no token (its label's first word is not one): read without
        // one, so that cleanup says it and stops nothing.
        assert_eq!(
            parse("123 456 block 1 head server\n", p).0,
            vec![(123, 456, None, "block 1 head server".into())]
        );
        assert_eq!(parse("123 456\n", p).0[0].2, None);
        // A bad line is named and skipped; the lines after it still count.
        let (got, skipped) = parse("123 x y\n77 5 00000000000000ab block 2\n", p);
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(skipped.len(), 1);
        assert!(
            skipped[0].contains("line 1") && skipped[0].contains("PGID START_TICKS"),
            "{skipped:?}"
        );
    }

    #[test]
    fn a_reused_leader_pid_is_not_the_runs_group() {
        let procs = [Proc {
            pid: 50,
            ppid: 1,
            pgid: 50,
            start: 999,
            zombie: false,
        }];
        assert!(!own_group(50, 100, &procs));
        assert!(own_group(50, 999, &procs));
        assert!(
            own_group(60, 100, &procs),
            "leader gone: members keep the id"
        );
    }
}
