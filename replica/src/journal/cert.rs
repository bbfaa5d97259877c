//! The cert journal (07 §8.2): every finality certificate, root certificate and seal
//! extension, appended to a small append-only file mirrored on drives 0 and 1.
//!
//! ```text
//! entry: len u32 LE │ kind u8 │ reserved [3] = 0 │ hash [32] │ payload (len bytes)
//!        hash = BLAKE3("vyrn v1 cert entry" ‖ len ‖ kind ‖ reserved ‖ payload)
//! ```
//!
//! A torn tail (short entry, or a hash that does not match) ends a copy's valid prefix. At
//! open the longer valid prefix of the two copies is the journal; the other copy is cut back
//! to the prefix both share and refilled from it, so the mirror survives the loss or damage
//! of either copy. With a single drive directory there is one copy.
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
    /// Copies whose torn tail was cut.
    pub torn_tails: u64,
    /// Copies refilled from the other copy at open.
    pub copies_repaired: u64,
    /// Entries copied into a repaired copy.
    pub entries_restored: u64,
    /// Entries beyond the common prefix in the shorter of two diverging copies (lost).
    pub entries_dropped: u64,
    /// Appends refused (payload too large).
    pub refused: u64,
    /// Write or sync errors on one copy (the copy is dropped until the next open).
    pub io_errors: u64,
    /// Reads whose first copy did not verify and the mirror served.
    pub mirror_reads: u64,
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

/// The valid prefix of one copy: its entries, in order.
fn scan(f: &File) -> io::Result<Vec<CertEntry>> {
    let len = f.metadata()?.len();
    let mut out = Vec::new();
    let mut off = 0u64;
    let mut head = [0u8; CERT_HEAD_BYTES];
    let mut payload = Vec::new();
    while off + CERT_HEAD_BYTES as u64 <= len {
        if !read_exact_at(f, &mut head, off)? {
            break;
        }
        let plen = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
        let Some(kind) = CertKind::from_u8(head[4]) else {
            break;
        };
        if head[5..8] != [0, 0, 0] || plen as usize > MAX_CERT_PAYLOAD {
            break;
        }
        let end = off + CERT_HEAD_BYTES as u64 + plen as u64;
        if end > len {
            break;
        }
        payload.resize(plen as usize, 0);
        if !read_exact_at(f, &mut payload, off + CERT_HEAD_BYTES as u64)? {
            break;
        }
        let mut hash = [0u8; 32];
        hash.copy_from_slice(&head[8..40]);
        if entry_hash(plen, kind as u8, &payload) != hash {
            break;
        }
        out.push(CertEntry {
            kind,
            offset: off,
            len: plen,
            hash,
        });
        off = end;
    }
    Ok(out)
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
        let mut scans: Vec<Option<Vec<CertEntry>>> = Vec::new();
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
                    if s.is_none() {
                        counters.io_errors += 1;
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
        // The truth: the longest valid prefix (copy 0 on a tie).
        let Some(best) = (0..copies.len())
            .filter(|&i| scans[i].is_some())
            .max_by_key(|&i| (scans[i].as_ref().map_or(0, Vec::len), usize::MAX - i))
        else {
            return Err(CertError::Io(io::Error::other(
                "no cert journal copy readable",
            )));
        };
        let truth = scans[best].clone().unwrap_or_default();
        let end = truth.last().map_or(0, CertEntry::end);
        for i in 0..copies.len() {
            let Some(f) = copies[i].file.as_ref() else {
                continue;
            };
            let mine = scans[i].clone().unwrap_or_default();
            let common = mine.iter().zip(&truth).take_while(|(a, b)| a == b).count();
            let flen = f.metadata().map(|m| m.len()).unwrap_or(0);
            if i == best {
                if flen > end {
                    counters.torn_tails += 1;
                }
            } else {
                counters.entries_dropped += (mine.len() - common) as u64;
                if common < truth.len() || flen != end {
                    counters.copies_repaired += 1;
                    counters.entries_restored += (truth.len() - common) as u64;
                }
            }
            if read_only {
                continue;
            }
            let from = truth.get(common).map_or(end, |e| e.offset);
            let r = (|| {
                if i != best && common < truth.len() {
                    let src = copies[best].file.as_ref().ok_or(io::ErrorKind::NotFound)?;
                    f.set_len(from)?;
                    // Copied in 1 MiB pieces: a lost copy can be hours of certificates.
                    let mut buf = vec![0u8; 1 << 20];
                    let mut at = from;
                    while at < end {
                        let k = ((end - at) as usize).min(buf.len());
                        if !read_exact_at(src, &mut buf[..k], at)? {
                            return Err(io::Error::from(io::ErrorKind::UnexpectedEof));
                        }
                        f.write_all_at(&buf[..k], at)?;
                        at += k as u64;
                    }
                }
                if flen != end || i != best {
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
}
