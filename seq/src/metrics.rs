//! The box's metrics (docs/sre.md): its table ([`METRICS`], [`ALARMS`])
//! and the rendering through it, read from the tiles' shared counters and
//! watermarks by the box's reporting loop once a second, never by a tile.

use std::sync::atomic::Ordering;

use vyrn_metrics::Exposition;

use crate::ports::RunningBox;

vyrn_metrics::metrics! {
    /// Every family this role renders (docs/sre.md's metric reference and the Grafana
    /// dashboard are generated from the tables: `vyrn metrics`).
    pub METRICS;
    UPTIME_SECONDS: Gauge "vyrn_uptime_seconds" []
        "seconds since the box started, at this rendering";
    TILE_POLLS: Counter "vyrn_tile_polls_total" ["tile"]
        "polls of the tile";
    TILE_WORK_POLLS: Counter "vyrn_tile_work_polls_total" ["tile"]
        "polls that did work";
    TILE_IDLE_POLLS: Counter "vyrn_tile_idle_polls_total" ["tile"]
        "polls that found nothing to do";
    TILE_BUSY_SECONDS: Counter "vyrn_tile_busy_seconds_total" ["tile"]
        "time in polls that did work (its core's load: rate of this)";
    TILE_BACKPRESSURE: Counter "vyrn_tile_backpressure_total" ["tile"]
        "pushes that found the next tile's ring full and waited in this tile's overflow (back-pressure)";
    SEQ_CLIENT_PACKETS: Counter "vyrn_seq_client_packets_total" []
        "client packets received";
    SEQ_CLIENT_PACKETS_DROPPED: Counter "vyrn_seq_client_packets_dropped_total" ["reason"]
        "client packets dropped at RX, by reason";
    SEQ_RESPONSES: Counter "vyrn_seq_responses_total" []
        "responses and notices sent";
    SEQ_RESPONSES_NO_ADDRESS: Counter "vyrn_seq_responses_no_address_total" []
        "answers to sessions not heard from yet";
    SEQ_TX_DROPPED: Counter "vyrn_seq_tx_dropped_total" []
        "datagrams the kernel refused (sendmmsg)";
    SEQ_PATH_FENCES: Counter "vyrn_seq_path_fences_total" []
        "completed fences on the replication paths";
    SEQ_PATH_WRITES: Counter "vyrn_seq_path_writes_total" ["path"]
        "frame writes per replication path";
    SEQ_PATH_WRITE_ERRORS: Counter "vyrn_seq_path_write_errors_total" []
        "frame writes a path refused";
    SEQ_CONTROL_MESSAGES: Counter "vyrn_seq_control_messages_total" ["kind"]
        "control messages from the voters, by kind (finality: finalize votes and certificates)";
    SEQ_CONTROL_REFUSED: Counter "vyrn_seq_control_refused_total" ["reason"]
        "control messages refused, by reason";
    SEQ_DATA_REPORTS: Counter "vyrn_seq_data_reports_total" ["what"]
        "07 §5.2 reports from the data boxes, sealed by them: copy 2 with a bad tag, client equivocation (two copies of one packet) and its evidence frame";
    SEQ_FINALIZE_BAD_SIGNATURES: Counter "vyrn_seq_finalize_bad_signatures_total" []
        "finalize signatures that did not verify (their message also counts as reason=bad)";
    SEQ_NACK_TOO_OLD: Counter "vyrn_seq_nack_too_old_total" []
        "NACKs for frames out of the frame ring";
    SEQ_SEQ_DATA: Counter "vyrn_seq_seq_data_total" ["what"]
        "SeqDataReq taken from voters and SeqData answers sent from lane packet retention (07 §5.5 source 3)";
    SEQ_RTX_UNICAST: Counter "vyrn_seq_rtx_unicast_total" ["outcome"]
        "frames retransmitted unicast to a NACK's sender (07 §4.10), by outcome";
    SEQ_DURABLE_MARKS: Counter "vyrn_seq_durable_marks_total" []
        "REP_DurableMark sent";
    SEQ_STEP_DONE: Gauge "vyrn_seq_step_done" []
        "step_done: steps the BBO core completed";
    SEQ_RELEASED_STEP: Gauge "vyrn_seq_released_step" ["substream"]
        "released[substream]: the gate's word";
    SEQ_GATE_FRAMES: Counter "vyrn_seq_gate_frames_total" ["substream"]
        "frames written and fenced, per substream";
    SEQ_GATE_WRITE_FENCES: Counter "vyrn_seq_gate_write_fences_total" ["substream"]
        "fences because no path took a frame";
    SEQ_GATE_FENCED_DROPS: Counter "vyrn_seq_gate_fenced_drops_total" ["substream"]
        "frames sealed after the fence, never written";
    SEQ_GATE_BUSY: Counter "vyrn_seq_gate_busy_total" ["substream", "path"]
        "writes a path pushed back on";
    SEQ_GATE_FAILED: Counter "vyrn_seq_gate_failed_total" ["substream", "path"]
        "writes a path refused";
    SEQ_PATH_DOWN: Counter "vyrn_seq_path_down_total" ["substream", "path"]
        "times REP_A_PATH was raised";
    SEQ_FENCED: Gauge "vyrn_seq_fenced" []
        "seq_fenced (INV-REP-6): 1 once the box writes nothing more this tenure";
    SEQ_FENCED_DROPS: Counter "vyrn_seq_fenced_drops_total" []
        "responses and notices held back by the fence";
    SEQ_ENCODE_ERRORS: Counter "vyrn_seq_encode_errors_total" []
        "encoding refusals in the stream cores";
    SEQ_DURABLE_STEP: Gauge "vyrn_seq_durable_step" []
        "DUR_QUORUM step (07 §6.9)";
    SEQ_FINAL_HEIGHT: Gauge "vyrn_seq_final_height" []
        "final height: Q valid Simplex finalize votes at the listener";
    SEQ_CLOSED_HEIGHT: Gauge "vyrn_seq_closed_height" []
        "blocks closed";
    SEQ_FINALITY_GATE_HALTS: Counter "vyrn_seq_finality_gate_halts_total" []
        "halts by the finality gate (FIN_GATE_BLOCKS unfinalized)";
    SEQ_DIVERGE_HALTS: Counter "vyrn_seq_diverge_halts_total" []
        "book halts for a voter's Diverge (REP_A_DIVERGE, 07 §7.4); the book stays halted";
    SEQ_DIVERGE_MSGS: Counter "vyrn_seq_diverge_msgs_total" []
        "Diverge messages from registered voters";
    SEQ_DIVERGE_UNPROVEN: Counter "vyrn_seq_diverge_unproven_total" ["what"]
        "Diverge messages that did not halt the book: evidence that does not check (refused), or a timeout from fewer than f + 1 voters so far (pending) (07 §7.4)";
    SEQ_REPACKS_REFUSED: Counter "vyrn_seq_repacks_refused_total" []
        "impossible RepAcks refused";
    SEQ_CLOSE_TO_FINAL_SECONDS: Gauge "vyrn_seq_close_to_final_seconds" ["quantile"]
        "block close -> final at the listener, over the run";
    SEQ_CLOSE_TO_FINAL_BLOCKS: Counter "vyrn_seq_close_to_final_blocks_total" []
        "blocks in the close -> final figure";
}

vyrn_metrics::alarms! {
    /// The alarms this role raises.
    pub ALARMS;
    ALARM_PATH: "REP_A_PATH" "seq";
    ALARM_DIVERGE: "REP_A_DIVERGE" "seq";
}

/// Every counter of the box, its tiles' work and idle polls, its watermarks and alarms, in
/// Prometheus form (docs/sre.md lists each).
pub fn render(running: &RunningBox, e: &mut Exposition, now_ns: u64) {
    let r = Ordering::Relaxed;
    // The time of this rendering on the box's clock: a scraper computes rates over it, not
    // over its own scrape times (the box renders once a second on its own beat).
    e.put_gauge(&UPTIME_SECONDS, &[], now_ns as f64 / 1e9);
    let s = &running.stats;
    for (name, _, st) in &running.runner.stats {
        let (polls, busy) = (st.polls.load(r), st.busy_polls.load(r));
        e.put_counter(&TILE_POLLS, &[name.as_str()], polls);
        e.put_counter(&TILE_WORK_POLLS, &[name.as_str()], busy);
        e.put_counter(
            &TILE_IDLE_POLLS,
            &[name.as_str()],
            polls.saturating_sub(busy),
        );
        e.put_counter_f64(
            &TILE_BUSY_SECONDS,
            &[name.as_str()],
            st.busy_ns.load(r) as f64 / 1e9,
        );
        e.put_counter(
            &TILE_BACKPRESSURE,
            &[name.as_str()],
            st.backpressure.load(r),
        );
    }
    e.put_counter(&SEQ_CLIENT_PACKETS, &[], s.rx_client.load(r));
    for (why, c) in [
        ("unknown_session", &s.rx_unknown),
        ("too_long", &s.rx_too_long),
        ("over_slot", &s.rx_truncated),
        ("wrong_lane_port", &s.rx_wrong_port),
        ("lane_ring_full", &s.rx_full),
        ("socket_full", &s.rx_kernel_dropped),
    ] {
        e.put_counter(&SEQ_CLIENT_PACKETS_DROPPED, &[why], c.load(r));
    }
    e.put_counter(&SEQ_RESPONSES, &[], s.responses.load(r));
    e.put_counter(&SEQ_RESPONSES_NO_ADDRESS, &[], s.no_addr.load(r));
    e.put_counter(&SEQ_TX_DROPPED, &[], s.tx_dropped.load(r));
    e.put_counter(&SEQ_PATH_FENCES, &[], s.fences.load(r));
    for (p, name) in ["A", "B"].iter().enumerate() {
        e.put_counter(&SEQ_PATH_WRITES, &[name], s.path_writes[p].load(r));
    }
    e.put_counter(&SEQ_PATH_WRITE_ERRORS, &[], s.frame_errors.load(r));
    for (k, name) in ["repack", "nack", "finality"].iter().enumerate() {
        e.put_counter(&SEQ_CONTROL_MESSAGES, &[name], s.ctrl[k].load(r));
    }
    for (why, c) in [
        ("bad", &s.ctrl_bad),
        ("over_slot", &s.ctrl_truncated),
        ("unknown_source", &s.ctrl_unknown),
        ("unsealed", &s.ctrl_unsealed),
        ("bad_seal", &s.ctrl_bad_seal),
        ("queue_full_or_rate", &s.ctrl_dropped),
        ("nack_over_share", &s.nacks_over_share),
    ] {
        e.put_counter(&SEQ_CONTROL_REFUSED, &[why], c.load(r));
    }
    for (what, c) in [
        ("bad_mac", &s.data_bad_mac),
        ("copy_conflict", &s.copy_conflicts),
        ("evidence", &s.conflict_evidence),
    ] {
        e.put_counter(&SEQ_DATA_REPORTS, &[what], c.load(r));
    }
    e.put_counter(&SEQ_FINALIZE_BAD_SIGNATURES, &[], s.bad_sigs.load(r));
    e.put_counter(&SEQ_NACK_TOO_OLD, &[], s.too_old.load(r));
    for (what, v) in [
        ("requests", s.seq_data_reqs.load(r)),
        ("answered", s.seq_data_sent.load(r)),
    ] {
        e.put_counter(&SEQ_SEQ_DATA, &[what], v);
    }
    e.put_counter(&SEQ_RTX_UNICAST, &["sent"], s.rtx_unicast.load(r));
    e.put_counter(&SEQ_RTX_UNICAST, &["refused"], s.rtx_unicast_failed.load(r));
    e.put_counter(&SEQ_DURABLE_MARKS, &[], s.durable_marks.load(r));
    let h = &running.handles;
    let w = &h.words;
    e.put_gauge(&SEQ_STEP_DONE, &[], w.step_done() as f64);
    for (g, sub) in w.gate.iter().zip(["A", "B"]) {
        e.put_gauge(
            &SEQ_RELEASED_STEP,
            &[sub],
            w.released(if sub == "A" { 0 } else { 1 }) as f64,
        );
        e.put_counter(&SEQ_GATE_FRAMES, &[sub], g.frames.load(r));
        e.put_counter(&SEQ_GATE_WRITE_FENCES, &[sub], g.write_fences.load(r));
        e.put_counter(&SEQ_GATE_FENCED_DROPS, &[sub], g.fenced_drops.load(r));
        for (p, path) in ["A", "B"].iter().enumerate() {
            e.put_counter(&SEQ_GATE_BUSY, &[sub, path], g.busy[p].load(r));
            e.put_counter(&SEQ_GATE_FAILED, &[sub, path], g.failed[p].load(r));
            e.put_counter(&SEQ_PATH_DOWN, &[sub, path], g.path_down[p].load(r));
            e.put_alarm(
                &ALARM_PATH,
                &[("substream", sub), ("path", path)],
                g.alarm[p].load(r),
            );
        }
    }
    e.put_gauge(&SEQ_FENCED, &[], if w.fenced() { 1.0 } else { 0.0 });
    e.put_counter(&SEQ_FENCED_DROPS, &[], w.fenced_drops.load(r));
    e.put_counter(&SEQ_ENCODE_ERRORS, &[], w.errors.load(r));
    let c = &h.control;
    e.put_gauge(&SEQ_DURABLE_STEP, &[], c.durable.load(r) as f64);
    e.put_gauge(&SEQ_FINAL_HEIGHT, &[], c.final_height.load(r) as f64);
    e.put_gauge(&SEQ_CLOSED_HEIGHT, &[], c.closed_height.load(r) as f64);
    e.put_counter(&SEQ_FINALITY_GATE_HALTS, &[], c.gate_halts.load(r));
    e.put_counter(&SEQ_DIVERGE_HALTS, &[], c.diverge_halts.load(r));
    e.put_alarm(&ALARM_DIVERGE, &[], c.diverge_halts.load(r) > 0);
    e.put_counter(&SEQ_DIVERGE_MSGS, &[], c.diverge_msgs.load(r));
    for (what, v) in [
        ("refused", s.diverge_refused.load(r)),
        ("pending", s.diverge_pending.load(r)),
    ] {
        e.put_counter(&SEQ_DIVERGE_UNPROVEN, &[what], v);
    }
    e.put_counter(&SEQ_REPACKS_REFUSED, &[], c.acks_refused.load(r));
    for (i, q) in ["0.5", "0.99", "1"].iter().enumerate() {
        e.put_gauge(
            &SEQ_CLOSE_TO_FINAL_SECONDS,
            &[q],
            c.close_to_final[i].load(r) as f64 / 1e9,
        );
    }
    e.put_counter(&SEQ_CLOSE_TO_FINAL_BLOCKS, &[], c.close_to_final[3].load(r));
}
