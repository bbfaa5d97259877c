//! The process side's counters (each piece of the core keeps its own too).

/// Counters of the process side (each piece of the core keeps its own too).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeCounters {
    /// Datagrams off path A and B.
    pub path_rx: [u64; 2],
    /// Control datagrams in (sequencer, peers).
    pub ctrl_rx: u64,
    /// Data-tier datagrams in.
    pub data_rx: u64,
    /// Datagrams from an address that is not a member (dropped unread).
    pub unknown_src: u64,
    /// Control messages that did not parse, or are not for a replica.
    pub ctrl_bad: u64,
    /// Control messages from a member that should have come sealed and came bare
    /// (dropped unread).
    pub unsealed: u64,
    /// Sealed messages refused: a tag that does not verify, another sender's id, a replay.
    pub bad_seal: u64,
    /// Messages not sent because their destination has no link key (no member).
    pub tx_unsealed: u64,
    /// `RepairReq`s refused because the peer used up its share of REP_PEER_RTX_MAX_FPS.
    pub repairs_over_share: u64,
    /// Datagrams sent.
    pub tx: u64,
    /// Datagrams the kernel refused (dropped; the protocol's retries cover them).
    pub tx_dropped: u64,
    /// Peer RepairReqs served, and frames sent for them.
    pub repairs_served: (u64, u64),
    /// Of those frames, ones order RX held above a hole (a TailReport's `extra`, 07 §9.3).
    pub repairs_served_held: u64,
    /// `SeqDataReq`s sent to the sequencer (07 §5.5 source 3).
    pub seq_data_asked: u64,
    /// `SeqData` answers taken from the sequencer.
    pub seq_data_rx: u64,
    /// Payloads no source had (07 §5.5: every fetch source asked).
    pub unavailable: u64,
    /// CopyMismatch evidence raised.
    pub copy_mismatches: u64,
    /// Sequencer faults the decoder raised.
    pub seq_faults: u64,
    /// Conflict evidence the consensus engine reported (07 §10.2).
    pub consensus_faults: u64,
    /// `REP_RootCert`s formed over this replica's own state root (07 §7.4).
    pub root_certs: u64,
    /// Root signatures for a digest other than the certified one (RootFault, 07 §10.2).
    pub root_faults: u64,
    /// 1 once REP_A_DIVERGE fired (07 §7.4, INV-REP-9): the replica votes no more.
    pub diverge: u64,
    /// 1 once REP_A_JOURNAL fired: a block or certificate write failed and this replica votes
    /// no more (until it restarts with a working drive).
    pub journal_failed: u64,
    /// REP_DurableMark notices from the sequencer.
    pub durable_marks: u64,
    /// NackTooOld answers.
    pub too_old: u64,
    /// Frames a restarted replica took from its own order journal (not from the network).
    pub own_journal_frames: u64,
    /// Payloads a restarted replica took from its own block journal (07 §8.2: the blocks it
    /// checked before the restart), not fetched from anyone.
    pub own_journal_payloads: u64,
    /// Own journal blocks that could not be read back for their payloads (fetched instead).
    pub own_journal_unread: u64,
    /// 1 while REP_A_ARCHIVE is raised (07 §8.3), as last reported in the alarm line.
    pub archive_alarm: u64,
    /// Frames the sequencer retransmitted to this replica's control port (07 §4.10).
    pub rtx_in: u64,
    /// Blocks the decoder completed.
    pub blocks: u64,
    /// Datagrams dropped by the lab's path cut (`Node::cut_path`, feature `lab`).
    pub path_cut_drops: u64,
    /// Datagrams from the data boxes dropped by the lab's cut (`Node::cut_data`, feature `lab`).
    pub data_cut_drops: u64,
    /// `DataDown` gossip rounds sent (07 §5.7).
    pub data_down_sent: u64,
    /// `DataDown` gossip taken from peers.
    pub data_down_rx: u64,
    /// `DataRedirect`s sent, one per session per round (to every live data box).
    pub redirects_sent: u64,
    /// `PeerDataFetch` sent (07 §5.5 source 2).
    pub peer_data_asked: u64,
    /// `PeerData` answers taken from peers.
    pub peer_data_rx: u64,
    /// Peers' `PeerDataFetch` answered from this replica's store.
    pub peer_data_served: u64,
    /// Copies pushed to the peers unasked: this voter refused a seal listing the packet
    /// unavailable (07 §9.3 item 4).
    pub peer_data_pushed: u64,
    /// Peers' `PeerDataFetch` for a payload this replica does not hold (not answered).
    pub peer_data_missing: u64,
    /// Peers' `PeerDataFetch` over PEER_DATA_MAX_PPS (not answered).
    pub peer_data_capped: u64,
    /// REP_Snapshots written to the snapshot area (07 §7.5).
    pub snapshots_written: u64,
    /// The newest snapshot's height.
    pub snapshot_height: u64,
    /// Snapshots not written: the write failed, or their header never came.
    pub snapshot_errors: u64,
    /// Snapshots in the area refused by the audit at start (never loaded).
    pub snapshots_refused: u64,
    /// The height of the snapshot replay started from (07 §7.6; 0: from the tenure's start).
    pub snapshot_loaded: u64,
    /// Snapshots that verified at the audit but were passed over at the load (no replay tally
    /// beside them, another epoch, unreadable): replay started from an older one, or from the
    /// tenure's start.
    pub snapshots_skipped: u64,
    /// `Silence` rounds sent to the peers (07 §9.1: a suspicion, and its repeats).
    pub silences_sent: u64,
    /// Peers' `Silence` taken off the control port (checked by the deposition after).
    pub silences_rx: u64,
    /// Peers' `Silence` dropped at a full queue (the peer repeats it).
    pub silences_dropped: u64,
    /// `SeqEquivocation` evidence sent to the peers (07 §10.1: found here, or a peer's passed on
    /// once).
    pub evidence_sent: u64,
    /// Peers' `SeqEquivocation` that checked (two headers the sequencer signed for one height).
    pub evidence_rx: u64,
    /// Peers' `SeqEquivocation` refused: not valid evidence, or a full queue.
    pub evidence_bad: u64,
    /// Seal offers taken off the control port (07 §9.4), for the desk.
    pub seal_offers_rx: u64,
    /// Seal offers dropped at a full queue.
    pub seal_offers_dropped: u64,
    /// Seal offers the desk refused for their form (kind, epoch, range).
    pub seal_offers_refused: u64,
    /// Seals finalized here (07 §9.4: their certificate exported).
    pub seals_final: u64,
    /// Final seals this replica could not follow (07 §9.5: it does not hold the prefix the
    /// seal names, or the next box is unknown to it).
    pub follow_refused: u64,
    /// Tenures deposed here by their final seal, not by Q Silences first (07 §9.4, INV-REP-5:
    /// the standby's replica whose own suspicion had aborted, mostly).
    pub deposed_by_seal: u64,
    /// `SeqChange`s sent to the data boxes (07 §9.5: one per final seal).
    pub seq_changes_sent: u64,
    /// Seal certificates refused at the standby's replica (bad signatures, too many queued).
    pub seal_certs_bad: u64,
}
