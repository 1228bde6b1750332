//! A model's own tokenizer (`tokenizer.json`, Hugging Face format, through the `tokenizers`
//! crate): exact token counts and prompts of exactly N tokens. The load generator uses it so
//! that `input_tokens` means tokens, not words; the simulator uses it to report
//! `usage.prompt_tokens` as a real server would.

pub mod hf_cache;

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};

/// Where the tokenizer named `value` is (in a profile, relative to its folder `dir`; on the
/// command line, to "."): that file or folder when it exists, else, for a model id such as
/// `Qwen/Qwen3-8B`, its snapshot in the local Hugging Face cache (hf_cache.rs). A path that
/// is neither is returned as it is, and loading it says it is missing.
pub fn resolve(dir: &Path, value: &Path) -> Result<PathBuf> {
    let local = dir.join(value);
    if local.exists() {
        return Ok(local);
    }
    let Some(id) = value.to_str().filter(|v| hf_cache::looks_like_repo_id(v)) else {
        return Ok(local);
    };
    let found = hf_cache::hub_cache_dir(|k| std::env::var(k).ok())
        .context("no Hugging Face cache folder (set HF_HUB_CACHE or HF_HOME)")
        .and_then(|cache| hf_cache::find(&cache, id));
    found.with_context(|| {
        format!(
            "tokenizer {id:?}: not a file or folder ({} does not exist), nor a model in the \
             local Hugging Face cache",
            local.display()
        )
    })
}

/// The largest tokenizer.json read (Llama 3's is 9 MB, Qwen's 7 MB; a bound, not a target).
pub const TOKENIZER_FILE_BYTES: u64 = 64 * 1024 * 1024;

/// How many times a prompt is re-cut before the closest length is taken.
const FIT_ROUNDS: usize = 12;

/// A loaded tokenizer.
pub struct ModelTokenizer {
    inner: tokenizers::Tokenizer,
    /// The file it came from, for messages.
    pub source: String,
}

impl std::fmt::Debug for ModelTokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ModelTokenizer({})", self.source)
    }
}

impl ModelTokenizer {
    /// Loads `tokenizer.json` (a file, or a folder holding one, such as a model snapshot in
    /// the Hugging Face cache).
    pub fn load(path: &Path) -> Result<ModelTokenizer> {
        let file = if path.is_dir() {
            path.join("tokenizer.json")
        } else {
            path.to_path_buf()
        };
        let text = crate::fsutil::read_bounded(&file, TOKENIZER_FILE_BYTES)
            .with_context(|| format!("cannot read tokenizer {}", file.display()))?;
        let inner = tokenizers::Tokenizer::from_bytes(text.as_bytes()).map_err(|e| {
            anyhow!(
                "{} is not a Hugging Face tokenizer.json: {e}",
                file.display()
            )
        })?;
        Ok(ModelTokenizer {
            inner,
            source: file.display().to_string(),
        })
    }

    /// The number of tokens of `text` (no special tokens added: what the text itself costs).
    pub fn count(&self, text: &str) -> usize {
        self.ids(text).len()
    }

    fn ids(&self, text: &str) -> Vec<u32> {
        self.inner
            .encode_fast(text, false)
            .map(|e| e.get_ids().to_vec())
            .unwrap_or_default()
    }

    fn decode(&self, ids: &[u32]) -> Option<String> {
        self.inner.decode(ids, false).ok()
    }

    /// A prompt of exactly `tokens` tokens made from the start of `source` (which must be at
    /// least that long): the first `tokens` ids are decoded, and the text is re-cut until it
    /// encodes to exactly `tokens` again (a cut can merge or split across its edge). Returns
    /// the text and its length, which is `tokens` unless no cut hit it (then the closest).
    pub fn fit(&self, source: &str, tokens: usize) -> Result<(String, usize)> {
        let ids = self.ids(source);
        if ids.len() < tokens {
            bail!(
                "the source text has {} tokens, fewer than the {tokens} asked for",
                ids.len()
            );
        }
        let mut take = tokens;
        let mut best: Option<(String, usize)> = None;
        for _ in 0..FIT_ROUNDS {
            let Some(text) = self.decode(&ids[..take]) else {
                break;
            };
            let got = self.count(&text);
            let closer = best
                .as_ref()
                .is_none_or(|(_, b)| got.abs_diff(tokens) < b.abs_diff(tokens));
            if closer {
                best = Some((text, got));
            }
            if got == tokens {
                break;
            }
            // Move the cut by the miss, at least one id, within the source.
            take = if got > tokens {
                take.saturating_sub((got - tokens).max(1)).max(1)
            } else {
                (take + (tokens - got).max(1)).min(ids.len())
            };
        }
        best.ok_or_else(|| anyhow!("the tokenizer could not decode its own ids"))
    }
}

/// A tokenizer shared by the tasks of a server, compared by the file it came from (so a
/// configuration that holds one stays comparable).
#[derive(Clone, Debug)]
pub struct SharedTokenizer(pub std::sync::Arc<ModelTokenizer>);

impl PartialEq for SharedTokenizer {
    fn eq(&self, other: &Self) -> bool {
        self.0.source == other.0.source
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture() -> ModelTokenizer {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/tokenizer/tokenizer.json");
        ModelTokenizer::load(&path).unwrap()
    }

    /// Values from the Python `tokenizers` package on the same file (fixtures/tokenizer/make.py):
    /// `Tokenizer.from_file(...).encode("Run 1234abcd request 7: the model server token
    /// batch memory")` gives 17 ids.
    #[test]
    fn counts_as_the_reference_implementation_does() {
        let t = fixture();
        assert_eq!(
            t.count("Run 1234abcd request 7: the model server token batch memory"),
            17
        );
        assert_eq!(t.count(""), 0);
    }

    #[test]
    fn fits_exact_lengths() {
        let t = fixture();
        let source = "Explain how a paged KV cache lets an inference server batch many \
                      requests of different lengths without fragmenting GPU memory, and \
                      what continuous batching adds on top of it. "
            .repeat(20);
        for n in [1, 2, 7, 64, 100, 333] {
            let (text, got) = t.fit(&source, n).unwrap();
            assert_eq!(got, n, "asked {n}, got {got}: {text:?}");
            assert_eq!(t.count(&text), n);
        }
        let err = format!("{:#}", t.fit("short", 50).unwrap_err());
        assert!(err.contains("fewer than the 50"), "{err}");
    }

    #[test]
    fn bad_files_are_clear_errors() {
        let dir = tempfile::tempdir().unwrap();
        let err = format!("{:#}", ModelTokenizer::load(dir.path()).unwrap_err());
        assert!(err.contains("tokenizer.json"), "{err}");
        let bad = dir.path().join("tokenizer.json");
        std::fs::write(&bad, "{\"model\": 3}").unwrap();
        let err = format!("{:#}", ModelTokenizer::load(&bad).unwrap_err());
        assert!(
            err.contains("is not a Hugging Face tokenizer.json"),
            "{err}"
        );
        // A folder holding a tokenizer.json is read through it.
        let good = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/tokenizer");
        assert!(ModelTokenizer::load(&good).is_ok());
    }
}
