//! The reference matching engine (07 §11, issue's oracle): a plain price-time limit order book
//! written from missing-chapters §3 for clarity, not speed — a flat list of resting orders
//! scanned in full for every op. It shares no code with `vyrn_engine::book`; the simulator and
//! the tests run both on the same ops and compare every step's kind and events.
//!
//! The rules it implements (missing-chapters §3, docs/engine.md):
//! * price then time priority; time = the StepId that rested the order;
//! * a New trades against the best opposite orders whose price crosses its limit, each trade at
//!   the resting (maker) order's price, the taker's fill first, then the maker's;
//! * a GTC remainder rests, or, when the book is full, is out with a BOOK_FULL refusal saying
//!   why; an IOC remainder is out;
//! * a Cancel removes the session's live order with that client tag;
//! * refusals: a Cancel naming no live order of its session, a New reusing a live order's tag
//!   of its session, a New of quantity 0.

/// Side of an order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefSide {
    /// Buy.
    Buy,
    /// Sell.
    Sell,
}

/// What an op asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefKind {
    /// Limit, good till cancelled.
    Gtc,
    /// Limit, immediate or cancel.
    Ioc,
    /// Cancel the session's order with this tag.
    Cancel,
}

/// One op, as the lane forwards it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RefOp {
    /// What it asks.
    pub kind: RefKind,
    /// Session.
    pub session: u32,
    /// Account.
    pub account: u32,
    /// The client's tag (a Cancel names its target).
    pub tag: u32,
    /// Side.
    pub side: RefSide,
    /// Limit price.
    pub tick: i32,
    /// Quantity.
    pub qty: u32,
    /// The lane's handle, returned in every event about the order.
    pub cookie: u64,
}

/// Why the book refused an op.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefReject {
    /// A Cancel named no live order of its session.
    UnknownOrder,
    /// A New reused the tag of its session's live order.
    DuplicateTag,
    /// A New of quantity 0.
    BadQty,
    /// A GTC remainder found the book full (it is out, and this says why).
    BookFull,
}

/// What a step did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefEvent {
    /// One side of a trade.
    Fill {
        /// Session of this side.
        session: u32,
        /// Its order's tag.
        tag: u32,
        /// Its side.
        side: RefSide,
        /// Trade price (the maker's).
        price: i32,
        /// Quantity traded.
        qty: u32,
        /// Its order's open quantity after the trade.
        leaves: u32,
        /// The resting side.
        maker: bool,
        /// Its order's cookie.
        cookie: u64,
    },
    /// A New's remainder rested.
    Rested {
        /// Session.
        session: u32,
        /// Tag.
        tag: u32,
        /// Quantity resting.
        qty: u32,
    },
    /// A remainder that did not trade and does not rest.
    Out {
        /// Session.
        session: u32,
        /// Tag.
        tag: u32,
        /// Quantity.
        qty: u32,
    },
    /// A Cancel removed an order.
    Cancelled {
        /// Session.
        session: u32,
        /// Tag.
        tag: u32,
        /// Quantity that was open.
        qty: u32,
    },
    /// The op was refused.
    Rejected {
        /// Session.
        session: u32,
        /// Tag.
        tag: u32,
        /// Why.
        why: RefReject,
    },
}

#[derive(Debug, Clone, Copy)]
struct Resting {
    session: u32,
    tag: u32,
    side: RefSide,
    tick: i32,
    open: u32,
    /// The StepId that rested it (time priority).
    step: u64,
    cookie: u64,
}

/// The reference book.
#[derive(Debug, Clone)]
pub struct RefBook {
    max_orders: usize,
    resting: Vec<Resting>,
}

impl RefBook {
    /// An empty book holding at most `max_orders` resting orders.
    pub fn new(max_orders: usize) -> Self {
        RefBook {
            max_orders,
            resting: Vec::new(),
        }
    }

    /// Resting orders.
    pub fn len(&self) -> usize {
        self.resting.len()
    }

    /// No resting order.
    pub fn is_empty(&self) -> bool {
        self.resting.is_empty()
    }

    /// Apply `op` as step `step`: whether it traded (a Cross) and what it did, in order.
    pub fn apply(&mut self, step: u64, op: &RefOp) -> (bool, Vec<RefEvent>) {
        let mut ev = Vec::new();
        let live = self
            .resting
            .iter()
            .position(|o| o.session == op.session && o.tag == op.tag);
        let reject = |why| RefEvent::Rejected {
            session: op.session,
            tag: op.tag,
            why,
        };
        if op.kind == RefKind::Cancel {
            match live {
                Some(i) => {
                    let o = self.resting.remove(i);
                    ev.push(RefEvent::Cancelled {
                        session: o.session,
                        tag: o.tag,
                        qty: o.open,
                    });
                }
                None => ev.push(reject(RefReject::UnknownOrder)),
            }
            return (false, ev);
        }
        if op.qty == 0 {
            ev.push(reject(RefReject::BadQty));
            return (false, ev);
        }
        if live.is_some() {
            ev.push(reject(RefReject::DuplicateTag));
            return (false, ev);
        }
        let mut left = op.qty;
        let mut traded = false;
        while left > 0 {
            // The best opposite order that crosses: best price, then earliest step.
            let best = self
                .resting
                .iter()
                .enumerate()
                .filter(|(_, o)| o.side != op.side)
                .filter(|(_, o)| match op.side {
                    RefSide::Buy => o.tick <= op.tick,
                    RefSide::Sell => o.tick >= op.tick,
                })
                .min_by_key(|(_, o)| {
                    let price = match op.side {
                        RefSide::Buy => i64::from(o.tick),
                        RefSide::Sell => -i64::from(o.tick),
                    };
                    (price, o.step)
                })
                .map(|(i, _)| i);
            let Some(i) = best else { break };
            let m = &mut self.resting[i];
            let q = left.min(m.open);
            left -= q;
            m.open -= q;
            traded = true;
            ev.push(RefEvent::Fill {
                session: op.session,
                tag: op.tag,
                side: op.side,
                price: m.tick,
                qty: q,
                leaves: left,
                maker: false,
                cookie: op.cookie,
            });
            ev.push(RefEvent::Fill {
                session: m.session,
                tag: m.tag,
                side: m.side,
                price: m.tick,
                qty: q,
                leaves: m.open,
                maker: true,
                cookie: m.cookie,
            });
            if m.open == 0 {
                self.resting.remove(i);
            }
        }
        if left > 0 {
            if op.kind == RefKind::Gtc && self.resting.len() < self.max_orders {
                self.resting.push(Resting {
                    session: op.session,
                    tag: op.tag,
                    side: op.side,
                    tick: op.tick,
                    open: left,
                    step,
                    cookie: op.cookie,
                });
                ev.push(RefEvent::Rested {
                    session: op.session,
                    tag: op.tag,
                    qty: left,
                });
            } else {
                ev.push(RefEvent::Out {
                    session: op.session,
                    tag: op.tag,
                    qty: left,
                });
                if op.kind == RefKind::Gtc {
                    ev.push(reject(RefReject::BookFull));
                }
            }
        }
        (traded, ev)
    }
}
