//! The bisect log's checksums: each step line carries an HMAC-SHA256 chained over the steps
//! before it, keyed with a secret that lives outside the checkout and the output folder.
//!
//! Why keyed, and why there: a bisect continues from its log, and a step read back is not
//! measured again. The log lives in OUT, which is often inside the checkout of the pull
//! request being bisected, so a commit (or its build) could put a log there: a header that
//! names the search (commit ids, the profile's hash and the commands are all known to it)
//! and one step line saying "bad" made bisect name that commit without measuring anything.
//! A plain hash chain is no defence (whoever forges a line recomputes it); a chain keyed with
//! a secret the checkout cannot read is. The key is per user: `$THROUGHLINE_STATE_DIR`, else
//! `$XDG_STATE_HOME/throughline`, else `~/.local/state/throughline`, file `bisect-log.key`
//! (0600, made on first use), and it is not used when that folder is inside OUT or the
//! repository. A step whose checksum does not verify is not trusted: it is measured again,
//! and the run says so.
//!
//! What it does not stop: code running as the same user while the bisect runs (the build
//! and server commands of the commits being measured) can read the key, as it can read
//! anything else of that user's; run a bisect of untrusted commits under an account of its
//! own. A log written on another machine or account does not verify either: its steps are
//! measured again.

use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// The key's file name in the state folder.
const KEY_FILE: &str = "bisect-log.key";
/// What a key file holds: 32 bytes as hex, and a newline.
const KEY_HEX: usize = 64;

/// The secret a log's checksums are keyed with.
pub struct LogKey {
    key: [u8; 32],
}

impl LogKey {
    /// This user's key, made on first use; why not, when it cannot be had or trusted (no
    /// home folder, a folder inside `untrusted` (OUT, the repository), a key file others can
    /// read or that is a link).
    pub fn load(untrusted: &[&Path]) -> Result<LogKey, String> {
        LogKey::load_from(state_dir(), untrusted)
    }

    /// [`LogKey::load`] from the state folder `dir`.
    fn load_from(dir: Option<PathBuf>, untrusted: &[&Path]) -> Result<LogKey, String> {
        let dir = dir.ok_or("no home folder to keep it in (set THROUGHLINE_STATE_DIR)")?;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let real = dir
            .canonicalize()
            .map_err(|e| format!("cannot resolve {}: {e}", dir.display()))?;
        for place in untrusted {
            if place.canonicalize().is_ok_and(|p| real.starts_with(p)) {
                return Err(format!(
                    "its folder {} is inside {}, which the commits bisected could write",
                    dir.display(),
                    place.display()
                ));
            }
        }
        let path = dir.join(KEY_FILE);
        match read_key(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            other => return other.map_err(|e| e.to_string()),
        }
        let mut key = [0u8; 32];
        rand::RngCore::fill_bytes(&mut rand::rngs::OsRng, &mut key);
        let made = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&path)
            .and_then(|mut f| {
                writeln!(f, "{}", hex(&key))?;
                f.sync_all()
            });
        match made {
            Ok(()) => Ok(LogKey { key }),
            // Another bisect made it in between: its key is the one.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                read_key(&path).map_err(|e| e.to_string())
            }
            Err(e) => Err(format!("cannot write {}: {e}", path.display())),
        }
    }

    /// A key of `byte`s, for tests.
    #[cfg(test)]
    pub fn fixed(byte: u8) -> LogKey {
        LogKey { key: [byte; 32] }
    }

    /// The chain's start for a log of `header` (the header line as this run writes it):
    /// steps of another search never verify under it.
    pub fn seed(&self, header: &str) -> [u8; 32] {
        self.mac(&[b"throughline bisect log 1\n", header.as_bytes()])
    }

    /// The checksum of step line `step` (its JSON without the checksum) after `previous`.
    pub fn next(&self, previous: &[u8; 32], step: &str) -> [u8; 32] {
        self.mac(&[hex(previous).as_bytes(), b"\n", step.as_bytes()])
    }

    /// HMAC-SHA256 (RFC 2104) of the parts, one after another.
    fn mac(&self, parts: &[&[u8]]) -> [u8; 32] {
        let mut block = [0u8; 64];
        block[..32].copy_from_slice(&self.key);
        let mut inner = Sha256::new();
        inner.update(block.map(|b| b ^ 0x36));
        for p in parts {
            inner.update(p);
        }
        let mut outer = Sha256::new();
        outer.update(block.map(|b| b ^ 0x5c));
        outer.update(inner.finalize());
        outer.finalize().into()
    }
}

/// Where the key lives: `$THROUGHLINE_STATE_DIR`, `$XDG_STATE_HOME/throughline`, or
/// `~/.local/state/throughline`.
fn state_dir() -> Option<PathBuf> {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(dir) = var("THROUGHLINE_STATE_DIR") {
        return Some(PathBuf::from(dir));
    }
    if let Some(dir) = var("XDG_STATE_HOME") {
        return Some(PathBuf::from(dir).join("throughline"));
    }
    var("HOME").map(|h| PathBuf::from(h).join(".local/state/throughline"))
}

/// Reads the key file: this user's own regular file of one name, readable by no one else.
fn read_key(path: &Path) -> std::io::Result<LogKey> {
    let bad = |why: String| std::io::Error::other(format!("{}: {why}", path.display()));
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)?;
    let meta = file.metadata()?;
    // SAFETY: geteuid only reads the process's credentials.
    let me = unsafe { libc::geteuid() };
    if !meta.is_file() || meta.nlink() != 1 || meta.uid() != me || meta.mode() & 0o077 != 0 {
        return Err(bad(format!(
            "not this user's private file (mode {:o}, owner {}, {} link(s)); remove it and a \
             new key is made",
            meta.mode() & 0o7777,
            meta.uid(),
            meta.nlink()
        )));
    }
    let mut text = String::new();
    file.take(KEY_HEX as u64 + 2).read_to_string(&mut text)?;
    let key = unhex(text.trim()).ok_or_else(|| {
        bad(format!(
            "not {KEY_HEX} hex digits; remove it and a new key is made"
        ))
    })?;
    Ok(LogKey { key })
}

/// 32 bytes as 64 lowercase hex digits.
pub fn hex(bytes: &[u8; 32]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// 64 hex digits as 32 bytes.
pub fn unhex(text: &str) -> Option<[u8; 32]> {
    if text.len() != KEY_HEX || !text.is_ascii() {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// HMAC-SHA256 as RFC 4231 test case 2 gives it ("Jefe"), the key padded to 32 bytes
    /// (HMAC pads any key under 64 bytes with zeros: the same MAC).
    #[test]
    fn the_mac_is_hmac_sha256() {
        let mut key = [0u8; 32];
        key[..4].copy_from_slice(b"Jefe");
        let k = LogKey { key };
        assert_eq!(
            hex(&k.mac(&[b"what do ya want ", b"for nothing?"])),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        assert_eq!(unhex(&hex(&key)), Some(key));
        assert_eq!(unhex("zz"), None);
    }

    #[test]
    fn a_key_is_made_once_kept_private_and_refused_inside_the_checkout() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        let load = |untrusted: &[&Path]| LogKey::load_from(Some(state.clone()), untrusted);
        let a = load(&[]).unwrap();
        let b = load(&[]).unwrap();
        assert_eq!(a.key, b.key);
        let meta = std::fs::metadata(state.join(KEY_FILE)).unwrap();
        assert_eq!(meta.mode() & 0o777, 0o600);
        let e = load(&[dir.path()]).err().unwrap();
        assert!(e.contains("inside"), "{e}");
        // A key others can read is not trusted.
        std::fs::set_permissions(
            state.join(KEY_FILE),
            std::os::unix::fs::PermissionsExt::from_mode(0o644),
        )
        .unwrap();
        let e = load(&[]).err().unwrap();
        assert!(e.contains("private"), "{e}");
    }
}
