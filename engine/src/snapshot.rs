//! Snapshots (07 §7.5): sections 1–7 in canonical order and encoding, the `REP_Snapshot` file
//! with its section table and hashes, the state commitment, and restore.
//!
//! Every section is little-endian, fixed-width, lists in a canonical order (never a hash map's
//! iteration order); the field lists are in `docs/engine.md`. The state commitment is the
//! BASE placeholder missing-chapters §0 fixes until CHAIN's function exists:
//! `BLAKE3("vyrn v1 state" ‖ for id in 1,2,3,4,6: id u16 ‖ len u64 ‖ section bytes)` — the
//! sections the loader recomputes it from (§7.5 "Loading").

use crate::bbo::{Bbo, Fwd, LaneEvent, Outcome};
use crate::book::BookReject;
use crate::config::EngineConfig;
use crate::lane::{kind_u8, Lane};
pub use crate::snapcodec::SnapError;
use crate::snapcodec::{side_u8, W};
use std::collections::VecDeque;
use vyrn_wire::leb::Reader;

/// `magic` of a REP_Snapshot file.
pub const SNAP_MAGIC: &[u8; 8] = b"PBSNAP01";
/// File format version.
pub const SNAP_VERSION: u32 = 1;
/// Header bytes.
pub const SNAP_HDR_BYTES: usize = 128;
/// Bytes of one section table entry.
pub const SNAP_TABLE_ENTRY_BYTES: usize = 56;
/// Domain of the BASE state commitment (missing-chapters §0).
pub const STATE_DOMAIN: &[u8] = b"vyrn v1 state";

/// Section ids (07 §7.5).
pub mod section {
    /// BookParams.
    pub const BOOK_PARAMS: u16 = 1;
    /// `Lane[l]`.
    pub const LANES: u16 = 2;
    /// Bbo.
    pub const BBO: u16 = 3;
    /// Timers.
    pub const TIMERS: u16 = 4;
    /// Decoder.
    pub const DECODER: u16 = 5;
    /// Sessions.
    pub const SESSIONS: u16 = 6;
    /// Replication.
    pub const REPLICATION: u16 = 7;
}

/// What the replication layer owns in section 7 (07 §7.5): the engine stores it as given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplicationState {
    /// Tenure.
    pub tenure: u8,
    /// `seq_order` (09 §9.5).
    pub seq_order: Vec<u8>,
    /// Deposed sequencers this epoch (bit per index).
    pub deposed: u64,
    /// BLAKE3 of the REP_Membership in force.
    pub membership_hash: [u8; 32],
    /// The root gate's cursor (the newest certified root height).
    pub root_gate_cursor: u64,
}

/// The header fields of a snapshot that the engine does not compute.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SnapMeta {
    /// Epoch.
    pub epoch: u32,
    /// Height: state after this block.
    pub height: u64,
    /// header_hash(height).
    pub header_hash: [u8; 32],
}

/// A read snapshot's header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapHeader {
    /// Book.
    pub book: u16,
    /// Lanes.
    pub n_lanes: u8,
    /// Epoch, height, header hash.
    pub meta: SnapMeta,
    /// last_step.
    pub last_step: u64,
    /// state_root.
    pub state_root: [u8; 32],
    /// File hash = BLAKE3(header ‖ table).
    pub file_hash: [u8; 32],
    /// Section 7.
    pub replication: ReplicationState,
}

/// Borrowed engine state (live or replay) for writing.
pub(crate) struct Parts<'a> {
    pub cfg: &'a EngineConfig,
    pub lanes: &'a [Lane],
    pub bbo: &'a Bbo,
    pub fwd: &'a [VecDeque<Fwd>],
    pub events: &'a [VecDeque<LaneEvent>],
}

fn outcome_put(w: &mut W, o: &Outcome) {
    let (code, a, b, c, d): (u8, i32, u32, u32, u8) = match *o {
        Outcome::Fill {
            price,
            qty,
            leaves,
            maker,
        } => (1, price, qty, leaves, maker as u8),
        Outcome::Rested { qty } => (2, 0, qty, 0, 0),
        Outcome::Out { qty } => (3, 0, qty, 0, 0),
        Outcome::Cancelled { qty } => (4, 0, qty, 0, 0),
        Outcome::Rejected(r) => (
            5,
            0,
            match r {
                BookReject::UnknownOrder => 1,
                BookReject::DuplicateTag => 2,
                BookReject::BadQty => 3,
                BookReject::BookFull => 4,
            },
            0,
            0,
        ),
        Outcome::Halted => (6, 0, 0, 0, 0),
        Outcome::Shed => (7, 0, 0, 0, 0),
        Outcome::Done => (8, 0, 0, 0, 0),
        Outcome::Halt => (9, 0, 0, 0, 0),
        Outcome::Resume => (10, 0, 0, 0, 0),
        Outcome::Sealed => (11, 0, 0, 0, 0),
        Outcome::End => (12, 0, 0, 0, 0),
        Outcome::Excluded => (13, 0, 0, 0, 0),
    };
    w.u8(code);
    w.i32(a);
    w.u32(b);
    w.u32(c);
    w.u8(d);
}

pub(crate) fn outcome_get(r: &mut Reader<'_>) -> Result<Outcome, SnapError> {
    let code = r.u8()?;
    let a = r.u32_le()? as i32;
    let b = r.u32_le()?;
    let c = r.u32_le()?;
    let d = r.u8()?;
    Ok(match code {
        1 => Outcome::Fill {
            price: a,
            qty: b,
            leaves: c,
            maker: d != 0,
        },
        2 => Outcome::Rested { qty: b },
        3 => Outcome::Out { qty: b },
        4 => Outcome::Cancelled { qty: b },
        5 => Outcome::Rejected(match b {
            1 => BookReject::UnknownOrder,
            2 => BookReject::DuplicateTag,
            3 => BookReject::BadQty,
            4 => BookReject::BookFull,
            _ => return Err(SnapError::Content("book reject")),
        }),
        6 => Outcome::Halted,
        7 => Outcome::Shed,
        8 => Outcome::Done,
        9 => Outcome::Halt,
        10 => Outcome::Resume,
        11 => Outcome::Sealed,
        12 => Outcome::End,
        13 => Outcome::Excluded,
        _ => return Err(SnapError::Content("event kind")),
    })
}

fn none_u64(v: Option<u64>) -> u64 {
    v.unwrap_or(u64::MAX)
}

/// The seven sections, in canonical order.
pub(crate) fn sections(p: &Parts<'_>, rep: &ReplicationState) -> [(u16, Vec<u8>); 7] {
    let cfg = p.cfg;
    let n = cfg.layout.n_lanes as usize;
    // 1 BookParams.
    let mut w = W::default();
    w.u16(cfg.book);
    w.u8(cfg.layout.n_lanes);
    w.u8(cfg.layout.n_streams);
    w.u32(cfg.book_cfg.max_orders);
    w.u64(none_u64(cfg.lane_deadline_ns));
    w.u64(none_u64(cfg.bbo_deadline_ns));
    let mut accts: Vec<_> = cfg.accounts.iter().collect();
    accts.sort_by_key(|a| a.account);
    w.u32(accts.len() as u32);
    for a in accts {
        w.u32(a.account);
        w.u32(a.max_order_qty);
        w.u32(a.max_open_orders);
        w.u64(a.max_exposure);
    }
    let s1 = w.0;
    // 2 Lane[l], ascending l.
    let mut w = W::default();
    for lane in p.lanes {
        lane.snap_lane(&mut w);
    }
    let s2 = w.0;
    // 3 Bbo.
    let mut w = W::default();
    let b = p.bbo;
    w.u64(b.next_step());
    let (na, nb) = b.need();
    w.u64(na);
    w.u64(nb);
    w.u64(b.halted().unwrap_or(0));
    w.u8(b.sealed() as u8);
    for &c in b.cut() {
        w.u64(c);
    }
    let orders = b.book().orders();
    w.u32(orders.len() as u32);
    for o in &orders {
        w.u32(o.session);
        w.u32(o.account);
        w.u32(o.client_tag);
        w.u8(side_u8(o.side));
        w.i32(o.tick);
        w.u32(o.open);
        w.u64(o.time);
        w.u64(o.cookie);
    }
    for l in 0..n {
        w.u32(p.fwd[l].len() as u32);
        for f in &p.fwd[l] {
            w.u64(f.lane_seq);
            w.u64(f.rx_ts);
            w.u8(kind_u8(f.op.kind));
            w.u32(f.op.session);
            w.u32(f.op.account);
            w.u32(f.op.client_tag);
            w.u8(side_u8(f.op.side));
            w.i32(f.op.tick);
            w.u32(f.op.qty);
            w.u64(f.op.cookie);
        }
        w.u32(p.events[l].len() as u32);
        for e in &p.events[l] {
            w.u64(e.step);
            w.u64(e.need_a);
            w.u64(e.need_b);
            w.u32(e.session);
            w.u32(e.client_tag);
            w.u64(e.cookie);
            w.u8(side_u8(e.side));
            outcome_put(&mut w, &e.what);
        }
    }
    let s3 = w.0;
    // 4 Timers: v1 has none.
    let s4 = 0u32.to_le_bytes().to_vec();
    // 5 Decoder: LaneDec mirrors, then StepDec per substream (prev_step = need_H, this half's cut).
    let mut w = W::default();
    for lane in p.lanes {
        lane.snap_decoder(&mut w);
    }
    for h in 0..cfg.layout.n_streams {
        w.u64(if h == 0 { na } else { nb });
        let a = cfg.layout.half_start(h);
        for &c in &b.cut()[a..a + cfg.layout.half_len(h)] {
            w.u64(c);
        }
    }
    let s5 = w.0;
    // 6 Sessions, ascending by SessionId.
    let mut ss = Vec::new();
    for lane in p.lanes {
        lane.snap_sessions(&mut ss);
    }
    ss.sort_unstable_by_key(|e| e.0);
    let mut w = W::default();
    w.u32(ss.len() as u32);
    for (session, account, lane, slot, last, next_resp) in ss {
        w.u32(session);
        w.u32(account);
        w.u8(lane);
        w.u16(slot);
        w.u32(last);
        w.u64(next_resp);
    }
    let s6 = w.0;
    // 7 Replication.
    let mut w = W::default();
    w.u8(rep.tenure);
    w.u8(rep.seq_order.len().min(255) as u8);
    for &s in rep.seq_order.iter().take(255) {
        w.u8(s);
    }
    w.u64(rep.deposed);
    w.0.extend_from_slice(&rep.membership_hash);
    w.u64(rep.root_gate_cursor);
    let s7 = w.0;
    [
        (section::BOOK_PARAMS, s1),
        (section::LANES, s2),
        (section::BBO, s3),
        (section::TIMERS, s4),
        (section::DECODER, s5),
        (section::SESSIONS, s6),
        (section::REPLICATION, s7),
    ]
}

/// The state commitment over sections 1–4 and 6 (module docs).
pub fn state_root(secs: &[(u16, &[u8])]) -> [u8; 32] {
    let mut h = blake3::Hasher::new();
    h.update(STATE_DOMAIN);
    for (id, bytes) in secs {
        if matches!(*id, 1..=4 | 6) {
            h.update(&id.to_le_bytes());
            h.update(&(bytes.len() as u64).to_le_bytes());
            h.update(bytes);
        }
    }
    *h.finalize().as_bytes()
}

/// The state commitment of an engine's current state.
pub(crate) fn commit(p: &Parts<'_>) -> [u8; 32] {
    let secs = sections(p, &ReplicationState::default());
    let v: Vec<(u16, &[u8])> = secs.iter().map(|(i, b)| (*i, b.as_slice())).collect();
    state_root(&v)
}

/// The state commitment of an engine whose lanes and BBO core ran apart (replay split across
/// threads, the replica's replay lanes and replay BBO core of 07 §7.2), gathered at one point:
/// every lane at the cut of the BBO core's last step, `fwd[l]` the ops lane `l` published that
/// no step took yet, `events[l]` the events lane `l` has not applied yet. The same bytes as
/// [`crate::home::Tiles::state_root`] for the same state.
pub fn state_root_of(
    cfg: &EngineConfig,
    lanes: &[Lane],
    bbo: &Bbo,
    fwd: &[VecDeque<Fwd>],
    events: &[VecDeque<LaneEvent>],
) -> [u8; 32] {
    commit(&Parts {
        cfg,
        lanes,
        bbo,
        fwd,
        events,
    })
}

/// Write a REP_Snapshot file.
pub(crate) fn write(p: &Parts<'_>, meta: &SnapMeta, rep: &ReplicationState) -> Vec<u8> {
    let secs = sections(p, rep);
    let v: Vec<(u16, &[u8])> = secs.iter().map(|(i, b)| (*i, b.as_slice())).collect();
    let root = state_root(&v);
    let table_off = SNAP_HDR_BYTES;
    let mut off = table_off + SNAP_TABLE_ENTRY_BYTES * secs.len();
    let file_len = off + secs.iter().map(|(_, b)| b.len()).sum::<usize>();
    let mut out = Vec::with_capacity(file_len);
    out.extend_from_slice(SNAP_MAGIC);
    out.extend_from_slice(&SNAP_VERSION.to_le_bytes());
    out.extend_from_slice(&p.cfg.book.to_le_bytes());
    out.push(p.cfg.layout.n_lanes);
    out.push(0); // client: Rust
    out.extend_from_slice(&meta.epoch.to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&meta.height.to_le_bytes());
    out.extend_from_slice(&p.bbo.done().to_le_bytes());
    out.extend_from_slice(&root);
    out.extend_from_slice(&meta.header_hash);
    out.extend_from_slice(&(secs.len() as u32).to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&(table_off as u64).to_le_bytes());
    out.extend_from_slice(&(file_len as u64).to_le_bytes());
    debug_assert_eq!(out.len(), SNAP_HDR_BYTES);
    for (id, b) in &secs {
        out.extend_from_slice(&id.to_le_bytes());
        out.extend_from_slice(&0u16.to_le_bytes()); // encoding 0: fixed-width LE
        out.extend_from_slice(&[0; 4]);
        out.extend_from_slice(&(off as u64).to_le_bytes());
        out.extend_from_slice(&(b.len() as u64).to_le_bytes());
        out.extend_from_slice(blake3::hash(b).as_bytes());
        off += b.len();
    }
    for (_, b) in &secs {
        out.extend_from_slice(b);
    }
    out
}

/// Write `header_hash(height)` into a snapshot's header (07 §7.5, offset 72). Replay writes
/// the state before the block's header is known; the node fills this in once it is. The file
/// hash (BLAKE3 of header and table, computed on read) changes with it; no section does.
pub fn set_header_hash(file: &mut [u8], header_hash: &[u8; 32]) -> Result<(), SnapError> {
    if file.len() < SNAP_HDR_BYTES || &file[..8] != SNAP_MAGIC {
        return Err(SnapError::Magic);
    }
    file[72..104].copy_from_slice(header_hash);
    Ok(())
}

/// The `state_root` field of a snapshot this engine wrote (07 §7.5, offset 40): the commitment
/// taken with it, so a root height that is also a snapshot height serializes the state once.
/// `None` for a file too short or not a REP_Snapshot (nothing is verified: see [`read`]).
pub fn state_root_in(file: &[u8]) -> Option<[u8; 32]> {
    if file.get(..8)? != SNAP_MAGIC {
        return None;
    }
    file.get(40..72)?.try_into().ok()
}

/// A snapshot's sections: `(id, bytes)` in id order.
pub type Sections<'a> = Vec<(u16, &'a [u8])>;

/// Check a file's structure and hashes; returns its header and the seven sections.
pub fn read(file: &[u8]) -> Result<(SnapHeader, Sections<'_>), SnapError> {
    let mut r = Reader::new(file);
    if r.array::<8>()? != *SNAP_MAGIC || r.u32_le()? != SNAP_VERSION {
        return Err(SnapError::Magic);
    }
    let book = r.u16_le()?;
    let n_lanes = r.u8()?;
    let client = r.u8()?;
    let epoch = r.u32_le()?;
    if client > 1 || r.u32_le()? != 0 {
        return Err(SnapError::Magic);
    }
    let height = r.u64_le()?;
    let last_step = r.u64_le()?;
    let state_root_hdr = r.array::<32>()?;
    let header_hash = r.array::<32>()?;
    let n_sections = r.u32_le()? as usize;
    if r.u32_le()? != 0 {
        return Err(SnapError::Magic);
    }
    let table_off = r.u64_le()?;
    let file_len = r.u64_le()?;
    if file_len != file.len() as u64 {
        return Err(if file_len < file.len() as u64 {
            SnapError::Trailing
        } else {
            SnapError::Layout
        });
    }
    if n_sections != 7 {
        return Err(SnapError::Sections);
    }
    let table_len = SNAP_TABLE_ENTRY_BYTES * n_sections;
    if table_off < SNAP_HDR_BYTES as u64
        || table_off
            .checked_add(table_len as u64)
            .is_none_or(|e| e > file_len)
    {
        return Err(SnapError::Layout);
    }
    let table = &file[table_off as usize..table_off as usize + table_len];
    let mut t = Reader::new(table);
    let mut secs = Vec::with_capacity(n_sections);
    for want in 1..=7u16 {
        let id = t.u16_le()?;
        let enc = t.u16_le()?;
        let reserved = t.u32_le()?;
        if enc != 0 || reserved != 0 {
            return Err(SnapError::Layout);
        }
        let off = t.u64_le()?;
        let len = t.u64_le()?;
        let hash = t.array::<32>()?;
        if id != want {
            return Err(SnapError::Sections);
        }
        let end = off.checked_add(len).ok_or(SnapError::Layout)?;
        if off < table_off + table_len as u64 || end > file_len {
            return Err(SnapError::Layout);
        }
        let b = &file[off as usize..end as usize];
        if *blake3::hash(b).as_bytes() != hash {
            return Err(SnapError::SectionHash(id));
        }
        secs.push((id, b));
    }
    if state_root(&secs) != state_root_hdr {
        return Err(SnapError::StateRoot);
    }
    let mut fh = blake3::Hasher::new();
    fh.update(&file[..SNAP_HDR_BYTES]);
    fh.update(table);
    // Section 7.
    let mut r7 = Reader::new(secs[6].1);
    let tenure = r7.u8()?;
    let k = r7.u8()? as usize;
    let seq_order = r7.bytes(k)?.to_vec();
    let deposed = r7.u64_le()?;
    let membership_hash = r7.array::<32>()?;
    let root_gate_cursor = r7.u64_le()?;
    if !r7.is_empty() {
        return Err(SnapError::Trailing);
    }
    Ok((
        SnapHeader {
            book,
            n_lanes,
            meta: SnapMeta {
                epoch,
                height,
                header_hash,
            },
            last_step,
            state_root: state_root_hdr,
            file_hash: *fh.finalize().as_bytes(),
            replication: ReplicationState {
                tenure,
                seq_order,
                deposed,
                membership_hash,
                root_gate_cursor,
            },
        },
        secs,
    ))
}
