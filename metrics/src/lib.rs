//! Metrics for SREs: every process of a home exports its counters and its
//! alarms (`REP_A_*`) in the Prometheus text exposition format (0.0.4) on a local port.
//!
//! Two parts, both std only:
//! - [`Exposition`] builds the text: metric families with `# HELP` and `# TYPE`, samples with
//!   labels, grouped per family whatever the order they were added in, names checked against
//!   Prometheus' grammar and label values escaped. A name that breaks the grammar is skipped and
//!   counted ([`Exposition::rejected`]), never a panic: a bad name must not take a box down.
//! - [`Published`] holds the latest rendering and [`serve`] answers `GET /metrics` with it on
//!   its own thread (blocking accept, one connection at a time, 1 s read timeout, 8 KiB request
//!   cap). The role renders once a second on its cold loop, so a scrape never touches a hot tile
//!   and a value is at most a second old.
//!
//! - The metric table: each role declares its families (name, help, type, label names) and its
//!   alarms with [`metrics!`] and [`alarms!`] in the crate that owns the values, beside the code
//!   that renders them, which renders through the declared constants ([`Exposition::put_counter`]
//!   and its siblings: a family cannot be rendered without being in its table). `vyrn metrics`
//!   prints every role's table; `docs/sre.md`'s metric reference and the Grafana dashboard
//!   (`deploy/grafana/vyrn.json`) are generated from it ([`reference_markdown`],
//!   [`grafana_dashboard`]), and a test fails when they drift.
//!
//! Why our own and not the `prometheus` crate: the tiles already keep their counters in plain
//! atomics and structs (no registry on the hot path); what was missing is ~200 lines of text
//! format and a loopback listener, which do not justify a registry, a protobuf dependency and a
//! lock per update.
#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A metric family's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Only goes up (a `_total` name by convention).
    Counter,
    /// Any value.
    Gauge,
}

/// A metric family as the code that renders it describes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Metric {
    /// Its name (`vyrn_<role>_…`; a counter ends in `_total`).
    pub name: &'static str,
    /// Its help text.
    pub help: &'static str,
    /// Counter or gauge.
    pub kind: Kind,
    /// Its label names.
    pub labels: &'static [&'static str],
}

impl Metric {
    /// The role it belongs to: the word after `vyrn_` (`seq`, `replica`, `data`, `load`,
    /// `standby`, `tile`, `metrics`, …).
    pub fn role(&self) -> &'static str {
        let rest = self.name.strip_prefix("vyrn_").unwrap_or(self.name);
        rest.split('_').next().unwrap_or(rest)
    }
}

/// An alarm as the code that raises it names it (`REP_A_…`), with the roles that raise it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Alarm {
    /// `REP_A_…`.
    pub name: &'static str,
    /// The role that renders it.
    pub role: &'static str,
}

pub mod table;
pub use table::{grafana_dashboard, reference_markdown, Table};

/// Declare a role's metric table where its metrics are rendered: one `const` per family (used
/// at the call site: [`Exposition::put_counter`], [`Exposition::put_gauge`]) and the table of
/// them all.
///
/// ```
/// vyrn_metrics::metrics! {
///     /// The example's table.
///     pub TABLE;
///     HOLDS: Counter "demo_holds_total" [] "holds started";
///     LAG: Gauge "demo_lag_seconds" ["quantile"] "lag";
/// }
/// let mut e = vyrn_metrics::Exposition::new();
/// e.put_counter(&HOLDS, &[], 3);
/// e.put_gauge(&LAG, &["0.5"], 0.001);
/// assert_eq!(TABLE.len(), 2);
/// ```
#[macro_export]
macro_rules! metrics {
    (
        $(#[$tm:meta])* $tvis:vis $table:ident;
        $( $c:ident: $kind:ident $name:literal [$($l:literal),* $(,)?] $help:literal; )*
    ) => {
        $(
            #[doc = $help]
            const $c: $crate::Metric = $crate::Metric {
                name: $name,
                help: $help,
                kind: $crate::Kind::$kind,
                labels: &[$($l),*],
            };
        )*
        $(#[$tm])* $tvis const $table: &[$crate::Metric] = &[$($c),*];
    };
}

/// Declare the alarms a role raises, as [`metrics!`] declares its metrics:
/// `alarms! { pub ALARMS; JOURNAL: "REP_A_JOURNAL" "replica"; }`.
#[macro_export]
macro_rules! alarms {
    (
        $(#[$tm:meta])* $tvis:vis $table:ident;
        $( $c:ident: $name:literal $role:literal; )*
    ) => {
        $(
            const $c: $crate::Alarm = $crate::Alarm {
                name: $name,
                role: $role,
            };
        )*
        $(#[$tm])* $tvis const $table: &[$crate::Alarm] = &[$($c),*];
    };
}

/// The alarms' gauge ([`Exposition::alarm`]) and the endpoint's own counters
/// ([`Published::own`]).
pub const TABLE: &[Metric] = &[
    ALARM_ACTIVE,
    Metric {
        name: "vyrn_metrics_scrapes_total",
        help: "GET /metrics answered",
        kind: Kind::Counter,
        labels: &[],
    },
    Metric {
        name: "vyrn_metrics_rejected_total",
        help: "samples this process's exposition refused (a bad name or a type clash: a bug)",
        kind: Kind::Counter,
        labels: &[],
    },
    Metric {
        name: "vyrn_metrics_bad_requests_total",
        help: "requests to the metrics port that were not GET /metrics",
        kind: Kind::Counter,
        labels: &[],
    },
];

const ALARM_ACTIVE: Metric = Metric {
    name: "vyrn_alarm_active",
    help: "1 while the alarm is raised (docs/sre.md: meaning, cause, action)",
    kind: Kind::Gauge,
    labels: &["alarm", "role"],
};

#[derive(Debug)]
struct Family {
    help: String,
    kind: Kind,
    samples: Vec<String>,
}

/// One rendering of a process's metrics.
#[derive(Debug, Default)]
pub struct Exposition {
    order: Vec<String>,
    families: HashMap<String, Family>,
    rejected: u64,
}

/// Whether `name` is a valid metric or label name (`[a-zA-Z_:][a-zA-Z0-9_:]*`; labels: no `:`).
pub fn valid_name(name: &str, label: bool) -> bool {
    let mut b = name.bytes();
    let ok_first = |c: u8| c.is_ascii_alphabetic() || c == b'_' || (!label && c == b':');
    let ok_rest = |c: u8| c.is_ascii_alphanumeric() || c == b'_' || (!label && c == b':');
    match b.next() {
        Some(c) if ok_first(c) => b.all(ok_rest),
        _ => false,
    }
}

fn escape(v: &str, out: &mut String) {
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

impl Exposition {
    /// An empty rendering.
    pub fn new() -> Self {
        Self::default()
    }

    /// Samples refused: a name or label name outside the grammar, or a family added twice with
    /// different types.
    pub fn rejected(&self) -> u64 {
        self.rejected
    }

    fn sample(&mut self, name: &str, help: &str, kind: Kind, labels: &[(&str, &str)], v: &str) {
        if !valid_name(name, false) || labels.iter().any(|(k, _)| !valid_name(k, true)) {
            self.rejected += 1;
            return;
        }
        let mut line = String::with_capacity(name.len() + 32);
        line.push_str(name);
        if !labels.is_empty() {
            line.push('{');
            for (i, (k, val)) in labels.iter().enumerate() {
                if i > 0 {
                    line.push(',');
                }
                line.push_str(k);
                line.push_str("=\"");
                escape(val, &mut line);
                line.push('"');
            }
            line.push('}');
        }
        line.push(' ');
        line.push_str(v);
        match self.families.get_mut(name) {
            Some(f) if f.kind == kind => f.samples.push(line),
            Some(_) => self.rejected += 1,
            None => {
                self.order.push(name.to_string());
                self.families.insert(
                    name.to_string(),
                    Family {
                        help: help.trim().replace('\\', "\\\\").replace('\n', "\\n"),
                        kind,
                        samples: vec![line],
                    },
                );
            }
        }
    }

    /// A counter sample.
    pub fn counter(&mut self, name: &str, help: &str, labels: &[(&str, &str)], v: u64) {
        self.sample(name, help, Kind::Counter, labels, &v.to_string());
    }

    /// A counter sample with a fractional value (seconds); negative or non-finite is refused.
    pub fn counter_f64(&mut self, name: &str, help: &str, labels: &[(&str, &str)], v: f64) {
        if !v.is_finite() || v < 0.0 {
            self.rejected += 1;
            return;
        }
        self.sample(name, help, Kind::Counter, labels, &format!("{v}"));
    }

    /// A gauge sample (integers print exactly; NaN and infinities as Prometheus spells them).
    pub fn gauge(&mut self, name: &str, help: &str, labels: &[(&str, &str)], v: f64) {
        let s = if v.is_nan() {
            "NaN".to_string()
        } else if v.is_infinite() {
            if v > 0.0 { "+Inf" } else { "-Inf" }.to_string()
        } else if v.fract() == 0.0 && v.abs() < 9.0e15 {
            format!("{}", v as i64)
        } else {
            format!("{v}")
        };
        self.sample(name, help, Kind::Gauge, labels, &s);
    }

    /// A sample of counter family `m`, its label values in `m.labels`' order.
    pub fn put_counter(&mut self, m: &Metric, values: &[&str], v: u64) {
        self.put(m, values, |e, name, help, l| e.counter(name, help, l, v));
    }

    /// A sample of counter family `m` with a fractional value (seconds).
    pub fn put_counter_f64(&mut self, m: &Metric, values: &[&str], v: f64) {
        self.put(m, values, |e, name, help, l| {
            e.counter_f64(name, help, l, v)
        });
    }

    /// A sample of gauge family `m`, its label values in `m.labels`' order.
    pub fn put_gauge(&mut self, m: &Metric, values: &[&str], v: f64) {
        self.put(m, values, |e, name, help, l| e.gauge(name, help, l, v));
    }

    /// Alarm `a` of its role, with more labels.
    pub fn put_alarm(&mut self, a: &Alarm, labels: &[(&str, &str)], active: bool) {
        let mut l: Vec<(&str, &str)> = Vec::with_capacity(labels.len() + 1);
        l.push(("role", a.role));
        l.extend_from_slice(labels);
        self.alarm(a.name, &l, active);
    }

    /// A family's sample: values matched to its label names (a count that differs is refused).
    fn put(
        &mut self,
        m: &Metric,
        values: &[&str],
        f: impl FnOnce(&mut Self, &str, &str, &[(&str, &str)]),
    ) {
        debug_assert_eq!(m.labels.len(), values.len(), "{}: label values", m.name);
        if m.labels.len() != values.len() {
            self.rejected += 1;
            return;
        }
        let mut l: [(&str, &str); 4] = [("", ""); 4];
        if values.len() > l.len() {
            self.rejected += 1;
            return;
        }
        for (i, (k, v)) in m.labels.iter().zip(values).enumerate() {
            l[i] = (k, v);
        }
        f(self, m.name, m.help, &l[..values.len()]);
    }

    /// An alarm as a gauge: `vyrn_alarm_active{alarm="REP_A_…",…} 0|1` (docs/sre.md).
    pub fn alarm(&mut self, alarm: &str, labels: &[(&str, &str)], active: bool) {
        let mut l: Vec<(&str, &str)> = Vec::with_capacity(labels.len() + 1);
        l.push(("alarm", alarm));
        l.extend_from_slice(labels);
        let v = if active { 1.0 } else { 0.0 };
        self.gauge(ALARM_ACTIVE.name, ALARM_ACTIVE.help, &l, v);
    }

    /// The text: every family once, `# HELP`, `# TYPE`, then its samples, in first-added order.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for name in &self.order {
            let f = &self.families[name];
            let _ = writeln!(out, "# HELP {name} {}", f.help);
            let kind = match f.kind {
                Kind::Counter => "counter",
                Kind::Gauge => "gauge",
            };
            let _ = writeln!(out, "# TYPE {name} {kind}");
            for s in &f.samples {
                out.push_str(s);
                out.push('\n');
            }
        }
        out
    }
}

/// The latest rendering, shared between the role's loop and the scrape thread.
#[derive(Debug, Clone, Default)]
pub struct Published {
    text: Arc<Mutex<String>>,
    /// Scrapes answered.
    pub scrapes: Arc<AtomicU64>,
    /// Requests refused (not `GET /metrics`, too long, unreadable).
    pub bad_requests: Arc<AtomicU64>,
}

impl Published {
    /// Publish a rendering (replaces the previous one).
    pub fn set(&self, text: String) {
        *self.text.lock().unwrap_or_else(|e| e.into_inner()) = text;
    }

    /// The latest rendering.
    pub fn get(&self) -> String {
        self.text.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Add the scrape endpoint's own counters to `e`.
    pub fn own(&self, e: &mut Exposition) {
        let [_, scrapes, rejected, bad] = TABLE else {
            return;
        };
        e.put_counter(scrapes, &[], self.scrapes.load(Ordering::Relaxed));
        let r = e.rejected();
        e.put_counter(rejected, &[], r);
        e.put_counter(bad, &[], self.bad_requests.load(Ordering::Relaxed));
    }
}

/// Largest request head read.
const MAX_REQUEST: usize = 8192;

/// Longest a connection may hold the endpoint's one thread (reading the request, answering,
/// draining): a slow or silent client cannot stall the scrapes behind it for longer.
const CONN_DEADLINE: Duration = Duration::from_secs(2);

fn answer(mut s: TcpStream, p: &Published) {
    let deadline = std::time::Instant::now() + CONN_DEADLINE;
    let left = || {
        deadline
            .saturating_duration_since(std::time::Instant::now())
            .max(Duration::from_millis(1))
    };
    let _ = s.set_write_timeout(Some(Duration::from_secs(1)));
    let mut buf = [0u8; MAX_REQUEST];
    let mut n = 0;
    while n < buf.len() && std::time::Instant::now() < deadline {
        let _ = s.set_read_timeout(Some(left()));
        match s.read(&mut buf[n..]) {
            Ok(0) | Err(_) => break,
            Ok(k) => {
                n += k;
                if buf[..n].windows(4).any(|w| w == b"\r\n\r\n") || buf[..n].ends_with(b"\n\n") {
                    break;
                }
            }
        }
    }
    let line = buf[..n].split(|&b| b == b'\n').next().unwrap_or(&[]);
    let mut parts = line.split(|&b| b == b' ');
    let (method, path) = (parts.next(), parts.next());
    let (status, ctype, body) = match (method, path) {
        (Some(b"GET"), Some(b"/metrics")) => {
            p.scrapes.fetch_add(1, Ordering::Relaxed);
            (
                "200 OK",
                "text/plain; version=0.0.4; charset=utf-8",
                p.get(),
            )
        }
        _ => {
            p.bad_requests.fetch_add(1, Ordering::Relaxed);
            (
                "404 Not Found",
                "text/plain; charset=utf-8",
                "vyrn: metrics at GET /metrics\n".to_string(),
            )
        }
    };
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = s.write_all(head.as_bytes());
    let _ = s.write_all(body.as_bytes());
    // Unread request bytes at close would reset the connection before the client read the
    // answer: shut our side, then drain a bounded amount.
    let _ = s.shutdown(std::net::Shutdown::Write);
    let drain_until = std::time::Instant::now() + Duration::from_millis(200);
    let mut bytes: usize = 64 * 1024;
    while bytes > 0 && std::time::Instant::now() < drain_until {
        let _ = s.set_read_timeout(Some(Duration::from_millis(50)));
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(k) => bytes = bytes.saturating_sub(k),
        }
    }
}

/// Bind `addr` and answer scrapes of `p` on a thread named `metrics` until the process ends.
/// Returns the bound address (port 0 picks one). A bind error is the caller's to report.
pub fn serve(addr: SocketAddr, p: Published) -> std::io::Result<SocketAddr> {
    let l = TcpListener::bind(addr)?;
    let at = l.local_addr()?;
    std::thread::Builder::new()
        .name("metrics".into())
        .spawn(move || {
            for s in l.incoming() {
                match s {
                    Ok(s) => answer(s, &p),
                    // EMFILE and the like: back off instead of spinning on the accept.
                    Err(_) => std::thread::sleep(Duration::from_millis(100)),
                }
            }
        })?;
    Ok(at)
}
