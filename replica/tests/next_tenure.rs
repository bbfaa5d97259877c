//! A replica follows the next tenure after a seal (07 §9.4–§9.5), on the whole receive side
//! (`ReplicaCore`: order RX, the decoder, the data side with copy 2 in DATA frames, the verdict,
//! replay). A box of tenure 0 dies mid-flow — half the time with a closed block whose header
//! never came — and a voter and the standby, each a `ReplicaCore`, build the same seal block
//! (`seal_block`: its `order_root` over the tail after `BlockMark(H*)`, its `data_root` with the
//! records the box never hashed resolved by key alone). The standby takes the seal
//! (`next_tenure`), replays to its end and hands its engine to tenure 1's box; the voter takes
//! the seal and follows tenure 1: its frames decode from height `Hs + 1`, every block of it
//! verifies under the new sequencer's key against a chain anchored at the seal, and replay goes
//! on across the boundary — every answer either box sent, and every one tenure 0 made and never
//! sent (the clients' resends bring them), is replay's, byte for byte.

mod boxrun;

use std::collections::HashMap;

use boxrun::{
    as_first_copy, as_sent, finalize, first_copy_key, resend_of, resp_seq_holes, Responses,
};

use vyrn_engine::workload::{Input, Mix, Workload};
use vyrn_engine::EngineConfig;
use vyrn_replica::front::core::{
    CoreConfig, NextTenure, NextTenureRefused, ReplicaCore, ReplicaOut,
};
use vyrn_replica::front::data::UnavailRefused;
use vyrn_replica::front::decode::Fault;
use vyrn_replica::front::failover::seal::{seal_header, SignedTip};
use vyrn_replica::front::order_rx::{FetchHint, RxVerdict, PEER_CHANNEL};
use vyrn_replica::front::verdict::{Anchor, VerifyOutcome};
use vyrn_seq::shm::TenureId;
use vyrn_seq::takeover::Takeover;
use vyrn_seq::testkit::{SimBox, WireEvent};
use vyrn_seq::SeqConfig;
use vyrn_wire::header::BlockHeader;
use vyrn_wire::msg::client::{Record, RejectCode, Response, SipKey};
use vyrn_wire::msg::ctrl::RepairReq;
use vyrn_wire::msg::data::{DataFrameBuilder, DataKind};
use vyrn_wire::msg::PktKey;

const EPOCH: u32 = 4;

#[derive(Default)]
struct Out {
    faults: Vec<Fault>,
    headers: Vec<BlockHeader>,
    repairs: Vec<RepairReq>,
}

impl ReplicaOut for Out {
    fn repair(&mut self, _peer: usize, r: &RepairReq) {
        self.repairs.push(*r);
    }
    fn fault(&mut self, f: &Fault) {
        self.faults.push(*f);
    }
    fn header(&mut self, h: &BlockHeader) {
        self.headers.push(*h);
    }
}

/// One replica: its core, what it emitted, what replay answered.
struct Replica {
    core: ReplicaCore,
    out: Out,
    resp: Responses,
}

impl Replica {
    fn new(e: &EngineConfig, seq_key: ed25519_dalek::VerifyingKey) -> Self {
        Self::with_peers(e, seq_key, 0)
    }

    fn with_peers(e: &EngineConfig, seq_key: ed25519_dalek::VerifyingKey, n_peers: usize) -> Self {
        let mut core = ReplicaCore::new(CoreConfig {
            engine: e.clone(),
            epoch: EPOCH,
            tenure: 0,
            sender: 0,
            seq_key,
            n_boxes: 1,
            n_peers,
            anchor: Anchor::default(),
        })
        .unwrap();
        for s in &e.sessions {
            core.data_mut().set_home(s.session, 0);
        }
        Replica {
            core,
            out: Out::default(),
            resp: Responses::default(),
        }
    }

    fn tip(&self) -> BlockHeader {
        *self
            .out
            .headers
            .iter()
            .max_by_key(|h| h.height)
            .expect("headers")
    }
}

fn seq_config(e: &EngineConfig, tenure: TenureId, key: u8) -> SeqConfig {
    SeqConfig {
        engine: e.clone(),
        epoch: EPOCH,
        block_ns: 40_000,
        seq_key: [key; 32],
        voters: 4,
        rtx_ring_bytes: 8 << 20,
        tenure,
    }
}

/// The home on loopback in one thread: the box, copy 2 as DATA frames, the replicas.
struct Rig {
    e: EngineConfig,
    home: SimBox,
    reps: Vec<Replica>,
    data_seq: u64,
    now: u64,
    /// First copies the clients got, and resends.
    live: HashMap<(u32, u64), Vec<u8>>,
    resent: Vec<Vec<u8>>,
    /// Copy 2 of every packet sent, by (session, pkt_seq) (the clients' retained buffers).
    sent: HashMap<(u32, u32), Vec<u8>>,
    /// Every ORDER frame the box sent, by (stream, frame_seq): what a peer serves.
    frames: HashMap<(u8, u64), Vec<u8>>,
    /// Replica 0 loses both paths' copies of a third of the frames (drawn by frame).
    lossy: bool,
    /// Copy 2 reaches no replica (kept in `withheld`, by key, to deliver later).
    withhold: bool,
    withheld: Vec<((u32, u32), Vec<u8>)>,
}

impl Rig {
    fn round(&mut self, input: Option<(u64, Vec<u8>)>) {
        if let Some((rx_ts, bytes)) = input {
            let key = (bytes.len() >= 16).then(|| {
                let s = u32::from_le_bytes(bytes[4..8].try_into().unwrap());
                let q = u32::from_le_bytes(bytes[8..12].try_into().unwrap());
                (s, q)
            });
            match key {
                Some(k) if self.withhold => self.withheld.push((k, bytes.clone())),
                _ => self.copy2(&bytes, None),
            }
            if let Some(k) = key {
                self.sent.entry(k).or_insert_with(|| bytes.clone());
            }
            self.home.receive(rx_ts, bytes);
        }
        for t in self.home.tiles() {
            self.home.poll(t, self.now);
        }
        for ev in self.home.drain_wire() {
            match ev {
                WireEvent::Frame { bytes, path, info } => {
                    let key = (info.stream, info.frame_seq);
                    let lost = self.lossy && lost_at_replica_0(key);
                    for (i, r) in self.reps.iter_mut().enumerate() {
                        if i != 0 || !lost {
                            r.core.on_path_frame(path, &bytes, self.now, &mut r.out);
                        }
                    }
                    self.frames.insert(key, bytes);
                }
                WireEvent::Resp { bytes, .. } => match first_copy_key(&bytes) {
                    Some(k) => {
                        self.live.entry(k).or_insert(bytes);
                    }
                    None => self.resent.push(bytes),
                },
                _ => {}
            }
        }
        for r in &mut self.reps {
            r.core
                .tick(self.now, &mut r.out, &mut r.resp)
                .expect("replay");
        }
        self.serve_peer_repairs();
        let c = self.reps.last().unwrap().core.order_rx().contiguous();
        finalize(&mut self.home, c, self.now);
    }

    /// Copy 2 of `bytes` in a DATA frame, to replica `to` or to every one.
    fn copy2(&mut self, bytes: &[u8], to: Option<usize>) {
        self.data_seq += 1;
        let mut b =
            DataFrameBuilder::new(DataKind::Data, self.e.book, EPOCH as u16, self.data_seq, 0);
        b.push(bytes).unwrap();
        for (i, r) in self.reps.iter_mut().enumerate() {
            if to.is_none_or(|t| t == i) {
                r.core.on_data_frame(0, b.as_bytes(), self.now, &mut r.out);
            }
        }
    }

    /// Replica 0's RepairReqs, answered by a peer holding every frame the box sent (on the
    /// peer channel, flagged as a peer's); how many frames.
    fn serve_peer_repairs(&mut self) -> usize {
        let now = self.now;
        let r = &mut self.reps[0];
        let mut n = 0;
        for q in std::mem::take(&mut r.out.repairs) {
            for fs in q.from_seq..=q.to_seq {
                if let Some(b) = self.frames.get(&(q.stream, fs)) {
                    let mut b = b.clone();
                    b[vyrn_wire::frame::FLAGS_OFFSET] |= vyrn_wire::frame::FLAG_PEER_REPAIRED;
                    r.core.on_path_frame(PEER_CHANNEL, &b, now, &mut r.out);
                    n += 1;
                }
            }
        }
        n
    }

    fn new(e: &EngineConfig, reps: Vec<Replica>, home: SimBox) -> Self {
        Rig {
            reps,
            e: e.clone(),
            home,
            data_seq: 0,
            now: 0,
            live: HashMap::new(),
            resent: Vec::new(),
            sent: HashMap::new(),
            frames: HashMap::new(),
            lossy: false,
            withhold: false,
            withheld: Vec::new(),
        }
    }
}

/// 07 §9.5 after a seal: the clients resend every packet that got no answer, in order, first;
/// then `rounds` rounds of the new tenure, the first `loaded` with the workload's input. Returns
/// each session's `K_seq` (what a client retags its resends with).
fn trade_on(rig: &mut Rig, w: &mut Workload, rounds: usize, loaded: usize) -> HashMap<u32, SipKey> {
    let k_seq: HashMap<u32, SipKey> = rig
        .e
        .sessions
        .iter()
        .map(|s| (s.session, s.k_seq))
        .collect();
    let unanswered = boxrun::unanswered(rig.sent.keys(), rig.live.values());
    for k in unanswered.into_iter().filter(|k| k_seq.contains_key(&k.0)) {
        let b = resend_of(&rig.sent[&k], &k_seq[&k.0]);
        rig.now += 500;
        let now = rig.now;
        rig.round(Some((now, b)));
    }
    for round in 0..rounds {
        let input = if round < loaded {
            match w.next_input() {
                Input::Packet { rx_ts, bytes } => Some((rx_ts, bytes)),
                Input::Control(_) => None,
            }
        } else {
            None
        };
        rig.now = if round < loaded {
            rig.now.max(w.now())
        } else {
            rig.now + 1_000
        };
        rig.round(input);
    }
    k_seq
}

/// Every kind of traffic a seal can take whole: no malformed packets and none ahead of sequence
/// (a record of an ambiguous key the dead box never hashed is unavailable: 07 §9.3, not built).
fn sealable_mix() -> Mix {
    Mix {
        bad: 0,
        gap: 0,
        halt: 0,
        ..Mix::everything()
    }
}

/// Whether replica 0 of a lossy rig loses frame `key` on both paths: a third of them.
fn lost_at_replica_0(key: (u8, u64)) -> bool {
    (key.1.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ key.0 as u64) % 3 == 0
}

#[test]
fn a_replica_follows_the_promoted_standby_into_the_next_tenure() {
    for seed in 1..=6u64 {
        let e = EngineConfig::test_home(4, 4);
        let t1 = TenureId {
            tenure: 1,
            sender: 1,
        };
        let home = SimBox::new(seq_config(&e, TenureId::FIRST, 2));
        let key0 = home.seq_public();
        let mut rig = Rig::new(
            &e,
            vec![Replica::new(&e, key0), Replica::new(&e, key0)],
            home,
        );
        // Resends, risk rejects, cancels, IOCs, several messages a packet. No malformed packets
        // (their copies mismatch the box's and are fetched from the sequencer's retention,
        // which this rig does not serve: `replica/tests/data_path.rs` does), and no packets
        // ahead of sequence: a client that sends two different packets under one `pkt_seq`
        // leaves its key ambiguous, and a record of it the dead box never hashed is then
        // unavailable (07 §9.3, §9.6 case d: the seal's unavailable list, not built).
        let mut w = Workload::new(&e, seed, sealable_mix());
        let kill = 400 + (seed as usize * 977) % 2_400;
        let spanning = seed % 2 == 0;
        for round in 0.. {
            assert!(round < 10_000, "seed {seed}: no kill point");
            if round >= kill {
                let open = rig.reps[0].core.open_height(0);
                let tip = rig.reps[0].out.headers.iter().map(|h| h.height).max();
                if !spanning || tip.is_some_and(|t| open > t + 1) {
                    break;
                }
            }
            let input = match w.next_input() {
                Input::Packet { rx_ts, bytes } => Some((rx_ts, bytes)),
                Input::Control(_) => None,
            };
            rig.now = rig.now.max(w.now());
            rig.round(input);
        }
        let t0_answers = rig.live.len();
        let t0_sent: Vec<(u32, u32)> = rig.sent.keys().copied().collect();

        // The seal (07 §9.4): both replicas build the same block after BlockMark(H*).
        let tip = rig.reps[0].tip();
        assert_eq!(rig.reps[1].tip(), tip, "seed {seed}");
        let (ob, dr) = rig.reps[0]
            .core
            .seal_block(tip.height, &[])
            .expect("the tail is held");
        assert_eq!(
            rig.reps[1].core.seal_block(tip.height, &[]),
            Some((ob.clone(), dr)),
            "seed {seed}: the voter and the standby seal the same block"
        );
        let dr = dr.expect("every record of the tail resolved (unhashed ones by key)");
        let signed = SignedTip {
            height: tip.height,
            hash: tip.header_hash(),
            last_step: tip.last_step,
        };
        let seal = seal_header(EPOCH, e.book, &signed, &ob, dr).expect("seal header");
        assert!(
            !spanning || rig.reps[0].core.open_height(0) > seal.height,
            "seed {seed}"
        );

        // The standby takes the seal, replays to its end and becomes tenure 1's box.
        let mut standby = rig.reps.pop().unwrap();
        let box1_cfg = seq_config(&e, t1, 3);
        let key1 = ed25519_dalek::SigningKey::from_bytes(&box1_cfg.seq_key).verifying_key();
        let nt = NextTenure {
            tenure: 1,
            sender: 1,
            seq_key: key1,
            h_star: tip.height,
            seal,
            unavail: vec![],
        };
        // A seal that is not the block after H*, or not this replica's own: refused.
        let mut off = nt.clone();
        off.h_star += 1;
        assert_eq!(
            standby.core.next_tenure(&off, 0, &mut standby.out),
            Err(NextTenureRefused::Form)
        );
        let mut other = nt.clone();
        other.seal.order_root[0] ^= 1;
        assert_eq!(
            standby.core.next_tenure(&other, 0, &mut standby.out),
            Err(NextTenureRefused::Differs)
        );
        standby
            .core
            .next_tenure(&nt, 0, &mut standby.out)
            .expect("the standby holds the prefix");
        standby
            .core
            .tick(rig.now, &mut standby.out, &mut standby.resp)
            .unwrap();
        let handover = standby
            .core
            .into_replayer()
            .expect("inline replay")
            .promote(&mut standby.resp)
            .expect("the standby replayed the prefix");
        let t = Takeover::new(&e, handover, &seal).expect("at the seal");
        // Odd seeds: a warm standby's box, its memory and signer built before the promotion
        // (its headers verify under its key all the same). Seed 5's was built for another key:
        // the box builds its own signer rather than sign under the wrong one.
        let reserve = match seed {
            5 => Some(vyrn_seq::tiles::Reserve::new(&seq_config(&e, t1, 9))),
            _ => (seed % 2 == 1).then(|| vyrn_seq::tiles::Reserve::new(&box1_cfg)),
        };
        rig.home = SimBox::takeover(box1_cfg, t, reserve, None, seed);
        assert_eq!(rig.home.seq_public(), key1);

        // The voter takes the seal and follows tenure 1.
        let resolved = rig.reps[0]
            .core
            .next_tenure(&nt, 0, &mut Out::default())
            .expect("the voter holds the prefix");

        // 07 §9.5: the clients resend every packet that got no answer, in order, first.
        let k_seq = trade_on(&mut rig, &mut w, 4_000, 2_500);
        // A client with a hole in its `resp_seq` (an answer tenure 0 made and never sent: a
        // maker fill of a step whose frame left just before the box died) resends its retained
        // packets; a duplicate is answered with every response it had (docs/client.md).
        for _ in 0..3 {
            let holes = resp_seq_holes(rig.live.values().chain(&rig.resent));
            if holes.is_empty() {
                break;
            }
            for session in holes {
                // Every packet it retains (here: all of tenure 0's) — a maker fill answers a
                // packet that may be long past.
                let mut mine: Vec<(u32, u32)> =
                    t0_sent.iter().filter(|k| k.0 == session).copied().collect();
                mine.sort_unstable();
                for k in &mine {
                    let b = resend_of(&rig.sent[k], &k_seq[&k.0]);
                    rig.now += 500;
                    let now = rig.now;
                    rig.round(Some((now, b)));
                }
            }
            for _ in 0..500 {
                rig.now += 1_000;
                rig.round(None);
            }
        }
        let r = &mut rig.reps[0];
        r.core.settle(&mut r.resp);
        assert!(r.out.faults.is_empty(), "seed {seed}: {:?}", r.out.faults);

        // Every block of tenure 1 verifies under its key, chained from the seal.
        let last = r.out.headers.iter().map(|h| h.height).max().unwrap();
        assert!(last > seal.height + 10, "seed {seed}: {last}");
        let hdr = *r.out.headers.iter().find(|h| h.height == last).unwrap();
        let now = rig.now;
        assert_eq!(
            r.core.verify(
                seal.height + 1,
                last,
                &hdr.header_hash(),
                now,
                &mut Out::default()
            ),
            VerifyOutcome::True,
            "seed {seed}"
        );
        let (dec, rep) = r.core.replay_lag();
        assert_eq!(dec, rep, "seed {seed}: replay caught up");

        // Replay across the boundary: every answer a client got, and nothing it did not.
        let sent = as_sent(&e, &r.resp.by_key);
        for (k, b) in &rig.live {
            assert_eq!(sent.get(k), Some(b), "seed {seed}: response {k:?}");
        }
        let mut recovered = std::collections::HashSet::new();
        for b in &rig.resent {
            let (key, first) = as_first_copy(&e, b);
            assert_eq!(sent.get(&key), Some(&first), "seed {seed}: resend {key:?}");
            recovered.insert(key);
        }
        let never: Vec<_> = sent
            .keys()
            .filter(|k| !rig.live.contains_key(k) && !recovered.contains(k))
            .collect();
        assert!(never.is_empty(), "seed {seed}: no client got {never:?}");
        println!(
            "seed {seed}: killed at round {kill}{}; seal height {} (H* {}); {t0_answers} answers \
             before, {} in all; {resolved} records resolved by key; blocks {}..={last} of \
             tenure 1 verified",
            if spanning {
                " after an unsigned mark"
            } else {
                ""
            },
            seal.height,
            tip.height,
            rig.live.len(),
            seal.height + 1
        );
    }
}

/// 07 §9.3 "Unsigned tail": a voter that lost a third of the box's last frames on both paths
/// (some repaired from a peer before the box died, held for a header that never comes) is
/// deposed and fetches what it lacks up to `F*` from its holder: it then builds the seal block
/// the holder builds, byte for byte. The deposed sequencer's own frames stay refused
/// (INV-REP-5), and a peer's frame past `F*` is refused as unasked.
#[test]
fn a_voter_short_of_the_tail_fetches_it_from_a_holder_and_seals_the_same_block() {
    for seed in 1..=4u64 {
        let e = EngineConfig::test_home(4, 4);
        let home = SimBox::new(seq_config(&e, TenureId::FIRST, 2));
        let key0 = home.seq_public();
        let mut rig = Rig::new(
            &e,
            vec![Replica::with_peers(&e, key0, 1), Replica::new(&e, key0)],
            home,
        );
        let mut w = Workload::new(&e, seed, sealable_mix());
        let kill = 600 + (seed as usize * 613) % 1_200;
        for round in 0..kill {
            // The last 150 rounds: replica 0 loses a third of the frames on both paths.
            rig.lossy = round + 150 >= kill;
            let input = match w.next_input() {
                Input::Packet { rx_ts, bytes } => Some((rx_ts, bytes)),
                Input::Control(_) => None,
            };
            rig.now = rig.now.max(w.now());
            rig.round(input);
        }
        // The box is dead: nothing more is served, the voter's NACKs go nowhere.
        rig.lossy = false;
        let (holder, short) = (&rig.reps[1], &rig.reps[0]);
        let f_star = holder.core.order_rx().contiguous();
        let tip = holder.tip();
        let want = holder
            .core
            .seal_block(tip.height, &[])
            .expect("the holder seals");
        let have = short.core.order_rx().contiguous();
        assert!(
            have[0] < f_star[0] || have[1] < f_star[1],
            "seed {seed}: replica 0 lost part of the tail ({have:?} of {f_star:?})"
        );
        // What it holds above its holes is what its TailReport's extra names, served as held.
        for st in 0..2u8 {
            let (f_i, extra) = short.core.order_rx().holdings(st);
            let held: Vec<u64> = short
                .core
                .held_range(st, f_i + 1, u64::MAX)
                .map(|(k, _)| k)
                .collect();
            let named: Vec<u64> = extra.iter().flat_map(|x| x.a..=x.b).collect();
            assert_eq!(held, named, "seed {seed} stream {st}");
        }

        // Deposed here (07 §9.2), then F* known: the fetch (07 §9.3).
        let now = rig.now + 3_000_000;
        rig.now = now;
        let r = &mut rig.reps[0];
        r.core.freeze();
        r.core.depose();
        let hints = [0u8, 1].map(|st| FetchHint {
            stream: st,
            a: 1,
            b: f_star[st as usize],
            peer: 0,
        });
        r.core.seal_fetch(f_star, &hints, now, &mut r.out);
        assert!(
            !r.out.repairs.is_empty(),
            "seed {seed}: the fetch asks at once"
        );
        // INV-REP-5: a frame of the deposed tenure off a path is refused, even one it lacks.
        let lacking = (have[0] + 1..=f_star[0])
            .find(|&k| {
                r.core
                    .order_rx()
                    .holdings(0)
                    .1
                    .iter()
                    .all(|x| k < x.a || k > x.b)
            })
            .map(|k| (0u8, k))
            .unwrap_or((1, have[1] + 1));
        let direct = rig.frames[&lacking].clone();
        let r = &mut rig.reps[0];
        assert!(
            matches!(
                r.core.on_path_frame(0, &direct, now, &mut r.out),
                RxVerdict::Refused(_)
            ),
            "seed {seed}: the deposed box's own frame"
        );
        let mut rounds = 0;
        while rig.reps[0].core.order_rx().contiguous() != f_star {
            rounds += 1;
            assert!(rounds < 50, "seed {seed}: the fetch did not finish");
            rig.serve_peer_repairs();
            rig.now += 200_000;
            let r = &mut rig.reps[0];
            r.core.tick(rig.now, &mut r.out, &mut r.resp).unwrap();
        }
        let r = &mut rig.reps[0];
        let c = r.core.order_rx().counters();
        assert!(
            c.seal_fetch.0 > 0 && c.seal_fetch.1 > 0,
            "seed {seed}: {c:?}"
        );
        // A peer's frame past F* was never asked for.
        if let Some(b) = rig.frames.get(&(0, f_star[0] + 1)) {
            let r = &mut rig.reps[0];
            assert!(matches!(
                r.core.on_path_frame(PEER_CHANNEL, b, now, &mut r.out),
                RxVerdict::Refused(_)
            ));
        }
        let r = &rig.reps[0];
        assert!(r.out.faults.is_empty(), "seed {seed}: {:?}", r.out.faults);
        assert_eq!(
            r.core.seal_block(tip.height, &[]),
            Some(want.clone()),
            "seed {seed}: the voter that fetched its tail seals the holder's block"
        );
        println!(
            "seed {seed}: replica 0 held {have:?} of F* {f_star:?}; {} fetch requests, {} frames fetched; seal block at height {}",
            c.seal_fetch.0, c.seal_fetch.1, want.0.height
        );
    }
}

/// 07 §9.3 item 4, §9.4, §9.6 case d: the box dies with the last packets' copy 2 lost (the data
/// box never forwarded them), so no replica can resolve their records in the tail. The leader
/// lists them unavailable once REP_SEAL_DATA_WAIT_MS has passed (not before), the voter and the
/// standby build the same seal block with 32 zero bytes for each (and none without the list),
/// a listed key of no tail record is refused, and a late copy at a voter that accepted the list
/// or at the standby (which deposed the tenure: its tail waits for the seal) is held back from
/// replay — the voter can then resolve it, so it refuses a seal that lists it again.
/// The standby replays the seal block without those packets (`Reject EXCLUDED`, the rest of the
/// log as the final log reads it) and becomes tenure 1's box; the voter does the same: every
/// answer of tenure 1 is the voter's replay, byte for byte.
#[test]
fn a_seal_excludes_packets_no_replica_holds_and_both_boxes_replay_the_same_book() {
    let mut listed_total = 0;
    for seed in 1..=4u64 {
        let e = EngineConfig::test_home(4, 4);
        let t1 = TenureId {
            tenure: 1,
            sender: 1,
        };
        let home = SimBox::new(seq_config(&e, TenureId::FIRST, 2));
        let key0 = home.seq_public();
        let mut rig = Rig::new(
            &e,
            vec![Replica::new(&e, key0), Replica::new(&e, key0)],
            home,
        );
        let mut w = Workload::new(&e, seed, sealable_mix());
        let kill = 500 + (seed as usize * 977) % 1_500;
        for round in 0..kill {
            rig.withhold = round + 8 >= kill;
            let input = match w.next_input() {
                Input::Packet { rx_ts, bytes } => Some((rx_ts, bytes)),
                Input::Control(_) => None,
            };
            rig.now = rig.now.max(w.now());
            rig.round(input);
        }
        rig.withhold = false;
        let t0_keys: std::collections::HashSet<(u32, u64)> = rig.live.keys().copied().collect();
        let tip = rig.reps[0].tip();
        assert_eq!(rig.reps[1].tip(), tip, "seed {seed}");
        let h = tip.height;

        // The leader's list: inside REP_SEAL_DATA_WAIT_MS it waits; after, it lists.
        let now0 = rig.now;
        let later = now0 + 3_000_000;
        let list = rig.reps[0]
            .core
            .seal_unavail(h, later)
            .expect("the tail is held");
        assert_eq!(
            rig.reps[1].core.seal_unavail(h, later),
            Ok(list.clone()),
            "seed {seed}"
        );
        if !list.is_empty() {
            assert!(
                matches!(rig.reps[0].core.seal_unavail(h, now0), Err(n) if n > 0),
                "seed {seed}: listed before the wait"
            );
        }
        let withheld: Vec<PktKey> = rig
            .withheld
            .iter()
            .map(|(k, _)| PktKey {
                session: k.0,
                pkt_seq: k.1,
            })
            .collect();
        assert!(
            list.iter().all(|k| withheld.contains(k)),
            "seed {seed}: {list:?} of {withheld:?}"
        );
        listed_total += list.len();
        // Withheld packets a signed block logged are the verdict's, not the seal's: they come.
        rig.now = later;
        for (k, b) in std::mem::take(&mut rig.withheld) {
            let k = PktKey {
                session: k.0,
                pkt_seq: k.1,
            };
            if list.binary_search(&k).is_err() {
                rig.copy2(&b, None);
            } else {
                rig.withheld.push(((k.session, k.pkt_seq), b));
            }
        }
        for r in &mut rig.reps {
            r.core.tick(later, &mut r.out, &mut r.resp).expect("replay");
        }

        // Both build the same seal block over the list; without it, no data_root.
        let (ob, dr) = rig.reps[0]
            .core
            .seal_block(h, &list)
            .expect("the tail is held");
        assert_eq!(
            rig.reps[1].core.seal_block(h, &list),
            Some((ob.clone(), dr)),
            "seed {seed}"
        );
        let dr = dr.expect("every unlisted record resolved");
        if !list.is_empty() {
            assert_eq!(rig.reps[0].core.seal_block(h, &[]).unwrap().1, None);
        }
        for r in &rig.reps {
            assert_eq!(r.core.check_unavail(h, &list), Ok(()), "seed {seed}");
        }
        let bogus = [PktKey {
            session: 0xdead,
            pkt_seq: 1,
        }];
        assert_eq!(
            rig.reps[0].core.check_unavail(h, &bogus),
            Err(UnavailRefused::NotInTail(bogus[0]))
        );
        let signed = SignedTip {
            height: h,
            hash: tip.header_hash(),
            last_step: tip.last_step,
        };
        let seal = seal_header(EPOCH, e.book, &signed, &ob, dr).expect("seal header");

        // The voter accepted the list, and the standby deposed the tenure at its H_i (the
        // same here): a late copy of a listed packet is held by both, not replayed.
        rig.reps[0].core.hold_for_seal(&list);
        let sb = &mut rig.reps[1];
        sb.core.hold_tail(h, later, &mut sb.out);
        if let Some((k, b)) = rig.withheld.first().cloned() {
            let before = rig.reps[0].core.data().counters().held_for_seal;
            let before_sb = rig.reps[1].core.data().counters().held_for_seal;
            rig.copy2(&b, None);
            assert!(rig.reps[1].core.data().counters().held_for_seal > before_sb);
            let k = PktKey {
                session: k.0,
                pkt_seq: k.1,
            };
            assert!(
                rig.reps[0].core.data().counters().held_for_seal > before,
                "seed {seed}"
            );
            assert_eq!(
                rig.reps[0].core.check_unavail(h, &list),
                Err(UnavailRefused::Held(k)),
                "seed {seed}: it can resolve it now"
            );
        }

        // The standby takes the seal, replays it with the exclusions and becomes tenure 1's box.
        let mut standby = rig.reps.pop().unwrap();
        let box1_cfg = seq_config(&e, t1, 3);
        let key1 = ed25519_dalek::SigningKey::from_bytes(&box1_cfg.seq_key).verifying_key();
        let nt = NextTenure {
            tenure: 1,
            sender: 1,
            seq_key: key1,
            h_star: h,
            seal,
            unavail: list.clone(),
        };
        standby
            .core
            .next_tenure(&nt, later, &mut standby.out)
            .expect("the standby holds the prefix");
        standby
            .core
            .tick(later, &mut standby.out, &mut standby.resp)
            .unwrap();
        let excluded = standby.core.data().counters().excluded;
        assert!(excluded >= list.len() as u64, "seed {seed}");
        assert_eq!(standby.core.data().counters().excluded_late, 0);
        let handover = standby
            .core
            .into_replayer()
            .expect("inline replay")
            .promote(&mut standby.resp)
            .expect("the standby replayed the prefix, exclusions and all");
        let t = Takeover::new(&e, handover, &seal).expect("at the seal");
        rig.home = SimBox::takeover(box1_cfg, t, None, None, seed);

        let r = &mut rig.reps[0];
        r.core
            .next_tenure(&nt, later, &mut Out::default())
            .expect("the voter holds the prefix");
        assert_eq!(r.core.data().counters().excluded, excluded, "seed {seed}");
        assert_eq!(r.core.data().counters().excluded_late, 0, "seed {seed}");

        // Tenure 1 trades, with the clients' resends of what got no answer first.
        trade_on(&mut rig, &mut w, 3_000, 2_000);
        let r = &mut rig.reps[0];
        r.core.settle(&mut r.resp);
        assert!(r.out.faults.is_empty(), "seed {seed}: {:?}", r.out.faults);
        let (dec, rep) = r.core.replay_lag();
        assert_eq!(dec, rep, "seed {seed}: replay caught up");
        let last = r.out.headers.iter().map(|h| h.height).max().unwrap();
        assert!(last > seal.height + 10, "seed {seed}: {last}");

        // Every answer of tenure 1, and every resend, is the voter's replay.
        let sent = as_sent(&e, &r.resp.by_key);
        let mut new = 0;
        for (k, b) in rig.live.iter().filter(|(k, _)| !t0_keys.contains(k)) {
            assert_eq!(sent.get(k), Some(b), "seed {seed}: response {k:?}");
            new += 1;
        }
        assert!(new > 100, "seed {seed}: tenure 1 traded ({new})");
        for b in &rig.resent {
            let (key, first) = as_first_copy(&e, b);
            assert_eq!(sent.get(&key), Some(&first), "seed {seed}: resend {key:?}");
        }
        // What tenure 0 answered and the final log does not hold: reverted (case d).
        let reverted = rig
            .live
            .iter()
            .filter(|(k, b)| t0_keys.contains(k) && sent.get(k) != Some(b))
            .count();
        // Each excluded packet's answer in the final log: Reject EXCLUDED.
        for k in &list {
            let s = e.sessions.iter().find(|s| s.session == k.session).unwrap();
            let found = r.resp.by_key.iter().any(|(rk, b)| {
                rk.0 == k.session && {
                    let mut b = b.clone();
                    vyrn_engine::resp::tag(&mut b, &s.k_out);
                    Response::parse(&b, &s.k_out).is_ok_and(|p| {
                        p.echo_pkt_seq == k.pkt_seq
                            && p.records.iter().any(|x| {
                                matches!(
                                    x,
                                    Record::Reject {
                                        code: RejectCode::Excluded,
                                        ..
                                    }
                                )
                            })
                    })
                }
            });
            assert!(found, "seed {seed}: {k:?} answered EXCLUDED");
        }
        if list.is_empty() {
            assert_eq!(reverted, 0, "seed {seed}");
        }
        println!(
            "seed {seed}: {} packet(s) listed unavailable, {excluded} record(s) excluded, \
             {reverted} answer(s) of tenure 0 reverted, {new} answers of tenure 1 as replayed",
            list.len()
        );
    }
    assert!(listed_total > 0, "no seed listed a packet");
}
