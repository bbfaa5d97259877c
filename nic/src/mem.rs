//! [`MemPort`]: two ports connected back to back by bounded in-memory queues, for
//! deterministic tests without sockets.
//!
//! What one port sends, the other receives, in order, with nothing lost: a full queue is
//! backpressure (`send_batch` returns fewer), never a drop. Destinations are ignored (the link
//! is point to point) and received packets carry no source address. Each port can live on its
//! own thread; the queues take one lock per batch, so this is a test device, not a hot path.

use crate::queue::PacketQueue;
use crate::{
    now_ns, NicError, Port, PortCounters, RxBatch, RxMeta, RxPacket, TsSource, TxPacket, TxStamp,
};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// Slots in each port's own receive pool (the most one `poll_recv` call delivers).
const POOL: usize = 64;

type Link = Arc<Mutex<PacketQueue<()>>>;

fn lock(link: &Link) -> MutexGuard<'_, PacketQueue<()>> {
    // A panic elsewhere while holding the lock leaves the queue consistent (every mutation is
    // a complete push or pop), so a poisoned lock is still usable.
    link.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One end of an in-memory link. Create both ends with [`MemPort::pair`].
pub struct MemPort {
    tx: Link,
    rx: Link,
    max_payload: usize,
    pool: RxBatch,
    counters: PortCounters,
    last_tx: TxStamp,
}

impl std::fmt::Debug for MemPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemPort")
            .field("max_payload", &self.max_payload)
            .field("counters", &self.counters)
            .finish()
    }
}

impl MemPort {
    /// Two connected ports. Each direction queues up to `capacity` packets of up to
    /// `max_payload` bytes (memory: `2 × capacity × max_payload`, allocated here).
    pub fn pair(capacity: usize, max_payload: usize) -> (MemPort, MemPort) {
        let ab: Link = Arc::new(Mutex::new(PacketQueue::new(capacity, max_payload)));
        let ba: Link = Arc::new(Mutex::new(PacketQueue::new(capacity, max_payload)));
        let a = MemPort::end(ab.clone(), ba.clone(), max_payload);
        let b = MemPort::end(ba, ab, max_payload);
        (a, b)
    }

    fn end(tx: Link, rx: Link, max_payload: usize) -> MemPort {
        MemPort {
            tx,
            rx,
            max_payload,
            pool: RxBatch::new(POOL, max_payload),
            counters: PortCounters::default(),
            last_tx: TxStamp::default(),
        }
    }

    /// Packets waiting for this port to receive them.
    pub fn pending(&self) -> usize {
        lock(&self.rx).len()
    }

    /// Move up to `limit` queued packets into `batch` (cleared first).
    fn recv_into(&mut self, batch: &mut RxBatch, limit: usize) -> usize {
        batch.clear();
        let limit = limit.min(batch.capacity());
        let mut q = lock(&self.rx);
        let ts = now_ns();
        let mut taken = 0usize;
        while batch.len() < limit {
            let Some((data, ())) = q.front() else { break };
            let meta = RxMeta {
                src: None,
                ts_ns: ts,
                ts_source: TsSource::User,
            };
            match batch.push_copy(data, meta) {
                Ok(()) => {
                    self.counters.rx_packets += 1;
                    self.counters.rx_bytes += data.len() as u64;
                }
                Err(NicError::Oversize { .. }) => self.counters.rx_truncated += 1,
                Err(_) => break,
            }
            q.pop_n(1);
            taken += 1;
        }
        if taken > 0 {
            self.counters.rx_calls += 1;
        }
        batch.len()
    }
}

impl Port for MemPort {
    fn max_payload(&self) -> usize {
        self.max_payload
    }

    fn send_batch(&mut self, pkts: &[TxPacket<'_>]) -> Result<usize, NicError> {
        let before = now_ns();
        let mut sent = 0usize;
        let mut bytes = 0u64;
        let mut bad = None;
        {
            let mut q = lock(&self.tx);
            for p in pkts {
                if p.data.len() > self.max_payload {
                    bad = Some(NicError::Oversize {
                        len: p.data.len(),
                        max: self.max_payload,
                    });
                    break;
                }
                if !q.push(p.data, ()) {
                    self.counters.tx_backpressure += 1;
                    break;
                }
                sent += 1;
                bytes += p.data.len() as u64;
            }
        }
        if sent > 0 {
            self.counters.tx_packets += sent as u64;
            self.counters.tx_bytes += bytes;
            self.counters.tx_calls += 1;
            self.last_tx = TxStamp {
                before_ns: before,
                after_ns: now_ns(),
                packets: u32::try_from(sent).unwrap_or(u32::MAX),
            };
            return Ok(sent);
        }
        match bad {
            Some(e) => {
                self.counters.tx_oversize += 1;
                Err(e)
            }
            None => Ok(0),
        }
    }

    fn recv_batch(&mut self, batch: &mut RxBatch) -> Result<usize, NicError> {
        Ok(self.recv_into(batch, usize::MAX))
    }

    fn poll_recv(
        &mut self,
        max: usize,
        f: &mut dyn FnMut(RxPacket<'_>),
    ) -> Result<usize, NicError> {
        // Copy out under the lock, then call `f` without it, so `f` may use the peer port.
        let mut pool = std::mem::replace(&mut self.pool, RxBatch::empty());
        let n = self.recv_into(&mut pool, max);
        for p in pool.iter() {
            f(p);
        }
        self.pool = pool;
        Ok(n)
    }

    /// A no-op: a packet is in the peer's queue as soon as `send_batch` returns.
    fn flush(&mut self) -> Result<(), NicError> {
        Ok(())
    }

    fn last_tx(&self) -> TxStamp {
        self.last_tx
    }

    fn counters(&self) -> PortCounters {
        self.counters
    }
}
