//! The exposition is valid Prometheus text (format 0.0.4) whatever the order samples are added
//! in, bad names are refused without a panic, and the endpoint serves it over TCP.

use std::io::{Read, Write};
use std::net::TcpStream;
use vyrn_metrics::{serve, valid_name, Exposition, Published};

/// A strict check of the text format: HELP then TYPE before the samples of each family, each
/// family once, every sample line `name{labels} value` of its family, values numeric.
fn check(text: &str) -> Vec<(String, String)> {
    let mut seen = std::collections::HashSet::new();
    let mut current: Option<String> = None;
    let mut samples = Vec::new();
    let mut lines = text.lines().peekable();
    while let Some(l) = lines.next() {
        if let Some(rest) = l.strip_prefix("# HELP ") {
            let name = rest.split(' ').next().unwrap().to_string();
            assert!(seen.insert(name.clone()), "family {name} twice");
            let t = lines.next().expect("TYPE after HELP");
            assert!(
                t == format!("# TYPE {name} counter") || t == format!("# TYPE {name} gauge"),
                "{t}"
            );
            current = Some(name);
            continue;
        }
        let fam = current.as_ref().expect("a sample before any HELP");
        let (series, value) = l.rsplit_once(' ').expect("name value");
        let name = series.split('{').next().unwrap();
        assert_eq!(name, fam, "{l}");
        assert!(
            value.parse::<f64>().is_ok() || ["NaN", "+Inf", "-Inf"].contains(&value),
            "{l}"
        );
        if let Some(labels) = series.strip_prefix(name) {
            if !labels.is_empty() {
                assert!(labels.starts_with('{') && labels.ends_with('}'), "{l}");
            }
        }
        samples.push((series.to_string(), value.to_string()));
    }
    samples
}

#[test]
fn families_are_grouped_and_valid_whatever_the_order() {
    let mut e = Exposition::new();
    e.counter("vyrn_tile_polls_total", "polls", &[("tile", "lane0")], 5);
    e.gauge("vyrn_seq_final_height", "final", &[], 42.0);
    e.counter("vyrn_tile_polls_total", "polls", &[("tile", "cut")], 7);
    e.alarm("REP_A_PATH", &[("path", "A")], true);
    e.alarm("REP_A_PATH", &[("path", "B")], false);
    e.gauge("vyrn_ratio", "a ratio", &[], 0.25);
    let text = e.render();
    let s = check(&text);
    assert_eq!(
        s,
        vec![
            (
                "vyrn_tile_polls_total{tile=\"lane0\"}".to_string(),
                "5".to_string()
            ),
            ("vyrn_tile_polls_total{tile=\"cut\"}".into(), "7".into()),
            ("vyrn_seq_final_height".into(), "42".into()),
            (
                "vyrn_alarm_active{alarm=\"REP_A_PATH\",path=\"A\"}".into(),
                "1".into()
            ),
            (
                "vyrn_alarm_active{alarm=\"REP_A_PATH\",path=\"B\"}".into(),
                "0".into()
            ),
            ("vyrn_ratio".into(), "0.25".into()),
        ]
    );
    assert_eq!(e.rejected(), 0);
}

#[test]
fn bad_names_and_type_clashes_are_refused_and_values_escaped() {
    let mut e = Exposition::new();
    e.counter("1bad", "x", &[], 1);
    e.counter("has space", "x", &[], 1);
    e.counter("ok_total", "x", &[("bad:label", "v")], 1);
    e.counter("ok_total", "x", &[("why", "a \"quoted\"\\ new\nline")], 1);
    e.gauge("ok_total", "clash: a counter already", &[], 1.0);
    assert_eq!(e.rejected(), 4);
    let text = e.render();
    assert!(
        text.contains("ok_total{why=\"a \\\"quoted\\\"\\\\ new\\nline\"} 1"),
        "{text}"
    );
    check(&text);
    assert!(valid_name("vyrn:rule_total", false) && !valid_name("vyrn:x", true));
    assert!(!valid_name("", false));
}

fn get(addr: std::net::SocketAddr, req: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(req.as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn the_endpoint_serves_the_latest_rendering_and_refuses_the_rest() {
    let p = Published::default();
    let addr = serve("127.0.0.1:0".parse().unwrap(), p.clone()).unwrap();
    let mut e = Exposition::new();
    e.counter("vyrn_x_total", "x", &[], 1);
    p.set(e.render());
    let r = get(addr, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(r.starts_with("HTTP/1.1 200 OK\r\n"), "{r}");
    assert!(r.contains("text/plain; version=0.0.4"));
    let body = r.split("\r\n\r\n").nth(1).unwrap();
    assert_eq!(check(body), vec![("vyrn_x_total".into(), "1".into())]);
    let mut e = Exposition::new();
    e.counter("vyrn_x_total", "x", &[], 2);
    p.own(&mut e);
    p.set(e.render());
    let r = get(addr, "GET /metrics HTTP/1.0\r\n\r\n");
    assert!(
        r.contains("vyrn_x_total 2") && r.contains("vyrn_metrics_scrapes_total 1"),
        "{r}"
    );
    assert!(get(addr, "POST /metrics HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 404"));
    assert!(get(addr, "GET /other HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 404"));
    // A request head over the cap, and garbage: answered 404, the endpoint still serves.
    assert!(get(addr, &"x".repeat(20_000)).starts_with("HTTP/1.1 404"));
    assert!(get(addr, "\u{0}\u{1}\r\n\r\n").starts_with("HTTP/1.1 404"));
    assert_eq!(p.bad_requests.load(std::sync::atomic::Ordering::Relaxed), 4);
    assert!(get(addr, "GET /metrics HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 200"));
}
