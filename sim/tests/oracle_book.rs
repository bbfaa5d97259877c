//! The reference book (`vyrn_sim::oracle::book`, a flat list scanned in full, written from
//! missing-chapters §3) and the engine's book (`vyrn_engine::book::Book`, slab and price
//! levels) on the same seeded ops: the same step kind (Cross when the op traded, else Improve)
//! and the same events, in order, at every step — fills with their prices, quantities, leaves
//! and maker flags, rests, outs, cancels and refusals.

use proptest::prelude::*;
use vyrn_engine::book::{Book, BookConfig, BookReject, Event, Op, OpKind, Side};
use vyrn_sim::oracle::book::{RefBook, RefEvent, RefKind, RefOp, RefReject, RefSide};
use vyrn_wire::StepKind;

/// SplitMix64.
struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) % n
    }
}

fn side(s: Side) -> RefSide {
    match s {
        Side::Buy => RefSide::Buy,
        Side::Sell => RefSide::Sell,
    }
}

/// The engine's events in the reference's shapes.
fn theirs(e: &Event) -> RefEvent {
    match *e {
        Event::Fill {
            session,
            client_tag,
            side: s,
            price,
            qty,
            leaves,
            maker,
            cookie,
            ..
        } => RefEvent::Fill {
            session,
            tag: client_tag,
            side: side(s),
            price,
            qty,
            leaves,
            maker,
            cookie,
        },
        Event::Rested {
            session,
            client_tag,
            qty,
            ..
        } => RefEvent::Rested {
            session,
            tag: client_tag,
            qty,
        },
        Event::Out {
            session,
            client_tag,
            qty,
            ..
        } => RefEvent::Out {
            session,
            tag: client_tag,
            qty,
        },
        Event::Cancelled {
            session,
            client_tag,
            qty,
            ..
        } => RefEvent::Cancelled {
            session,
            tag: client_tag,
            qty,
        },
        Event::Rejected {
            session,
            client_tag,
            reason,
        } => RefEvent::Rejected {
            session,
            tag: client_tag,
            why: match reason {
                BookReject::UnknownOrder => RefReject::UnknownOrder,
                BookReject::DuplicateTag => RefReject::DuplicateTag,
                BookReject::BadQty => RefReject::BadQty,
                BookReject::BookFull => RefReject::BookFull,
            },
        },
    }
}

/// `n` ops from `seed` over a few sessions, a narrow price band (many crosses), reused and
/// unknown tags, zero quantities; both books with room for `max_orders`.
fn run(seed: u64, n: u64, max_orders: u32) -> Result<(u64, u64), String> {
    let mut rng = Rng(seed);
    let mut book = Book::new(BookConfig { max_orders });
    let mut reference = RefBook::new(max_orders as usize);
    let (mut crosses, mut events) = (0, 0);
    for step in 1..=n {
        let session = 1 + rng.below(4) as u32;
        let kind = match rng.below(10) {
            0..=4 => OpKind::NewGtc,
            5..=7 => OpKind::NewIoc,
            _ => OpKind::Cancel,
        };
        let s = if rng.below(2) == 0 {
            Side::Buy
        } else {
            Side::Sell
        };
        let (tick, qty) = match kind {
            OpKind::Cancel => (0, 0),
            _ => (
                95 + rng.below(11) as i32,
                if rng.below(40) == 0 {
                    0
                } else {
                    1 + rng.below(30) as u32
                },
            ),
        };
        let op = Op {
            kind,
            session,
            account: session,
            client_tag: rng.below(24) as u32,
            side: s,
            tick,
            qty,
            cookie: step,
        };
        let mut got = Vec::new();
        let k = book.apply(step, &op, &mut |e| got.push(e));
        let rop = RefOp {
            kind: match kind {
                OpKind::NewGtc => RefKind::Gtc,
                OpKind::NewIoc => RefKind::Ioc,
                OpKind::Cancel => RefKind::Cancel,
            },
            session,
            account: session,
            tag: op.client_tag,
            side: side(s),
            tick,
            qty,
            cookie: step,
        };
        let (traded, want) = reference.apply(step, &rop);
        let got: Vec<RefEvent> = got.iter().map(theirs).collect();
        let kind_ok =
            (k == StepKind::Cross) == traded && matches!(k, StepKind::Cross | StepKind::Improve);
        if !kind_ok || got != want {
            return Err(format!(
                "step {step} op {op:?}: engine {k:?} {got:?}, reference traded {traded} {want:?}"
            ));
        }
        if book.len() != reference.len() {
            return Err(format!(
                "step {step}: {} resting vs {}",
                book.len(),
                reference.len()
            ));
        }
        crosses += u64::from(traded);
        events += want.len() as u64;
    }
    Ok((crosses, events))
}

#[test]
fn the_engine_book_and_the_reference_book_agree_step_by_step() {
    let mut crosses = 0;
    for seed in 0..50 {
        let (c, _) = run(seed, 2_000, 1 << 16).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        crosses += c;
    }
    assert!(crosses > 10_000, "the ops crossed: {crosses}");
}

#[test]
fn they_agree_when_the_book_is_full() {
    for seed in 0..50 {
        run(seed, 2_000, 6).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    #[test]
    fn they_agree_on_any_seed(seed in any::<u64>(), max in 1u32..64) {
        prop_assert_eq!(run(seed, 500, max).map(|_| ()), Ok(()));
    }
}
