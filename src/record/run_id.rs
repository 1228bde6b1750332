//! The run's id: a random name made once per process and written into every file the run
//! derives (results.json, verdict.json, verdict.md, pr-comment.md), so that `merge` and the
//! comment step can tell this run's files from files that were already in the folder (a
//! pull request can commit a `verdict.json` saying "pass"). It is not the servers' run token
//! (`load::servers::tree::run_token`): the servers see that one in their environment, and
//! nothing the run measures should be able to name the files it derives.

/// This process's run id: 16 hex digits, random, made once.
pub fn run_id() -> &'static str {
    static ID: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    ID.get_or_init(|| format!("{:016x}", rand::random::<u64>()))
}

/// Whether `text` has the shape of a run id (16 lower-case hex digits, as [`run_id`] makes).
pub fn is_run_id(text: &str) -> bool {
    text.len() == 16 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The hidden Markdown line that carries the id in verdict.md and pr-comment.md.
pub fn marker_line(id: &str) -> String {
    format!("<!-- throughline-run: {id} -->")
}

/// The id a Markdown file's marker line names, if it has exactly one well-formed one.
pub fn from_markdown(text: &str) -> Option<&str> {
    let mut ids = text.lines().filter_map(|line| {
        line.trim()
            .strip_prefix("<!-- throughline-run: ")?
            .strip_suffix(" -->")
    });
    let id = ids.next().filter(|id| is_run_id(id))?;
    ids.next().is_none().then_some(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_id_per_process_and_its_marker_reads_back() {
        assert_eq!(run_id(), run_id());
        assert!(is_run_id(run_id()));
        let text = format!("# verdict\n\n{}\n", marker_line(run_id()));
        assert_eq!(from_markdown(&text), Some(run_id()));
        // Two markers (one planted in a server's text, say) name no run.
        let two = format!("{text}{}\n", marker_line("0123456789abcdef"));
        assert_eq!(from_markdown(&two), None);
        assert_eq!(
            from_markdown("<!-- throughline-run: NOTHEX0000000000 -->"),
            None
        );
        assert!(!is_run_id("0123456789ABCDEF"));
    }
}
