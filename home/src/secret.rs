//! Secrets in memory (missing-chapters §5, secret store): never printed, wiped on drop.
//!
//! [`Seed32`] holds a 32-byte secret (the sequencer's Ed25519 seed, a session's
//! `K_seq ‖ K_out`). Its `Debug` prints `Seed32(<redacted>)`, and dropping it (or a clone of
//! it) overwrites the bytes with zeros through `zeroize`, which the optimiser may not elide.
//! The bytes are reached only through [`Seed32::expose`], so every use is easy to find.

use std::fmt;
use zeroize::Zeroize;

/// A 32-byte secret: redacted in `Debug`, zeroized on drop.
#[derive(Clone)]
#[repr(transparent)]
pub struct Seed32([u8; 32]);

impl Seed32 {
    /// Take ownership of `bytes`. The caller's own copy (a `[u8; 32]` is `Copy`) is the
    /// caller's to wipe; [`Seed32::from_mut`] wipes it for you.
    pub fn new(bytes: [u8; 32]) -> Self {
        Seed32(bytes)
    }

    /// Copy `bytes` in and zero the source.
    pub fn from_mut(bytes: &mut [u8; 32]) -> Self {
        let s = Seed32(*bytes);
        bytes.zeroize();
        s
    }

    /// The secret bytes. Copies made from this reference are not wiped by `Seed32`.
    pub fn expose(&self) -> &[u8; 32] {
        &self.0
    }
}

impl fmt::Debug for Seed32 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Seed32(<redacted>)")
    }
}

impl Drop for Seed32 {
    fn drop(&mut self) {
        self.0.zeroize();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_is_redacted() {
        let s = Seed32::new([0xAB; 32]);
        let d = format!("{s:?} {:?}", s.clone());
        assert_eq!(d, "Seed32(<redacted>) Seed32(<redacted>)");
        assert!(!d.contains("171") && !d.to_lowercase().contains("ab"));
        assert_eq!(s.expose(), &[0xAB; 32]);
    }

    #[test]
    fn from_mut_wipes_the_source() {
        let mut b = [7u8; 32];
        let s = Seed32::from_mut(&mut b);
        assert_eq!(b, [0; 32]);
        assert_eq!(s.expose(), &[7; 32]);
    }

    #[test]
    fn drop_zeroizes_in_place() {
        // Drop in place inside a buffer we still own, then look at the bytes it held.
        let mut slot = std::mem::MaybeUninit::new(Seed32::new([0x5A; 32]));
        // SAFETY: `slot` holds an initialised Seed32, dropped exactly once here and never
        // used as a Seed32 afterwards.
        unsafe { slot.assume_init_drop() };
        // SAFETY: Seed32 is `repr(transparent)` over [u8; 32]; after the drop its bytes are still
        // initialised memory of `slot` (drop writes zeros, it does not deallocate).
        let bytes: [u8; 32] = unsafe { std::ptr::read(slot.as_ptr().cast::<[u8; 32]>()) };
        assert_eq!(bytes, [0; 32]);
    }
}
