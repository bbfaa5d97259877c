//! The metric table, `docs/sre.md`, the Grafana dashboard and the code that renders do not drift
//! apart:
//! * `docs/sre.md`'s metric reference and `deploy/grafana/vyrn.json` are what `vyrn metrics
//!   --markdown` / `--grafana` generate from the table (each family described where it is
//!   rendered); `VYRN_BLESS=1` rewrites both;
//! * every `vyrn_*` name in the rendering sources is in the table (no sample rendered around
//!   the macros that describe it), and every name the guide's hand-written tables mention is;
//! * every data box counter is named in `docs/data.md`.

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

/// The sources that render metrics.
const RENDERING: &[&str] = &[
    "cli/src",
    "metrics/src",
    "seq/src/metrics.rs",
    "seq/src/standby.rs",
    "replica/src/node/metrics.rs",
    "client/src/loadgen/metrics.rs",
];

/// The names in `"vyrn_…"` string literals of the sources that render metrics.
fn rendered() -> BTreeSet<String> {
    let mut files = Vec::new();
    for r in RENDERING {
        let p = root().join(r);
        if p.is_dir() {
            rs_files(&p, &mut files);
        } else {
            files.push(p);
        }
    }
    let mut out = BTreeSet::new();
    for f in files {
        let all = std::fs::read_to_string(&f).unwrap();
        // The code, not its unit tests (their made-up families).
        let text = all.split("#[cfg(test)]").next().unwrap_or_default();
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

/// What `vyrn metrics` prints with `flag` (none: the table).
fn generated(flag: &str) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_vyrn"))
        .arg("metrics")
        .args((!flag.is_empty()).then_some(flag))
        .output()
        .expect("run vyrn metrics");
    assert!(
        out.status.success(),
        "vyrn metrics {flag}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The table's family names (`vyrn metrics`: one family a line, its name first).
fn table() -> BTreeSet<String> {
    generated("")
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with("vyrn_"))
        .map(str::to_string)
        .collect()
}

/// `docs/sre.md` with `reference` between the generated section's marks.
fn with_reference(doc: &str, reference: &str) -> Option<String> {
    let first = reference.lines().next()?;
    let last = reference.lines().last()?;
    let a = doc.find(first)?;
    let b = doc[a..].find(last)? + a + last.len();
    Some(format!(
        "{}{}{}",
        &doc[..a],
        reference.trim_end(),
        &doc[b..]
    ))
}

fn bless() -> bool {
    std::env::var_os("VYRN_BLESS").is_some()
}

#[test]
fn the_sre_guides_metric_reference_is_generated_from_the_table() {
    let path = root().join("docs/sre.md");
    let doc = std::fs::read_to_string(&path).unwrap();
    let reference = generated("--markdown");
    let want = with_reference(&doc, &reference)
        .expect("docs/sre.md holds the generated reference's first and last lines");
    if bless() {
        std::fs::write(&path, &want).unwrap();
        return;
    }
    assert!(
        doc == want,
        "docs/sre.md's metric reference is not what `vyrn metrics --markdown` generates: run \
         VYRN_BLESS=1 cargo test -p vyrn --features lab --test metrics_doc"
    );
}

#[test]
fn the_grafana_dashboard_is_generated_from_the_table() {
    let path = root().join("deploy/grafana/vyrn.json");
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    let want = generated("--grafana");
    if bless() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &want).unwrap();
        return;
    }
    assert!(
        have == want,
        "deploy/grafana/vyrn.json is not what `vyrn metrics --grafana` generates: run \
         VYRN_BLESS=1 cargo test -p vyrn --features lab --test metrics_doc"
    );
    // Every family of the table has a panel.
    for n in table() {
        assert!(
            want.contains(&format!("\"title\":\"{n}\"")),
            "no panel for {n}"
        );
    }
}

#[test]
fn every_rendered_metric_is_in_the_table_and_every_documented_one_too() {
    let doc = std::fs::read_to_string(root().join("docs/sre.md")).unwrap();
    let docs = documented(&doc);
    let rend = rendered();
    let table = table();
    assert!(
        rend.len() > 100 && docs.len() > 100 && table.len() > 100,
        "the scans found the lists"
    );
    let undescribed: Vec<&String> = rend.iter().filter(|n| !table.contains(*n)).collect();
    assert!(
        undescribed.is_empty(),
        "named in the rendering code but in no role's metric table (declare it with vyrn_metrics::metrics!): {undescribed:?}"
    );
    let unknown: Vec<&String> = docs.iter().filter(|n| !table.contains(*n)).collect();
    assert!(
        unknown.is_empty(),
        "named in docs/sre.md but in no process's metric table: {unknown:?}"
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
