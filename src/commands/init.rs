//! `throughline init`: write a commented profile to start from; with `--endpoint`, ask the
//! server first (its model from `/v1/models`, its engine from `/metrics`, its context length
//! where the engine says it) and write what it found into the profile.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;

use crate::exit::Exit;
use crate::fsutil::write_atomic;
use crate::load::discover::Discovery;
use crate::profile::{ModelChoice, Profile, QuickStart};
use crate::runner::budget::{BudgetAsk, Sized};

/// The examples `init --help` ends with (tests/it/help_examples.rs runs each).
pub const EXAMPLES: &str = "\
Examples:
  # A profile to edit, for a server at http://127.0.0.1:8000 (written to throughline.toml)
  throughline init
  # Ask the server first: its model, engine and context length go into the profile
  throughline init -e http://127.0.0.1:8000 -o throughline.toml --force
  # A gate profile sized to 30 minutes a pull request on 4 slot pairs (a pilot on the server)
  throughline init -e http://127.0.0.1:8000 --budget 30m --pairs 4 --server-start 2m \\
      -c 1,8,32,64 -o gate.toml";

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
    /// Size a gate profile to this time per pull request, e.g. 30m (the whole `ci` job,
    /// server starts included): timed trials, so the job's length is known before it
    /// starts, and the block plan that fits; says the smallest drop the plan catches. With
    /// --endpoint, a pilot (one wave per level) measures each level's request time first.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    pub budget: Option<Duration>,
    /// With --budget: the slot pairs the job runs blocks on at once (one `ci --slots` each).
    #[arg(long, value_name = "N", default_value_t = 1, requires = "budget")]
    pub pairs: u32,
    /// With --budget: how long one server takes to start and answer on the runner, e.g. 2m
    /// for a 27B model (a block starts two, one after the other); 0s for the simulator.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, requires = "budget")]
    pub server_start: Option<Duration>,
    /// Concurrency levels, comma-separated [default: 1,8,32].
    #[arg(long, short = 'c', value_delimiter = ',', value_name = "C,C,...")]
    pub concurrency: Vec<u32>,
    /// Output tokens asked of each request [default: 256].
    #[arg(long, value_name = "N")]
    pub max_tokens: Option<u32>,
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
    if !args.concurrency.is_empty() {
        quick.concurrency = args.concurrency.clone();
    }
    if let Some(n) = args.max_tokens {
        quick.max_tokens = n;
    }
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
    if let Some(budget) = args.budget {
        sized_to(budget, &args, &mut quick).await?;
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

/// Sizes `quick` to `budget` (timed trials, the block plan), measuring each level's request
/// time on the server when one was given; says the plan, the `ci` flags that keep to it and
/// the smallest drop it catches, on the console and in the profile's comments.
async fn sized_to(budget: Duration, args: &InitArgs, quick: &mut QuickStart) -> Result<()> {
    let Some(server_start) = args.server_start else {
        bail!(
            "--budget needs --server-start: how long one server takes to start and answer on \
             the runner (e.g. 2m for a 27B model; 0s for the simulator)"
        );
    };
    let profile = quick.profile().context("the profile to size")?;
    let (tails, source) = match &args.endpoint {
        Some(url) => {
            println!("pilot: one wave of C requests at each level C on {url} ...");
            let scratch = tempfile::tempdir().context("cannot make the pilot's folder")?;
            let tails = crate::runner::budget::pilot_tails(&profile, scratch.path()).await?;
            (tails, format!("measured by a pilot on {url}"))
        }
        None => {
            let guess = Duration::from_secs_f64(f64::from(quick.max_tokens) / GUESSED_TOK_S);
            let tails = vec![guess; quick.concurrency.len()];
            let said =
                format!("a guess ({GUESSED_TOK_S:.0} tok/s a stream; --endpoint measures it)");
            (tails, said)
        }
    };
    let ask = BudgetAsk {
        budget,
        pairs: args.pairs,
        server_start,
        tails,
        trials: quick.trials,
    };
    let sized = crate::runner::budget::size(&ask)?;
    quick.trial_window = Some((sized.window, sized.warmup));
    let said = budget_lines(&ask, &sized, &source)?;
    for line in &said {
        println!("{line}");
    }
    quick.notes.extend(said);
    Ok(())
}

/// The stream speed a request's time is guessed at without a pilot: the slower of the
/// console estimate's two.
const GUESSED_TOK_S: f64 = crate::report::console::ASSUMED_STREAM_TOK_PER_S[0];

/// The sized plan in words: trials, blocks, rounds, time, the flags for `ci`, and the
/// smallest drop it catches at two start spreads.
fn budget_lines(ask: &BudgetAsk, s: &Sized, source: &str) -> Result<Vec<String>> {
    let rough = |d: Duration| crate::report::console::rough(d);
    let tails: Vec<String> = (ask.tails.iter())
        .map(|t| format!("{:.0}s", t.as_secs_f64()))
        .collect();
    let settings = crate::profile::GateSettings::default();
    let levels = tails.len() as u32;
    // The looks the gate splits its alpha over, as the run will plan them.
    let looks =
        crate::gate::BlockPlan::on_pairs(Some(s.first), Some(s.max), ask.pairs as usize)?.looks();
    let drop = |blocks: u32, looks: u32, spread: f64| {
        crate::runner::budget::smallest_drop(&settings, blocks, looks, levels, spread)
            .map_or("no figure".into(), |d| format!("{:.1}%", d * 100.0))
    };
    let mut lines = vec![
        format!(
            "Sized by `throughline init --budget {}` for {} pair(s), servers starting in {}:",
            humantime::format_duration(ask.budget),
            ask.pairs,
            humantime::format_duration(ask.server_start)
        ),
        format!(
            "  trials of {}s measured after a {}s warmup, plus each level's request time ({}; {source})",
            s.window.as_secs(),
            s.warmup.as_secs(),
            tails.join(", ")
        ),
        format!(
            "  a block about {}; first look {} blocks in {} round(s), about {}; at most {} \
             blocks in {} rounds, about {}",
            rough(s.block),
            s.first,
            s.rounds_first,
            rough(s.first_look()),
            s.max,
            s.rounds_max,
            rough(s.whole())
        ),
        format!(
            "  ci flags: --blocks {} --max-blocks {} --max-duration {} and one --slots per pair",
            s.first,
            s.max,
            humantime::format_duration(ask.budget)
        ),
        format!(
            "  smallest drop at one level caught 4 times in 5 (the gate's formula, no \
             calibration): at the last look {} at a 1% start spread, {} at 3%; at the first \
             look {} and {}",
            drop(s.max, looks, 0.01),
            drop(s.max, looks, 0.03),
            drop(s.first, looks, 0.01),
            drop(s.first, looks, 0.03)
        ),
    ];
    if s.one_way_pairs {
        lines.push(format!(
            "  one round only: each pair runs one way round, so the drops above hold where the \
             pairs' slot effects are alike (one GPU model, one driver); pairs that differ leave \
             it \"cannot tell\". A budget for {} rounds runs every pair both ways round",
            s.rounds_first * 2
        ));
    }
    Ok(lines)
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
