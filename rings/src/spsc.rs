//! Bounded single-producer single-consumer ring: `R_pkt[l]`, `R_hash8[l]`, `R_hash32[l]`
//! (spec 07 §4.1, 64 Ki entries each) and any other SPSC ring of the sequencer.
//!
//! # Protocol
//!
//! State shared by the two sides:
//!
//! * `buf`: `capacity` slots (a power of two), each an `UnsafeCell<MaybeUninit<T>>`.
//! * `tail`: the number of items ever pushed (a free-running `usize`, wrapping). **Only the
//!   producer writes it**, with `Release`, after it has written the slot(s) it publishes.
//! * `head`: the number of items ever popped (free-running, wrapping). **Only the consumer
//!   writes it**, with `Release`, after it has finished reading (moving out of) the slot(s) it
//!   frees.
//!
//! `tail` and `head` each sit on their own cache line ([`CachePadded`]), so the producer's
//! stores never invalidate the line the consumer stores to, and vice versa. Item `i` lives in
//! slot `i & (capacity - 1)`; the ring holds `tail - head` items (wrapping subtraction), which is
//! always in `0..=capacity`.
//!
//! Each side keeps its own index in a private field (it is the only writer, so it never needs to
//! load it) and a *cached* copy of the other side's index:
//!
//! * The producer caches `head`. Its cache can only be stale-low (the consumer only moves `head`
//!   forward), so it can only under-estimate the free space. The producer re-reads `head` with
//!   `Acquire` only when the cached value says the ring is full.
//! * The consumer caches `tail`, likewise stale-low, so it can only under-estimate the items
//!   ready. It re-reads `tail` with `Acquire` only when the cached value says the ring is empty.
//!
//! So in steady state a push or pop touches one shared line (its own index) and the slot.
//!
//! # Why it is correct
//!
//! * **Read-after-write (no torn or missing item).** The producer writes slot `i` (a plain,
//!   non-atomic store through the `UnsafeCell`), then stores `tail = i + 1` with `Release`. The
//!   consumer reads slot `i` only after it has loaded some `tail > i` with `Acquire` (directly,
//!   or earlier into its cache; the cache only ever holds values it acquired). That load reads
//!   the producer's store of `i + 1` or a later one in `tail`'s modification order, all of which
//!   are `Release` stores by the same thread, so the write of slot `i` *happens before* the
//!   consumer's read of it.
//! * **Write-after-read (no overwrite of an unread item).** The producer writes slot `i` only
//!   when `i - head < capacity`, i.e. after it has acquired a `head > i - capacity`. The consumer
//!   stored that `head` with `Release` after it read item `i - capacity` out of the same slot, so
//!   that read happens before the overwrite.
//! * **Exactly once, in order.** Only the producer advances `tail` and only the consumer advances
//!   `head`, each by the number of slots it has just written / read, and `0 <= tail - head <=
//!   capacity` holds at every step; items are read in index order.
//! * **Drop.** Items in `head..tail` are initialised. Each handle publishes its private index when
//!   it is dropped (normally a no-op, every operation already published it; it matters after a
//!   panic in a caller's iterator or a leaked [`Drain`]), and the shared state is dropped by the
//!   last `Arc` owner, which `Arc` orders after both handles' last accesses, so the drop sees the
//!   final indices and drops exactly the unconsumed items.
//!
//! Batch operations ([`Producer::push_batch`], [`Producer::push_from_iter`],
//! [`Consumer::pop_batch`], [`Consumer::pop_batch_with`], [`Consumer::drain`]) write or read
//! several slots and publish the index once, so a batch of `k` costs one `Release` store. A
//! call that finds nothing to do (a pop on an empty ring, a push on a full one) stores nothing.
//!
//! *Performance note.* When the consumer keeps up with the producer (the sequencer's normal
//! case: latency first), it reads each item as soon as it is published, so the slot's line and
//! the `tail` line cross between the cores for every item; when the producer is ahead, the
//! consumer streams on its cached `tail` and only the producer's rare `head` refreshes cross.
//! Every Lamport-style ring with cached indices (rtrb included) behaves this way; the batch
//! operations amortise the crossing over the batch. `benches/rings.rs` prints which regime each
//! throughput round ran in.
//!
//! The handles are `Send` (when `T: Send`) but not `Sync`: each is meant to live on one core.
//!
//! ```compile_fail
//! fn is_sync<S: Sync>() {}
//! is_sync::<vyrn_rings::spsc::Producer<u64>>();
//! ```
//! ```compile_fail
//! fn is_sync<S: Sync>() {}
//! is_sync::<vyrn_rings::spsc::Consumer<u64>>();
//! ```

use core::cell::Cell;
use core::fmt;
use core::mem::MaybeUninit;

use crossbeam_utils::CachePadded;

use crate::sync::{Arc, AtomicUsize, Ordering, UnsafeCell};

/// The state both handles share.
struct Shared<T> {
    /// Items ever popped; written by the consumer only.
    head: CachePadded<AtomicUsize>,
    /// Items ever pushed; written by the producer only.
    tail: CachePadded<AtomicUsize>,
    /// The slots; `buf.len()` is a power of two.
    buf: Box<[UnsafeCell<MaybeUninit<T>>]>,
}

// SAFETY: `Shared` is only reached through one `Producer` and one `Consumer`. Items move from
// the producer's thread to the consumer's thread (hence `T: Send`); each slot is accessed by one
// side at a time, as the module protocol establishes with the `head`/`tail` Release/Acquire pairs.
unsafe impl<T: Send> Send for Shared<T> {}
// SAFETY: as above; the two handles on two threads share `&Shared`, and no `&T` is ever given to
// a thread other than the consumer's, so `T: Sync` is not required.
unsafe impl<T: Send> Sync for Shared<T> {}

impl<T> Shared<T> {
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

impl<T> Drop for Shared<T> {
    fn drop(&mut self) {
        let head = self.head.load(Ordering::Acquire);
        let tail = self.tail.load(Ordering::Acquire);
        let mask = self.buf.len() - 1;
        let mut i = head;
        while i != tail {
            self.buf[i & mask].with_mut(|p| {
                // SAFETY: items `head..tail` were written by the producer and not read out by the
                // consumer; both handles are gone (we are the last `Arc` owner), so nothing else
                // touches the slot and each is dropped exactly once.
                unsafe { core::ptr::drop_in_place(p.cast::<T>()) }
            });
            i = i.wrapping_add(1);
        }
    }
}

/// Create a ring of at least `capacity` slots (rounded up to a power of two, minimum 1).
///
/// This is the only allocation the ring ever makes.
///
/// # Panics
///
/// If the rounded capacity overflows `usize`.
pub fn channel<T>(capacity: usize) -> (Producer<T>, Consumer<T>) {
    make(capacity, false)
}

/// [`channel`], with every slot's memory written (zeroes) before it returns: the ring's pages
/// are faulted in at startup, not by the first lap of pushes on the hot path (a fresh 1 MiB
/// ring of events took page faults on ~a third of a replay BBO core's pushes, `--bench
/// replica`, 2026-12-04).
pub fn channel_prefaulted<T>(capacity: usize) -> (Producer<T>, Consumer<T>) {
    make(capacity, true)
}

fn make<T>(capacity: usize, touch: bool) -> (Producer<T>, Consumer<T>) {
    let cap = capacity
        .max(1)
        .checked_next_power_of_two()
        .expect("ring capacity overflows usize");
    let buf: Box<[UnsafeCell<MaybeUninit<T>>]> = (0..cap)
        .map(|_| UnsafeCell::new(MaybeUninit::uninit()))
        .collect();
    if touch {
        for slot in buf.iter() {
            slot.with_mut(|p| {
                // SAFETY: `p` points at one slot's `MaybeUninit<T>`, owned by this function (no
                // handle exists yet); any bytes are a valid `MaybeUninit`, and the slot is
                // written before it is ever read as a `T`. Non-zero bytes: a zeroing loop may be
                // turned into a lazily mapped `calloc`, which would fault nothing in.
                unsafe { core::ptr::write_bytes(p.cast::<u8>(), 0xA5, core::mem::size_of::<T>()) }
            });
        }
        core::hint::black_box(&buf);
    }
    let shared = Arc::new(Shared {
        head: CachePadded::new(AtomicUsize::new(0)),
        tail: CachePadded::new(AtomicUsize::new(0)),
        buf,
    });
    let producer = Producer {
        shared: shared.clone(),
        tail: 0,
        cached_head: Cell::new(0),
        mask: cap - 1,
    };
    let consumer = Consumer {
        shared,
        head: 0,
        cached_tail: Cell::new(0),
        mask: cap - 1,
    };
    (producer, consumer)
}

/// The writing end of an SPSC ring.
pub struct Producer<T> {
    shared: Arc<Shared<T>>,
    /// Items pushed; equals `shared.tail` except inside a batch.
    tail: usize,
    /// The last `head` this side acquired (stale-low).
    cached_head: Cell<usize>,
    mask: usize,
}

impl<T> Producer<T> {
    /// The number of slots (a power of two).
    #[inline]
    pub fn capacity(&self) -> usize {
        self.mask + 1
    }

    /// Free slots according to the cached `head` (a lower bound).
    #[inline]
    fn free_cached(&self) -> usize {
        self.capacity() - self.tail.wrapping_sub(self.cached_head.get())
    }

    /// Re-read `head` (Acquire) and return the free slots.
    #[inline]
    fn refresh(&self) -> usize {
        self.cached_head
            .set(self.shared.head.load(Ordering::Acquire));
        self.free_cached()
    }

    /// Write `item` into the slot of index `self.tail` and advance the private tail (not
    /// published).
    ///
    /// The caller must have established that the slot is free (`free_cached() > 0`).
    #[inline(always)]
    fn write_slot(&mut self, item: T) {
        self.shared.slot(self.tail).with_mut(|p| {
            // SAFETY: the caller checked `tail - head < capacity` against a `head` acquired from
            // the consumer, so the consumer has finished reading this slot's previous item (or it
            // never held one) and will not read it again before we publish `tail + 1`. Writing a
            // `MaybeUninit` never drops the old bytes (already moved out).
            unsafe { p.write(MaybeUninit::new(item)) }
        });
        self.tail = self.tail.wrapping_add(1);
    }

    /// Make every item written so far visible to the consumer.
    #[inline(always)]
    fn publish(&self) {
        self.shared.tail.store(self.tail, Ordering::Release);
    }

    /// Push one item; `Err(item)` gives it back when the ring is full.
    #[inline]
    pub fn push(&mut self, item: T) -> Result<(), T> {
        if self.free_cached() == 0 && self.refresh() == 0 {
            return Err(item);
        }
        self.write_slot(item);
        self.publish();
        Ok(())
    }

    /// Push as many items of `items` as fit, in order, publishing the tail once. Returns how
    /// many were pushed (`items[..n]`).
    #[inline]
    pub fn push_batch(&mut self, items: &[T]) -> usize
    where
        T: Copy,
    {
        let mut free = self.free_cached();
        if free < items.len() {
            free = self.refresh();
        }
        let n = free.min(items.len());
        if n == 0 {
            return 0;
        }
        // Two contiguous runs (the second only when the batch wraps), each a plain loop over
        // zipped slices, which the compiler turns into a block copy.
        let start = self.tail & self.mask;
        let first = n.min(self.capacity() - start);
        let (a, b) = items[..n].split_at(first);
        let buf = &self.shared.buf;
        for (slots, run) in [(&buf[start..start + first], a), (&buf[..b.len()], b)] {
            for (slot, &item) in slots.iter().zip(run) {
                slot.with_mut(|p| {
                    // SAFETY: these `n <= free` slots, from the private tail on, were checked
                    // free against a `head` acquired from the consumer, as in `write_slot`.
                    unsafe { p.write(MaybeUninit::new(item)) }
                });
            }
        }
        self.tail = self.tail.wrapping_add(n);
        self.publish();
        n
    }

    /// Push items from `iter` while there is room, publishing the tail once; returns how many
    /// were pushed.
    ///
    /// An item is taken from the iterator only when a slot is free for it, so nothing is lost:
    /// pass `iter.by_ref()` to keep the rest. The head is re-read at most once, at the start, when
    /// the cached free space is below the iterator's lower size hint (at least 1).
    #[inline]
    pub fn push_from_iter<I: IntoIterator<Item = T>>(&mut self, iter: I) -> usize {
        let mut iter = iter.into_iter();
        let mut free = self.free_cached();
        if free < iter.size_hint().0.max(1) {
            free = self.refresh();
        }
        let mut n = 0;
        while n < free {
            let Some(item) = iter.next() else { break };
            self.write_slot(item);
            n += 1;
        }
        if n > 0 {
            self.publish();
        }
        n
    }

    /// Items in the ring now, as this side sees it (re-reads `head`).
    #[inline]
    pub fn len(&self) -> usize {
        self.capacity() - self.refresh()
    }

    /// Whether the ring is empty now (re-reads `head`).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Free slots now (re-reads `head`).
    #[inline]
    pub fn free(&self) -> usize {
        self.refresh()
    }

    /// Whether the ring is full now (re-reads `head` only if the cache says full).
    #[inline]
    pub fn is_full(&self) -> bool {
        self.free_cached() == 0 && self.refresh() == 0
    }
}

impl<T> Drop for Producer<T> {
    fn drop(&mut self) {
        // Normally a no-op; after a panic inside `push_from_iter`'s iterator it publishes the
        // items already written, so that they are dropped (or consumed) rather than leaked.
        self.publish();
    }
}

impl<T> fmt::Debug for Producer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("spsc::Producer")
            .field("capacity", &self.capacity())
            .field("tail", &self.tail)
            .field("cached_head", &self.cached_head.get())
            .finish()
    }
}

/// The reading end of an SPSC ring.
pub struct Consumer<T> {
    shared: Arc<Shared<T>>,
    /// Items popped; equals `shared.head` except while a [`Drain`] is alive.
    head: usize,
    /// The last `tail` this side acquired (stale-low).
    cached_tail: Cell<usize>,
    mask: usize,
}

impl<T> Consumer<T> {
    /// The number of slots (a power of two).
    #[inline]
    pub fn capacity(&self) -> usize {
        self.mask + 1
    }

    /// Items ready according to the cached `tail` (a lower bound).
    #[inline]
    fn ready_cached(&self) -> usize {
        self.cached_tail.get().wrapping_sub(self.head)
    }

    /// Re-read `tail` (Acquire) and return the items ready.
    #[inline]
    fn refresh(&self) -> usize {
        self.cached_tail
            .set(self.shared.tail.load(Ordering::Acquire));
        self.ready_cached()
    }

    /// Items ready, re-reading `tail` only when the cache says there are fewer than `want`.
    #[inline]
    fn ready_for(&self, want: usize) -> usize {
        let ready = self.ready_cached();
        if ready < want {
            self.refresh()
        } else {
            ready
        }
    }

    /// Move the item at the private head out of its slot and advance the private head (not
    /// published). The caller must have established that the item is ready.
    #[inline(always)]
    fn read_slot(&mut self) -> T {
        let item = self.shared.slot(self.head).with(|p| {
            // SAFETY: the caller saw `head < tail` with a `tail` acquired from the producer, so the
            // producer's write of this slot happens before this read and the producer will not
            // touch the slot again until we publish a head past it. We move the value out exactly
            // once: the private head advances right after, so it is never read again.
            unsafe { p.cast::<T>().read() }
        });
        self.head = self.head.wrapping_add(1);
        item
    }

    /// Free every slot read so far for the producer.
    #[inline(always)]
    fn publish(&self) {
        self.shared.head.store(self.head, Ordering::Release);
    }

    /// Pop the oldest item, or `None` when the ring is empty.
    #[inline]
    pub fn pop(&mut self) -> Option<T> {
        if self.ready_for(1) == 0 {
            return None;
        }
        let item = self.read_slot();
        self.publish();
        Some(item)
    }

    /// The oldest item, left in the ring, or `None` when the ring is empty.
    #[inline]
    pub fn peek(&self) -> Option<&T> {
        if self.ready_for(1) == 0 {
            return None;
        }
        let p = self.shared.slot(self.head).with(|p| p);
        // SAFETY: the item at `head` is initialised and published (acquired `tail > head`, see
        // `read_slot`). The producer will not overwrite the slot until the consumer publishes a
        // head past it, which needs `&mut self`, so the slot stays valid and unchanged for the
        // lifetime of this `&self` borrow.
        Some(unsafe { &*p.cast::<T>() })
    }

    /// Pop up to `max` items into `out`, publishing the head once; returns how many.
    ///
    /// `out` should have room already (for example a `Vec` with reserved capacity) if the call
    /// must not allocate.
    #[inline]
    pub fn pop_batch<E: Extend<T>>(&mut self, out: &mut E, max: usize) -> usize {
        let mut drain = self.drain(max);
        let n = drain.len();
        out.extend(&mut drain);
        n - drain.len()
    }

    /// Pop up to `max` items, passing each to `f` in order, publishing the head once; returns
    /// how many.
    #[inline]
    pub fn pop_batch_with(&mut self, max: usize, mut f: impl FnMut(T)) -> usize {
        let n = self.ready_for(max).min(max);
        if n == 0 {
            return 0;
        }
        let start = self.head & self.mask;
        let first = n.min(self.capacity() - start);
        let shared = &*self.shared;
        for run in [&shared.buf[start..start + first], &shared.buf[..n - first]] {
            for slot in run {
                let item = slot.with(|p| {
                    // SAFETY: the slot is one of the `n` items ready (acquired `tail`), read once:
                    // the private head moves past it before `f` runs, as in `read_slot`.
                    unsafe { p.cast::<T>().read() }
                });
                // Advance before `f`: if `f` panics, the items already moved out stay consumed
                // (published by the next operation or by `Drop`).
                self.head = self.head.wrapping_add(1);
                f(item);
            }
        }
        self.publish();
        n
    }

    /// Pop up to `out.len()` items into `out`, in order, publishing the head once; returns how
    /// many (`out[..n]`). A block copy for `Copy` items (a byte ring's consumer takes a batch
    /// of bytes without a call per byte).
    #[inline]
    pub fn pop_slice(&mut self, out: &mut [T]) -> usize
    where
        T: Copy,
    {
        let n = self.ready_for(out.len()).min(out.len());
        if n == 0 {
            return 0;
        }
        let start = self.head & self.mask;
        let first = n.min(self.capacity() - start);
        let shared = &*self.shared;
        let (a, b) = out[..n].split_at_mut(first);
        for (run, dst) in [
            (&shared.buf[start..start + first], a),
            (&shared.buf[..n - first], b),
        ] {
            for (slot, d) in run.iter().zip(dst.iter_mut()) {
                *d = slot.with(|p| {
                    // SAFETY: the slot is one of the `n` items ready (acquired `tail`), read once
                    // (`T: Copy`, nothing to drop): the private head moves past all `n` below.
                    unsafe { p.cast::<T>().read() }
                });
            }
        }
        self.head = self.head.wrapping_add(n);
        self.publish();
        n
    }

    /// An iterator over up to `max` items that are ready now. Items are removed as the iterator
    /// yields them; the head is published once, when the iterator is dropped (or, if it is
    /// leaked, by the next pop or when the consumer is dropped). Items not yielded stay in the
    /// ring.
    #[inline]
    pub fn drain(&mut self, max: usize) -> Drain<'_, T> {
        let remaining = self.ready_for(max).min(max);
        Drain {
            start: self.head,
            consumer: self,
            remaining,
        }
    }

    /// Items ready now (re-reads `tail`).
    #[inline]
    pub fn len(&self) -> usize {
        self.refresh()
    }

    /// Whether the ring is empty now (re-reads `tail` only if the cache says empty).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.ready_for(1) == 0
    }
}

impl<T> Drop for Consumer<T> {
    fn drop(&mut self) {
        // Normally a no-op; after a leaked `Drain` it records the items already moved out, so
        // that the shared drop does not drop them a second time.
        self.publish();
    }
}

impl<T> fmt::Debug for Consumer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("spsc::Consumer")
            .field("capacity", &self.capacity())
            .field("head", &self.head)
            .field("cached_tail", &self.cached_tail.get())
            .finish()
    }
}

/// Iterator returned by [`Consumer::drain`]; publishes the head once when dropped.
pub struct Drain<'a, T> {
    consumer: &'a mut Consumer<T>,
    remaining: usize,
    /// The head when the drain started: nothing to publish if it has not moved.
    start: usize,
}

impl<T> Iterator for Drain<'_, T> {
    type Item = T;

    #[inline]
    fn next(&mut self) -> Option<T> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        Some(self.consumer.read_slot())
    }

    #[inline]
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

impl<T> ExactSizeIterator for Drain<'_, T> {}

impl<T> Drop for Drain<'_, T> {
    fn drop(&mut self) {
        // An empty poll must not store to the shared line the producer reads.
        if self.consumer.head != self.start {
            self.consumer.publish();
        }
    }
}

impl<T> fmt::Debug for Drain<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("spsc::Drain")
            .field("remaining", &self.remaining)
            .finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::rc::Rc;

    #[test]
    fn a_prefaulted_ring_is_a_ring_and_drops_only_what_it_holds() {
        let (mut p, mut c) = channel_prefaulted::<Rc<u32>>(5);
        assert_eq!(p.capacity(), 8);
        let probe = Rc::new(7);
        // Laps over slots whose bytes were written at creation: none is read or dropped as a T.
        for i in 0..20 {
            p.push(probe.clone()).unwrap();
            if i % 3 != 0 {
                assert_eq!(*c.pop().unwrap(), 7);
            }
        }
        assert_eq!(Rc::strong_count(&probe), 1 + c.len());
        drop((p, c));
        assert_eq!(Rc::strong_count(&probe), 1);
    }

    #[test]
    fn capacity_rounds_up_to_power_of_two() {
        for (asked, got) in [(0, 1), (1, 1), (2, 2), (3, 4), (4, 4), (5, 8), (1000, 1024)] {
            let (p, c) = channel::<u8>(asked);
            assert_eq!(p.capacity(), got, "asked {asked}");
            assert_eq!(c.capacity(), got, "asked {asked}");
        }
    }

    #[test]
    fn push_until_full_returns_item_then_pops_in_order() {
        let (mut p, mut c) = channel::<u32>(4);
        assert!(c.is_empty() && p.is_empty());
        for i in 0..4 {
            p.push(i).unwrap();
        }
        assert!(p.is_full());
        assert_eq!(p.push(99), Err(99));
        assert_eq!((p.len(), c.len(), p.free()), (4, 4, 0));
        assert_eq!(c.peek(), Some(&0));
        assert_eq!(c.pop(), Some(0));
        p.push(4).unwrap();
        assert_eq!(p.push(5), Err(5));
        for i in 1..5 {
            assert_eq!(c.pop(), Some(i));
        }
        assert_eq!(c.pop(), None);
        assert_eq!(c.peek(), None);
        assert!(c.is_empty() && p.is_empty());
    }

    #[test]
    fn wraps_around_many_times() {
        let (mut p, mut c) = channel::<u64>(8);
        let mut next_out = 0u64;
        for i in 0..10_000u64 {
            p.push(i).unwrap();
            if i % 3 != 0 {
                assert_eq!(c.pop(), Some(next_out));
                next_out += 1;
            }
            while p.is_full() {
                assert_eq!(c.pop(), Some(next_out));
                next_out += 1;
            }
        }
        while let Some(v) = c.pop() {
            assert_eq!(v, next_out);
            next_out += 1;
        }
        assert_eq!(next_out, 10_000);
    }

    #[test]
    fn indices_wrap_past_usize_max() {
        let (mut p, mut c) = channel::<u64>(4);
        // Start both free-running indices just below the wrap point.
        let start = usize::MAX - 5;
        p.tail = start;
        p.cached_head.set(start);
        p.shared.head.store(start, Ordering::Relaxed);
        p.shared.tail.store(start, Ordering::Relaxed);
        c.head = start;
        c.cached_tail.set(start);
        for round in 0..5u64 {
            assert_eq!(
                p.push_batch(&[round, round + 10, round + 20, round + 30, 7]),
                4
            );
            assert_eq!(p.push(9), Err(9));
            let mut got = Vec::new();
            assert_eq!(c.pop_batch(&mut got, 10), 4);
            assert_eq!(got, [round, round + 10, round + 20, round + 30]);
        }
    }

    #[test]
    fn push_batch_partial_when_nearly_full() {
        let (mut p, mut c) = channel::<u16>(4);
        assert_eq!(p.push_batch(&[1, 2, 3]), 3);
        assert_eq!(p.push_batch(&[4, 5, 6]), 1);
        assert_eq!(p.push_batch(&[7]), 0);
        assert_eq!(p.push_batch(&[]), 0);
        assert_eq!(c.pop(), Some(1));
        assert_eq!(c.pop(), Some(2));
        assert_eq!(p.push_batch(&[5, 6, 7]), 2);
        let mut out = Vec::new();
        assert_eq!(c.pop_batch(&mut out, usize::MAX), 4);
        assert_eq!(out, [3, 4, 5, 6]);
    }

    #[test]
    fn pop_slice_copies_across_the_wrap_and_publishes_the_head() {
        let (mut p, mut c) = channel::<u8>(8);
        let mut out = [0u8; 16];
        assert_eq!(c.pop_slice(&mut out), 0, "empty");
        assert_eq!(p.push_batch(&[1, 2, 3, 4, 5, 6]), 6);
        assert_eq!(c.pop_slice(&mut out[..4]), 4);
        assert_eq!(out[..4], [1, 2, 3, 4]);
        // Head published: the producer sees the 4 freed slots (the batch wraps).
        assert_eq!(p.push_batch(&[7, 8, 9, 10, 11, 12]), 6);
        assert_eq!(p.push_batch(&[13]), 0, "full");
        assert_eq!(c.pop_slice(&mut out), 8);
        assert_eq!(out[..8], [5, 6, 7, 8, 9, 10, 11, 12]);
        assert_eq!(c.pop_slice(&mut out), 0);
    }

    #[test]
    fn push_from_iter_takes_only_what_fits() {
        let (mut p, mut c) = channel::<String>(4);
        let mut src = (0..10).map(|i| i.to_string());
        assert_eq!(p.push_from_iter(src.by_ref()), 4);
        assert_eq!(
            src.next().as_deref(),
            Some("4"),
            "no item was taken and lost"
        );
        assert_eq!(c.pop().as_deref(), Some("0"));
        assert_eq!(p.push_from_iter(src.by_ref()), 1);
        assert_eq!(src.next().as_deref(), Some("6"));
        let mut out = Vec::new();
        assert_eq!(c.pop_batch(&mut out, 2), 2);
        assert_eq!(out, ["1", "2"]);
        assert_eq!(p.push_from_iter(std::iter::empty()), 0);
        let mut seen = Vec::new();
        assert_eq!(c.pop_batch_with(10, |s| seen.push(s)), 2);
        assert_eq!(seen, ["3", "5"]);
    }

    #[test]
    fn drain_partial_leaves_rest_and_publishes_once_dropped() {
        let (mut p, mut c) = channel::<u32>(4);
        p.push_batch(&[1, 2, 3, 4]);
        {
            let mut d = c.drain(3);
            assert_eq!(d.len(), 3);
            assert_eq!(d.next(), Some(1));
            assert_eq!(d.next(), Some(2));
            // Not yet published: the producer still sees a full ring.
            assert_eq!(p.push(5), Err(5));
        }
        assert_eq!(p.push_batch(&[5, 6, 7]), 2);
        let v: Vec<u32> = c.drain(usize::MAX).collect();
        assert_eq!(v, [3, 4, 5, 6]);
    }

    #[test]
    fn drop_drops_remaining_items_exactly_once() {
        let token = Rc::new(());
        {
            let (mut p, mut c) = channel::<Rc<()>>(8);
            for _ in 0..6 {
                p.push(token.clone()).unwrap();
            }
            drop(c.pop());
            drop(c.pop());
            assert_eq!(Rc::strong_count(&token), 5);
            drop(p);
            assert_eq!(Rc::strong_count(&token), 5);
        }
        assert_eq!(Rc::strong_count(&token), 1);
    }

    #[test]
    fn leaked_drain_neither_double_drops_nor_leaks() {
        let token = Rc::new(());
        {
            let (mut p, mut c) = channel::<Rc<()>>(4);
            for _ in 0..4 {
                p.push(token.clone()).unwrap();
            }
            let mut d = c.drain(4);
            drop(d.next());
            drop(d.next());
            std::mem::forget(d);
            assert_eq!(Rc::strong_count(&token), 3);
        }
        assert_eq!(Rc::strong_count(&token), 1);
    }

    #[test]
    fn panic_in_extend_keeps_exactly_once() {
        struct Bomb(Vec<Rc<()>>);
        impl Extend<Rc<()>> for Bomb {
            fn extend<I: IntoIterator<Item = Rc<()>>>(&mut self, iter: I) {
                for x in iter {
                    self.0.push(x);
                    if self.0.len() == 2 {
                        panic!("boom");
                    }
                }
            }
        }
        let token = Rc::new(());
        let (mut p, mut c) = channel::<Rc<()>>(4);
        for _ in 0..4 {
            p.push(token.clone()).unwrap();
        }
        let mut bomb = Bomb(Vec::new());
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            c.pop_batch(&mut bomb, 4);
        }));
        assert!(r.is_err());
        assert_eq!(bomb.0.len(), 2);
        assert_eq!(c.len(), 2, "the two unread items stay");
        assert_eq!(p.free(), 2, "the two read items were freed");
        drop(bomb);
        assert_eq!(Rc::strong_count(&token), 3);
        drop((p, c));
        assert_eq!(Rc::strong_count(&token), 1);
    }

    #[test]
    fn panic_in_source_iterator_keeps_written_items() {
        let token = Rc::new(());
        let (mut p, mut c) = channel::<Rc<()>>(8);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let t = token.clone();
            p.push_from_iter((0..5).map(move |i| {
                assert!(i < 3, "boom");
                t.clone()
            }));
        }));
        assert!(r.is_err());
        // The three items written before the panic are published by the next push.
        p.push(token.clone()).unwrap();
        assert_eq!(c.len(), 4);
        drop(c.pop());
        drop((p, c));
        assert_eq!(Rc::strong_count(&token), 1);
    }

    #[test]
    fn zero_sized_items() {
        let (mut p, mut c) = channel::<()>(2);
        p.push(()).unwrap();
        p.push(()).unwrap();
        assert_eq!(p.push(()), Err(()));
        assert_eq!(c.pop(), Some(()));
        assert_eq!(c.len(), 1);
    }

    #[test]
    fn handles_are_send() {
        fn is_send<S: Send>() {}
        is_send::<Producer<Vec<u8>>>();
        is_send::<Consumer<Vec<u8>>>();
    }

    #[test]
    fn debug_formats() {
        let (p, c) = channel::<u8>(2);
        assert!(format!("{p:?}").contains("capacity: 2"));
        assert!(format!("{c:?}").contains("capacity: 2"));
    }

    /// Two threads, a small ring, one million items: every item arrives once, in order.
    #[test]
    fn stress_two_threads_in_order() {
        const N: u64 = 1_000_000;
        let (mut p, mut c) = channel::<u64>(64);
        let producer = std::thread::spawn(move || {
            for i in 0..N {
                let mut item = i;
                while let Err(back) = p.push(item) {
                    item = back;
                    std::thread::yield_now(); // 2-core CI: let the other side run
                }
            }
        });
        let mut expect = 0;
        while expect < N {
            match c.pop() {
                Some(v) => {
                    assert_eq!(v, expect);
                    expect += 1;
                }
                None => std::hint::spin_loop(),
            }
        }
        producer.join().unwrap();
        assert_eq!(c.pop(), None);
    }

    /// The batch paths under contention, with a heap payload so a torn or doubled item would
    /// show up (or crash under a sanitizer).
    #[test]
    fn stress_two_threads_batches() {
        const N: u64 = 200_000;
        let (mut p, mut c) = channel::<Box<u64>>(32);
        let producer = std::thread::spawn(move || {
            let mut src = (0..N).map(Box::new).peekable();
            while src.peek().is_some() {
                if p.push_from_iter(src.by_ref().take(7)) == 0 {
                    std::thread::yield_now(); // 2-core CI: let the other side run
                }
            }
        });
        let mut expect = 0;
        let mut buf = Vec::with_capacity(16);
        while expect < N {
            buf.clear();
            if c.pop_batch(&mut buf, 16) == 0 {
                std::thread::yield_now(); // 2-core CI: let the other side run
            }
            for v in buf.drain(..) {
                assert_eq!(*v, expect);
                expect += 1;
            }
        }
        producer.join().unwrap();
    }
}
