//! [`Lossy`]: a [`Port`] over any port that drops, duplicates and reorders packets with seeded,
//! reproducible randomness, for tests of everything above the NIC (NACK, repair, two-path
//! merge).
//!
//! Faults apply on transmit (what this port sends reaches the wire damaged: every receiver of
//! the path sees the same loss) and/or on receive (only this receiver sees it), each side with
//! its own [`LossConfig`] and its own generator. Per packet the generator draws exactly three
//! numbers, whatever happens, so the faults depend only on the seed and on the order of the
//! packets offered, never on timing or batch boundaries: the same seed and the same packets
//! give the same output, packet for packet.
//!
//! Per packet, in this order:
//! 1. **drop** with probability `drop`;
//! 2. else **hold back** with probability `reorder` (if fewer than `max_held` are held): the
//!    packet is released right after the next `reorder_after` packets that pass;
//! 3. else **pass**, followed by a **duplicate** with probability `dup`; then release the held
//!    packets that are due.
//!
//! Held packets that no later traffic releases stay held until [`Lossy::release_held`];
//! `flush` does not release them (otherwise a per-frame fence would undo every reorder).
//!
//! Packets are copied once into the wrapper's own fixed buffers (allocated in [`Lossy::new`]),
//! which is what lets it hold and duplicate them. [`FaultStats`] says what it did.

use crate::queue::PacketQueue;
use crate::{Dest, NicError, Port, PortCounters, RxBatch, RxMeta, RxPacket, TxPacket, TxStamp};

/// Packets pulled from (or pushed to) the inner port per call.
const CHUNK: usize = 32;

/// The splitmix64 generator: tiny, fast, and good enough for fault injection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator started from `seed`.
    pub const fn new(seed: u64) -> Self {
        SplitMix64 { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// Fault settings of one direction of a [`Lossy`] port.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LossConfig {
    /// Seed of this direction's generator.
    pub seed: u64,
    /// Probability of dropping a packet, `0.0..=1.0`.
    pub drop: f64,
    /// Probability of sending a passing packet twice, `0.0..=1.0`.
    pub dup: f64,
    /// Probability of holding a packet back, `0.0..=1.0`.
    pub reorder: f64,
    /// A held packet is released right after this many later packets pass (≥ 1).
    pub reorder_after: u32,
    /// Most packets held at once (≥ 1 when `reorder` > 0).
    pub max_held: usize,
}

impl LossConfig {
    /// No faults.
    pub const NONE: LossConfig = LossConfig {
        seed: 0,
        drop: 0.0,
        dup: 0.0,
        reorder: 0.0,
        reorder_after: 1,
        max_held: 8,
    };

    /// No faults yet, generator seeded with `seed`; add faults with the `with_` methods.
    pub const fn seeded(seed: u64) -> Self {
        LossConfig { seed, ..Self::NONE }
    }

    /// Drop each packet with probability `p`.
    pub const fn with_drop(mut self, p: f64) -> Self {
        self.drop = p;
        self
    }

    /// Duplicate each passing packet with probability `p`.
    pub const fn with_dup(mut self, p: f64) -> Self {
        self.dup = p;
        self
    }

    /// Hold each packet back with probability `p`, releasing it after the next `after` packets.
    pub const fn with_reorder(mut self, p: f64, after: u32) -> Self {
        self.reorder = p;
        self.reorder_after = after;
        self
    }

    /// True when this config injects nothing.
    pub fn is_none(&self) -> bool {
        self.drop <= 0.0 && self.dup <= 0.0 && self.reorder <= 0.0
    }

    fn validate(&self) -> Result<(), NicError> {
        let ok = |p: f64| (0.0..=1.0).contains(&p);
        if !ok(self.drop) || !ok(self.dup) || !ok(self.reorder) {
            return Err(NicError::Config("loss probabilities must be in 0.0..=1.0"));
        }
        if self.reorder > 0.0 && (self.reorder_after == 0 || self.max_held == 0) {
            return Err(NicError::Config(
                "reorder needs reorder_after >= 1 and max_held >= 1",
            ));
        }
        if self.max_held > 1024 {
            return Err(NicError::Config("max_held must be <= 1024"));
        }
        Ok(())
    }
}

/// What one direction of a [`Lossy`] port did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FaultStats {
    /// Packets offered to the fault stage.
    pub seen: u64,
    /// Packets dropped.
    pub dropped: u64,
    /// Extra copies sent.
    pub duplicated: u64,
    /// Packets held back (each is released later, out of order).
    pub reordered: u64,
    /// Held packets released so far.
    pub released: u64,
    /// Packets passed on (originals, duplicates and released ones).
    pub emitted: u64,
}

/// `p` as a threshold for a uniform `u64`: a draw below it is a hit.
fn threshold(p: f64) -> u64 {
    if p <= 0.0 {
        0
    } else if p >= 1.0 {
        u64::MAX
    } else {
        (p * 18_446_744_073_709_551_616.0) as u64
    }
}

fn hit(draw: u64, t: u64) -> bool {
    draw < t || t == u64::MAX
}

/// One direction's fault logic and its buffers.
struct Stage<M> {
    rng: SplitMix64,
    t_drop: u64,
    t_dup: u64,
    t_reorder: u64,
    after: u64,
    /// Packets that passed so far; a held packet is due when this reaches its mark.
    passed: u64,
    out: PacketQueue<M>,
    held: PacketQueue<(M, u64)>,
    stats: FaultStats,
}

impl<M: Copy + Default> Stage<M> {
    fn new(cfg: &LossConfig, out_capacity: usize, slot_size: usize) -> Self {
        let held_capacity = if cfg.reorder > 0.0 { cfg.max_held } else { 0 };
        Stage {
            rng: SplitMix64::new(cfg.seed),
            t_drop: threshold(cfg.drop),
            t_dup: threshold(cfg.dup),
            t_reorder: threshold(cfg.reorder),
            after: u64::from(cfg.reorder_after.max(1)),
            passed: 0,
            out: PacketQueue::new(out_capacity + held_capacity, slot_size),
            held: PacketQueue::new(held_capacity, slot_size),
            stats: FaultStats::default(),
        }
    }

    /// Room for the worst case of one offer: the packet, its duplicate and every held packet.
    fn has_room(&self) -> bool {
        self.out.free() >= 2 + self.held.len()
    }

    /// Run one packet through the faults. False (and nothing drawn) when there is no room.
    fn offer(&mut self, data: &[u8], meta: M) -> bool {
        if !self.has_room() {
            return false;
        }
        let (d, r, u) = (
            self.rng.next_u64(),
            self.rng.next_u64(),
            self.rng.next_u64(),
        );
        self.stats.seen += 1;
        if hit(d, self.t_drop) {
            self.stats.dropped += 1;
            return true;
        }
        if hit(r, self.t_reorder) && self.held.push(data, (meta, self.passed + self.after)) {
            self.stats.reordered += 1;
            return true;
        }
        self.emit(data, meta);
        if hit(u, self.t_dup) {
            self.emit(data, meta);
            self.stats.duplicated += 1;
        }
        self.passed += 1;
        self.release_due(false);
        true
    }

    fn emit(&mut self, data: &[u8], meta: M) {
        // has_room() reserved the space.
        let ok = self.out.push(data, meta);
        debug_assert!(ok);
        self.stats.emitted += u64::from(ok);
    }

    /// Move held packets that are due (or all, with `all`) to the output, oldest first.
    fn release_due(&mut self, all: bool) -> usize {
        let mut n = 0;
        while let Some((data, (meta, due))) = self.held.front() {
            if (!all && due > self.passed) || self.out.free() == 0 {
                break;
            }
            let ok = self.out.push(data, meta);
            debug_assert!(ok);
            self.held.pop_n(1);
            self.stats.released += 1;
            self.stats.emitted += 1;
            n += 1;
        }
        n
    }
}

/// A [`Port`] that injects seeded faults around an inner port. See the module docs.
pub struct Lossy<P> {
    inner: P,
    tx: Stage<Dest>,
    rx: Stage<RxMeta>,
    pull: RxBatch,
    counters: PortCounters,
}

impl<P: std::fmt::Debug> std::fmt::Debug for Lossy<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lossy")
            .field("inner", &self.inner)
            .field("tx", &self.tx.stats)
            .field("rx", &self.rx.stats)
            .field("counters", &self.counters)
            .finish()
    }
}

impl<P: Port> Lossy<P> {
    /// Wrap `inner`, with faults `tx` on what it sends and `rx` on what it receives
    /// ([`LossConfig::NONE`] for a clean direction).
    pub fn new(inner: P, tx: LossConfig, rx: LossConfig) -> Result<Self, NicError> {
        tx.validate()?;
        rx.validate()?;
        let slot = inner.max_payload();
        Ok(Lossy {
            tx: Stage::new(&tx, 2 * CHUNK, slot),
            rx: Stage::new(&rx, 2 * CHUNK, slot),
            pull: RxBatch::new(CHUNK, slot),
            inner,
            counters: PortCounters::default(),
        })
    }

    /// Faults on transmit only.
    pub fn tx_only(inner: P, tx: LossConfig) -> Result<Self, NicError> {
        Self::new(inner, tx, LossConfig::NONE)
    }

    /// Faults on receive only.
    pub fn rx_only(inner: P, rx: LossConfig) -> Result<Self, NicError> {
        Self::new(inner, LossConfig::NONE, rx)
    }

    /// What the transmit side did.
    pub fn tx_stats(&self) -> FaultStats {
        self.tx.stats
    }

    /// What the receive side did.
    pub fn rx_stats(&self) -> FaultStats {
        self.rx.stats
    }

    /// Packets held back now, (transmit, receive).
    pub fn held(&self) -> (usize, usize) {
        (self.tx.held.len(), self.rx.held.len())
    }

    /// Release every held packet now (transmit side: towards the inner port; receive side: to
    /// the next receive call). Returns how many were released.
    pub fn release_held(&mut self) -> usize {
        let n = self.tx.release_due(true) + self.rx.release_due(true);
        self.drain_tx();
        n
    }

    /// The wrapped port (its counters are what reached the wire).
    pub fn inner(&self) -> &P {
        &self.inner
    }

    /// The wrapped port, mutably.
    pub fn inner_mut(&mut self) -> &mut P {
        &mut self.inner
    }

    /// Unwrap, discarding anything queued or held.
    pub fn into_inner(self) -> P {
        self.inner
    }

    /// Push queued transmit packets into the inner port until it pushes back.
    fn drain_tx(&mut self) {
        // Bounded: every pass removes at least one packet or stops.
        while !self.tx.out.is_empty() {
            let mut pkts = [TxPacket::new(&[]); CHUNK];
            let n = self.tx.out.len().min(CHUNK);
            for (i, slot) in pkts.iter_mut().enumerate().take(n) {
                if let Some((data, dest)) = self.tx.out.get(i) {
                    *slot = TxPacket { data, dest };
                }
            }
            match self.inner.send_batch(&pkts[..n]) {
                Ok(m) => {
                    let m = m.min(n);
                    self.tx.out.pop_n(m);
                    if m < n {
                        break;
                    }
                }
                Err(_) => {
                    // The caller was told this packet was accepted; the inner port refuses it
                    // for good (bad destination, OS error), so it is lost like on a wire.
                    self.tx.out.pop_n(1);
                    self.counters.tx_errors += 1;
                }
            }
        }
    }

    /// Pull one batch from the inner port through the receive faults, if nothing is queued.
    fn pull_rx(&mut self) -> Result<(), NicError> {
        if !self.rx.out.is_empty() {
            return Ok(());
        }
        self.inner.recv_batch(&mut self.pull)?;
        for p in self.pull.iter() {
            // out is empty and sized 2 × CHUNK + max_held, so every offer has room.
            let ok = self.rx.offer(p.data, p.meta);
            debug_assert!(ok);
        }
        Ok(())
    }

    /// Hand up to `max` queued receive packets to `f`; returns how many.
    fn deliver(&mut self, max: usize, f: &mut dyn FnMut(RxPacket<'_>)) -> usize {
        let n = self.rx.out.len().min(max);
        for i in 0..n {
            if let Some((data, meta)) = self.rx.out.get(i) {
                self.counters.rx_packets += 1;
                self.counters.rx_bytes += data.len() as u64;
                f(RxPacket { data, meta });
            }
        }
        self.rx.out.pop_n(n);
        n
    }
}

impl<P: Port> Port for Lossy<P> {
    fn max_payload(&self) -> usize {
        self.inner.max_payload()
    }

    fn wait_fd(&self) -> Option<std::os::fd::RawFd> {
        self.inner.wait_fd()
    }

    fn send_batch(&mut self, pkts: &[TxPacket<'_>]) -> Result<usize, NicError> {
        self.drain_tx();
        let max = self.inner.max_payload();
        let mut taken = 0usize;
        let mut bytes = 0u64;
        for p in pkts {
            if p.data.len() > max {
                if taken == 0 {
                    self.counters.tx_oversize += 1;
                    return Err(NicError::Oversize {
                        len: p.data.len(),
                        max,
                    });
                }
                break;
            }
            if !self.tx.offer(p.data, p.dest) {
                self.counters.tx_backpressure += 1;
                break;
            }
            taken += 1;
            bytes += p.data.len() as u64;
        }
        self.drain_tx();
        if taken > 0 {
            self.counters.tx_packets += taken as u64;
            self.counters.tx_bytes += bytes;
            self.counters.tx_calls += 1;
        }
        Ok(taken)
    }

    fn recv_batch(&mut self, batch: &mut RxBatch) -> Result<usize, NicError> {
        batch.clear();
        let room = batch.capacity();
        let mut truncated = 0u64;
        let mut push = |p: RxPacket<'_>| {
            if batch.push_copy(p.data, p.meta).is_err() {
                truncated += 1;
            }
        };
        // Queued packets first; pull more only when the queue ran dry and there is room.
        let mut n = self.deliver(room, &mut push);
        if n < room && self.rx.out.is_empty() {
            self.pull_rx()?;
            n += self.deliver(room - n, &mut push);
        }
        self.counters.rx_truncated += truncated;
        if n > 0 {
            self.counters.rx_calls += 1;
        }
        Ok(batch.len())
    }

    fn poll_recv(
        &mut self,
        max: usize,
        f: &mut dyn FnMut(RxPacket<'_>),
    ) -> Result<usize, NicError> {
        let mut n = self.deliver(max, f);
        if n < max && self.rx.out.is_empty() {
            self.pull_rx()?;
            n += self.deliver(max - n, f);
        }
        if n > 0 {
            self.counters.rx_calls += 1;
        }
        Ok(n)
    }

    /// Push every queued (not held) packet into the inner port, then flush it.
    fn flush(&mut self) -> Result<(), NicError> {
        self.drain_tx();
        if !self.tx.out.is_empty() {
            return Err(NicError::WouldBlock);
        }
        self.inner.flush()
    }

    fn last_tx(&self) -> TxStamp {
        self.inner.last_tx()
    }

    /// The wrapper's own view: packets accepted from and delivered to its caller.
    fn counters(&self) -> PortCounters {
        self.counters
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix64_reference_values() {
        // First outputs for seed 1234567 from the reference C implementation (Vigna).
        let mut r = SplitMix64::new(1_234_567);
        assert_eq!(r.next_u64(), 6_457_827_717_110_365_317);
        assert_eq!(r.next_u64(), 3_203_168_211_198_807_973);
        assert_eq!(r.next_u64(), 9_817_491_932_198_370_423);
    }

    #[test]
    fn thresholds_cover_the_ends() {
        assert_eq!(threshold(0.0), 0);
        assert_eq!(threshold(-1.0), 0);
        assert_eq!(threshold(1.0), u64::MAX);
        assert!(hit(u64::MAX, u64::MAX));
        assert!(!hit(0, 0));
        assert_eq!(threshold(0.5), 1 << 63);
    }

    #[test]
    fn invalid_configs_are_typed_errors() {
        for bad in [
            LossConfig::seeded(1).with_drop(1.5),
            LossConfig::seeded(1).with_dup(-0.1),
            LossConfig::seeded(1).with_drop(f64::NAN),
            LossConfig::seeded(1).with_reorder(0.1, 0),
        ] {
            assert!(
                matches!(bad.validate(), Err(NicError::Config(_))),
                "{bad:?}"
            );
        }
        assert!(LossConfig::NONE.is_none());
    }
}
