//! Typed errors: the `REP_E_*` codes of 07 §3.12 and byte-level `Malformed` reasons.

use core::fmt;

/// Why bytes could not be parsed at all (a codec-level error, before any protocol rule).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Malformed {
    /// The input ended inside a field.
    Truncated,
    /// A LEB128 value longer than 10 bytes or too wide for its field (wire-decisions 17).
    LebTooWide,
    /// A delta sum overflowed (wire-decisions 18).
    Overflow,
    /// Wrong magic number.
    BadMagic,
    /// Unsupported version.
    BadVersion,
    /// Unknown kind/type byte.
    BadKind,
    /// A length field disagrees with the bytes present.
    BadLength,
    /// A reserved field or bit is not zero.
    Reserved,
    /// A field value outside its allowed range.
    BadValue,
    /// A count above its bound (allocation guard).
    TooMany,
    /// An authentication tag did not verify.
    BadTag,
}

impl Malformed {
    /// Stable lower-case name, for counters and logs.
    pub const fn name(self) -> &'static str {
        match self {
            Malformed::Truncated => "truncated",
            Malformed::LebTooWide => "leb_too_wide",
            Malformed::Overflow => "overflow",
            Malformed::BadMagic => "bad_magic",
            Malformed::BadVersion => "bad_version",
            Malformed::BadKind => "bad_kind",
            Malformed::BadLength => "bad_length",
            Malformed::Reserved => "reserved_nonzero",
            Malformed::BadValue => "bad_value",
            Malformed::TooMany => "too_many",
            Malformed::BadTag => "bad_tag",
        }
    }
}

impl fmt::Display for Malformed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::error::Error for Malformed {}

/// Order-stream error codes (07 §3.12, "Local definitions": `REP_E_*`). Every one is a
/// sequencer fault. `Frame` is this project's addition for bytes that do not parse (truncation,
/// over-wide LEB128, overflow, bad frame header), where 07 names no code; see `docs/wire.md`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RepE {
    /// Reserved or misplaced section tag, lane outside its half, wrong frame kind.
    Tag,
    /// PacketRecord count 11..15, bad slot, Advance/AcctTake misuse.
    Count,
    /// rx_ts out of range.
    Ts,
    /// Kind 9..15 or a kind-table violation.
    Kind,
    /// Cut decrease, cut above decoded ops, bad mode, src naming no decoded op, BlockMark mismatch.
    Cut,
    /// TenureStart missing, misplaced or inconsistent.
    Tenure,
    /// A record waited too long for its hash, or hashes out of step with records.
    HashLag,
    /// Bytes that do not parse (project addition).
    Frame,
}

impl RepE {
    /// The spec's name, e.g. `REP_E_CUT`.
    pub const fn code(self) -> &'static str {
        match self {
            RepE::Tag => "REP_E_TAG",
            RepE::Count => "REP_E_COUNT",
            RepE::Ts => "REP_E_TS",
            RepE::Kind => "REP_E_KIND",
            RepE::Cut => "REP_E_CUT",
            RepE::Tenure => "REP_E_TENURE",
            RepE::HashLag => "REP_E_HASHLAG",
            RepE::Frame => "REP_E_FRAME",
        }
    }
    /// All codes, for counters.
    pub const ALL: [RepE; 8] = [
        RepE::Tag,
        RepE::Count,
        RepE::Ts,
        RepE::Kind,
        RepE::Cut,
        RepE::Tenure,
        RepE::HashLag,
        RepE::Frame,
    ];
    /// Index into [`RepE::ALL`].
    pub const fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for RepE {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

/// An order-stream error with its position (07 §3.12: "records the error with (epoch, tenure,
/// stream, frame_seq)").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RepErr {
    /// The code.
    pub code: RepE,
    /// Epoch (from TenureStart; the low 16 bits from the frame header before it).
    pub epoch: u32,
    /// Tenure.
    pub tenure: u8,
    /// Substream.
    pub stream: u8,
    /// Frame in which the error was found.
    pub frame_seq: u64,
    /// Which rule failed (stable text, for logs).
    pub detail: &'static str,
}

impl fmt::Display for RepErr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} at epoch {} tenure {} stream {} frame_seq {}: {}",
            self.code, self.epoch, self.tenure, self.stream, self.frame_seq, self.detail
        )
    }
}

impl std::error::Error for RepErr {}

/// A protocol error without position; the decoder adds the position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct E(pub RepE, pub &'static str);

impl From<Malformed> for E {
    fn from(m: Malformed) -> Self {
        E(RepE::Frame, m.name())
    }
}

/// Shorthand for an error result.
#[inline(always)]
pub(crate) fn fail<T>(code: RepE, detail: &'static str) -> Result<T, E> {
    Err(E(code, detail))
}
