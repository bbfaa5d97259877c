//! The order mix: resting GTCs, crossing GTCs, cancels of live orders and IOCs, drawn with a
//! seeded generator so a run is reproducible.

use vyrn_nic::lossy::SplitMix64;
use vyrn_wire::msg::client::Side;

use crate::session::{OrderId, OrderReq};

/// What one drawn message is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OpKind {
    /// A GTC priced away from the touch: it rests.
    RestingGtc,
    /// A GTC priced through the touch: it trades, and its remainder rests.
    CrossingGtc,
    /// A Cancel of one of this session's live resting orders.
    Cancel,
    /// An IOC priced through the touch.
    Ioc,
}

/// Weights of the four kinds (any scale). The default is the engine benchmark's peak mix:
/// 55% resting, 25% crossing, 10% cancels, 10% IOC (`docs/engine.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mix {
    /// Weight of [`OpKind::RestingGtc`].
    pub resting_gtc: u32,
    /// Weight of [`OpKind::CrossingGtc`].
    pub crossing_gtc: u32,
    /// Weight of [`OpKind::Cancel`].
    pub cancel: u32,
    /// Weight of [`OpKind::Ioc`].
    pub ioc: u32,
}

impl Default for Mix {
    fn default() -> Self {
        Mix {
            resting_gtc: 55,
            crossing_gtc: 25,
            cancel: 10,
            ioc: 10,
        }
    }
}

impl Mix {
    fn total(&self) -> u64 {
        self.resting_gtc as u64 + self.crossing_gtc as u64 + self.cancel as u64 + self.ioc as u64
    }

    /// The share of `kind`, 0..=1.
    pub fn share(&self, kind: OpKind) -> f64 {
        let w = match kind {
            OpKind::RestingGtc => self.resting_gtc,
            OpKind::CrossingGtc => self.crossing_gtc,
            OpKind::Cancel => self.cancel,
            OpKind::Ioc => self.ioc,
        };
        w as f64 / self.total().max(1) as f64
    }
}

/// Prices and sizes around a fixed mid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prices {
    /// Mid price, ticks.
    pub mid: i32,
    /// Resting orders sit 1..=depth ticks away from the mid.
    pub depth: i32,
    /// Crossing orders and IOCs are priced this far through the mid.
    pub through: i32,
    /// Quantities are drawn from 1..=qty_max.
    pub qty_max: u32,
}

impl Default for Prices {
    fn default() -> Self {
        Prices {
            mid: 10_000,
            depth: 20,
            through: 5,
            qty_max: 10,
        }
    }
}

/// Draws messages from a [`Mix`] with a seeded generator.
#[derive(Debug, Clone)]
pub struct OrderGen {
    rng: SplitMix64,
    mix: Mix,
    prices: Prices,
    /// Cancels drawn with no live order to cancel, sent as resting GTCs instead.
    pub cancel_fallbacks: u64,
}

impl OrderGen {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64, mix: Mix, prices: Prices) -> Self {
        assert!(mix.total() > 0, "a mix needs a positive weight");
        OrderGen {
            rng: SplitMix64::new(seed),
            mix,
            prices,
            cancel_fallbacks: 0,
        }
    }

    fn below(&mut self, n: u64) -> u64 {
        self.rng.next_u64() % n.max(1)
    }

    /// Draw the next kind.
    pub fn kind(&mut self) -> OpKind {
        let m = self.mix;
        let mut x = self.below(m.total());
        for (w, k) in [
            (m.resting_gtc, OpKind::RestingGtc),
            (m.crossing_gtc, OpKind::CrossingGtc),
            (m.cancel, OpKind::Cancel),
            (m.ioc, OpKind::Ioc),
        ] {
            if x < w as u64 {
                return k;
            }
            x -= w as u64;
        }
        unreachable!("x < total")
    }

    /// Draw one message. A Cancel takes a random order out of `live` (the session's resting
    /// orders); with none it becomes a resting GTC.
    pub fn next(&mut self, live: &mut Vec<OrderId>) -> (OpKind, OrderReq) {
        let mut kind = self.kind();
        if kind == OpKind::Cancel && live.is_empty() {
            self.cancel_fallbacks += 1;
            kind = OpKind::RestingGtc;
        }
        let side = if self.below(2) == 0 {
            Side::Buy
        } else {
            Side::Sell
        };
        let sign = if side == Side::Buy { 1 } else { -1 };
        let p = self.prices;
        let qty = 1 + self.below(p.qty_max as u64) as u32;
        let req = match kind {
            OpKind::RestingGtc => OrderReq::Gtc {
                side,
                tick: p.mid - sign * (1 + self.below(p.depth as u64) as i32),
                qty,
            },
            OpKind::CrossingGtc => OrderReq::Gtc {
                side,
                tick: p.mid + sign * p.through,
                qty,
            },
            OpKind::Ioc => OrderReq::Ioc {
                side,
                tick: p.mid + sign * p.through,
                qty,
            },
            OpKind::Cancel => {
                let k = self.below(live.len() as u64) as usize;
                OrderReq::Cancel {
                    order: live.swap_remove(k),
                }
            }
        };
        (kind, req)
    }
}
