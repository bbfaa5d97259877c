//! A counting global allocator for the hot-path rule (no allocation per message): a test binary
//! installs [`Counting`] as its `#[global_allocator]` and counts what one thread allocates
//! while counting is on ([`counted`], or [`set_counting`] and [`count`]).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// Forwards to the system allocator, counting this thread's allocations and reallocations
/// while counting is on.
#[derive(Debug)]
pub struct Counting;

thread_local! {
    static ON: Cell<bool> = const { Cell::new(false) };
    static COUNT: Cell<u64> = const { Cell::new(0) };
}

fn tally() {
    if ON.with(Cell::get) {
        COUNT.with(|c| c.set(c.get() + 1));
    }
}

// SAFETY: forwards to the system allocator; the counter is a thread-local `Cell` touched only
// by the allocating thread, and counting allocates nothing.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        tally();
        // SAFETY: the caller's contract for `alloc` is passed through unchanged.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: `p` was allocated by `System` with layout `l` (every allocation goes there).
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        tally();
        // SAFETY: as for `dealloc`; `n` is the caller's new size.
        unsafe { System.realloc(p, l, n) }
    }
}

/// Turn counting on or off for this thread.
pub fn set_counting(on: bool) {
    ON.with(|o| o.set(on));
}

/// Allocations counted on this thread so far.
pub fn count() -> u64 {
    COUNT.with(Cell::get)
}

/// `f`'s result and the allocations it made on this thread.
pub fn counted<R>(f: impl FnOnce() -> R) -> (R, u64) {
    let before = count();
    set_counting(true);
    let r = f();
    set_counting(false);
    (r, count() - before)
}
