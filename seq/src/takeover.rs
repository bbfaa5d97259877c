//! Where a box's tenure starts (07 §3.9, §9.4–§9.5): the first tenure of an epoch at step 1 and
//! height 1 with every lane empty, or a later one — a promoted standby's — right after the
//! seal, with the engine its replay built.
//!
//! A promoted box's TenureStart carries `first_step = last_step(Hs) + 1`, `first_height = Hs +
//! 1`, `prev_header_hash = header_hash(Hs)`, each lane's LaneDec mirror as its base and
//! `prev_cut = lane_bounds` (every lane's last LaneSeq in the prefix); its SessionBinds carry
//! each session's next `pkt_seq` as the mirror encodes against. Every gate word starts there:
//! nothing of the new tenure is released, and everything before it is final.

use vyrn_engine::{EngineConfig, Handover};
use vyrn_wire::header::{BlockHeader, Hash};
use vyrn_wire::layout::Layout;
use vyrn_wire::records::{LaneBase, SessionBind, TenureStart};

/// Where a tenure starts, as its TenureStart and SessionBinds say it (07 §3.9).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TenureBase {
    /// The tenure's first StepId.
    pub first_step: u64,
    /// Its first block's height.
    pub first_height: u64,
    /// `header_hash` of the block before (zero at an epoch's start).
    pub prev_header_hash: Hash,
    /// Per lane: its base (every lane, in lane order).
    pub lanes: Vec<LaneBase>,
    /// Per lane: the cut the tenure starts from (`lane_bounds` of the seal).
    pub prev_cut: Vec<u64>,
    /// Every bound session with its next `pkt_seq`.
    pub binds: Vec<SessionBind>,
}

impl TenureBase {
    /// The first tenure of an epoch: step 1, height 1, every lane at LaneSeq 1, every
    /// configured session at `next_pkt_seq` 1.
    pub fn first(e: &EngineConfig) -> Self {
        let n = e.layout.n_lanes as usize;
        TenureBase {
            first_step: 1,
            first_height: 1,
            prev_header_hash: [0; 32],
            lanes: vec![
                LaneBase {
                    next_lane_seq: 1,
                    rx_ts_base: 0,
                    fills_applied_base: 0,
                };
                n
            ],
            prev_cut: vec![0; n],
            binds: crate::shm::session_binds(e),
        }
    }

    /// The tenure after the seal `seal` (07 §9.4), from the engine replay handed over.
    pub fn after_seal(engine: &Handover, seal: &BlockHeader) -> Self {
        TenureBase {
            first_step: seal.last_step + 1,
            first_height: seal.height + 1,
            prev_header_hash: seal.header_hash(),
            lanes: engine.lanes.iter().map(|l| l.tenure_base()).collect(),
            prev_cut: engine.bounds(),
            binds: engine
                .lanes
                .iter()
                .flat_map(|l| l.session_binds())
                .collect(),
        }
    }

    /// Substream `h`'s TenureStart (its half's lanes) for `epoch` and `tenure`.
    pub fn tenure_start(
        &self,
        layout: &Layout,
        h: u8,
        epoch: u32,
        tenure: crate::shm::TenureId,
    ) -> TenureStart {
        let (a, n) = (layout.half_start(h), layout.half_len(h));
        TenureStart {
            epoch,
            tenure: tenure.tenure,
            sender: tenure.sender,
            first_step: self.first_step,
            first_height: self.first_height,
            prev_header_hash: self.prev_header_hash,
            lanes: self.lanes[a..a + n].to_vec(),
            prev_cut: self.prev_cut[a..a + n].to_vec(),
        }
    }

    /// The step before the tenure's first: every gate word starts there.
    pub fn prev_step(&self) -> u64 {
        self.first_step - 1
    }
}

/// Why a replay cannot become this box's tenure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TakeoverErr {
    /// The replay has not reached the seal's last step, or ran past it.
    NotAtSeal {
        /// The replay's next step.
        next_step: u64,
        /// The seal's `last_step + 1`.
        want: u64,
    },
    /// The replay's lanes are not the config's.
    Lanes,
    /// A lane's last LaneSeq is below the BBO core's cut (INV-CUT-MONO; never expected).
    BelowCut,
}

/// A promoted sequencer's start (07 §9.5): the tenure after the seal, and the engine the
/// standby's replay built, consumed by [`crate::tiles::build_takeover`] (one writer, INV-WRITER).
#[derive(Debug)]
pub struct Takeover {
    /// Where the tenure starts.
    pub base: TenureBase,
    /// The engine.
    pub engine: Handover,
}

impl Takeover {
    /// The tenure after `seal` on `engine`, which must stand exactly at the seal's last step.
    pub fn new(
        e: &EngineConfig,
        engine: Handover,
        seal: &BlockHeader,
    ) -> Result<Self, TakeoverErr> {
        if engine.first_step() != seal.last_step + 1 {
            return Err(TakeoverErr::NotAtSeal {
                next_step: engine.first_step(),
                want: seal.last_step + 1,
            });
        }
        if engine.lanes.len() != e.layout.n_lanes as usize || engine.fwd.len() != engine.lanes.len()
        {
            return Err(TakeoverErr::Lanes);
        }
        let base = TenureBase::after_seal(&engine, seal);
        let mut engine = engine;
        // 07 §9.4: the tenure's cuts start at the seal's lane_bounds, for the BBO core as for
        // the stream cores, or a half that holds trailing ops is judged moved by one and not
        // by the other (OTHER set on one substream, no record on the other: REP_E_KIND).
        engine
            .bbo
            .start_tenure(&base.prev_cut)
            .map_err(|_| TakeoverErr::BelowCut)?;
        Ok(Takeover { base, engine })
    }
}
