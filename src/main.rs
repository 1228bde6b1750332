//! The `throughline` binary: parse the command line, run the command, map the outcome to an
//! exit code (0 pass, 1 regression, 2 could not do the job, 3 not comparable).

use clap::{CommandFactory, Parser};
use throughline::cli::{Cli, Command};
use throughline::commands;
use throughline::exit::{exit_for, Exit};

fn main() {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            std::process::exit(Exit::Failure.code());
        }
    };
    let outcome = runtime.block_on(async {
        match cli.command {
            Command::Bench(args) => commands::bench::run(args).await,
            Command::Init(args) => commands::init::run(args).await,
            Command::Completions(args) => {
                let mut command = Cli::command();
                clap_complete::generate(
                    args.shell,
                    &mut command,
                    "throughline",
                    &mut std::io::stdout(),
                );
                Ok(Exit::Pass)
            }
            Command::Demo(args) => commands::demo::run(args).await,
            Command::ServeSim(args) => throughline::sim::run_cli(args).await.map(|_| Exit::Pass),
            Command::Gate(args) => commands::gate::run(args).await,
            Command::Baseline(args) => commands::baseline::run(args).await,
            Command::Plot(args) => commands::plot::run(args),
            Command::Plan(args) => commands::plan::run(args),
            Command::Trend(args) => commands::trend::run(args),
            Command::Selfbench(args) => commands::selfbench::run(args),
            Command::Ci(args) => commands::ci::run(args).await,
            Command::Bisect(args) => commands::bisect::run(args).await,
            Command::Merge(args) => commands::merge::run(args),
            Command::Cleanup(args) => commands::cleanup::run(args).await,
        }
    });
    let exit = match outcome {
        Ok(exit) => exit,
        Err(error) => {
            // Secrets (the API key, URL credentials, a key line quoted by a TOML error) are
            // masked in whatever an error chain says (record/redact.rs).
            let said = throughline::record::redact::redact_error(&format!("{error:#}"));
            // Errors quote servers and files: nothing in them may act on a CI log
            // (src/untrusted.rs).
            eprintln!(
                "error: {}",
                throughline::untrusted::for_terminal_lines(&said)
            );
            exit_for(&error)
        }
    };
    std::process::exit(exit.code());
}
