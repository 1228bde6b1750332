//! Who answers on a started server's port (issue 47).
//!
//! A run in blocks picks a free port, lets it go, and tells the server to bind it; what
//! answers there is measured. A process that binds the port first is measured instead (seen:
//! exit 0, model "SQUATTER", the real server never served; and on purpose: the head's server
//! read the base's port from /proc/*/cmdline and served a slow base there, so that a
//! regression passed). So the listening socket on the port must be the server's own: every
//! LISTEN socket on the port (/proc/net/tcp and tcp6, state `0A`, whatever local address:
//! another listener on the port number is another process the server's bind competes with)
//! must be held (a `socket:[INODE]` link in /proc/PID/fd) by a process of the server's tree.
//!
//! The server's tree here is what descends from its `sh` by parentage, through any number of
//! `setsid`s: a worker that the server spawns to bind the port (vLLM's and SGLang's
//! processes, TGI's router) is one. Two kinds of process that [`super::tree`] stops with a
//! server are NOT counted as its own for this check, because either would let one server
//! vouch for a socket on the other's port: a member of its process group that does not
//! descend from the `sh` (any process of throughline's session may join the group with
//! `setpgid`), and an orphan that throughline adopted as a subreaper (it could come from
//! either server). A process whose /proc/PID/fd cannot be read (another user's: `sudo -u`, a
//! container runtime's proxy) cannot be shown to hold the socket and counts as not the
//! server's; the error says so.

use std::collections::HashSet;
use std::io::Read;
use std::net::{Ipv4Addr, Ipv6Addr};

use crate::process::tree::Proc;

/// The TCP state `/proc/net/tcp` writes for a listening socket.
const LISTEN: &str = "0A";
/// At most this many holders are named in an error.
const NAMED_HOLDERS: usize = 3;
/// At most this much of a holder's command line is shown.
const CMDLINE_CHARS: usize = 300;

/// One listening socket on the port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Listening {
    /// Its local address and port, as `127.0.0.1:8000` or `[::]:8000`.
    pub addr: String,
    pub inode: u64,
}

/// Why a port is not shown to be the server's: the text for an error, after "port N ".
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum NotOurs {
    /// Listening sockets on the port are held by processes outside the tree.
    Held(String),
    /// Nothing listens on the port in this network namespace, yet it answered.
    Nothing,
    /// /proc/net/tcp cannot be read.
    Unreadable(String),
}

impl NotOurs {
    /// The reason, for a sentence "port N {reason}".
    pub(super) fn reason(&self) -> String {
        match self {
            NotOurs::Held(who) => who.clone(),
            NotOurs::Nothing => "has no listening socket (in /proc/net/tcp or tcp6 of this \
                                 network namespace): who answers there cannot be told (a \
                                 server in another namespace, reached through address \
                                 translation, is not the process throughline started)"
                .to_string(),
            NotOurs::Unreadable(why) => format!(
                "cannot be checked: /proc/net/tcp cannot be read ({why}), so who answers \
                 there cannot be told"
            ),
        }
    }
}

/// Whether every socket listening on `port` is held by a process of `tree` (the live
/// processes descended from the server's `sh`, the `sh` included), and if not, who holds
/// them (pid and command line, escaped, redacted), for an error.
pub(super) fn owned_by(port: u16, tree: &[Proc]) -> Result<(), NotOurs> {
    let listening = listening_on(port).map_err(NotOurs::Unreadable)?;
    if listening.is_empty() {
        return Err(NotOurs::Nothing);
    }
    let mut ours: HashSet<u64> = HashSet::new();
    let mut unreadable_tree = Vec::new();
    for p in tree {
        match sockets_of(p.pid) {
            Ok(sockets) => ours.extend(sockets),
            Err(_) => unreadable_tree.push(p.pid),
        }
    }
    let foreign: Vec<&Listening> = listening
        .iter()
        .filter(|l| !ours.contains(&l.inode))
        .collect();
    if foreign.is_empty() {
        return Ok(());
    }
    Err(NotOurs::Held(holders(&foreign, tree, &unreadable_tree)))
}

/// Who holds the `foreign` sockets: every process this user can look into, outside `tree`.
fn holders(foreign: &[&Listening], tree: &[Proc], unreadable_tree: &[libc::pid_t]) -> String {
    let inodes: HashSet<u64> = foreign.iter().map(|l| l.inode).collect();
    let in_tree: HashSet<libc::pid_t> = tree.iter().map(|p| p.pid).collect();
    let mut named = Vec::new();
    let mut more = 0usize;
    let mut unreadable = 0usize;
    for pid in all_pids() {
        if in_tree.contains(&pid) {
            continue;
        }
        match sockets_of(pid) {
            Ok(sockets) if sockets.iter().any(|s| inodes.contains(s)) => {
                if named.len() < NAMED_HOLDERS {
                    named.push(format!("pid {pid} ({})", command_line(pid)));
                } else {
                    more += 1;
                }
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => unreadable += 1,
            Err(_) => {} // gone meanwhile
        }
    }
    let addrs: Vec<&str> = foreign.iter().map(|l| l.addr.as_str()).collect();
    let mut text = format!(
        "is answered by a process that is not in the process tree of the server's command: \
         the listening socket {} ",
        addrs.join(", ")
    );
    if named.is_empty() {
        text.push_str(&format!(
            "is held by no process this user can look into ({unreadable} processes of other \
             users, whose /proc/PID/fd cannot be read, are counted as not the server's)"
        ));
    } else {
        text.push_str(&format!("is held by {}", named.join(", ")));
        if more > 0 {
            text.push_str(&format!(" and {more} more"));
        }
    }
    if !unreadable_tree.is_empty() {
        let pids: Vec<String> = unreadable_tree.iter().map(|p| p.to_string()).collect();
        text.push_str(&format!(
            "; the server's own processes {} cannot be looked into (another user's? their \
             sockets cannot be shown to be the server's)",
            pids.join(", ")
        ));
    }
    text
}

/// The sockets listening on `port` in this network namespace (/proc/net/tcp and tcp6; a
/// missing tcp6, IPv6 being off, is no error). An error when neither can be read.
pub(super) fn listening_on(port: u16) -> Result<Vec<Listening>, String> {
    let mut found = Vec::new();
    let mut errors = Vec::new();
    for (path, v6) in [("/proc/net/tcp", false), ("/proc/net/tcp6", true)] {
        match std::fs::read_to_string(path) {
            Ok(text) => found.extend(parse_table(&text, port, v6)),
            Err(e) => errors.push(format!("{path}: {e}")),
        }
    }
    if errors.len() == 2 {
        return Err(errors.join("; "));
    }
    Ok(found)
}

/// The LISTEN sockets on `port` in the text of /proc/net/tcp (`v6` false) or tcp6: lines
/// `sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode ...`, the
/// address in hex as the kernel holds it (network order, read as native 32-bit words), the
/// port in hex. Lines that do not parse are skipped.
fn parse_table(text: &str, port: u16, v6: bool) -> Vec<Listening> {
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (local, state, inode) = (fields.get(1)?, fields.get(3)?, fields.get(9)?);
            if *state != LISTEN {
                return None;
            }
            let (addr, hex_port) = local.split_once(':')?;
            if u16::from_str_radix(hex_port, 16).ok()? != port {
                return None;
            }
            let inode: u64 = inode.parse().ok()?;
            let addr = if v6 {
                format!("[{}]:{port}", ipv6(addr)?)
            } else {
                format!("{}:{port}", ipv4(addr)?)
            };
            (inode != 0).then_some(Listening { addr, inode })
        })
        .collect()
}

/// An IPv4 address as /proc/net/tcp writes it (`0100007F` is 127.0.0.1 on a little-endian
/// machine).
fn ipv4(hex: &str) -> Option<Ipv4Addr> {
    if hex.len() != 8 {
        return None;
    }
    let word = u32::from_str_radix(hex, 16).ok()?;
    Some(Ipv4Addr::from(word.to_ne_bytes()))
}

/// An IPv6 address as /proc/net/tcp6 writes it: four such words.
fn ipv6(hex: &str) -> Option<Ipv6Addr> {
    if hex.len() != 32 || !hex.is_ascii() {
        return None;
    }
    let mut bytes = [0u8; 16];
    for i in 0..4 {
        let word = u32::from_str_radix(&hex[i * 8..i * 8 + 8], 16).ok()?;
        bytes[i * 4..i * 4 + 4].copy_from_slice(&word.to_ne_bytes());
    }
    Some(Ipv6Addr::from(bytes))
}

/// The socket inodes process `pid` holds: its /proc/PID/fd links `socket:[INODE]`. An error
/// where they cannot be read (another user's process: PermissionDenied; gone: NotFound).
fn sockets_of(pid: libc::pid_t) -> std::io::Result<HashSet<u64>> {
    let mut found = HashSet::new();
    for entry in std::fs::read_dir(format!("/proc/{pid}/fd"))? {
        let Ok(entry) = entry else { continue };
        let Ok(link) = std::fs::read_link(entry.path()) else {
            continue;
        };
        let inode = (link.to_str())
            .and_then(|l| l.strip_prefix("socket:["))
            .and_then(|l| l.strip_suffix(']'))
            .and_then(|n| n.parse::<u64>().ok());
        found.extend(inode);
    }
    Ok(found)
}

/// Every process id /proc lists.
fn all_pids() -> Vec<libc::pid_t> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect()
}

/// Process `pid`'s command line for a message: its arguments joined by spaces (at most
/// [`CMDLINE_CHARS`] characters), secrets masked and escaped for a terminal: it is the
/// text of a process throughline did not start. `[comm]` where it has none (a kernel
/// thread), `(unreadable)` where it cannot be read.
fn command_line(pid: libc::pid_t) -> String {
    let mut bytes = Vec::new();
    let read = std::fs::File::open(format!("/proc/{pid}/cmdline"))
        .and_then(|f| f.take(4 * CMDLINE_CHARS as u64).read_to_end(&mut bytes));
    if read.is_err() {
        return "(its command line cannot be read)".to_string();
    }
    let mut text = String::from_utf8_lossy(&bytes)
        .split('\0')
        .filter(|a| !a.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    if text.is_empty() {
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        text = format!("[{}]", comm.trim());
    }
    if text.chars().count() > CMDLINE_CHARS {
        text = text.chars().take(CMDLINE_CHARS).collect::<String>() + "...";
    }
    let text = crate::record::redact::redact(&text).into_owned();
    format!("`{}`", crate::untrusted::for_terminal(&text))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    const TCP: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 4242 1 0000000000000000 100 0 0 10 0
   1: 00000000:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 4343 1 0000000000000000 100 0 0 10 0
   2: 0100007F:1F90 0100007F:D2A4 01 00000000:00000000 00:00000000 00000000  1000        0 4444 1 0000000000000000 20 4 30 10 -1
   3: 0100007F:1F91 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 4545 1 0000000000000000 100 0 0 10 0
   4: garbage
";

    #[test]
    fn the_table_gives_the_listening_sockets_on_the_port() {
        if cfg!(target_endian = "big") {
            return; // the sample is a little-endian machine's
        }
        let got = parse_table(TCP, 8080, false);
        assert_eq!(
            got,
            vec![
                Listening {
                    addr: "127.0.0.1:8080".into(),
                    inode: 4242
                },
                Listening {
                    addr: "0.0.0.0:8080".into(),
                    inode: 4343
                },
            ]
        );
        assert!(parse_table(TCP, 8082, false).is_empty());
        let v6 = "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000001000000:1F90 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 77 1 0000000000000000 100 0 0 10 0
   1: 00000000000000000000000000000000:1F90 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 78 1 0000000000000000 100 0 0 10 0
";
        let got = parse_table(v6, 8080, true);
        let addrs: Vec<&str> = got.iter().map(|l| l.addr.as_str()).collect();
        assert_eq!(addrs, vec!["[::1]:8080", "[::]:8080"]);
    }

    /// A socket this process listens on is found in the live table and is held by this
    /// process: ours when the tree holds this process, and named (with its pid) when not.
    #[test]
    fn a_listener_of_this_process_is_found_and_named() {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let port = listener.local_addr().unwrap().port();
        let found = listening_on(port).unwrap();
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].addr, format!("127.0.0.1:{port}"));
        let me = crate::process::tree::read_proc(std::process::id() as libc::pid_t).unwrap();
        assert_eq!(owned_by(port, &[me]), Ok(()));
        let Err(NotOurs::Held(why)) = owned_by(port, &[]) else {
            panic!("not named");
        };
        assert!(why.contains(&format!("pid {}", me.pid)), "{why}");
        assert!(why.contains("not in the process tree"), "{why}");
        drop(listener);
        assert_eq!(owned_by(port, &[me]), Err(NotOurs::Nothing));
    }

    /// A holder's command line is a stranger's text: a newline and a runner command in it
    /// stay escaped on one line.
    #[test]
    fn a_command_line_is_escaped_for_the_terminal() {
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 5", "x\n::error::y\u{1b}[31m"])
            .spawn()
            .unwrap();
        let pid = child.id() as libc::pid_t;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let mut line = command_line(pid);
        while !line.contains("error") && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
            line = command_line(pid);
        }
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(line, "`sh -c sleep 5 x\\n::error::y\\u{1b}[31m`");
        assert_eq!(command_line(-5), "(its command line cannot be read)");
    }
}
