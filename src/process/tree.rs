//! A started command's whole process tree, read from /proc: its process group, every
//! descendant (one that called `setsid` or `setpgid` left the group but not the tree), and
//! the strays throughline adopted as a child subreaper (a daemon whose parent exited: its
//! new parent is throughline, not init). Stopping a server stops all three, so that no
//! process of a run holds a GPU for the next job.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

/// One process as /proc/PID/stat says: its parent, its group, when it started (clock ticks
/// since boot: with the pid, what names one process, since pids are reused).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Proc {
    pub pid: libc::pid_t,
    pub ppid: libc::pid_t,
    pub pgid: libc::pid_t,
    pub start: u64,
    pub zombie: bool,
}

/// Every process /proc lists (none where /proc cannot be read).
pub fn table() -> Vec<Proc> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<libc::pid_t>().ok())
        .filter_map(read_proc)
        .collect()
}

/// /proc/PID/stat of one process, None once it is gone.
pub fn read_proc(pid: libc::pid_t) -> Option<Proc> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(pid, &stat)
}

/// `pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime
/// stime cutime cstime priority nice threads itrealvalue starttime ...`; comm may hold
/// spaces and parentheses, so the fields are counted from the last `)`.
fn parse_stat(pid: libc::pid_t, stat: &str) -> Option<Proc> {
    let (_, rest) = stat.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let state = *fields.first()?;
    Some(Proc {
        pid,
        ppid: fields.get(1)?.parse().ok()?,
        pgid: fields.get(2)?.parse().ok()?,
        start: fields.get(19)?.parse().ok()?,
        zombie: state == "Z" || state == "X",
    })
}

/// The live processes of the trees rooted at `roots` and of group `pgid` (None: no group):
/// members of the group, and every descendant of a root or a member, through any number of
/// `setsid`s. The caller vouches that the roots and the group are still its own (a pid is
/// reused only once its process is reaped; a group's id only once no member is left).
pub fn tree_of(roots: &[libc::pid_t], pgid: Option<libc::pid_t>, procs: &[Proc]) -> Vec<Proc> {
    let mut children: HashMap<libc::pid_t, Vec<&Proc>> = HashMap::new();
    for p in procs {
        children.entry(p.ppid).or_default().push(p);
    }
    let mut found: HashSet<libc::pid_t> = HashSet::new();
    let mut todo: Vec<libc::pid_t> = roots.to_vec();
    todo.extend(procs.iter().filter(|p| Some(p.pgid) == pgid).map(|p| p.pid));
    while let Some(pid) = todo.pop() {
        if !found.insert(pid) {
            continue;
        }
        todo.extend(children.get(&pid).into_iter().flatten().map(|c| c.pid));
    }
    procs
        .iter()
        .filter(|p| found.contains(&p.pid) && !p.zombie)
        .copied()
        .collect()
}

/// The environment variable every server process inherits, holding this run's token: what
/// `throughline cleanup` checks before it signals a process a record names (a record in a
/// checkout could be a pull request's, listing processes that are not the run's).
pub const RUN_TOKEN_VAR: &str = "THROUGHLINE_RUN";

/// This process's run token: random, made once.
pub fn run_token() -> &'static str {
    static TOKEN: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TOKEN.get_or_init(|| format!("{:016x}", rand::random::<u64>()))
}

/// Whether `text` has the shape of a run token (16 hex digits, as [`run_token`] makes).
pub fn is_run_token(text: &str) -> bool {
    text.len() == 16 && text.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Whether process `pid`'s environment holds `RUN_TOKEN_VAR=token` (read from
/// /proc/PID/environ, at most 1 MiB; false where it cannot be read).
pub fn has_run_token(pid: libc::pid_t, token: &str) -> bool {
    use std::io::Read;
    let Ok(file) = std::fs::File::open(format!("/proc/{pid}/environ")) else {
        return false;
    };
    let mut bytes = Vec::new();
    if file.take(1 << 20).read_to_end(&mut bytes).is_err() {
        return false;
    }
    let want = format!("{RUN_TOKEN_VAR}={token}");
    bytes
        .split(|b| *b == 0)
        .any(|entry| entry == want.as_bytes())
}

/// The direct children throughline started on purpose (servers, builds): the rest of its
/// children in another process group are strays it adopted.
static STARTED: Mutex<Vec<libc::pid_t>> = Mutex::new(Vec::new());

/// Starts `cmd` (a child in a process group of its own) and notes it as started, in one step
/// under the list's lock: a stop looking for strays meanwhile finds the child either not yet
/// there or started, never as a stray to signal (a server started while another stopped was
/// once stopped with it, 14 ms old).
pub fn spawn_started(cmd: &mut std::process::Command) -> std::io::Result<std::process::Child> {
    let mut started = STARTED.lock().unwrap_or_else(|e| e.into_inner());
    let child = cmd.spawn()?;
    started.push(child.id() as libc::pid_t);
    Ok(child)
}

/// Forgets a started child once it is reaped.
pub fn forget_started(pid: libc::pid_t) {
    if let Ok(mut started) = STARTED.lock() {
        started.retain(|p| *p != pid);
    }
}

/// Processes adopted by throughline as a subreaper (a parent in a server's tree exited),
/// and their trees: children of this process in a process group not its own that it did
/// not start. Commands throughline runs itself (git) stay in its group and are never here.
pub fn strays(procs: &[Proc]) -> Vec<Proc> {
    // SAFETY: getpid and getpgrp only read the process's ids.
    let (me, my_group) = unsafe { (libc::getpid(), libc::getpgrp()) };
    let started = STARTED.lock().map(|s| s.clone()).unwrap_or_default();
    let mut out = Vec::new();
    for p in procs {
        if p.ppid == me && p.pgid != my_group && !started.contains(&p.pid) && !p.zombie {
            out.extend(tree_of(&[p.pid], Some(p.pgid), procs));
        }
    }
    out
}

/// Makes orphaned descendants this process's children rather than init's (Linux
/// PR_SET_CHILD_SUBREAPER), so that a server's daemonised helper can still be found and
/// stopped. Returns whether it took.
pub fn become_subreaper() -> bool {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: prctl with PR_SET_CHILD_SUBREAPER only sets a flag on this process.
        unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0 }
    }
    #[cfg(not(target_os = "linux"))]
    {
        false
    }
}

/// Sends `signal` to each process still the one listed (same pid and start time).
pub fn signal_each(procs: &[Proc], signal: libc::c_int) {
    for p in procs {
        if still_there(p) {
            // SAFETY: kill only sends a signal, to a process checked to be the one listed.
            unsafe {
                libc::kill(p.pid, signal);
            }
        }
    }
}

/// Whether the process listed still runs (not a zombie, not another process given its pid).
pub fn still_there(p: &Proc) -> bool {
    read_proc(p.pid).is_some_and(|now| now.start == p.start && !now.zombie)
}

/// Reaps this process's zombie children that a server left: those of `known` (looked up
/// again now, since a process listed while its parent lived is adopted by throughline, a
/// subreaper, when that parent exits: its ppid then is this process, not the one listed)
/// and any member of the server's group `pgid`. A subreaper must reap them, or every server
/// stopped leaves its processes as zombies until throughline exits (two a block were seen,
/// a run of many blocks collecting them). Children it started are left to their owners (a
/// `Child` reaped behind its back could no longer tell that it exited), and so are
/// children in another group it was not told of (a bisect build, waited for by its own).
pub fn reap(known: &[Proc], pgid: Option<libc::pid_t>) {
    // SAFETY: getpid only reads the process's id.
    let me = unsafe { libc::getpid() };
    let started = STARTED.lock().map(|s| s.clone()).unwrap_or_default();
    let ours = |z: &Proc| {
        Some(z.pgid) == pgid || known.iter().any(|k| k.pid == z.pid && k.start == z.start)
    };
    for z in table() {
        if !(z.zombie && z.ppid == me && !started.contains(&z.pid) && ours(&z)) {
            continue;
        }
        let mut status = 0;
        // SAFETY: waitpid with WNOHANG on one pid that is this process's child; it never
        // blocks, and a pid that is not a child gives ECHILD.
        unsafe {
            libc::waitpid(z.pid, &mut status, libc::WNOHANG);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(pid: i32, ppid: i32, pgid: i32) -> Proc {
        Proc {
            pid,
            ppid,
            pgid,
            start: 1,
            zombie: false,
        }
    }

    #[test]
    fn stat_fields_count_from_the_last_parenthesis() {
        let stat = "42 (a) b) (c) S 7 42 42 0 -1 4194304 1 0 0 0 0 0 0 0 20 0 1 0 987 0";
        let got = parse_stat(42, stat).unwrap();
        assert_eq!(
            (got.ppid, got.pgid, got.start, got.zombie),
            (7, 42, 987, false)
        );
        let zombie = "43 (x) Z 1 43 43 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0";
        assert!(parse_stat(43, zombie).unwrap().zombie);
        assert!(parse_stat(1, "garbage").is_none());
    }

    #[test]
    fn the_tree_follows_setsid_children_and_the_group() {
        // 10 is the server's sh (group 10); 11 a worker in the group; 12 a child of 11 that
        // called setsid (group 12); 13 its child; 20 an unrelated process; 14 a member of
        // group 10 whose parent is init.
        let procs = [
            p(10, 1, 10),
            p(11, 10, 10),
            p(12, 11, 12),
            p(13, 12, 12),
            p(20, 1, 20),
            p(14, 1, 10),
        ];
        let mut got: Vec<i32> = tree_of(&[10], Some(10), &procs)
            .iter()
            .map(|p| p.pid)
            .collect();
        got.sort_unstable();
        assert_eq!(got, vec![10, 11, 12, 13, 14]);
    }

    #[test]
    fn this_process_is_found_and_reads_back() {
        let me = std::process::id() as libc::pid_t;
        let found = read_proc(me).expect("own /proc entry");
        assert!(still_there(&found));
        assert!(table().iter().any(|p| p.pid == me));
    }
}
