//! The self-benchmark's console lines: a row per throughput case, the timing case's
//! figures (`throughline selfbench`, docs/client-benchmark.md).

use crate::load::selfbench::{CaseFigures, TimingFigures};

fn show(v: Option<f64>) -> String {
    v.map(|x| format!("{x:+.3}")).unwrap_or_else(|| "-".into())
}

pub fn print_timing(t: &TimingFigures) {
    for f in &t.failures {
        eprintln!("  timing case: failed {f}");
    }
    let p = |x: &Option<crate::stats::Percentiles>, f: fn(&crate::stats::Percentiles) -> f64| {
        show(x.as_ref().map(f))
    };
    println!(
        "timing at {} streams x {} tokens, {} ms cadence, {} ({} token gaps paired with the simulator's send times):",
        t.streams,
        t.tokens,
        t.cadence_ms,
        if t.cold_start {
            "started cold"
        } else {
            "on connections opened first"
        },
        t.paired_gaps
    );
    println!(
        "  measured ITL            p50 {} ms, p99 {} ms (minus the cadence: p50 {} ms, p99 {} ms)",
        p(&t.itl_ms, |x| x.p50),
        p(&t.itl_ms, |x| x.p99),
        show(t.error_vs_cadence_p50_ms),
        show(t.error_vs_cadence_p99_ms)
    );
    println!(
        "  simulator's send gaps   p50 {} ms, p99 {} ms, max {} ms",
        p(&t.sim_send_gap_ms, |x| x.p50),
        p(&t.sim_send_gap_ms, |x| x.p99),
        p(&t.sim_send_gap_ms, |x| x.max)
    );
    println!(
        "  client error per token  p50 {} ms, p99 {} ms; |error| p99 {} ms, max {} ms",
        p(&t.client_error_ms, |x| x.p50),
        p(&t.client_error_ms, |x| x.p99),
        p(&t.client_abs_error_ms, |x| x.p99),
        p(&t.client_abs_error_ms, |x| x.max)
    );
    println!(
        "  arrival times: the kernel's on {} reads, the read's own on {}",
        t.kernel_stamped_reads, t.read_time_reads
    );
    let h = &t.headroom;
    println!(
        "  client: {:.2} s CPU, {:.1} KiB/stream, lag p99 {:.1} ms, CPU {:.0}%, read delay p50 {} ms, p99 {} ms, \
         {} of {} chunks read late with the one before{}",
        t.cpu_s,
        t.bytes_per_stream / 1024.0,
        h.lag_p99_ms,
        h.cpu_fraction * 100.0,
        show(h.read_delay_p50_ms),
        show(h.read_delay_p99_ms),
        h.late_merged_chunks.unwrap_or(0),
        h.chunks.unwrap_or(0),
        if h.client_bound { " (client-bound)" } else { "" }
    );
}

pub fn print_row(c: &CaseFigures) {
    for f in &c.failures {
        eprintln!("  {} streams x {} tokens: failed {f}", c.streams, c.tokens);
    }
    let h = c.headroom.clone().unwrap_or_default();
    println!(
        "{:>7} {:>7} {:>9} {:>10} {:>12.0} {:>9.1} {:>10.2} {:>12.0} {:>11.1} {:>9.1} {:>8.0}",
        c.streams,
        c.tokens,
        c.requests,
        c.chunks,
        c.chunks_per_s,
        c.requests_per_s,
        c.cpu_ms_per_1000_chunks,
        c.chunks_per_cpu_s,
        c.bytes_per_stream / 1024.0,
        h.lag_p99_ms,
        h.cpu_fraction * 100.0
    );
}
