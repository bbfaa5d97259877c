//! What the home file's tests share.
#![allow(dead_code)] // each test file uses its own part

use std::path::PathBuf;

/// A fresh temporary folder for test `name` of this process.
pub fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("vyrn-home-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// Line (1-based) of the first line of `text` containing `needle`.
pub fn line_of(text: &str, needle: &str) -> usize {
    1 + text
        .lines()
        .position(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("{needle:?} not in the text"))
}
