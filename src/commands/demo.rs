//! `throughline demo`: the embedded default. Starts two simulated servers in-process (two
//! replicas each): the "base" as shipped and a "head" made 10% slower, as a pull request that
//! regressed would be. Runs the shipped demo profile against both in one job (relative mode,
//! trials interleaved), prints the table, writes the files, gates head against base, draws
//! the charts and plans the seeds' job from the head's curve. Last, an unchanged pull request
//! measured in blocks: throughline starts both servers itself, swaps their slots, and passes.

use std::net::{IpAddr, Ipv4Addr};
use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;

use super::flags::EnvironmentArgs;
use crate::exit::Exit;
use crate::gate::baseline::Baseline;
use crate::gate::evaluate;
use crate::load::BenchSetup;
use crate::plan::query::{answer, PlanQuery};
use crate::plan::TokenBudget;
use crate::profile::Profile;
use crate::record::files::{LATENCY_PNG, PER_REQUEST_PNG, THROUGHPUT_PNG, VERDICT_MD};
use crate::report::plan::{render_brief, render_json, render_table, write_plan_files};
use crate::report::run::{write_verdict_markdown, VerdictCharts};
use crate::report::verdict;
use crate::runner::{BlocksSetup, RunSetup};
use crate::sim::{SimCluster, SimConfig};

/// The examples `demo --help` ends with.
pub const EXAMPLES: &str = "\
Examples:
  # Two simulated servers, one 10% slower: bench, gate, charts and a plan; then an
  # unchanged change in blocks with the slots swapped (about 80 s)
  throughline demo
  # Keep its files somewhere else
  throughline demo -o /tmp/throughline-demo";

/// The demo profile and baseline, embedded so the demo runs from any folder.
pub const DEMO_PROFILE: &str = include_str!("../../baselines/demo.profile.toml");
pub const DEMO_BASELINE: &str = include_str!("../../baselines/demo.toml");

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Folder for the demo's files.
    #[arg(long, short = 'o', default_value = "throughline-results/demo")]
    pub out: PathBuf,
    /// Print everything: each level's server note, the whole verdicts (as verdict.md has
    /// them), the plan's table and notes, every block's trials. Without it the demo fits
    /// one screen and the details are in its files.
    #[arg(long, short = 'v')]
    pub verbose: bool,
}

/// The simulator the demo measures: the `fast` preset with ~5 ms decode steps at batch 1,
/// slow enough that timer jitter on a busy machine stays well under the gate's 3%.
pub fn demo_sim_config() -> SimConfig {
    let mut config = SimConfig::preset("fast").expect("the fast preset exists");
    config.lambda = 200.0;
    config
}

/// How much slower the demo's head server is than its base: the regression the gate catches.
pub const DEMO_HEAD_SLOWDOWN: f64 = 1.10;

pub async fn run(args: DemoArgs) -> Result<Exit> {
    let localhost = IpAddr::V4(Ipv4Addr::LOCALHOST);
    let base = SimCluster::start(&demo_sim_config(), localhost, 0, 2)
        .await
        .context("cannot start the built-in simulator")?;
    let mut slowed = demo_sim_config();
    slowed.slowdown = DEMO_HEAD_SLOWDOWN;
    let head = match SimCluster::start(&slowed, localhost, 0, 2).await {
        Ok(h) => h,
        Err(e) => {
            base.shutdown().await;
            return Err(e).context("cannot start the built-in simulator");
        }
    };
    println!(
        "demo: base simulator (preset fast, 2 replicas) on {}",
        base.base_urls().join(", ")
    );
    println!(
        "demo: head simulator, {:.0}% slower (a change that regressed), on {}",
        (DEMO_HEAD_SLOWDOWN - 1.0) * 100.0,
        head.base_urls().join(", ")
    );
    let outcome = run_against(
        &head.base_urls(),
        &base.base_urls(),
        &args.out,
        args.verbose,
    )
    .await;
    head.shutdown().await;
    base.shutdown().await;
    outcome
}

async fn run_against(head: &[String], base: &[String], out: &Path, verbose: bool) -> Result<Exit> {
    let mut profile = Profile::parse(DEMO_PROFILE).context("the embedded demo profile")?;
    profile.target.endpoints = head.to_vec();
    let environment = EnvironmentArgs::default().to_environment();
    let bench = BenchSetup {
        show_progress: std::io::IsTerminal::is_terminal(&std::io::stderr()),
        base_endpoints: base.to_vec(),
        ..BenchSetup::new(profile, environment, out.to_path_buf())
    };
    let setup = RunSetup {
        server_notes: verbose,
        ..RunSetup::new(bench, None)
    };
    let outcome = crate::runner::run(setup, None).await?;
    let exit = crate::runner::conclude(&outcome, out);
    println!("{}", crate::report::console::closing_line(&outcome.result));
    if exit != Exit::Pass {
        return Ok(exit);
    }
    let baseline = Baseline::parse(DEMO_BASELINE, "baselines/demo.toml (embedded)")?;
    println!(
        "\ndemo: gating head against base, measured in the same job (relative mode; \
         baselines/demo.toml vouches for the profile and gives the settings)"
    );
    let beside = outcome
        .result
        .base
        .as_ref()
        .map(|b| crate::record::trials_by_level(&b.levels));
    crate::runner::write_plots(&outcome.result, beside.as_deref(), out);
    match evaluate(&baseline, &outcome.result, &baseline.gate) {
        Ok(v) => {
            print!("{}", shown(&v, verbose));
            // verdict.md links the charts just drawn; ratio.png and pr-comment.md go beside it.
            let pngs = [THROUGHPUT_PNG, PER_REQUEST_PNG, LATENCY_PNG].map(|p| out.join(p));
            let charts = VerdictCharts::of(&pngs, None);
            write_verdict_markdown(&v, &out.join(VERDICT_MD), &charts)?;
            println!(
                "\ndemo: the verdict is shown for illustration (the head is slowed on purpose); the \
                 demo's own exit code is 0 when it measured. In CI, `throughline gate` and \
                 `throughline ci` exit 1 on a regression."
            );
        }
        Err(e) => println!("demo: gate not run: {e:#}"),
    }

    // The seeds' question, asked of this (simulated) node: how long would 902,087
    // completions of ~1,818 output tokens take?
    println!("\ndemo: how many days for the seeds' job (902,087 completions x 1,818 tokens) at this node's measured curve?");
    let question = PlanQuery {
        results: Some(out.join(crate::record::files::RESULTS_FILE)),
        deadline: Some(Duration::from_secs(2 * 86_400)),
        // The simulated node: two replicas, counted as one "GPU" each.
        replicas_per_node: NonZeroU32::new(2),
        gpus_per_node: NonZeroU32::new(2),
        ..PlanQuery::new(TokenBudget::PerCompletion {
            completions: 902_087.0,
            avg_output_tokens: Some(1818.0),
        })
    };
    // plan.json and capacity.png beside the run's files: the demo is a full set.
    let planned = answer(&question).and_then(|plan| {
        let text = match verbose {
            true => render_table(&plan),
            false => render_brief(&plan),
        };
        print!("{}", crate::untrusted::for_terminal_lines(&text));
        write_plan_files(&plan, &render_json(&plan), out)
    });
    if let Err(e) = planned {
        println!("demo: plan not run: {e:#}");
    }
    if let Err(e) = unchanged_in_blocks(&out.join(BLOCKS_DIR), verbose).await {
        println!("demo: the run in blocks did not finish: {e:#}");
    }
    println!("\ndemo: files in {}", out.display());
    Ok(Exit::Pass)
}

/// Where the demo's run in blocks goes, inside its folder.
pub const BLOCKS_DIR: &str = "unchanged-in-blocks";

/// The second question a team asks: an unchanged pull request, on a runner whose slot 1 is 4%
/// faster than slot 0 (as GPU 1 might be). throughline starts both servers itself (this
/// binary's `serve-sim`, a process each), in 4 blocks with their slots swapped, and the gate
/// names the slot effect, which cancels, and passes.
async fn unchanged_in_blocks(out: &Path, verbose: bool) -> Result<()> {
    let exe = std::env::current_exe().context("cannot find this program to start serve-sim")?;
    let quoted = crate::load::servers::shell_quoted(&exe.display().to_string());
    let server = format!(
        "exec {quoted} serve-sim --port {{port}} --preset fast --token-delay-ms 3 \
         --slowdown $(test {{slot}} = 1 && echo 0.96 || echo 1)"
    );
    let mut profile = Profile::parse(DEMO_PROFILE).context("the embedded demo profile")?;
    profile.sweep.concurrency = vec![1, 8];
    profile.sweep.trials = 3;
    profile.gate.min_trials = 3;
    println!(
        "\ndemo: an unchanged pull request in blocks: the same simulator as head and base, on a \
         runner whose slot 1 is 4% faster; throughline starts both servers in each block and \
         swaps their slots"
    );
    crate::fsutil::ensure_output_dir(out)?;
    let environment = EnvironmentArgs::default().to_environment();
    let bench = BenchSetup::new(profile.clone(), environment, out.to_path_buf());
    let timeout = std::time::Duration::from_secs(30);
    let blocks = BlocksSetup::new(
        &server,
        Some(&server),
        &["0;1".into()],
        (Some(4), Some(4)),
        timeout,
    )?
    .printing_table(verbose)
    // Simulators on no GPU: the slots only play GPUs, so no machine-wide GPU lock.
    .locking_gpus(false);
    let outcome = crate::runner::run(RunSetup::new(bench, Some(blocks)), None).await?;
    let stopped = crate::load::run::interrupt::Interrupt::installed()
        .and_then(|i| i.error("the demo's servers are stopped"));
    if let (Some(e), Some(_)) = (stopped, outcome.interrupted) {
        return Err(e);
    }
    let v = crate::gate::evaluate_relative(&outcome.result, &profile.gate)?;
    print!("{}", shown(&v, verbose));
    Ok(())
}

/// A verdict as the demo shows it: whole with --verbose, else in a few lines (verdict.md
/// has it whole).
fn shown(v: &crate::gate::Verdict, verbose: bool) -> String {
    match verbose {
        true => verdict::console(v),
        false => verdict::console_brief(v),
    }
}
