//! Swap the synchronisation primitives for loom's models under `--cfg loom`.
//!
//! Every atomic, fence, `Arc`, spin hint and `UnsafeCell` that the rings and words use comes
//! from here, so the same code runs on hardware and under the loom model checker. Loom's
//! `UnsafeCell` exposes its pointer only through `with` / `with_mut` closures (so that it can
//! track every access for data races); the `std` build wraps `core::cell::UnsafeCell` in the
//! same API, and the closures inline away.

#[cfg(loom)]
pub(crate) use loom::{
    cell::UnsafeCell,
    hint::spin_loop,
    sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering},
    sync::Arc,
};

#[cfg(not(loom))]
pub(crate) use std::{
    hint::spin_loop,
    sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering},
    sync::Arc,
};

/// `core::cell::UnsafeCell` with loom's closure API, so that one source serves both builds.
#[cfg(not(loom))]
#[derive(Debug)]
pub(crate) struct UnsafeCell<T>(core::cell::UnsafeCell<T>);

#[cfg(not(loom))]
impl<T> UnsafeCell<T> {
    /// Wrap `value`.
    #[inline(always)]
    pub(crate) const fn new(value: T) -> Self {
        UnsafeCell(core::cell::UnsafeCell::new(value))
    }

    /// Run `f` with a shared (read) pointer to the contents.
    #[inline(always)]
    pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        f(self.0.get())
    }

    /// Run `f` with an exclusive (write) pointer to the contents.
    #[inline(always)]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}
