//! The order journal (07 §4.10): peers serve a `RepairReq` "from their in-memory frame store
//! (REP_PEER_RING_MS) and then from their NVMe order journal (§8)". Every frame order RX
//! delivers is appended here, byte for byte, so a frame older than the memory store — a replica
//! restarted past the box's frame ring and its peers' 2 s of memory — can still be re-served
//! exactly as the stream core wrote it (the receiver decodes it as any other frame and trusts
//! it once its block's `order_root` checks).
//!
//! **Why a journal of its own, not the block journal.** `REP_BlockRecord` (07 §8.2) keeps a
//! block's ORDER section bytes and its `pkt_hash` list, not the frames: no frame boundaries, no
//! HASH runs as encoded, no HEADER frames. A frame cannot be rebuilt byte-exact from it, and a
//! frame addressed by `(stream, frame_seq)` must be. So frames go to segment files of their own,
//! per substream, appended through a buffer (one write per 64 KiB, not per frame), flushed on
//! every tick of the node and before a read needs them.
//!
//! Layout: `<dir>/s<stream>/<segment no, 12 digits>.ord` (a replica's `<dir>` is
//! `<first journal drive>/order/e<epoch>-t<tenure>`), each a run of entries
//! `frame_seq u64 LE ‖ len u32 LE ‖ crc32c(frame_seq ‖ len ‖ frame) u32 LE ‖ frame`, with
//! `frame_seq` consecutive across a substream's segments. The oldest segment is deleted once a
//! substream holds more than its byte budget (a ring, as the block journal's retention).
//!
//! **Recovery.** At open, each segment is scanned and every entry checked; every entry that
//! checks and follows the ones before it is kept, whatever lies before it (07 §8: a bad entry is
//! skipped, never trusted, and never costs the entries after it). A bad entry — short, a length
//! out of range, a bad CRC — cannot be trusted to say where the next one starts (its length may
//! be the byte that rotted), so the scan resynchronises: it looks byte by byte, within the
//! segment, for the next offset where a whole entry with a good CRC starts. Each such place is an
//! [`OrderSkip`] with its [`OrderFault`]; the frames it cost are holes in the substream (counted
//! in `skipped`, never served: a peer repairs them). A whole entry whose `frame_seq` does not
//! follow is skipped too ([`OrderFault::Sequence`]); a gap in `frame_seq` is accepted only as
//! far as the bytes skipped since the last entry kept could have held its frames, so no
//! `frame_seq` read from disk makes recovery do more than the segments' bytes allow. The newest
//! segment's bytes after its last whole entry, with no whole entry after them, are the torn
//! tail of the last write: cut off, and appends continue there. Nothing unverified is ever
//! served. A read checks each entry's header and CRC again (a drive that rots a byte after open
//! serves nothing of that entry, and counts it).
//!
//! The CRC is CRC-32C (`crc-fast`, hardware-accelerated; already in the workspace's lock): a
//! torn or rotted entry is what it must catch, not an adversary — a frame's authenticity is its
//! block's `order_root` and signed header, checked by whoever receives it.

use std::collections::VecDeque;
use std::fs::{self, File, OpenOptions};
use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// The order journal's directory in a replica's first journal drive (one subdirectory per
/// epoch and tenure below it).
pub const ORDER_DIR: &str = "order";

/// Bytes of an entry's header: `frame_seq u64 ‖ len u32 ‖ crc32c u32`.
pub const ENTRY_HDR: usize = 16;

/// The largest frame an entry holds (a UDP payload).
pub const MAX_FRAME: usize = 65_507;

/// Default segment size.
pub const SEGMENT_BYTES: u64 = 64 << 20;

/// Default byte budget per substream (a dev home's whole run; a REF replica sizes it for its
/// catch-up window).
pub const MAX_BYTES: u64 = 1 << 30;

/// Where and how much.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderJournalConfig {
    /// The journal's directory (one per tenure: frame numbering restarts with each).
    pub dir: PathBuf,
    /// Bytes per segment file before the next is started.
    pub segment_bytes: u64,
    /// Bytes kept per substream; the oldest segment goes first.
    pub max_bytes: u64,
}

impl OrderJournalConfig {
    /// A journal in `dir` with the default sizes.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        OrderJournalConfig {
            dir: dir.into(),
            segment_bytes: SEGMENT_BYTES,
            max_bytes: MAX_BYTES,
        }
    }
}

/// Counters (one writer: the tile).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OrderJournalCounters {
    /// Frames appended.
    pub appended: u64,
    /// Frames already held (a restarted replica receiving its stream again): not rewritten. A
    /// frame recovery left as a hole is counted here too (the journal is append-only).
    pub already_held: u64,
    /// Frames refused: out of sequence, empty or too large.
    pub refused: u64,
    /// Frames found and checked at open.
    pub recovered: u64,
    /// Frames lost at open between entries kept (holes: bad entries skipped, never served).
    pub skipped: u64,
    /// Places recovery skipped bad bytes (each also in [`OrderJournal::skips`]).
    pub bad_entries: u64,
    /// Bytes cut off at open: the newest segment's torn tail, and segments before the first
    /// entry kept that hold no whole entry.
    pub truncated_bytes: u64,
    /// Segments deleted: the byte budget, or at open, one with no whole entry (see
    /// `truncated_bytes`).
    pub segments_dropped: u64,
    /// Frames read back and served.
    pub read: u64,
    /// Entries that failed their check on a read (not served).
    pub corrupt: u64,
    /// I/O errors (a failed write stops appends until the next segment).
    pub io_errors: u64,
}

/// Why recovery skipped the bytes at a place in a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OrderFault {
    /// Fewer than [`ENTRY_HDR`] bytes left, or a frame running past the segment's end.
    Short,
    /// A length of 0 or over [`MAX_FRAME`].
    Length,
    /// The CRC does not match.
    Crc,
    /// A whole entry whose `frame_seq` does not follow the entries kept before it.
    Sequence,
}

/// One place recovery skipped (07 §8: never trusted, never the end of the journal).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OrderSkip {
    /// Substream.
    pub stream: u8,
    /// Segment number.
    pub segment: u64,
    /// Offset of the bad bytes in the segment.
    pub offset: u64,
    /// Bytes passed over: to the next whole entry, or to the segment's end.
    pub len: u64,
    /// Why.
    pub why: OrderFault,
}

/// Why the journal could not open.
#[derive(Debug)]
pub enum OrderJournalError {
    /// The directory or a segment could not be read, written or created.
    Io(std::io::Error),
}

impl std::fmt::Display for OrderJournalError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OrderJournalError::Io(e) => write!(f, "order journal: {e}"),
        }
    }
}

impl From<std::io::Error> for OrderJournalError {
    fn from(e: std::io::Error) -> Self {
        OrderJournalError::Io(e)
    }
}

#[derive(Debug)]
struct Segment {
    no: u64,
    path: PathBuf,
    /// Read handle.
    file: File,
    /// Bytes written (the newest segment: including what is still buffered).
    len: u64,
}

#[derive(Debug, Default)]
struct Stream {
    dir: PathBuf,
    segs: VecDeque<Segment>,
    /// Per frame, from `first`: (segment no, offset, frame length); length 0 is a hole (a frame
    /// recovery could not keep). The first and the last are never holes.
    idx: VecDeque<(u64, u64, u32)>,
    /// `frame_seq` of `idx[0]`.
    first: u64,
    /// The newest segment's writer, and how many of its bytes are on disk.
    w: Option<BufWriter<File>>,
    flushed: u64,
    bytes: u64,
}

impl Stream {
    fn next_seq(&self) -> Option<u64> {
        (!self.idx.is_empty()).then(|| self.first + self.idx.len() as u64)
    }
}

fn crc(seq: u64, frame: &[u8]) -> u32 {
    let mut d = crc_fast::Digest::new(crc_fast::CrcAlgorithm::Crc32Iscsi);
    d.update(&seq.to_le_bytes());
    d.update(&(frame.len() as u32).to_le_bytes());
    d.update(frame);
    d.finalize() as u32
}

fn seg_path(dir: &Path, no: u64) -> PathBuf {
    dir.join(format!("{no:012}.ord"))
}

/// The entry at the start of `b`: `(frame_seq, frame)` if whole and its CRC checks, else why
/// not. The length is checked before any CRC is computed.
fn check(b: &[u8]) -> Result<(u64, &[u8]), OrderFault> {
    let Some(h) = b.get(..ENTRY_HDR) else {
        return Err(OrderFault::Short);
    };
    let mut w8 = [0u8; 8];
    let mut w4 = [0u8; 4];
    w8.copy_from_slice(&h[..8]);
    let seq = u64::from_le_bytes(w8);
    w4.copy_from_slice(&h[8..12]);
    let len = u32::from_le_bytes(w4) as usize;
    w4.copy_from_slice(&h[12..16]);
    let sum = u32::from_le_bytes(w4);
    if len == 0 || len > MAX_FRAME {
        return Err(OrderFault::Length);
    }
    let Some(f) = b.get(ENTRY_HDR..ENTRY_HDR + len) else {
        return Err(OrderFault::Short);
    };
    if crc(seq, f) != sum {
        return Err(OrderFault::Crc);
    }
    Ok((seq, f))
}

/// An entry at the start of `b`: `(frame_seq, frame)` if whole and its CRC checks.
fn entry(b: &[u8]) -> Option<(u64, &[u8])> {
    check(b).ok()
}

/// The first offset at or after `from` where a whole entry with a good CRC starts: after a bad
/// entry its length cannot be trusted to find the next. Bounded by `b`'s length (one cheap
/// length check per offset, a CRC only where the length fits).
fn resync(b: &[u8], from: usize) -> Option<usize> {
    let last = b.len().checked_sub(ENTRY_HDR)?;
    (from..=last).find(|&p| b.get(p..).is_some_and(|r| check(r).is_ok()))
}

/// The order journal of one tenure, both substreams.
#[derive(Debug)]
pub struct OrderJournal {
    cfg: OrderJournalConfig,
    streams: [Stream; 2],
    buf: Vec<u8>,
    c: OrderJournalCounters,
    skips: Vec<OrderSkip>,
}

impl OrderJournal {
    /// Open (or create) the journal in `cfg.dir`: every segment scanned and checked, a torn or
    /// bad tail cut off (see the module docs).
    pub fn open(cfg: OrderJournalConfig) -> Result<Self, OrderJournalError> {
        let mut j = OrderJournal {
            streams: Default::default(),
            buf: Vec::new(),
            c: OrderJournalCounters::default(),
            skips: Vec::new(),
            cfg,
        };
        for s in 0..2 {
            let dir = j.cfg.dir.join(format!("s{s}"));
            fs::create_dir_all(&dir)?;
            j.recover(s, dir)?;
        }
        Ok(j)
    }

    /// Scan substream `s`'s segments (see the module docs, "Recovery").
    fn recover(&mut self, s: usize, dir: PathBuf) -> Result<(), OrderJournalError> {
        let mut nos: Vec<u64> = fs::read_dir(&dir)?
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                name.strip_suffix(".ord")?.parse().ok()
            })
            .collect();
        nos.sort_unstable();
        let newest = nos.last().copied();
        let st = &mut self.streams[s];
        st.dir = dir;
        // Bytes passed over since the last entry kept (across segments): a gap in `frame_seq`
        // stands for at most as many frames as those bytes could have held.
        let mut lost = 0u64;
        for no in nos {
            let path = seg_path(&st.dir, no);
            let data = fs::read(&path)?;
            let is_last = Some(no) == newest;
            let mut off = 0usize;
            // Where this segment's lost bytes start (the end of its last entry kept).
            let mut lost_from = 0usize;
            // The end of the last whole entry (kept or out of sequence): a torn tail is cut
            // back to here.
            let mut whole = 0usize;
            while off < data.len() {
                let why = match check(&data[off..]) {
                    Ok((seq, f)) => {
                        let end = off + ENTRY_HDR + f.len();
                        whole = end;
                        let max_gap = (lost + (off - lost_from) as u64) / (ENTRY_HDR as u64 + 1);
                        match st.next_seq() {
                            Some(n) if seq < n || seq - n > max_gap => {
                                self.c.bad_entries += 1;
                                self.skips.push(OrderSkip {
                                    stream: s as u8,
                                    segment: no,
                                    offset: off as u64,
                                    len: (end - off) as u64,
                                    why: OrderFault::Sequence,
                                });
                            }
                            next => {
                                match next {
                                    // The frames of the bytes skipped: holes.
                                    Some(n) => {
                                        for _ in n..seq {
                                            st.idx.push_back((no, off as u64, 0));
                                        }
                                        self.c.skipped += seq - n;
                                    }
                                    None => st.first = seq,
                                }
                                st.idx.push_back((no, off as u64, f.len() as u32));
                                self.c.recovered += 1;
                                lost = 0;
                                lost_from = end;
                            }
                        }
                        off = end;
                        continue;
                    }
                    Err(why) => why,
                };
                let skip_to = match resync(&data, off + 1) {
                    Some(p) => p,
                    // Nothing whole after it in the newest segment: the torn tail.
                    None if is_last => break,
                    None => data.len(),
                };
                self.c.bad_entries += 1;
                self.skips.push(OrderSkip {
                    stream: s as u8,
                    segment: no,
                    offset: off as u64,
                    len: (skip_to - off) as u64,
                    why,
                });
                off = skip_to;
            }
            let keep = if is_last { whole } else { data.len() };
            lost += keep.saturating_sub(lost_from) as u64;
            // A segment with nothing whole before the first entry kept is of no use; the
            // newest cut to nothing is an empty tail.
            if keep == 0 || st.idx.is_empty() {
                self.c.truncated_bytes += data.len() as u64;
                fs::remove_file(&path)?;
                self.c.segments_dropped += 1;
                continue;
            }
            if keep < data.len() {
                self.c.truncated_bytes += (data.len() - keep) as u64;
                let f = OpenOptions::new().write(true).open(&path)?;
                f.set_len(keep as u64)?;
                f.sync_all()?;
            }
            st.bytes += keep as u64;
            st.segs.push_back(Segment {
                no,
                file: File::open(&path)?,
                path,
                len: keep as u64,
            });
        }
        // Appends continue the newest segment.
        if let Some(last) = st.segs.back() {
            let f = OpenOptions::new().append(true).open(&last.path)?;
            st.w = Some(BufWriter::with_capacity(64 << 10, f));
            st.flushed = last.len;
        }
        Ok(())
    }

    /// The places recovery skipped at open, in order (each counted in `bad_entries`).
    pub fn skips(&self) -> &[OrderSkip] {
        &self.skips
    }

    /// Counters.
    pub fn counters(&self) -> OrderJournalCounters {
        self.c
    }

    /// The oldest and newest `frame_seq` held for `stream`.
    pub fn span(&self, stream: u8) -> Option<(u64, u64)> {
        let st = self.streams.get(stream as usize)?;
        Some((st.first, st.next_seq()? - 1))
    }

    /// Bytes held for `stream` (entries included).
    pub fn bytes(&self, stream: u8) -> u64 {
        self.streams.get(stream as usize).map_or(0, |s| s.bytes)
    }

    /// Append frame `seq` of `stream` (delivered in order by order RX). A frame already held (a
    /// restart receiving its stream again from frame 1) is skipped; one out of sequence is
    /// refused. False if not written.
    pub fn append(&mut self, stream: u8, seq: u64, frame: &[u8]) -> bool {
        let Some(st) = self.streams.get_mut(stream as usize) else {
            self.c.refused += 1;
            return false;
        };
        if let Some(next) = st.next_seq() {
            if seq < next && seq >= st.first {
                self.c.already_held += 1;
                return false;
            }
            if seq != next {
                self.c.refused += 1;
                return false;
            }
        }
        if frame.is_empty() || frame.len() > MAX_FRAME {
            self.c.refused += 1;
            return false;
        }
        let need = (ENTRY_HDR + frame.len()) as u64;
        let roll = match st.segs.back() {
            None => true,
            Some(s) => st.w.is_none() || s.len + need > self.cfg.segment_bytes,
        };
        if roll && Self::roll(st, &mut self.c).is_err() {
            self.c.io_errors += 1;
            return false;
        }
        let (Some(w), Some(seg)) = (st.w.as_mut(), st.segs.back_mut()) else {
            return false;
        };
        let mut hdr = [0u8; ENTRY_HDR];
        hdr[..8].copy_from_slice(&seq.to_le_bytes());
        hdr[8..12].copy_from_slice(&(frame.len() as u32).to_le_bytes());
        hdr[12..].copy_from_slice(&crc(seq, frame).to_le_bytes());
        if w.write_all(&hdr).and_then(|_| w.write_all(frame)).is_err() {
            // The segment's tail is unknown now: no more appends to it (the next starts a new
            // one, and a reopen cuts this one at its last good entry).
            self.c.io_errors += 1;
            st.w = None;
            return false;
        }
        if st.idx.is_empty() {
            st.first = seq;
        }
        st.idx.push_back((seg.no, seg.len, frame.len() as u32));
        seg.len += need;
        st.bytes += need;
        self.c.appended += 1;
        // The ring: the oldest segment goes once the substream is over its budget.
        while st.bytes > self.cfg.max_bytes && st.segs.len() > 1 {
            let Some(old) = st.segs.pop_front() else {
                break;
            };
            // With it go the holes recovery left before the next frame held.
            while st.idx.front().is_some_and(|e| e.0 == old.no || e.2 == 0) {
                st.idx.pop_front();
                st.first += 1;
            }
            st.bytes -= old.len;
            let _ = fs::remove_file(&old.path);
            self.c.segments_dropped += 1;
        }
        true
    }

    /// Start a new segment after the newest.
    fn roll(st: &mut Stream, c: &mut OrderJournalCounters) -> std::io::Result<()> {
        if let Some(mut w) = st.w.take() {
            if w.flush().is_err() {
                c.io_errors += 1;
            }
        }
        let no = st.segs.back().map_or(0, |s| s.no + 1);
        let path = seg_path(&st.dir, no);
        let f = OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .open(&path)?;
        st.segs.push_back(Segment {
            no,
            file: File::open(&path)?,
            path,
            len: 0,
        });
        st.w = Some(BufWriter::with_capacity(64 << 10, f));
        st.flushed = 0;
        Ok(())
    }

    /// Write what is buffered (the node's tick; a read flushes what it needs itself).
    pub fn flush(&mut self) {
        for st in &mut self.streams {
            if let (Some(w), Some(seg)) = (st.w.as_mut(), st.segs.back()) {
                if st.flushed < seg.len {
                    if w.flush().is_err() {
                        self.c.io_errors += 1;
                        st.w = None;
                    } else {
                        st.flushed = seg.len;
                    }
                }
            }
        }
    }

    /// Frames `from..=to` of `stream` that the journal holds, in order, each checked, to `f`
    /// (one read per segment touched). Returns the frames passed to `f`; a frame not held (a
    /// hole recovery left, too), or one that fails its check (counted in `corrupt`), is not.
    pub fn read(&mut self, stream: u8, from: u64, to: u64, mut f: impl FnMut(u64, &[u8])) -> u64 {
        let Some(st) = self.streams.get_mut(stream as usize) else {
            return 0;
        };
        let Some(next) = st.next_seq() else {
            return 0;
        };
        let (lo, hi) = (from.max(st.first), to.min(next - 1));
        if lo > hi {
            return 0;
        }
        // What a read needs must be on disk.
        let newest = st.segs.back().map(|s| s.no);
        if let (Some(w), Some(seg)) = (st.w.as_mut(), st.segs.back()) {
            let (e_no, e_off, e_len) = st.idx[(hi - st.first) as usize];
            if Some(e_no) == newest && e_off + ENTRY_HDR as u64 + e_len as u64 > st.flushed {
                if w.flush().is_err() {
                    self.c.io_errors += 1;
                    return 0;
                }
                st.flushed = seg.len;
            }
        }
        let mut n = 0;
        let mut seq = lo;
        while seq <= hi {
            let at = |s: u64| st.idx[(s - st.first) as usize];
            let no = at(seq).0;
            // The run of frames of this segment within the range.
            let mut last = seq;
            while last < hi && at(last + 1).0 == no {
                last += 1;
            }
            // The bytes from its first frame held to its last (holes are not read).
            let Some(a) = (seq..=last).find(|&s| at(s).2 != 0) else {
                seq = last + 1;
                continue;
            };
            let b = (a..=last).rev().find(|&s| at(s).2 != 0).unwrap_or(a);
            let off = at(a).1;
            let (_, b_off, b_len) = at(b);
            let end = b_off + ENTRY_HDR as u64 + b_len as u64;
            let Some(seg) = st.segs.iter().find(|s| s.no == no) else {
                break;
            };
            self.buf.resize((end - off) as usize, 0);
            if seg.file.read_exact_at(&mut self.buf, off).is_err() {
                self.c.io_errors += 1;
                break;
            }
            // Each entry from its own offset: one that rotted costs only itself.
            for s in a..=last {
                let (_, e_off, e_len) = at(s);
                if e_len == 0 {
                    continue;
                }
                match self.buf.get((e_off - off) as usize..).and_then(entry) {
                    Some((got, fr)) if got == s && fr.len() == e_len as usize => {
                        f(s, fr);
                        n += 1;
                    }
                    _ => self.c.corrupt += 1,
                }
            }
            seq = last + 1;
        }
        self.c.read += n;
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry_bytes(seq: u64, frame: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&seq.to_le_bytes());
        v.extend_from_slice(&(frame.len() as u32).to_le_bytes());
        v.extend_from_slice(&crc(seq, frame).to_le_bytes());
        v.extend_from_slice(frame);
        v
    }

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("vyrn-oj-unit-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(d.join("s0")).unwrap();
        d
    }

    /// A well-formed entry whose `frame_seq` jumps further than the bytes skipped could hold
    /// (here past any real stream: a CRC is no authentication) is skipped for its sequence: no
    /// run of holes, and every frame after it kept (07 §8).
    #[test]
    fn a_frame_seq_far_ahead_is_skipped_not_a_gap() {
        let d = dir("far");
        let mut seg = Vec::new();
        for s in 1..=10u64 {
            seg.extend(entry_bytes(s, &[s as u8; 20]));
        }
        seg.extend(entry_bytes(u64::MAX - 5, &[0xEE; 20]));
        for s in 11..=20u64 {
            seg.extend(entry_bytes(s, &[s as u8; 20]));
        }
        fs::write(seg_path(&d.join("s0"), 0), &seg).unwrap();
        let j = OrderJournal::open(OrderJournalConfig::new(&d)).unwrap();
        let c = j.counters();
        assert_eq!((c.recovered, c.skipped, c.bad_entries), (20, 0, 1));
        assert_eq!(j.skips()[0].why, OrderFault::Sequence);
        assert_eq!(j.span(0), Some((1, 20)));
        let _ = fs::remove_dir_all(&d);
    }

    /// A gap in `frame_seq` after bad bytes is taken only as far as those bytes could have held
    /// its frames; entries beyond that stay skipped (and, whole, are not cut as a torn tail), and
    /// appends go on from the last frame kept.
    #[test]
    fn a_gap_is_bounded_by_the_bytes_skipped() {
        let d = dir("gap");
        let mut seg = Vec::new();
        for s in 1..=10u64 {
            seg.extend(entry_bytes(s, &[s as u8; 20]));
        }
        // 40 bad bytes hold at most two entries (each at least ENTRY_HDR + 1).
        seg.extend([0xA5u8; 40]);
        seg.extend(entry_bytes(13, &[13; 20]));
        let far_from = seg.len();
        for s in 100..=104u64 {
            seg.extend(entry_bytes(s, &[s as u8; 20]));
        }
        let whole = seg.len() as u64;
        fs::write(seg_path(&d.join("s0"), 0), &seg).unwrap();
        let mut j = OrderJournal::open(OrderJournalConfig::new(&d)).unwrap();
        let c = j.counters();
        assert_eq!((c.recovered, c.skipped, c.bad_entries), (11, 2, 6));
        assert_eq!(c.truncated_bytes, 0);
        assert_eq!(j.skips()[0].why, OrderFault::Length);
        assert!(j.skips()[1..].iter().all(|k| k.why == OrderFault::Sequence));
        assert_eq!(j.skips()[1].offset, far_from as u64);
        assert_eq!(j.span(0), Some((1, 13)));
        assert_eq!(j.bytes(0), whole);
        assert!(j.append(0, 14, &[14; 20]));
        let mut got = Vec::new();
        j.read(0, 1, 14, |s, f| got.push((s, f[0])));
        assert_eq!(got.len(), 12);
        assert!(got.iter().all(|&(s, b)| b == s as u8 && s != 11 && s != 12));
        drop(j);
        let j = OrderJournal::open(OrderJournalConfig::new(&d)).unwrap();
        assert_eq!(j.span(0), Some((1, 14)));
        assert_eq!(j.counters().recovered, 12);
        let _ = fs::remove_dir_all(&d);
    }
}
