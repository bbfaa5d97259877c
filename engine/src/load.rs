//! Loading a snapshot (07 §7.5 "Loading"): a replay engine rebuilt from a `REP_Snapshot` file,
//! every section hash and the state commitment checked first. Above both `snapshot` (the file)
//! and `home` (the engine it rebuilds), so neither imports the other.

use crate::bbo::{Fwd, LaneEvent};
use crate::book::{Op, RestingOrder};
use crate::config::EngineConfig;
use crate::home::ReplayEngine;
use crate::lane::kind_from;
use crate::snapcodec::side_from;
use crate::snapshot::*;

use vyrn_wire::leb::Reader;

/// Restore a replay engine for `cfg` from a snapshot file (07 §7.5 "Loading"): every section
/// hash and the state commitment are checked first; then the state is rebuilt. The caller
/// compares `state_root` with the certified R(height).
pub fn restore(cfg: EngineConfig, file: &[u8]) -> Result<(ReplayEngine, SnapHeader), SnapError> {
    let (hdr, secs) = read(file)?;
    if hdr.book != cfg.book || hdr.n_lanes != cfg.layout.n_lanes {
        return Err(SnapError::Config("book or lane count differs"));
    }
    let n = cfg.layout.n_lanes as usize;
    let mut e = ReplayEngine::new(cfg);
    // 1: the parameters must be the config's (limits are config, not state).
    {
        let p = Parts {
            cfg: &e.t.cfg,
            lanes: &e.t.lanes,
            bbo: &e.t.bbo,
            fwd: &e.t.fwd,
            events: &e.t.events,
        };
        let fresh = sections(&p, &ReplicationState::default());
        if fresh[0].1 != secs[0].1 {
            return Err(SnapError::Config("BookParams differ from the config"));
        }
    }
    // 2.
    let mut r = Reader::new(secs[1].1);
    for lane in e.t.lanes.iter_mut() {
        lane.restore_lane(&mut r)?;
    }
    if !r.is_empty() {
        return Err(SnapError::Trailing);
    }
    // 3.
    let mut r = Reader::new(secs[2].1);
    let next_step = r.u64_le()?;
    let need = (r.u64_le()?, r.u64_le()?);
    let halted = Some(r.u64_le()?).filter(|&h| h != 0);
    let sealed = r.u8()? != 0;
    let mut cut = vec![0u64; n];
    for c in cut.iter_mut() {
        *c = r.u64_le()?;
    }
    if next_step == 0 {
        return Err(SnapError::Content("next_step 0"));
    }
    e.t.bbo.restore_state(next_step, &cut, need, halted, sealed);
    let k = r.u32_le()? as usize;
    for _ in 0..k {
        let o = RestingOrder {
            session: r.u32_le()?,
            account: r.u32_le()?,
            client_tag: r.u32_le()?,
            side: side_from(r.u8()?)?,
            tick: r.u32_le()? as i32,
            open: r.u32_le()?,
            time: r.u64_le()?,
            cookie: r.u64_le()?,
        };
        e.t.bbo.book_mut().restore(&o).map_err(SnapError::Content)?;
    }
    for l in 0..n {
        let k = r.u32_le()? as usize;
        for _ in 0..k {
            let lane_seq = r.u64_le()?;
            let rx_ts = r.u64_le()?;
            let kind = kind_from(r.u8()?)?;
            let op = Op {
                kind,
                session: r.u32_le()?,
                account: r.u32_le()?,
                client_tag: r.u32_le()?,
                side: side_from(r.u8()?)?,
                tick: r.u32_le()? as i32,
                qty: r.u32_le()?,
                cookie: r.u64_le()?,
            };
            e.t.fwd[l].push_back(Fwd {
                lane: l as u8,
                lane_seq,
                rx_ts,
                op,
            });
        }
        let k = r.u32_le()? as usize;
        for _ in 0..k {
            let ev = LaneEvent {
                step: r.u64_le()?,
                need_a: r.u64_le()?,
                need_b: r.u64_le()?,
                session: r.u32_le()?,
                client_tag: r.u32_le()?,
                cookie: r.u64_le()?,
                side: side_from(r.u8()?)?,
                what: outcome_get(&mut r)?,
            };
            e.t.events[l].push_back(ev);
        }
    }
    if !r.is_empty() {
        return Err(SnapError::Trailing);
    }
    // 4.
    if secs[3].1 != 0u32.to_le_bytes() {
        return Err(SnapError::Content("timers (v1 has none)"));
    }
    // 5.
    let mut r = Reader::new(secs[4].1);
    for lane in e.t.lanes.iter_mut() {
        lane.restore_decoder(&mut r)?;
    }
    // StepDec is the replica decoder's; it is checked against the BBO state.
    for h in 0..e.t.cfg.layout.n_streams {
        let prev = r.u64_le()?;
        let want = if h == 0 { need.0 } else { need.1 };
        if prev != want {
            return Err(SnapError::Content("StepDec prev_step differs from need"));
        }
        let a = e.t.cfg.layout.half_start(h);
        for &c in &cut[a..a + e.t.cfg.layout.half_len(h)] {
            if r.u64_le()? != c {
                return Err(SnapError::Content("StepDec prev_cut differs from the cut"));
            }
        }
    }
    if !r.is_empty() {
        return Err(SnapError::Trailing);
    }
    // 6.
    let mut r = Reader::new(secs[5].1);
    let k = r.u32_le()? as usize;
    for _ in 0..k {
        let session = r.u32_le()?;
        let _account = r.u32_le()?;
        let lane = r.u8()? as usize;
        let slot = r.u16_le()?;
        let last = r.u32_le()?;
        let next_resp = r.u64_le()?;
        e.t.lanes
            .get_mut(lane)
            .ok_or(SnapError::Content("session lane"))?
            .restore_session(session, slot, last, next_resp)?;
    }
    if !r.is_empty() {
        return Err(SnapError::Trailing);
    }
    // The restored state must commit to the same root (a mismatch means this build reads the
    // sections differently from the one that wrote them).
    if commit(&e.parts()) != hdr.state_root {
        return Err(SnapError::StateRoot);
    }
    e.hold_floor();
    Ok((e, hdr))
}
