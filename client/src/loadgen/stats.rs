//! Latency histograms (hdrhistogram, ns) and the once-per-second progress line.

use hdrhistogram::Histogram;

/// Percentiles of one histogram, ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Percentiles {
    /// Samples.
    pub n: u64,
    /// Median.
    pub p50: u64,
    /// 99th percentile.
    pub p99: u64,
    /// 99.9th percentile.
    pub p999: u64,
    /// Largest sample.
    pub max: u64,
}

/// One latency distribution.
#[derive(Debug, Clone)]
pub struct Latency {
    h: Histogram<u64>,
}

impl Default for Latency {
    fn default() -> Self {
        Latency {
            // 3 significant digits from 1 ns to 1 h.
            h: Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid bounds"),
        }
    }
}

impl Latency {
    /// Record one sample (clamped to the histogram's range).
    pub fn record(&mut self, ns: u64) {
        self.h.saturating_record(ns.max(1));
    }

    /// The percentiles.
    pub fn percentiles(&self) -> Percentiles {
        if self.h.is_empty() {
            return Percentiles::default();
        }
        Percentiles {
            n: self.h.len(),
            p50: self.h.value_at_quantile(0.5),
            p99: self.h.value_at_quantile(0.99),
            p999: self.h.value_at_quantile(0.999),
            max: self.h.max(),
        }
    }

    /// The histogram.
    pub fn histogram(&self) -> &Histogram<u64> {
        &self.h
    }
}

/// The four distributions the load generator reports.
#[derive(Debug, Clone, Default)]
pub struct LatencyStats {
    /// Request → first answer of a New (`Ack`, first `Fill`, `Out` or `Reject`), from the
    /// intended send time.
    pub req_ack: Latency,
    /// Request → first fill of a New, from the intended send time.
    pub req_fill: Latency,
    /// Fill received → its durable fact (`DUR_QUORUM`).
    pub fill_durable: Latency,
    /// Fill received → its final fact (`FINAL`).
    pub fill_final: Latency,
}

/// Format ns with a unit: `850ns`, `12.3us`, `4.56ms`, `1.20s`.
pub fn fmt_ns(ns: u64) -> String {
    match ns {
        0..=999 => format!("{ns}ns"),
        1_000..=999_999 => format!("{:.1}us", ns as f64 / 1e3),
        1_000_000..=999_999_999 => format!("{:.2}ms", ns as f64 / 1e6),
        _ => format!("{:.2}s", ns as f64 / 1e9),
    }
}

/// `name p50 .. p99 .. p99.9 .. max ..`.
pub fn fmt_percentiles(name: &str, p: &Percentiles) -> String {
    format!(
        "{name} p50 {} p99 {} p99.9 {} max {} (n={})",
        fmt_ns(p.p50),
        fmt_ns(p.p99),
        fmt_ns(p.p999),
        fmt_ns(p.max),
        p.n
    )
}

/// Counts the progress line shows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Progress {
    /// Seconds since the start.
    pub elapsed_s: u64,
    /// Messages sent in total.
    pub sent: u64,
    /// Messages sent in the last second.
    pub sent_last_s: u64,
    /// Target messages per second.
    pub target_per_s: u64,
    /// Largest schedule lag so far, ns.
    pub lag_max_ns: u64,
    /// News answered.
    pub answered: u64,
    /// Fills.
    pub fills: u64,
    /// Durable facts.
    pub durable: u64,
    /// Final facts.
    pub fin: u64,
    /// Copy-1 resends.
    pub resends: u64,
    /// Responses dropped (bad tag, malformed, wrong session, …).
    pub bad: u64,
    /// Submits refused (retention or order table full).
    pub refused: u64,
}

/// The once-per-second progress line.
pub fn progress_line(p: &Progress, s: &LatencyStats) -> String {
    let q = |l: &Latency| {
        let x = l.percentiles();
        format!(
            "{}/{}/{}/{}",
            fmt_ns(x.p50),
            fmt_ns(x.p99),
            fmt_ns(x.p999),
            fmt_ns(x.max)
        )
    };
    format!(
        "t={:>4}s sent {} ({}/s, target {}/s, lag max {}) answered {} fills {} durable {} final {} \
         | p50/p99/p99.9/max ack {} fill {} fill->durable {} fill->final {} \
         | resend {} bad {} refused {}",
        p.elapsed_s,
        p.sent,
        p.sent_last_s,
        p.target_per_s,
        fmt_ns(p.lag_max_ns),
        p.answered,
        p.fills,
        p.durable,
        p.fin,
        q(&s.req_ack),
        q(&s.req_fill),
        q(&s.fill_durable),
        q(&s.fill_final),
        p.resends,
        p.bad,
        p.refused,
    )
}
