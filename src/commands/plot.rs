//! `throughline plot`: charts and the Markdown report of a saved run.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;

use crate::exit::Exit;
use crate::gate::baseline::Baseline;
use crate::record::RunResult;
use crate::report::run::write_run_files;

/// The examples `plot --help` ends with (tests/it/help_examples.rs runs each).
pub const EXAMPLES: &str = "\
Examples:
  # Charts and report.md of a run
  throughline plot -r throughline-results/results.json -o charts
  # The same with a baseline's trials drawn beside the run
  throughline plot -r throughline-results/results.json --baseline baselines/main.toml -o charts";

#[derive(Debug, Args)]
pub struct PlotArgs {
    /// The run's results.json.
    #[arg(long, short = 'r')]
    pub results: PathBuf,
    /// Baseline trials to draw beside the run: another run's results.json or summary.csv
    /// (any CSV with `concurrency` and `output_tok_per_s` columns, one row per trial).
    #[arg(long)]
    pub baseline_trials: Option<PathBuf>,
    /// A baseline file (TOML) whose trials to draw beside the run (instead of --baseline-trials).
    #[arg(long, value_name = "FILE", conflicts_with = "baseline_trials")]
    pub baseline: Option<PathBuf>,
    /// Folder for throughput.png, per_request.png, latency.png and report.md.
    #[arg(long, short = 'o')]
    pub out: PathBuf,
}

pub fn run(args: PlotArgs) -> Result<Exit> {
    let result = RunResult::load(&args.results)?;
    let (baseline, per_request) = match (&args.baseline_trials, &args.baseline) {
        (Some(path), _) => (
            Some(load_baseline_trials(path)?),
            load_baseline_per_request(path),
        ),
        (None, Some(path)) => {
            let b = Baseline::load(path)?;
            (Some(b.trials_by_level()), Some(b.per_request_by_level()))
        }
        // A relative run draws its base arm beside the head, as bench and the demo do.
        (None, None) => match &result.base {
            Some(base) => (Some(crate::record::trials_by_level(&base.levels)), None),
            None => (None, None),
        },
    };
    let written = write_run_files(
        &result,
        baseline.as_deref(),
        per_request.as_deref(),
        &args.out,
    )?;
    for path in &written {
        println!("{}", path.display());
    }
    Ok(Exit::Pass)
}

/// The per-request speeds of a baseline run given as results.json (a CSV holds none).
fn load_baseline_per_request(path: &Path) -> Option<Vec<(u32, Vec<f64>)>> {
    let text = std::fs::read_to_string(path).ok()?;
    if !text.trim_start().starts_with('{') {
        return None;
    }
    let run = RunResult::load(path).ok()?;
    Some(crate::record::per_request_by_level(&run.levels))
}

/// Reads (concurrency, trial tok/s) pairs from a results.json or a per-trial CSV.
pub fn load_baseline_trials(path: &Path) -> Result<Vec<(u32, Vec<f64>)>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read baseline trials {}", path.display()))?;
    if text.trim_start().starts_with('{') {
        return Ok(crate::record::trials_by_level(
            &RunResult::load(path)?.levels,
        ));
    }
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let headers = reader
        .headers()
        .with_context(|| {
            format!(
                "baseline trials {}: cannot read the CSV header",
                path.display()
            )
        })?
        .clone();
    let column = |name: &str| -> Result<usize> {
        match headers.iter().position(|h| h.trim() == name) {
            Some(i) => Ok(i),
            None => bail!(
                "baseline trials {}: no `{name}` column (expected a results.json, or a CSV \
                 with `concurrency` and `output_tok_per_s` columns such as summary.csv)",
                path.display()
            ),
        }
    };
    let (ci, ti) = (column("concurrency")?, column("output_tok_per_s")?);
    let mut by_level: BTreeMap<u32, Vec<f64>> = BTreeMap::new();
    for (i, row) in reader.records().enumerate() {
        let row =
            row.with_context(|| format!("baseline trials {}: row {}", path.display(), i + 2))?;
        let field = |j: usize| row.get(j).unwrap_or("").trim();
        let c: u32 = field(ci).parse().with_context(|| {
            format!(
                "baseline trials {}: row {}: concurrency {:?} is not a whole number",
                path.display(),
                i + 2,
                field(ci)
            )
        })?;
        let t: f64 = field(ti).parse().with_context(|| {
            format!(
                "baseline trials {}: row {}: output_tok_per_s {:?} is not a number",
                path.display(),
                i + 2,
                field(ti)
            )
        })?;
        by_level.entry(c).or_default().push(t);
    }
    Ok(by_level.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn baseline_trials_from_csv() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("summary.csv");
        std::fs::write(
            &path,
            "concurrency,trial,output_tok_per_s\n4,1,100.5\n1,1,30\n4,2,110\n",
        )
        .unwrap();
        let got = load_baseline_trials(&path).unwrap();
        assert_eq!(got, vec![(1, vec![30.0]), (4, vec![100.5, 110.0])]);
        std::fs::write(&path, "c,tps\n1,2\n").unwrap();
        let err = load_baseline_trials(&path).unwrap_err().to_string();
        assert!(err.contains("no `concurrency` column"), "{err}");
        std::fs::write(&path, "concurrency,output_tok_per_s\nx,2\n").unwrap();
        let err = format!("{:#}", load_baseline_trials(&path).unwrap_err());
        assert!(err.contains("row 2"), "{err}");
    }
}
