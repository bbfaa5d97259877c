//! The wire-order invariant checker (T-REP-1, B-REP-2): follows a box's wire log — every frame
//! write on each replication path, every path alarm, every response and notice sent — and
//! reports the first violation of INV-REP-1, INV-REP-2 or INV-REP-11. A frame is on the wire
//! once it is written on both paths, or on one path while the other is down (REP_A_PATH raised,
//! 07 §14); a frame on no path, or on one path while the other is up, releases nothing.

use super::{SimBox, WireEvent};
use crate::shm::FrameInfo;
use std::collections::HashMap;
use vyrn_engine::Gate;
use vyrn_wire::layout::Layout;

/// The invariant checker: follows the wire log and fails at the first violation.
#[derive(Debug, Default)]
pub struct Checker {
    seen: usize,
    /// Per stream: highest step whose record is on the wire.
    step_written: [u64; 2],
    /// Per lane: highest LaneSeq on the wire.
    lane_written: HashMap<usize, u64>,
    /// Per lane: highest cut value logged by a written step record.
    cut_written: HashMap<usize, u64>,
    /// Per substream and path: REP_A_PATH raised.
    down: [[bool; 2]; 2],
    /// Frames written on some paths but not yet on every live one: (stream, frame_seq) → paths.
    partial: HashMap<(u8, u64), ([bool; 2], FrameInfo)>,
}

impl Checker {
    /// The caller drained the wire log: continue from its start next time (what was checked
    /// stays remembered).
    pub fn rewind(&mut self) {
        self.seen = 0;
    }

    /// Check every wire event since the last call; the first violation, if any.
    pub fn check(&mut self, home: &SimBox) -> Result<(), String> {
        let lay = home.config().engine.layout;
        let log = home.log();
        self.check_log(lay, &log)
    }

    /// A frame is on the wire: what it carries now counts.
    fn on_wire(&mut self, lay: Layout, info: &FrameInfo) -> Result<(), String> {
        for (l, &m) in info.lane_max.iter().enumerate() {
            let w = self.lane_written.entry(l).or_default();
            *w = (*w).max(m);
        }
        for (step, cut) in &info.steps {
            let h = info.stream;
            let first = lay.half_start(h);
            // INV-REP-2: the records a step's half-cut covers are on the wire no later than
            // its record.
            for (i, &c) in cut.iter().enumerate() {
                let have = self.lane_written.get(&(first + i)).copied().unwrap_or(0);
                if have < c {
                    return Err(format!(
                        "INV-REP-2: step {step} on stream {h} cuts lane {} at {c}, only {have} written",
                        first + i
                    ));
                }
                let cw = self.cut_written.entry(first + i).or_default();
                *cw = (*cw).max(c);
            }
            self.step_written[h as usize] = self.step_written[h as usize].max(*step);
        }
        Ok(())
    }

    /// Check every event of `log` past the ones already checked (a log that only grows: the
    /// one-thread box's, or the threaded box's writes merged in the order they happened).
    pub fn check_log(&mut self, lay: Layout, log: &[WireEvent]) -> Result<(), String> {
        for e in &log[self.seen.min(log.len())..] {
            match e {
                WireEvent::Frame { info, path, .. } => {
                    let key = (info.stream, info.frame_seq);
                    let entry = self
                        .partial
                        .entry(key)
                        .or_insert_with(|| ([false; 2], info.clone()));
                    entry.0[*path as usize & 1] = true;
                    let paths = entry.0;
                    let down = self.down[info.stream as usize & 1];
                    if (0..2).all(|p| paths[p] || down[p]) {
                        if let Some((_, info)) = self.partial.remove(&key) {
                            self.on_wire(lay, &info)?;
                        }
                    }
                }
                WireEvent::PathAlarm { stream, path, down } => {
                    let h = *stream as usize & 1;
                    self.down[h][*path as usize & 1] = *down;
                    if *down {
                        // Frames this path still owed are on the wire if the other path has them.
                        let mut ready: Vec<(u8, u64)> = self
                            .partial
                            .iter()
                            .filter(|(k, (p, _))| {
                                k.0 as usize == h && (0..2).all(|q| p[q] || self.down[h][q])
                            })
                            .map(|(k, _)| *k)
                            .collect();
                        ready.sort_unstable();
                        for k in ready {
                            if let Some((_, info)) = self.partial.remove(&k) {
                                self.on_wire(lay, &info)?;
                            }
                        }
                    }
                }
                WireEvent::Learn { .. } | WireEvent::DurableMark { .. } => {}
                // Watermarks report what voters already hold: no gate to check.
                WireEvent::Notice { .. } => {}
                WireEvent::Resp { gate, session, .. } => match *gate {
                    // INV-REP-1: a step's response leaves after the frames carrying need_A(s)
                    // and need_B(s).
                    Gate::Step {
                        step,
                        need_a,
                        need_b,
                    } => {
                        if self.step_written[0] < need_a || self.step_written[1] < need_b {
                            return Err(format!(
                                "INV-REP-1: response of step {step} to session {session} needs ({need_a}, {need_b}), written ({}, {})",
                                self.step_written[0], self.step_written[1]
                            ));
                        }
                    }
                    // INV-REP-11: a lane answer of op q leaves after a written step's cut covers q.
                    Gate::LaneCut { lane, lane_seq } => {
                        let l = lane as usize;
                        let rec = self.lane_written.get(&l).copied().unwrap_or(0);
                        let cut = self.cut_written.get(&l).copied().unwrap_or(0);
                        if rec < lane_seq || cut < lane_seq {
                            return Err(format!(
                                "INV-REP-11: lane {l} answer of op {lane_seq} with record {rec}, cut {cut} written"
                            ));
                        }
                    }
                },
            }
        }
        self.seen = log.len();
        Ok(())
    }
}
