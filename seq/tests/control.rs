//! Control with voter doubles (07 §4.8, §6.8, §6.9): watermarks reach the clients, the finality
//! gate halts the book past FIN_GATE_BLOCKS and resumes it at REP_GATE_RESUME_BLOCKS (INV-REP-10),
//! and the self-fence silences the box for good when acks stop (INV-REP-6): no frame of any
//! kind — ORDER, HASH, HEADER, HEARTBEAT, retransmissions — and no response or notice.

use vyrn_engine::EngineConfig;
use vyrn_seq::testkit::{SimBox, Tile, VoterDouble, WireEvent};
use vyrn_seq::SeqConfig;
use vyrn_wire::consts::{FIN_GATE_BLOCKS, REP_SELF_FENCE_US};
use vyrn_wire::msg::client::{Msg, MsgType, Record, RejectCode, RequestPacket, Response, Side};

struct Rig {
    home: SimBox,
    /// Every write since the test last cleared it.
    after: Vec<WireEvent>,
    durable_marks: Vec<(u64, u64)>,
    voters: Vec<VoterDouble>,
    cfg: EngineConfig,
    now: u64,
    seq: [u32; 4],
    resps: Vec<(u32, Response)>,
    frames_after: usize,
}

/// The rig's block period: short, so tests run many blocks, yet long enough (20 polls of 1 µs)
/// for the order hasher to sign each header in its slices (768 slices, 64 per poll).
const BLOCK_NS: u64 = 20_000;

impl Rig {
    fn new() -> Rig {
        // Four sessions: 0 and 1 on lane 0, 2 and 3 on lane 1.
        let cfg = EngineConfig::test_home(2, 2);
        let home = SimBox::new(SeqConfig {
            engine: cfg.clone(),
            epoch: 1,
            block_ns: BLOCK_NS,
            seq_key: [3; 32],
            voters: 4,
            rtx_ring_bytes: 8 << 20,
            tenure: vyrn_seq::shm::TenureId::FIRST,
        });
        let voters = (0..4)
            .map(|_| VoterDouble::new(cfg.layout, home.seq_public()))
            .collect();
        Rig {
            home,
            after: Vec::new(),
            durable_marks: Vec::new(),
            voters,
            cfg,
            now: 1_000,
            seq: [0; 4],
            resps: Vec::new(),
            frames_after: 0,
        }
    }

    /// Run every tile for `ns` of box time in 1 µs rounds, voters acking and voting as set.
    fn run(&mut self, ns: u64) {
        self.run_without(None, ns);
    }

    /// [`Rig::run`] with one tile held back (a tile that falls behind, as threads can).
    fn run_without(&mut self, skip: Option<Tile>, ns: u64) {
        let end = self.now + ns;
        let tiles: Vec<Tile> = self
            .home
            .tiles()
            .into_iter()
            .filter(|t| Some(*t) != skip)
            .collect();
        while self.now < end {
            self.now += 1_000;
            for &t in &tiles {
                self.home.poll(t, self.now);
            }
            let wire: Vec<WireEvent> = self.home.drain_wire();
            self.after.extend(wire.iter().cloned());
            for ev in wire {
                match ev {
                    WireEvent::DurableMark { step, height } => {
                        self.durable_marks.push((step, height))
                    }
                    WireEvent::Frame { path: 1, .. }
                    | WireEvent::PathAlarm { .. }
                    | WireEvent::Learn { .. } => {}
                    WireEvent::Frame { bytes, .. } => {
                        self.frames_after += 1;
                        for v in self.voters.iter_mut() {
                            v.on_frame(&bytes, self.now);
                        }
                    }
                    WireEvent::Resp { session, bytes, .. }
                    | WireEvent::Notice { session, bytes } => {
                        let k = self
                            .cfg
                            .sessions
                            .iter()
                            .find(|s| s.session == session)
                            .unwrap()
                            .k_out;
                        self.resps.push((
                            session,
                            Response::parse(&bytes, &k).expect("valid response"),
                        ));
                    }
                }
            }
            for (i, v) in self.voters.iter_mut().enumerate() {
                if let Some(a) = v.ack() {
                    self.home.on_ack(i, a, self.now);
                }
                for h in v.take_votes() {
                    self.home.on_vote(i, h);
                }
            }
        }
    }

    fn order(&mut self, tag: u32, side: Side) {
        self.order_as(0, tag, side);
    }

    /// A GTC at tick 100 from session `i` of the config.
    fn order_as(&mut self, i: usize, tag: u32, side: Side) {
        self.seq[i] += 1;
        let s = &self.cfg.sessions[i];
        let p = RequestPacket {
            book: self.cfg.book,
            resend: false,
            session: s.session,
            pkt_seq: self.seq[i],
            msgs: vec![Msg {
                kind: MsgType::NewGtc,
                side,
                tick: 100,
                qty: 1,
                client_tag: tag,
            }],
        }
        .to_bytes(&s.k_seq)
        .unwrap();
        self.home.receive(self.now, p);
    }

    fn records(&self) -> Vec<Record> {
        self.resps
            .iter()
            .flat_map(|(_, r)| r.records.clone())
            .collect()
    }
}

#[test]
fn watermarks_reach_the_sessions_they_attest() {
    let mut r = Rig::new();
    // Session 0 buys, session 2 (the other lane) sells through it: both get a fill.
    r.order_as(0, 1, Side::Buy);
    r.run(20_000);
    r.order_as(2, 2, Side::Sell);
    // Durable goes out at most every 1 ms (07 §6.9).
    r.run(2_500_000);
    let recs = r.records();
    assert!(recs.contains(&Record::Ack {
        msg_index: 0,
        client_tag: 1
    }));
    let of = |i: usize, durable: bool| {
        let id = r.cfg.sessions[i].session;
        r.resps
            .iter()
            .filter(|(s, _)| *s == id)
            .flat_map(|(_, p)| p.records.iter())
            .filter(|x| {
                if durable {
                    matches!(x, Record::Durable { .. })
                } else {
                    matches!(x, Record::Final { .. })
                }
            })
            .count()
    };
    let fills = recs
        .iter()
        .filter(|x| matches!(x, Record::Fill { .. }))
        .count();
    assert_eq!(fills, 2, "both sides filled");
    // The two sessions with fills get Durable and Final; the two with nothing to attest get
    // no watermark at all (notices follow the sessions' step-gated answers).
    for i in [0, 2] {
        assert!(of(i, true) > 0 && of(i, false) > 0, "session {i}");
    }
    for i in [1, 3] {
        assert_eq!((of(i, true), of(i, false)), (0, 0), "session {i}");
    }
    let (d, f, _) = r.home.watermarks();
    assert!(d >= 1, "durable step {d}");
    // REP_DurableMark (07 §6.9) is raised with every Durable watermark, for the same step.
    for x in &recs {
        if let Record::Durable { step, height } = x {
            assert!(r.durable_marks.contains(&(*step, *height)), "{x:?}");
        }
    }
    assert!(!r.durable_marks.is_empty());
    assert!(
        f + FIN_GATE_BLOCKS >= r.home.closed_height(),
        "final {f} of {}",
        r.home.closed_height()
    );
    // Durable and Final due together share one packet per session, as two separate
    // records (07 §6.9 never merges them); so there are fewer notice packets than watermark
    // records, and some packet carries both kinds.
    let (_, _, c) = r.home.watermarks();
    assert!(
        c.notice_packets < c.durable_notices + c.final_notices,
        "coalesced: {c:?}"
    );
    let both = r.resps.iter().any(|(_, p)| {
        p.records
            .iter()
            .any(|x| matches!(x, Record::Durable { .. }))
            && p.records.iter().any(|x| matches!(x, Record::Final { .. }))
    });
    assert!(both, "a notice packet with Durable and Final records");
    // Notices never take a resp_seq.
    for (_, p) in &r.resps {
        if p.records
            .iter()
            .all(|x| matches!(x, Record::Durable { .. } | Record::Final { .. }))
        {
            assert_eq!(p.resp_seq, vyrn_wire::msg::client::NOTICE_RESP_SEQ);
        }
    }
}

#[test]
fn finality_gate_halts_then_resumes_the_book() {
    let mut r = Rig::new();
    r.run(50_000);
    for v in r.voters.iter_mut() {
        v.voting = false; // finality stalls; acks continue, so no self-fence
    }
    // More than FIN_GATE_BLOCKS blocks close unfinalized.
    r.run(BLOCK_NS * (FIN_GATE_BLOCKS + 4));
    let (_, _, c) = r.home.watermarks();
    assert_eq!(c.gate_halts, 1, "{c:?}");
    r.order(7, Side::Buy);
    r.run(20_000);
    assert!(
        r.records().iter().any(|x| matches!(
            x,
            Record::Reject {
                code: RejectCode::BookHalted,
                client_tag: 7,
                ..
            }
        )),
        "a new order during the halt is answered BOOK_HALTED"
    );
    for v in r.voters.iter_mut() {
        v.voting = true;
    }
    r.run(10 * BLOCK_NS);
    let (_, f, c) = r.home.watermarks();
    assert_eq!(c.gate_resumes, 1, "{c:?}");
    assert!(f + 4 >= r.home.closed_height());
    r.order(8, Side::Buy);
    r.run(50_000);
    assert!(r.records().contains(&Record::Ack {
        msg_index: 0,
        client_tag: 8
    }));
    assert!(!r.home.words().fenced());
}

#[test]
fn self_fence_silences_both_streams_for_good() {
    let mut r = Rig::new();
    r.order(1, Side::Buy);
    r.run(50_000);
    assert!(!r.home.words().fenced());
    for v in r.voters.iter_mut().take(2) {
        v.acking = false; // 2 of 4 fresh < REP_FENCE_ACKS = 3
    }
    r.run(REP_SELF_FENCE_US * 1000 + 10_000);
    assert!(
        r.home.words().fenced(),
        "fewer than REP_FENCE_ACKS fresh voters fence the box"
    );
    // Let the fence settle (one flush), then nothing at all may leave.
    r.run(10_000);
    r.frames_after = 0;
    r.after.clear();
    for v in r.voters.iter_mut() {
        v.acking = true;
    }
    r.order(2, Side::Sell);
    r.run(100_000);
    // A NACK after the fence is not served (no retransmission leaves a fenced box).
    let out = r.home.on_nack(0, 1, 5, r.now);
    assert_eq!(out.resent, 0, "{out:?}");
    r.run(100_000);
    assert_eq!(
        r.frames_after, 0,
        "a fenced box writes no frame, even when acks return"
    );
    let leaked: Vec<&WireEvent> = r
        .after
        .iter()
        .filter(|e| {
            matches!(
                e,
                WireEvent::Frame { .. } | WireEvent::Resp { .. } | WireEvent::Notice { .. }
            )
        })
        .collect();
    assert!(
        leaked.is_empty(),
        "nothing leaves a fenced box: {} writes, first {:?}",
        leaked.len(),
        leaked.first()
    );
    assert!(r.home.words().fenced());
    assert!(
        !r.records().contains(&Record::Ack {
            msg_index: 0,
            client_tag: 2
        }),
        "nothing is answered that was not written"
    );
}

/// A fill that leaves after its step became durable (the TX tile behind control, as threads
/// allow) still gets its Durable and Final although the Durable watermark never moves again:
/// control keeps the newest watermarks and gives each session what it lacks whenever it sends
/// notices (each finalization, and a sweep once a millisecond). Before, a Durable went out only
/// when it moved, and such a session never learned its fill was durable (the e2e test caught
/// it).
#[test]
fn a_fill_sent_after_its_watermarks_moved_still_gets_them() {
    let mut r = Rig::new();
    r.order_as(0, 1, Side::Buy);
    r.run(20_000);
    r.order_as(2, 2, Side::Sell);
    // Everything but TX: the fill's step becomes durable and final while its responses wait.
    r.run_without(Some(Tile::Tx), 3_000_000);
    let (d, f, _) = r.home.watermarks();
    assert!(d >= 2 && f >= 1, "durable {d}, final {f}");
    let before = r
        .records()
        .iter()
        .filter(|x| matches!(x, Record::Fill { .. }))
        .count();
    assert_eq!(before, 0, "the fills are still held");
    // TX catches up; the box is idle from now on: no new step, so the Durable watermark does
    // not move again (blocks still close and go final).
    r.run(3_000_000);
    let (d2, _, _) = r.home.watermarks();
    assert_eq!(d2, d, "no step since: the Durable did not move");
    for i in [0usize, 2] {
        let id = r.cfg.sessions[i].session;
        let recs: Vec<&Record> = r
            .resps
            .iter()
            .filter(|(s, _)| *s == id)
            .flat_map(|(_, p)| p.records.iter())
            .collect();
        assert!(
            recs.iter().any(|x| matches!(x, Record::Fill { .. })),
            "session {i}"
        );
        assert!(
            recs.iter()
                .any(|x| matches!(x, Record::Durable { step, .. } if *step >= 2)),
            "session {i}: no Durable after its fill"
        );
        assert!(
            recs.iter().any(|x| matches!(x, Record::Final { .. })),
            "session {i}: no Final after its fill"
        );
    }
}

/// The close → final histogram the box prints (07 §6.6 on a running box): quantiles within a
/// bucket (≤ 19%) of the exact ones, capped at the max, nothing before the first record.
#[test]
fn close_to_final_quantiles_are_within_a_bucket() {
    use vyrn_seq::control::FinalLatency;
    let mut l = FinalLatency::default();
    assert_eq!((l.quantile(0.5), l.count()), (0, 0));
    // 1..=1000 µs.
    for us in 1..=1000u64 {
        l.record(us * 1000);
    }
    let p50 = l.quantile(0.5) as f64;
    let p99 = l.quantile(0.99) as f64;
    assert!((500_000.0..=500_000.0 * 1.19).contains(&p50), "p50 {p50}");
    assert!((990_000.0..=1_000_000.0).contains(&p99), "p99 {p99}");
    assert_eq!(l.max(), 1_000_000);
    assert_eq!(l.quantile(1.0), 1_000_000);
    assert_eq!(l.count(), 1000);
    // Tiny and huge values land somewhere without panicking.
    l.record(0);
    l.record(u64::MAX);
    assert_eq!(l.max(), u64::MAX);
}

fn halted_reject(r: &Rig, tag: u32) -> bool {
    r.records().iter().any(|x| {
        matches!(
            x,
            Record::Reject {
                code: RejectCode::BookHalted,
                client_tag,
                ..
            } if *client_tag == tag
        )
    })
}

/// 07 §7.4 (INV-REP-9): a voter's `Diverge` halts the book with `Control(Halt)` within 1 ms of
/// control taking it, repeats do not halt twice, and nothing lifts the halt by itself: not the
/// finality gate's resume when a stalled finality catches up, not time.
#[test]
fn a_diverge_halts_the_book_within_a_millisecond_and_nothing_resumes_it() {
    let mut r = Rig::new();
    r.order(1, Side::Buy);
    r.run(50_000);
    assert!(r.records().contains(&Record::Ack {
        msg_index: 0,
        client_tag: 1
    }));
    // Finality stalls past the gate first: the book halts for the gate.
    for v in r.voters.iter_mut() {
        v.voting = false;
    }
    r.run(BLOCK_NS * (FIN_GATE_BLOCKS + 4));
    assert_eq!(r.home.watermarks().2.gate_halts, 1);
    // A voter raises REP_A_DIVERGE (and, as a replica does, repeats it).
    r.home.on_diverge(2, 7);
    r.run(1_000_000);
    r.home.on_diverge(2, 7);
    r.home.on_diverge(1, 7);
    r.run(50_000);
    let c = r.home.watermarks().2;
    assert_eq!((c.diverge_msgs, c.diverge_halts), (3, 1), "{c:?}");
    // Finality comes back and catches up: the gate would resume, divergence does not let it.
    for v in r.voters.iter_mut() {
        v.voting = true;
    }
    r.run(20 * BLOCK_NS);
    let (_, f, c) = r.home.watermarks();
    assert!(f + 4 >= r.home.closed_height(), "finality caught up: {f}");
    assert_eq!(
        c.gate_resumes, 0,
        "the gate must not resume a diverged book: {c:?}"
    );
    r.order(2, Side::Buy);
    r.run(5_000_000);
    assert!(halted_reject(&r, 2), "BOOK_HALTED after a Diverge");
    assert!(!r.records().contains(&Record::Ack {
        msg_index: 0,
        client_tag: 2
    }));
}

/// The halt reaches the book within 1 ms of control taking the `Diverge` (07 §7.4) with the
/// book running (no gate halt before it).
#[test]
fn a_diverge_on_a_running_book_halts_it_within_a_millisecond() {
    let mut r = Rig::new();
    r.run(50_000);
    r.home.on_diverge(0, 3);
    r.run(1_000_000);
    r.order(5, Side::Sell);
    r.run(100_000);
    assert!(halted_reject(&r, 5), "BOOK_HALTED 1 ms after the Diverge");
    let c = r.home.watermarks().2;
    assert_eq!((c.diverge_halts, c.gate_halts), (1, 0), "{c:?}");
}
