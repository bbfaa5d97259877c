//! The replica's block journal (07 §8.2, §8.3; missing-chapters §5).
//!
//! # Layout on disk
//!
//! Block `h` goes to drive directory `h mod N` (07 §8.2: "drive h mod 12"; one directory per
//! drive on a dev box). Each drive directory holds append-only segment files
//! `seg-{n:016x}.blk` (`n` counts up per drive; the highest is the active one). A segment is a
//! run of *slots*: a one-page [`slot::SlotHead`] (length + BLAKE3 of the record, self-hashed),
//! then the `REP_BlockRecord` bytes exactly as `vyrn_wire::msg::journal::RepBlockRecord`
//! encodes them (4 KiB aligned and padded; the record is never re-encoded here).
//!
//! # Writes
//!
//! [`BlockJournal::append`] checks the record (`BlockRecordRef::parse`; `seq_sig` when a
//! verifying key is configured: 07 §8.2 "a block is written once, when its verify passes"),
//! places it and queues one aligned write; [`BlockJournal::sync`] makes every queued write
//! durable in one backend batch (07 §8.2: one io_uring batch) and only then indexes the blocks,
//! so [`BlockJournal::read`] serves only durable blocks.
//!
//! **Written once.** A second append of a height already held (durable or queued) with the
//! *same bytes* is idempotent ([`Appended::Identical`], counted, nothing written): a repaired
//! or re-fetched copy of a block is harmless. Different bytes for a held height are
//! [`JournalError::Conflict`] and counted; the stored block stays.
//!
//! # Retention ring (07 §8.3)
//!
//! Each drive has a byte and a block budget. An append that would exceed it first deletes the
//! oldest block the archive has acknowledged ([`BlockJournal::archived_up_to`],
//! [`BlockJournal::archived`]), else the oldest block, raising `REP_A_ARCHIVE`. Receiving never
//! blocks and never fails for space. A deleted block's slot head is overwritten by a tombstone
//! (state `Evicted`), its record range is hole-punched where the file system can, and a
//! segment with no live block left is unlinked.
//!
//! # Recovery
//!
//! [`BlockJournal::open`] scans every segment of every drive, checks each slot head, the record
//! hash, `BlockRecordRef::parse`, the height against the head and the drive (`h mod N`), and
//! `seq_sig` when a key is given. Bad records are refused (never indexed, so never served) and
//! counted; a torn tail of a drive's active segment is truncated. Both indexes are rebuilt.
//!
//! # Why not `commonware-storage`
//!
//! 07 §8.2 names commonware-storage's journal and archive primitives for the indexes. They
//! are not used in this slice: they bring a runtime abstraction (and its async executor) into a
//! crate that is otherwise synchronous and small, and their on-disk format would sit beside
//! 07's `REP_BlockRecord` rather than be it. The two indexes here are in memory and rebuilt on
//! recovery by the same scan that verifies every record, so a crash can never leave an index
//! naming a block the journal cannot verify. Revisit when the consensus slice brings
//! commonware in anyway.

pub mod backend;
pub mod cert;
pub mod index;
pub mod slot;
#[cfg(target_os = "linux")]
pub mod uring;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use vyrn_wire::msg::journal::{BlockKind, BlockRecordRef, RepBlockRecord};
use vyrn_wire::Malformed;

pub use backend::{
    decide, probe_odirect, AlignedBuf, Backend, BackendChoice, BackendKind, Fallback, FileId,
    StdBackend, PAGE,
};
use index::PktIndex;
use slot::{record_hash, SlotError, SlotHead, SlotState, SLOT_HEAD_BYTES};

/// Largest record [`BlockJournal`] accepts or reads back (allocation guard; 07 §8.1's ~22 MB
/// blocks at peak fit many times over). Also the limit of one io_uring SQE.
pub const MAX_RECORD_BYTES_LIMIT: u64 = 1 << 30;

/// Journal configuration.
#[derive(Debug, Clone)]
pub struct JournalConfig {
    /// One directory per drive (`REP_NVME_PER_REPLICA`, 12 on REF). Order matters: block `h`
    /// goes to `drives[h mod N]`, and the cert journal mirrors on `drives[0]` and `drives[1]`.
    pub drives: Vec<PathBuf>,
    /// Backend selection.
    pub backend: BackendChoice,
    /// Roll to a new segment file when the active one would pass this many bytes.
    pub segment_bytes: u64,
    /// Retention budget per drive in bytes, slot heads included (07 §8.3).
    pub budget_bytes_per_drive: u64,
    /// Retention budget per drive in blocks (07 §8.3).
    pub budget_blocks_per_drive: u64,
    /// Largest accepted record (≤ [`MAX_RECORD_BYTES_LIMIT`]).
    pub max_record_bytes: u64,
    /// The sequencer's key: when set, every normal block's `seq_sig` must verify, at append
    /// and at recovery. Seal blocks (zero `seq_sig`) are certified by the voters' seal
    /// certificate (07 §9.4), which this journal does not check.
    pub verifying_key: Option<ed25519_dalek::VerifyingKey>,
    /// The keys of the tenures after the first (07 §9.5: a promoted standby signs its own
    /// tenure's headers): a normal block of tenure `t > 0` verifies under the key paired with
    /// `t` here, and is refused when none is (with `verifying_key` set).
    pub later_keys: Vec<(u8, ed25519_dalek::VerifyingKey)>,
    /// Heights per bucket of the `(session, pkt_seq) → height` index (07 §8.2: 1 s = 1000
    /// blocks at 1 kHz).
    pub pkt_index_granularity: u64,
    /// `REP_A_ARCHIVE` also fires when the newest height is this far past the archive's
    /// watermark (07 §8.3: 5 h = 18,000,000 blocks at 1 kHz).
    pub archive_alarm_lag_blocks: u64,
    /// `append` syncs by itself once this many blocks are queued.
    pub max_batch: usize,
    /// An archive node takes this replica's blocks (07 §8.4): a block deleted before the
    /// archive acknowledged it, or an archive lagging `archive_alarm_lag_blocks`, raises
    /// `REP_A_ARCHIVE`. Without one (false), the ring's budget is the horizon: the oldest block
    /// past it goes with no alarm (counted in `evicted_unarchived` all the same).
    pub archive_node: bool,
    /// Inspection only (`vyrn journal inspect`): recovery scans and checks every record but
    /// changes nothing on disk — no directory created, no O_DIRECT probe, a torn tail reported
    /// and left in place, no empty segment removed — and `append` is refused. A journal a
    /// replica is writing can be inspected without cutting its active segment.
    pub read_only: bool,
}

impl JournalConfig {
    /// Defaults for `drives`: auto backend, 256 MiB segments, no budget, 64-block batches.
    pub fn new(drives: Vec<PathBuf>) -> JournalConfig {
        JournalConfig {
            drives,
            backend: BackendChoice::Auto,
            segment_bytes: 256 << 20,
            budget_bytes_per_drive: u64::MAX,
            budget_blocks_per_drive: u64::MAX,
            max_record_bytes: 64 << 20,
            verifying_key: None,
            later_keys: Vec::new(),
            pkt_index_granularity: 1000,
            archive_alarm_lag_blocks: 18_000_000,
            max_batch: 64,
            archive_node: true,
            read_only: false,
        }
    }
}

/// Where a durable block lies (07 §8.2: `height → (drive, offset, len)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockLoc {
    /// Drive index (`height mod N`).
    pub drive: usize,
    /// Segment number within the drive.
    pub segment: u64,
    /// Byte offset of the record (after its slot head) in the segment file.
    pub offset: u64,
    /// Padded record length.
    pub len: u64,
}

/// Counters (plain values; the caller exports them).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JournalCounters {
    /// Blocks made durable by `sync`.
    pub blocks_written: u64,
    /// Bytes made durable for those blocks (slot heads included).
    pub bytes_written: u64,
    /// `sync` batches run.
    pub batches: u64,
    /// Appends of a held height with identical bytes (nothing written).
    pub appends_identical: u64,
    /// Appends of a held height with different bytes (refused).
    pub appends_conflict: u64,
    /// Appends refused: malformed, too large, or a `seq_sig` that does not verify.
    pub appends_refused: u64,
    /// Appends refused because their drive has failed.
    pub appends_drive_failed: u64,
    /// 1 when `Auto` ran on the portable backend.
    pub fallback_used: u64,
    /// Fallbacks because io_uring was unavailable.
    pub fallback_uring_unavailable: u64,
    /// Fallbacks because a drive directory refused O_DIRECT (EINVAL).
    pub fallback_odirect_refused: u64,
    /// Blocks indexed by recovery.
    pub recovered_blocks: u64,
    /// Torn tails truncated by recovery.
    pub torn_tails_truncated: u64,
    /// Bytes those truncations dropped.
    pub torn_bytes_dropped: u64,
    /// Records recovery refused (each also in `RecoveryReport::refused`).
    pub records_refused: u64,
    /// Of those, refused for `seq_sig`.
    pub refused_signature: u64,
    /// Files in a drive directory that are not segments (left alone).
    pub foreign_files: u64,
    /// Blocks read back and verified.
    pub reads: u64,
    /// Reads refused: the stored bytes no longer match (never served).
    pub reads_refused: u64,
    /// Blocks the ring deleted after the archive acknowledged them.
    pub evicted_archived: u64,
    /// Blocks the ring deleted before the archive had them (each raises `REP_A_ARCHIVE`).
    pub evicted_unarchived: u64,
    /// Times `REP_A_ARCHIVE` went from clear to raised.
    pub rep_a_archive_raised: u64,
    /// Appends written past the budget because nothing durable was left to delete.
    pub over_budget: u64,
    /// Segment files created.
    pub segments_created: u64,
    /// Segment files removed (no live block left).
    pub segments_removed: u64,
    /// Segment preallocations the file system refused (appends then allocate as they go).
    pub prealloc_failed: u64,
    /// Hole punches the file system refused (space comes back when the segment goes).
    pub punch_failed: u64,
    /// I/O errors (write, sync, read, create).
    pub io_errors: u64,
    /// Drives marked failed after an I/O error (07 §14: their blocks are refetched from peers).
    pub drives_failed: u64,
}

/// Why a stored record is not served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The slot head is not valid.
    SlotHead(SlotError),
    /// The record runs past the end of the file.
    OutOfBounds,
    /// The slot names a record over `max_record_bytes`.
    TooLarge,
    /// The record bytes do not match the slot's hash.
    Hash,
    /// `BlockRecordRef::parse` refused it.
    Malformed(Malformed),
    /// The record's height differs from its slot head's.
    HeightMismatch,
    /// The height does not belong on this drive (`h mod N`).
    Misplaced,
    /// `seq_sig` does not verify under the configured key.
    Signature,
    /// A second record for a height already recovered.
    Duplicate,
    /// The drive returned an I/O error.
    Io,
    /// Found only by resyncing past a bad slot head, and not a verified normal block.
    Unanchored,
}

/// One record recovery refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefusedRecord {
    /// Drive index.
    pub drive: usize,
    /// Segment number.
    pub segment: u64,
    /// Slot offset in the segment.
    pub offset: u64,
    /// Height from the slot head, when the head was valid.
    pub height: Option<u64>,
    /// Why.
    pub why: Refusal,
}

/// One torn tail recovery truncated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Truncation {
    /// Drive index.
    pub drive: usize,
    /// Segment number.
    pub segment: u64,
    /// New length of the segment.
    pub offset: u64,
    /// Bytes dropped.
    pub dropped: u64,
}

/// What recovery found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Blocks indexed.
    pub blocks: u64,
    /// Records refused.
    pub refused: Vec<RefusedRecord>,
    /// Torn tails truncated.
    pub truncated: Vec<Truncation>,
    /// Files that are not segments, left in place.
    pub foreign: Vec<PathBuf>,
    /// Drives that failed with an I/O error during the scan.
    pub failed_drives: Vec<usize>,
}

/// A journal error (typed; never a panic).
#[derive(Debug)]
pub enum JournalError {
    /// The configuration is unusable.
    Config(&'static str),
    /// The record does not parse.
    Malformed(Malformed),
    /// The record is over `max_record_bytes`.
    TooLarge {
        /// Its length.
        len: usize,
    },
    /// `seq_sig` does not verify under the configured key.
    BadSignature {
        /// The block's height.
        height: u64,
    },
    /// Different bytes for a height already held (07 §8.2: written once).
    Conflict {
        /// The height.
        height: u64,
    },
    /// The block's drive has failed (07 §14: refetch it from peers once replaced).
    DriveFailed {
        /// Drive index.
        drive: usize,
    },
    /// An I/O error on a drive (the drive is marked failed).
    Io {
        /// Drive index.
        drive: usize,
        /// The error.
        error: io::Error,
    },
    /// The backend could not be set up.
    Backend(io::Error),
}

impl fmt::Display for JournalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JournalError::Config(s) => write!(f, "journal config: {s}"),
            JournalError::Malformed(m) => write!(f, "block record malformed: {m}"),
            JournalError::TooLarge { len } => write!(f, "block record of {len} bytes too large"),
            JournalError::BadSignature { height } => write!(f, "seq_sig of block {height} bad"),
            JournalError::Conflict { height } => {
                write!(f, "block {height} already journaled with other bytes")
            }
            JournalError::DriveFailed { drive } => write!(f, "drive {drive} failed"),
            JournalError::Io { drive, error } => write!(f, "drive {drive}: {error}"),
            JournalError::Backend(e) => write!(f, "journal backend: {e}"),
        }
    }
}

impl std::error::Error for JournalError {}

/// Why a read returned no block.
#[derive(Debug)]
pub enum ReadError {
    /// No durable block at this height (never written, deleted by the ring, refused by
    /// recovery, or queued but not yet synced).
    NotFound,
    /// The stored bytes no longer verify; the block is dropped from the index.
    Refused(Refusal),
    /// The drive returned an error.
    Io(io::Error),
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::NotFound => f.write_str("no such block"),
            ReadError::Refused(r) => write!(f, "block refused: {r:?}"),
            ReadError::Io(e) => write!(f, "read: {e}"),
        }
    }
}

impl std::error::Error for ReadError {}

/// What an accepted append did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Appended {
    /// Queued; durable and readable after the next `sync`.
    Queued,
    /// The same bytes are already held; nothing written.
    Identical,
}

#[derive(Debug, Clone, Copy)]
struct Live {
    seg: u64,
    slot: u64,
    rec_len: u64,
    hash: [u8; 32],
}

impl Live {
    fn slot_len(&self) -> u64 {
        SLOT_HEAD_BYTES as u64 + self.rec_len
    }
}

#[derive(Debug)]
struct Seg {
    file: FileId,
    path: PathBuf,
    /// Live blocks, queued ones included.
    live: u64,
    /// Records refused in it at recovery (kept for inspection, never unlinked).
    refused: u64,
}

#[derive(Debug)]
struct Drive {
    dir: PathBuf,
    segs: BTreeMap<u64, Seg>,
    active: Option<u64>,
    tail: u64,
    blocks: BTreeMap<u64, Live>,
    /// Archive acknowledgements above the watermark.
    acked: BTreeSet<u64>,
    queued_blocks: u64,
    /// Slot bytes of durable and queued blocks.
    live_bytes: u64,
    failed: bool,
    dir_dirty: bool,
}

#[derive(Debug)]
struct Pending {
    height: u64,
    drive: usize,
    live: Live,
    keys: Vec<(u32, u32)>,
}

#[derive(Debug)]
struct Punch {
    drive: usize,
    seg: u64,
    offset: u64,
    len: u64,
}

/// The block journal. See the module docs.
pub struct BlockJournal {
    cfg: JournalConfig,
    drives: Vec<Drive>,
    backend: Box<dyn Backend>,
    pending: Vec<Pending>,
    pending_at: HashMap<u64, usize>,
    punches: Vec<Punch>,
    pkt: PktIndex,
    archived: Option<u64>,
    newest: Option<u64>,
    alarm: bool,
    counters: JournalCounters,
}

impl fmt::Debug for BlockJournal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BlockJournal")
            .field("drives", &self.drives.len())
            .field("backend", &self.backend.kind())
            .field("pending", &self.pending.len())
            .field("counters", &self.counters)
            .finish()
    }
}

fn seg_name(n: u64) -> String {
    format!("seg-{n:016x}.blk")
}

fn parse_seg_name(name: &str) -> Option<u64> {
    let hex = name.strip_prefix("seg-")?.strip_suffix(".blk")?;
    if hex.len() != 16 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(hex, 16).ok()
}

/// `(session, pkt_seq)` of every packet and unavailable entry of a checked record.
fn pkt_keys(r: &BlockRecordRef<'_>) -> Vec<(u32, u32)> {
    let mut v: Vec<(u32, u32)> = r
        .packets()
        .filter_map(|p| vyrn_wire::msg::PktKey::peek(p).map(|k| (k.session, k.pkt_seq)))
        .collect();
    v.extend(r.unavail().map(|k| (k.session, k.pkt_seq)));
    v
}

/// A record that passed `check_record`: height, kind, packet keys.
type Checked = (u64, BlockKind, Vec<(u32, u32)>);

fn fsync_dir(dir: &Path) -> io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

impl BlockJournal {
    /// Open (creating missing drive directories), pick the backend, and recover.
    pub fn open(cfg: JournalConfig) -> Result<(BlockJournal, RecoveryReport), JournalError> {
        Self::check_config(&cfg)?;
        if cfg.read_only {
            // Nothing written: no directory, no O_DIRECT probe file; plain reads.
            let backend: Box<dyn Backend> = Box::new(backend::StdBackend::read_only());
            return Self::open_inner(cfg, backend, JournalCounters::default());
        }
        for (i, d) in cfg.drives.iter().enumerate() {
            std::fs::create_dir_all(d).map_err(|error| JournalError::Io { drive: i, error })?;
        }
        let mut counters = JournalCounters::default();
        let (uring_ok, odirect) = match cfg.backend {
            BackendChoice::Std => (true, Vec::new()),
            _ => {
                let ok = backend::uring_available();
                let probes = if ok {
                    cfg.drives.iter().map(|d| probe_odirect(d)).collect()
                } else {
                    Vec::new()
                };
                (ok, probes)
            }
        };
        let (kind, fallback) =
            decide(cfg.backend, uring_ok, &odirect).map_err(JournalError::Backend)?;
        match fallback {
            Some(Fallback::UringUnavailable) => {
                counters.fallback_used = 1;
                counters.fallback_uring_unavailable += 1;
            }
            Some(Fallback::ODirectRefused) => {
                counters.fallback_used = 1;
                counters.fallback_odirect_refused += 1;
            }
            None => {}
        }
        let backend = backend::make_backend(kind).map_err(JournalError::Backend)?;
        Self::open_inner(cfg, backend, counters)
    }

    /// Open on a backend the caller built (no probing; `cfg.backend` is ignored). For tests
    /// that inject faults, and for a caller that shares a ring.
    pub fn open_with(
        cfg: JournalConfig,
        backend: Box<dyn Backend>,
    ) -> Result<(BlockJournal, RecoveryReport), JournalError> {
        Self::check_config(&cfg)?;
        for (i, d) in cfg.drives.iter().enumerate() {
            std::fs::create_dir_all(d).map_err(|error| JournalError::Io { drive: i, error })?;
        }
        Self::open_inner(cfg, backend, JournalCounters::default())
    }

    fn check_config(cfg: &JournalConfig) -> Result<(), JournalError> {
        if cfg.drives.is_empty() {
            return Err(JournalError::Config("no drive directory"));
        }
        if cfg.max_record_bytes < PAGE as u64 || cfg.max_record_bytes > MAX_RECORD_BYTES_LIMIT {
            return Err(JournalError::Config(
                "max_record_bytes outside 4 KiB..=1 GiB",
            ));
        }
        if cfg.segment_bytes < 2 * PAGE as u64 {
            return Err(JournalError::Config("segment_bytes below two pages"));
        }
        if cfg.drives.len() > u16::MAX as usize {
            return Err(JournalError::Config("too many drive directories"));
        }
        for (i, d) in cfg.drives.iter().enumerate() {
            if cfg.drives[..i].contains(d) {
                return Err(JournalError::Config("a drive directory is listed twice"));
            }
        }
        Ok(())
    }

    fn open_inner(
        cfg: JournalConfig,
        backend: Box<dyn Backend>,
        counters: JournalCounters,
    ) -> Result<(BlockJournal, RecoveryReport), JournalError> {
        let drives = cfg
            .drives
            .iter()
            .map(|d| Drive {
                dir: d.clone(),
                segs: BTreeMap::new(),
                active: None,
                tail: 0,
                blocks: BTreeMap::new(),
                acked: BTreeSet::new(),
                queued_blocks: 0,
                live_bytes: 0,
                failed: false,
                dir_dirty: false,
            })
            .collect();
        let mut j = BlockJournal {
            pkt: PktIndex::new(cfg.pkt_index_granularity),
            cfg,
            drives,
            backend,
            pending: Vec::new(),
            pending_at: HashMap::new(),
            punches: Vec::new(),
            archived: None,
            newest: None,
            alarm: false,
            counters,
        };
        let mut report = RecoveryReport::default();
        for d in 0..j.drives.len() {
            if let Err(e) = j.recover_drive(d, &mut report) {
                let _ = e;
                j.fail_drive(d);
                report.failed_drives.push(d);
            }
        }
        report.blocks = j.counters.recovered_blocks;
        Ok((j, report))
    }

    fn fail_drive(&mut self, d: usize) {
        self.counters.io_errors += 1;
        if !self.drives[d].failed {
            self.drives[d].failed = true;
            self.counters.drives_failed += 1;
        }
    }

    fn refuse(
        &mut self,
        report: &mut RecoveryReport,
        drive: usize,
        segment: u64,
        offset: u64,
        height: Option<u64>,
        why: Refusal,
    ) {
        self.counters.records_refused += 1;
        if why == Refusal::Signature {
            self.counters.refused_signature += 1;
        }
        if let Some(s) = self.drives[drive].segs.get_mut(&segment) {
            s.refused += 1;
        }
        report.refused.push(RefusedRecord {
            drive,
            segment,
            offset,
            height,
            why,
        });
    }

    fn recover_drive(&mut self, d: usize, report: &mut RecoveryReport) -> io::Result<()> {
        let dir = self.drives[d].dir.clone();
        let mut segs: Vec<(u64, PathBuf)> = Vec::new();
        for e in std::fs::read_dir(&dir)? {
            let e = e?;
            let name = e.file_name();
            let name = name.to_string_lossy();
            let is_file = e.file_type().map(|t| t.is_file()).unwrap_or(false);
            match parse_seg_name(&name) {
                Some(n) if is_file => segs.push((n, e.path())),
                _ => {
                    // The drive's other tenants: the O_DIRECT probe, the cert journal's copy and
                    // the order journal (drive 0) are not foreign.
                    let sibling = name == backend::ODIRECT_PROBE
                        || name == cert::CERT_FILE
                        || name == crate::disk::order_journal::ORDER_DIR;
                    if !sibling {
                        self.counters.foreign_files += 1;
                        report.foreign.push(e.path());
                    }
                }
            }
        }
        segs.sort();
        let last = segs.last().map(|s| s.0);
        for (n, path) in segs {
            let file = match self.backend.open(&path, false) {
                Ok(f) => f,
                Err(_) => {
                    self.refuse(report, d, n, 0, None, Refusal::Io);
                    continue;
                }
            };
            self.drives[d].segs.insert(
                n,
                Seg {
                    file,
                    path,
                    live: 0,
                    refused: 0,
                },
            );
            let len = self.backend.file_len(file)?;
            let is_last = Some(n) == last;
            let end = self.scan_segment(d, n, file, len, is_last, report)?;
            if is_last {
                self.drives[d].active = Some(n);
                self.drives[d].tail = end;
            }
        }
        // Segments left with nothing live and nothing refused (only tombstones) go now.
        let empty: Vec<u64> = self.drives[d]
            .segs
            .iter()
            .filter(|(n, s)| s.live == 0 && s.refused == 0 && Some(**n) != last)
            .map(|(n, _)| *n)
            .collect();
        if !self.cfg.read_only {
            for n in empty {
                self.remove_segment(d, n);
            }
        }
        Ok(())
    }

    /// Read and check the slot head at `off` against the file length.
    fn read_head(
        &mut self,
        file: FileId,
        off: u64,
        len: u64,
        buf: &mut AlignedBuf,
    ) -> io::Result<Result<SlotHead, (Refusal, Option<u64>)>> {
        let page = SLOT_HEAD_BYTES as u64;
        if len - off < page {
            return Ok(Err((Refusal::SlotHead(SlotError::Short), None)));
        }
        buf.fill(0);
        let got = self.backend.read(file, off, buf)?;
        let head = match SlotHead::read(&buf[..got.min(SLOT_HEAD_BYTES)]) {
            Ok(h) => h,
            Err(e) => return Ok(Err((Refusal::SlotHead(e), None))),
        };
        // The hard limit, not the configured one: a record written under a larger
        // `max_record_bytes` stays readable. The file length bounds it as well.
        if head.rec_len > MAX_RECORD_BYTES_LIMIT {
            return Ok(Err((Refusal::TooLarge, Some(head.height))));
        }
        if off + page + head.rec_len > len {
            return Ok(Err((Refusal::OutOfBounds, Some(head.height))));
        }
        Ok(Ok(head))
    }

    /// Scan one segment; returns the offset just past its last kept slot when `is_last`
    /// (after any truncation), else the file length.
    ///
    /// After a slot head that does not check, the scan looks page by page for the next one
    /// that does ("resync"). A head found that way is not anchored by the chain of lengths
    /// from the segment's start — client data could imitate one — so the records after it are
    /// kept only while each is a normal block whose `seq_sig` verifies under the configured key
    /// (which re-anchors the scan); without a key they are refused ([`Refusal::Unanchored`]).
    /// A bad head with no good head after it is the torn tail: truncated in the active segment,
    /// refused in an older one.
    fn scan_segment(
        &mut self,
        d: usize,
        n: u64,
        file: FileId,
        len: u64,
        is_last: bool,
        report: &mut RecoveryReport,
    ) -> io::Result<u64> {
        let page = SLOT_HEAD_BYTES as u64;
        let mut off = 0u64;
        let mut anchored = true;
        // End of the last slot kept (a block indexed, or a tombstone read while anchored):
        // a torn tail is cut back to here, so refused slots just before it go with it and a
        // second recovery finds nothing more to cut.
        let mut good_end = 0u64;
        let mut head_buf = AlignedBuf::zeroed(SLOT_HEAD_BYTES);
        while off < len {
            let head = match self.read_head(file, off, len, &mut head_buf)? {
                Ok(h) => h,
                Err((why, h)) => {
                    let mut p = off + page;
                    let mut next = None;
                    while p + page <= len {
                        if let Ok(hd) = self.read_head(file, p, len, &mut head_buf)? {
                            if hd.state == SlotState::Live {
                                next = Some(p);
                                break;
                            }
                        }
                        p += page;
                    }
                    match next {
                        Some(p) => {
                            self.refuse(report, d, n, off, h, why);
                            off = p;
                            anchored = false;
                            continue;
                        }
                        None if is_last => {
                            return self.truncate_tail(d, n, file, good_end, len, report);
                        }
                        None => {
                            self.refuse(report, d, n, off, h, why);
                            return Ok(len);
                        }
                    }
                }
            };
            let slot_end = off + page + head.rec_len;
            if head.state == SlotState::Evicted {
                if anchored {
                    good_end = slot_end;
                }
                off = slot_end;
                continue;
            }
            let mut rec = AlignedBuf::zeroed(head.rec_len as usize);
            let got = self.backend.read(file, off + page, &mut rec)?;
            if (got as u64) < head.rec_len {
                self.refuse(report, d, n, off, Some(head.height), Refusal::OutOfBounds);
                off = slot_end;
                continue;
            }
            if record_hash(&rec) != head.rec_hash {
                if is_last && slot_end == len {
                    // The last write of the active segment, torn inside the record.
                    return self.truncate_tail(d, n, file, good_end, len, report);
                }
                self.refuse(report, d, n, off, Some(head.height), Refusal::Hash);
                off = slot_end;
                continue;
            }
            match self.check_record(&rec, Some(head.height), d) {
                Err(why) => self.refuse(report, d, n, off, Some(head.height), why),
                Ok((_, kind, _))
                    if !anchored
                        && (kind != BlockKind::Normal || self.cfg.verifying_key.is_none()) =>
                {
                    self.refuse(report, d, n, off, Some(head.height), Refusal::Unanchored);
                }
                Ok((h, _, keys)) => {
                    anchored = true;
                    good_end = slot_end;
                    let live = Live {
                        seg: n,
                        slot: off,
                        rec_len: head.rec_len,
                        hash: head.rec_hash,
                    };
                    let dr = &mut self.drives[d];
                    dr.blocks.insert(h, live);
                    dr.live_bytes += live.slot_len();
                    if let Some(s) = dr.segs.get_mut(&n) {
                        s.live += 1;
                    }
                    self.pkt.insert(h, keys);
                    self.newest = Some(self.newest.map_or(h, |x| x.max(h)));
                    self.counters.recovered_blocks += 1;
                }
            }
            off = slot_end;
        }
        Ok(off.max(len))
    }

    /// Cut the active segment of drive `d` back to `at` (a torn tail, 07 §8.2 "durable
    /// within one io_uring batch": only the last batch can be torn).
    fn truncate_tail(
        &mut self,
        d: usize,
        n: u64,
        file: FileId,
        at: u64,
        len: u64,
        report: &mut RecoveryReport,
    ) -> io::Result<u64> {
        if !self.cfg.read_only {
            self.backend.truncate(file, at)?;
        }
        self.counters.torn_tails_truncated += 1;
        self.counters.torn_bytes_dropped += len - at;
        report.truncated.push(Truncation {
            drive: d,
            segment: n,
            offset: at,
            dropped: len - at,
        });
        Ok(at)
    }

    /// Parse, place and (with a key) verify a record; recovery and `append` share it.
    fn check_record(
        &self,
        rec: &[u8],
        head_height: Option<u64>,
        drive: usize,
    ) -> Result<Checked, Refusal> {
        let r = BlockRecordRef::parse(rec).map_err(Refusal::Malformed)?;
        if head_height.is_some_and(|h| h != r.height) {
            return Err(Refusal::HeightMismatch);
        }
        if self.drive_of(r.height) != drive {
            return Err(Refusal::Misplaced);
        }
        if let Some(k0) = &self.cfg.verifying_key {
            let k = match r.tenure {
                0 => Some(k0),
                t => self.cfg.later_keys.iter().find(|k| k.0 == t).map(|k| &k.1),
            };
            if r.kind == BlockKind::Normal && !k.is_some_and(|k| r.header.verify(k)) {
                return Err(Refusal::Signature);
            }
        }
        if self.drives[drive].blocks.contains_key(&r.height) {
            return Err(Refusal::Duplicate);
        }
        Ok((r.height, r.kind, pkt_keys(&r)))
    }

    /// The drive of height `h` (07 §8.2: `h mod N`).
    pub fn drive_of(&self, h: u64) -> usize {
        (h % self.drives.len() as u64) as usize
    }

    /// Append an encoded `REP_BlockRecord` (see the module docs for the written-once rule).
    ///
    /// Never blocks for space (the ring deletes, 07 §8.3). Once `max_batch` blocks are queued
    /// it runs [`sync`](Self::sync) itself; an error then is that sync's (the block was
    /// accepted, and is dropped only if its own drive failed).
    pub fn append(&mut self, rec: &[u8]) -> Result<Appended, JournalError> {
        if self.cfg.read_only {
            self.counters.appends_refused += 1;
            return Err(JournalError::Config("the journal was opened read-only"));
        }
        if rec.len() as u64 > self.cfg.max_record_bytes {
            self.counters.appends_refused += 1;
            return Err(JournalError::TooLarge { len: rec.len() });
        }
        let parsed = match BlockRecordRef::parse(rec) {
            Ok(p) => p,
            Err(m) => {
                self.counters.appends_refused += 1;
                return Err(JournalError::Malformed(m));
            }
        };
        let h = parsed.height;
        let d = self.drive_of(h);
        let hash = record_hash(rec);
        let held = self.drives[d]
            .blocks
            .get(&h)
            .map(|l| l.hash)
            .or_else(|| self.pending_at.get(&h).map(|&i| self.pending[i].live.hash));
        if let Some(old) = held {
            if old == hash {
                self.counters.appends_identical += 1;
                return Ok(Appended::Identical);
            }
            self.counters.appends_conflict += 1;
            return Err(JournalError::Conflict { height: h });
        }
        let keys = match self.check_record(rec, None, d) {
            Ok((_, _, k)) => k,
            Err(Refusal::Signature) => {
                self.counters.appends_refused += 1;
                return Err(JournalError::BadSignature { height: h });
            }
            Err(Refusal::Malformed(m)) => {
                self.counters.appends_refused += 1;
                return Err(JournalError::Malformed(m));
            }
            Err(_) => {
                self.counters.appends_refused += 1;
                return Err(JournalError::Malformed(Malformed::BadValue));
            }
        };
        if self.drives[d].failed {
            self.counters.appends_drive_failed += 1;
            return Err(JournalError::DriveFailed { drive: d });
        }
        let slot_len = (SLOT_HEAD_BYTES + rec.len()) as u64;
        self.make_room(d, slot_len);
        let seg = self.active_segment(d, slot_len)?;
        let off = self.drives[d].tail;
        let live = Live {
            seg,
            slot: off,
            rec_len: rec.len() as u64,
            hash,
        };
        let mut buf = AlignedBuf::zeroed(slot_len as usize);
        SlotHead {
            state: SlotState::Live,
            height: h,
            rec_len: live.rec_len,
            rec_hash: hash,
        }
        .write_to(&mut buf[..SLOT_HEAD_BYTES]);
        buf[SLOT_HEAD_BYTES..].copy_from_slice(rec);
        let file = self.drives[d].segs[&seg].file;
        if let Err(error) = self.backend.queue_write(file, off, buf) {
            self.fail_drive(d);
            return Err(JournalError::Io { drive: d, error });
        }
        let dr = &mut self.drives[d];
        dr.tail += slot_len;
        dr.live_bytes += slot_len;
        dr.queued_blocks += 1;
        if let Some(s) = dr.segs.get_mut(&seg) {
            s.live += 1;
        }
        self.pending_at.insert(h, self.pending.len());
        self.pending.push(Pending {
            height: h,
            drive: d,
            live,
            keys,
        });
        self.newest = Some(self.newest.map_or(h, |x| x.max(h)));
        self.check_lag();
        if self.pending.len() >= self.cfg.max_batch.max(1) {
            self.sync()?;
        }
        Ok(Appended::Queued)
    }

    /// Encode and append an owned record.
    pub fn append_record(&mut self, rec: &RepBlockRecord) -> Result<Appended, JournalError> {
        let bytes = rec.to_bytes().map_err(|m| {
            self.counters.appends_refused += 1;
            JournalError::Malformed(m)
        })?;
        self.append(&bytes)
    }

    /// The active segment of drive `d` with room for `need` bytes, rolling to a new one.
    fn active_segment(&mut self, d: usize, need: u64) -> Result<u64, JournalError> {
        let seg_bytes = self.cfg.segment_bytes;
        let dr = &self.drives[d];
        if let Some(a) = dr.active {
            if dr.tail == 0 || dr.tail.saturating_add(need) <= seg_bytes {
                return Ok(a);
            }
        }
        let n = dr.segs.keys().next_back().map_or(0, |x| x + 1);
        let path = dr.dir.join(seg_name(n));
        let file = match self.backend.open(&path, true) {
            Ok(f) => f,
            Err(error) => {
                self.fail_drive(d);
                return Err(JournalError::Io { drive: d, error });
            }
        };
        if self.backend.preallocate(file, seg_bytes).is_err() {
            self.counters.prealloc_failed += 1;
        }
        // The segment this replaces, if left empty, is unlinked by the next `sync`.
        let dr = &mut self.drives[d];
        dr.segs.insert(
            n,
            Seg {
                file,
                path,
                live: 0,
                refused: 0,
            },
        );
        dr.active = Some(n);
        dr.tail = 0;
        dr.dir_dirty = true;
        self.counters.segments_created += 1;
        Ok(n)
    }

    fn remove_segment(&mut self, d: usize, n: u64) {
        if let Some(s) = self.drives[d].segs.remove(&n) {
            self.backend.close(s.file);
            if std::fs::remove_file(&s.path).is_ok() {
                self.counters.segments_removed += 1;
            }
        }
    }

    /// Delete blocks of drive `d` until `need` more bytes and one more block fit (07 §8.3).
    fn make_room(&mut self, d: usize, need: u64) {
        loop {
            let dr = &self.drives[d];
            let blocks = dr.blocks.len() as u64 + dr.queued_blocks;
            let over = dr.live_bytes.saturating_add(need) > self.cfg.budget_bytes_per_drive
                || blocks.saturating_add(1) > self.cfg.budget_blocks_per_drive;
            if !over {
                return;
            }
            let archived_first = self
                .archived
                .and_then(|a| dr.blocks.range(..=a).next().map(|(h, _)| *h))
                .into_iter()
                .chain(dr.acked.iter().copied().find(|h| dr.blocks.contains_key(h)))
                .min();
            let victim = match archived_first {
                Some(h) => Some((h, true)),
                None => dr.blocks.keys().next().map(|h| (*h, false)),
            };
            let Some((h, archived)) = victim else {
                // Only queued blocks are left: never block receiving (07 §8.3).
                self.counters.over_budget += 1;
                return;
            };
            self.evict(d, h, archived);
        }
    }

    fn evict(&mut self, d: usize, h: u64, archived: bool) {
        let Some(live) = self.drives[d].blocks.remove(&h) else {
            return;
        };
        let dr = &mut self.drives[d];
        dr.acked.remove(&h);
        dr.live_bytes = dr.live_bytes.saturating_sub(live.slot_len());
        let file = dr.segs.get_mut(&live.seg).map(|s| {
            s.live = s.live.saturating_sub(1);
            s.file
        });
        if archived {
            self.counters.evicted_archived += 1;
        } else {
            self.counters.evicted_unarchived += 1;
            if self.cfg.archive_node {
                self.raise_alarm();
            }
        }
        if let Some(file) = file {
            let mut page = AlignedBuf::zeroed(SLOT_HEAD_BYTES);
            SlotHead {
                state: SlotState::Evicted,
                height: h,
                rec_len: live.rec_len,
                rec_hash: live.hash,
            }
            .write_to(&mut page);
            if self.backend.queue_write(file, live.slot, page).is_err() {
                self.counters.io_errors += 1;
            }
            self.punches.push(Punch {
                drive: d,
                seg: live.seg,
                offset: live.slot + SLOT_HEAD_BYTES as u64,
                len: live.rec_len,
            });
        }
        let g = self.pkt.granularity();
        let b = self.pkt.bucket(h);
        let (lo, hi) = (b * g, (b * g).saturating_add(g - 1));
        let any = self
            .drives
            .iter()
            .any(|dr| dr.blocks.range(lo..=hi).next().is_some())
            || self.pending.iter().any(|p| (lo..=hi).contains(&p.height));
        if !any {
            self.pkt.remove_bucket(b);
        }
    }

    fn raise_alarm(&mut self) {
        if !self.alarm {
            self.alarm = true;
            self.counters.rep_a_archive_raised += 1;
        }
    }

    fn check_lag(&mut self) {
        if !self.cfg.archive_node {
            return;
        }
        let lag = match (self.newest, self.archived) {
            (Some(n), Some(a)) => n.saturating_sub(a),
            (Some(n), None) => n.saturating_add(1),
            _ => 0,
        };
        if lag >= self.cfg.archive_alarm_lag_blocks {
            self.raise_alarm();
        }
    }

    /// Make every queued write durable in one backend batch, then index those blocks.
    /// On an I/O error the drive is marked failed, its queued blocks are dropped (07 §14:
    /// refetched from peers), every other drive's blocks are kept, and the first error is
    /// returned.
    pub fn sync(&mut self) -> Result<(), JournalError> {
        let failures = self.backend.flush();
        self.counters.batches += 1;
        let mut first: Option<JournalError> = None;
        for (f, error) in failures {
            let d = self
                .drives
                .iter()
                .position(|dr| dr.segs.values().any(|s| s.file == f));
            if let Some(d) = d {
                self.fail_drive(d);
                if first.is_none() {
                    first = Some(JournalError::Io { drive: d, error });
                }
            } else {
                self.counters.io_errors += 1;
            }
        }
        self.pending_at.clear();
        for p in std::mem::take(&mut self.pending) {
            let dr = &mut self.drives[p.drive];
            dr.queued_blocks = dr.queued_blocks.saturating_sub(1);
            if dr.failed {
                dr.live_bytes = dr.live_bytes.saturating_sub(p.live.slot_len());
                if let Some(s) = dr.segs.get_mut(&p.live.seg) {
                    s.live = s.live.saturating_sub(1);
                }
                continue;
            }
            dr.blocks.insert(p.height, p.live);
            self.pkt.insert(p.height, p.keys);
            self.counters.blocks_written += 1;
            self.counters.bytes_written += p.live.slot_len();
        }
        for d in 0..self.drives.len() {
            if self.drives[d].dir_dirty {
                self.drives[d].dir_dirty = false;
                if let Err(error) = fsync_dir(&self.drives[d].dir) {
                    self.fail_drive(d);
                    if first.is_none() {
                        first = Some(JournalError::Io { drive: d, error });
                    }
                }
            }
        }
        for p in std::mem::take(&mut self.punches) {
            if let Some(s) = self.drives[p.drive].segs.get(&p.seg) {
                if self.backend.punch(s.file, p.offset, p.len).is_err() {
                    self.counters.punch_failed += 1;
                }
            }
        }
        for d in 0..self.drives.len() {
            let active = self.drives[d].active;
            let empty: Vec<u64> = self.drives[d]
                .segs
                .iter()
                .filter(|(n, s)| s.live == 0 && s.refused == 0 && Some(**n) != active)
                .map(|(n, _)| *n)
                .collect();
            for n in empty {
                self.remove_segment(d, n);
            }
        }
        match first {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Where block `h` lies, if durable.
    pub fn locate(&self, h: u64) -> Option<BlockLoc> {
        let d = self.drive_of(h);
        self.drives[d].blocks.get(&h).map(|l| BlockLoc {
            drive: d,
            segment: l.seg,
            offset: l.slot + SLOT_HEAD_BYTES as u64,
            len: l.rec_len,
        })
    }

    /// Whether a durable block is held at `h`.
    pub fn contains(&self, h: u64) -> bool {
        self.locate(h).is_some()
    }

    /// Every durable height, ascending.
    pub fn heights(&self) -> Vec<u64> {
        let mut v: Vec<u64> = self
            .drives
            .iter()
            .flat_map(|d| d.blocks.keys().copied())
            .collect();
        v.sort_unstable();
        v
    }

    /// Read block `h` back: the record bytes, checked against their hash and re-parsed. A
    /// block whose bytes no longer verify is refused, counted and dropped from the index.
    pub fn read(&mut self, h: u64) -> Result<AlignedBuf, ReadError> {
        let d = self.drive_of(h);
        let Some(live) = self.drives[d].blocks.get(&h).copied() else {
            return Err(ReadError::NotFound);
        };
        let Some(file) = self.drives[d].segs.get(&live.seg).map(|s| s.file) else {
            return Err(ReadError::NotFound);
        };
        let mut buf = AlignedBuf::zeroed(live.rec_len as usize);
        let why = match self
            .backend
            .read(file, live.slot + SLOT_HEAD_BYTES as u64, &mut buf)
        {
            Err(e) => {
                self.counters.io_errors += 1;
                return Err(ReadError::Io(e));
            }
            Ok(n) if (n as u64) < live.rec_len => Refusal::OutOfBounds,
            Ok(_) if record_hash(&buf) != live.hash => Refusal::Hash,
            Ok(_) => match BlockRecordRef::parse(&buf) {
                Err(m) => Refusal::Malformed(m),
                Ok(r) if r.height != h => Refusal::HeightMismatch,
                Ok(_) => {
                    self.counters.reads += 1;
                    return Ok(buf);
                }
            },
        };
        self.counters.reads_refused += 1;
        // Never serve it again; the slot stays on disk for inspection (the segment is kept).
        let dr = &mut self.drives[d];
        if dr.blocks.remove(&h).is_some() {
            dr.live_bytes = dr.live_bytes.saturating_sub(live.slot_len());
            dr.acked.remove(&h);
            if let Some(s) = dr.segs.get_mut(&live.seg) {
                s.live = s.live.saturating_sub(1);
                s.refused += 1;
            }
        }
        Err(ReadError::Refused(why))
    }

    /// Height ranges that may hold `(session, pkt_seq)` (the coarse index, 07 §8.2).
    pub fn pkt_candidates(&self, session: u32, pkt_seq: u32) -> Vec<std::ops::RangeInclusive<u64>> {
        self.pkt.candidates(session, pkt_seq)
    }

    /// The height of the block holding (or listing as unavailable) `(session, pkt_seq)`:
    /// reads the candidate blocks of [`pkt_candidates`](Self::pkt_candidates).
    pub fn locate_pkt(&mut self, session: u32, pkt_seq: u32) -> Result<Option<u64>, ReadError> {
        for r in self.pkt.candidates(session, pkt_seq) {
            let hs: Vec<u64> = r.filter(|h| self.contains(*h)).collect();
            for h in hs {
                let buf = match self.read(h) {
                    Ok(b) => b,
                    Err(ReadError::Io(e)) => return Err(ReadError::Io(e)),
                    Err(_) => continue,
                };
                if let Ok(rec) = BlockRecordRef::parse(&buf) {
                    if pkt_keys(&rec).contains(&(session, pkt_seq)) {
                        return Ok(Some(h));
                    }
                }
            }
        }
        Ok(None)
    }

    /// The archive node has every block up to and including `h` (07 §8.3): those go first.
    pub fn archived_up_to(&mut self, h: u64) {
        self.archived = Some(self.archived.map_or(h, |a| a.max(h)));
        for dr in &mut self.drives {
            let keep = dr.acked.split_off(&h.saturating_add(1));
            dr.acked = keep;
        }
        self.maybe_clear_alarm();
    }

    /// The archive node acknowledged block `h` alone (it may take blocks out of order).
    pub fn archived(&mut self, h: u64) {
        if self.archived.is_some_and(|a| h <= a) {
            return;
        }
        let d = self.drive_of(h);
        if self.drives[d].blocks.contains_key(&h) {
            self.drives[d].acked.insert(h);
        }
    }

    fn maybe_clear_alarm(&mut self) {
        let lag_ok = match (self.newest, self.archived) {
            (Some(n), Some(a)) => n.saturating_sub(a) < self.cfg.archive_alarm_lag_blocks,
            (None, _) => true,
            (Some(_), None) => false,
        };
        // Cleared once the archive has every block the ring would delete next (its watermark
        // reaches the oldest block held) and the lag is under the threshold. The deleted
        // blocks stay a gap in the archive; `evicted_unarchived` keeps the count.
        let oldest = self
            .drives
            .iter()
            .filter_map(|d| d.blocks.keys().next())
            .min();
        let caught_up = match (oldest, self.archived) {
            (None, _) => true,
            (Some(o), Some(a)) => a >= *o,
            (Some(_), None) => false,
        };
        if self.alarm && lag_ok && caught_up {
            self.alarm = false;
        }
    }

    /// Whether `REP_A_ARCHIVE` is raised (07 §8.3): the ring deleted a block the archive did
    /// not have, or the archive lags by `archive_alarm_lag_blocks`. Cleared by
    /// `archived_up_to` once the watermark reaches the oldest block held and the lag is under
    /// the threshold.
    pub fn archive_alarm(&self) -> bool {
        self.alarm
    }

    /// Blocks queued and not yet synced.
    pub fn queued(&self) -> usize {
        self.pending.len()
    }

    /// Bytes held on drive `d` (slot heads included, queued blocks included).
    pub fn drive_bytes(&self, d: usize) -> u64 {
        self.drives.get(d).map_or(0, |x| x.live_bytes)
    }

    /// Whether drive `d` has been marked failed.
    pub fn drive_failed(&self, d: usize) -> bool {
        self.drives.get(d).is_some_and(|x| x.failed)
    }

    /// The backend in use.
    pub fn backend_kind(&self) -> BackendKind {
        self.backend.kind()
    }

    /// Counters.
    pub fn counters(&self) -> &JournalCounters {
        &self.counters
    }
}

impl Drop for BlockJournal {
    fn drop(&mut self) {
        // Queued blocks are flushed so no buffer is freed under an in-flight write; a caller
        // that needs to know they are durable calls `sync` itself.
        if !self.pending.is_empty() || !self.punches.is_empty() {
            let _ = self.sync();
        }
    }
}
