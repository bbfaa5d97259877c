//! The client against the sequencer and data box doubles over `MemPort` + `Lossy` (seeded
//! drop, duplicate and reorder in both directions): every order's facts reach the application
//! exactly once, across a sequencer change (07 §9.5) and a data box failure (07 §5.7).

use std::collections::HashMap;
use std::net::SocketAddr;

use vyrn_client::testkit::{DataDouble, SeqDouble, Switch};
use vyrn_client::{Driver, Event, ExecKind, OrderId, OrderReq, Session, SessionConfig};
use vyrn_nic::lossy::{LossConfig, Lossy, SplitMix64};
use vyrn_nic::mem::MemPort;
use vyrn_nic::Port;
use vyrn_wire::msg::client::{Record, Side};

const US: u64 = 1_000;
const MS: u64 = 1_000_000;

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

struct Peers {
    seq_a: SocketAddr,
    seq_b: SocketAddr,
    data: [SocketAddr; 2],
}

fn peers() -> Peers {
    Peers {
        seq_a: addr("10.0.0.1:9000"),
        seq_b: addr("10.0.0.2:9000"),
        data: [addr("10.0.1.1:7402"), addr("10.0.1.2:7402")],
    }
}

fn keys(session: u32) -> ([u8; 16], [u8; 16]) {
    ([session as u8; 16], [session as u8 ^ 0xA5; 16])
}

/// The whole test network.
struct Net {
    now: u64,
    client: Driver<Switch<Lossy<MemPort>>>,
    sessions: Vec<Session>,
    seq: SeqDouble,
    seq_port: MemPort,
    /// The sequencer that crashed, kept for its execution log.
    old_seq: Option<SeqDouble>,
    seq_b_port: Option<MemPort>,
    data: [DataDouble; 2],
    data_ports: [MemPort; 2],
    data_up: [bool; 2],
    /// Events per session.
    events: Vec<Vec<(u64, Event)>>,
    rng: SplitMix64,
    live: Vec<Vec<OrderId>>,
}

fn loss(seed: u64) -> LossConfig {
    LossConfig::seeded(seed)
        .with_drop(0.03)
        .with_dup(0.03)
        .with_reorder(0.05, 3)
}

impl Net {
    fn new(n_sessions: u32, seed: u64, lossy: bool) -> Net {
        let p = peers();
        let mut sw = Switch::new();
        let link = |k: u64| {
            let (c, far) = MemPort::pair(1 << 14, 2048);
            let (tx, rx) = if lossy {
                (loss(seed * 100 + k), loss(seed * 100 + 50 + k))
            } else {
                (LossConfig::NONE, LossConfig::NONE)
            };
            (Lossy::new(c, tx, rx).unwrap(), far)
        };
        let (ca, seq_port) = link(1);
        let (cb, seq_b_port) = link(2);
        let (c0, d0) = link(3);
        let (c1, d1) = link(4);
        sw.link(p.seq_a, ca);
        sw.link(p.seq_b, cb);
        sw.link(p.data[0], c0);
        sw.link(p.data[1], c1);
        let client_addr = addr("10.0.9.9:5000");
        let mut seq = SeqDouble::new(p.seq_a, 3, 0, 0);
        let mut data = [DataDouble::default(), DataDouble::default()];
        let mut sessions = Vec::new();
        for i in 0..n_sessions {
            let id = 0x1000 + i;
            let (ks, ko) = keys(id);
            seq.add_session(id, ks, ko, client_addr);
            data[0].add_session(id, ks, ko);
            data[1].add_session(id, ks, ko);
            let mut cfg = SessionConfig::new(7, id, ks, ko, p.seq_a, p.data.to_vec(), 0);
            cfg.retain_max = 4096;
            cfg.resend_after_ns = 2 * MS;
            cfg.gap_resend_ns = 2 * MS;
            sessions.push(Session::new(cfg, 3, 0).unwrap());
        }
        let client = Driver::new(sw, &sessions);
        Net {
            now: 0,
            client,
            seq,
            seq_port,
            old_seq: None,
            seq_b_port: Some(seq_b_port),
            data,
            data_ports: [d0, d1],
            data_up: [true, true],
            events: vec![Vec::new(); n_sessions as usize],
            rng: SplitMix64::new(seed),
            live: vec![Vec::new(); n_sessions as usize],
            sessions,
        }
    }

    fn rand(&mut self, n: u64) -> u64 {
        self.rng.next_u64() % n
    }

    /// One random packet of 1..=3 messages for session `i`: resting and crossing GTCs, IOCs
    /// and cancels of live orders.
    fn submit_random(&mut self, i: usize) {
        let n = 1 + self.rand(3) as usize;
        let mut reqs = Vec::new();
        for _ in 0..n {
            let side = if self.rand(2) == 0 {
                Side::Buy
            } else {
                Side::Sell
            };
            let away = |s: Side, d: i32| if s == Side::Buy { 100 - d } else { 100 + d };
            let qty = 1 + self.rand(5) as u32;
            let r = match self.rand(10) {
                0..=4 => OrderReq::Gtc {
                    side,
                    tick: away(side, 1 + self.rand(3) as i32),
                    qty,
                },
                5..=6 => OrderReq::Gtc {
                    side,
                    tick: away(side, -2),
                    qty,
                },
                7 => OrderReq::Ioc {
                    side,
                    tick: away(side, -2),
                    qty,
                },
                _ => match self.live[i].len() {
                    0 => OrderReq::Ioc {
                        side,
                        tick: away(side, 0),
                        qty,
                    },
                    l => {
                        let k = self.rand(l as u64) as usize;
                        OrderReq::Cancel {
                            order: self.live[i].swap_remove(k),
                        }
                    }
                },
            };
            reqs.push(r);
        }
        let now = self.now;
        let sub = self.sessions[i].submit(now, &reqs).expect("submit");
        for (k, r) in reqs.iter().enumerate() {
            if let OrderReq::Gtc { .. } = r {
                self.live[i].push(sub.orders[k]);
            }
        }
    }

    /// Advance time by `dt` and move every packet once.
    fn tick(&mut self, dt: u64) {
        self.now += dt;
        let now = self.now;
        self.client.pump(&mut self.sessions, now).unwrap();
        self.seq.serve(&mut self.seq_port);
        if now % MS < dt {
            self.seq.mark_durable();
        }
        if now % (3 * MS) < dt {
            self.seq.mark_final();
        }
        self.seq.flush_to(&mut self.seq_port);
        for d in 0..2 {
            if self.data_up[d] {
                self.data[d].serve(&mut self.data_ports[d]);
            }
        }
        self.client.pump(&mut self.sessions, now).unwrap();
        for (i, s) in self.sessions.iter_mut().enumerate() {
            while let Some(e) = s.poll_event() {
                self.events[i].push((now, e));
            }
        }
    }

    /// Crash the sequencer and promote the double at `seq_b` (07 §9.5), then have both data
    /// boxes announce it, a few times each (the notice can be lost too).
    fn fail_over(&mut self) {
        let p = peers();
        let next = self.seq.promote(p.seq_b, 1);
        let old = std::mem::replace(&mut self.seq, next);
        self.old_seq = Some(old);
        self.seq_port = self.seq_b_port.take().expect("one failover");
        let notice = self.seq.seq_change();
        for _ in 0..3 {
            for d in 0..2 {
                for s in &self.sessions {
                    let b = self.data[d].notice(s.id(), vec![notice]);
                    self.data_ports[d]
                        .send_batch(&[vyrn_nic::TxPacket::new(&b)])
                        .unwrap();
                }
            }
        }
    }

    /// Every record the sequencers sent, per (session, tag).
    fn authoritative(&self) -> HashMap<(u32, u32), Vec<Record>> {
        let mut m: HashMap<(u32, u32), Vec<Record>> = HashMap::new();
        let logs = self.old_seq.iter().chain(std::iter::once(&self.seq));
        for s in logs {
            for e in &s.log {
                m.entry((e.session, e.tag)).or_default().push(e.record);
            }
        }
        m
    }

    /// The checks every scenario ends with.
    fn check_exactly_once(&self) {
        let truth = self.authoritative();
        for (i, s) in self.sessions.iter().enumerate() {
            let id = s.id();
            let c = s.counters();
            let mut got: HashMap<u32, Vec<ExecKind>> = HashMap::new();
            let mut durable: HashMap<(u32, u64), u32> = HashMap::new();
            let mut fin: HashMap<(u32, u64), u32> = HashMap::new();
            for (_, e) in &self.events[i] {
                match *e {
                    Event::Exec(x) => got.entry(x.order).or_default().push(x.kind),
                    Event::Durable { order, step } => {
                        *durable.entry((order, step)).or_default() += 1
                    }
                    Event::Final { order, step, .. } => *fin.entry((order, step)).or_default() += 1,
                    Event::Uncertain { .. } | Event::Stuck { .. } => {
                        panic!("session {id:#x}: {e:?}")
                    }
                    Event::ResponsesLost { first, last } => {
                        let factless = self.seq.factless(id);
                        for r in first..=last {
                            if !factless.contains(&r) {
                                let what = self.seq.find_resp(id, r);
                                let view = what.as_ref().and_then(|(_, recs)| match recs[0] {
                                    Record::Fill { client_tag, .. }
                                    | Record::Ack { client_tag, .. } => {
                                        s.order(client_tag).copied()
                                    }
                                    _ => None,
                                });
                                panic!("lost a fact: resp_seq {r} {what:?} {view:?}: {c:?}");
                            }
                        }
                    }
                    _ => {}
                }
            }
            let mut orders = 0;
            for ((sid, tag), recs) in &truth {
                if *sid != id {
                    continue;
                }
                orders += 1;
                let mut want: Vec<String> = recs.iter().map(norm_rec).collect();
                let mut have: Vec<String> = got
                    .get(tag)
                    .map(|v| v.iter().map(norm_exec).collect())
                    .unwrap_or_default();
                want.sort();
                have.sort();
                assert_eq!(have, want, "session {id:#x} order {tag}");
                let terminals = have.iter().filter(|k| is_terminal(k)).count();
                assert!(terminals <= 1, "order {tag}: {have:?}");
                for r in recs {
                    if let Record::Fill { step, .. } = r {
                        // Steps of one order are distinct per fill except taker fills of one
                        // step; count facts per (order, step) against fills per (order, step).
                        let fills = recs
                            .iter()
                            .filter(|x| matches!(x, Record::Fill { step: s2, .. } if s2 == step))
                            .count() as u32;
                        assert_eq!(
                            durable.get(&(*tag, *step)),
                            Some(&fills),
                            "durable {tag}@{step}"
                        );
                        assert_eq!(fin.get(&(*tag, *step)), Some(&fills), "final {tag}@{step}");
                    }
                }
            }
            assert!(orders > 50, "too few orders: {orders}");
            // Every packet was executed exactly once.
            for p in 1..s.next_pkt_seq() {
                assert_eq!(self.seq.executions.get(&(id, p)), Some(&1), "pkt {p}");
            }
        }
    }
}

fn norm_rec(r: &Record) -> String {
    match *r {
        Record::Ack { .. } => "ack".into(),
        Record::Fill {
            price,
            qty,
            leaves,
            step,
            ..
        } => format!("fill {price} {qty} {leaves} {step}"),
        Record::CancelAck { .. } => "cancel".into(),
        Record::Out { qty, .. } => format!("out {qty}"),
        Record::Reject { code, detail, .. } => format!("reject {code:?} {detail}"),
        _ => "other".into(),
    }
}

fn norm_exec(k: &ExecKind) -> String {
    match *k {
        ExecKind::Ack => "ack".into(),
        ExecKind::Fill {
            price,
            qty,
            leaves,
            step,
        } => format!("fill {price} {qty} {leaves} {step}"),
        ExecKind::CancelAck => "cancel".into(),
        ExecKind::Out { qty } => format!("out {qty}"),
        ExecKind::Reject { code, detail } => format!("reject {code:?} {detail}"),
        ExecKind::Busy => "busy".into(),
    }
}

fn is_terminal(k: &str) -> bool {
    let p: Vec<&str> = k.split(' ').collect();
    k == "cancel" || p[0] == "out" || (p[0] == "fill" && p[3] == "0")
}

fn run(net: &mut Net, packets: usize, failover_at: Option<usize>) {
    let n = net.sessions.len();
    for k in 0..packets {
        if Some(k) == failover_at {
            net.fail_over();
        }
        let i = k % n;
        net.submit_random(i);
        net.tick(20 * US);
    }
    // Drain: keep the watermarks and timers going until everything settled.
    for _ in 0..(400 * MS / (50 * US)) {
        net.tick(50 * US);
    }
}

#[test]
fn lossless_every_fact_once() {
    let mut net = Net::new(2, 1, false);
    run(&mut net, 600, None);
    net.check_exactly_once();
    for s in &net.sessions {
        let c = s.counters();
        assert_eq!(c.rx_dup, 0);
        assert_eq!(c.resend_seq, 0, "{c:?}");
    }
}

#[test]
fn lossy_every_fact_once() {
    for seed in [2, 3] {
        let mut net = Net::new(3, seed, true);
        run(&mut net, 900, None);
        net.check_exactly_once();
        let c = net.sessions[0].counters();
        assert!(c.rx_dup > 0 && c.resend_seq > 0 && c.bad_seq > 0, "{c:?}");
        assert!(net.seq.duplicates > 0);
    }
}

#[test]
fn sequencer_change_no_duplicate_execution() {
    for seed in [4, 5] {
        let mut net = Net::new(2, seed, true);
        run(&mut net, 900, Some(450));
        let old = net.old_seq.as_ref().unwrap();
        assert!(net.seq.addr != old.addr);
        for s in &net.sessions {
            assert_eq!(s.seq_addr(), Some(peers().seq_b));
            // The new sequencer knew last(session) from the replayed state and deduped resends.
            assert!(net.seq.last(s.id()) == s.next_pkt_seq() - 1);
        }
        assert!(
            net.seq.duplicates > 0,
            "resends reached the new sequencer as duplicates"
        );
        let changed = net.events[0]
            .iter()
            .filter(|(_, e)| matches!(e, Event::SeqChanged { .. }))
            .count();
        assert_eq!(
            changed, 1,
            "one SeqChange reported however many copies arrive"
        );
        net.check_exactly_once();
    }
}

#[test]
fn data_redirect_resends_copy2_from_resend_from() {
    let mut net = Net::new(1, 6, false);
    let n = 300;
    let mut redirect_from = 0;
    let mut switched_at_pkt = 0;
    let mut stale_before = 0;
    for k in 0..n {
        if k == 150 {
            // Data box 0 dies; packets from 140 on never reached a replica.
            net.data_up[0] = false;
            redirect_from = 140;
            switched_at_pkt = net.sessions[0].next_pkt_seq();
            stale_before = net.sessions[0].counters().notice_stale;
            let id = net.sessions[0].id();
            let b = net.data[1].redirect(id, 0, 1, redirect_from);
            let dup = net.data[0].redirect(id, 0, 1, redirect_from);
            net.data_ports[1]
                .send_batch(&[vyrn_nic::TxPacket::new(&b)])
                .unwrap();
            net.data_ports[1]
                .send_batch(&[vyrn_nic::TxPacket::new(&dup)])
                .unwrap();
        }
        net.submit_random(0);
        net.tick(20 * US);
    }
    for _ in 0..100 {
        net.tick(50 * US);
    }
    let s = &net.sessions[0];
    let id = s.id();
    assert_eq!(s.data_home().0, 1);
    let redirected = net.events[0]
        .iter()
        .filter(|(_, e)| matches!(e, Event::DataRedirected { .. }))
        .count();
    assert_eq!(redirected, 1);
    assert_eq!(
        s.counters().notice_stale,
        stale_before + 1,
        "the second copy is stale"
    );
    // Data box 1 holds copy 2 of every packet from resend_from on.
    for p in redirect_from..s.next_pkt_seq() {
        assert!(net.data[1].stored.contains_key(&(id, p)), "pkt {p}");
    }
    // Packets sent before the redirect reached box 1 as resends; nothing before resend_from.
    assert_eq!(net.data[1].resends as u32, switched_at_pkt - redirect_from);
    assert!(net.data[1].stored.keys().all(|&(_, p)| p >= redirect_from));
    // Nothing went to box 0 after the switch.
    net.data[0].serve(&mut net.data_ports[0]);
    assert!(net.data[0].stored.keys().all(|&(_, p)| p < switched_at_pkt));
    assert_eq!(net.data[0].conflicts + net.data[1].conflicts, 0);
    net.check_exactly_once();
}

#[test]
fn no_sequencer_halts_submits_until_a_new_one() {
    let mut net = Net::new(1, 7, false);
    for _ in 0..20 {
        net.submit_random(0);
        net.tick(20 * US);
    }
    let id = net.sessions[0].id();
    let b = net.data[0].no_sequencer(id, 3, 1);
    net.data_ports[0]
        .send_batch(&[vyrn_nic::TxPacket::new(&b)])
        .unwrap();
    net.tick(20 * US);
    assert_eq!(net.sessions[0].seq_addr(), None);
    assert_eq!(
        net.sessions[0].submit(net.now, &[OrderReq::Cancel { order: 1 }]),
        Err(vyrn_client::SubmitError::NoSequencer)
    );
    // A stale announcement of the old tenure changes nothing.
    let stale = net.data[0].notice(id, vec![net.seq.seq_change()]);
    net.data_ports[0]
        .send_batch(&[vyrn_nic::TxPacket::new(&stale)])
        .unwrap();
    net.tick(20 * US);
    assert_eq!(net.sessions[0].seq_addr(), None);
}
