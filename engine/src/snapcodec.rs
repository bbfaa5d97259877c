//! The snapshot codec's pieces at the bottom of the engine (07 §7.5): the error a refused
//! snapshot gets, the little-endian section writer, and the side byte. The lanes write their
//! section with them and `snapshot` writes the file; neither imports the other for them.

use crate::book::Side;
use std::fmt;
use vyrn_wire::error::Malformed;

/// Why a snapshot was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SnapError {
    /// Too short, or a field ran past its section.
    Malformed(Malformed),
    /// Not a REP_Snapshot file, or another version.
    Magic,
    /// The table or a section lies outside the file, or overlaps the header.
    Layout,
    /// A section's BLAKE3 does not match the table.
    SectionHash(u16),
    /// A section is missing or repeated, or the sections are out of order.
    Sections,
    /// The recomputed state commitment is not the header's `state_root`.
    StateRoot,
    /// The snapshot is for another book or lane count than the config.
    Config(&'static str),
    /// A section's content is impossible.
    Content(&'static str),
    /// The file was longer than its sections.
    Trailing,
}

impl From<Malformed> for SnapError {
    fn from(m: Malformed) -> Self {
        SnapError::Malformed(m)
    }
}

impl fmt::Display for SnapError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

impl std::error::Error for SnapError {}

/// A little-endian section writer.
#[derive(Debug, Default)]
pub(crate) struct W(pub Vec<u8>);

impl W {
    pub fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    pub fn u16(&mut self, v: u16) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    pub fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    pub fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    pub fn i32(&mut self, v: i32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
}

pub(crate) fn side_u8(s: Side) -> u8 {
    match s {
        Side::Buy => 0,
        Side::Sell => 1,
    }
}

pub(crate) fn side_from(v: u8) -> Result<Side, SnapError> {
    match v {
        0 => Ok(Side::Buy),
        1 => Ok(Side::Sell),
        _ => Err(SnapError::Content("side")),
    }
}
