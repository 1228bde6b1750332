//! The names of every file throughline writes into an output folder, in one place: the
//! commands, the reports and the tests name files through these.

/// The run result (JSON): what `gate`, `plot`, `plan` and `baseline bless` read.
pub const RESULTS_FILE: &str = "results.json";
/// One line per request sent, in send order (JSONL).
pub const REQUESTS_FILE: &str = "requests.jsonl";
/// One row per trial (CSV), for spreadsheets.
pub const SUMMARY_FILE: &str = "summary.csv";
/// The Markdown report of a run (`plot`, `bench`, `ci`) or of several (`merge`).
pub const REPORT_MD: &str = "report.md";
/// The gate's verdict: JSON (what `merge` reads), Markdown and JUnit XML.
pub const VERDICT_JSON: &str = "verdict.json";
pub const VERDICT_MD: &str = "verdict.md";
pub const JUNIT_XML: &str = "junit.xml";
/// The pull-request comment body (Markdown): a hidden marker line ([`PR_COMMENT_MARKER`]),
/// the verdict, the per-level table and a Mermaid chart GitHub draws itself.
pub const PR_COMMENT_MD: &str = "pr-comment.md";
/// The first line of [`PR_COMMENT_MD`]: a workflow finds its earlier comment by it and
/// updates that one (one sticky comment per pull request).
pub const PR_COMMENT_MARKER: &str = "<!-- throughline-verdict -->";
/// The charts.
pub const THROUGHPUT_PNG: &str = "throughput.png";
pub const PER_REQUEST_PNG: &str = "per_request.png";
pub const LATENCY_PNG: &str = "latency.png";
pub const CAPACITY_PNG: &str = "capacity.png";
/// `trend`: main's history per level, its shifts (JSON, Markdown, chart).
pub const TREND_JSON: &str = "trend.json";
pub const TREND_MD: &str = "trend.md";
pub const TREND_PNG: &str = "trend.png";
/// The gate's candidate / baseline ratio per level.
pub const RATIO_PNG: &str = "ratio.png";
/// The capacity plan (JSON).
pub const PLAN_JSON: &str = "plan.json";

/// The subfolder of an output folder where a new run keeps the earlier run's files
/// (`runner::earlier`); never read as a run of its own (`gate::legs`).
pub const EARLIER_DIR: &str = "earlier";
/// The most of a verdict.json, verdict.md or pr-comment.md read back (kilobytes; a bound).
pub const VERDICT_FILE_BYTES: u64 = 64 * 1024 * 1024;

/// What a run's steps write from its journal (everything but the journal itself): a new run
/// removes these from its output folder before it starts its journal, so a run killed part
/// way never leaves a complete-looking result of the run before beside a new journal.
pub const DERIVED_FILES: [&str; 12] = [
    RESULTS_FILE,
    SUMMARY_FILE,
    REPORT_MD,
    VERDICT_JSON,
    VERDICT_MD,
    JUNIT_XML,
    PR_COMMENT_MD,
    THROUGHPUT_PNG,
    PER_REQUEST_PNG,
    LATENCY_PNG,
    CAPACITY_PNG,
    RATIO_PNG,
];
