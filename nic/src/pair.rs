//! [`PathPair`]: the two redundant replication paths of spec 07 §3.1 as two independent ports.
//!
//! Path A and path B have separate NIC ports, switches and fibres; here they are two ports of
//! any backend (two UDP sockets on a dev box). A frame goes out on both, identical except for
//! the path bit (frame header byte 16, bit 0: 0 on A, 1 on B), which the pair sets from the
//! one frame the caller passes, through a scratch buffer allocated once: no allocation per
//! frame.
//!
//! The gate of spec 07 §4.2 is, per frame: write on A, write on B, fence, then release. With a
//! pair that is [`PathPair::send_frame`] until both paths took it, then [`PathPair::flush`], then
//! the caller's release store; [`PathPair::write_and_fence`] does the first two with a bounded
//! number of retries. [`PathPair::last_tx`] gives the software TX stamps of both writes.

use crate::{
    Dest, NicError, Port, PortCounters, RxBatch, RxPacket, TxPacket, TxStamp, FLAG_PATH_B,
    FRAME_FLAGS_OFFSET,
};

/// One of the two replication paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Path {
    /// Path A (path bit 0).
    A,
    /// Path B (path bit 1).
    B,
}

impl Path {
    /// Both paths, A first.
    pub const BOTH: [Path; 2] = [Path::A, Path::B];

    /// 0 for A, 1 for B.
    pub const fn index(self) -> usize {
        match self {
            Path::A => 0,
            Path::B => 1,
        }
    }
}

/// Where the path bit lives in a frame: byte `offset`, bits `mask` (clear on A, set on B).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathMark {
    /// Byte offset in the frame.
    pub offset: usize,
    /// Bits to set for path B; 0 sends identical bytes on both paths.
    pub mask: u8,
}

impl PathMark {
    /// vyrn's frame header: byte 16 (`flags`), bit 0 (spec 07 §3.2).
    pub const VYRN: PathMark = PathMark {
        offset: FRAME_FLAGS_OFFSET,
        mask: FLAG_PATH_B,
    };
    /// No path bit: both paths carry the frame exactly as given.
    pub const NONE: PathMark = PathMark { offset: 0, mask: 0 };
}

/// Per-path outcome of [`PathPair::send_frame`]: `Ok(true)` queued, `Ok(false)` backpressure
/// (retry that path), `Err` refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PairSend {
    /// Path A's outcome.
    pub a: Result<bool, NicError>,
    /// Path B's outcome.
    pub b: Result<bool, NicError>,
}

impl PairSend {
    /// True when both paths queued the frame.
    pub fn both(&self) -> bool {
        self.a == Ok(true) && self.b == Ok(true)
    }

    /// The outcome on `path`.
    pub fn get(&self, path: Path) -> Result<bool, NicError> {
        match path {
            Path::A => self.a,
            Path::B => self.b,
        }
    }
}

/// A port for path A and a port for path B. See the module docs.
pub struct PathPair<A, B = A> {
    a: A,
    b: B,
    mark: PathMark,
    scratch: Box<[u8]>,
}

impl<A: std::fmt::Debug, B: std::fmt::Debug> std::fmt::Debug for PathPair<A, B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PathPair")
            .field("a", &self.a)
            .field("b", &self.b)
            .field("mark", &self.mark)
            .finish()
    }
}

impl<A: Port, B: Port> PathPair<A, B> {
    /// Pair `a` (path A) with `b` (path B); `mark` locates the path bit.
    pub fn new(a: A, b: B, mark: PathMark) -> Self {
        let scratch = vec![0u8; a.max_payload().max(b.max_payload())].into_boxed_slice();
        PathPair {
            a,
            b,
            mark,
            scratch,
        }
    }

    /// Path A's port.
    pub fn a(&self) -> &A {
        &self.a
    }

    /// Path A's port, mutably (e.g. for batch sends of frames that already carry the bit).
    pub fn a_mut(&mut self) -> &mut A {
        &mut self.a
    }

    /// Path B's port.
    pub fn b(&self) -> &B {
        &self.b
    }

    /// Path B's port, mutably.
    pub fn b_mut(&mut self) -> &mut B {
        &mut self.b
    }

    /// The two ports.
    pub fn into_parts(self) -> (A, B) {
        (self.a, self.b)
    }

    /// Send `frame` on `path` only, with that path's bit. `Ok(false)` is backpressure.
    pub fn send_on(&mut self, path: Path, frame: &[u8], dest: Dest) -> Result<bool, NicError> {
        let bytes = marked(&mut self.scratch, self.mark, path, frame)?;
        let pkt = [TxPacket::to(bytes, dest)];
        let n = match path {
            Path::A => self.a.send_batch(&pkt)?,
            Path::B => self.b.send_batch(&pkt)?,
        };
        Ok(n == 1)
    }

    /// Send `frame` on both paths (A first), B with the path bit set and A with it clear.
    ///
    /// Each path's outcome is independent: retry only a path that returned `Ok(false)`.
    pub fn send_frame(&mut self, frame: &[u8], dest: Dest) -> PairSend {
        PairSend {
            a: self.send_on(Path::A, frame, dest),
            b: self.send_on(Path::B, frame, dest),
        }
    }

    /// Fence both paths. Both are flushed even if the first fails; the first error is returned.
    pub fn flush(&mut self) -> Result<(), NicError> {
        let ra = self.a.flush();
        let rb = self.b.flush();
        ra.and(rb)
    }

    /// The gate's write step: send `frame` on both paths, retrying a path that pushes back up
    /// to `max_tries` times in all, then fence both. [`NicError::WouldBlock`] if a path never
    /// took it or never flushed; any other error as the port reported it.
    pub fn write_and_fence(
        &mut self,
        frame: &[u8],
        dest: Dest,
        max_tries: u32,
    ) -> Result<(), NicError> {
        let mut done = [false; 2];
        let mut tries = 0u32;
        while !(done[0] && done[1]) {
            if tries >= max_tries.max(1) {
                return Err(NicError::WouldBlock);
            }
            tries += 1;
            for path in Path::BOTH {
                if !done[path.index()] {
                    done[path.index()] = self.send_on(path, frame, dest)?;
                }
            }
        }
        loop {
            match self.flush() {
                Err(NicError::WouldBlock) if tries < max_tries.max(1) => tries += 1,
                r => return r,
            }
        }
    }

    /// Receive from both paths into one caller batch each; the counts, `[A, B]`.
    ///
    /// Both paths are always polled; an error on either is returned after that (each batch
    /// still holds what its path received).
    pub fn recv_both(&mut self, a: &mut RxBatch, b: &mut RxBatch) -> Result<[usize; 2], NicError> {
        let ra = self.a.recv_batch(a);
        let rb = self.b.recv_batch(b);
        Ok([ra?, rb?])
    }

    /// Receive up to `max_per_path` packets from each path (A first), lending each to `f` with
    /// its path. Returns the total.
    pub fn poll_recv(
        &mut self,
        max_per_path: usize,
        f: &mut dyn FnMut(Path, RxPacket<'_>),
    ) -> Result<usize, NicError> {
        let ra = self.a.poll_recv(max_per_path, &mut |p| f(Path::A, p));
        let rb = self.b.poll_recv(max_per_path, &mut |p| f(Path::B, p));
        Ok(ra? + rb?)
    }

    /// Both ports' counters, `[A, B]`.
    pub fn counters(&self) -> [PortCounters; 2] {
        [self.a.counters(), self.b.counters()]
    }

    /// Both ports' last TX stamps, `[A, B]`.
    pub fn last_tx(&self) -> [TxStamp; 2] {
        [self.a.last_tx(), self.b.last_tx()]
    }
}

/// `frame` as it goes out on `path`: the frame itself when its bit already matches, else a
/// copy in `scratch` with the bit set (B) or cleared (A).
fn marked<'a>(
    scratch: &'a mut [u8],
    mark: PathMark,
    path: Path,
    frame: &'a [u8],
) -> Result<&'a [u8], NicError> {
    if mark.mask == 0 {
        return Ok(frame);
    }
    let Some(&byte) = frame.get(mark.offset) else {
        return Err(NicError::FrameTooShort {
            len: frame.len(),
            need: mark.offset + 1,
        });
    };
    let want = match path {
        Path::A => byte & !mark.mask,
        Path::B => byte | mark.mask,
    };
    if want == byte {
        return Ok(frame);
    }
    let max = scratch.len();
    let Some(copy) = scratch.get_mut(..frame.len()) else {
        return Err(NicError::Oversize {
            len: frame.len(),
            max,
        });
    };
    copy.copy_from_slice(frame);
    copy[mark.offset] = want;
    Ok(copy)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marked_sets_and_clears_the_bit_without_touching_the_rest() {
        let mut scratch = [0u8; 64];
        let mut frame = [0xAAu8; 24];
        frame[16] = 0b1000_0010;
        let a = marked(&mut scratch, PathMark::VYRN, Path::A, &frame)
            .unwrap()
            .to_vec();
        assert_eq!(a, frame);
        let b = marked(&mut scratch, PathMark::VYRN, Path::B, &frame)
            .unwrap()
            .to_vec();
        assert_eq!(b[16], 0b1000_0011);
        assert_eq!(b[..16], frame[..16]);
        assert_eq!(b[17..], frame[17..]);
        frame[16] |= 1;
        let a = marked(&mut scratch, PathMark::VYRN, Path::A, &frame).unwrap();
        assert_eq!(a[16], 0b1000_0010);
        assert_eq!(
            marked(&mut scratch, PathMark::VYRN, Path::B, &frame[..16]),
            Err(NicError::FrameTooShort { len: 16, need: 17 })
        );
        let big = [0u8; 65];
        assert_eq!(
            marked(&mut scratch, PathMark::VYRN, Path::B, &big),
            Err(NicError::Oversize { len: 65, max: 64 })
        );
        assert_eq!(
            marked(&mut scratch, PathMark::NONE, Path::B, &[]),
            Ok(&[][..])
        );
    }
}
