//! The seal (07 §9.4) as pure functions of what a replica holds: the seal header from its
//! decoder's open block (`DecState::open_block`) and its data side's open `data_root`, the
//! kind-1 proposal over `(parent.last_height, H*]` plus that header, and a voter's check of a
//! leader's seal against its own.
//!
//! Every voter that holds exactly the prefix — the header of `H*` and every frame through `F*`
//! on each substream — computes the same seal header, so the leader's `last_hash` is checked by
//! recomputing it, not by trusting it. A voter short of `F*` cannot check yet (the fetch of
//! §9.3 is its way there); one past `F*` holds frames the leader did not see (its report came
//! after the wait) and refuses: the next proposal can include them.

use vyrn_wire::consts::REP_MAX_SEAL_RANGE;
use vyrn_wire::decoder::OpenBlock;
use vyrn_wire::header::{BlockHeader, Hash};
use vyrn_wire::msg::consensus::{ProposalKind, RepProposal, RepSealExt};

/// What a voter that deposed the tenure seals (07 §9.4): set by the node once the wait of §9.2
/// is over, read by its ledger when Simplex asks it to propose or verify a seal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SealPlan {
    /// The epoch.
    pub epoch: u32,
    /// The book.
    pub book: u16,
    /// `H*`: the highest height any report holds a signed header for.
    pub h_star: u64,
    /// `F*`, the next sequencer and tenure; the unavailable list is the leader's to fill when
    /// it proposes (07 §9.3 item 4), empty here.
    pub ext: RepSealExt,
}

/// The signed block the prefix starts from: `H*` and what its header says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SignedTip {
    /// `H*`.
    pub height: u64,
    /// `header_hash(H*)`.
    pub hash: Hash,
    /// `last_step(H*)`.
    pub last_step: u64,
}

/// Why this replica cannot build or accept a seal (yet).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SealRefused {
    /// The decoder's open block is not `H* + 1` (its last BlockMark is another height).
    OpenHeight {
        /// The open block's height.
        open: u64,
        /// `H* + 1`.
        want: u64,
    },
    /// The open block does not start right after `last_step(H*)`.
    StepGap,
    /// The frames held are not the prefix's `F*`: fewer (fetch them), or more (the leader's
    /// prefix is short of what this replica holds).
    Frames {
        /// This replica's last frame per substream.
        have: [u64; 2],
        /// `F*`.
        want: [u64; 2],
    },
    /// A record of the open block is not resolved (its payload not joined yet).
    Data,
    /// The range `(parent_last, H* + 1]` is longer than REP_MAX_SEAL_RANGE.
    Range,
    /// The seal names another next sequencer or tenure than this voter computes (07 §9.5).
    NextSeq {
        /// This voter's choice.
        want: u8,
        /// The seal's.
        got: u8,
    },
    /// The seal's header differs from this voter's (`last_hash`).
    LastHash,
    /// Not a seal of this epoch.
    Form,
    /// The unavailable list (07 §9.3 item 4) names a packet this voter can resolve, or a key
    /// of no record of the tail; or (a leader) it is longer than a seal message carries.
    Unavail,
}

/// The seal header over `tip` and the open block (07 §9.4): `seq_sig` zero, the certificate
/// stands in for it. `data_root` is the open block's (every record resolved).
pub fn seal_header(
    epoch: u32,
    book: u16,
    tip: &SignedTip,
    open: &OpenBlock,
    data_root: Hash,
) -> Result<BlockHeader, SealRefused> {
    if open.height != tip.height + 1 {
        return Err(SealRefused::OpenHeight {
            open: open.height,
            want: tip.height + 1,
        });
    }
    if open.first_step != tip.last_step + 1 {
        return Err(SealRefused::StepGap);
    }
    Ok(BlockHeader {
        height: open.height,
        epoch,
        book,
        first_step: open.first_step,
        last_step: open.last_step,
        prev: tip.hash,
        order_root: open.order_root,
        data_root,
        seq_sig: [0; 64],
    })
}

/// The last frame per substream the open block holds (`F_i` of a replica whose decoder took
/// every frame it has).
pub fn frames_held(open: &OpenBlock) -> [u64; 2] {
    [
        open.next_frame_seq[0].saturating_sub(1),
        open.next_frame_seq[1].saturating_sub(1),
    ]
}

/// The leader's seal on `parent_last` (07 §9.4): the proposal and its ext, when this replica
/// holds exactly the prefix.
pub fn seal_proposal(
    parent_last: u64,
    header: &BlockHeader,
    open: &OpenBlock,
    ext: &RepSealExt,
) -> Result<RepProposal, SealRefused> {
    if frames_held(open) != ext.end_frame_seq {
        return Err(SealRefused::Frames {
            have: frames_held(open),
            want: ext.end_frame_seq,
        });
    }
    let first = parent_last + 1;
    if header.height < first || header.height - first >= REP_MAX_SEAL_RANGE {
        return Err(SealRefused::Range);
    }
    Ok(RepProposal {
        kind: ProposalKind::Seal,
        epoch: header.epoch,
        first_height: first,
        last_height: header.height,
        last_hash: header.header_hash(),
        excl_root: [0; 32],
    })
}

/// A voter's check of the leader's seal against its own state (07 §9.4: §9.3 items 3 and 4 on
/// the tail, the next sequencer recomputed). The signed range `first ..= H*` is the ordinary
/// verdict's to check (§6.4 items 1, 3, 4).
pub fn check_seal(
    p: &RepProposal,
    ext: &RepSealExt,
    epoch: u32,
    own: &BlockHeader,
    open: &OpenBlock,
    next: (u8, u8),
) -> Result<(), SealRefused> {
    if p.kind != ProposalKind::Seal || p.epoch != epoch {
        return Err(SealRefused::Form);
    }
    if (ext.next_seq, ext.next_tenure) != next {
        return Err(SealRefused::NextSeq {
            want: next.0,
            got: ext.next_seq,
        });
    }
    if frames_held(open) != ext.end_frame_seq {
        return Err(SealRefused::Frames {
            have: frames_held(open),
            want: ext.end_frame_seq,
        });
    }
    if p.last_height != own.height || p.last_hash != own.header_hash() {
        return Err(SealRefused::LastHash);
    }
    Ok(())
}
