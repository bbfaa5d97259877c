//! Voter doubles on the network (test support, for the box's tests that run no replica): four
//! [`VoterDouble`]s on their own thread take every frame off both replication paths, decode it with `wire`, check each HEADER, and answer the box's control
//! port over UDP — RepAcks every `REP_ACK_US`, NACKs for holes, and a REP_FinalityCert once Q of
//! them signed a header's finalize proposal (a stand-in for Simplex, which would aggregate the
//! votes). Used by `vyrn-seq --voter-doubles` (dev profile only) and the tests. Their finalize
//! keys are random per run (from the OS), never derivable.

use crate::ports::PathsRx;
use crate::testkit::VoterDouble;
use std::net::SocketAddr;
use std::time::Instant;
use vyrn_nic::udp::{UdpConfig, UdpPort};
use vyrn_nic::{Dest, NicError, Port, RxBatch, TxPacket};
use vyrn_wire::layout::Layout;
use vyrn_wire::msg::consensus::{CertEntry, RepFinalityCert, RepProposal};
use vyrn_wire::msg::seal::{self, LinkKey};

/// The voter doubles' control-port side (UDP mode): each voter's own socket for RepAcks and
/// NACKs, its finalize key, and the group's certificate assembly — Q signatures over a
/// proposal make one REP_FinalityCert for the box (a stand-in for Simplex, which would
/// aggregate them).
#[derive(Debug)]
pub struct VoterNet {
    socks: Vec<UdpPort>,
    keys: Vec<ed25519_dalek::SigningKey>,
    /// Each double's finalize signer for the epoch it last signed in (what Simplex's ed25519
    /// scheme signs: the box's finality listener checks exactly that, 07 §6.8).
    signers: Option<(u32, Vec<vyrn_consensus::FinalizeSigner>)>,
    pending: std::collections::BTreeMap<u64, Vec<CertEntry>>,
    ctrl: SocketAddr,
    rx: RxBatch,
    sent: [u64; 3],
    too_old: u64,
    /// Per double: its link key with the box and its last sequence number (the member
    /// envelope): everything a double sends the box is sealed, as a replica's is.
    links: Vec<(LinkKey, u64)>,
    /// The epoch the doubles last spoke in (under the seal's tag).
    epoch: u32,
}

impl VoterNet {
    /// Double `i`'s finalize signature over height `h`'s proposal `p` (view `h + 1`, parent
    /// view `h`: one proposal per view, as the doubles vote).
    fn sign(&mut self, i: usize, epoch: u32, h: u64, p: &RepProposal) -> [u8; 64] {
        if self.signers.as_ref().is_none_or(|(e, _)| *e != epoch) {
            let pubs: Vec<[u8; 32]> = self
                .keys
                .iter()
                .map(|k| k.verifying_key().to_bytes())
                .collect();
            let signers = vyrn_consensus::Voters::with_simplex_quorum(epoch, &pubs)
                .ok()
                .map(|v| {
                    self.keys
                        .iter()
                        .filter_map(|k| vyrn_consensus::FinalizeSigner::new(&v, &k.to_bytes()))
                        .collect()
                })
                .unwrap_or_default();
            self.signers = Some((epoch, signers));
        }
        match self.signers.as_ref().and_then(|(_, s)| s.get(i)) {
            Some(s) => s.sign(epoch, h + 1, h, p),
            None => [0; 64],
        }
    }

    fn send(&mut self, i: usize, bytes: &[u8]) {
        let b = self.seal(i, self.epoch, bytes);
        let _ = self.socks[i].send_batch(&[TxPacket::to(&b, Dest::Addr(self.ctrl))]);
    }

    /// `body` sealed as double `i` for the box in `epoch` (what a replica sends), for tests
    /// that send their own messages from a double's socket.
    pub fn seal(&mut self, i: usize, epoch: u32, body: &[u8]) -> Vec<u8> {
        let (k, next) = &mut self.links[i];
        *next += 1;
        let mut out = Vec::with_capacity(body.len() + seal::SEAL_OVERHEAD);
        seal::seal_into(&mut out, k, epoch, seal::from::voter(i), *next, |o| {
            o.extend_from_slice(body);
            true
        });
        out
    }

    /// Double `i`'s control address.
    pub fn addr(&self, i: usize) -> Option<SocketAddr> {
        self.socks.get(i)?.local_addr().ok()
    }

    /// A REP_FinalityCert for height `h` from `entries` (07 §6.5), sent from voter 0's socket.
    fn send_cert(
        &mut self,
        epoch: u32,
        h: u64,
        proposal: vyrn_wire::msg::consensus::RepProposal,
        entries: Vec<CertEntry>,
    ) {
        let cert = RepFinalityCert {
            epoch,
            view: h + 1,
            parent_view: h,
            proposal,
            entries,
        };
        self.epoch = epoch;
        let mut b = vec![vyrn_wire::msg::ctrl::ty::FINALITY_CERT];
        if cert.encode(&mut b).is_ok() {
            self.send(0, &b);
            self.sent[2] += 1;
        }
    }

    /// Voter `i`'s RepAck of `contiguous` (07 §4.8).
    fn send_ack(&mut self, i: usize, epoch: u32, contiguous: [u64; 2]) {
        let m = vyrn_wire::msg::ctrl::RepAck {
            epoch,
            tenure: 0,
            contiguous_frame_seq: contiguous,
            path_mask: 0b11,
        };
        self.epoch = epoch;
        if let Ok(b) = m.to_bytes() {
            self.send(i, &b);
            self.sent[0] += 1;
        }
    }

    /// Voter `i`'s NACK of hole `(stream, from, to)` (07 §4.10).
    fn send_nack(&mut self, i: usize, epoch: u32, (stream, from, to): (u8, u64, u64)) {
        let m = vyrn_wire::msg::ctrl::Nack {
            epoch,
            tenure: 0,
            stream,
            from_seq: from,
            to_seq: to,
        };
        self.epoch = epoch;
        if let Ok(b) = m.to_bytes() {
            self.send(i, &b);
            self.sent[1] += 1;
        }
    }

    /// What every voter has to say, over UDP to the box's control port: NACKs and certificates
    /// now, RepAcks only when `acks` (the caller's REP_ACK_US cadence, 07 §4.8).
    pub fn report(&mut self, voters: &mut [VoterDouble], epoch: u32, acks: bool) {
        for (i, v) in voters.iter_mut().enumerate() {
            if let Some(a) = v.ack().filter(|_| acks) {
                self.send_ack(i, epoch, a);
            }
            for hole in v.holes() {
                self.send_nack(i, epoch, hole);
            }
            for h in v.take_votes() {
                if let Some(p) = v.proposal(epoch, h) {
                    let sig = self.sign(i, epoch, h, &p);
                    self.pending.entry(h).or_default().push(CertEntry {
                        index: i as u8,
                        sig,
                    });
                }
            }
            while let Ok(n) = self.socks[i].recv_batch(&mut self.rx) {
                if n == 0 {
                    break;
                }
                self.too_old += n as u64; // NackTooOld answers: the double just NACKs again
            }
        }
        // Q = 3 of 4 signatures make a certificate (07 §6.5).
        let ready: Vec<u64> = self
            .pending
            .iter()
            .filter(|(_, e)| e.len() >= 3)
            .map(|(&h, _)| h)
            .collect();
        for h in ready {
            let mut entries = self.pending.remove(&h).unwrap_or_default();
            entries.sort_by_key(|e| e.index);
            let Some(p) = voters[entries[0].index as usize].proposal(epoch, h) else {
                continue;
            };
            self.send_cert(epoch, h, p, entries);
            for v in voters.iter_mut() {
                v.forget(h);
            }
        }
    }
}

impl VoterNet {
    /// The light responder (a voter stand-in that costs the shared cores little):
    /// one double decodes and checks every frame and header, and all `n` voter identities
    /// answer from it — each identity's RepAck carries its `contiguous`, its NACKs go from
    /// identity 0, and the first Q identities sign each checked header's finalize proposal
    /// into one REP_FinalityCert.
    pub fn report_light(&mut self, v: &mut VoterDouble, epoch: u32, acks: bool) {
        if let Some(a) = v.ack().filter(|_| acks) {
            for i in 0..self.socks.len() {
                self.send_ack(i, epoch, a);
            }
        }
        for hole in v.holes() {
            self.send_nack(0, epoch, hole);
        }
        // Q of n (07 §6.5): n − f with f = ⌊(n − 1) / 3⌋.
        let n = self.keys.len();
        let q = vyrn_home::quorum(n);
        for h in v.take_votes() {
            let Some(p) = v.proposal(epoch, h) else {
                continue;
            };
            let entries = (0..q)
                .map(|i| CertEntry {
                    index: i as u8,
                    sig: self.sign(i, epoch, h, &p),
                })
                .collect();
            self.send_cert(epoch, h, p, entries);
            v.forget(h);
        }
        for i in 0..self.socks.len() {
            while let Ok(n) = self.socks[i].recv_batch(&mut self.rx) {
                if n == 0 {
                    break;
                }
                self.too_old += n as u64;
            }
        }
    }
}

/// What the voter thread reports while it runs.
#[derive(Debug, Default, Clone, Copy)]
pub struct VoterView {
    /// Frames taken off the paths (both copies).
    pub frames: u64,
    /// Their bytes.
    pub frame_bytes: u64,
    /// Headers voter 0 checked.
    pub headers_ok: u64,
    /// Voter 0's decoder errors and bad headers.
    pub faults: (u64, u64),
}

/// How long the light responder sleeps between rounds: frames batch up meanwhile (half of
/// REP_ACK_US).
const LIGHT_BATCH_NS: u64 = vyrn_wire::consts::REP_ACK_US * 1000 / 2;
/// The light responder's RepAck period (µs): REP_ACK_US is a budget (07 §15), and four
/// identities acking every 50 µs would be 80k datagrams a second on a dev box's shared cores;
/// the dev box's self-fence window (50 ms) is far longer.
pub const LIGHT_ACK_US: u64 = 250;

/// The voter doubles' thread.
#[derive(Debug)]
pub struct VoterThread {
    /// Set to stop it.
    pub stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// What it reports while it runs.
    pub view: std::sync::Arc<std::sync::Mutex<VoterView>>,
    /// Join to take the doubles back.
    pub handle: std::thread::JoinHandle<Vec<VoterDouble>>,
}

impl VoterThread {
    /// The four voter doubles on their own thread: frames off both paths, then RepAcks, NACKs
    /// and certificates to the box's control port.
    pub fn start(voters: Vec<VoterDouble>, net: VoterNet, paths: PathsRx, t0: Instant) -> Self {
        Self::run(voters, net, paths, t0, false)
    }

    /// The light responder on its own thread ([`VoterNet::report_light`]): one double decodes,
    /// every identity of `net` answers from it.
    pub fn start_light(voter: VoterDouble, net: VoterNet, paths: PathsRx, t0: Instant) -> Self {
        Self::run(vec![voter], net, paths, t0, true)
    }

    fn run(
        mut voters: Vec<VoterDouble>,
        mut net: VoterNet,
        mut paths: PathsRx,
        t0: Instant,
        light: bool,
    ) -> Self {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::{Arc, Mutex};
        let stop = Arc::new(AtomicBool::new(false));
        let view = Arc::new(Mutex::new(VoterView::default()));
        let (s2, v2) = (stop.clone(), view.clone());
        let handle = std::thread::spawn(move || {
            // Off the box's hot core; asleep (not spinning) between frames and ack times.
            crate::runner::side_thread();
            let fds = paths.fds();
            let mut local = VoterView::default();
            let mut last = 0u64;
            while !s2.load(Ordering::Relaxed) {
                let now = t0.elapsed().as_nanos() as u64 + 1_000_000;
                let got = paths
                    .recv(|_, f| {
                        local.frames += 1;
                        local.frame_bytes += f.len() as u64;
                        for v in voters.iter_mut() {
                            v.on_frame(f, now);
                        }
                    })
                    .unwrap_or(0);
                // RepAck every REP_ACK_US (07 §4.8; the light responder every LIGHT_ACK_US);
                // NACKs and certificates as they come.
                let ack_ns = if light {
                    LIGHT_ACK_US * 1000
                } else {
                    vyrn_wire::consts::REP_ACK_US * 1000
                };
                let ack_due = now.saturating_sub(last) >= ack_ns;
                if got > 0 || ack_due {
                    if light {
                        net.report_light(&mut voters[0], 1, ack_due);
                    } else {
                        net.report(&mut voters, 1, ack_due);
                    }
                    if ack_due {
                        last = now;
                    }
                }
                if light {
                    // The light responder takes frames in batches on a timer: frames never wake
                    // it (no wake-up for the box's hot core to pay per frame), a few accumulate
                    // for one recvmmsg each.
                    crate::runner::wait_readable(&[], LIGHT_BATCH_NS);
                } else if got == 0 {
                    let next = (last + ack_ns).saturating_sub(now);
                    crate::runner::wait_readable(&fds, next.clamp(1_000, 50_000));
                }
                if let Ok(mut v) = v2.try_lock() {
                    local.headers_ok = voters[0].headers_ok();
                    local.faults = voters[0].faults();
                    *v = local;
                }
            }
            voters
        });
        VoterThread { stop, view, handle }
    }
}

impl VoterNet {
    /// Sockets and finalize keys for `n` voter doubles that talk to the box's control port
    /// `ctrl`; each key is 32 bytes from the OS's random source, new every run (a double's key
    /// is never derivable). Register each [`VoterNet::members`] entry with the box; `box_pub` is
    /// the box's `seq_key` (each double agrees its link key with it).
    pub fn open(
        n: usize,
        ctrl: SocketAddr,
        box_pub: ed25519_dalek::VerifyingKey,
    ) -> Result<VoterNet, NicError> {
        let mut socks = Vec::new();
        let mut keys = Vec::new();
        let mut rnd = std::fs::File::open("/dev/urandom").map_err(io_err)?;
        for _ in 0..n {
            socks.push(UdpPort::open(&UdpConfig::loopback().with_batch(64))?);
            let mut seed = [0u8; 32];
            std::io::Read::read_exact(&mut rnd, &mut seed).map_err(io_err)?;
            keys.push(ed25519_dalek::SigningKey::from_bytes(&seed));
        }
        let links = keys
            .iter()
            .map(|k| {
                let l = LinkKey::agree(k, &box_pub).ok_or(NicError::Config("a weak box key"))?;
                Ok((l, 0))
            })
            .collect::<Result<Vec<_>, NicError>>()?;
        Ok(VoterNet {
            links,
            epoch: 0,
            socks,
            keys,
            signers: None,
            pending: Default::default(),
            ctrl,
            rx: RxBatch::new(16, 256),
            sent: [0; 3],
            too_old: 0,
        })
    }

    /// A `Diverge` whose evidence checks (07 §7.4 case 1): for root index `index`, doubles
    /// 0..=f signed one digest and the rest another, with their root signatures.
    pub fn conflict_evidence(&self, epoch: u32, index: u64) -> vyrn_wire::msg::ctrl::Diverge {
        use vyrn_wire::msg::ctrl::{Diverge, DivergeDigest, DivergeReason};
        let pubs: Vec<[u8; 32]> = self
            .keys
            .iter()
            .map(|k| k.verifying_key().to_bytes())
            .collect();
        let voters = vyrn_consensus::Voters::with_simplex_quorum(epoch, &pubs).ok();
        let sig = |i: usize, d: [u8; 32]| -> Option<CertEntry> {
            let v = voters.as_ref()?;
            let key = vyrn_consensus::private_key(&self.keys[i].to_bytes());
            let s = vyrn_consensus::roots::root_signer(v, key)?;
            let sig = vyrn_consensus::roots::sign_root_bytes(&s, epoch, index, &d)?;
            Some(CertEntry {
                index: i as u8,
                sig,
            })
        };
        let f1 = voters.as_ref().map_or(1, |v| v.max_faults() + 1);
        let n = self.keys.len();
        let split = [(0..f1, [0xA1; 32]), (f1..n, [0xB2; 32])];
        Diverge {
            epoch,
            index,
            reason: DivergeReason::Conflict,
            digests: split
                .into_iter()
                .map(|(r, d)| DivergeDigest {
                    digest: d,
                    sigs: r.filter_map(|i| sig(i, d)).collect(),
                })
                .collect(),
        }
    }

    /// Each double's control address, index and finalize key (REP_Membership in a real home).
    pub fn members(&self) -> Vec<(SocketAddr, usize, ed25519_dalek::VerifyingKey)> {
        self.socks
            .iter()
            .zip(&self.keys)
            .enumerate()
            .filter_map(|(i, (s, k))| Some((s.local_addr().ok()?, i, k.verifying_key())))
            .collect()
    }

    /// Messages sent: RepAcks, NACKs, certificates.
    pub fn sent(&self) -> [u64; 3] {
        self.sent
    }
}

impl VoterThread {
    /// `n` fresh doubles for a box of `layout` signing with `seq_key`, on their own thread.
    pub fn spawn(
        n: usize,
        layout: Layout,
        seq_key: ed25519_dalek::VerifyingKey,
        net: VoterNet,
        paths: PathsRx,
        t0: Instant,
    ) -> Self {
        let voters = (0..n).map(|_| VoterDouble::new(layout, seq_key)).collect();
        VoterThread::start(voters, net, paths, t0)
    }

    /// The light responder for `net`'s voters ([`VoterThread::start_light`]).
    pub fn spawn_light(
        layout: Layout,
        seq_key: ed25519_dalek::VerifyingKey,
        net: VoterNet,
        paths: PathsRx,
        t0: Instant,
    ) -> Self {
        VoterThread::start_light(VoterDouble::new(layout, seq_key), net, paths, t0)
    }
}

fn io_err(e: std::io::Error) -> NicError {
    NicError::Io {
        op: "urandom",
        errno: e.raw_os_error().unwrap_or(0),
    }
}
