//! The BBO core's order book (missing-chapters §3): every resting order, price then time
//! priority (time = the StepId that rested it), Limit GTC, IOC and Cancel, one step per op.
//!
//! Determinism (INV-DET): the book's behaviour depends only on the sequence of ops and StepIds.
//! Nothing iterates a hash map for a decision; the only map keyed by a hash is the
//! `(session, client_tag)` index, used for exact lookups, with a fixed-key hasher.
//!
//! # Hot path
//! Orders live in a slab allocated up front (`BookConfig::max_orders`) with a free list; a
//! price level is an intrusive FIFO of slab indices. New price levels and index entries allocate
//! in the `BTreeMap`/`HashMap` (amortised); a fixed-size, allocation-free level table is the
//! planned refinement and the `bench` crate's book benchmark is the gate for it.

use std::collections::{BTreeMap, HashMap};

use vyrn_wire::StepKind;

/// Ticks are signed prices in the book's tick unit.
pub type Tick = i32;
/// Quantities in lots.
pub type Qty = u32;

const NIL: u32 = u32::MAX;

/// Side of an order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    /// Buy.
    Buy,
    /// Sell.
    Sell,
}

impl Side {
    /// The other side.
    pub fn opposite(self) -> Side {
        match self {
            Side::Buy => Side::Sell,
            Side::Sell => Side::Buy,
        }
    }
}

/// What an op asks of the book.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OpKind {
    /// Limit, good till cancelled: trade what crosses, rest the remainder.
    NewGtc,
    /// Limit, immediate or cancel: trade what crosses, the remainder is out.
    NewIoc,
    /// Cancel the session's live order with this `client_tag`.
    Cancel,
}

/// One op forwarded by a lane (07 §4.2): already parsed and risk-checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Op {
    /// New GTC, New IOC or Cancel.
    pub kind: OpKind,
    /// Session that sent it.
    pub session: u32,
    /// Account the session trades for.
    pub account: u32,
    /// The client's name for the order (a Cancel names its target).
    pub client_tag: u32,
    /// Side (ignored for a Cancel).
    pub side: Side,
    /// Limit price (0 for a Cancel).
    pub tick: Tick,
    /// Quantity (0 for a Cancel).
    pub qty: Qty,
    /// The lane's handle for the order (slot, packet, message), opaque to the book and returned
    /// in every event about the order, so a lane keeps no per-order map.
    pub cookie: u64,
}

/// Why the book refused an op.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BookReject {
    /// A Cancel named no live order of its session.
    UnknownOrder,
    /// A New reused the `client_tag` of the session's live order.
    DuplicateTag,
    /// A New with quantity 0.
    BadQty,
    /// The book holds `max_orders` resting orders.
    BookFull,
}

/// What a step did, in order, for the TX cores and the lanes (07 §4.2: fills go out tagged with
/// their step; every other outcome is a lane response).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// One side of a trade. The taker's and the maker's fills of one trade are adjacent, taker
    /// first; `price` is the maker's tick.
    Fill {
        /// Session of this side.
        session: u32,
        /// Account of this side.
        account: u32,
        /// This side's order.
        client_tag: u32,
        /// This side's side.
        side: Side,
        /// Trade price.
        price: Tick,
        /// Traded quantity.
        qty: Qty,
        /// Open quantity of this side's order after the trade.
        leaves: Qty,
        /// True for the resting (maker) side.
        maker: bool,
        /// This side's order cookie.
        cookie: u64,
    },
    /// A New's remainder rested in the book.
    Rested {
        /// Session.
        session: u32,
        /// Order.
        client_tag: u32,
        /// Order cookie.
        cookie: u64,
        /// Resting quantity.
        qty: Qty,
    },
    /// An IOC's remainder that did not trade.
    Out {
        /// Session.
        session: u32,
        /// Order.
        client_tag: u32,
        /// Order cookie.
        cookie: u64,
        /// Order side.
        side: Side,
        /// Quantity that did not trade.
        qty: Qty,
    },
    /// A Cancel removed a live order.
    Cancelled {
        /// Session.
        session: u32,
        /// Order.
        client_tag: u32,
        /// The cancelled order's cookie.
        cookie: u64,
        /// The cancelled order's side.
        side: Side,
        /// Quantity that was open.
        qty: Qty,
    },
    /// The book refused the op.
    Rejected {
        /// Session.
        session: u32,
        /// Order.
        client_tag: u32,
        /// Why.
        reason: BookReject,
    },
}

/// Limits of a book.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BookConfig {
    /// Most resting orders; the slab is allocated for this many.
    pub max_orders: u32,
}

impl Default for BookConfig {
    fn default() -> Self {
        BookConfig {
            max_orders: 1 << 16,
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Order {
    session: u32,
    account: u32,
    client_tag: u32,
    side: Side,
    tick: Tick,
    open: Qty,
    time: u64,
    cookie: u64,
    prev: u32,
    next: u32,
}

#[derive(Debug, Clone, Copy)]
struct Level {
    head: u32,
    tail: u32,
    qty: u64,
    orders: u32,
}

use crate::hash::SeededState as FixedHasher;

/// A resting order as seen from outside (snapshots, tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RestingOrder {
    /// Session.
    pub session: u32,
    /// Account.
    pub account: u32,
    /// Order.
    pub client_tag: u32,
    /// Side.
    pub side: Side,
    /// Price.
    pub tick: Tick,
    /// Open quantity.
    pub open: Qty,
    /// StepId that rested it.
    pub time: u64,
    /// The lane's cookie.
    pub cookie: u64,
}

/// The order book.
#[derive(Debug)]
pub struct Book {
    orders: Vec<Order>,
    free: Vec<u32>,
    bids: BTreeMap<Tick, Level>,
    asks: BTreeMap<Tick, Level>,
    index: HashMap<(u32, u32), u32, FixedHasher>,
    cfg: BookConfig,
    /// Cached best bid and ask ticks (kept in step with the level maps), so the kind of a
    /// step is known in O(1) before any fill.
    top: (Option<Tick>, Option<Tick>),
}

impl Book {
    /// An empty book.
    pub fn new(cfg: BookConfig) -> Self {
        let n = cfg.max_orders as usize;
        Book {
            orders: Vec::with_capacity(n),
            free: Vec::with_capacity(n),
            top: (None, None),
            bids: BTreeMap::new(),
            asks: BTreeMap::new(),
            index: HashMap::with_capacity_and_hasher(n, FixedHasher::default()),
            cfg,
        }
    }

    /// Best bid (highest buy tick) and its total quantity.
    pub fn best_bid(&self) -> Option<(Tick, u64)> {
        self.bids.last_key_value().map(|(&t, l)| (t, l.qty))
    }

    /// Best ask (lowest sell tick) and its total quantity.
    pub fn best_ask(&self) -> Option<(Tick, u64)> {
        self.asks.first_key_value().map(|(&t, l)| (t, l.qty))
    }

    /// Resting orders.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// No resting order.
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// The session's live order with this tag, if any.
    pub fn get(&self, session: u32, client_tag: u32) -> Option<RestingOrder> {
        self.index
            .get(&(session, client_tag))
            .map(|&i| self.view(i))
    }

    fn view(&self, i: u32) -> RestingOrder {
        let o = &self.orders[i as usize];
        RestingOrder {
            session: o.session,
            account: o.account,
            client_tag: o.client_tag,
            side: o.side,
            tick: o.tick,
            open: o.open,
            time: o.time,
            cookie: o.cookie,
        }
    }

    /// Every resting order in canonical order: bids from the best price down, then asks from the
    /// best price up, each level in time priority (the order a snapshot writes them, 07 §7.5).
    pub fn orders(&self) -> Vec<RestingOrder> {
        let mut v = Vec::with_capacity(self.len());
        for l in self.bids.values().rev().chain(self.asks.values()) {
            let mut i = l.head;
            while i != NIL {
                v.push(self.view(i));
                i = self.orders[i as usize].next;
            }
        }
        v
    }

    /// Apply one op as step `step` (missing-chapters §3), reporting what happened to `out` in
    /// order. Returns the step's kind: `Cross` when the op traded, `Improve` otherwise (it rested,
    /// cancelled, or was refused — the book's only other outcome; see `docs/engine.md`).
    pub fn apply(&mut self, step: u64, op: &Op, out: &mut impl FnMut(Event)) -> StepKind {
        match op.kind {
            OpKind::Cancel => {
                self.cancel(op, out);
                StepKind::Improve
            }
            OpKind::NewGtc | OpKind::NewIoc => self.new_order(step, op, out),
        }
    }

    /// The kind `apply` will return for `op`, decided before any fill (07 §4.2: the StepRecord
    /// is pushed as soon as kind, src and cut are fixed): `Cross` iff the op is a valid New that
    /// meets the best opposite price.
    pub fn kind_of(&self, op: &Op) -> StepKind {
        if op.kind == OpKind::Cancel
            || op.qty == 0
            || self.index.contains_key(&(op.session, op.client_tag))
        {
            return StepKind::Improve;
        }
        let crosses = match op.side {
            Side::Buy => self
                .asks
                .first_key_value()
                .is_some_and(|(&t, _)| t <= op.tick),
            Side::Sell => self
                .bids
                .last_key_value()
                .is_some_and(|(&t, _)| t >= op.tick),
        };
        if crosses {
            StepKind::Cross
        } else {
            StepKind::Improve
        }
    }

    /// Put a resting order back at the tail of its level (snapshot restore, 07 §7.5). Orders
    /// must come in canonical order (`orders()`), so each level's FIFO is rebuilt as it was.
    /// Refuses an order that would cross the book, a duplicate `(session, client_tag)`, a zero
    /// quantity, or a full book.
    pub fn restore(&mut self, o: &RestingOrder) -> Result<(), &'static str> {
        if o.open == 0 {
            return Err("resting order with zero quantity");
        }
        if self.index.contains_key(&(o.session, o.client_tag)) {
            return Err("duplicate resting order");
        }
        if self.index.len() >= self.cfg.max_orders as usize {
            return Err("more resting orders than max_orders");
        }
        let op = Op {
            kind: OpKind::NewGtc,
            session: o.session,
            account: o.account,
            client_tag: o.client_tag,
            side: o.side,
            tick: o.tick,
            qty: o.open,
            cookie: o.cookie,
        };
        if self.kind_of(&op) == StepKind::Cross {
            return Err("resting order crosses the book");
        }
        self.rest(o.time, &op, o.open);
        Ok(())
    }

    fn reject(op: &Op, reason: BookReject, out: &mut impl FnMut(Event)) {
        out(Event::Rejected {
            session: op.session,
            client_tag: op.client_tag,
            reason,
        });
    }

    fn cancel(&mut self, op: &Op, out: &mut impl FnMut(Event)) {
        let Some(i) = self.index.remove(&(op.session, op.client_tag)) else {
            return Self::reject(op, BookReject::UnknownOrder, out);
        };
        let (qty, cookie, side) = {
            let o = &self.orders[i as usize];
            (o.open, o.cookie, o.side)
        };
        self.unlink(i);
        out(Event::Cancelled {
            session: op.session,
            client_tag: op.client_tag,
            cookie,
            side,
            qty,
        });
    }

    fn new_order(&mut self, step: u64, op: &Op, out: &mut impl FnMut(Event)) -> StepKind {
        if op.qty == 0 {
            Self::reject(op, BookReject::BadQty, out);
            return StepKind::Improve;
        }
        if self.index.contains_key(&(op.session, op.client_tag)) {
            Self::reject(op, BookReject::DuplicateTag, out);
            return StepKind::Improve;
        }
        let mut left = op.qty;
        let mut traded = false;
        while left > 0 {
            let best = match op.side {
                Side::Buy => self.asks.first_key_value().map(|(&t, l)| (t, l.head)),
                Side::Sell => self.bids.last_key_value().map(|(&t, l)| (t, l.head)),
            };
            let Some((tick, head)) = best else { break };
            let crosses = match op.side {
                Side::Buy => tick <= op.tick,
                Side::Sell => tick >= op.tick,
            };
            if !crosses {
                break;
            }
            let m = &mut self.orders[head as usize];
            let q = left.min(m.open);
            m.open -= q;
            left -= q;
            traded = true;
            let (m_open, m_session, m_account, m_tag, m_side, m_cookie) =
                (m.open, m.session, m.account, m.client_tag, m.side, m.cookie);
            out(Event::Fill {
                session: op.session,
                account: op.account,
                client_tag: op.client_tag,
                side: op.side,
                price: tick,
                qty: q,
                leaves: left,
                maker: false,
                cookie: op.cookie,
            });
            out(Event::Fill {
                session: m_session,
                account: m_account,
                client_tag: m_tag,
                side: m_side,
                price: tick,
                qty: q,
                leaves: m_open,
                maker: true,
                cookie: m_cookie,
            });
            if let Some(lvl) = self.side_mut(m_side).get_mut(&tick) {
                lvl.qty -= q as u64;
            }
            if m_open == 0 {
                self.index.remove(&(m_session, m_tag));
                self.unlink(head);
            }
        }
        if left > 0 {
            match op.kind {
                OpKind::NewIoc => out(Event::Out {
                    session: op.session,
                    client_tag: op.client_tag,
                    cookie: op.cookie,
                    side: op.side,
                    qty: left,
                }),
                _ => {
                    if self.index.len() >= self.cfg.max_orders as usize {
                        // Whatever traded stands; the remainder cannot rest.
                        out(Event::Out {
                            session: op.session,
                            client_tag: op.client_tag,
                            cookie: op.cookie,
                            side: op.side,
                            qty: left,
                        });
                        Self::reject(op, BookReject::BookFull, out);
                    } else {
                        self.rest(step, op, left);
                        out(Event::Rested {
                            session: op.session,
                            client_tag: op.client_tag,
                            cookie: op.cookie,
                            qty: left,
                        });
                    }
                }
            }
        }
        if traded {
            StepKind::Cross
        } else {
            StepKind::Improve
        }
    }

    fn side_mut(&mut self, side: Side) -> &mut BTreeMap<Tick, Level> {
        match side {
            Side::Buy => &mut self.bids,
            Side::Sell => &mut self.asks,
        }
    }

    fn rest(&mut self, step: u64, op: &Op, qty: Qty) {
        let o = Order {
            session: op.session,
            account: op.account,
            client_tag: op.client_tag,
            side: op.side,
            tick: op.tick,
            open: qty,
            time: step,
            cookie: op.cookie,
            prev: NIL,
            next: NIL,
        };
        let i = match self.free.pop() {
            Some(i) => {
                self.orders[i as usize] = o;
                i
            }
            None => {
                self.orders.push(o);
                (self.orders.len() - 1) as u32
            }
        };
        let (side, tick) = (op.side, op.tick);
        match side {
            Side::Buy if self.top.0.is_none_or(|t| tick > t) => self.top.0 = Some(tick),
            Side::Sell if self.top.1.is_none_or(|t| tick < t) => self.top.1 = Some(tick),
            _ => {}
        }
        let lvl = self.side_mut(side).entry(tick).or_insert(Level {
            head: NIL,
            tail: NIL,
            qty: 0,
            orders: 0,
        });
        let tail = lvl.tail;
        lvl.tail = i;
        if lvl.head == NIL {
            lvl.head = i;
        }
        lvl.qty += qty as u64;
        lvl.orders += 1;
        if tail != NIL {
            self.orders[tail as usize].next = i;
            self.orders[i as usize].prev = tail;
        }
        self.index.insert((op.session, op.client_tag), i);
    }

    /// Remove order `i` from its level (and the level if it empties) and free its slot. The
    /// caller has already removed it from the index.
    fn unlink(&mut self, i: u32) {
        let o = self.orders[i as usize];
        if o.prev != NIL {
            self.orders[o.prev as usize].next = o.next;
        }
        if o.next != NIL {
            self.orders[o.next as usize].prev = o.prev;
        }
        let levels = self.side_mut(o.side);
        if let Some(lvl) = levels.get_mut(&o.tick) {
            if lvl.head == i {
                lvl.head = o.next;
            }
            if lvl.tail == i {
                lvl.tail = o.prev;
            }
            lvl.orders -= 1;
            lvl.qty -= o.open as u64;
            if lvl.orders == 0 {
                levels.remove(&o.tick);
                match o.side {
                    Side::Buy if self.top.0 == Some(o.tick) => {
                        self.top.0 = self.bids.last_key_value().map(|(&t, _)| t);
                    }
                    Side::Sell if self.top.1 == Some(o.tick) => {
                        self.top.1 = self.asks.first_key_value().map(|(&t, _)| t);
                    }
                    _ => {}
                }
            }
        }
        self.free.push(i);
    }

    /// Check the book's internal invariants (tests): never crossed at rest, level totals equal
    /// their orders, FIFO links consistent, time priority within a level, index complete.
    pub fn check(&self) -> Result<(), String> {
        let top = (
            self.bids.last_key_value().map(|(&t, _)| t),
            self.asks.first_key_value().map(|(&t, _)| t),
        );
        if top != self.top {
            return Err(format!("cached top {:?} != levels {:?}", self.top, top));
        }
        if let (Some((b, _)), Some((a, _))) = (self.best_bid(), self.best_ask()) {
            if b >= a {
                return Err(format!("crossed at rest: bid {b} >= ask {a}"));
            }
        }
        let mut n = 0usize;
        for (side, levels) in [(Side::Buy, &self.bids), (Side::Sell, &self.asks)] {
            for (&tick, l) in levels {
                let (mut i, mut prev, mut qty, mut cnt, mut last_time) =
                    (l.head, NIL, 0u64, 0u32, 0u64);
                while i != NIL {
                    let o = &self.orders[i as usize];
                    if o.side != side || o.tick != tick || o.prev != prev || o.open == 0 {
                        return Err(format!("bad order {i} at {side:?} {tick}"));
                    }
                    if o.time < last_time {
                        return Err(format!("time priority broken at {side:?} {tick}"));
                    }
                    if self.index.get(&(o.session, o.client_tag)) != Some(&i) {
                        return Err(format!("order {i} missing from the index"));
                    }
                    last_time = o.time;
                    qty += o.open as u64;
                    cnt += 1;
                    prev = i;
                    i = o.next;
                }
                if prev != l.tail || qty != l.qty || cnt != l.orders || cnt == 0 {
                    return Err(format!("level {side:?} {tick} totals disagree"));
                }
                n += cnt as usize;
            }
        }
        if n != self.index.len() {
            return Err(format!(
                "index holds {} orders, levels {n}",
                self.index.len()
            ));
        }
        Ok(())
    }
}

/// The cookie a lane gives each order it forwards (opaque to the book, returned in every event
/// about the order): lane u8 ‖ slot u16 ‖ pkt_seq u32 ‖ msg_index u8 — so neither the BBO core
/// (routing) nor the lane (risk, responses) needs a per-order map.
pub fn cookie(lane: u8, slot: u16, pkt_seq: u32, msg_index: u8) -> u64 {
    (lane as u64) << 56 | ((slot as u64) & 0xFFFF) << 40 | (pkt_seq as u64) << 8 | msg_index as u64
}

/// The lane of a cookie.
pub fn cookie_lane(c: u64) -> u8 {
    (c >> 56) as u8
}
