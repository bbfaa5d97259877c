//! The thin driver: connects a [`DataBox`] to [`vyrn_nic::Port`]s and moves batches.
//!
//! Ports, by position (the bit numbers of the out queue's `sent` masks):
//!
//! | port | receives | sends |
//! |---|---|---|
//! | 0 `clients` | copy 2 of client request packets (`REP_UDP_DATA`) | `DataRedirect` relays to clients |
//! | 1 `seq_ctrl` | nothing the box acts on yet (counted as unexpected) | `DataBadMac`, `CopyConflict` + evidence |
//! | 2 + i `dests[i]` | destination i's `DataFetch`, `DataDown`, `DataRedirect` | DATA, DATA_HB to every destination; i's `FETCH_RESP` |
//!
//! One port per destination keeps the attribution of control messages exact (a message that
//! arrives on `dests[i]` comes from destination i) and works the same over `UdpPort` (one
//! connected socket per replica) and `MemPort`. A DATA frame is one buffer handed to every
//! destination port: nothing is copied per destination.
//!
//! [`Driver::poll`] does one round: one receive batch per port, the box's timers, then the out
//! queue drained in batches (one `send_batch` per port per 64 messages). Backpressure leaves
//! messages queued, in order, for the next round; a hard send error drops that message for
//! that port and counts `tx_errors`. The caller passes the time; the driver reads no clock.

use vyrn_nic::{Dest, Port, RxBatch, TxPacket};
use vyrn_wire::consts::REP_DATA_FRAME_MAX;
use vyrn_wire::msg::seal::{from, LinkKey, Opener, SealErr, Sealer};

use crate::databox::DataBox;
use crate::out::To;

/// Messages considered per port per send call.
const DRAIN: usize = 64;
/// Port number of the client port.
pub const PORT_CLIENTS: usize = 0;
/// Port number of the sequencer control port.
pub const PORT_SEQ_CTRL: usize = 1;
/// Port number of destination 0; destination i is `PORT_DEST0 + i`.
pub const PORT_DEST0: usize = 2;

/// Why a driver could not be built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DriverError {
    /// The number of destination ports differs from the box's destinations.
    DestPorts {
        /// Ports given.
        ports: usize,
        /// Destinations configured.
        dests: usize,
    },
}

/// The driver: a box and its ports.
#[derive(Debug)]
pub struct Driver<P: Port> {
    /// The box.
    pub databox: DataBox,
    clients: P,
    seq_ctrl: P,
    dests: Vec<P>,
    /// Per destination: the only source its socket takes messages from (the voter's
    /// `data_addr`); `None` takes any (a port whose transport knows its peer).
    sources: Vec<Option<std::net::SocketAddr>>,
    /// Per destination: the voter's link key and replay window when its messages must come
    /// sealed (`None` takes them bare: a test's `MemPort`).
    seals: Vec<Option<Opener>>,
    /// The link key with the sequencer and this box's sender: `DataBadMac`, `CopyConflict` and
    /// the evidence leave sealed (`None`: bare, a test's `MemPort`).
    seq_seal: Option<(LinkKey, Sealer)>,
    /// Sealed copies of one batch to the sequencer (reused).
    sealed: Vec<Vec<u8>>,
    rx: RxBatch,
    /// The boxes a seal may promote (07 §9.5): `seq_order` index, control address, link key.
    successors: Vec<(u8, std::net::SocketAddr, LinkKey)>,
    /// The sequencer's control address after a `SeqChange` (`None`: the port's own dest).
    seq_dest: Option<std::net::SocketAddr>,
    /// Destinations no longer fed (bit per destination): the standby's replica once promoted.
    retired: u64,
    /// The `(epoch, tenure)` of the last `SeqChange` acted on.
    followed: Option<(u32, u8)>,
    /// The standby's replica's destination index and its `seq_order` index.
    standby_dest: Option<(usize, u8)>,
}

impl<P: Port> Driver<P> {
    /// Wire `databox` to its ports; `rx_batch` packets per receive call.
    pub fn new(
        databox: DataBox,
        clients: P,
        seq_ctrl: P,
        dests: Vec<P>,
        rx_batch: usize,
    ) -> Result<Self, DriverError> {
        if dests.len() != databox.n_dests() || dests.len() > 62 {
            return Err(DriverError::DestPorts {
                ports: dests.len(),
                dests: databox.n_dests(),
            });
        }
        Ok(Driver {
            databox,
            clients,
            seq_ctrl,
            sources: vec![None; dests.len()],
            seals: vec![None; dests.len()],
            seq_seal: None,
            sealed: Vec::new(),
            dests,
            rx: RxBatch::new(rx_batch.max(1), REP_DATA_FRAME_MAX),
            successors: Vec::new(),
            seq_dest: None,
            retired: 0,
            followed: None,
            standby_dest: None,
        })
    }

    /// The client port.
    pub fn clients(&mut self) -> &mut P {
        &mut self.clients
    }

    /// The sequencer control port.
    pub fn seq_ctrl(&mut self) -> &mut P {
        &mut self.seq_ctrl
    }

    /// Destination `i` takes messages only from `src` (its member's address).
    pub fn expect_source(&mut self, i: usize, src: std::net::SocketAddr) {
        if let Some(s) = self.sources.get_mut(i) {
            *s = Some(src);
        }
    }

    /// Destination `i` takes only messages sealed by voter `i` (`from::voter(i)`) under
    /// `opener`'s link key (the member envelope, `vyrn_wire::msg::seal`).
    pub fn expect_sealed(&mut self, i: usize, opener: Opener) {
        if let Some(s) = self.seals.get_mut(i) {
            *s = Some(opener);
        }
    }

    /// What goes to the sequencer leaves sealed under `key` by `sealer` (07 §5.2's reports,
    /// the member envelope: the box takes a data box's reports only sealed).
    pub fn seal_to_seq(&mut self, key: LinkKey, sealer: Sealer) {
        self.seq_seal = Some((key, sealer));
    }

    /// A box a seal may name next (07 §9.5: `seq_order` index `seq`, its control address and
    /// the link key with it), and, for the standby, the destination its replica is fed at.
    pub fn add_successor(
        &mut self,
        seq: u8,
        ctrl: std::net::SocketAddr,
        key: LinkKey,
        dest: Option<usize>,
    ) {
        self.successors.push((seq, ctrl, key));
        if let Some(d) = dest {
            self.standby_dest = Some((d, seq));
        }
    }

    /// After a `SeqChange` this box relayed (07 §9.5): its reports go to the new sequencer's
    /// control port, sealed under the link key with it, and the promoted standby's replica —
    /// now the box — is fed no more DATA frames.
    fn follow_seq(&mut self) {
        let Some(m) = self.databox.failover().seq_change().copied() else {
            return;
        };
        if self.followed == Some((m.epoch, m.tenure)) {
            return;
        }
        self.followed = Some((m.epoch, m.tenure));
        if let Some(&(_, ctrl, ref key)) = self.successors.iter().find(|s| s.0 == m.new_seq) {
            self.seq_dest = Some(ctrl);
            // The same sender numbering goes on: the new box's opener starts a fresh window.
            if let Some(s) = self.seq_seal.as_mut() {
                s.0 = key.clone();
            }
        }
        if let Some((d, _)) = self.standby_dest.filter(|s| s.1 == m.new_seq) {
            self.retired |= 1 << d;
        }
    }

    /// Destination `i`'s port.
    pub fn dest(&mut self, i: usize) -> &mut P {
        &mut self.dests[i]
    }

    /// One round at time `now_ns`. Returns the packets and messages received plus sent.
    pub fn poll(&mut self, now_ns: u64) -> usize {
        let mut work = 0;
        if let Ok(n) = self.clients.recv_batch(&mut self.rx) {
            for p in self.rx.iter() {
                let _ = self.databox.on_packet(p.data, p.meta.src, now_ns);
            }
            work += n;
        }
        for i in 0..self.dests.len() {
            if let Ok(n) = self.dests[i].recv_batch(&mut self.rx) {
                let want = self.sources[i];
                for p in self.rx.iter() {
                    // A voter's socket answers that voter only (its address in the home).
                    if want.is_some() && p.meta.src != want {
                        self.databox.counters_mut().ctrl_foreign += 1;
                        continue;
                    }
                    let msg = match self.seals[i].as_mut() {
                        None => p.data,
                        Some(o) => match o.open_from(from::voter(i), p.data) {
                            Ok(body) => body,
                            Err(e) => {
                                let c = self.databox.counters_mut();
                                if e == SealErr::NotSealed {
                                    c.ctrl_unsealed += 1;
                                } else {
                                    c.ctrl_bad_seal += 1;
                                }
                                continue;
                            }
                        },
                    };
                    let _ = self.databox.on_ctrl(i, msg, now_ns);
                }
                work += n;
            }
        }
        self.follow_seq();
        if let Ok(n) = self.seq_ctrl.recv_batch(&mut self.rx) {
            let c = self.databox.counters_mut();
            c.ctrl_rx += n as u64;
            c.ctrl_unexpected += n as u64;
            work += n;
        }
        self.databox.poll(now_ns);
        work + self.drain()
    }

    /// Ports a message must reach, as a bit mask (a `retired` destination none).
    fn need(n_dests: usize, retired: u64, to: To) -> u64 {
        match to {
            To::Dests => (((1u64 << n_dests) - 1) & !retired) << PORT_DEST0,
            To::Dest(i) if (i as usize) < n_dests && retired & (1 << i) == 0 => {
                1 << (PORT_DEST0 + i as usize)
            }
            // A destination that does not exist: nothing to reach.
            To::Dest(_) => 0,
            To::SeqCtrl => 1 << PORT_SEQ_CTRL,
            To::Client(_) => 1 << PORT_CLIENTS,
        }
    }

    /// Send what the out queue holds, batched per port, until it is empty or every port with
    /// something to send pushed back. Returns the messages released.
    pub fn drain(&mut self) -> usize {
        let nd = self.dests.len();
        let mut released = 0;
        loop {
            let mut progress = false;
            for port in 0..PORT_DEST0 + nd {
                progress |= self.send_port(port, nd);
            }
            let retired = self.retired;
            let r = self
                .databox
                .out()
                .release_done(|to| Self::need(nd, retired, to));
            released += r;
            if !progress || self.databox.out().is_empty() {
                return released;
            }
        }
    }

    /// One `send_batch` on `port` with the first messages it still lacks. True if any went.
    fn send_port(&mut self, port: usize, nd: usize) -> bool {
        let (retired, seq_dest) = (self.retired, self.seq_dest);
        let out = self.databox.out();
        let n = out.len().min(DRAIN);
        let mut txs = [TxPacket::new(&[]); DRAIN];
        let mut idx = [0usize; DRAIN];
        let mut cnt = 0;
        for i in 0..n {
            let Some((to, bytes, sent)) = out.get(i) else {
                break;
            };
            let bit = 1u64 << port;
            if Self::need(nd, retired, to) & bit == 0 || sent & bit != 0 {
                continue;
            }
            let dest = match (to, seq_dest) {
                (To::Client(Some(a)), _) => Dest::Addr(a),
                (To::SeqCtrl, Some(a)) => Dest::Addr(a),
                _ => Dest::Default,
            };
            txs[cnt] = TxPacket::to(bytes, dest);
            idx[cnt] = i;
            cnt += 1;
        }
        if cnt == 0 {
            return false;
        }
        if port == PORT_SEQ_CTRL {
            if let Some((key, sealer)) = self.seq_seal.as_mut() {
                self.sealed.resize_with(cnt, Vec::new);
                for (k, t) in txs[..cnt].iter().enumerate() {
                    let b = &mut self.sealed[k];
                    b.clear();
                    sealer.seal(b, key, |o| {
                        o.extend_from_slice(t.data);
                        true
                    });
                }
                let dest = seq_dest.map_or(Dest::Default, Dest::Addr);
                for (k, t) in txs[..cnt].iter_mut().enumerate() {
                    *t = TxPacket::to(&self.sealed[k], dest);
                }
            }
        }
        let p = match port {
            PORT_CLIENTS => &mut self.clients,
            PORT_SEQ_CTRL => &mut self.seq_ctrl,
            d => &mut self.dests[d - PORT_DEST0],
        };
        let (k, err) = match p.send_batch(&txs[..cnt]) {
            Ok(k) => (k, false),
            // The first packet cannot be sent at all: drop it for this port.
            Err(_) => (1, true),
        };
        let out = self.databox.out();
        for &i in &idx[..k.min(cnt)] {
            out.mark_sent(i, port);
        }
        if err {
            self.databox.counters_mut().tx_errors += 1;
        }
        k > 0
    }
}

/// The data box's one tile (missing-chapters §4): ingest, dedupe, store, fan-out and the voters'
/// control, on one cold thread that blocks on its sockets and wakes for its next frame or
/// `DATA_HB` ([`FanOut::due`](crate::fanout::FanOut::due)).
impl<P: Port + Send + 'static> vyrn_tile::Task for Driver<P> {
    fn name(&self) -> String {
        "databox".into()
    }
    fn class(&self) -> vyrn_tile::TileClass {
        vyrn_tile::TileClass::Cold
    }
    fn wait_fds(&self, out: &mut Vec<std::os::fd::RawFd>) {
        out.extend(self.clients.wait_fd());
        out.extend(self.seq_ctrl.wait_fd());
        out.extend(self.dests.iter().filter_map(|d| d.wait_fd()));
    }
    fn due(&self) -> Option<u64> {
        Some(self.databox.fanout().due())
    }
    fn poll(&mut self, now: u64) -> bool {
        Driver::poll(self, now) > 0
    }
}
