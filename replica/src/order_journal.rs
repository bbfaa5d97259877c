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
//! substream holds more than its byte budget (a ring, as the block journal's retention). At
//! open, each segment is scanned and checked; the first entry that is short (a torn tail), fails
//! its CRC or breaks the sequence ends the journal there — the file is truncated and later
//! segments are deleted — so nothing unverified is ever served. A read checks each entry's
//! header and CRC again (a drive that rots a byte serves nothing of that run, and counts it).
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
    /// Frames already held (a restarted replica receiving its stream again): not rewritten.
    pub already_held: u64,
    /// Frames refused: out of sequence, empty or too large.
    pub refused: u64,
    /// Frames found and checked at open.
    pub recovered: u64,
    /// Bytes cut off at open: a torn tail, a bad CRC, a broken sequence, and the segments after.
    pub truncated_bytes: u64,
    /// Segments deleted: the byte budget, or after a bad entry at open.
    pub segments_dropped: u64,
    /// Frames read back and served.
    pub read: u64,
    /// Entries that failed their check on a read (not served).
    pub corrupt: u64,
    /// I/O errors (a failed write stops appends until the next segment).
    pub io_errors: u64,
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
    /// Per frame, from `first`: (segment no, offset, frame length).
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

/// An entry at the start of `b`: `(frame_seq, frame)` if whole and its CRC checks.
fn entry(b: &[u8]) -> Option<(u64, &[u8])> {
    let h = b.get(..ENTRY_HDR)?;
    let seq = u64::from_le_bytes(h[..8].try_into().ok()?);
    let len = u32::from_le_bytes(h[8..12].try_into().ok()?) as usize;
    let sum = u32::from_le_bytes(h[12..16].try_into().ok()?);
    if len == 0 || len > MAX_FRAME {
        return None;
    }
    let f = b.get(ENTRY_HDR..ENTRY_HDR + len)?;
    (crc(seq, f) == sum).then_some((seq, f))
}

/// The order journal of one tenure, both substreams.
#[derive(Debug)]
pub struct OrderJournal {
    cfg: OrderJournalConfig,
    streams: [Stream; 2],
    buf: Vec<u8>,
    c: OrderJournalCounters,
}

impl OrderJournal {
    /// Open (or create) the journal in `cfg.dir`: every segment scanned and checked, a torn or
    /// bad tail cut off (see the module docs).
    pub fn open(cfg: OrderJournalConfig) -> Result<Self, OrderJournalError> {
        let mut j = OrderJournal {
            streams: Default::default(),
            buf: Vec::new(),
            c: OrderJournalCounters::default(),
            cfg,
        };
        for s in 0..2 {
            let dir = j.cfg.dir.join(format!("s{s}"));
            fs::create_dir_all(&dir)?;
            j.recover(s, dir)?;
        }
        Ok(j)
    }

    fn recover(&mut self, s: usize, dir: PathBuf) -> Result<(), OrderJournalError> {
        let mut nos: Vec<u64> = fs::read_dir(&dir)?
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                name.strip_suffix(".ord")?.parse().ok()
            })
            .collect();
        nos.sort_unstable();
        let st = &mut self.streams[s];
        st.dir = dir;
        let mut broken = false;
        for no in nos {
            let path = seg_path(&st.dir, no);
            if broken {
                self.c.truncated_bytes += fs::metadata(&path).map_or(0, |m| m.len());
                fs::remove_file(&path)?;
                self.c.segments_dropped += 1;
                continue;
            }
            let data = fs::read(&path)?;
            let mut off = 0usize;
            while off < data.len() {
                let next = st.next_seq();
                match entry(&data[off..]) {
                    Some((seq, f)) if next.is_none_or(|n| n == seq) => {
                        if st.idx.is_empty() {
                            st.first = seq;
                        }
                        st.idx.push_back((no, off as u64, f.len() as u32));
                        off += ENTRY_HDR + f.len();
                        self.c.recovered += 1;
                    }
                    _ => {
                        broken = true;
                        break;
                    }
                }
            }
            if off < data.len() {
                self.c.truncated_bytes += (data.len() - off) as u64;
                let f = OpenOptions::new().write(true).open(&path)?;
                f.set_len(off as u64)?;
                f.sync_all()?;
            }
            if off == 0 {
                fs::remove_file(&path)?;
                self.c.segments_dropped += 1;
                continue;
            }
            st.bytes += off as u64;
            st.segs.push_back(Segment {
                no,
                file: File::open(&path)?,
                path,
                len: off as u64,
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
            while st.idx.front().is_some_and(|e| e.0 == old.no) {
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
    /// (one read per segment touched). Returns the frames passed to `f`; a frame not held, or
    /// one that fails its check (counted in `corrupt`, with every later one of its segment's
    /// run), is not.
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
            let i = (seq - st.first) as usize;
            let (no, off, _) = st.idx[i];
            // The run of frames of this segment within the range.
            let mut last = seq;
            while last < hi && st.idx[(last + 1 - st.first) as usize].0 == no {
                last += 1;
            }
            let (_, l_off, l_len) = st.idx[(last - st.first) as usize];
            let end = l_off + ENTRY_HDR as u64 + l_len as u64;
            let Some(seg) = st.segs.iter().find(|s| s.no == no) else {
                break;
            };
            self.buf.resize((end - off) as usize, 0);
            if seg.file.read_exact_at(&mut self.buf, off).is_err() {
                self.c.io_errors += 1;
                break;
            }
            let mut at = 0usize;
            for s in seq..=last {
                match entry(&self.buf[at..]) {
                    Some((got, fr)) if got == s => {
                        f(s, fr);
                        n += 1;
                        at += ENTRY_HDR + fr.len();
                    }
                    _ => {
                        self.c.corrupt += last - s + 1;
                        break;
                    }
                }
            }
            seq = last + 1;
        }
        self.c.read += n;
        n
    }
}
