//! The plan as people and programs read it: a console table with details, JSON, and the
//! capacity chart (days on one node, days against node count, the deadline).

use crate::plan::answer::{NodePlan, Plan, RooflineReport};
use crate::plan::figures::SECONDS_PER_DAY;
use crate::plan::workload::human_duration;
use std::fmt::Write;

use super::plan_files::prices_said;
pub use super::plan_files::{
    capacity_series, capacity_title, plain_count, render_json, thousands, write_capacity_chart,
    write_plan_files,
};

/// Seconds as "2 s" or "50 ms".
fn seconds(t: f64) -> String {
    if t < 1.0 {
        format!("{:.0} ms", t * 1e3)
    } else {
        format!("{t} s")
    }
}

fn money(x: f64) -> String {
    if x >= 100.0 {
        format!("${}", thousands(x))
    } else {
        format!("${x:.2}")
    }
}

fn days_range(n: &NodePlan) -> String {
    if !n.interval.known {
        "unknown".to_string()
    } else if (n.days.p90 - n.days.p10).abs() < 1e-9 * n.days.p50 {
        format!("{:.2} (no spread)", n.days.p50)
    } else if n.interval.one_session {
        // One session's spread: the mark sends the reader to the legend's caveat.
        format!("{}*", n.days.range_text())
    } else {
        n.days.range_text()
    }
}

/// The console report: the job and its limits, the fit and the SLO, one table row per node
/// type with its legend, each node's details, then the comparison, the mix and the lists.
/// What both the short and the whole plan open with: the job, its limits, the fit, the SLOs
/// and the node table.
fn write_head(s: &mut String, plan: &Plan) {
    write_job(s, plan);
    write_limits(s, plan);
    write_fit(s, plan);
    write_slo(s, plan);
    write_node_table(s, plan);
}

/// The plan on one screen, `plan`'s default: the job, its limits, the fit, the node table,
/// the summary and the warnings; each node's details and the notes are in `plan -v` and
/// plan.json, and a line says how many there are.
pub fn render_short(plan: &Plan) -> String {
    let mut s = String::new();
    write_head(&mut s, plan);
    write_comparison(&mut s, plan);
    write_mix(&mut s, plan);
    write_list(&mut s, "summary:", "  ", &plan.summary);
    write_list(&mut s, "warnings:", "  ! ", &plan.warnings);
    let _ = writeln!(
        s,
        "\n{} node(s) in detail and {} note(s): plan -v (or plan.json)",
        plan.nodes.len(),
        plan.notes.len()
    );
    s
}

/// The whole plan (`plan -v`): [`render_short`]'s parts with each node's details and the notes.
pub fn render_table(plan: &Plan) -> String {
    let mut s = String::new();
    write_head(&mut s, plan);
    let _ = writeln!(s);
    for n in &plan.nodes {
        write_node_details(&mut s, n);
    }
    write_comparison(&mut s, plan);
    write_mix(&mut s, plan);
    write_lists(&mut s, plan);
    s
}

/// The plan in a few lines, for a screen that shows more than the plan (the demo): the job,
/// the summary and the warnings; the node table and notes are in plan.json and in what
/// `throughline plan` prints.
pub fn render_brief(plan: &Plan) -> String {
    let mut s = String::new();
    write_job(&mut s, plan);
    for line in &plan.summary {
        let _ = writeln!(s, "  {line}");
    }
    for w in &plan.warnings {
        let _ = writeln!(s, "  ! {w}");
    }
    if !plan.notes.is_empty() {
        let _ = writeln!(
            s,
            "  ({} note(s) and the node table: plan.json, or `throughline plan`)",
            plan.notes.len()
        );
    }
    s
}

/// The first line (the job: tokens, completions, lengths) and the length distributions.
fn write_job(s: &mut String, plan: &Plan) {
    let w = &plan.workload;
    let mut job = format!("{:.3e} output tokens", w.output_tokens);
    if let (Some(c), Some(a)) = (w.completions, w.avg_output_tokens) {
        job.push_str(&format!(
            " ({} completions x {} avg)",
            thousands(c),
            thousands(a)
        ));
    } else if let Some(a) = w.avg_output_tokens {
        job.push_str(&format!(" ({} avg per completion)", thousands(a)));
    }
    if let Some(i) = w.avg_input_tokens {
        job.push_str(&format!(", {} input tokens avg", thousands(i)));
    }
    let _ = writeln!(s, "throughline plan: {job}");
    for (what, d) in [("output", &w.output_length), ("input", &w.input_length)] {
        if let Some(d) = d {
            let (m, sd) = d.moments();
            let _ = writeln!(
                s,
                "  {what} lengths: {} (mean {}, sd {}){}",
                dist_name(d),
                thousands(m),
                thousands(sd),
                if what == "output" {
                    format!(
                        "; time-weighted context E[L^2]/2E[L] = {} tokens",
                        thousands(crate::plan::lengths::time_weighted_context(d))
                    )
                } else {
                    String::new()
                }
            );
        }
    }
}

/// What bounds the plan: the model, the deadline, the budget, concurrency and latency caps.
fn write_limits(s: &mut String, plan: &Plan) {
    let l = &plan.limits;
    let mut limits = Vec::new();
    if let Some(m) = &plan.model {
        limits.push(format!(
            "model {} ({}B params, {}B active, {} bytes/param)",
            m.name, m.params_b, m.active_params_b, m.bytes_per_param
        ));
    }
    if let Some(d) = l.deadline_s {
        limits.push(format!("deadline {}", human_duration(d)));
    }
    if let Some(b) = l.budget_usd {
        limits.push(format!("budget {}", money(b)));
    }
    if let Some(c) = l.max_concurrency {
        limits.push(format!("max concurrency {c}"));
    }
    if let Some(t) = l.max_latency_s {
        limits.push(format!("max latency {t:.0} s"));
    }
    if l.sustained_fraction < 1.0 {
        limits.push(format!("sustained {:.2}", l.sustained_fraction));
    }
    if !limits.is_empty() {
        let _ = writeln!(s, "  {}", limits.join("; "));
    }
}

/// The scaling fit the throughput comes from.
fn write_fit(s: &mut String, plan: &Plan) {
    if let Some(f) = &plan.fit {
        let peak = match (f.peak_concurrency, f.peak_throughput) {
            (Some(n), Some(x)) => format!("peak {x:.0} tok/s at concurrency {n:.1}"),
            _ => "no peak (kappa = 0)".to_string(),
        };
        let _ = writeln!(
            s,
            "  USL fit ({} points, {} levels, per replica): lambda {:.1} tok/s, sigma {:.4}, \
             kappa {:.2e}; {peak}; relative RMSE {:.1}%",
            f.points,
            f.levels,
            f.lambda,
            f.sigma,
            f.kappa,
            f.rmse_rel * 100.0
        );
    }
}

/// The SLO's cap on concurrency and the measured goodput.
fn write_slo(s: &mut String, plan: &Plan) {
    if let Some(r) = &plan.slo {
        let mut limits = Vec::new();
        if let Some(t) = r.slo.max_ttft_p99_s {
            limits.push(format!("TTFT p99 <= {}", seconds(t)));
        }
        if let Some(t) = r.slo.max_itl_p99_s {
            limits.push(format!("ITL p99 <= {}", seconds(t)));
        }
        let _ = writeln!(
            s,
            "  SLO {}: at most {:.1} concurrent per replica ({}; {}); planned at {}",
            limits.join(", "),
            r.cap.concurrency,
            r.cap
                .binding
                .as_deref()
                .map(|b| format!("{b} binds"))
                .unwrap_or_else(|| "none binds in the measured range".to_string()),
            r.cap.how,
            r.planned_concurrency_per_replica
        );
        match (&r.goodput, r.goodput_requests_per_s_per_node) {
            (Some(g), rps) => {
                let _ = writeln!(
                    s,
                    "  goodput: {}/{} requests of the measured level {} (the run's concurrency; \
                     at or above the planned load, so a lower bound) met every SLO, TTFT and \
                     per-request ITL (TPOT) ({:.1}%){}",
                    g.met,
                    g.requests,
                    g.level,
                    g.share * 100.0,
                    rps.map(|x| format!(", {x:.2} requests/s per node"))
                        .unwrap_or_default()
                );
            }
            (None, _) => {
                let _ = writeln!(
                    s,
                    "  goodput: unknown (no requests.jsonl beside the results file)"
                );
            }
        }
    }
}

/// One row per node type, and the legend of its columns.
fn write_node_table(s: &mut String, plan: &Plan) {
    let _ = writeln!(s);
    let deadline_head = "nodes";
    let header = format!(
        "{:<22} {:<8} {:>10} {:>11} {:>16} {:>10} {:>9} {:>10} {:>8} {:>9} {:>7}",
        "node",
        "basis",
        "tok/s/node",
        "P50 time",
        "days P10-P90",
        deadline_head,
        "GPU-h",
        "cost",
        "$/Mtok",
        "latency",
        "roof %"
    );
    // With --nodes N, the job on N nodes beside the one-node figures.
    let fleet_head = plan.limits.nodes.map(|n| format!("on {n} nodes"));
    let header = match &fleet_head {
        Some(head) => format!("{header}  {head:<32}"),
        None => header,
    };
    let _ = writeln!(s, "{header}");
    let _ = writeln!(s, "{}", "-".repeat(header.len()));
    for n in &plan.nodes {
        let fleet = match (&fleet_head, &n.on_nodes) {
            (Some(_), Some(f)) => format!("  {}", fleet_text(n, f)),
            (Some(_), None) => "  -".to_string(),
            _ => String::new(),
        };
        let nodes = match &n.deadline {
            Some(d) if !n.interval.known => format!("{} (?)", d.nodes_p50),
            Some(d) if d.nodes_p50 == d.nodes_p90 => d.nodes_p50.to_string(),
            Some(d) => format!("{} ({})", d.nodes_p50, d.nodes_p90),
            None => "-".to_string(),
        };
        let cost = match (n.cost_usd, n.within_budget) {
            (Some(c), Some(false)) => format!("{}!", money(c.p50)),
            (Some(c), _) => money(c.p50),
            (None, _) => "-".to_string(),
        };
        let _ = writeln!(
            s,
            "{:<22} {:<8} {:>10} {:>11} {:>16} {:>10} {:>9} {:>10} {:>8} {:>9} {:>7}",
            match n.batch1_only {
                true => format!("{} [b1]", n.node),
                false => n.node.clone(),
            },
            n.basis.name(),
            thousands(n.tok_s_per_node.p50),
            human_duration(n.days.p50 * SECONDS_PER_DAY),
            days_range(n),
            nodes,
            thousands(n.gpu_hours),
            cost,
            n.usd_per_million_tokens
                .map(|x| format!("${x:.2}"))
                .unwrap_or_else(|| "-".to_string()),
            n.latency_s
                .map(|x| format!("{x:.1} s"))
                .unwrap_or_else(|| "-".to_string()),
            n.roofline
                .as_ref()
                .and_then(|r| r.efficiency.map(|e| (e, r.batch_known)))
                .map(|(e, known)| format!("{}{:.0}%", if known { "" } else { ">=" }, e * 100.0))
                .unwrap_or_else(|| "-".to_string()),
        );
        if !fleet.is_empty() {
            // The row's line ends with the fleet's column (the writeln above left it open).
            s.pop();
            let _ = writeln!(s, "{fleet}");
        }
    }
    let _ = writeln!(s);
    if plan.nodes.iter().any(|n| n.batch1_only) {
        let _ = writeln!(
            s,
            "[b1]: {}: the row's figure is one request per replica, as measured (or scaled \
             from such a figure): its time is the node at batch 1, not what it does serving many \
             requests at once.",
            crate::plan::answer::BATCH1
        );
    }
    let _ = writeln!(
        s,
        "P50 time and days: one node, at the median throughput; P10-P90: the spread the data \
         supports (unknown: no measured spread; *: one session's trials, so a run on another \
         day, after a restart or on other clocks, may fall outside it).{fleet} nodes: to meet the deadline at P50 (and \
         at 90% confidence; ?: unknown), keeping the end-of-job tail free (one request's \
         duration, or from the length distribution). cost: P50, {prices}{over}. latency: per \
         request, Little's law (concurrency x avg output tokens / throughput per replica). roof \
         %: throughput per replica / memory-bandwidth roofline at that batch (>=: batch \
         unknown, bound at the most that fits in memory).",
        prices = prices_said(plan),
        over = if plan.limits.budget_usd.is_some() {
            "; ! = over budget"
        } else {
            ""
        },
        fleet = match plan.limits.nodes {
            Some(n) => format!(
                " on {n} nodes: the whole job at P50 (P10-P90), the work shared by the nodes, \
                 the end-of-job tail not; its cost in plan.json (on_nodes, by_node_count)."
            ),
            None => String::new(),
        }
    );
}

/// "6.1 hours (5.8 hours-6.4 hours)": the job on a fleet, P50 (P10-P90).
fn fleet_text(n: &NodePlan, f: &crate::plan::answer::FleetPlan) -> String {
    let t = f.job_s;
    match n.interval.known {
        true if human_duration(t.p10) == human_duration(t.p90) => human_duration(t.p50),
        true => format!(
            "{} ({}-{})",
            human_duration(t.p50),
            human_duration(t.p10),
            human_duration(t.p90)
        ),
        false => format!("{} (?)", human_duration(t.p50)),
    }
}

/// One node type's details: throughput and its interval, the job, source, cost, roofline.
fn write_node_details(s: &mut String, n: &NodePlan) {
    let _ = writeln!(
        s,
        "{}: {} x {}, {} replica(s){}",
        n.node,
        n.gpus_per_node,
        n.gpu.as_deref().unwrap_or("unknown GPU"),
        n.replicas_per_node,
        n.model
            .as_deref()
            .map(|m| format!(", {m}"))
            .unwrap_or_default()
    );
    let _ = writeln!(
        s,
        "  throughput: {} tok/s per node ({}), {}: {}",
        thousands(n.tok_s_per_node.p50),
        n.basis.name(),
        if n.interval.known {
            format!(
                "P10-P90 {}-{}",
                thousands(n.tok_s_per_node.p10),
                thousands(n.tok_s_per_node.p90)
            )
        } else {
            "P10-P90 unknown".to_string()
        },
        n.how
    );
    let _ = writeln!(
        s,
        "  interval: {}",
        if n.interval.known {
            n.interval.how.clone()
        } else {
            format!("unknown: {}", n.interval.how)
        }
    );
    if let (Some(j), Some(t)) = (n.job_s, n.end_tail_s) {
        let _ = writeln!(
            s,
            "  job on one node: {} (P10-P90 {}), of which {} is the end-of-job tail (the \
             longest requests left when the queue empties, from the length distribution)",
            human_duration(j.p50),
            if n.interval.known {
                format!("{}-{}", human_duration(j.p10), human_duration(j.p90))
            } else {
                "unknown".to_string()
            },
            human_duration(t)
        );
    }
    if let Some(d) = &n.deadline {
        if d.tail_s > 0.0 {
            let _ = writeln!(
                s,
                "  deadline: the last {} kept for the end-of-job tail ({})",
                human_duration(d.tail_s),
                if n.end_tail_s.is_some() {
                    "from the length distribution"
                } else {
                    "one request at the planned concurrency"
                }
            );
        }
    }
    if !n.source.is_empty() {
        let _ = writeln!(
            s,
            "  source: {}{}",
            n.source,
            n.date
                .as_deref()
                .map(|d| format!(" ({d})"))
                .unwrap_or_default()
        );
    }
    if let Some(c) = n.cost_usd {
        let _ = writeln!(
            s,
            "  cost: {} (P10-P90 {}) at {}/node-hour{}",
            money(c.p50),
            if n.interval.known {
                format!("{}-{}", money(c.p10), money(c.p90))
            } else {
                "unknown".to_string()
            },
            money(n.usd_per_node_hour.unwrap_or(0.0)),
            n.price_note
                .as_deref()
                .map(|p| format!(", {p}"))
                .unwrap_or_default()
        );
    }
    if let Some(r) = &n.roofline {
        write_roofline(s, r);
    }
    for note in &n.notes {
        let _ = writeln!(s, "  note: {note}");
    }
}

/// The memory-bandwidth bound on a node's throughput and the checks against it.
fn write_roofline(s: &mut String, r: &RooflineReport) {
    let _ = writeln!(
        s,
        "  roofline: batch-1 bound {:.1} tok/s per replica = {:.2} TB/s (datasheet peak) / ({:.1} GB \
         weights + {:.1} MB KV and state per sequence at {:.0} tokens of context){}",
        r.batch1_bound,
        r.bandwidth_tb_s_per_replica,
        r.weight_gb_per_step,
        r.seq_mb_per_step,
        r.context_tokens,
        match (r.bound, r.batch) {
            (Some(b), Some(k)) => format!("; at batch {k:.0}: {b:.0} tok/s"),
            _ => String::new(),
        }
    );
    if let Some(m) = r.memory_max_concurrency {
        let _ = writeln!(s, "  memory: {m} sequences fit per replica");
    }
    for c in &r.checks {
        let _ = writeln!(
            s,
            "  check: {} {:.1} = {:.0}% of the bound {:.1} ({:?})",
            c.what,
            c.figure,
            c.efficiency * 100.0,
            c.bound,
            c.verdict
        );
    }
}

/// The user's own figure, set against the plan.
fn write_comparison(s: &mut String, plan: &Plan) {
    if let Some(c) = &plan.comparison {
        let _ = writeln!(s);
        let _ = writeln!(s, "compared with your {} days on {}:", c.your_days, c.node);
        for line in &c.explanation {
            let _ = writeln!(s, "  {line}");
        }
    }
}

/// The cheapest mix of node types for the deadline.
fn write_mix(s: &mut String, plan: &Plan) {
    if let Some(m) = &plan.mix {
        let _ = writeln!(s);
        let _ = writeln!(
            s,
            "cheapest mix for the deadline {} at P90 ({} mixes searched; each node type at its \
             P10 throughput, catalog prices and available counts):",
            human_duration(m.deadline_s),
            m.answer.evaluated
        );
        let _ = writeln!(s, "  best:      {}", mix_line(&m.answer.best));
        match &m.answer.runner_up {
            Some(r) => {
                let _ = writeln!(s, "  runner-up: {}", mix_line(r));
            }
            None => {
                let _ = writeln!(s, "  runner-up: none (no other mix meets the deadline)");
            }
        }
        for l in &m.left_out {
            let _ = writeln!(s, "  left out: {l}");
        }
    }
}

/// The summary, notes and warnings.
fn write_lists(s: &mut String, plan: &Plan) {
    write_list(s, "summary:", "  ", &plan.summary);
    write_list(s, "notes:", "  - ", &plan.notes);
    write_list(s, "warnings:", "  ! ", &plan.warnings);
}

/// A titled list after a blank line, each item behind `bullet`; nothing when it is empty.
fn write_list(s: &mut String, title: &str, bullet: &str, items: &[String]) {
    if items.is_empty() {
        return;
    }
    let _ = writeln!(s);
    let _ = writeln!(s, "{title}");
    for item in items {
        let _ = writeln!(s, "{bullet}{item}");
    }
}

/// "2 x rtxpro6000-8x-dp + 1 x b200-7x: 3 nodes, 40.2 hours, $1,234".
fn mix_line(m: &crate::plan::mix::Mix) -> String {
    let counts: Vec<String> = m.counts.iter().map(|(n, c)| format!("{c} x {n}")).collect();
    format!(
        "{}: {} node(s), {} at P90, {}",
        counts.join(" + "),
        m.nodes,
        human_duration(m.hours * 3600.0),
        money(m.usd)
    )
}

/// "lognormal" and the like.
fn dist_name(d: &crate::profile::LengthDist) -> &'static str {
    use crate::profile::LengthDist::*;
    match d {
        Fixed { .. } => "fixed",
        Uniform { .. } => "uniform",
        Normal { .. } => "normal",
        Lognormal { .. } => "lognormal",
        Histogram { .. } => "histogram",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_separators() {
        assert_eq!(thousands(1_234_567.8), "1,234,568");
        assert_eq!(thousands(999.0), "999");
        assert_eq!(thousands(1000.0), "1,000");
        assert_eq!(thousands(-9440.0), "-9,440");
    }
}
