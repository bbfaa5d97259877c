//! The cert journal (07 §8.2): every finality certificate, root certificate and seal
//! extension, appended to a small append-only file mirrored on drives 0 and 1.
//!
//! ```text
//! entry: len u32 LE │ kind u8 │ reserved [3] = 0 │ hash [32] │ payload (len bytes)
//!        hash = BLAKE3("vyrn v1 cert entry" ‖ len ‖ kind ‖ reserved ‖ payload)
//! ```
//!
//! **Recovery.** Each copy is scanned and every entry checked; every entry that verifies is
//! kept, whatever lies before it (07 §8: a bad entry is skipped, never trusted, and never costs
//! the entries after it). A bad entry — an unknown kind, a length out of range, a hash that does
//! not match — cannot be trusted to say where the next one starts (its length may be what
//! rotted), so the scan resynchronises: it looks byte by byte for the next offset where a whole
//! entry (a valid head, its payload inside the file, its hash good) starts, bounded by the
//! file's length. Bytes after the last entry that verifies, with none after them, are the torn
//! tail of the last append.
//!
//! Both copies are written at the same offsets, so at open the journal is every entry either
//! copy verifies: the copy that verifies more (copy 0 on a tie) first, then the other's
//! entries that overlap none of those. A run of bytes that verifies in no copy is a
//! [`CertSkip`] with its [`CertFault`] (counted in `skipped`). Each copy is then refilled from
//! the other from its first entry missing, and both are cut to the journal's end, so the mirror
//! survives the loss or damage of either copy, a different entry rotting in each included. With
//! a single drive directory there is one copy.
//!
//! The cert journal runs on `std::fs` (`pwrite` + `fdatasync`) on both backends: at about
//! 1 MB/s of small entries (07 §8.2), O_DIRECT's page-aligned rewrites buy nothing.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// File name of each copy.
pub const CERT_FILE: &str = "certs.vcj";
/// Entry head bytes.
pub const CERT_HEAD_BYTES: usize = 40;
/// Largest payload (allocation guard; a REP_FinalityCert with 16 signers is ~1.1 KB).
pub const MAX_CERT_PAYLOAD: usize = 1 << 20;

/// What an entry holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum CertKind {
    /// `REP_FinalityCert` (07 §6.5).
    Finality = 1,
    /// `REP_RootCert` (07 §7.4).
    Root = 2,
    /// A seal extension (07 §9.4).
    SealExt = 3,
}

impl CertKind {
    fn from_u8(b: u8) -> Option<CertKind> {
        match b {
            1 => Some(CertKind::Finality),
            2 => Some(CertKind::Root),
            3 => Some(CertKind::SealExt),
            _ => None,
        }
    }
}

/// One entry's place (the same in every copy that holds it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CertEntry {
    /// Kind.
    pub kind: CertKind,
    /// Offset of the entry head.
    pub offset: u64,
    /// Payload length.
    pub len: u32,
    /// The entry hash.
    pub hash: [u8; 32],
}

impl CertEntry {
    fn end(&self) -> u64 {
        self.offset + CERT_HEAD_BYTES as u64 + self.len as u64
    }
}

/// Counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CertCounters {
    /// Entries appended.
    pub appended: u64,
    /// Entries recovered.
    pub recovered: u64,
    /// Runs of bytes between entries that no copy verifies (each also in
    /// [`CertJournal::skips`]): skipped at open, never trusted.
    pub skipped: u64,
    /// Places in a copy where its scan skipped bad bytes (the other copy may hold the entry).
    pub bad_entries: u64,
    /// Copies whose torn tail was cut.
    pub torn_tails: u64,
    /// Copies refilled from the other copy at open.
    pub copies_repaired: u64,
    /// Entries copied into a repaired copy.
    pub entries_restored: u64,
    /// Entries a copy verifies that overlap an entry of the copy that verifies more (diverging
    /// copies): lost.
    pub entries_dropped: u64,
    /// Appends refused (payload too large).
    pub refused: u64,
    /// Write or sync errors on one copy (the copy is dropped until the next open).
    pub io_errors: u64,
    /// Reads whose first copy did not verify and the mirror served.
    pub mirror_reads: u64,
}

/// Why recovery skipped bytes of a copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CertFault {
    /// An unknown kind, or reserved bytes that are not zero.
    Head,
    /// A payload length over [`MAX_CERT_PAYLOAD`], or one running past the end of the copy.
    Length,
    /// The entry hash does not match.
    Hash,
}

/// A run of bytes recovery skipped (07 §8: never trusted, never the end of the journal).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CertSkip {
    /// Offset of the run.
    pub offset: u64,
    /// Its bytes, to the next entry that verifies.
    pub len: u64,
    /// Why its first bytes are not an entry.
    pub why: CertFault,
}

/// A cert journal error.
#[derive(Debug)]
pub enum CertError {
    /// Payload over [`MAX_CERT_PAYLOAD`].
    TooLarge,
    /// No copy could be written or read.
    Io(io::Error),
    /// No such entry.
    NotFound,
    /// Neither copy holds bytes matching the entry's hash.
    Corrupt,
}

impl std::fmt::Display for CertError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CertError::TooLarge => f.write_str("cert entry too large"),
            CertError::Io(e) => write!(f, "cert journal: {e}"),
            CertError::NotFound => f.write_str("no such cert entry"),
            CertError::Corrupt => f.write_str("cert entry corrupt in every copy"),
        }
    }
}

impl std::error::Error for CertError {}

#[derive(Debug)]
struct Copy {
    path: PathBuf,
    file: Option<File>,
}

/// The mirrored cert journal.
#[derive(Debug)]
pub struct CertJournal {
    copies: Vec<Copy>,
    entries: Vec<CertEntry>,
    end: u64,
    counters: CertCounters,
    skips: Vec<CertSkip>,
    /// Opened by [`CertJournal::open_read_only`]: nothing is written.
    read_only: bool,
}

fn entry_hash(len: u32, kind: u8, payload: &[u8]) -> [u8; 32] {
    let mut h = blake3::Hasher::new();
    h.update(b"vyrn v1 cert entry");
    h.update(&len.to_le_bytes());
    h.update(&[kind, 0, 0, 0]);
    h.update(payload);
    *h.finalize().as_bytes()
}

fn encode(kind: CertKind, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut v = Vec::with_capacity(CERT_HEAD_BYTES + payload.len());
    v.extend_from_slice(&len.to_le_bytes());
    v.extend_from_slice(&[kind as u8, 0, 0, 0]);
    v.extend_from_slice(&entry_hash(len, kind as u8, payload));
    v.extend_from_slice(payload);
    v
}

fn read_exact_at(f: &File, buf: &mut [u8], off: u64) -> io::Result<bool> {
    let mut n = 0;
    while n < buf.len() {
        match f.read_at(&mut buf[n..], off + n as u64) {
            Ok(0) => return Ok(false),
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

/// Bytes read at a time while resynchronising.
const RESYNC_WINDOW: usize = 64 << 10;

/// The head at `off` of a copy `len` bytes long: kind, payload length and hash, if it could
/// start an entry.
fn parse_head(head: &[u8], off: u64, len: u64) -> Result<(CertKind, u32, [u8; 32]), CertFault> {
    if head.len() < CERT_HEAD_BYTES {
        return Err(CertFault::Length);
    }
    let plen = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
    let Some(kind) = CertKind::from_u8(head[4]) else {
        return Err(CertFault::Head);
    };
    if head[5..8] != [0, 0, 0] {
        return Err(CertFault::Head);
    }
    if plen as usize > MAX_CERT_PAYLOAD || off + CERT_HEAD_BYTES as u64 + plen as u64 > len {
        return Err(CertFault::Length);
    }
    let mut hash = [0u8; 32];
    hash.copy_from_slice(&head[8..40]);
    Ok((kind, plen, hash))
}

/// The entry at `off` of a copy `len` bytes long, or why not.
fn check_at(
    f: &File,
    off: u64,
    len: u64,
    payload: &mut Vec<u8>,
) -> io::Result<Result<CertEntry, CertFault>> {
    let mut head = [0u8; CERT_HEAD_BYTES];
    if off + CERT_HEAD_BYTES as u64 > len || !read_exact_at(f, &mut head, off)? {
        return Ok(Err(CertFault::Length));
    }
    let (kind, plen, hash) = match parse_head(&head, off, len) {
        Ok(h) => h,
        Err(why) => return Ok(Err(why)),
    };
    payload.resize(plen as usize, 0);
    if !read_exact_at(f, payload, off + CERT_HEAD_BYTES as u64)? {
        return Ok(Err(CertFault::Length));
    }
    if entry_hash(plen, kind as u8, payload) != hash {
        return Ok(Err(CertFault::Hash));
    }
    Ok(Ok(CertEntry {
        kind,
        offset: off,
        len: plen,
        hash,
    }))
}

/// The first offset at or after `from` where an entry that verifies starts (after a bad entry,
/// its length cannot be trusted to find the next). Reads the copy once, in windows; only a head
/// that could start an entry costs a payload read and a hash.
fn resync(f: &File, from: u64, len: u64, payload: &mut Vec<u8>) -> io::Result<Option<u64>> {
    let mut buf = vec![0u8; RESYNC_WINDOW];
    let mut p = from;
    while p + CERT_HEAD_BYTES as u64 <= len {
        let n = ((len - p) as usize).min(RESYNC_WINDOW);
        if !read_exact_at(f, &mut buf[..n], p)? {
            return Ok(None);
        }
        for q in 0..=n - CERT_HEAD_BYTES {
            let at = p + q as u64;
            if parse_head(&buf[q..q + CERT_HEAD_BYTES], at, len).is_ok()
                && check_at(f, at, len, payload)?.is_ok()
            {
                return Ok(Some(at));
            }
        }
        p += (n - CERT_HEAD_BYTES + 1) as u64;
    }
    Ok(None)
}

/// One copy as recovery found it.
#[derive(Debug, Clone, Default)]
struct Scan {
    /// Its entries that verify, in order.
    entries: Vec<CertEntry>,
    /// The bad runs it skipped between them.
    skips: Vec<CertSkip>,
}

impl Scan {
    fn holds(&self, e: &CertEntry) -> bool {
        self.entries
            .binary_search_by_key(&e.offset, |x| x.offset)
            .is_ok_and(|i| self.entries[i] == *e)
    }
}

/// Every entry of one copy that verifies, in order, with the bad runs between them (see the
/// module docs, "Recovery").
fn scan(f: &File) -> io::Result<Scan> {
    let len = f.metadata()?.len();
    let mut out = Scan::default();
    let mut off = 0u64;
    let mut payload = Vec::new();
    while off + CERT_HEAD_BYTES as u64 <= len {
        match check_at(f, off, len, &mut payload)? {
            Ok(e) => {
                off = e.end();
                out.entries.push(e);
            }
            Err(why) => match resync(f, off + 1, len, &mut payload)? {
                Some(p) => {
                    out.skips.push(CertSkip {
                        offset: off,
                        len: p - off,
                        why,
                    });
                    off = p;
                }
                // Nothing that verifies after it: the torn tail.
                None => break,
            },
        }
    }
    Ok(out)
}

/// `a`'s entries and those of `b` that overlap none of them, in order.
fn merge(a: &[CertEntry], b: &[CertEntry]) -> Vec<CertEntry> {
    let mut j = 0;
    let extra: Vec<CertEntry> = b
        .iter()
        .filter(|e| {
            while a.get(j).is_some_and(|x| x.end() <= e.offset) {
                j += 1;
            }
            a.get(j).is_none_or(|x| x.offset >= e.end())
        })
        .copied()
        .collect();
    let mut out = Vec::with_capacity(a.len() + extra.len());
    let (mut i, mut k) = (0, 0);
    while i < a.len() || k < extra.len() {
        if k == extra.len() || (i < a.len() && a[i].offset < extra[k].offset) {
            out.push(a[i]);
            i += 1;
        } else {
            out.push(extra[k]);
            k += 1;
        }
    }
    out
}

/// Copy bytes `from..to` of `src` to the same place in `dst`, in 1 MiB pieces (a lost copy can
/// be hours of certificates). False if `src` ends first.
fn copy_range(src: &File, dst: &File, from: u64, to: u64, buf: &mut [u8]) -> io::Result<bool> {
    let mut at = from;
    while at < to {
        let k = ((to - at) as usize).min(buf.len());
        if !read_exact_at(src, &mut buf[..k], at)? {
            return Ok(false);
        }
        dst.write_all_at(&buf[..k], at)?;
        at += k as u64;
    }
    Ok(true)
}

fn open_copy(dir: &Path) -> io::Result<File> {
    std::fs::create_dir_all(dir)?;
    let path = dir.join(CERT_FILE);
    let created = !path.exists();
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)?;
    if created {
        File::open(dir)?.sync_all()?;
    }
    Ok(f)
}

impl CertJournal {
    /// Open the copies in `dirs[0]` and, if given, `dirs[1]` (drives 0 and 1), recover the
    /// longer valid prefix and repair the other copy from it.
    pub fn open(dirs: &[PathBuf]) -> Result<CertJournal, CertError> {
        Self::open_mode(dirs, false)
    }

    /// Inspection only (`vyrn journal inspect`, `vyrn verify-cert`): the copies that exist are
    /// opened for reading and scanned; the longer valid prefix is served; nothing is created,
    /// cut, repaired or synced (a torn tail or a copy behind the other is only counted), and
    /// [`append`](Self::append) is refused. Safe on the journal of a running replica.
    pub fn open_read_only(dirs: &[PathBuf]) -> Result<CertJournal, CertError> {
        Self::open_mode(dirs, true)
    }

    fn open_mode(dirs: &[PathBuf], read_only: bool) -> Result<CertJournal, CertError> {
        let dirs = &dirs[..dirs.len().min(2)];
        if dirs.is_empty() {
            return Err(CertError::Io(io::Error::from(io::ErrorKind::InvalidInput)));
        }
        let mut counters = CertCounters::default();
        let mut copies = Vec::new();
        let mut scans: Vec<Option<Scan>> = Vec::new();
        for d in dirs {
            let path = d.join(CERT_FILE);
            let opened = if read_only {
                File::open(&path)
            } else {
                open_copy(d)
            };
            match opened {
                Ok(f) => {
                    let s = scan(&f).ok();
                    match &s {
                        Some(s) => counters.bad_entries += s.skips.len() as u64,
                        None => counters.io_errors += 1,
                    }
                    scans.push(s);
                    copies.push(Copy {
                        path,
                        file: Some(f),
                    });
                }
                Err(_) => {
                    counters.io_errors += 1;
                    scans.push(None);
                    copies.push(Copy { path, file: None });
                }
            }
        }
        // The copy that verifies the most entries (copy 0 on a tie) ...
        let Some(best) = (0..copies.len())
            .filter(|&i| scans[i].is_some())
            .max_by_key(|&i| {
                (
                    scans[i].as_ref().map_or(0, |s| s.entries.len()),
                    usize::MAX - i,
                )
            })
        else {
            return Err(CertError::Io(io::Error::other(
                "no cert journal copy readable",
            )));
        };
        // ... and every entry of the others that overlaps none of its (07 §8: an entry either
        // copy verifies is kept).
        let empty = Scan::default();
        let scan_of = |i: usize| scans[i].as_ref().unwrap_or(&empty);
        let mut truth = scan_of(best).entries.clone();
        for i in (0..copies.len()).filter(|&i| i != best) {
            truth = merge(&truth, &scan_of(i).entries);
        }
        let end = truth.last().map_or(0, CertEntry::end);
        // The runs no copy verifies: skipped, with why the copy that verifies more refused them.
        let mut skips = Vec::new();
        let mut at = 0u64;
        for e in &truth {
            if e.offset > at {
                let why = std::iter::once(best)
                    .chain((0..copies.len()).filter(|&i| i != best))
                    .flat_map(|i| scan_of(i).skips.iter())
                    .find(|k| k.offset <= at && at < k.offset + k.len)
                    .map_or(CertFault::Hash, |k| k.why);
                skips.push(CertSkip {
                    offset: at,
                    len: e.offset - at,
                    why,
                });
            }
            at = e.end();
        }
        counters.skipped = skips.len() as u64;
        let mut buf = Vec::new();
        for i in 0..copies.len() {
            let Some(f) = copies[i].file.as_ref() else {
                continue;
            };
            let mine = scan_of(i);
            let common = truth.iter().take_while(|e| mine.holds(e)).count();
            // Where each entry this copy is refilled with comes from: another copy that
            // verifies it, the best first.
            let source = |e: &CertEntry| {
                std::iter::once(best)
                    .chain(0..copies.len())
                    .find(|&j| j != i && copies[j].file.is_some() && scan_of(j).holds(e))
            };
            let restore = truth[common..]
                .iter()
                .filter(|e| source(e).is_some())
                .count() as u64;
            let flen = f.metadata().map(|m| m.len()).unwrap_or(0);
            counters.entries_dropped += mine
                .entries
                .iter()
                .filter(|e| {
                    truth
                        .binary_search_by_key(&e.offset, |x| x.offset)
                        .map_or(true, |k| truth[k] != **e)
                })
                .count() as u64;
            if i == best {
                if flen > end {
                    counters.torn_tails += 1;
                }
                if restore > 0 {
                    counters.copies_repaired += 1;
                    counters.entries_restored += restore;
                }
            } else if common < truth.len() || flen != end {
                counters.copies_repaired += 1;
                counters.entries_restored += restore;
            }
            if read_only {
                continue;
            }
            if buf.is_empty() && common < truth.len() {
                buf = vec![0u8; 1 << 20];
            }
            let r = (|| {
                // Refilled from its first entry missing: each entry from a copy that verifies
                // it, and (in a copy other than the best) the bad runs between from the best.
                let mut at = truth.get(common).map_or(end, |e| e.offset);
                for e in &truth[common..] {
                    if i != best && e.offset > at {
                        if let Some(b) = copies[best].file.as_ref() {
                            copy_range(b, f, at, e.offset, &mut buf)?;
                        }
                    }
                    if let Some(src) = source(e).and_then(|j| copies[j].file.as_ref()) {
                        if !copy_range(src, f, e.offset, e.end(), &mut buf)? {
                            return Err(io::Error::from(io::ErrorKind::UnexpectedEof));
                        }
                    }
                    at = e.end();
                }
                if flen != end || i != best || common < truth.len() {
                    f.set_len(end)?;
                }
                f.sync_data()
            })();
            if r.is_err() {
                counters.io_errors += 1;
                copies[i].file = None;
            }
        }
        counters.recovered = truth.len() as u64;
        Ok(CertJournal {
            copies,
            entries: truth,
            end,
            counters,
            skips,
            read_only,
        })
    }

    /// Append one entry to every live copy (durable after [`sync`](Self::sync)); returns its
    /// index. Fails only when no copy took it.
    pub fn append(&mut self, kind: CertKind, payload: &[u8]) -> Result<usize, CertError> {
        if self.read_only {
            self.counters.refused += 1;
            return Err(CertError::Io(io::Error::new(
                io::ErrorKind::PermissionDenied,
                "the cert journal was opened read-only",
            )));
        }
        if payload.len() > MAX_CERT_PAYLOAD {
            self.counters.refused += 1;
            return Err(CertError::TooLarge);
        }
        let bytes = encode(kind, payload);
        let mut ok = false;
        let mut last = None;
        for c in &mut self.copies {
            let Some(f) = c.file.as_ref() else { continue };
            match f.write_all_at(&bytes, self.end) {
                Ok(()) => ok = true,
                Err(e) => {
                    self.counters.io_errors += 1;
                    c.file = None;
                    last = Some(e);
                }
            }
        }
        if !ok {
            return Err(CertError::Io(
                last.unwrap_or_else(|| io::Error::other("no cert journal copy left")),
            ));
        }
        let e = CertEntry {
            kind,
            offset: self.end,
            len: payload.len() as u32,
            hash: entry_hash(payload.len() as u32, kind as u8, payload),
        };
        self.end = e.end();
        self.entries.push(e);
        self.counters.appended += 1;
        Ok(self.entries.len() - 1)
    }

    /// Data-sync every live copy. Fails only when no copy synced.
    pub fn sync(&mut self) -> Result<(), CertError> {
        if self.read_only {
            return Ok(());
        }
        let mut ok = false;
        let mut last = None;
        for c in &mut self.copies {
            let Some(f) = c.file.as_ref() else { continue };
            match f.sync_data() {
                Ok(()) => ok = true,
                Err(e) => {
                    self.counters.io_errors += 1;
                    c.file = None;
                    last = Some(e);
                }
            }
        }
        if ok {
            Ok(())
        } else {
            Err(CertError::Io(last.unwrap_or_else(|| {
                io::Error::other("no cert journal copy left")
            })))
        }
    }

    /// Entry `i`'s kind and payload, from the first copy whose bytes match its hash.
    pub fn get(&mut self, i: usize) -> Result<(CertKind, Vec<u8>), CertError> {
        let e = *self.entries.get(i).ok_or(CertError::NotFound)?;
        let mut buf = vec![0u8; e.len as usize];
        for (n, c) in self.copies.iter().enumerate() {
            let Some(f) = c.file.as_ref() else { continue };
            if let Ok(true) = read_exact_at(f, &mut buf, e.offset + CERT_HEAD_BYTES as u64) {
                if entry_hash(e.len, e.kind as u8, &buf) == e.hash {
                    if n > 0 {
                        self.counters.mirror_reads += 1;
                    }
                    return Ok((e.kind, buf));
                }
            }
        }
        Err(CertError::Corrupt)
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no entry is held.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Every entry's place.
    pub fn entries(&self) -> &[CertEntry] {
        &self.entries
    }

    /// Copies still written (2 with two drives, fewer after an I/O error).
    pub fn live_copies(&self) -> usize {
        self.copies.iter().filter(|c| c.file.is_some()).count()
    }

    /// The copy paths.
    pub fn paths(&self) -> Vec<PathBuf> {
        self.copies.iter().map(|c| c.path.clone()).collect()
    }

    /// Counters.
    pub fn counters(&self) -> &CertCounters {
        &self.counters
    }

    /// The runs of bytes no copy verifies, skipped at open, in order (`skipped` of them).
    pub fn skips(&self) -> &[CertSkip] {
        &self.skips
    }
}
