//! The engine's configuration (missing-chapters §2–§3): the book, its lanes, sessions with
//! their keys and slots, accounts with their risk limits, and the two deadlines.
//!
//! In v1 sessions, accounts, keys and lane/slot bindings come from the home's config file
//! (missing-chapters §2). Every account trades on exactly one lane (all its sessions are bound
//! to that lane), so its risk state has a single writer — the lane (`docs/engine.md`).

use crate::book::BookConfig;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use vyrn_wire::consts::MAX_SESSIONS_PER_LANE;
use vyrn_wire::layout::Layout;
use vyrn_wire::msg::client::SipKey;

/// One client session (missing-chapters §2).
#[derive(Clone, PartialEq, Eq)]
pub struct SessionCfg {
    /// SessionId, nonzero.
    pub session: u32,
    /// The account it trades for.
    pub account: u32,
    /// Its lane.
    pub lane: u8,
    /// Its lane-local slot (< MAX_SESSIONS_PER_LANE), logged by SessionBind (07 §3.5).
    pub slot: u16,
    /// `K_seq`: request tags.
    pub k_seq: SipKey,
    /// `K_out`: response tags.
    pub k_out: SipKey,
    /// The TX core that owns the client port this session's responses leave by (07 §4.1).
    pub tx: u8,
}

impl fmt::Debug for SessionCfg {
    // Keys are secrets: never printed.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SessionCfg")
            .field("session", &self.session)
            .field("account", &self.account)
            .field("lane", &self.lane)
            .field("slot", &self.slot)
            .field("tx", &self.tx)
            .finish_non_exhaustive()
    }
}

/// One account and its risk limits (missing-chapters §3: max order qty, max open orders, max
/// exposure).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AccountCfg {
    /// AccountId.
    pub account: u32,
    /// Largest quantity of one New (`RISK_QTY` above it).
    pub max_order_qty: u32,
    /// Most working orders at once (`RISK_OPEN` at it).
    pub max_open_orders: u32,
    /// Largest signed exposure on either side: `position + open buys` and
    /// `−position + open sells` must stay ≤ this (`RISK_EXPOSURE` above it).
    pub max_exposure: u64,
}

/// The engine's whole configuration.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// The book served (`BookId`).
    pub book: u16,
    /// Lanes and substreams.
    pub layout: Layout,
    /// Book limits.
    pub book_cfg: BookConfig,
    /// Sessions.
    pub sessions: Vec<SessionCfg>,
    /// Accounts.
    pub accounts: Vec<AccountCfg>,
    /// Lane deadline admission: a packet older than this at its lane (now − rx_ts) is shed
    /// whole and answered `BUSY` (07 §3.6 SHED). `None`: never.
    pub lane_deadline_ns: Option<u64>,
    /// BBO deadline admission: an op older than this when the BBO core would step it becomes a
    /// `Shed` step, and its lane answers `BUSY` (07 §3.8). `None`: never.
    pub bbo_deadline_ns: Option<u64>,
    /// Bytes of each lane's hot response ring (resends, 07 §9.5).
    pub hot_ring_bytes: usize,
    /// Most working orders a lane tracks (sizes its tables up front).
    pub lane_max_orders: usize,
}

/// A configuration the engine refuses, with what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigError {
    /// The layout is invalid.
    Layout(&'static str),
    /// Session 0 is reserved.
    ZeroSession,
    /// A session appears twice.
    DuplicateSession(u32),
    /// A session's lane is not below `n_lanes`.
    LaneOutOfRange { session: u32, lane: u8 },
    /// A slot ≥ MAX_SESSIONS_PER_LANE.
    SlotOutOfRange { session: u32, slot: u16 },
    /// Two sessions share a lane and slot.
    SlotTaken { lane: u8, slot: u16 },
    /// A session's account is not configured.
    UnknownAccount { session: u32, account: u32 },
    /// An account appears twice.
    DuplicateAccount(u32),
    /// An account has sessions on two lanes (its risk state needs one writer).
    AccountOnTwoLanes { account: u32, lanes: (u8, u8) },
    /// The hot response ring is smaller than 4 KiB.
    HotRingTooSmall(usize),
    /// Pooled lanes (AcctTake) are a later version (missing-chapters §3).
    PooledLanes,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

impl std::error::Error for ConfigError {}

impl EngineConfig {
    /// Check everything the engine relies on.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.layout.validate().map_err(ConfigError::Layout)?;
        if self.layout.pool_mask != 0 {
            return Err(ConfigError::PooledLanes);
        }
        if self.hot_ring_bytes < 4096 {
            return Err(ConfigError::HotRingTooSmall(self.hot_ring_bytes));
        }
        let mut accounts = BTreeSet::new();
        for a in &self.accounts {
            if !accounts.insert(a.account) {
                return Err(ConfigError::DuplicateAccount(a.account));
            }
        }
        let mut sessions = BTreeSet::new();
        let mut slots = BTreeSet::new();
        let mut account_lane: BTreeMap<u32, u8> = BTreeMap::new();
        for s in &self.sessions {
            if s.session == 0 {
                return Err(ConfigError::ZeroSession);
            }
            if !sessions.insert(s.session) {
                return Err(ConfigError::DuplicateSession(s.session));
            }
            if s.lane >= self.layout.n_lanes {
                return Err(ConfigError::LaneOutOfRange {
                    session: s.session,
                    lane: s.lane,
                });
            }
            if s.slot as usize >= MAX_SESSIONS_PER_LANE {
                return Err(ConfigError::SlotOutOfRange {
                    session: s.session,
                    slot: s.slot,
                });
            }
            if !slots.insert((s.lane, s.slot)) {
                return Err(ConfigError::SlotTaken {
                    lane: s.lane,
                    slot: s.slot,
                });
            }
            if !accounts.contains(&s.account) {
                return Err(ConfigError::UnknownAccount {
                    session: s.session,
                    account: s.account,
                });
            }
            if let Some(&l) = account_lane.get(&s.account) {
                if l != s.lane {
                    return Err(ConfigError::AccountOnTwoLanes {
                        account: s.account,
                        lanes: (l, s.lane),
                    });
                }
            }
            account_lane.insert(s.account, s.lane);
        }
        Ok(())
    }

    /// [`EngineConfig::test_home`] with risk limits and books no flow of the benches reaches
    /// (every order is taken on its merits: figures at a mix measure the mix, not the limits).
    pub fn unlimited_home(n_lanes: u8, sessions_per_lane: u16) -> Self {
        let mut c = Self::test_home(n_lanes, sessions_per_lane);
        for a in c.accounts.iter_mut() {
            a.max_order_qty = 1 << 20;
            a.max_open_orders = 1 << 20;
            a.max_exposure = 1 << 40;
        }
        c.book_cfg.max_orders = 1 << 20;
        c.lane_max_orders = 1 << 18;
        c
    }

    /// A small, valid configuration for tests, benches and the dev profile: `n_lanes` lanes on
    /// two substreams, `sessions_per_lane` sessions per lane, one account per two sessions,
    /// keys derived from the session id (never use derived keys outside tests).
    pub fn test_home(n_lanes: u8, sessions_per_lane: u16) -> Self {
        let mut sessions = Vec::new();
        let mut accounts = Vec::new();
        for l in 0..n_lanes {
            for k in 0..sessions_per_lane {
                let session = 1 + l as u32 * 10_000 + k as u32;
                let account = 1_000_000 + l as u32 * 10_000 + (k / 2) as u32;
                if k % 2 == 0 {
                    accounts.push(AccountCfg {
                        account,
                        max_order_qty: 1_000,
                        max_open_orders: 64,
                        max_exposure: 20_000,
                    });
                }
                sessions.push(SessionCfg {
                    session,
                    account,
                    lane: l,
                    slot: k,
                    k_seq: test_key(session, 0x5e),
                    k_out: test_key(session, 0x0d),
                    tx: l % 3,
                });
            }
        }
        EngineConfig {
            book: 1,
            layout: Layout::two_streams(n_lanes.max(2)),
            book_cfg: BookConfig {
                max_orders: 1 << 16,
            },
            sessions,
            accounts,
            lane_deadline_ns: None,
            bbo_deadline_ns: None,
            hot_ring_bytes: 1 << 20,
            lane_max_orders: 1 << 14,
        }
    }
}

/// A key derived from a session id (tests only).
pub fn test_key(session: u32, salt: u8) -> SipKey {
    let mut k = [salt; 16];
    k[..4].copy_from_slice(&session.to_le_bytes());
    k
}
