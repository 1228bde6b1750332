//! `throughline init`: write a commented profile to start from; with `--endpoint`, ask the
//! server first (its model from `/v1/models`, its engine from `/metrics`, its context length
//! where the engine says it) and write what it found into the profile.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;

use crate::exit::Exit;
use crate::fsutil::write_atomic;
use crate::load::discover::Discovery;
use crate::profile::{ModelChoice, Profile, QuickStart};

/// The examples `init --help` ends with (tests/it/help_examples.rs runs each).
pub const EXAMPLES: &str = "\
Examples:
  # A profile to edit, for a server at http://127.0.0.1:8000 (written to throughline.toml)
  throughline init
  # Ask the server first: its model, engine and context length go into the profile
  throughline init -e http://127.0.0.1:8000 -o throughline.toml --force";

/// The endpoint written when no server is given: vLLM's and SGLang's usual local port.
const PLACEHOLDER_ENDPOINT: &str = "http://127.0.0.1:8000";

#[derive(Debug, Args)]
pub struct InitArgs {
    /// The server's base URL, without /v1: asked for its model, engine and context length.
    /// Without it, a profile for http://127.0.0.1:8000 with model "auto" is written.
    #[arg(long, short = 'e', value_name = "URL")]
    pub endpoint: Option<String>,
    /// The profile file to write.
    #[arg(
        long,
        short = 'o',
        value_name = "FILE",
        default_value = "throughline.toml"
    )]
    pub output: PathBuf,
    /// Replace the file if it exists.
    #[arg(long, short = 'f')]
    pub force: bool,
    /// The model id [default: the first the server lists, else "auto"].
    #[arg(long, short = 'm')]
    pub model: Option<String>,
    /// The name of the environment variable holding the API key (an unset variable means no
    /// key).
    #[arg(long, value_name = "VAR")]
    pub api_key_env: Option<String>,
}

pub async fn run(args: InitArgs) -> Result<Exit> {
    if !args.force && std::fs::symlink_metadata(&args.output).is_ok() {
        bail!(
            "{} exists; not replaced (--force replaces it, or -o names another file)",
            args.output.display()
        );
    }
    let endpoint = args.endpoint.as_deref().unwrap_or(PLACEHOLDER_ENDPOINT);
    let mut quick = QuickStart::new(endpoint);
    quick.api_key_env = args.api_key_env.clone();
    if let Some(m) = &args.model {
        quick.model = ModelChoice::parse(m);
    }
    let profile = quick.profile().context("--endpoint")?;
    match &args.endpoint {
        None => quick.notes.push(format!(
            "Written by `throughline init` without a server: set target.endpoints (now \
             {PLACEHOLDER_ENDPOINT}) to yours."
        )),
        Some(url) => {
            let found = crate::load::discover::discover(&profile).await.with_context(|| {
                format!("cannot probe {url} (without --endpoint, init writes a profile without asking a server)")
            })?;
            let said = found_lines(url, &found);
            for line in &said {
                println!("{line}");
            }
            quick
                .notes
                .push(format!("Written by `throughline init --endpoint {url}`:"));
            quick.notes.extend(said.iter().map(|l| format!("  {l}")));
            if args.model.is_none() {
                if let Some(m) = found.models.first() {
                    quick.model = ModelChoice::Named(m.clone());
                }
            }
            if let Some((ctx, _)) = found.max_context {
                let need = u64::from(QuickStart::INPUT_TOKENS) + u64::from(quick.max_tokens);
                if need > ctx {
                    quick.max_tokens =
                        ctx.saturating_sub(u64::from(QuickStart::INPUT_TOKENS))
                            .clamp(1, u64::from(u32::MAX)) as u32;
                    let line = format!(
                        "max_tokens lowered to {} so that a prompt and its output fit the context",
                        quick.max_tokens
                    );
                    println!("{line}");
                    quick.notes.push(format!("  {line}"));
                }
            }
        }
    }
    let text = quick.toml();
    // What is written must read back as a valid profile.
    Profile::parse(&text).context("the profile init would write")?;
    write_atomic(&args.output, text.as_bytes())?;
    println!(
        "wrote {} (run it: throughline bench --profile {})",
        args.output.display(),
        args.output.display()
    );
    Ok(Exit::Pass)
}

/// What was found, one line each, for the console and the file's comments.
fn found_lines(url: &str, found: &Discovery) -> Vec<String> {
    let mut lines = Vec::new();
    // Model ids and the engine come from the server: one line each, nothing a log or the
    // profile's comments would act on (src/untrusted.rs).
    let ids: Vec<String> = (found.models.iter())
        .map(|m| crate::untrusted::for_terminal(m).into_owned())
        .collect();
    lines.push(match ids.as_slice() {
        [] => format!("model: none listed at {url}/v1/models (model = \"auto\" will fail; set it)"),
        [one] => format!("model: {one} (from /v1/models)"),
        [first, rest @ ..] => format!(
            "model: {first} (the first of {} at /v1/models; also {})",
            rest.len() + 1,
            rest.join(", ")
        ),
    });
    lines.push(match &found.engine {
        Some(e) => format!(
            "engine: {} (recognised from /metrics; engine = \"auto\" detects it at every run)",
            crate::untrusted::for_terminal(e)
        ),
        None => {
            "engine: not recognised (no known /metrics); set target.engine if the dialect matters"
                .to_string()
        }
    });
    lines.push(match found.max_context {
        Some((n, field)) => format!("max context: {n} tokens ({field})"),
        None => "max context: not reported by the server".to_string(),
    });
    lines
}
