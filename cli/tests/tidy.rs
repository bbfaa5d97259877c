//! Habits made mechanical (issue 29 item 6; TigerBeetle's `tidy.zig` is the model): the whole
//! tree is read and this test fails on
//!
//! * a function longer than [`FN_LINES_MAX`] lines in a crate's `src/`, unless it is one of the
//!   known long ones in [`LONG_FNS`], and then only if it grew past the length recorded there
//!   (the list only shrinks: split one and delete its line);
//! * a reference to an issue or a session stop ("issue 12", "stop 18") in a `.rs` or
//!   `Cargo.toml` file (the code says what it does and cites 07; the tracker's history stays
//!   in git and the issue notes), past the per-file debts in [`TRACKER_REFS`] (none today);
//! * a crate whose `src/` never says `unsafe` and does not `#![forbid(unsafe_code)]`;
//! * a `.rs` file of a crate longer than [`FILE_LINES_MAX`] lines, unless it is a codec in
//!   [`LONG_FILES`] (a wire format's one table of messages reads best whole);
//! * a circle of imports between the top-level modules of a crate (`crate::a` in `b` and
//!   `crate::b` in `a`, directly or around a longer ring), past the known ones in [`CIRCLES`]:
//!   a crate's modules stand on each other in one direction, so each reads from the bottom up.
//!
//! When a count falls (a function split, a reference removed), the test prints the new figure so
//! that the list can be lowered: it never fails for an improvement.

mod support;
use support::{root, rs_files};

use std::collections::BTreeMap;
use std::path::Path;

/// The longest a function may be (lines from its `fn` to its closing brace).
const FN_LINES_MAX: usize = 150;

/// The longest a source file may be (its `src/`, `tests/`, `benches/`): past it, split it along
/// the pipeline it holds.
const FILE_LINES_MAX: usize = 1500;

/// Files allowed past [`FILE_LINES_MAX`], `(file, lines)`, each a codec: each may not grow.
const LONG_FILES: &[(&str, usize)] = &[("wire/src/msg/ctrl.rs", 1922)];

/// Import circles known today, `(crate folder, modules in the circle sorted)`: none (the
/// last ones, in the box, were opened; an entry here is a debt with a reason).
const CIRCLES: &[(&str, &[&str])] = &[];

/// Functions over [`FN_LINES_MAX`] today, `(file, fn name, lines)`: each may not grow.
const LONG_FNS: &[(&str, &str, usize)] = &[
    ("wire/src/decoder.rs", "step_half", 165),
    ("engine/src/bbo.rs", "execute", 204),
    ("engine/src/lane.rs", "process", 240),
    ("home/src/file/tables.rs", "box_table", 298),
    ("home/src/file/writer.rs", "write_dev", 283),
    ("seq/src/ports/ctrl_rx.rs", "poll", 169),
    ("seq/src/stream.rs", "poll", 160),
    ("replica/src/disk/journal/cert.rs", "open_mode", 160),
    ("consensus/src/desk/mod.rs", "roots_step", 162),
    ("sim/src/voting.rs", "home", 368),
    ("cli/src/cmd/up/mod.rs", "up", 621),
    ("cli/src/cmd/up/report.rs", "report", 250),
    ("cli/src/cmd/paths.rs", "stream", 334),
    ("cli/src/cmd/replica.rs", "run", 165),
    ("cli/src/cmd/load.rs", "run", 189),
];

/// References to the tracker ("issue N", "stop N") allowed per file: none (the list is empty
/// since the tenth session removed the last ones; an entry here is a debt with a reason).
const TRACKER_REFS: &[(&str, usize)] = &[];

/// The workspace's crate folders, from the root `Cargo.toml`'s `members`.
fn members() -> Vec<String> {
    let text = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    let line = text
        .lines()
        .find(|l| l.starts_with("members"))
        .expect("a members line");
    line.split('"')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

fn rel(p: &Path) -> String {
    p.strip_prefix(root())
        .unwrap_or(p)
        .to_string_lossy()
        .replace("/./", "/")
        .trim_start_matches("./")
        .to_string()
}

/// `text` with comments, string and char literals blanked (newlines kept), so braces and
/// keywords are counted in code only.
fn code_only(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    let blank = |c: u8| if c == b'\n' { b'\n' } else { b' ' };
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied().unwrap_or(0);
        if c == b'/' && next == b'/' {
            while i < b.len() && b[i] != b'\n' {
                out.push(b' ');
                i += 1;
            }
        } else if c == b'/' && next == b'*' {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                    depth += 1;
                    out.extend_from_slice(b"  ");
                    i += 2;
                } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                    depth -= 1;
                    out.extend_from_slice(b"  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(b[i]));
                    i += 1;
                }
            }
        } else if c == b'r' && (next == b'"' || next == b'#') && !prev_ident(b, i) {
            // A raw string r"…" or r#"…"#.
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&b'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&b'"') {
                out.push(c);
                i += 1;
                continue;
            }
            out.resize(out.len() + (j + 1 - i), b' ');
            i = j + 1;
            while i < b.len() {
                if b[i] == b'"' && (0..hashes).all(|h| b.get(i + 1 + h) == Some(&b'#')) {
                    out.resize(out.len() + 1 + hashes, b' ');
                    i += 1 + hashes;
                    break;
                }
                out.push(blank(b[i]));
                i += 1;
            }
        } else if c == b'"' {
            out.push(b' ');
            i += 1;
            while i < b.len() && b[i] != b'"' {
                if b[i] == b'\\' {
                    out.push(b' ');
                    i += 1;
                }
                if i < b.len() {
                    out.push(blank(b[i]));
                    i += 1;
                }
            }
            out.push(b' ');
            i += 1;
        } else if c == b'\'' {
            // A char literal ('{', '\n', '\u{7f}') or a lifetime ('a): blank only the former.
            let end = if next == b'\\' {
                b[i + 2..]
                    .iter()
                    .position(|&x| x == b'\'')
                    .map(|p| i + 2 + p)
            } else if b.get(i + 2) == Some(&b'\'') {
                Some(i + 2)
            } else {
                None
            };
            match end {
                Some(e) => {
                    out.resize(out.len() + (e + 1 - i), b' ');
                    i = e + 1;
                }
                None => {
                    out.push(c);
                    i += 1;
                }
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn prev_ident(b: &[u8], i: usize) -> bool {
    i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_')
}

/// Every `fn` with a body in `code`: (name, lines from the `fn` line to its closing brace).
fn fn_lengths(code: &str) -> Vec<(String, usize)> {
    let lines: Vec<&str> = code.lines().collect();
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let Some(at) = find_fn(l) else {
            continue;
        };
        let name: String = l[at + 3..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        // The body: from the first `{` after the signature (a `;` first: no body) to its match.
        let mut depth = 0i64;
        let mut opened = false;
        let mut end = None;
        'scan: for (j, line) in lines.iter().enumerate().skip(i) {
            let start = if j == i { at } else { 0 };
            for ch in line[start..].chars() {
                match ch {
                    ';' if !opened && depth == 0 => break 'scan,
                    '{' => {
                        depth += 1;
                        opened = true;
                    }
                    '}' => {
                        depth -= 1;
                        if opened && depth == 0 {
                            end = Some(j);
                            break 'scan;
                        }
                    }
                    _ => {}
                }
            }
        }
        if let Some(e) = end {
            out.push((name, e - i + 1));
        }
    }
    out
}

/// Where `fn ` starts as a keyword in `line`, if it does.
fn find_fn(line: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(p) = line[from..].find("fn ") {
        let at = from + p;
        let before = line[..at].chars().last();
        if before.is_none_or(|c| c == ' ' || c == '(' || c == '\t') {
            let rest = &line[at + 3..];
            if rest.starts_with(|c: char| c.is_alphabetic() || c == '_') {
                return Some(at);
            }
        }
        from = at + 3;
    }
    None
}

/// "issue 12", "Issue 3", "stop 18" (a number after the word).
fn tracker_refs(text: &str) -> usize {
    let mut n = 0;
    for w in ["issue ", "Issue ", "stop ", "Stop "] {
        let mut from = 0;
        while let Some(p) = text[from..].find(w) {
            let at = from + p;
            let before = text[..at].chars().last();
            let after = text[at + w.len()..].chars().next();
            if before.is_none_or(|c| !c.is_alphanumeric())
                && after.is_some_and(|c| c.is_ascii_digit())
            {
                n += 1;
            }
            from = at + w.len();
        }
    }
    n
}

#[test]
fn no_function_grows_past_150_lines() {
    let known: BTreeMap<(&str, &str), usize> =
        LONG_FNS.iter().map(|&(f, n, l)| ((f, n), l)).collect();
    let mut bad = Vec::new();
    let mut shorter = Vec::new();
    let mut seen_long = std::collections::BTreeSet::new();
    for m in members() {
        let mut files = Vec::new();
        rs_files(&root().join(&m).join("src"), &mut files);
        for f in files {
            let code = code_only(&std::fs::read_to_string(&f).unwrap());
            let name = rel(&f);
            for (func, len) in fn_lengths(&code) {
                if len <= FN_LINES_MAX {
                    continue;
                }
                seen_long.insert((name.clone(), func.clone()));
                match known.get(&(name.as_str(), func.as_str())) {
                    Some(&max) if len <= max => {
                        if len < max {
                            shorter.push(format!("(\"{name}\", \"{func}\", {len}),"));
                        }
                    }
                    Some(&max) => {
                        bad.push(format!("{name}: fn {func} grew to {len} lines (was {max})"))
                    }
                    None => bad.push(format!(
                        "{name}: fn {func} is {len} lines (at most {FN_LINES_MAX}): split it"
                    )),
                }
            }
        }
    }
    for &(f, n, _) in LONG_FNS {
        if !seen_long.contains(&(f.to_string(), n.to_string())) {
            shorter.push(format!(
                "remove (\"{f}\", \"{n}\", ..): now at most {FN_LINES_MAX} lines"
            ));
        }
    }
    if !shorter.is_empty() {
        println!("tidy: lower these in LONG_FNS:\n{}", shorter.join("\n"));
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn no_file_grows_past_1500_lines() {
    let known: BTreeMap<&str, usize> = LONG_FILES.iter().copied().collect();
    let mut bad = Vec::new();
    for m in members() {
        let mut files = Vec::new();
        rs_files(&root().join(&m), &mut files);
        for f in files {
            let name = rel(&f);
            if name.contains("/target/") {
                continue;
            }
            let n = std::fs::read_to_string(&f).unwrap().lines().count();
            let max = known.get(name.as_str()).copied().unwrap_or(FILE_LINES_MAX);
            if n > max {
                bad.push(format!("{name}: {n} lines (at most {max}): split it"));
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// The top-level module a source file of `src` belongs to (`None`: the crate root).
fn top_module(src: &Path, f: &Path) -> Option<String> {
    let rel = f.strip_prefix(src).ok()?;
    let first = rel
        .components()
        .next()?
        .as_os_str()
        .to_string_lossy()
        .to_string();
    let name = first.trim_end_matches(".rs").to_string();
    (!matches!(name.as_str(), "lib" | "main")).then_some(name)
}

/// The circles (strongly connected sets of two or more) of a module graph, each sorted.
fn circles(edges: &BTreeMap<String, std::collections::BTreeSet<String>>) -> Vec<Vec<String>> {
    // Reachability by a walk from each node (a crate has tens of modules).
    let reach = |from: &String| {
        let mut seen = std::collections::BTreeSet::new();
        let mut todo = vec![from.clone()];
        while let Some(n) = todo.pop() {
            for m in edges.get(&n).into_iter().flatten() {
                if seen.insert(m.clone()) {
                    todo.push(m.clone());
                }
            }
        }
        seen
    };
    let reaches: BTreeMap<&String, std::collections::BTreeSet<String>> =
        edges.keys().map(|k| (k, reach(k))).collect();
    let mut out: Vec<Vec<String>> = Vec::new();
    for (k, r) in &reaches {
        let mut c: Vec<String> = r
            .iter()
            .filter(|m| *m != *k && reaches.get(m).is_some_and(|rm| rm.contains(*k)))
            .cloned()
            .collect();
        if c.is_empty() {
            continue;
        }
        c.push((*k).clone());
        c.sort();
        if !out.contains(&c) {
            out.push(c);
        }
    }
    out
}

#[test]
fn no_new_import_circles_inside_a_crate() {
    let mut bad = Vec::new();
    let mut gone = Vec::new();
    let mut found_known = Vec::new();
    for m in members() {
        let src = root().join(&m).join("src");
        let mut files = Vec::new();
        rs_files(&src, &mut files);
        let mut edges: BTreeMap<String, std::collections::BTreeSet<String>> = BTreeMap::new();
        for f in files {
            let Some(me) = top_module(&src, &f) else {
                continue;
            };
            let text = std::fs::read_to_string(&f).unwrap();
            // Unit tests may reach anywhere: only the code before a file's first test module.
            let code = code_only(&text);
            let code = code.split("#[cfg(test)]").next().unwrap_or("");
            let e = edges.entry(me.clone()).or_default();
            let mut rest = code;
            while let Some(p) = rest.find("crate::") {
                let after = &rest[p + 7..];
                let name: String = after
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() && name != me && name.starts_with(|c: char| c.is_lowercase()) {
                    e.insert(name);
                }
                rest = after;
            }
        }
        for c in circles(&edges) {
            let known = CIRCLES
                .iter()
                .any(|(k, mods)| *k == m && mods.iter().copied().eq(c.iter().map(String::as_str)));
            if known {
                found_known.push((m.clone(), c));
            } else {
                bad.push(format!("{m}: modules {c:?} import each other in a circle"));
            }
        }
    }
    for (k, mods) in CIRCLES {
        if !found_known
            .iter()
            .any(|(m, c)| m == k && mods.iter().copied().eq(c.iter().map(String::as_str)))
        {
            gone.push(format!("remove ({k:?}, {mods:?}) from CIRCLES: it is open"));
        }
    }
    if !gone.is_empty() {
        println!("tidy:\n{}", gone.join("\n"));
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn no_new_references_to_the_tracker_in_code() {
    let known: BTreeMap<&str, usize> = TRACKER_REFS.iter().copied().collect();
    let mut files = Vec::new();
    for m in members() {
        rs_files(&root().join(&m), &mut files);
        files.push(root().join(&m).join("Cargo.toml"));
    }
    files.push(root().join("Cargo.toml"));
    let mut bad = Vec::new();
    let mut lower = Vec::new();
    for f in files {
        let Ok(text) = std::fs::read_to_string(&f) else {
            continue;
        };
        let name = rel(&f);
        // This file names the words it looks for.
        if name.ends_with("cli/tests/tidy.rs") {
            continue;
        }
        let n = tracker_refs(&text);
        let max = known.get(name.as_str()).copied().unwrap_or(0);
        if n > max {
            bad.push(format!(
                "{name}: {n} references to an issue or a stop (at most {max}): say what the code does and cite 07"
            ));
        } else if n < max {
            lower.push(format!("(\"{name}\", {n}),"));
        }
    }
    if !lower.is_empty() {
        println!("tidy: lower these in TRACKER_REFS:\n{}", lower.join("\n"));
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn a_crate_without_unsafe_forbids_it() {
    let mut bad = Vec::new();
    for m in members() {
        let src = root().join(&m).join("src");
        let mut files = Vec::new();
        rs_files(&src, &mut files);
        let any_unsafe = files.iter().any(|f| {
            let code = code_only(&std::fs::read_to_string(f).unwrap());
            code.split(|c: char| !c.is_alphanumeric() && c != '_')
                .any(|w| w == "unsafe")
        });
        if any_unsafe {
            continue;
        }
        for root_file in ["lib.rs", "main.rs"] {
            let p = src.join(root_file);
            if let Ok(t) = std::fs::read_to_string(&p) {
                if !t.contains("#![forbid(unsafe_code)]") {
                    bad.push(format!(
                        "{}: no unsafe in the crate, so #![forbid(unsafe_code)]",
                        rel(&p)
                    ));
                }
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn the_scanner_counts_what_it_should() {
    let code = code_only(
        "fn a() {\n  let s = \"}\"; let c = '{';\n  // }\n  /* { */\n  let r = r#\"}\"#;\n}\nfn b(x: u8) -> u8;\nfn c<'a>(x: &'a str) {\n}\n",
    );
    assert_eq!(
        fn_lengths(&code),
        vec![("a".to_string(), 6), ("c".to_string(), 2)]
    );
    assert_eq!(
        tracker_refs("see issue 12 and stop 3; tissue 4; issue x"),
        2
    );
}
