//! The data box's configuration (07 §5.1, §5.2, §5.7): a plain struct, checked once by
//! [`DataConfig::validate`], which returns a typed [`ConfigError`] for every way it can be wrong.
//! Every table the box uses is sized from it when the box is built and never grows afterwards.

use core::fmt;
use std::net::SocketAddr;

use vyrn_wire::consts::{REP_DATA_BATCH_US, REP_DATA_RING_S};
use vyrn_wire::msg::client::SipKey;
use vyrn_wire::msg::{MAX_MEMBERS, Q_BASE};

/// The store's sizes, which the memory bound counts (the store owns its layout).
pub use crate::store::{INDEX_ENTRY_BYTES, RING_SLOT_BYTES};

/// A data box sends `DATA_HB` every this many µs when it has nothing else to send (07 §5.3).
pub const DATA_HB_US: u64 = 100;
/// Most books one box serves: each has its own open data frame (the frame header names one
/// book, 07 §5.3). Project bound.
pub const MAX_BOOKS: usize = 16;
/// Most sessions one box knows. Project bound: 2^22, far above a home's sessions.
pub const MAX_SESSIONS: usize = 1 << 22;
/// Most destinations: the voters plus the standby (07 §5.1: 5 or 6), bounded by the
/// membership bound.
pub const MAX_DESTS: usize = MAX_MEMBERS;
/// Most data frames one `DataFetch::Range` is answered with; the rest of the range is
/// ignored and counted (project bound: 64 frames ≈ 576 kB of answer per request).
pub const FETCH_RANGE_MAX: u64 = 64;
/// Bytes of one frame-log entry (one per ring slot: a frame holds at least one packet).
pub const FRAME_LOG_BYTES: u64 = 32;

/// One client session this box can verify (missing-chapters §2: keys come from the home's
/// config file in v1).
#[derive(Clone, PartialEq, Eq)]
pub struct SessionConfig {
    /// `SessionId`.
    pub session: u32,
    /// `K_seq`: the tag key of the session's request packets (07 §5.2 MAC, BASE).
    pub k_seq: SipKey,
    /// `K_out`: the tag key of response packets, used to relay `DataRedirect` (07 §5.7).
    pub k_out: SipKey,
    /// The session's data home: a data box index (07 §5.1).
    pub home: u8,
    /// The session's bound address where known in advance; otherwise it is learned from the
    /// copies received (07 §5.7).
    pub addr: Option<SocketAddr>,
}

impl fmt::Debug for SessionConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Keys are secrets: never printed.
        f.debug_struct("SessionConfig")
            .field("session", &self.session)
            .field("home", &self.home)
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

/// One destination of the fan-out: a voter or the warm standby (07 §5.1). The driver wires
/// destination `i` to its `i`-th replica port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DestConfig {
    /// A name for counters and logs ("R1", "standby").
    pub name: String,
    /// Whether its `DataDown` gossip counts toward the quorum (voters do; the standby does not).
    pub voter: bool,
}

/// Ring sizing (07 §5.1: `REP_DATA_RING_S` of peak traffic).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingConfig {
    /// Peak packets per second this box takes.
    pub pkts_per_s: u64,
    /// Seconds kept; `REP_DATA_RING_S` by default.
    pub seconds: u64,
    /// Memory the ring may take, bytes; a ring above it is a config error.
    pub max_bytes: u64,
}

impl RingConfig {
    /// Packets the ring holds: `pkts_per_s × seconds`.
    pub fn capacity(&self) -> u64 {
        self.pkts_per_s.saturating_mul(self.seconds)
    }

    /// Bytes the ring and its tables take: `capacity × (RING_SLOT_BYTES + FRAME_LOG_BYTES)`
    /// plus two indexes of `4 × capacity` entries (rounded up to a power of two) of
    /// `INDEX_ENTRY_BYTES` each.
    pub fn bytes(&self) -> u64 {
        let cap = self.capacity();
        let index = cap
            .saturating_mul(crate::store::INDEX_PER_SLOT as u64)
            .checked_next_power_of_two()
            .unwrap_or(u64::MAX)
            .max(crate::store::PROBE as u64);
        cap.saturating_mul(RING_SLOT_BYTES + FRAME_LOG_BYTES)
            .saturating_add(index.saturating_mul(2 * INDEX_ENTRY_BYTES))
    }
}

impl Default for RingConfig {
    /// A dev-box ring: 100k packets/s for `REP_DATA_RING_S`, at most 1 GiB.
    fn default() -> Self {
        RingConfig {
            pkts_per_s: 100_000,
            seconds: REP_DATA_RING_S,
            max_bytes: 1 << 30,
        }
    }
}

/// The whole configuration of one data box.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataConfig {
    /// This box's index in `REP_Membership.data_boxes`: the `src` of its data frames.
    pub index: u8,
    /// Every data box index of the home, in facility order (07 §5.7: the backup home of `d` is
    /// the next live box after `d` in this order, cyclically).
    pub boxes: Vec<u8>,
    /// Epoch; its low 16 bits go into every data frame.
    pub epoch: u32,
    /// Books this home serves (07 §5.2 parse).
    pub books: Vec<u16>,
    /// Sessions with their keys and data homes.
    pub sessions: Vec<SessionConfig>,
    /// Fan-out destinations, in port order.
    pub dests: Vec<DestConfig>,
    /// `DataDown` messages from distinct voters that make a box down (07 §5.7: Q).
    pub quorum: u8,
    /// Ring sizing.
    pub ring: RingConfig,
    /// Age at which an open data frame is sent, ns (`REP_DATA_BATCH_US`, 07 §5.2).
    pub batch_ns: u64,
    /// Idle time after which `DATA_HB` is sent, ns (07 §5.3: 100 µs).
    pub hb_ns: u64,
    /// Outgoing message buffers (data frames, fetch answers, reports, relays), each of
    /// `REP_DATA_FRAME_MAX` bytes, preallocated. A quarter of them at most hold control
    /// messages, so reports can never starve data frames.
    pub out_slots: usize,
    /// Seed of the index hash, so clients cannot aim packets at one probe window. Pick it at
    /// random in production; tests fix it.
    pub index_seed: u64,
}

impl DataConfig {
    /// A config with the spec's defaults: `REP_DATA_BATCH_US`, a 100 µs heartbeat, Q_BASE,
    /// the default ring, 256 out slots.
    pub fn new(index: u8, boxes: Vec<u8>, books: Vec<u16>) -> Self {
        DataConfig {
            index,
            boxes,
            epoch: 0,
            books,
            sessions: Vec::new(),
            dests: Vec::new(),
            quorum: Q_BASE,
            ring: RingConfig::default(),
            batch_ns: REP_DATA_BATCH_US * 1000,
            hb_ns: DATA_HB_US * 1000,
            out_slots: 256,
            index_seed: 0x9E37_79B9_7F4A_7C15,
        }
    }

    /// Check every rule; the first one broken is returned.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.validate_boxes()?;
        self.validate_books()?;
        self.validate_sessions()?;
        self.validate_dests()?;
        let cap = self.ring.capacity();
        if cap == 0 {
            return Err(ConfigError::RingEmpty);
        }
        if cap > u32::MAX as u64 {
            return Err(ConfigError::RingTooLarge {
                bytes: self.ring.bytes(),
                max_bytes: self.ring.max_bytes,
            });
        }
        if self.ring.bytes() > self.ring.max_bytes {
            return Err(ConfigError::RingTooLarge {
                bytes: self.ring.bytes(),
                max_bytes: self.ring.max_bytes,
            });
        }
        if self.batch_ns == 0 {
            return Err(ConfigError::BatchZero);
        }
        if self.hb_ns == 0 {
            return Err(ConfigError::HeartbeatZero);
        }
        if self.out_slots < 8 || self.out_slots > 1 << 16 {
            return Err(ConfigError::OutSlots(self.out_slots));
        }
        Ok(())
    }

    fn validate_boxes(&self) -> Result<(), ConfigError> {
        if self.boxes.is_empty() || self.boxes.len() > MAX_MEMBERS {
            return Err(ConfigError::BoxCount(self.boxes.len()));
        }
        for (i, b) in self.boxes.iter().enumerate() {
            if self.boxes[..i].contains(b) {
                return Err(ConfigError::DuplicateBox(*b));
            }
        }
        if !self.boxes.contains(&self.index) {
            return Err(ConfigError::IndexNotInBoxes(self.index));
        }
        Ok(())
    }

    fn validate_books(&self) -> Result<(), ConfigError> {
        if self.books.is_empty() || self.books.len() > MAX_BOOKS {
            return Err(ConfigError::BookCount(self.books.len()));
        }
        for (i, b) in self.books.iter().enumerate() {
            if self.books[..i].contains(b) {
                return Err(ConfigError::DuplicateBook(*b));
            }
        }
        Ok(())
    }

    fn validate_sessions(&self) -> Result<(), ConfigError> {
        if self.sessions.is_empty() || self.sessions.len() > MAX_SESSIONS {
            return Err(ConfigError::SessionCount(self.sessions.len()));
        }
        let mut ids: Vec<u32> = self.sessions.iter().map(|s| s.session).collect();
        ids.sort_unstable();
        if let Some(w) = ids.windows(2).find(|w| w[0] == w[1]) {
            return Err(ConfigError::DuplicateSession(w[0]));
        }
        if let Some(s) = self.sessions.iter().find(|s| !self.boxes.contains(&s.home)) {
            return Err(ConfigError::UnknownHome {
                session: s.session,
                home: s.home,
            });
        }
        Ok(())
    }

    fn validate_dests(&self) -> Result<(), ConfigError> {
        if self.dests.is_empty() || self.dests.len() > MAX_DESTS {
            return Err(ConfigError::DestCount(self.dests.len()));
        }
        let voters = self.dests.iter().filter(|d| d.voter).count();
        if self.quorum == 0 || self.quorum as usize > voters {
            return Err(ConfigError::Quorum {
                quorum: self.quorum,
                voters,
            });
        }
        Ok(())
    }
}

/// Why a [`DataConfig`] was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigError {
    /// `boxes` is empty or longer than `MAX_MEMBERS`.
    BoxCount(usize),
    /// A box index appears twice in `boxes`.
    DuplicateBox(u8),
    /// This box's `index` is not in `boxes`.
    IndexNotInBoxes(u8),
    /// `books` is empty or longer than [`MAX_BOOKS`].
    BookCount(usize),
    /// A book appears twice.
    DuplicateBook(u16),
    /// `sessions` is empty or longer than [`MAX_SESSIONS`].
    SessionCount(usize),
    /// A session id appears twice.
    DuplicateSession(u32),
    /// A session's home is not in `boxes`.
    UnknownHome {
        /// The session.
        session: u32,
        /// Its configured home.
        home: u8,
    },
    /// `dests` is empty or longer than [`MAX_DESTS`].
    DestCount(usize),
    /// `quorum` is 0 or above the number of voting destinations.
    Quorum {
        /// The configured quorum.
        quorum: u8,
        /// Voting destinations.
        voters: usize,
    },
    /// The ring holds no packet (`pkts_per_s × seconds` = 0).
    RingEmpty,
    /// The ring needs more memory than `ring.max_bytes` (or more than 2^32 slots).
    RingTooLarge {
        /// Bytes it would take.
        bytes: u64,
        /// The limit.
        max_bytes: u64,
    },
    /// `batch_ns` is 0.
    BatchZero,
    /// `hb_ns` is 0.
    HeartbeatZero,
    /// `out_slots` outside 8..=65536.
    OutSlots(usize),
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::BoxCount(n) => write!(f, "boxes: {n} entries, need 1..={MAX_MEMBERS}"),
            ConfigError::DuplicateBox(b) => write!(f, "boxes: data box {b} listed twice"),
            ConfigError::IndexNotInBoxes(b) => write!(f, "index {b} is not in boxes"),
            ConfigError::BookCount(n) => write!(f, "books: {n} entries, need 1..={MAX_BOOKS}"),
            ConfigError::DuplicateBook(b) => write!(f, "books: book {b} listed twice"),
            ConfigError::SessionCount(n) => {
                write!(f, "sessions: {n} entries, need 1..={MAX_SESSIONS}")
            }
            ConfigError::DuplicateSession(s) => write!(f, "sessions: session {s} listed twice"),
            ConfigError::UnknownHome { session, home } => {
                write!(f, "session {session}: home {home} is not in boxes")
            }
            ConfigError::DestCount(n) => write!(f, "dests: {n} entries, need 1..={MAX_DESTS}"),
            ConfigError::Quorum { quorum, voters } => {
                write!(
                    f,
                    "quorum {quorum} must be in 1..={voters} (voting destinations)"
                )
            }
            ConfigError::RingEmpty => write!(f, "ring: pkts_per_s × seconds is 0"),
            ConfigError::RingTooLarge { bytes, max_bytes } => {
                write!(f, "ring: {bytes} bytes exceeds max_bytes {max_bytes}")
            }
            ConfigError::BatchZero => write!(f, "batch_ns is 0"),
            ConfigError::HeartbeatZero => write!(f, "hb_ns is 0"),
            ConfigError::OutSlots(n) => write!(f, "out_slots {n} outside 8..=65536"),
        }
    }
}

impl std::error::Error for ConfigError {}
