//! The book: price-time priority, IOC, cancels, refusals; and, over random op streams, the
//! invariants of missing-chapters §3: never crossed at rest, quantities conserved
//! (filled + open + cancelled + out = entered), every trade's two sides equal, deterministic.

use proptest::prelude::*;
use std::collections::HashMap;
use vyrn_engine::*;
use vyrn_wire::StepKind;

fn op(kind: OpKind, session: u32, tag: u32, side: Side, tick: i32, qty: u32) -> Op {
    Op {
        kind,
        session,
        account: session * 10,
        client_tag: tag,
        side,
        tick,
        qty,
        cookie: (session as u64) << 32 | tag as u64,
    }
}

fn run(book: &mut Book, step: u64, o: Op) -> (StepKind, Vec<Event>) {
    let mut ev = Vec::new();
    let k = book.apply(step, &o, &mut |e| ev.push(e));
    book.check().unwrap();
    (k, ev)
}

fn fills(ev: &[Event]) -> Vec<(u32, u32, i32, u32, u32, bool)> {
    ev.iter()
        .filter_map(|e| match *e {
            Event::Fill {
                session,
                client_tag,
                price,
                qty,
                leaves,
                maker,
                ..
            } => Some((session, client_tag, price, qty, leaves, maker)),
            _ => None,
        })
        .collect()
}

#[test]
fn price_then_time_priority() {
    let mut b = Book::new(BookConfig::default());
    run(&mut b, 1, op(OpKind::NewGtc, 1, 1, Side::Sell, 101, 5));
    run(&mut b, 2, op(OpKind::NewGtc, 2, 1, Side::Sell, 100, 5));
    run(&mut b, 3, op(OpKind::NewGtc, 3, 1, Side::Sell, 100, 5));
    assert_eq!(b.best_ask(), Some((100, 10)));
    // A buy for 12 at 101: session 2 (better price... same price, earlier) then 3, then 1.
    let (k, ev) = run(&mut b, 4, op(OpKind::NewGtc, 9, 7, Side::Buy, 101, 12));
    assert_eq!(k, StepKind::Cross);
    assert_eq!(
        fills(&ev),
        vec![
            (9, 7, 100, 5, 7, false),
            (2, 1, 100, 5, 0, true),
            (9, 7, 100, 5, 2, false),
            (3, 1, 100, 5, 0, true),
            (9, 7, 101, 2, 0, false),
            (1, 1, 101, 2, 3, true),
        ]
    );
    assert_eq!(b.best_ask(), Some((101, 3)));
    assert_eq!(b.best_bid(), None);
}

#[test]
fn gtc_remainder_rests_ioc_remainder_is_out() {
    let mut b = Book::new(BookConfig::default());
    run(&mut b, 1, op(OpKind::NewGtc, 1, 1, Side::Buy, 99, 4));
    let (k, ev) = run(&mut b, 2, op(OpKind::NewIoc, 2, 1, Side::Sell, 99, 10));
    assert_eq!(k, StepKind::Cross);
    assert_eq!(
        ev.last(),
        Some(&Event::Out {
            session: 2,
            client_tag: 1,
            cookie: 2 << 32 | 1,
            side: Side::Sell,
            qty: 6
        })
    );
    assert!(b.is_empty());
    let (k, ev) = run(&mut b, 3, op(OpKind::NewGtc, 3, 1, Side::Sell, 99, 10));
    assert_eq!(k, StepKind::Improve);
    assert_eq!(
        ev,
        vec![Event::Rested {
            session: 3,
            client_tag: 1,
            cookie: 3 << 32 | 1,
            qty: 10
        }]
    );
    assert_eq!(b.get(3, 1).map(|o| (o.open, o.time)), Some((10, 3)));
    let (k, ev) = run(&mut b, 4, op(OpKind::NewIoc, 4, 1, Side::Buy, 98, 10));
    assert_eq!(k, StepKind::Improve);
    assert_eq!(
        ev,
        vec![Event::Out {
            session: 4,
            client_tag: 1,
            cookie: 4 << 32 | 1,
            side: Side::Buy,
            qty: 10
        }]
    );
}

#[test]
fn cancels_and_refusals() {
    let mut b = Book::new(BookConfig { max_orders: 2 });
    run(&mut b, 1, op(OpKind::NewGtc, 1, 5, Side::Buy, 10, 3));
    let (_, ev) = run(&mut b, 2, op(OpKind::NewGtc, 1, 5, Side::Buy, 11, 3));
    assert_eq!(
        ev,
        vec![Event::Rejected {
            session: 1,
            client_tag: 5,
            reason: BookReject::DuplicateTag
        }]
    );
    let (_, ev) = run(&mut b, 3, op(OpKind::NewGtc, 1, 6, Side::Buy, 11, 0));
    assert_eq!(
        ev,
        vec![Event::Rejected {
            session: 1,
            client_tag: 6,
            reason: BookReject::BadQty
        }]
    );
    run(&mut b, 4, op(OpKind::NewGtc, 2, 1, Side::Buy, 9, 1));
    let (_, ev) = run(&mut b, 5, op(OpKind::NewGtc, 3, 1, Side::Buy, 8, 1));
    assert_eq!(
        ev,
        vec![
            Event::Out {
                session: 3,
                client_tag: 1,
                cookie: 3 << 32 | 1,
                side: Side::Buy,
                qty: 1
            },
            Event::Rejected {
                session: 3,
                client_tag: 1,
                reason: BookReject::BookFull
            }
        ]
    );
    let (k, ev) = run(&mut b, 6, op(OpKind::Cancel, 1, 5, Side::Buy, 0, 0));
    assert_eq!(k, StepKind::Improve);
    assert_eq!(
        ev,
        vec![Event::Cancelled {
            session: 1,
            client_tag: 5,
            cookie: 1 << 32 | 5,
            side: Side::Buy,
            qty: 3
        }]
    );
    let (_, ev) = run(&mut b, 7, op(OpKind::Cancel, 1, 5, Side::Buy, 0, 0));
    assert_eq!(
        ev,
        vec![Event::Rejected {
            session: 1,
            client_tag: 5,
            reason: BookReject::UnknownOrder
        }]
    );
    // Another session cannot cancel session 2's order by its tag.
    let (_, ev) = run(&mut b, 8, op(OpKind::Cancel, 7, 1, Side::Buy, 0, 0));
    assert!(matches!(
        ev[0],
        Event::Rejected {
            reason: BookReject::UnknownOrder,
            ..
        }
    ));
    assert_eq!(b.len(), 1);
}

fn arb_op() -> impl Strategy<Value = Op> {
    (
        0u8..10,
        1u32..6,
        0u32..8,
        any::<bool>(),
        95i32..106,
        1u32..20,
    )
        .prop_map(|(k, s, tag, buy, tick, qty)| {
            let kind = match k {
                0..=5 => OpKind::NewGtc,
                6..=7 => OpKind::NewIoc,
                _ => OpKind::Cancel,
            };
            let side = if buy { Side::Buy } else { Side::Sell };
            if kind == OpKind::Cancel {
                op(kind, s, tag, side, 0, 0)
            } else {
                op(kind, s, tag, side, tick, qty)
            }
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn invariants_hold_and_quantities_are_conserved(ops in proptest::collection::vec(arb_op(), 1..400)) {
        let mut b = Book::new(BookConfig { max_orders: 64 });
        // Per (session, tag, order generation): entered, filled, cancelled, out.
        let mut entered: u64 = 0;
        let (mut filled, mut cancelled, mut out) = (0u64, 0u64, 0u64);
        let mut trade_sides: HashMap<bool, u64> = HashMap::new();
        let mut digest = blake3::Hasher::new();
        for (i, o) in ops.iter().enumerate() {
            let before_dup = o.kind != OpKind::Cancel && o.qty > 0 && b.get(o.session, o.client_tag).is_some();
            let mut ev = Vec::new();
            let kind = b.apply(i as u64 + 1, o, &mut |e| ev.push(e));
            prop_assert!(b.check().is_ok(), "{:?}", b.check());
            if o.kind != OpKind::Cancel && o.qty > 0 && !before_dup {
                entered += o.qty as u64;
            }
            let mut traded = false;
            for e in &ev {
                digest.update(format!("{e:?}").as_bytes());
                match *e {
                    Event::Fill { qty, maker, .. } => {
                        traded = true;
                        *trade_sides.entry(maker).or_default() += qty as u64;
                        filled += qty as u64;
                    }
                    Event::Cancelled { qty, .. } => cancelled += qty as u64,
                    Event::Out { qty, .. } => out += qty as u64,
                    _ => {}
                }
            }
            prop_assert_eq!(kind == StepKind::Cross, traded);
        }
        let open: u64 = b.orders().iter().map(|o| o.open as u64).sum();
        // Each trade fills two orders (both counted in `filled`), each entered once.
        prop_assert_eq!(trade_sides.get(&true), trade_sides.get(&false));
        prop_assert_eq!(filled + open + cancelled + out, entered);
        // Determinism: the same ops give the same events.
        let mut b2 = Book::new(BookConfig { max_orders: 64 });
        let mut d2 = blake3::Hasher::new();
        for (i, o) in ops.iter().enumerate() {
            b2.apply(i as u64 + 1, o, &mut |e| { d2.update(format!("{e:?}").as_bytes()); });
        }
        prop_assert_eq!(digest.finalize(), d2.finalize());
        prop_assert_eq!(b.orders(), b2.orders());
    }
}
