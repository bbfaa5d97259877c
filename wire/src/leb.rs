//! LEB128 and ZigZag, the integer codings of 07 §3 (D2).
//!
//! Written here rather than taken from the `leb128` crate: that crate works on `io::Read` /
//! `io::Write` streams, which costs a virtual call and an `io::Result` per byte on the hottest
//! path of both boxes (07 §7.3 budgets 4 ns per decoded record). The `leb128` crate is still used
//! as an independent oracle in this crate's property tests. Decoding accepts non-minimal
//! encodings of at most 10 bytes (wire-decisions 17); the encoder is always minimal.

use crate::error::Malformed;

/// Encode `v` as unsigned LEB128 into `out` at `*pos`; returns bytes written.
///
/// `out` must have at least 10 bytes free at `*pos`.
#[inline(always)]
pub fn put_u64(out: &mut [u8], pos: &mut usize, mut v: u64) -> usize {
    let start = *pos;
    while v >= 0x80 {
        out[*pos] = (v as u8) | 0x80;
        *pos += 1;
        v >>= 7;
    }
    out[*pos] = v as u8;
    *pos += 1;
    *pos - start
}

/// Append `v` as unsigned LEB128 to a vector.
#[inline]
pub fn push_u64(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Bytes that `put_u64` writes for `v`.
#[inline(always)]
pub const fn len_u64(v: u64) -> usize {
    let bits = 64 - (v | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}

/// ZigZag-map a signed value (07 §3.6 rx_ts, §3.8 src_lane_seq).
#[inline(always)]
pub const fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// Inverse of [`zigzag`].
#[inline(always)]
pub const fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// A bounds-checked cursor over a byte slice. Every read is checked; nothing panics.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// A reader at offset 0 of `buf`.
    #[inline]
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }
    /// Current offset.
    #[inline(always)]
    pub fn pos(&self) -> usize {
        self.pos
    }
    /// Bytes left.
    #[inline(always)]
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }
    /// True at the end.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.pos >= self.buf.len()
    }
    /// The underlying slice.
    #[inline(always)]
    pub fn buf(&self) -> &'a [u8] {
        self.buf
    }
    /// Skip to the end.
    #[inline]
    pub fn skip_rest(&mut self) {
        self.pos = self.buf.len();
    }
    /// One byte.
    #[inline(always)]
    pub fn u8(&mut self) -> Result<u8, Malformed> {
        let b = *self.buf.get(self.pos).ok_or(Malformed::Truncated)?;
        self.pos += 1;
        Ok(b)
    }
    /// `n` raw bytes.
    #[inline(always)]
    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], Malformed> {
        let end = self.pos.checked_add(n).ok_or(Malformed::Truncated)?;
        let s = self.buf.get(self.pos..end).ok_or(Malformed::Truncated)?;
        self.pos = end;
        Ok(s)
    }
    /// A fixed array.
    #[inline(always)]
    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], Malformed> {
        let s = self.bytes(N)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }
    /// Little-endian u16.
    #[inline(always)]
    pub fn u16_le(&mut self) -> Result<u16, Malformed> {
        Ok(u16::from_le_bytes(self.array()?))
    }
    /// Little-endian u32.
    #[inline(always)]
    pub fn u32_le(&mut self) -> Result<u32, Malformed> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    /// Little-endian u64.
    #[inline(always)]
    pub fn u64_le(&mut self) -> Result<u64, Malformed> {
        Ok(u64::from_le_bytes(self.array()?))
    }
    /// Unsigned LEB128, at most 10 bytes, value must fit in u64.
    #[inline(always)]
    pub fn leb_u64(&mut self) -> Result<u64, Malformed> {
        let p = self.pos;
        // Fast path: one byte (most deltas).
        if let Some(&b) = self.buf.get(p) {
            if b < 0x80 {
                self.pos = p + 1;
                return Ok(b as u64);
            }
        }
        // Two bytes (slots above 127, most rx_ts deltas): no word compaction needed.
        if let Some(&[b0, b1]) = self
            .buf
            .get(p..p + 2)
            .and_then(|s| <&[u8; 2]>::try_from(s).ok())
        {
            if b1 < 0x80 {
                self.pos = p + 2;
                return Ok((b0 & 0x7F) as u64 | (b1 as u64) << 7);
            }
        }
        // Word path: with 8 bytes in reach, find the terminator and compact 7-bit groups
        // branch-free (values of up to 8 bytes, 56 bits: every rx_ts delta and slot).
        if let Some(w) = self.buf.get(p..p + 8) {
            let mut a = [0u8; 8];
            a.copy_from_slice(w);
            let x = u64::from_le_bytes(a);
            let stop = !x & 0x8080_8080_8080_8080;
            if stop != 0 {
                let len = (stop.trailing_zeros() as usize + 1) / 8;
                let keep = if len == 8 {
                    u64::MAX
                } else {
                    (1u64 << (len * 8)) - 1
                };
                let mut v = x & keep & 0x7F7F_7F7F_7F7F_7F7F;
                v = (v & 0x007F_007F_007F_007F) | ((v & 0x7F00_7F00_7F00_7F00) >> 1);
                v = (v & 0x0000_3FFF_0000_3FFF) | ((v & 0x3FFF_0000_3FFF_0000) >> 2);
                v = (v & 0x0000_0000_0FFF_FFFF) | ((v & 0x0FFF_FFFF_0000_0000) >> 4);
                self.pos = p + len;
                return Ok(v);
            }
        }
        self.leb_u64_slow()
    }

    #[inline(never)]
    fn leb_u64_slow(&mut self) -> Result<u64, Malformed> {
        let mut v: u64 = 0;
        let mut shift = 0u32;
        loop {
            let b = self.u8()?;
            if shift == 63 && b > 1 {
                return Err(Malformed::LebTooWide);
            }
            v |= ((b & 0x7F) as u64) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
            shift += 7;
            if shift > 63 {
                return Err(Malformed::LebTooWide);
            }
        }
    }
    /// Unsigned LEB128 that must fit in u32.
    #[inline(always)]
    pub fn leb_u32(&mut self) -> Result<u32, Malformed> {
        let v = self.leb_u64()?;
        u32::try_from(v).map_err(|_| Malformed::LebTooWide)
    }
    /// Unsigned LEB128 that must fit in u16.
    #[inline(always)]
    pub fn leb_u16(&mut self) -> Result<u16, Malformed> {
        let v = self.leb_u64()?;
        u16::try_from(v).map_err(|_| Malformed::LebTooWide)
    }
    /// ZigZag LEB128.
    #[inline(always)]
    pub fn zigzag_i64(&mut self) -> Result<i64, Malformed> {
        Ok(unzigzag(self.leb_u64()?))
    }
}

/// A bounded writer into a fixed slice; writes past the end fail instead of panicking.
#[derive(Debug)]
pub struct Writer<'a> {
    buf: &'a mut [u8],
    pos: usize,
}

impl<'a> Writer<'a> {
    /// A writer at offset 0.
    pub fn new(buf: &'a mut [u8]) -> Self {
        Writer { buf, pos: 0 }
    }
    /// Bytes written so far.
    pub fn pos(&self) -> usize {
        self.pos
    }
    /// Write raw bytes.
    pub fn bytes(&mut self, b: &[u8]) -> Result<(), Malformed> {
        let end = self.pos + b.len();
        self.buf
            .get_mut(self.pos..end)
            .ok_or(Malformed::Truncated)?
            .copy_from_slice(b);
        self.pos = end;
        Ok(())
    }
    /// One byte.
    pub fn u8(&mut self, v: u8) -> Result<(), Malformed> {
        self.bytes(&[v])
    }
    /// LEB128.
    pub fn leb(&mut self, v: u64) -> Result<(), Malformed> {
        let mut tmp = [0u8; 10];
        let mut p = 0;
        put_u64(&mut tmp, &mut p, v);
        self.bytes(&tmp[..p])
    }
}
