//! The metric list of `docs/sre.md` and the metrics the roles publish do not drift apart: every
//! `vyrn_*` name `vyrn` renders (a string literal in `cli/src` or `metrics/src`) is in
//! `docs/sre.md`, every metric name `docs/sre.md` lists is rendered, and every data box counter
//! (`vyrn_data_<counter>_total`, rendered from `vyrn_data::Counters`) is named in `docs/data.md`.

mod support;
use support::{root, rs_files};

use std::collections::BTreeSet;

/// A metric name: `vyrn_` then lowercase words joined by `_`, at least two of them.
fn metric_at(s: &str) -> Option<&str> {
    let rest = s.strip_prefix("vyrn_")?;
    let len = rest
        .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'))
        .unwrap_or(rest.len());
    let name = &s[..5 + len];
    (rest[..len].matches('_').count() >= 1 && !name.ends_with('_')).then_some(name)
}

/// The names in `"vyrn_…"` string literals of the sources that render metrics.
fn rendered() -> BTreeSet<String> {
    let mut files = Vec::new();
    rs_files(&root().join("cli/src"), &mut files);
    rs_files(&root().join("metrics/src"), &mut files);
    let mut out = BTreeSet::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        for (i, _) in text.match_indices("\"vyrn_") {
            let lit = &text[i + 1..];
            if let Some(n) = metric_at(lit) {
                // A whole literal only (not a prefix built on with format!).
                if lit[n.len()..].starts_with('"') {
                    out.insert(n.to_string());
                }
            }
        }
    }
    out
}

/// The metric names `docs/sre.md` lists: in backticks, followed by a backtick or labels.
fn documented(doc: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (i, _) in doc.match_indices("`vyrn_") {
        if let Some(n) = metric_at(&doc[i + 1..]) {
            let after = &doc[i + 1 + n.len()..];
            if after.starts_with('`') || after.starts_with('{') {
                out.insert(n.to_string());
            }
        }
    }
    out
}

/// The data box's counters as the box renders them.
fn data_counters() -> Vec<&'static str> {
    vyrn_data::Counters::default()
        .iter()
        .map(|(k, _)| k)
        .collect()
}

#[test]
fn every_rendered_metric_is_in_the_sre_guide_and_back() {
    let doc = std::fs::read_to_string(root().join("docs/sre.md")).unwrap();
    let docs = documented(&doc);
    let rend = rendered();
    let data: BTreeSet<String> = data_counters()
        .iter()
        .map(|k| format!("vyrn_data_{k}_total"))
        .collect();
    assert!(
        rend.len() > 100 && docs.len() > 100,
        "the scans found the lists"
    );
    let undocumented: Vec<&String> = rend
        .iter()
        .filter(|n| !docs.contains(*n) && !data.contains(*n))
        .collect();
    assert!(
        undocumented.is_empty(),
        "rendered but not in docs/sre.md: {undocumented:?}"
    );
    let unrendered: Vec<&String> = docs.iter().filter(|n| !rend.contains(*n)).collect();
    assert!(
        unrendered.is_empty(),
        "in docs/sre.md but rendered nowhere: {unrendered:?}"
    );
}

#[test]
fn every_data_box_counter_is_named_in_the_data_guide() {
    let doc = std::fs::read_to_string(root().join("docs/data.md")).unwrap();
    let missing: Vec<&str> = data_counters()
        .into_iter()
        .filter(|k| !doc.contains(&format!("`{k}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "data box counters docs/data.md does not name: {missing:?}"
    );
}

#[test]
fn the_scanner_reads_names_as_the_docs_write_them() {
    assert_eq!(metric_at("vyrn_seq_x_total\""), Some("vyrn_seq_x_total"));
    assert_eq!(metric_at("vyrn_seq"), None);
    assert_eq!(metric_at("vyrn_data_<counter>"), None);
    let d = documented("| `vyrn_a_b{why}`, `vyrn_c_d` and `vyrn_seq::x` |");
    assert_eq!(
        d.into_iter().collect::<Vec<_>>(),
        vec!["vyrn_a_b".to_string(), "vyrn_c_d".to_string()]
    );
}
