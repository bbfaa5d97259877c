//! A replay engine handed to a live box (07 §9.5, promotion): the standby's replay has run
//! every step of the sealed prefix; its lanes, BBO core and the ops forwarded but not yet
//! stepped become the new sequencer's. In-process, so one writer holds the state at a time
//! (INV-WRITER): [`ReplayEngine::promote`] consumes the replay.
//!
//! The ops a lane forwarded above the last step's cut are the seal's trailing ops (07 §9.4):
//! they are in the prefix, their records are final, and the new tenure's BBO core steps them
//! first (they are the oldest heads of their lanes' rings), under cuts that start at the
//! seal's `lane_bounds` — every lane's last LaneSeq — so INV-CUT-MONO holds across the
//! boundary. Every replica's replay holds the same ops in the same queues, so it steps them the
//! same way when the new tenure's StepRecords arrive.

use std::collections::VecDeque;

use crate::bbo::{Bbo, Fwd};
use crate::home::{EngineSink, ReplayEngine, ReplayError};
use crate::lane::Lane;

/// The state a promoted sequencer starts from.
#[derive(Debug)]
pub struct Handover {
    /// The lanes, live (their responses tagged), each at the end of the prefix.
    pub lanes: Vec<Lane>,
    /// The BBO core after the prefix's last step.
    pub bbo: Bbo,
    /// Per lane: ops forwarded and not yet stepped (the seal's trailing ops), oldest first.
    pub fwd: Vec<VecDeque<Fwd>>,
}

impl Handover {
    /// The new tenure's first step: the one after the prefix's last.
    pub fn first_step(&self) -> u64 {
        self.bbo.next_step()
    }

    /// Per lane, its last LaneSeq: the seal's `lane_bounds`, the new tenure's `prev_cut`.
    pub fn bounds(&self) -> Vec<u64> {
        self.lanes.iter().map(Lane::published).collect()
    }
}

impl ReplayEngine {
    /// Whether [`ReplayEngine::promote`] would take this replay now: every step run and every
    /// record's payload in. A standby named next waits for this (its payloads may still be
    /// arriving from the data side or its peers) before its host promotes it.
    pub fn promotable(&self) -> Result<(), ReplayError> {
        self.check_drained()?;
        match self.first_waiting() {
            Some((lane, first_lane_seq)) => Err(ReplayError::Unresolved {
                lane,
                first_lane_seq,
            }),
            None => Ok(()),
        }
    }

    /// Hand this replay's state to a live box (07 §9.5). Every event produced so far is applied
    /// first (`sink` gets the responses that makes, as replay's own); refused while a step waits
    /// for its inputs ([`ReplayError::Stalled`]) or a record waits for its payload
    /// ([`ReplayError::Unresolved`]): the prefix is not replayed yet.
    pub fn promote(mut self, sink: &mut impl EngineSink) -> Result<Handover, ReplayError> {
        self.t.settle(sink);
        self.promotable()?;
        let t = self.t;
        let mut lanes = t.lanes;
        for l in &mut lanes {
            l.go_live();
        }
        Ok(Handover {
            lanes,
            bbo: t.bbo,
            fwd: t.fwd,
        })
    }
}
