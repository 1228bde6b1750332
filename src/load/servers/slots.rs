//! Where a managed server runs: its slot (the GPUs it gets) and the command line, rendered
//! from the user's template.

use std::collections::BTreeSet;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

use anyhow::{bail, Context, Result};

/// At most this many slots: more GPUs than any node has, and a bound on what a typo costs.
pub const MAX_SLOTS: usize = 64;

/// One place a server runs: its index (0-based, `{slot}`) and its GPUs (`{gpus}`): one id
/// (`"0"`), or a tensor-parallel group (`"0,1"`), as `CUDA_VISIBLE_DEVICES` takes them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slot {
    pub index: usize,
    pub gpus: String,
}

/// Reads `--slots`: slots separated by `;`, each a comma-separated list of GPU ids.
/// `"0;1"` is two slots of one GPU each, `"0,1;2,3"` two tensor-parallel groups.
///
/// Refused: an empty slot or id (`"0;"`, `"0,,1"`), anything but digits, `,` and `;`
/// (blanks too: the text goes into a shell command), a GPU in two slots or twice in one
/// (two servers on one GPU would measure each other), more than [`MAX_SLOTS`] slots.
/// Ids are written back without leading zeros (`"00"` is `"0"`). Slots of different sizes
/// are allowed here; whether a comparison may use them is the caller's decision.
pub fn parse_slots(text: &str) -> Result<Vec<Slot>> {
    let text = text.trim();
    if text.is_empty() {
        bail!("--slots is empty: give GPU ids, `;` between slots, e.g. \"0;1\" or \"0,1;2,3\"");
    }
    if let Some(bad) = text
        .chars()
        .find(|c| !(c.is_ascii_digit() || *c == ',' || *c == ';'))
    {
        bail!(
            "--slots {text:?}: {bad:?} is not allowed; only GPU ids (digits), `,` inside a \
             slot and `;` between slots, e.g. \"0;1\" or \"0,1;2,3\""
        );
    }
    let groups: Vec<&str> = text.split(';').collect();
    if groups.len() > MAX_SLOTS {
        bail!(
            "--slots {text:?} names {} slots; at most {MAX_SLOTS}",
            groups.len()
        );
    }
    let mut seen = BTreeSet::new();
    let mut slots = Vec::with_capacity(groups.len());
    for (index, group) in groups.iter().enumerate() {
        if group.is_empty() {
            bail!("--slots {text:?}: slot {index} is empty (two `;` in a row, or one at an end)");
        }
        let mut ids = Vec::new();
        for id in group.split(',') {
            if id.is_empty() {
                bail!("--slots {text:?}: slot {index} ({group:?}) has an empty GPU id");
            }
            let n: u32 = id
                .parse()
                .with_context(|| format!("--slots {text:?}: GPU id {id:?} is too large"))?;
            if !seen.insert(n) {
                bail!(
                    "--slots {text:?}: GPU {n} is named twice; each GPU may be in one slot \
                     only (two servers on one GPU would measure each other)"
                );
            }
            ids.push(n.to_string());
        }
        slots.push(Slot {
            index,
            gpus: ids.join(","),
        });
    }
    Ok(slots)
}

/// The placeholders a server command template may use.
const PLACEHOLDERS: &str = "{port}, {slot}, {gpus}";

/// `template` with `{port}`, `{slot}` (the slot's index) and `{gpus}` (its GPU ids) filled
/// in; `{{` and `}}` are literal braces. The rules are `format!`'s, and as strict: an
/// unknown `{name}` (a typo, or a shell `${VAR}` written without doubling) or a lone brace
/// is an error naming it, so that it never reaches the shell as it is.
///
/// The template must say where to listen: `{port}`, or `$THROUGHLINE_PORT` (set in the
/// server's environment); a server on its default port would never be found healthy.
pub fn render(template: &str, port: u16, slot: &Slot) -> Result<String> {
    let mut out = String::with_capacity(template.len() + 16);
    let mut rest = template;
    while let Some(at) = rest.find(['{', '}']) {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        if let Some(after) = tail.strip_prefix("{{").or_else(|| tail.strip_prefix("}}")) {
            out.push_str(&tail[..1]);
            rest = after;
            continue;
        }
        if tail.starts_with('}') {
            bail!(
                "the server command {template:?} has a lone `}}` (at byte {}); write `}}}}` \
                 for a literal brace",
                template.len() - tail.len()
            );
        }
        let Some(close) = tail.find('}') else {
            bail!(
                "the server command {template:?} has a `{{` that is never closed; write `{{{{` \
                 for a literal brace"
            );
        };
        let name = &tail[1..close];
        match name {
            "port" => out.push_str(&port.to_string()),
            "slot" => out.push_str(&slot.index.to_string()),
            "gpus" => out.push_str(&slot.gpus),
            _ => bail!(
                "the server command {template:?} has an unknown placeholder {{{name}}}; the \
                 known ones are {PLACEHOLDERS}; write `{{{{` and `}}}}` for literal braces \
                 (a shell ${{VAR}} is $${{{{VAR}}}})"
            ),
        }
        rest = &tail[close + 1..];
    }
    out.push_str(rest);
    // Checked after the placeholders, so that a typo ({prot}) is named as such.
    if !template.contains("{port}") && !template.contains("THROUGHLINE_PORT") {
        bail!(
            "the server command {template:?} does not say where to listen: put {{port}} (or \
             $THROUGHLINE_PORT) where the server takes its port"
        );
    }
    Ok(out)
}

/// A port no one listens on now: bind 127.0.0.1:0, read the port the system chose, let it
/// go. Another process may take it before the server does; [`super::ManagedServer::start`]
/// then refuses it (the port is taken), it is never shared silently.
pub fn free_port() -> Result<u16> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .context("cannot bind 127.0.0.1:0 to find a free port")?;
    Ok(listener.local_addr()?.port())
}

/// Text in single quotes for the shell that runs a server command line (a path put in a
/// template: a checkout's folder, the demo's own binary).
pub fn shell_quoted(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// Whether something listens on (or holds) `port` on 127.0.0.1: binding it fails, or a
/// connection to it is accepted (a listener with SO_REUSEPORT lets a bind succeed).
pub(super) fn port_taken(port: u16) -> bool {
    if TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_err() {
        return true;
    }
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    TcpStream::connect_timeout(&addr, Duration::from_millis(300)).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(index: usize, gpus: &str) -> Slot {
        Slot {
            index,
            gpus: gpus.into(),
        }
    }

    #[test]
    fn slots_of_one_gpu_and_tensor_parallel_groups() {
        assert_eq!(
            parse_slots("0;1").unwrap(),
            vec![slot(0, "0"), slot(1, "1")]
        );
        assert_eq!(
            parse_slots("0,1;2,3").unwrap(),
            vec![slot(0, "0,1"), slot(1, "2,3")]
        );
        assert_eq!(parse_slots(" 7 ").unwrap(), vec![slot(0, "7")]);
        assert_eq!(
            parse_slots("00;01").unwrap(),
            vec![slot(0, "0"), slot(1, "1")]
        );
    }

    #[test]
    fn bad_slots_are_refused_saying_why() {
        for (text, says) in [
            ("", "empty"),
            ("0;", "slot 1 is empty"),
            (";0", "slot 0 is empty"),
            ("0;;1", "slot 1 is empty"),
            ("0,;1", "empty GPU id"),
            ("0,,1", "empty GPU id"),
            ("0; 1", "' '"),
            ("0;1;$(rm)", "'$'"),
            ("a", "'a'"),
            ("0;-1", "'-'"),
            ("0;0", "GPU 0 is named twice"),
            ("0,1;1,2", "GPU 1 is named twice"),
            ("0,0", "GPU 0 is named twice"),
            ("0;00", "GPU 0 is named twice"),
            ("99999999999", "too large"),
        ] {
            let e = parse_slots(text).unwrap_err().to_string();
            assert!(e.contains(says), "{text:?}: {e}");
        }
        let many: Vec<String> = (0..65).map(|i| i.to_string()).collect();
        let e = parse_slots(&many.join(";")).unwrap_err().to_string();
        assert!(e.contains("65 slots; at most 64"), "{e}");
        let most: Vec<String> = (0..64).map(|i| i.to_string()).collect();
        assert_eq!(parse_slots(&most.join(";")).unwrap().len(), 64);
    }

    #[test]
    fn render_fills_the_placeholders() {
        let s = slot(1, "2,3");
        assert_eq!(
            render(
                "CUDA_VISIBLE_DEVICES={gpus} vllm serve m --port {port} # slot {slot}",
                8001,
                &s
            )
            .unwrap(),
            "CUDA_VISIBLE_DEVICES=2,3 vllm serve m --port 8001 # slot 1"
        );
        assert_eq!(
            render("awk '{{print $1}}' --port={port}{port}", 9, &s).unwrap(),
            "awk '{print $1}' --port=99"
        );
        assert_eq!(
            render("srv --port \"$THROUGHLINE_PORT\" ${{HOME}}", 9, &s).unwrap(),
            "srv --port \"$THROUGHLINE_PORT\" ${HOME}"
        );
    }

    #[test]
    fn render_refuses_unknown_placeholders_and_lone_braces() {
        let s = slot(0, "0");
        let e = render("srv --port {prot}", 1, &s).unwrap_err().to_string();
        assert!(e.contains("unknown placeholder {prot}"), "{e}");
        assert!(e.contains("{port}, {slot}, {gpus}"), "{e}");
        let e = render("srv --port {port} ${HOME}", 1, &s)
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown placeholder {HOME}"), "{e}");
        assert!(e.contains("$${{VAR}}"), "{e}");
        let e = render("srv --port {port} }", 1, &s)
            .unwrap_err()
            .to_string();
        assert!(e.contains("lone `}`"), "{e}");
        let e = render("srv --port {port", 1, &s).unwrap_err().to_string();
        assert!(e.contains("never closed"), "{e}");
        let e = render("srv --port 8000", 1, &s).unwrap_err().to_string();
        assert!(e.contains("does not say where to listen"), "{e}");
    }

    #[test]
    fn a_free_port_is_free() {
        let port = free_port().unwrap();
        assert_ne!(port, 0);
        TcpListener::bind((Ipv4Addr::LOCALHOST, port)).unwrap();
    }
}
