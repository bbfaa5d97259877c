//! BBO core book: ns per step on a seeded mix (07 §4.7 budget 100 ns per step, 01 §14.15's
//! 15 ns target for a simple step), against a same-run baseline of one `BTreeMap` insert and one
//! lookup per op (the level map's primitive cost).

use std::collections::BTreeMap;
use vyrn_bench::{budget, measure_with_setup, quick, ratio, rounds};
use vyrn_engine::{Book, BookConfig, Op, OpKind, Side};
use vyrn_wire::corpus::Rng;

fn main() {
    println!("# engine_book: one shared 2-core machine; ratios are the figures to quote");
    let n_ops = if quick() { 20_000 } else { 400_000 };
    let mut rng = Rng::new(11);
    // A realistic mix around a mid price: 55% resting limits near the touch, 25% crossing
    // limits, 10% IOC, 10% cancels of recent orders.
    let mut ops = Vec::with_capacity(n_ops);
    let mut live: Vec<(u32, u32)> = Vec::new();
    for i in 0..n_ops as u32 {
        let session = 1 + rng.below(500) as u32;
        let r = rng.below(100);
        let buy = rng.below(2) == 0;
        let side = if buy { Side::Buy } else { Side::Sell };
        let off = rng.below(10) as i32;
        let (kind, tick) = match r {
            // resting, 1..10 ticks behind the touch
            0..=54 => (OpKind::NewGtc, if buy { 999 - off } else { 1001 + off }),
            // crossing limit, up to 9 ticks through
            55..=79 => (OpKind::NewGtc, if buy { 1000 + off } else { 1000 - off }),
            80..=89 => (OpKind::NewIoc, if buy { 1000 + off } else { 1000 - off }),
            _ => (OpKind::Cancel, 0),
        };
        let o = if kind == OpKind::Cancel {
            let Some(&(s, t)) = live.get(live.len().saturating_sub(1 + rng.below(64) as usize))
            else {
                continue;
            };
            Op {
                kind,
                session: s,
                account: s,
                client_tag: t,
                side,
                tick: 0,
                qty: 0,
                cookie: t as u64,
            }
        } else {
            if kind == OpKind::NewGtc {
                live.push((session, i));
            }
            Op {
                kind,
                session,
                account: session,
                client_tag: i,
                side,
                tick,
                qty: 1 + rng.below(50) as u32,
                cookie: i as u64,
            }
        };
        ops.push(o);
    }
    let n = rounds(20);
    let book = measure_with_setup(
        "book.apply, seeded mix (per step)",
        n,
        ops.len() as u64,
        || {
            Book::new(BookConfig {
                max_orders: 1 << 20,
            })
        },
        |mut b| {
            let mut fills = 0u64;
            for (i, o) in ops.iter().enumerate() {
                b.apply(i as u64 + 1, o, &mut |_| fills += 1);
            }
            (b, fills)
        },
    );
    budget("BBO step (07 §4.7: 100 ns)", book.p50_ns(), 100.0);
    budget(
        "BBO simple step (01 §14.15 target: 15 ns)",
        book.p50_ns(),
        15.0,
    );
    let base = measure_with_setup(
        "baseline: BTreeMap insert + lookup (per op)",
        n,
        ops.len() as u64,
        BTreeMap::<i32, u64>::new,
        |mut m| {
            let mut acc = 0u64;
            for o in &ops {
                *m.entry(o.tick).or_default() += o.qty as u64;
                acc += m.get(&(o.tick ^ 1)).copied().unwrap_or(0);
            }
            (m, acc)
        },
    );
    ratio(&book, &base);
}
