//! `summary.csv`: one row per trial, written beside `results.json` by every run. The rows are
//! made in record/ (`RunResult::summary_csv`) because the load generator writes the file
//! while it runs, and it sits on a floor below report/; this entry keeps the format in the
//! one list of formats.

use anyhow::Result;

use super::Exporter;
use crate::gate::Verdict;
use crate::record::RunResult;

/// `summary.csv`, always written (no flag).
pub struct SummaryCsv;

impl Exporter for SummaryCsv {
    fn name(&self) -> &'static str {
        "per-trial CSV"
    }
    fn flag(&self) -> Option<&'static str> {
        None
    }
    fn help(&self) -> &'static str {
        "One row per trial, written as summary.csv beside results.json"
    }
    fn extension(&self) -> &'static str {
        "csv"
    }
    fn render(&self, run: &RunResult, _verdict: Option<&Verdict>) -> Result<Vec<u8>> {
        run.summary_csv()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::fake;

    #[test]
    fn renders_the_file_the_run_writes() {
        let dir = tempfile::tempdir().unwrap();
        let run = fake::run(&[(1, &[5.0, 6.0]), (4, &[20.0])]);
        let path = dir.path().join("summary.csv");
        run.save_csv(&path).unwrap();
        let bytes = SummaryCsv.render(&run, None).unwrap();
        assert_eq!(bytes, std::fs::read(&path).unwrap());
        let text = String::from_utf8(bytes).unwrap();
        assert!(text.starts_with("concurrency,rate,trial,"), "{text}");
        assert_eq!(
            text.lines().count(),
            4,
            "a header and one row per trial: {text}"
        );
    }
}
