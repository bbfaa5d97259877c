//! Test and lab behaviour of the process (feature `lab`, never in the product build): the
//! interim voter a test home votes with instead of Simplex, and the receive cuts of `vyrn up`'s
//! lab faults (`vyrn_nic::lab::RxCut`).

use super::*;
use vyrn_nic::lab::RxCut;

/// What a lab build adds to a [`Node`].
#[derive(Debug)]
pub(super) struct NodeLab {
    /// The interim voter: votes when the node runs no Simplex voter.
    pub(super) voter: InterimVoter,
    /// Paths A and B cut from a time on (`vyrn replica --lab-cut-path`, 07 §14 "path down").
    pub(super) paths: [RxCut; 2],
    /// The data boxes' datagrams cut from a time on (this replica's data-tier link down).
    pub(super) data: RxCut,
    /// `vyrn up --isolate-seq`: while the flag is set, the box (its paths and its control
    /// address, as it was when the flag was given) is cut off from this replica both ways.
    pub(super) isolate: Option<(&'static std::sync::atomic::AtomicBool, SocketAddr, u8)>,
    /// Whether it is cut off now (the flag as the last poll read it).
    pub(super) isolated: bool,
}

impl NodeLab {
    pub(super) fn new(cfg: &NodeConfig, voters: Option<&vyrn_consensus::Voters>) -> Self {
        NodeLab {
            voter: InterimVoter::new(&cfg.vote_key, voters, cfg.index as u8, cfg.home.epoch, 1),
            paths: [RxCut::default(); 2],
            data: RxCut::default(),
            isolate: None,
            isolated: false,
        }
    }
}

impl Node {
    /// Lab fault injection (07 §14 "path down"): from `from_ns` on (this process's clock, as
    /// `poll` gets it), drop every datagram of path `path` (0 = A, 1 = B) unread, as a cut link
    /// would. The replica must raise REP_A_PATH and go on, on the other path.
    pub fn cut_path(&mut self, path: u8, from_ns: u64) {
        if let Some(c) = self.lab.paths.get_mut(path as usize) {
            c.cut_from(from_ns);
        }
    }

    /// Lab fault injection (07 §14 "sequencer cut off from ≥ 2 voters", §9.6 (b)): while
    /// `flag` is set, this replica and the box it follows now are cut off from each other —
    /// both paths and every datagram from the box's control address are dropped unread, and
    /// nothing is sent to that address (RepAcks, NACKs, votes). Set by `vyrn replica` and
    /// `vyrn standby` from SIGUSR1 (cut) and SIGUSR2 (healed), so `vyrn up --isolate-seq` cuts
    /// the box from every replica at one instant.
    pub fn isolate_seq_on(&mut self, flag: &'static std::sync::atomic::AtomicBool) {
        let sender = self.core.order_rx().tenure().1;
        self.lab.isolate = Some((flag, self.io.seq_ctrl, sender));
    }

    /// The isolation as the flag says now: the box's address is a black hole for this
    /// replica's sends while it is set. Whether it is set.
    pub(super) fn lab_isolation(&mut self, now: u64) -> bool {
        let Some((flag, addr, _)) = self.lab.isolate else {
            return false;
        };
        let on = flag.load(std::sync::atomic::Ordering::Relaxed);
        if on != self.lab.isolated {
            self.lab.isolated = on;
            self.io.blackhole = on.then_some(addr);
            eprintln!(
                "{}: LAB FAULT: {} the box ({addr}) at t={} ms",
                self.io.name,
                if on {
                    "cut off from"
                } else {
                    "healed: back in touch with"
                },
                now / 1_000_000
            );
        }
        on
    }

    /// Whether a control datagram from `src` is the isolated box's (dropped unread).
    #[inline]
    pub(super) fn lab_drops_ctrl(&self, src: Option<SocketAddr>) -> bool {
        self.lab.isolated && self.lab.isolate.is_some_and(|(_, a, _)| src == Some(a))
    }

    /// Whether a path datagram is the isolated box's (its frame names it as the sender: the
    /// promoted standby's frames on the same paths still come through).
    #[inline]
    pub(super) fn lab_drops_frame(&self, frame: &[u8]) -> bool {
        self.lab.isolated
            && self.lab.isolate.is_some_and(|(_, _, s)| {
                vyrn_wire::frame::FrameHeader::parse(frame).is_ok_and(|(h, _)| h.sender == s)
            })
    }

    /// Lab fault injection: from `from_ns` on, drop every datagram from the data boxes unread
    /// (this replica's link to the data tier cut). Its payloads must then come from its peers
    /// (`PeerDataFetch`, 07 §5.5 source 2).
    pub fn cut_data(&mut self, from_ns: u64) {
        self.lab.data.cut_from(from_ns);
    }

    /// A planted bug for the simulator to find (`vyrn-sim`, docs/testing.md): from now on replay folds,
    /// every 8 responses, the sessions they answered in a `HashSet`'s iteration
    /// order into its digest — a nondeterministic map iteration (each replica's set hashes with
    /// its own random keys), so the replicas' digests part (INV-DET must catch it).
    pub fn plant_map_order(&mut self) {
        self.sink.plant = Some(Default::default());
    }

    /// Hand this replica equivocation evidence as if a peer had sent it (07 §10.1; the
    /// simulator's equivocating sequencer): it is checked and acted on at the next round.
    pub fn give_evidence(&mut self, m: vyrn_wire::msg::ctrl::SeqEquivocation) {
        super::failover::queue_evidence(&mut self.io, m);
    }

    /// The interim voter.
    pub fn voter(&self) -> &InterimVoter {
        &self.lab.voter
    }

    #[inline]
    pub(super) fn lab_drops_path(&mut self, path: usize, now: u64, n: usize) -> bool {
        self.lab.paths[path].drops(now, n)
    }

    #[inline]
    pub(super) fn lab_drops_data(&mut self, now: u64, n: usize) -> bool {
        self.lab.data.drops(now, n)
    }

    pub(super) fn interim_voted(&self) -> u64 {
        self.lab.voter.voted
    }

    /// The interim voter's round: its vote, if it signed one, to the sequencer.
    pub(super) fn interim_tick(&mut self, now: u64) {
        let mut vote = None;
        self.lab.voter.tick(&mut self.core, now, &mut self.io, |b| {
            vote = Some(b.to_vec())
        });
        if let Some(v) = vote {
            let to = self.io.seq_ctrl;
            self.io.queue(Sock::Ctrl, to, |b| {
                b.extend_from_slice(&v);
                true
            });
        }
    }

    pub(super) fn interim_stop(&mut self) {
        self.lab.voter.stopped = true;
    }
}
