//! One-writer, `N`-cursor broadcast ring: `R_step` (spec 07 §4.1, 16 Ki entries, INV-WRITER).
//!
//! The BBO core (core 2) is the only writer. Stream-A (core 4), stream-B (core 7) and the order
//! hasher (core 50) each read *every* entry through their own cursor, at their own pace. An entry
//! is freed when the slowest cursor has passed it.
//!
//! # Protocol
//!
//! Shared state:
//!
//! * `buf`: `capacity` slots (a power of two) of `UnsafeCell<MaybeUninit<T>>`, `T: Copy` (entries
//!   are copied out, never moved, so `N` readers can read one slot and nothing needs dropping).
//! * `tail`: entries ever pushed (free-running `usize`, wrapping). **Only the writer stores it**,
//!   with `Release`, after writing the slot.
//! * `heads[i]`: entries cursor `i` has passed. **Only cursor `i` stores it**, with `Release`,
//!   after it has finished reading the slots it passes.
//!
//! `tail` and every `heads[i]` sit on separate cache lines ([`CachePadded`]): a cursor's store
//! never invalidates another cursor's line or the writer's.
//!
//! The writer caches the slowest head it last saw (the one furthest behind `tail`); the cache is
//! stale-low, so it can only under-estimate the free space. When the cache says full, the writer
//! re-reads all `N` heads with `Acquire` and takes the slowest; if `tail - slowest == capacity`
//! the push fails and returns the item (back-pressure: the writer never overwrites). Each cursor
//! caches `tail` (stale-low) and re-reads it with `Acquire` only when the cache says empty.
//!
//! # Why it is correct
//!
//! * **Read-after-write.** Cursor `i` reads slot `k` only after it has acquired a `tail > k`,
//!   which the writer stored with `Release` after writing slot `k`.
//! * **No overwrite of a needed entry (INV-WRITER, back-pressure).** The writer writes entry `k`
//!   into the slot of entry `k - capacity` only after it has acquired, from *every* cursor, a
//!   head `> k - capacity`; each cursor stored that head with `Release` after its last read of
//!   entry `k - capacity`. So every cursor's read of the old entry happens before the overwrite,
//!   and a cursor that has not read an entry keeps it alive, however slow.
//! * **Independence.** A cursor's progress depends only on `tail`; it never reads another
//!   cursor's head, so a slow cursor delays the writer (when the ring fills), never another
//!   cursor.
//! * Reads by several cursors of one slot are concurrent reads, which is not a data race.
//!
//! A dropped cursor keeps its last head: the writer still waits for it. That is deliberate. A
//! reader that stops is a dead stream core, and the step ring must stall rather than let the
//! other readers run ahead of it.
//!
//! Handles are `Send` (when `T: Send`) but not `Sync`.
//!
//! ```compile_fail
//! fn is_sync<S: Sync>() {}
//! is_sync::<vyrn_rings::multi::Cursor<u64, 3>>();
//! ```

use core::cell::Cell;
use core::fmt;
use core::mem::MaybeUninit;

use crossbeam_utils::CachePadded;

use crate::sync::{Arc, AtomicUsize, Ordering, UnsafeCell};

struct Shared<T, const N: usize> {
    /// Entries ever pushed; written by the writer only.
    tail: CachePadded<AtomicUsize>,
    /// `heads[i]`: entries cursor `i` has passed; written by cursor `i` only.
    heads: [CachePadded<AtomicUsize>; N],
    buf: Box<[UnsafeCell<MaybeUninit<T>>]>,
}

// SAFETY: entries move (by copy) from the writer's thread to the cursors' threads, hence
// `T: Send`; the slot accesses are ordered by the tail/heads Release/Acquire pairs (module docs).
unsafe impl<T: Send, const N: usize> Send for Shared<T, N> {}
// SAFETY: several cursor threads read one slot concurrently; they receive copies, never `&T`, so
// `T: Send` is enough, and the writer only writes a slot no cursor still needs (module docs).
unsafe impl<T: Send, const N: usize> Sync for Shared<T, N> {}

impl<T, const N: usize> Shared<T, N> {
    /// The slot of free-running index `i` (`i mod capacity`), without a bounds check: this is
    /// the per-item hot path.
    #[inline(always)]
    fn slot(&self, i: usize) -> &UnsafeCell<MaybeUninit<T>> {
        let k = i & (self.buf.len() - 1);
        // SAFETY: `buf.len()` is a power of two (`channel` rounds it up, at least 1), so masking
        // with `len - 1` yields an index below `len`.
        unsafe { self.buf.get_unchecked(k) }
    }
}

/// Create a ring of at least `capacity` slots (rounded up to a power of two, minimum 1) with
/// one writer and `N` cursors; `cursors[i].id() == i`.
///
/// # Panics
///
/// If `N == 0` or the rounded capacity overflows `usize`.
pub fn channel<T: Copy, const N: usize>(capacity: usize) -> (Writer<T, N>, [Cursor<T, N>; N]) {
    assert!(N > 0, "a multi-cursor ring needs at least one cursor");
    let cap = capacity
        .max(1)
        .checked_next_power_of_two()
        .expect("ring capacity overflows usize");
    let buf: Box<[UnsafeCell<MaybeUninit<T>>]> = (0..cap)
        .map(|_| UnsafeCell::new(MaybeUninit::uninit()))
        .collect();
    let shared = Arc::new(Shared {
        tail: CachePadded::new(AtomicUsize::new(0)),
        heads: core::array::from_fn(|_| CachePadded::new(AtomicUsize::new(0))),
        buf,
    });
    let cursors = core::array::from_fn(|id| Cursor {
        shared: shared.clone(),
        id,
        head: 0,
        cached_tail: Cell::new(0),
        mask: cap - 1,
    });
    let writer = Writer {
        shared,
        tail: 0,
        cached_slowest: Cell::new(0),
        mask: cap - 1,
    };
    (writer, cursors)
}

/// The one writer of a multi-cursor ring.
pub struct Writer<T: Copy, const N: usize> {
    shared: Arc<Shared<T, N>>,
    tail: usize,
    /// The slowest head seen at the last refresh (stale-low).
    cached_slowest: Cell<usize>,
    mask: usize,
}

impl<T: Copy, const N: usize> Writer<T, N> {
    /// The number of slots (a power of two).
    #[inline]
    pub fn capacity(&self) -> usize {
        self.mask + 1
    }

    #[inline]
    fn free_cached(&self) -> usize {
        self.capacity() - self.tail.wrapping_sub(self.cached_slowest.get())
    }

    /// Re-read every head (Acquire), cache the slowest, return the free slots.
    #[inline]
    fn refresh(&self) -> usize {
        let mut slowest = self.tail;
        let mut lag = 0;
        for head in &self.shared.heads {
            let h = head.load(Ordering::Acquire);
            let l = self.tail.wrapping_sub(h);
            if l > lag {
                lag = l;
                slowest = h;
            }
        }
        self.cached_slowest.set(slowest);
        self.free_cached()
    }

    /// Push one entry for all cursors; `Err(item)` when the slowest cursor is `capacity`
    /// entries behind.
    #[inline]
    pub fn push(&mut self, item: T) -> Result<(), T> {
        if self.free_cached() == 0 && self.refresh() == 0 {
            return Err(item);
        }
        self.shared.slot(self.tail).with_mut(|p| {
            // SAFETY: `tail - slowest head < capacity` with every head acquired from its cursor,
            // so every cursor has finished reading the entry this slot held (`tail - capacity`),
            // and no cursor reads the slot again before we publish `tail + 1`.
            unsafe { p.write(MaybeUninit::new(item)) }
        });
        self.tail = self.tail.wrapping_add(1);
        self.shared.tail.store(self.tail, Ordering::Release);
        Ok(())
    }

    /// Entries not yet passed by the slowest cursor (re-reads the heads).
    #[inline]
    pub fn len(&self) -> usize {
        self.capacity() - self.refresh()
    }

    /// Whether every cursor has read every entry (re-reads the heads).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Free slots now (re-reads the heads).
    #[inline]
    pub fn free(&self) -> usize {
        self.refresh()
    }

    /// How far cursor `id` is behind the writer, in entries (one `Acquire` load).
    ///
    /// # Panics
    ///
    /// If `id >= N`.
    #[inline]
    pub fn lag(&self, id: usize) -> usize {
        self.tail
            .wrapping_sub(self.shared.heads[id].load(Ordering::Acquire))
    }
}

impl<T: Copy, const N: usize> fmt::Debug for Writer<T, N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("multi::Writer")
            .field("capacity", &self.capacity())
            .field("cursors", &N)
            .field("tail", &self.tail)
            .field("cached_slowest", &self.cached_slowest.get())
            .finish()
    }
}

/// One reader's cursor into a multi-cursor ring; it sees every entry, in order.
pub struct Cursor<T: Copy, const N: usize> {
    shared: Arc<Shared<T, N>>,
    id: usize,
    head: usize,
    cached_tail: Cell<usize>,
    mask: usize,
}

impl<T: Copy, const N: usize> Cursor<T, N> {
    /// This cursor's index in `0..N`.
    #[inline]
    pub fn id(&self) -> usize {
        self.id
    }

    /// The number of slots (a power of two).
    #[inline]
    pub fn capacity(&self) -> usize {
        self.mask + 1
    }

    #[inline]
    fn ready_for(&self, want: usize) -> usize {
        let ready = self.cached_tail.get().wrapping_sub(self.head);
        if ready >= want {
            return ready;
        }
        self.cached_tail
            .set(self.shared.tail.load(Ordering::Acquire));
        self.cached_tail.get().wrapping_sub(self.head)
    }

    /// Copy of the entry `k` entries past this cursor's head. The caller must have checked
    /// `k < ready`.
    #[inline(always)]
    fn read_at(&self, k: usize) -> T {
        self.shared.slot(self.head.wrapping_add(k)).with(|p| {
            // SAFETY: the caller saw `head + k < tail` with `tail` acquired from the writer, so
            // the slot holds an initialised entry whose write happens before this read; the writer
            // will not overwrite it until this cursor publishes a head past it (`&self` here, and
            // heads only move with `&mut self`). `T: Copy`, so copying it out leaves it valid
            // for the other cursors.
            unsafe { p.cast::<T>().read() }
        })
    }

    #[inline(always)]
    fn publish(&self) {
        self.shared.heads[self.id].store(self.head, Ordering::Release);
    }

    /// A copy of the next entry, left in place; `None` when this cursor has read everything.
    #[inline]
    pub fn peek(&self) -> Option<T> {
        if self.ready_for(1) == 0 {
            return None;
        }
        Some(self.read_at(0))
    }

    /// Take the next entry (copy) and move past it.
    #[inline]
    pub fn pop(&mut self) -> Option<T> {
        let item = self.peek()?;
        self.head = self.head.wrapping_add(1);
        self.publish();
        Some(item)
    }

    /// Move past the next entry without copying it (after [`Cursor::peek`]); returns `false`
    /// when there was none.
    #[inline]
    pub fn advance(&mut self) -> bool {
        if self.ready_for(1) == 0 {
            return false;
        }
        self.head = self.head.wrapping_add(1);
        self.publish();
        true
    }

    /// Pass up to `max` ready entries to `f` in order, publishing this cursor's head once;
    /// returns how many.
    #[inline]
    pub fn pop_batch_with(&mut self, max: usize, mut f: impl FnMut(T)) -> usize {
        let n = self.ready_for(max).min(max);
        for k in 0..n {
            f(self.read_at(k));
        }
        if n > 0 {
            self.head = self.head.wrapping_add(n);
            self.publish();
        }
        n
    }

    /// Entries ready for this cursor now (re-reads `tail`).
    #[inline]
    pub fn len(&self) -> usize {
        self.ready_for(usize::MAX)
    }

    /// Whether this cursor has read every entry pushed so far.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.ready_for(1) == 0
    }
}

impl<T: Copy, const N: usize> fmt::Debug for Cursor<T, N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("multi::Cursor")
            .field("id", &self.id)
            .field("capacity", &self.capacity())
            .field("head", &self.head)
            .field("cached_tail", &self.cached_tail.get())
            .finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn every_cursor_sees_every_entry_in_order() {
        let (mut w, [mut a, mut b, mut c]) = channel::<u32, 3>(4);
        assert_eq!((a.id(), b.id(), c.id()), (0, 1, 2));
        assert_eq!(w.capacity(), 4);
        for i in 0..4 {
            w.push(i).unwrap();
        }
        for cur in [&mut a, &mut b, &mut c] {
            assert_eq!(cur.len(), 4);
            for i in 0..4 {
                assert_eq!(cur.peek(), Some(i));
                assert_eq!(cur.pop(), Some(i));
            }
            assert_eq!(cur.pop(), None);
            assert!(cur.is_empty());
        }
        assert!(w.is_empty());
    }

    #[test]
    fn full_when_slowest_cursor_is_capacity_behind() {
        let (mut w, [mut fast, mut slow]) = channel::<u64, 2>(4);
        for i in 0..4 {
            w.push(i).unwrap();
        }
        assert_eq!(w.push(4), Err(4));
        // The fast cursor reads everything; the writer is still blocked by the slow one.
        for i in 0..4 {
            assert_eq!(fast.pop(), Some(i));
        }
        assert_eq!(w.push(4), Err(4));
        assert_eq!((w.lag(0), w.lag(1), w.len(), w.free()), (0, 4, 4, 0));
        // One pop by the slow cursor frees one slot.
        assert_eq!(slow.peek(), Some(0));
        assert!(slow.advance());
        w.push(4).unwrap();
        assert_eq!(w.push(5), Err(5));
        assert_eq!(fast.pop(), Some(4));
        assert_eq!(fast.pop(), None);
        assert!(!fast.advance());
        let mut got = Vec::new();
        assert_eq!(slow.pop_batch_with(10, |x| got.push(x)), 4);
        assert_eq!(got, [1, 2, 3, 4]);
    }

    #[test]
    fn slow_cursor_does_not_block_other_readers() {
        let (mut w, [mut a, b]) = channel::<u8, 2>(8);
        for round in 0..3u8 {
            w.push(round).unwrap();
            assert_eq!(a.pop(), Some(round));
        }
        assert_eq!(b.len(), 3);
        assert_eq!(b.peek(), Some(0));
        assert!(format!("{w:?} {a:?}").contains("multi::"));
    }

    #[test]
    fn wraps_many_times() {
        let (mut w, [mut a, mut b]) = channel::<u64, 2>(2);
        for i in 0..1000 {
            w.push(i).unwrap();
            assert_eq!(a.pop(), Some(i));
            if i % 2 == 1 {
                assert_eq!(b.pop(), Some(i - 1));
                assert_eq!(b.pop(), Some(i));
            }
        }
    }

    #[test]
    fn handles_are_send() {
        fn is_send<S: Send>() {}
        is_send::<Writer<[u64; 4], 3>>();
        is_send::<Cursor<[u64; 4], 3>>();
    }

    /// One writer, three cursor threads of different speeds, a small ring: every cursor sees
    /// every entry once, in order, and the payload is never torn.
    #[test]
    fn stress_one_writer_three_cursors() {
        const N: u64 = 100_000;
        let (mut w, cursors) = channel::<[u64; 4], 3>(16);
        let readers: Vec<_> = cursors
            .into_iter()
            .map(|mut cur| {
                std::thread::spawn(move || {
                    let mut expect = 0u64;
                    while expect < N {
                        let got = if cur.id() == 0 {
                            cur.pop_batch_with(5, |e| {
                                assert_eq!(e, [expect, !expect, expect * 3, expect ^ 0x55]);
                                expect += 1;
                            })
                        } else {
                            match cur.pop() {
                                Some(e) => {
                                    assert_eq!(e, [expect, !expect, expect * 3, expect ^ 0x55]);
                                    expect += 1;
                                    1
                                }
                                None => 0,
                            }
                        };
                        if got == 0 {
                            std::thread::yield_now(); // 2-core CI: let the other side run
                        }
                    }
                    assert_eq!(cur.pop(), None);
                })
            })
            .collect();
        for i in 0..N {
            let mut e = [i, !i, i * 3, i ^ 0x55];
            while let Err(back) = w.push(e) {
                e = back;
                std::thread::yield_now(); // 2-core CI: let the other side run
            }
        }
        for r in readers {
            r.join().unwrap();
        }
        assert!(w.is_empty());
    }
}
