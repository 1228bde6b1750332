//! Turning results into things people read: console tables, Markdown, JSON, JUnit,
//! GitHub Actions annotations, the pull-request comment, Mermaid charts and PNG plots.

pub mod bisect;
pub mod combined;
pub mod console;
pub mod explain;
pub mod export;
pub mod github;
pub mod links;
pub mod markdown;
pub mod mermaid;
pub mod plan;
pub mod plots;
pub mod pr_comment;
pub mod run;
pub mod tables;
pub mod trend;
pub mod verdict;

/// A change in percent with its sign, one decimal: "+3.2%", "-9.1%"; "0.0%" where it rounds
/// to nothing (never "-0.0%"); "not finite" for a NaN or an infinity (a hand-edited file).
pub fn signed_percent(change_pct: f64) -> String {
    if !change_pct.is_finite() {
        return "not finite".to_string();
    }
    let shown = format!("{change_pct:+.1}");
    match shown.as_str() {
        "+0.0" | "-0.0" => "0.0%".to_string(),
        _ => format!("{shown}%"),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_change_that_rounds_to_nothing_has_no_sign() {
        use super::signed_percent as p;
        assert_eq!(p(-0.04), "0.0%");
        assert_eq!(p(0.04), "0.0%");
        assert_eq!(p(-9.06), "-9.1%");
        assert_eq!(p(3.2), "+3.2%");
        assert_eq!(p(f64::INFINITY), "not finite");
    }
}
