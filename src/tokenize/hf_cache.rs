//! Finding a model's `tokenizer.json` in the local Hugging Face cache by its repository id
//! (`Qwen/Qwen3-8B`), as `transformers` and vLLM find it once the model was downloaded.
//! Nothing is downloaded: a model that is not in the cache is an error that says where it
//! was looked for.
//!
//! The cache layout (huggingface_hub): `<cache>/models--<org>--<name>/refs/main` holds the
//! commit of the main revision, and `snapshots/<commit>/tokenizer.json` the file (a link
//! into `blobs/`). The cache is `$HF_HUB_CACHE`, else `$HF_HOME/hub`, else
//! `$XDG_CACHE_HOME/huggingface/hub`, else `~/.cache/huggingface/hub`.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

/// The largest `refs/main` read (a 40-character commit hash).
const REF_FILE_BYTES: u64 = 1024;

/// Most snapshots listed when the main revision is not recorded.
const MAX_SNAPSHOTS: usize = 1000;

/// Whether `value` reads as a repository id, `org/name`, rather than a path: one slash, and
/// both parts made of letters, digits, `-`, `_` and `.` without a leading dot.
pub fn looks_like_repo_id(value: &str) -> bool {
    let part = |p: &str| {
        !p.is_empty()
            && !p.starts_with('.')
            && p.len() <= 96
            && (p.chars()).all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    };
    match value.split_once('/') {
        Some((org, name)) => part(org) && part(name),
        None => false,
    }
}

/// The hub cache folder, from the environment as huggingface_hub reads it.
pub fn hub_cache_dir(env: impl Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let set = |key: &str| env(key).filter(|v| !v.is_empty()).map(PathBuf::from);
    set("HF_HUB_CACHE")
        .or_else(|| set("HUGGINGFACE_HUB_CACHE"))
        .or_else(|| set("HF_HOME").map(|h| h.join("hub")))
        .or_else(|| set("XDG_CACHE_HOME").map(|c| c.join("huggingface/hub")))
        .or_else(|| set("HOME").map(|h| h.join(".cache/huggingface/hub")))
}

/// The snapshot folder of `repo_id`'s main revision that holds `tokenizer.json`.
pub fn find(cache: &Path, repo_id: &str) -> Result<PathBuf> {
    if !looks_like_repo_id(repo_id) {
        bail!("{repo_id:?} is not a model id of the form org/name");
    }
    let repo = cache.join(format!("models--{}", repo_id.replace('/', "--")));
    if !repo.is_dir() {
        bail!(
            "model {repo_id} is not in the Hugging Face cache ({} does not exist; download it \
             first, e.g. `huggingface-cli download {repo_id} tokenizer.json`, or name the \
             file)",
            repo.display()
        );
    }
    let snapshots = repo.join("snapshots");
    let main = repo.join("refs/main");
    if main.exists() {
        let text = crate::fsutil::read_bounded(&main, REF_FILE_BYTES)?;
        let commit = text.trim();
        if commit.is_empty() || !commit.chars().all(|c| c.is_ascii_hexdigit()) {
            bail!(
                "{} does not hold a commit hash (got {:?})",
                main.display(),
                commit.chars().take(64).collect::<String>()
            );
        }
        let snapshot = snapshots.join(commit);
        if !snapshot.join("tokenizer.json").is_file() {
            bail!(
                "model {repo_id}: the main revision's snapshot {} has no tokenizer.json \
                 (download it, or name the file)",
                snapshot.display()
            );
        }
        return Ok(snapshot);
    }
    // No recorded main revision (a cache filled by hand, or by revision only): one snapshot
    // with a tokenizer.json is unambiguous; several are not.
    let mut found = Vec::new();
    let entries = std::fs::read_dir(&snapshots)
        .with_context(|| format!("model {repo_id}: cannot list {}", snapshots.display()))?;
    for entry in entries.take(MAX_SNAPSHOTS).flatten() {
        let path = entry.path();
        if path.join("tokenizer.json").is_file() {
            found.push(path);
        }
    }
    found.sort();
    match found.len() {
        1 => Ok(found.remove(0)),
        0 => bail!(
            "model {repo_id}: no snapshot in {} holds a tokenizer.json",
            snapshots.display()
        ),
        n => bail!(
            "model {repo_id}: {n} snapshots hold a tokenizer.json and refs/main does not say \
             which is current; name one: {}",
            (found.iter())
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";

    /// A cache as huggingface_hub lays it out: the file a link into blobs/.
    fn cache_with(dir: &Path, repo: &str, commits: &[&str], main: Option<&str>) -> PathBuf {
        let root = dir.join(format!("models--{}", repo.replace('/', "--")));
        std::fs::create_dir_all(root.join("blobs")).unwrap();
        std::fs::write(root.join("blobs/abc"), "{}").unwrap();
        for c in commits {
            let snap = root.join("snapshots").join(c);
            std::fs::create_dir_all(&snap).unwrap();
            std::os::unix::fs::symlink("../../blobs/abc", snap.join("tokenizer.json")).unwrap();
        }
        if let Some(m) = main {
            std::fs::create_dir_all(root.join("refs")).unwrap();
            std::fs::write(root.join("refs/main"), m).unwrap();
        }
        root
    }

    #[test]
    fn repo_ids_are_told_from_paths() {
        for id in [
            "Qwen/Qwen3-8B",
            "meta-llama/Llama-3.1-8B-Instruct",
            "a_b/c.d",
        ] {
            assert!(looks_like_repo_id(id), "{id}");
        }
        for not in [
            "tokenizer.json",
            "./Qwen/x",
            "../up/x",
            "/abs/x",
            "a/b/c",
            "org/.hidden",
            "org/",
            "",
            "org/na me",
        ] {
            assert!(!looks_like_repo_id(not), "{not}");
        }
    }

    #[test]
    fn the_cache_folder_follows_huggingface_hub() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| (pairs.iter().find(|(key, _)| *key == k)).map(|(_, v)| v.to_string())
        };
        let dir = |pairs| hub_cache_dir(env(pairs)).unwrap();
        assert_eq!(
            dir(&[("HOME", "/h")]),
            Path::new("/h/.cache/huggingface/hub")
        );
        assert_eq!(
            dir(&[("HOME", "/h"), ("XDG_CACHE_HOME", "/x")]),
            Path::new("/x/huggingface/hub")
        );
        assert_eq!(
            dir(&[("HOME", "/h"), ("HF_HOME", "/hf")]),
            Path::new("/hf/hub")
        );
        assert_eq!(
            dir(&[("HF_HOME", "/hf"), ("HF_HUB_CACHE", "/c"), ("HF_HOME", "")]),
            Path::new("/c")
        );
        assert_eq!(hub_cache_dir(env(&[("HF_HOME", "")])), None);
    }

    #[test]
    fn the_main_revisions_snapshot_is_found() {
        let dir = tempfile::tempdir().unwrap();
        let other = "fedcba9876543210fedcba9876543210fedcba98";
        let root = cache_with(dir.path(), "acme/tiny", &[COMMIT, other], Some(COMMIT));
        let found = find(dir.path(), "acme/tiny").unwrap();
        assert_eq!(found, root.join("snapshots").join(COMMIT));
        assert_eq!(
            crate::fsutil::read_bounded(&found.join("tokenizer.json"), 10).unwrap(),
            "{}"
        );
    }

    #[test]
    fn without_refs_main_one_snapshot_is_taken_and_several_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let root = cache_with(dir.path(), "acme/one", &[COMMIT], None);
        assert_eq!(
            find(dir.path(), "acme/one").unwrap(),
            root.join("snapshots").join(COMMIT)
        );
        cache_with(dir.path(), "acme/two", &[COMMIT, "ff"], None);
        let e = format!("{:#}", find(dir.path(), "acme/two").unwrap_err());
        assert!(e.contains("2 snapshots") && e.contains("name one"), "{e}");
    }

    #[test]
    fn missing_models_and_bad_refs_say_what_and_where() {
        let dir = tempfile::tempdir().unwrap();
        let e = format!("{:#}", find(dir.path(), "acme/absent").unwrap_err());
        assert!(
            e.contains("not in the Hugging Face cache") && e.contains("models--acme--absent"),
            "{e}"
        );
        cache_with(dir.path(), "acme/escape", &[COMMIT], Some("../../../etc"));
        let e = format!("{:#}", find(dir.path(), "acme/escape").unwrap_err());
        assert!(e.contains("does not hold a commit hash"), "{e}");
        cache_with(dir.path(), "acme/gone", &[], Some(COMMIT));
        let e = format!("{:#}", find(dir.path(), "acme/gone").unwrap_err());
        assert!(e.contains("has no tokenizer.json"), "{e}");
        let e = format!("{:#}", find(dir.path(), "../x").unwrap_err());
        assert!(e.contains("org/name"), "{e}");
    }
}
