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
                        help: help.replace('\\', "\\\\").replace('\n', "\\n"),
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

    /// An alarm as a gauge: `vyrn_alarm_active{alarm="REP_A_…",…} 0|1` (docs/sre.md).
    pub fn alarm(&mut self, alarm: &str, labels: &[(&str, &str)], active: bool) {
        let mut l: Vec<(&str, &str)> = Vec::with_capacity(labels.len() + 1);
        l.push(("alarm", alarm));
        l.extend_from_slice(labels);
        self.gauge(
            "vyrn_alarm_active",
            "1 while the alarm is raised (docs/sre.md: meaning, cause, action)",
            &l,
            if active { 1.0 } else { 0.0 },
        );
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
        e.counter(
            "vyrn_metrics_scrapes_total",
            "GET /metrics answered",
            &[],
            self.scrapes.load(Ordering::Relaxed),
        );
        e.counter(
            "vyrn_metrics_rejected_total",
            "samples this process's exposition refused (a bad name or a type clash: a bug)",
            &[],
            e.rejected(),
        );
        e.counter(
            "vyrn_metrics_bad_requests_total",
            "requests to the metrics port that were not GET /metrics",
            &[],
            self.bad_requests.load(Ordering::Relaxed),
        );
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
