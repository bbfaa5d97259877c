//! Every role's Prometheus endpoint: `vyrn seq`, `vyrn data` and `vyrn
//! replica` started with `--metrics` serve valid text exposition with their tiles' counters and
//! their alarms as `vyrn_alarm_active`, and a port already taken is a start refusal (exit 2).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn exe() -> Command {
    Command::new(env!("CARGO_BIN_EXE_vyrn"))
}

fn scrape(addr: SocketAddr) -> Option<String> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_millis(200)).ok()?;
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    out.starts_with("HTTP/1.1 200")
        .then(|| out.split("\r\n\r\n").nth(1).unwrap_or("").to_string())
}

/// Scrape until the text holds `want`, or 20 s.
fn scrape_until(addr: SocketAddr, want: &str) -> String {
    let t0 = Instant::now();
    loop {
        if let Some(t) = scrape(addr) {
            if t.contains(want) || t0.elapsed() > Duration::from_secs(20) {
                return t;
            }
        } else if t0.elapsed() > Duration::from_secs(20) {
            return String::new();
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The text format's rules: each family's HELP then TYPE once, then only its samples.
fn valid(text: &str) -> bool {
    let mut fam: Option<&str> = None;
    let mut seen = std::collections::HashSet::new();
    let mut lines = text.lines();
    while let Some(l) = lines.next() {
        if let Some(r) = l.strip_prefix("# HELP ") {
            let n = r.split(' ').next().unwrap_or("");
            if !seen.insert(n.to_string()) {
                return false;
            }
            match lines.next() {
                Some(t) if t.starts_with(&format!("# TYPE {n} ")) => fam = Some(n),
                _ => return false,
            }
            continue;
        }
        let Some(f) = fam else { return false };
        let Some((series, value)) = l.rsplit_once(' ') else {
            return false;
        };
        if series.split('{').next() != Some(f) || value.parse::<f64>().is_err() {
            return false;
        }
    }
    !seen.is_empty()
}

struct Kill(Child);
impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn every_role_serves_its_metrics_and_alarms() {
    let dir = std::env::temp_dir().join(format!("vyrn-metrics-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = exe()
        .args([
            "config",
            "init",
            "--lanes",
            "2",
            "--sessions-per-lane",
            "2",
            "--base-port",
            "29200",
        ])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let conf = dir.join("home.toml");
    let port = |k: u16| -> SocketAddr { SocketAddr::from(([127, 0, 0, 1], 29_290 + k)) };
    let quiet = |c: &mut Command| {
        c.stdout(Stdio::null()).stderr(Stdio::null());
    };
    let mut data = exe();
    data.args(["data", "--index", "0", "--secs", "30", "--home"])
        .arg(&conf)
        .arg("--metrics")
        .arg(port(1).to_string());
    quiet(&mut data);
    let _data = Kill(data.spawn().unwrap());
    let mut rep = exe();
    rep.args(["replica", "--index", "0", "--secs", "30", "--home"])
        .arg(&conf)
        .arg("--key")
        .arg(dir.join("keys/voter-0.key"))
        .arg("--consensus-dir")
        .arg(dir.join("consensus-0"))
        .arg("--metrics")
        .arg(port(2).to_string());
    quiet(&mut rep);
    let _rep = Kill(rep.spawn().unwrap());
    let mut seq = exe();
    seq.args(["seq", "--secs", "30", "--config"])
        .arg(&conf)
        .arg("--metrics")
        .arg(port(0).to_string());
    quiet(&mut seq);
    let _seq = Kill(seq.spawn().unwrap());

    let t = scrape_until(port(0), "vyrn_seq_closed_height");
    assert!(valid(&t), "{t}");
    for want in [
        "vyrn_tile_polls_total{tile=\"lane0\"}",
        "vyrn_tile_busy_seconds_total{tile=\"bbo\"}",
        "vyrn_seq_client_packets_dropped_total{reason=\"unknown_session\"} 0",
        "vyrn_alarm_active{alarm=\"REP_A_PATH\",role=\"seq\",substream=\"A\",path=\"B\"} 0",
        "vyrn_seq_fenced 0",
        "vyrn_metrics_scrapes_total",
    ] {
        assert!(t.contains(want), "seq: no {want} in\n{t}");
    }
    let t = scrape_until(port(1), "vyrn_data_rx_packets_total");
    assert!(valid(&t), "{t}");
    assert!(
        t.contains("vyrn_data_rx_packets_total{databox=\"0\"} 0"),
        "{t}"
    );
    // The replica hears the box's heartbeats on both paths: frames counted per path.
    let t = scrape_until(port(2), "vyrn_replica_frames_total{path=\"A\"}");
    assert!(valid(&t), "{t}");
    for want in [
        "vyrn_replica_frames_total{path=\"B\"}",
        "vyrn_alarm_active{alarm=\"REP_A_PATH\",role=\"replica\",path=\"A\"}",
        "vyrn_replica_voted_height",
        "vyrn_replica_final_height",
    ] {
        assert!(t.contains(want), "replica: no {want} in\n{t}");
    }

    // A metrics port in use (the box's): a data box refuses to start, exit 2, naming it.
    drop(_data);
    let out = exe()
        .args(["data", "--index", "0", "--secs", "1", "--home"])
        .arg(&conf)
        .arg("--metrics")
        .arg(port(0).to_string())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--metrics"),
        "{out:?}"
    );
    drop((_seq, _rep));
    let _ = std::fs::remove_dir_all(&dir);
}
