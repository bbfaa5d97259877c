//! The replica's metrics (docs/sre.md): its table ([`METRICS`], [`ALARMS`]: each family's
//! name, help, type and labels) and the rendering through it, from the node's counters once a
//! second on its own thread.

use vyrn_metrics::Exposition;

use super::Node;

/// The recovery service's store (07 §8.5).
fn put_rsp(e: &mut Exposition, k: &crate::recovery::RspCounters) {
    e.put_counter(&REPLICA_RSP_KEPT, &[], k.kept);
    e.put_counter(&REPLICA_RSP_ENTRY_BYTES, &[], k.entry_bytes);
    e.put_counter(&REPLICA_RSP_REFUSED, &[], k.refused);
    e.put_counter(&REPLICA_RSP_REBUILT, &[], k.rebuilt);
    e.put_counter(&REPLICA_RSP_GONE, &[], k.gone);
    e.put_gauge(&REPLICA_RSP_PAGES, &[], k.pages as f64);
}

/// Sequencer failover at this voter (07 §9.1–§9.2).
/// 07 §5.5 sources 2 and 3, and the copies a seal's refusal pushed (§9.3 item 4).
fn render_peer_data(e: &mut Exposition, c: &crate::node::NodeCounters) {
    for (dir, v) in [
        ("asked", c.peer_data_asked),
        ("received", c.peer_data_rx),
        ("served", c.peer_data_served),
        ("pushed_for_seal", c.peer_data_pushed),
        ("not_held", c.peer_data_missing),
        ("capped", c.peer_data_capped),
        ("asked_of_sequencer", c.seq_data_asked),
        ("received_from_sequencer", c.seq_data_rx),
    ] {
        e.put_counter(&REPLICA_PEER_DATA, &[dir], v);
    }
}

fn render_failover(e: &mut Exposition, n: &crate::node::Node) {
    let c = n.counters();
    let f = n.failover_counters().unwrap_or_default();
    let rx = n.core().order_rx().counters();
    let d = n.core().data().counters();
    for (what, v) in [
        ("excluded", d.excluded),
        ("excluded_after_replay", d.excluded_late),
        ("held", d.held_for_seal),
    ] {
        e.put_counter(&REPLICA_SEAL_PACKETS, &[what], v);
    }
    for (what, v) in [
        ("suspected", f.suspects),
        ("silence_sent", c.silences_sent),
        ("silence_taken", c.silences_rx),
        ("silence_counted", f.silences_rx),
        ("silence_stale", f.refused_stale),
        ("silence_forged", f.refused_forged),
        ("silence_dropped", c.silences_dropped),
        ("aborted", f.aborts),
        ("equivocation_sent", c.evidence_sent),
        ("equivocation_taken", c.evidence_rx),
        ("equivocation_refused", c.evidence_bad),
        ("seal_offer_taken", c.seal_offers_rx),
        ("seal_offer_dropped", c.seal_offers_dropped),
        ("seal_offer_refused", c.seal_offers_refused),
        ("seal_final", c.seals_final),
        (
            "seal_reproposed",
            n.simplex()
                .map_or(0, |s| s.desk_counters().seals_reproposed),
        ),
        ("deposed_by_seal", c.deposed_by_seal),
        ("follow_refused", c.follow_refused),
        ("seal_cert_refused", c.seal_certs_bad),
        ("seq_change_sent", c.seq_changes_sent),
        ("seal_fetch_asked", rx.seal_fetch.0),
        ("seal_fetch_frames", rx.seal_fetch.1),
        ("served_held", c.repairs_served_held),
    ] {
        e.put_counter(&REPLICA_FAILOVER, &[what], v);
    }
    let deposed = matches!(
        n.failover_phase(),
        Some(crate::front::failover::depose::Phase::Deposed { .. })
    );
    e.put_gauge(&REPLICA_TENURE, &[], n.core().order_rx().tenure().0 as f64);
    if let Some(st) = n.failover_stages() {
        for (stage, ms) in st.since_last_frame() {
            e.put_gauge(&REPLICA_FAILOVER_STAGE, &[stage], ms / 1e3);
        }
    }
    e.put_gauge(
        &REPLICA_TENURE_DEPOSED,
        &[],
        if deposed { 1.0 } else { 0.0 },
    );
}

/// The journals, and the catch-up a restart measured (07 §7.6, §8.2, §8.3, §4.10).
fn render_journal(e: &mut Exposition, n: &crate::node::Node) {
    if let Some(c) = n.caught_up() {
        e.put_gauge(&REPLICA_CATCHUP_SECONDS, &[], c.elapsed_ns as f64 / 1e9);
        e.put_gauge(&REPLICA_CATCHUP_RATIO, &[], c.ratio());
    }
    e.put_gauge(
        &REPLICA_REPAIR_RTT,
        &[],
        n.core().order_rx().repair_rtt().srtt_ns() as f64 / 1e9,
    );
    if let Some(j) = n.journal() {
        e.put_gauge(&REPLICA_JOURNAL_SYNCED_HEIGHT, &[], j.synced() as f64);
        e.put_counter(&REPLICA_JOURNAL_APPENDED, &[], j.appended());
        e.put_counter(&REPLICA_JOURNAL_BYTES, &[], j.bytes_written());
        e.put_counter(&REPLICA_JOURNAL_ERRORS, &[], j.errors());
        e.put_counter(&REPLICA_JOURNAL_CERTS, &[], j.certs());
        // 07 §8.2: voted blocks waiting for the writer's full queue (never skipped).
        e.put_gauge(&REPLICA_JOURNAL_BACKLOG, &[], j.backlog_len() as f64);
        e.put_counter(&REPLICA_JOURNAL_BACKLOGGED, &[], j.backlogged);
        e.put_counter(&REPLICA_JOURNAL_SKIPPED, &[], j.skipped);
        e.put_counter(
            &REPLICA_OWN_JOURNAL_PAYLOADS,
            &[],
            n.counters().own_journal_payloads,
        );
        let failed = j.failure();
        e.put_alarm(&ALARM_JOURNAL, &[], failed.is_some());
        // 07 §8.3: the retention ring.
        e.put_alarm(&ALARM_ARCHIVE, &[], j.archive_alarm());
        let (evicted, oldest) = j.retention();
        e.put_counter(&REPLICA_JOURNAL_EVICTED, &[], evicted);
        e.put_gauge(&REPLICA_JOURNAL_OLDEST, &[], oldest as f64);
        for f in [
            crate::node::JournalFailure::Append,
            crate::node::JournalFailure::Sync,
            crate::node::JournalFailure::CertAppend,
            crate::node::JournalFailure::CertSync,
        ] {
            e.put_gauge(
                &REPLICA_JOURNAL_FAILED,
                &[f.name()],
                if failed == Some(f) { 1.0 } else { 0.0 },
            );
        }
    }
    if let Some(o) = n.order_journal() {
        // 07 §4.10: the order journal behind the peer frame store.
        e.put_counter(&REPLICA_ORDER_JOURNAL_FRAMES, &[], o.appended);
        e.put_counter(&REPLICA_ORDER_JOURNAL_SERVED, &[], n.store().from_journal);
        e.put_counter(
            &REPLICA_OWN_JOURNAL_FRAMES,
            &[],
            n.counters().own_journal_frames,
        );
        e.put_counter(&REPLICA_ORDER_JOURNAL_CORRUPT, &[], o.corrupt);
        e.put_counter(&REPLICA_ORDER_JOURNAL_ERRORS, &[], o.io_errors);
    }
}

/// Repairs and the holds of peer-supplied frames (`crate::front::quarantine`, 07 §4.10).
fn render_repairs(e: &mut Exposition, core: &crate::front::core::ReplicaCore) {
    let rx = core.order_rx().counters();
    e.put_counter(&REPLICA_REPAIRED, &[], rx.repaired);
    let cc = core.counters();
    e.put_counter(&REPLICA_HOLDS, &[], cc.holds);
    for (why, v) in ["decode", "order_root", "timeout", "full"]
        .into_iter()
        .zip(cc.holds_failed)
    {
        e.put_counter(&REPLICA_HOLDS_FAILED, &[why], v);
    }
    e.put_counter(&REPLICA_HOLDS_GIVEN_UP, &[], cc.holds_given_up);
    e.put_counter(&REPLICA_FRAMES_REWOUND, &[], rx.rewound);
}

vyrn_metrics::metrics! {
    /// Every family this role renders (docs/sre.md's metric reference and the Grafana
    /// dashboard are generated from the tables: `vyrn metrics`).
    pub METRICS;
    REPLICA_STANDBY_CHECKED_HEIGHT: Gauge "vyrn_replica_standby_checked_height" []
        "the standby's replica: every block through this height checks as a voter's would (07 §9.5)";
    REPLICA_STANDBY_PROMOTABLE: Gauge "vyrn_replica_standby_promotable" []
        "the standby's replica: 1 when promotable (REP_PROMOTE_HISTORY_S replayed, replay lag p50 within REP_PROMOTE_LAG_US, no block refused)";
    REPLICA_JOURNAL_SYNCED_HEIGHT: Gauge "vyrn_replica_journal_synced_height" []
        "highest height synced to the journal";
    REPLICA_JOURNAL_APPENDED: Counter "vyrn_replica_journal_appended_total" []
        "blocks appended";
    REPLICA_JOURNAL_BYTES: Counter "vyrn_replica_journal_bytes_total" []
        "bytes made durable in the block journal (blocks and slot heads)";
    REPLICA_JOURNAL_ERRORS: Counter "vyrn_replica_journal_errors_total" []
        "journal write errors";
    REPLICA_JOURNAL_CERTS: Counter "vyrn_replica_journal_certs_total" []
        "certificates in the cert journal";
    REPLICA_JOURNAL_FAILED: Gauge "vyrn_replica_journal_failed" ["what"]
        "1 once a journal write of this kind failed first (REP_A_JOURNAL): this replica votes no more";
    REPLICA_ORDER_JOURNAL_FRAMES: Counter "vyrn_replica_order_journal_frames_total" []
        "frames appended to the order journal";
    REPLICA_ORDER_JOURNAL_SERVED: Counter "vyrn_replica_order_journal_served_total" []
        "frames served to peers from the order journal (older than the memory store)";
    REPLICA_CATCHUP_SECONDS: Gauge "vyrn_replica_catchup_seconds" []
        "07 §7.6: from a replica's start behind the home to its replay through the final height (absent when it started with its home)";
    REPLICA_CATCHUP_RATIO: Gauge "vyrn_replica_catchup_ratio" []
        "07 §7.6: blocks replayed per second while catching up, over the home's block rate";
    REPLICA_REPAIR_RTT: Gauge "vyrn_replica_repair_rtt_seconds" []
        "07 §4.10: the smoothed repair round trip (a window's request to its first frame back); a hole is asked again after it plus four deviations, never under REP_NACK_RETRY_US (0 before the first repair)";
    REPLICA_JOURNAL_EVICTED: Counter "vyrn_replica_journal_evicted_total" []
        "blocks the block journal's retention ring deleted, oldest first (07 §8.3: `[voter.N] retain_blocks` / `retain_gib` per drive)";
    REPLICA_JOURNAL_OLDEST: Gauge "vyrn_replica_journal_oldest_height" []
        "the oldest height the block journal still holds (0: none)";
    REPLICA_JOURNAL_BACKLOG: Gauge "vyrn_replica_journal_backlog" []
        "voted blocks waiting for the journal writer's full queue (while above 0 this voter checks no new block: 07 §8.2 backpressure)";
    REPLICA_JOURNAL_BACKLOGGED: Counter "vyrn_replica_journal_backlogged_total" []
        "voted blocks that had to wait for the journal writer's full queue";
    REPLICA_JOURNAL_SKIPPED: Counter "vyrn_replica_journal_skipped_total" []
        "voted blocks never handed to the journal (a payload missing, or a header dropped past the pending bound)";
    REPLICA_OWN_JOURNAL_PAYLOADS: Counter "vyrn_replica_own_journal_payloads_total" []
        "payloads a restarted replica took from its own block journal instead of fetching them";
    REPLICA_JOURNAL_HOLDS: Counter "vyrn_replica_journal_holds_total" []
        "block checks answered pending because the journal's queue was full (the voter waits)";
    REPLICA_OWN_JOURNAL_FRAMES: Counter "vyrn_replica_own_journal_frames_total" []
        "frames a restarted replica took from its own order journal instead of the network";
    REPLICA_ORDER_JOURNAL_CORRUPT: Counter "vyrn_replica_order_journal_corrupt_total" []
        "order journal entries that failed their CRC on a read (not served)";
    REPLICA_ORDER_JOURNAL_ERRORS: Counter "vyrn_replica_order_journal_errors_total" []
        "order journal I/O errors";
    REPLICA_REPAIRED: Counter "vyrn_replica_repaired_total" []
        "frames filled by repair";
    REPLICA_HOLDS: Counter "vyrn_replica_holds_total" []
        "holds started: a peer-supplied frame and those after it kept from the decoder until a header the sequencer signed vouches for its block (07 §4.10, security review F2)";
    REPLICA_HOLDS_FAILED: Counter "vyrn_replica_holds_failed_total" ["why"]
        "holds that failed (the probe's decoder faulted, a root differed, nothing vouched for in time, too many bytes): the peer-supplied frames were dropped and asked again, the sequencer first";
    REPLICA_HOLDS_GIVEN_UP: Counter "vyrn_replica_holds_given_up_total" []
        "peer-supplied frames decoded as they were after failing at the sequencer and every peer (07 §9.1: the fault is then the sequencer's)";
    REPLICA_FRAMES_REWOUND: Counter "vyrn_replica_frames_rewound_total" []
        "frames order RX took back after a failed hold";
    REPLICA_FRAMES_REFUSED: Counter "vyrn_replica_frames_refused_total" ["why"]
        "order-path datagrams refused (07 §4.9): not a frame, another book or tenure, a substream the layout lacks, too far ahead, past the held bound, a repair nobody asked for (security review F2, F11), or a frame of a tenure deposed here (07 §9.2, INV-REP-5)";
    REPLICA_PATH_SKEW_SECONDS: Gauge "vyrn_replica_path_skew_seconds" ["quantile"]
        "B-REP-3: time from a frame's first path copy to the other path's (budget 2 µs)";
    REPLICA_REPLAY_LAG_SECONDS: Gauge "vyrn_replica_replay_lag_seconds" ["quantile"]
        "07 §7.3 replay lag, receipt to applied: a step's frame decoded to the engine replaying it (budget 2 ms steady state)";
    REPLICA_HOLE_FILL_SECONDS: Gauge "vyrn_replica_hole_fill_seconds" ["how", "quantile"]
        "07 §4.10 repair time: a missing frame's hole seen to filled, by a path or by a repair (budget 100 µs in a facility)";
    REPLICA_FRAMES: Counter "vyrn_replica_frames_total" ["path"]
        "first copies of frames, per path";
    REPLICA_FRAMES_DUPLICATE: Counter "vyrn_replica_frames_duplicate_total" ["path"]
        "frames the other path already delivered";
    REPLICA_FRAMES_LOST: Counter "vyrn_replica_frames_lost_total" ["path"]
        "frames this path never delivered";
    REPLICA_PATH_DATAGRAMS: Counter "vyrn_replica_path_datagrams_total" ["path"]
        "datagrams off the path";
    REPLICA_HOLES: Counter "vyrn_replica_holes_total" []
        "holes opened in frame_seq order";
    REPLICA_NACKS: Counter "vyrn_replica_nacks_total" []
        "NACKs sent to the sequencer";
    REPLICA_PEER_REPAIRS_ASKED: Counter "vyrn_replica_peer_repairs_asked_total" []
        "RepairReqs sent to peers";
    REPLICA_PEER_REPAIRS_SERVED: Counter "vyrn_replica_peer_repairs_served_total" []
        "peer RepairReqs served";
    REPLICA_PEER_REPAIRS_OVER_SHARE: Counter "vyrn_replica_peer_repairs_over_share_total" []
        "peer RepairReqs refused: that peer used up its share (1/(n-1)) of REP_PEER_RTX_MAX_FPS";
    REPLICA_REPACKS: Counter "vyrn_replica_repacks_total" []
        "RepAcks sent";
    REPLICA_NACK_TOO_OLD: Counter "vyrn_replica_nack_too_old_total" []
        "NackTooOld answers";
    REPLICA_HEADERS: Counter "vyrn_replica_headers_total" []
        "block headers received";
    REPLICA_HEADERS_BAD_SIGNATURE: Counter "vyrn_replica_headers_bad_signature_total" []
        "headers whose seq_sig did not verify";
    REPLICA_BLOCKS_VERIFIED: Counter "vyrn_replica_blocks_verified_total" []
        "blocks whose verdict passed every check of 07 §6.4";
    REPLICA_BLOCKS_REFUSED: Counter "vyrn_replica_blocks_refused_total" []
        "blocks refused for voting";
    REPLICA_BLOCKS: Counter "vyrn_replica_blocks_total" []
        "blocks the decoder completed";
    REPLICA_DATA_FRAMES: Counter "vyrn_replica_data_frames_total" ["kind"]
        "frames from the data tier, by kind (DATA, DATA_HB, FETCH_RESP)";
    REPLICA_DATA_GAPS: Counter "vyrn_replica_data_gaps_total" []
        "data_seq gaps detected";
    REPLICA_DATA_GAP_FETCHES: Counter "vyrn_replica_data_gap_fetches_total" []
        "DataFetch sent for gaps";
    REPLICA_DATA_BOX_DOWN: Counter "vyrn_replica_data_box_down_total" []
        "data boxes declared down (silence)";
    REPLICA_PAYLOAD_COPIES: Counter "vyrn_replica_payload_copies_total" ["what"]
        "distinct copies of one (session, pkt_seq) held beside its first (a conflicting duplicate the box logged, or a client whose two copies differ), and unasked ones refused past EXTRA_COPIES_MAX (docs/wire.md \"What the box logs\")";
    REPLICA_DATA_DOWN_GOSSIP: Counter "vyrn_replica_data_down_gossip_total" ["dir"]
        "DataDown gossip (07 §5.7), by direction: rounds sent, messages taken from peers";
    REPLICA_FAILOVER_STAGE: Gauge "vyrn_replica_failover_stage_seconds" ["stage"]
        "the last failover at this replica (07 §9.7): each stage (detected, deposed, planned, sealed, followed) in seconds after the box's last frame here";
    REPLICA_FAILOVER: Counter "vyrn_replica_failover_total" ["what"]
        "sequencer failover at this voter (07 §9.1–§9.2): suspicions that froze the tail, Silence rounds sent, peers' Silence taken, counted, refused as stale (another epoch, tenure or sequencer) or forged (not a voter, another reporter, a bad signature), dropped at a full queue, and suspicions aborted short of Q";
    REPLICA_TENURE: Gauge "vyrn_replica_tenure" []
        "the tenure whose frames this replica takes (07 §2.2): 0 for the epoch's primary, 1 once it follows the standby promoted by a seal (07 §9.5)";
    REPLICA_TENURE_DEPOSED: Gauge "vyrn_replica_tenure_deposed" []
        "1 once the tenure it watches is deposed at this voter (07 §9.2, INV-REP-5: its frames are refused from then on); 0 again once it follows the next tenure";
    REPLICA_PEER_DATA: Counter "vyrn_replica_peer_data_total" ["what"]
        "payloads fetched from peers and the sequencer (07 §5.5 sources 2 and 3): PeerDataFetch asked, PeerData received, served, not held, over the rate, pushed unasked to the peers for a seal this voter refused (07 §9.3 item 4); SeqDataReq asked, SeqData received";
    REPLICA_DATA_REDIRECTS: Counter "vyrn_replica_data_redirects_total" []
        "DataRedirect sent to the live data boxes (07 §5.7), one per session per round";
    REPLICA_PAYLOADS_UNAVAILABLE: Counter "vyrn_replica_payloads_unavailable_total" []
        "payloads no fetch source had (07 §5.5)";
    REPLICA_SEAL_PACKETS: Counter "vyrn_replica_seal_packets_total" ["what"]
        "a failover seal's data (07 §9.3 item 4, §9.4): records a final seal excluded (listed unavailable; replay ran them without a payload), of those the ones this replica had already replayed (its replay then differs from the final log), and copies held back from replay while a seal was pending";
    REPLICA_COPY_MISMATCHES: Counter "vyrn_replica_copy_mismatches_total" []
        "CopyMismatch evidence raised (07 §5.6)";
    REPLICA_SEQ_FAULTS: Counter "vyrn_replica_seq_faults_total" []
        "sequencer faults the decoder raised (07 §3.12)";
    REPLICA_CONSENSUS_FAULTS: Counter "vyrn_replica_consensus_faults_total" []
        "conflict evidence from the consensus engine (07 §10.2)";
    REPLICA_UNKNOWN_SOURCES: Counter "vyrn_replica_unknown_sources_total" []
        "datagrams from non-members, dropped unread";
    REPLICA_SEAL_REFUSED: Counter "vyrn_replica_seal_refused_total" ["why"]
        "member control messages refused by the member envelope: bare where a seal is required, or a seal that does not verify or is replayed";
    REPLICA_CONTROL_BAD: Counter "vyrn_replica_control_bad_total" []
        "control messages that did not parse";
    REPLICA_TX: Counter "vyrn_replica_tx_total" []
        "datagrams sent";
    REPLICA_TX_DROPPED: Counter "vyrn_replica_tx_dropped_total" []
        "datagrams the kernel refused";
    REPLICA_VOTED_HEIGHT: Gauge "vyrn_replica_voted_height" []
        "highest height this voter's verdict let it vote for";
    REPLICA_REPLAY_RING_BYTES: Counter "vyrn_replica_replay_ring_bytes_total" []
        "bytes the front handed replay over its ring (--replay-thread)";
    REPLICA_REPLAY_RING_FULL: Counter "vyrn_replica_replay_ring_full_total" []
        "front pushes that found replay's ring full and staged the rest (--replay-thread)";
    REPLICA_REPLAY_STAGED_BYTES: Gauge "vyrn_replica_replay_staged_bytes" []
        "bytes staged at the front behind a full replay ring (--replay-thread)";
    REPLICA_REPLAY_RECORDS_WAITING: Gauge "vyrn_replica_replay_records_waiting" []
        "records queued in the replay thread's lanes, for their payload or their turn (--replay-thread)";
    REPLICA_REPLAY_LAG_STEPS: Gauge "vyrn_replica_replay_lag_steps" []
        "steps decoded but not yet replayed";
    REPLICA_REPLAY_RESPONSES: Counter "vyrn_replica_replay_responses_total" []
        "responses replay produced";
    REPLICA_FINAL_HEIGHT: Gauge "vyrn_replica_final_height" []
        "final height this voter saw finalized";
    REPLICA_FINAL_VIEW: Gauge "vyrn_replica_final_view" []
        "the view of that finalization";
    REPLICA_PROPOSALS: Counter "vyrn_replica_proposals_total" []
        "proposals this voter made as leader";
    REPLICA_VERIFY: Counter "vyrn_replica_verify_total" ["result"]
        "verify answers, by result";
    REPLICA_NULLIFIED_VIEWS: Counter "vyrn_replica_nullified_views_total" []
        "views nullified";
    REPLICA_FINALIZE_VOTES_SENT: Counter "vyrn_replica_finalize_votes_sent_total" []
        "finalize votes sent to the box";
    REPLICA_CERTS_SENT: Counter "vyrn_replica_certs_sent_total" []
        "finality certificates sent to the box";
    REPLICA_SNAPSHOTS_WRITTEN: Counter "vyrn_replica_snapshots_written_total" []
        "REP_Snapshots written to the snapshot area (07 §7.5)";
    REPLICA_SNAPSHOT_HEIGHT: Gauge "vyrn_replica_snapshot_height" []
        "height of the newest snapshot written (07 §7.5)";
    REPLICA_SNAPSHOTS_REFUSED: Gauge "vyrn_replica_snapshots_refused" []
        "snapshots in the area refused at start: a bad section, a commitment that does not recompute, a root not the certified one (07 §7.5)";
    REPLICA_RSP_KEPT: Counter "vyrn_replica_rsp_kept_total" []
        "the recovery service (07 §8.5, on the voter the membership names): response packets kept as REP_RspEntry";
    REPLICA_RSP_ENTRY_BYTES: Counter "vyrn_replica_rsp_entry_bytes_total" []
        "the recovery service: bytes of the entries kept (per packet: B-REP-14, budget 53 B)";
    REPLICA_RSP_REFUSED: Counter "vyrn_replica_rsp_refused_total" []
        "the recovery service: responses not kept (a repeat resp_seq, an unknown session, a record that cannot be rebuilt exactly)";
    REPLICA_RSP_REBUILT: Counter "vyrn_replica_rsp_rebuilt_total" []
        "the recovery service: resends rebuilt from the store";
    REPLICA_RSP_GONE: Counter "vyrn_replica_rsp_gone_total" []
        "the recovery service: resends asked for that the store no longer (or never) held";
    REPLICA_RSP_PAGES: Gauge "vyrn_replica_rsp_pages" []
        "the recovery service: 4 KiB pages in use";
    REPLICA_SNAPSHOT_LOADED: Gauge "vyrn_replica_snapshot_loaded_height" []
        "height of the snapshot replay started from at this process's start (07 §7.6; 0: replay began at the tenure's start)";
    REPLICA_SNAPSHOTS_SKIPPED: Gauge "vyrn_replica_snapshots_skipped" []
        "snapshots that verified at start but were passed over at the load (no replay tally, another epoch, unreadable; 07 §7.6)";
    REPLICA_SNAPSHOT_ERRORS: Counter "vyrn_replica_snapshot_errors_total" []
        "snapshots not written: the write failed or their header never came";
    REPLICA_ROOTS_PROPOSED: Counter "vyrn_replica_roots_proposed_total" []
        "state roots R(h) this replica's replay took and signed";
    REPLICA_ROOT_CERTS: Counter "vyrn_replica_root_certs_total" []
        "REP_RootCerts formed over this replica's own root (into the cert journal)";
    REPLICA_ROOT_FAULTS: Counter "vyrn_replica_root_faults_total" []
        "root signatures for a digest other than the certified one (RootFault, 07 §10.2)";
    REPLICA_ROOT_GATE_WAITS: Counter "vyrn_replica_root_gate_waits_total" []
        "verifies held by the root gate (INV-REP-7)";
    REPLICA_DIVERGED: Gauge "vyrn_replica_diverged" []
        "1 once REP_A_DIVERGE fired: this replica votes no more (INV-REP-9)";
    REPLICA_ENGINE_UP: Gauge "vyrn_replica_engine_up" []
        "1 while the Simplex engine runs";
}

vyrn_metrics::alarms! {
    /// The alarms this role raises.
    pub ALARMS;
    ALARM_JOURNAL: "REP_A_JOURNAL" "replica";
    ALARM_ARCHIVE: "REP_A_ARCHIVE" "replica";
    ALARM_PATH: "REP_A_PATH" "replica";
    ALARM_DIVERGE: "REP_A_DIVERGE" "replica";
    ALARM_STANDBY: "REP_A_STANDBY" "standby";
}

impl Node {
    /// The replica's counters, heights and alarms in Prometheus form (docs/sre.md lists each;
    /// each family is declared in this module's table, [`METRICS`]).
    pub fn metrics(&self, e: &mut Exposition) {
        render(self, e)
    }
}

fn render(n: &Node, e: &mut Exposition) {
    let core = n.core();
    let c = n.counters();
    let rx = core.order_rx().counters();
    for (why, v) in [
        "malformed",
        "other_book",
        "other_tenure",
        "bad_stream",
        "too_far_ahead",
        "held_full",
        "unsolicited",
        "deposed",
    ]
    .into_iter()
    .zip(rx.refused)
    {
        e.put_counter(&REPLICA_FRAMES_REFUSED, &[why], v);
    }
    let skew = core.order_rx().path_skew();
    for (q, v) in [("0.5", skew.p50), ("0.99", skew.p99), ("1", skew.max)] {
        e.put_gauge(&REPLICA_PATH_SKEW_SECONDS, &[q], v as f64 / 1e9);
    }
    let lag = core.replay_lag_time();
    for (q, v) in [("0.5", lag.p50), ("0.99", lag.p99), ("1", lag.max)] {
        e.put_gauge(&REPLICA_REPLAY_LAG_SECONDS, &[q], v as f64 / 1e9);
    }
    let fill = core.order_rx().hole_fill();
    for (how, f) in [("path", fill.by_path), ("repair", fill.by_repair)] {
        for (q, v) in [("0.5", f.p50), ("0.99", f.p99), ("1", f.max)] {
            e.put_gauge(&REPLICA_HOLE_FILL_SECONDS, &[how, q], v as f64 / 1e9);
        }
    }
    for (p, path) in ["A", "B"].iter().enumerate() {
        e.put_counter(&REPLICA_FRAMES, &[*path], rx.first[p]);
        e.put_counter(&REPLICA_FRAMES_DUPLICATE, &[*path], rx.dups[p]);
        e.put_counter(&REPLICA_FRAMES_LOST, &[*path], rx.lost[p]);
        e.put_counter(&REPLICA_PATH_DATAGRAMS, &[*path], c.path_rx[p]);
        e.put_alarm(
            &ALARM_PATH,
            &[("path", *path)],
            core.order_rx().path_alarm(p as u8),
        );
    }
    e.put_counter(&REPLICA_HOLES, &[], rx.holes);
    e.put_counter(&REPLICA_NACKS, &[], rx.nacks);
    e.put_counter(&REPLICA_PEER_REPAIRS_ASKED, &[], rx.repairs);
    render_repairs(e, core);
    e.put_counter(&REPLICA_PEER_REPAIRS_SERVED, &[], c.repairs_served.0);
    e.put_counter(&REPLICA_PEER_REPAIRS_OVER_SHARE, &[], c.repairs_over_share);
    e.put_counter(&REPLICA_REPACKS, &[], rx.acks);
    e.put_counter(&REPLICA_NACK_TOO_OLD, &[], c.too_old);
    let v = core.verdicts().counters();
    e.put_counter(&REPLICA_HEADERS, &[], v.headers);
    e.put_counter(&REPLICA_HEADERS_BAD_SIGNATURE, &[], v.bad_sig);
    e.put_counter(&REPLICA_BLOCKS_VERIFIED, &[], v.verified);
    e.put_counter(&REPLICA_BLOCKS_REFUSED, &[], v.refused);
    e.put_counter(&REPLICA_BLOCKS, &[], c.blocks);
    let d = core.data().counters();
    for (k, kind) in ["data", "heartbeat", "fetch_response"].iter().enumerate() {
        e.put_counter(&REPLICA_DATA_FRAMES, &[kind], d.frames[k]);
    }
    e.put_counter(&REPLICA_DATA_GAPS, &[], d.gaps);
    e.put_counter(&REPLICA_DATA_GAP_FETCHES, &[], d.gap_fetches);
    e.put_counter(&REPLICA_DATA_BOX_DOWN, &[], d.box_down);
    for (what, v) in [("extra", d.copies_extra), ("refused", d.copies_refused)] {
        e.put_counter(&REPLICA_PAYLOAD_COPIES, &[what], v);
    }
    e.put_counter(&REPLICA_DATA_DOWN_GOSSIP, &["sent"], c.data_down_sent);
    e.put_counter(&REPLICA_DATA_DOWN_GOSSIP, &["taken"], c.data_down_rx);
    render_peer_data(e, &c);
    e.put_counter(&REPLICA_DATA_REDIRECTS, &[], c.redirects_sent);
    render_failover(e, n);
    e.put_counter(&REPLICA_PAYLOADS_UNAVAILABLE, &[], c.unavailable);
    e.put_counter(&REPLICA_COPY_MISMATCHES, &[], c.copy_mismatches);
    e.put_counter(&REPLICA_SEQ_FAULTS, &[], c.seq_faults);
    e.put_counter(&REPLICA_CONSENSUS_FAULTS, &[], c.consensus_faults);
    e.put_counter(&REPLICA_UNKNOWN_SOURCES, &[], c.unknown_src);
    e.put_counter(&REPLICA_SEAL_REFUSED, &["unsealed"], c.unsealed);
    e.put_counter(&REPLICA_SEAL_REFUSED, &["bad_seal"], c.bad_seal);
    e.put_counter(&REPLICA_CONTROL_BAD, &[], c.ctrl_bad);
    e.put_counter(&REPLICA_TX, &[], c.tx);
    e.put_counter(&REPLICA_TX_DROPPED, &[], c.tx_dropped);
    e.put_gauge(&REPLICA_VOTED_HEIGHT, &[], n.voted() as f64);
    // Replay on its own thread (--replay-thread): the ring between the front and replay.
    if let Some(tx) = core.replay_tx() {
        let c = tx.counters();
        e.put_counter(&REPLICA_REPLAY_RING_BYTES, &[], c.bytes);
        e.put_counter(&REPLICA_REPLAY_RING_FULL, &[], c.ring_full);
        e.put_gauge(&REPLICA_REPLAY_STAGED_BYTES, &[], tx.staged() as f64);
        e.put_gauge(
            &REPLICA_REPLAY_RECORDS_WAITING,
            &[],
            tx.progress().waiting as f64,
        );
    }
    let (dec, rep) = core.replay_lag();
    e.put_gauge(
        &REPLICA_REPLAY_LAG_STEPS,
        &[],
        dec.saturating_sub(rep) as f64,
    );
    e.put_counter(&REPLICA_REPLAY_RESPONSES, &[], n.replay().responses);
    n.rsp_store().inspect(|s| put_rsp(e, &s.counters()));
    if let Some(s) = n.simplex() {
        let dc = s.desk_counters();
        let vc = s.counters();
        e.put_gauge(&REPLICA_FINAL_HEIGHT, &[], s.final_height() as f64);
        e.put_gauge(&REPLICA_FINAL_VIEW, &[], s.final_view() as f64);
        e.put_counter(&REPLICA_PROPOSALS, &[], dc.proposed);
        e.put_counter(&REPLICA_VERIFY, &["true"], dc.verify_true);
        e.put_counter(&REPLICA_VERIFY, &["false"], dc.verify_false);
        e.put_counter(&REPLICA_VERIFY, &["timeout"], dc.verify_timeout);
        e.put_counter(&REPLICA_NULLIFIED_VIEWS, &[], dc.nullified);
        e.put_counter(&REPLICA_FINALIZE_VOTES_SENT, &[], vc.votes_out);
        e.put_counter(&REPLICA_CERTS_SENT, &[], vc.certs_out);
        // 07 §7.4: state roots.
        e.put_counter(&REPLICA_SNAPSHOTS_WRITTEN, &[], c.snapshots_written);
        e.put_gauge(&REPLICA_SNAPSHOT_HEIGHT, &[], c.snapshot_height as f64);
        e.put_gauge(&REPLICA_SNAPSHOTS_REFUSED, &[], c.snapshots_refused as f64);
        e.put_gauge(&REPLICA_SNAPSHOT_LOADED, &[], c.snapshot_loaded as f64);
        e.put_gauge(&REPLICA_SNAPSHOTS_SKIPPED, &[], c.snapshots_skipped as f64);
        e.put_counter(&REPLICA_SNAPSHOT_ERRORS, &[], c.snapshot_errors);
        e.put_counter(&REPLICA_ROOTS_PROPOSED, &[], dc.roots_proposed);
        e.put_counter(&REPLICA_ROOT_CERTS, &[], vc.root_certs_out);
        e.put_counter(&REPLICA_ROOT_FAULTS, &[], vc.root_faults);
        e.put_counter(&REPLICA_JOURNAL_HOLDS, &[], vc.journal_holds);
        e.put_counter(&REPLICA_ROOT_GATE_WAITS, &[], dc.root_gate_waits);
        e.put_alarm(&ALARM_DIVERGE, &[], vc.diverges > 0);
        e.put_gauge(&REPLICA_DIVERGED, &[], vc.diverges.min(1) as f64);
        let (started, failed) = s.engine_state();
        e.put_gauge(
            &REPLICA_ENGINE_UP,
            &[],
            if started && !failed { 1.0 } else { 0.0 },
        );
    }
    render_journal(e, n);
    render_standby(e, n);
}

/// 07 §9.5: the standby's replica.
fn render_standby(e: &mut Exposition, n: &Node) {
    if let Some((checked, p, alarm)) = n.standby_state() {
        e.put_gauge(&REPLICA_STANDBY_CHECKED_HEIGHT, &[], checked as f64);
        let promotable = if p.yes() { 1.0 } else { 0.0 };
        e.put_gauge(&REPLICA_STANDBY_PROMOTABLE, &[], promotable);
        e.put_alarm(&ALARM_STANDBY, &[], alarm);
    }
}
