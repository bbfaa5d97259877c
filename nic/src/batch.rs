//! [`RxBatch`]: a caller-owned, fixed pool of receive buffers with one descriptor per packet.

use crate::{NicError, RxMeta, RxPacket, MAX_BATCH};

/// Largest slot an [`RxBatch`] gives a packet: the largest UDP payload over IPv4.
pub const MAX_SLOT: usize = 65_507;

#[derive(Debug, Clone, Copy, Default)]
struct Desc {
    slot: u32,
    len: u32,
    meta: RxMeta,
}

/// A fixed pool of `capacity` receive slots of `slot_size` bytes each, and the descriptors of
/// the packets a receive call put there.
///
/// Allocated once (`capacity × slot_size` bytes in one block) and reused for every receive:
/// `Port::recv_batch` clears it and fills it again. Packets are read with [`RxBatch::get`] or
/// [`RxBatch::iter`], in arrival order.
///
/// A backend that owns its buffers (DPDK, AF_XDP, the in-memory port) fills it with
/// [`RxBatch::push_copy`]; the UDP backend points `recvmmsg` at the slots directly.
pub struct RxBatch {
    buf: Box<[u8]>,
    slot_size: usize,
    descs: Box<[Desc]>,
    len: usize,
    /// Next slot not yet handed out; ≥ `len`, because a truncated datagram uses a slot but
    /// gets no descriptor.
    next_slot: usize,
}

impl std::fmt::Debug for RxBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RxBatch")
            .field("capacity", &self.capacity())
            .field("slot_size", &self.slot_size)
            .field("len", &self.len)
            .finish()
    }
}

impl RxBatch {
    /// A pool of `capacity` slots of `slot_size` bytes.
    ///
    /// `capacity` is clamped to `0..=MAX_BATCH` and `slot_size` to `0..=MAX_SLOT`; a batch with
    /// no slots receives nothing.
    pub fn new(capacity: usize, slot_size: usize) -> Self {
        let capacity = capacity.min(MAX_BATCH);
        let slot_size = slot_size.min(MAX_SLOT);
        RxBatch {
            buf: vec![0u8; capacity * slot_size].into_boxed_slice(),
            slot_size,
            descs: vec![Desc::default(); capacity].into_boxed_slice(),
            len: 0,
            next_slot: 0,
        }
    }

    /// A batch with no slots; allocates nothing.
    pub fn empty() -> Self {
        RxBatch {
            buf: Box::default(),
            slot_size: 0,
            descs: Box::default(),
            len: 0,
            next_slot: 0,
        }
    }

    /// Number of slots.
    pub fn capacity(&self) -> usize {
        self.descs.len()
    }

    /// Bytes per slot: the longest packet this batch stores.
    pub fn slot_size(&self) -> usize {
        self.slot_size
    }

    /// Packets in the batch.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when the batch holds no packet.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Slots not yet used since the last [`RxBatch::clear`].
    pub fn free_slots(&self) -> usize {
        self.capacity() - self.next_slot
    }

    /// Forget every packet (the bytes stay until overwritten).
    pub fn clear(&mut self) {
        self.len = 0;
        self.next_slot = 0;
    }

    /// Packet `i` in arrival order, or `None` past the end.
    pub fn get(&self, i: usize) -> Option<RxPacket<'_>> {
        if i >= self.len {
            return None;
        }
        let d = self.descs[i];
        let start = d.slot as usize * self.slot_size;
        Some(RxPacket {
            data: &self.buf[start..start + d.len as usize],
            meta: d.meta,
        })
    }

    /// The packets in arrival order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = RxPacket<'_>> + '_ {
        (0..self.len).map(move |i| {
            let d = self.descs[i];
            let start = d.slot as usize * self.slot_size;
            RxPacket {
                data: &self.buf[start..start + d.len as usize],
                meta: d.meta,
            }
        })
    }

    /// Copy `data` into the next free slot and add its descriptor.
    ///
    /// [`NicError::Oversize`] when `data` is longer than a slot, [`NicError::BatchFull`] when
    /// no slot is left; the batch is unchanged in both cases.
    pub fn push_copy(&mut self, data: &[u8], meta: RxMeta) -> Result<(), NicError> {
        if data.len() > self.slot_size {
            return Err(NicError::Oversize {
                len: data.len(),
                max: self.slot_size,
            });
        }
        if self.next_slot >= self.capacity() {
            return Err(NicError::BatchFull);
        }
        let slot = self.next_slot;
        let start = slot * self.slot_size;
        self.buf[start..start + data.len()].copy_from_slice(data);
        self.next_slot += 1;
        self.push_desc(slot, data.len(), meta);
        Ok(())
    }

    /// Index of the next free slot (for backends that let the kernel write the slots).
    pub(crate) fn next_slot(&self) -> usize {
        self.next_slot
    }

    /// Mark `n` more slots as used (the kernel wrote them).
    pub(crate) fn consume_slots(&mut self, n: usize) {
        debug_assert!(self.next_slot + n <= self.capacity());
        self.next_slot = (self.next_slot + n).min(self.capacity());
    }

    /// Raw pointer to the start of slot `slot`, for a receive syscall to write into.
    ///
    /// The caller guarantees `slot < capacity()`; the pointer is valid for `slot_size()` bytes
    /// while the batch is neither moved nor borrowed elsewhere.
    pub(crate) fn slot_ptr(&mut self, slot: usize) -> *mut u8 {
        debug_assert!(slot < self.capacity());
        self.buf.as_mut_ptr().wrapping_add(slot * self.slot_size)
    }

    /// Add a descriptor for `len` bytes already written into slot `slot`.
    pub(crate) fn push_desc(&mut self, slot: usize, len: usize, meta: RxMeta) {
        debug_assert!(slot < self.next_slot && len <= self.slot_size && self.len < self.capacity());
        if self.len >= self.capacity() {
            return;
        }
        self.descs[self.len] = Desc {
            slot: slot as u32,
            len: len as u32,
            meta,
        };
        self.len += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_copy_fills_then_refuses() {
        let mut b = RxBatch::new(2, 8);
        assert_eq!(b.push_copy(b"abc", RxMeta::default()), Ok(()));
        assert_eq!(
            b.push_copy(&[0u8; 9], RxMeta::default()),
            Err(NicError::Oversize { len: 9, max: 8 })
        );
        assert_eq!(b.push_copy(b"12345678", RxMeta::default()), Ok(()));
        assert_eq!(
            b.push_copy(b"x", RxMeta::default()),
            Err(NicError::BatchFull)
        );
        let got: Vec<&[u8]> = b.iter().map(|p| p.data).collect();
        assert_eq!(got, vec![&b"abc"[..], &b"12345678"[..]]);
        assert!(b.get(2).is_none());
        b.clear();
        assert!(b.is_empty());
        assert_eq!(b.free_slots(), 2);
    }

    #[test]
    fn sizes_are_clamped_not_panicking() {
        let b = RxBatch::new(1, usize::MAX);
        assert_eq!(b.slot_size(), MAX_SLOT);
        let b = RxBatch::new(usize::MAX, 1);
        assert_eq!(b.capacity(), MAX_BATCH);
        let mut e = RxBatch::empty();
        assert_eq!(
            e.push_copy(b"", RxMeta::default()),
            Err(NicError::BatchFull)
        );
    }
}
