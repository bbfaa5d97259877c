//! A bounded FIFO of owned packet copies, allocated once: the storage of the in-memory port
//! and of the lossy wrapper.

/// A ring of `capacity` slots of `slot_size` bytes, each with a length and a metadata value.
pub(crate) struct PacketQueue<M> {
    buf: Box<[u8]>,
    slot_size: usize,
    lens: Box<[u32]>,
    metas: Box<[M]>,
    head: usize,
    len: usize,
}

impl<M> std::fmt::Debug for PacketQueue<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PacketQueue")
            .field("capacity", &self.lens.len())
            .field("slot_size", &self.slot_size)
            .field("len", &self.len)
            .finish()
    }
}

impl<M: Copy + Default> PacketQueue<M> {
    pub(crate) fn new(capacity: usize, slot_size: usize) -> Self {
        PacketQueue {
            buf: vec![0u8; capacity * slot_size].into_boxed_slice(),
            slot_size,
            lens: vec![0u32; capacity].into_boxed_slice(),
            metas: vec![M::default(); capacity].into_boxed_slice(),
            head: 0,
            len: 0,
        }
    }

    pub(crate) fn capacity(&self) -> usize {
        self.lens.len()
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub(crate) fn free(&self) -> usize {
        self.capacity() - self.len
    }

    /// Append a copy of `data`; false (and no change) when full or `data` exceeds a slot.
    pub(crate) fn push(&mut self, data: &[u8], meta: M) -> bool {
        if self.len == self.capacity() || data.len() > self.slot_size {
            return false;
        }
        let slot = (self.head + self.len) % self.capacity();
        let start = slot * self.slot_size;
        self.buf[start..start + data.len()].copy_from_slice(data);
        self.lens[slot] = data.len() as u32;
        self.metas[slot] = meta;
        self.len += 1;
        true
    }

    /// Entry `i` from the front (0 = oldest).
    pub(crate) fn get(&self, i: usize) -> Option<(&[u8], M)> {
        if i >= self.len {
            return None;
        }
        let slot = (self.head + i) % self.capacity();
        let start = slot * self.slot_size;
        Some((
            &self.buf[start..start + self.lens[slot] as usize],
            self.metas[slot],
        ))
    }

    pub(crate) fn front(&self) -> Option<(&[u8], M)> {
        self.get(0)
    }

    /// Drop the `n` oldest entries (fewer if there are fewer).
    pub(crate) fn pop_n(&mut self, n: usize) {
        let n = n.min(self.len);
        if n == 0 {
            return;
        }
        self.head = (self.head + n) % self.capacity();
        self.len -= n;
    }
}

#[cfg(test)]
mod tests {
    use super::PacketQueue;

    #[test]
    fn fifo_wraps_and_bounds() {
        let mut q: PacketQueue<u32> = PacketQueue::new(3, 4);
        assert!(q.push(b"a", 1));
        assert!(q.push(b"bb", 2));
        assert!(q.push(b"ccc", 3));
        assert!(!q.push(b"d", 4));
        assert!(!PacketQueue::<u32>::new(1, 2).push(b"abc", 0));
        assert_eq!(q.front(), Some((&b"a"[..], 1)));
        q.pop_n(2);
        assert!(q.push(b"dddd", 4));
        assert_eq!(q.get(0), Some((&b"ccc"[..], 3)));
        assert_eq!(q.get(1), Some((&b"dddd"[..], 4)));
        assert_eq!(q.get(2), None);
        q.pop_n(9);
        assert!(q.is_empty());
        assert_eq!(q.free(), 3);
    }
}
