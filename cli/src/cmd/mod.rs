//! One module per `vyrn` subcommand: the roles (`seq`, `data`, `replica`, `load`), the lab
//! (`paths`), the operator's tools (`tools`) and the whole home (`up`).

pub mod data;
pub mod load;
pub mod paths;
pub mod replica;
pub mod seq;
pub mod tools;
pub mod up;

use hdrhistogram::Histogram;

/// A core list as `--cores` takes it (`1`, `0-3,6`).
#[derive(Debug, Clone)]
pub struct Cores(pub Vec<usize>);

/// Parse a `--cores` list.
pub fn cores(s: &str) -> Result<Cores, String> {
    vyrn_nic::wait::parse_cores(s).map(Cores)
}

/// A latency histogram in nanoseconds (p50/p99/p99.9/max), for `vyrn paths`.
#[derive(Debug)]
pub struct Latency {
    name: String,
    ns: Histogram<u64>,
}

impl Latency {
    /// An empty recorder.
    pub fn new(name: &str) -> Self {
        Latency {
            name: name.to_string(),
            // Auto-resizing: `record` cannot fail on a large value.
            ns: Histogram::new(3).unwrap_or_else(|_| unreachable!("3 significant digits is valid")),
        }
    }

    /// Record one sample, ns.
    pub fn record(&mut self, ns: u64) {
        let _ = self.ns.record(ns.max(1));
    }

    /// Print p50/p99/p99.9/max.
    pub fn print(&self) {
        let q = |x: f64| self.ns.value_at_quantile(x);
        println!(
            "{:<44} p50 {:>7} ns  p99 {:>7} ns  p99.9 {:>7} ns  max {:>8} ns  (n={})",
            self.name,
            q(0.5),
            q(0.99),
            q(0.999),
            self.ns.max(),
            self.ns.len()
        );
    }
}
