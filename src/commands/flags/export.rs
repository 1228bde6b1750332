//! The export flags, generated from the registry (`EXPORTERS`): one `--<flag> FILE` per
//! format, so that a new format needs no line in any command, and every export a command
//! writes goes through the registry.

use std::path::PathBuf;

use anyhow::{bail, Result};

use crate::report::export::{write_exports, Exporter, EXPORTERS};

/// Exports for dashboards and CI, each written atomically: one `--<flag> FILE` per format in
/// report/export's registry, with its help, generated from it (a new format needs no line
/// here). `VERDICT` offers the formats made from a verdict too (`gate`); `bench` has none.
#[derive(Clone, Default)]
pub struct ExportArgs<const VERDICT: bool = false> {
    /// (format, file) in the registry's order.
    asked: Vec<(&'static dyn Exporter, PathBuf)>,
}

impl<const VERDICT: bool> std::fmt::Debug for ExportArgs<VERDICT> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let asked: Vec<(Option<&str>, &PathBuf)> =
            self.asked.iter().map(|(e, p)| (e.flag(), p)).collect();
        f.debug_struct("ExportArgs").field("asked", &asked).finish()
    }
}

impl<const VERDICT: bool> ExportArgs<VERDICT> {
    /// The formats offered, with their flags.
    fn offered() -> impl Iterator<Item = (&'static dyn Exporter, &'static str)> {
        (EXPORTERS.iter().copied())
            .filter(|e| VERDICT || !e.needs_verdict())
            .filter_map(|e| Some((e, e.flag()?)))
    }

    /// The files asked for, with their flags (`--export-bmf`, ...).
    pub fn files(&self) -> impl Iterator<Item = (String, &PathBuf)> {
        (self.asked.iter()).map(|(e, p)| (format!("--{}", e.flag().unwrap_or("?")), p))
    }

    /// The formats asked for, with their files, in the registry's order (for a publish list).
    pub fn asked(&self) -> Vec<(&'static dyn Exporter, PathBuf)> {
        self.asked.clone()
    }

    /// Refuses `-` (standard output) for an export where the command's own output is there:
    /// the two would mix and neither would parse.
    pub fn refuse_stdout(&self, why: &str) -> Result<()> {
        for (flag, path) in self.files() {
            if crate::fsutil::is_stdout(path) {
                bail!("{flag} cannot be `-` here: {why}; give a file name");
            }
        }
        Ok(())
    }

    /// Writes the exports asked for; a failure is an error (the job asked for the file).
    pub fn write(
        &self,
        run: &crate::record::RunResult,
        verdict: Option<&crate::gate::Verdict>,
    ) -> Result<()> {
        // On stderr: a file given as `-` (or another command's `--json -`) owns stdout.
        for p in write_exports(&self.asked, run, verdict)? {
            eprintln!("export: {}", p.display());
        }
        Ok(())
    }
}

impl<const VERDICT: bool> clap::FromArgMatches for ExportArgs<VERDICT> {
    fn from_arg_matches(matches: &clap::ArgMatches) -> Result<Self, clap::Error> {
        let mut args = Self::default();
        args.update_from_arg_matches(matches)?;
        Ok(args)
    }

    fn update_from_arg_matches(&mut self, matches: &clap::ArgMatches) -> Result<(), clap::Error> {
        for (exporter, flag) in Self::offered() {
            if let Some(path) = matches.get_one::<PathBuf>(flag) {
                self.asked.retain(|(e, _)| e.flag() != Some(flag));
                self.asked.push((exporter, path.clone()));
            }
        }
        Ok(())
    }
}

impl<const VERDICT: bool> clap::Args for ExportArgs<VERDICT> {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        Self::offered().fold(cmd, |cmd, (exporter, flag)| {
            cmd.arg(
                clap::Arg::new(flag)
                    .long(flag)
                    .value_name("FILE")
                    .value_parser(clap::value_parser!(PathBuf))
                    .action(clap::ArgAction::Set)
                    .help(exporter.help()),
            )
        })
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_args(cmd)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct OnBench {
        #[command(flatten)]
        export: ExportArgs,
    }

    #[derive(Debug, Parser)]
    struct OnGate {
        #[command(flatten)]
        export: ExportArgs<true>,
    }

    fn flags<const V: bool>(args: &ExportArgs<V>) -> Vec<(&'static str, String)> {
        (args.asked.iter())
            .map(|(e, p)| (e.flag().unwrap(), p.display().to_string()))
            .collect()
    }

    #[test]
    fn export_flags_come_from_the_registry() {
        let bench = OnBench::try_parse_from([
            "bench",
            "--export-github-benchmark-smaller",
            "s.json",
            "--export-bmf",
            "b.json",
        ])
        .unwrap();
        // In the registry's order, whatever the command line's.
        assert_eq!(
            flags(&bench.export),
            [
                ("export-bmf", "b.json".to_string()),
                ("export-github-benchmark-smaller", "s.json".to_string())
            ]
        );
        // JUnit needs a verdict: `gate` offers it, `bench` does not.
        assert!(OnBench::try_parse_from(["bench", "--junit", "j.xml"]).is_err());
        let gate = OnGate::try_parse_from(["gate", "--junit", "j.xml"]).unwrap();
        assert_eq!(flags(&gate.export), [("junit", "j.xml".to_string())]);
        assert!(flags(&OnGate::try_parse_from(["gate"]).unwrap().export).is_empty());
    }
}
