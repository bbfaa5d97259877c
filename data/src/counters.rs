//! The data box's counters: plain `u64`s owned by the box's thread, one per event and one per
//! drop reason, so that every packet that came in is accounted for exactly once:
//!
//! ```text
//! rx_packets = stored + conflicts + Σ drop_*
//! ```
//!
//! [`Counters::iter`] walks them as `(name, value)` pairs, [`Counters::describe`] as `(name,
//! help)` from their doc comments; `Display` prints one `name value`
//! line each (the format `docs/data.md` explains, counter by counter).

use core::fmt;

macro_rules! counters {
    ($( $(#[doc = $doc:literal])* $name:ident ),* $(,)?) => {
        /// Every counter of one data box (see the module docs and `docs/data.md`).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
        pub struct Counters {
            $( $(#[doc = $doc])* pub $name: u64, )*
        }

        impl Counters {
            /// Every counter's name, in print order.
            pub const NAMES: &'static [&'static str] = &[$( stringify!($name) ),*];

            /// Every counter's help, in print order: its doc comment, written once here and
            /// read by the metrics endpoint (the counters describe themselves).
            pub const HELP: &'static [&'static str] = &[$( concat!($($doc),*) ),*];

            /// `(name, help)` for every counter, in print order (help trimmed).
            pub fn describe() -> impl Iterator<Item = (&'static str, &'static str)> {
                Self::NAMES.iter().copied().zip(Self::HELP.iter().map(|h| h.trim()))
            }

            /// `(name, value)` for every counter, in print order.
            pub fn iter(&self) -> impl Iterator<Item = (&'static str, u64)> {
                [$( (stringify!($name), self.$name) ),*].into_iter()
            }

            /// The metric table of the data box: every counter as
            /// `vyrn_data_<counter>_total{databox}`, its help its doc comment.
            pub const METRICS: &'static [vyrn_metrics::Metric] = &[$(
                vyrn_metrics::Metric {
                    name: concat!("vyrn_data_", stringify!($name), "_total"),
                    help: concat!($($doc),*),
                    kind: vyrn_metrics::Kind::Counter,
                    labels: &["databox"],
                }
            ),*];

            /// Every counter through [`Counters::METRICS`], labelled with its box.
            pub fn metrics(&self, e: &mut vyrn_metrics::Exposition, databox: &str) {
                for (m, (_, v)) in Self::METRICS.iter().zip(self.iter()) {
                    e.put_counter(m, &[databox], v);
                }
            }
        }

    };
}

counters! {
    /// Client packets offered to ingest (07 §5.2).
    rx_packets,
    /// Their bytes.
    rx_bytes,
    /// New packets stored and fanned out.
    stored,
    /// Second copies with a different full hash (client equivocation, 07 §5.2): stored, not
    /// forwarded, reported as `CopyConflict`.
    conflicts,
    /// Dropped: length below 48 or not `32 + 16·count` (07 §5.2 parse).
    drop_bad_len,
    /// Dropped: `count` outside 1..=10.
    drop_bad_count,
    /// Dropped: a packet flag other than `resend` set.
    drop_bad_flags,
    /// Dropped: reserved bytes 12..16 not zero.
    drop_bad_reserved,
    /// Dropped: `pkt_seq` 0.
    drop_bad_seq,
    /// Dropped: a book this home does not serve.
    drop_bad_book,
    /// Dropped: a session this box has no key for.
    drop_unknown_session,
    /// Dropped: `tag_seq` did not verify under the session's `K_seq`; reported as `DataBadMac`.
    drop_bad_mac,
    /// Dropped: a repeat of a stored packet with an equal full hash (resends land here).
    drop_duplicate,
    /// Dropped: `pkt_seq` below the session's 256-packet window (late).
    drop_late,
    /// Dropped: a repeat inside the window whose first copy has already left the ring, so it
    /// cannot be compared.
    drop_repeat_evicted,
    /// Ring slots overwritten while holding a packet (normal once the ring has wrapped).
    ring_evicted,
    /// Index entries displaced while their packet was still in the ring (a full probe window;
    /// the packet can then no longer be found by that index). Should stay 0.
    index_displaced_live,
    /// `DATA` frames sent to the destinations (each counts once, whatever the number of
    /// destinations).
    frames_data,
    /// Packets in those frames.
    frames_data_pkts,
    /// `DATA` frames whose data_seq was used but which found no free out buffer: logged, not
    /// sent; the replicas fetch them by range from the ring.
    frames_unsent,
    /// `DATA_HB` frames sent.
    frames_hb,
    /// `FETCH_RESP` frames sent (fetch answers and conflict evidence).
    frames_fetch_resp,
    /// Control messages received from replicas.
    ctrl_rx,
    /// Control messages that did not parse.
    ctrl_malformed,
    /// Control messages of a type a data box does not take.
    ctrl_unexpected,
    /// Datagrams on a voter's socket from any address but that voter's `data_addr`: dropped
    /// unread, never answered (security review F4: the per-voter sockets answered anyone).
    ctrl_foreign,
    /// Datagrams on a voter's socket from that voter's address that are not sealed
    /// (every voter message travels in the member envelope, `vyrn_wire::msg::seal`).
    ctrl_unsealed,
    /// Sealed datagrams refused: a tag that does not verify under the voter's link key, another
    /// sender's id, or a replayed sequence number (a spoofer, or a replay of a captured one).
    ctrl_bad_seal,
    /// Control messages (reports, relays) not sent because the control share of the out
    /// buffers was full.
    ctrl_out_full,
    /// `DataBadMac` reports queued to the sequencer's control core.
    bad_mac_reports,
    /// `DataBadMac` reports not sent: the claimed session had used its share this second
    /// (`BAD_MAC_REPORTS_PER_S`).
    bad_mac_over_share,
    /// `CopyConflict` reports (with their evidence frame) queued to the sequencer.
    conflict_reports,
    /// `DataFetch::Range` requests.
    fetch_range_reqs,
    /// Frames answered from the ring with their packets.
    fetch_range_frames,
    /// Frames of a range no longer in the ring: answered by an empty `FETCH_RESP`.
    fetch_range_gone,
    /// Range requests not answered in full: frames beyond `FETCH_RANGE_MAX` per request, or
    /// not sent yet, were left out (the replica asks again for what it still lacks).
    fetch_range_clamped,
    /// `DataFetch::Key` requests.
    fetch_key_reqs,
    /// Key fetches answered with the packet.
    fetch_key_hits,
    /// Key fetches for a packet not in the ring: not answered (the wire has no key-miss form).
    fetch_key_misses,
    /// Fetch answers not sent because no out buffer was free.
    fetch_out_full,
    /// `DataDown` votes received (07 §5.7).
    data_down_votes,
    /// Boxes that became down (Q votes from distinct voters).
    data_down_effective,
    /// Times this box itself was voted down by Q voters (it keeps serving; an alarm).
    data_down_self,
    /// `DataRedirect` records relayed to clients.
    redirects_relayed,
    /// Redirects repeated by more replicas (same or higher `resend_from`): not relayed again.
    redirects_dup,
    /// Redirects refused: unknown session, session not homed on `from`, or `to` is not the
    /// deterministic backup home.
    redirects_refused,
    /// Redirects for a session whose address this box does not know.
    redirects_no_addr,
    /// `SeqChange` messages received from destinations (07 §9.5).
    seq_change_votes,
    /// `SeqChange` refused: not from a voter, or too many different ones at once.
    seq_change_refused,
    /// `SeqChange`s that reached Q voters and were relayed.
    seq_changes,
    /// `SeqChange` records relayed to clients.
    seq_change_relayed,
    /// Sessions a `SeqChange` could not reach: no address known for them.
    seq_change_no_addr,
    /// Packets the driver's ports refused to send (hard errors).
    tx_errors,
}

impl Counters {
    /// Packets dropped, all reasons together.
    pub fn dropped(&self) -> u64 {
        self.drop_bad_len
            + self.drop_bad_count
            + self.drop_bad_flags
            + self.drop_bad_reserved
            + self.drop_bad_seq
            + self.drop_bad_book
            + self.drop_unknown_session
            + self.drop_bad_mac
            + self.drop_duplicate
            + self.drop_late
            + self.drop_repeat_evicted
    }

    /// True when every packet offered is accounted for exactly once:
    /// `rx_packets = stored + conflicts + dropped`.
    pub fn balanced(&self) -> bool {
        self.rx_packets == self.stored + self.conflicts + self.dropped()
    }
}

impl fmt::Display for Counters {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (name, v) in self.iter() {
            writeln!(f, "{name} {v}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_print_every_name_once() {
        let c = Counters {
            drop_late: 3,
            ..Counters::default()
        };
        let s = c.to_string();
        assert_eq!(s.lines().count(), Counters::NAMES.len());
        assert!(s.contains("drop_late 3\n"));
        for n in Counters::NAMES {
            assert_eq!(s.matches(&format!("{n} ")).count(), 1, "{n}");
        }
    }

    /// Every counter describes itself: a help line from its doc comment, one per name.
    #[test]
    fn every_counter_has_its_help() {
        assert_eq!(Counters::HELP.len(), Counters::NAMES.len());
        let d: Vec<(&str, &str)> = Counters::describe().collect();
        assert_eq!(
            d[0],
            ("rx_packets", "Client packets offered to ingest (07 §5.2).")
        );
        for (n, h) in d {
            assert!(h.len() > 5 && !h.starts_with(' '), "{n}: {h:?}");
        }
    }
}
