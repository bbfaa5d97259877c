//! 07 §5.7 through the driver: replicas' `DataDown` votes, the deterministic backup home, and
//! `DataRedirect` relayed to the affected session's client as a tagged response record.

mod common;

use common::*;
use vyrn_data::failover::RELAY_RESP_SEQ;
use vyrn_data::{DataBox, Driver};
use vyrn_nic::mem::MemPort;
use vyrn_nic::{Port, RxBatch};
use vyrn_wire::msg::client::{Record, Response};
use vyrn_wire::msg::ctrl::{DataDown, DataRedirect};

struct Net {
    driver: Driver<MemPort>,
    client: MemPort,
    replicas: Vec<MemPort>,
}

fn net() -> Net {
    // Sessions 100..108; session 100+i is homed on BOXES[i % 4] = [3, 1, 4, 2][i % 4].
    let cfg = config(8, 1024);
    let b = DataBox::new(&cfg).unwrap();
    let (client, box_clients) = MemPort::pair(1024, 9216);
    let (box_seq, _seq) = MemPort::pair(1024, 9216);
    let mut dests = Vec::new();
    let mut replicas = Vec::new();
    for _ in 0..cfg.dests.len() {
        let (a, r) = MemPort::pair(1024, 9216);
        dests.push(a);
        replicas.push(r);
    }
    Net {
        driver: Driver::new(b, box_clients, box_seq, dests, 32).unwrap(),
        client,
        replicas,
    }
}

fn send(port: &mut MemPort, msg: &[u8]) {
    assert_eq!(port.send_batch(&[vyrn_nic::TxPacket::new(msg)]).unwrap(), 1);
}

fn responses(client: &mut MemPort, session: u32) -> Vec<Response> {
    let mut rx = RxBatch::new(64, 9216);
    let mut v = Vec::new();
    while client.recv_batch(&mut rx).unwrap() > 0 {
        for p in rx.iter() {
            v.push(Response::parse(p.data, &k_out(session)).expect("tagged under K_out"));
        }
    }
    v
}

#[test]
fn data_down_then_redirect_relayed() {
    let mut n = net();
    let mut now = 1_000;
    // Session 102 is homed on box 4; the client has sent copies, so the box knows it.
    send_all(&mut n.client, &[packet(102, 1, 1, 1, false)]);
    n.driver.poll(now);
    // Box 4 goes silent: voters R1, R2 and the standby vote; not yet Q = 3 voters.
    let down = DataDown { d: 4 }.to_bytes().unwrap();
    for r in [0, 1, 4] {
        send(&mut n.replicas[r], &down);
    }
    now += 1_000;
    n.driver.poll(now);
    assert!(!n.driver.databox.failover().is_down(4));
    send(&mut n.replicas[3], &down);
    now += 1_000;
    n.driver.poll(now);
    assert!(n.driver.databox.failover().is_down(4));
    // Facility order 3, 1, 4, 2: the backup of 4 is 2.
    assert_eq!(n.driver.databox.failover().backup(4), Some(2));
    assert_eq!(n.driver.databox.failover().serving(4), Some(2));

    // Replicas compute resend_from and send the redirect; R1 first.
    let red = |to: u8, session: u32, resend_from: u32| {
        DataRedirect {
            from: 4,
            to,
            session,
            resend_from,
        }
        .to_bytes()
        .unwrap()
    };
    send(&mut n.replicas[0], &red(2, 102, 17));
    // R2 says the same with a higher resend_from: not relayed again.
    send(&mut n.replicas[1], &red(2, 102, 18));
    // A wrong backup, a session not homed on 4, an unknown session: refused.
    send(&mut n.replicas[1], &red(3, 102, 17));
    send(&mut n.replicas[1], &red(2, 101, 17));
    send(&mut n.replicas[1], &red(2, 999, 17));
    // Session 106 is homed on 4 too but never sent a copy: no address.
    send(&mut n.replicas[1], &red(2, 106, 1));
    now += 1_000;
    n.driver.poll(now);
    // R3 knows less: resend_from 12 is lower, so the client must hear it.
    send(&mut n.replicas[2], &red(2, 102, 12));
    now += 1_000;
    n.driver.poll(now);

    let got = responses(&mut n.client, 102);
    let recs: Vec<(u32, u64, Record)> = got
        .iter()
        .map(|r| {
            assert_eq!(r.records.len(), 1);
            (r.echo_pkt_seq, r.resp_seq, r.records[0])
        })
        .collect();
    let want = |resend_from| {
        (
            0,
            RELAY_RESP_SEQ,
            Record::DataRedirect {
                from: 4,
                to: 2,
                resend_from,
            },
        )
    };
    assert_eq!(recs, vec![want(17), want(12)]);
    let c = n.driver.databox.counters();
    assert_eq!(c.data_down_votes, 4);
    assert_eq!(c.data_down_effective, 1);
    assert_eq!(c.data_down_self, 0);
    assert_eq!(c.redirects_relayed, 2);
    assert_eq!(c.redirects_dup, 1);
    assert_eq!(c.redirects_refused, 3);
    assert_eq!(c.redirects_no_addr, 1);
}

#[test]
fn this_box_voted_down_is_an_alarm_and_keeps_serving() {
    let mut n = net();
    let down = DataDown { d: INDEX }.to_bytes().unwrap();
    for r in 0..3 {
        send(&mut n.replicas[r], &down);
    }
    n.driver.poll(1_000);
    assert_eq!(n.driver.databox.counters().data_down_self, 1);
    send_all(&mut n.client, &[packet(100, 1, 1, 1, false)]);
    n.driver.poll(2_000);
    assert_eq!(n.driver.databox.counters().stored, 1);
}

#[test]
fn chained_failover_redirect() {
    let mut n = net();
    send_all(&mut n.client, &[packet(102, 1, 1, 1, false)]);
    n.driver.poll(1_000);
    // Box 4 down, then its backup 2 down too: the session moves 4 → 2 → 3.
    for d in [4u8, 2] {
        let m = DataDown { d }.to_bytes().unwrap();
        for r in 0..3 {
            send(&mut n.replicas[r], &m);
        }
    }
    n.driver.poll(2_000);
    assert_eq!(n.driver.databox.failover().serving(4), Some(3));
    let m = DataRedirect {
        from: 2,
        to: 3,
        session: 102,
        resend_from: 40,
    }
    .to_bytes()
    .unwrap();
    send(&mut n.replicas[0], &m);
    n.driver.poll(3_000);
    let got = responses(&mut n.client, 102);
    assert_eq!(got.len(), 1);
    assert_eq!(
        got[0].records[0],
        Record::DataRedirect {
            from: 2,
            to: 3,
            resend_from: 40
        }
    );
}

/// A box voted down by a quorum (a stall of its process that ended) is still the backup its
/// replicas compute for the other box: it relays that box's redirects (it is live: it is the one
/// relaying), rather than refuse them for want of a backup.
#[test]
fn this_box_voted_down_still_relays_as_the_backup() {
    let mut n = net();
    // Session 100 is homed on box 3, whose backup in facility order 3, 1, 4, 2 is box 1 = this
    // box; its client has sent a copy here, so the address is known.
    assert_eq!(INDEX, 1);
    send_all(&mut n.client, &[packet(100, 1, 1, 1, false)]);
    n.driver.poll(500);
    // A stall: this box voted down by Q voters; later box 3 fails for real.
    for d in [INDEX, 3] {
        let down = DataDown { d }.to_bytes().unwrap();
        for r in 0..3 {
            send(&mut n.replicas[r], &down);
        }
    }
    n.driver.poll(1_000);
    assert_eq!(n.driver.databox.counters().data_down_self, 1);
    let red = DataRedirect {
        from: 3,
        to: INDEX,
        session: 100,
        resend_from: 1,
    }
    .to_bytes()
    .unwrap();
    send(&mut n.replicas[0], &red);
    n.driver.poll(2_000);
    let c = n.driver.databox.counters();
    assert_eq!((c.redirects_relayed, c.redirects_refused), (1, 0));
    assert_eq!(
        responses(&mut n.client, 100).len(),
        1,
        "the client hears it"
    );
}

/// Packets waiting at `port`, drained.
fn drain(port: &mut MemPort) -> usize {
    let mut rx = RxBatch::new(64, 9216);
    let mut n = 0;
    while let Ok(k) = port.recv_batch(&mut rx) {
        if k == 0 {
            break;
        }
        n += k;
    }
    n
}

/// 07 §9.5: once Q voters' `SeqChange` names the standby, the box relays it to the sessions it
/// knows, and the standby's replica — promoted, the box now — is fed no more DATA frames; the
/// voters still are.
#[test]
fn after_a_seq_change_to_the_standby_its_replica_is_fed_no_more() {
    use vyrn_wire::msg::ctrl::SeqChange;
    use vyrn_wire::msg::seal::LinkKey;
    let mut n = net();
    let a = ed25519_dalek::SigningKey::from_bytes(&[7; 32]);
    let b = ed25519_dalek::SigningKey::from_bytes(&[9; 32]).verifying_key();
    let link = LinkKey::agree(&a, &b).expect("a link key");
    // The standby is seq_order index 1, fed at destination 4.
    n.driver
        .add_successor(1, "127.0.0.1:9".parse().unwrap(), link, Some(4));
    let mut now = 1_000_000;
    send_all(&mut n.client, &[packet(102, 1, 1, 1, false)]);
    for _ in 0..5 {
        now += 1_000_000;
        n.driver.poll(now);
    }
    assert!(
        drain(&mut n.replicas[4]) > 0,
        "the standby's replica is fed"
    );
    assert!(drain(&mut n.replicas[0]) > 0);
    let m = SeqChange {
        epoch: 0x0001_0002,
        tenure: 1,
        new_seq: 1,
        addr: vyrn_wire::msg::addr_from_socket("127.0.0.1:5000".parse().unwrap()),
        seal_height: 40,
        seal_last_step: 777,
    }
    .to_bytes()
    .unwrap();
    for r in 0..3 {
        send(&mut n.replicas[r], &m);
    }
    send_all(&mut n.client, &[packet(102, 2, 1, 2, false)]);
    for _ in 0..5 {
        now += 1_000_000;
        n.driver.poll(now);
    }
    assert_eq!(n.driver.databox.counters().seq_changes, 1);
    let got = responses(&mut n.client, 102);
    // 07 §9.4, §9.6: the ended tenure's end first, then the new sequencer, in one notice.
    assert!(
        got.iter().any(|r| r.records
            == [
                Record::TenureEnd {
                    epoch: 0x0001_0002,
                    tenure: 0,
                    height: 40,
                    last_step: 777
                },
                Record::SeqChange {
                    epoch: 0x0001_0002,
                    tenure: 1,
                    new_seq: 1,
                    addr: vyrn_wire::msg::addr_from_socket("127.0.0.1:5000".parse().unwrap()),
                }
            ]),
        "{got:?}"
    );
    assert!(drain(&mut n.replicas[0]) > 0, "the voters are still fed");
    assert_eq!(drain(&mut n.replicas[4]), 0, "the promoted standby is not");
}
