//! The journal side of a replica process (07 §8.2, §7.5): the block journal, cert journal and
//! snapshot area written on their own writer thread through a bounded queue.

use super::*;

/// The snapshots of a replica process (07 §7.5): taken by replay, written here once their
/// block's header hash is known ([`crate::disk::snapshots`]).
#[derive(Debug)]
pub(super) struct NodeSnaps {
    pub(super) dir: crate::disk::snapshots::SnapshotDir,
    pub(super) policy: crate::replay::SnapPolicy,
    /// Taken, waiting for `header_hash(h)`, oldest first (at most [`SNAPS_PENDING`]).
    pub(super) pending: std::collections::VecDeque<crate::replay::Taken>,
    /// Header hashes of snapshot heights seen (at most [`SNAPS_PENDING`] × 4).
    pub(super) headers: std::collections::BTreeMap<u64, vyrn_wire::header::Hash>,
    /// The area's audit at start (07 §7.5 "Loading"), or why it could not run.
    pub(super) found: Result<crate::disk::snapshots::SnapAudit, String>,
    /// The snapshot replay started from (07 §7.6): its height and last step.
    pub(super) loaded: Option<(u64, u64)>,
    /// Snapshots the audit vouched for that were passed over at the load (no tally, another
    /// epoch, unreadable), newer than the one loaded.
    pub(super) skipped: u64,
}

/// Where a replica's replay starts from (07 §7.6): the engine inline or on its tile, and the
/// inline replay's digest sink.
pub(super) struct ReplayStart<'a> {
    pub(super) core: &'a mut ReplicaCore,
    pub(super) tile: Option<&'a mut ReplayTile<ReplaySink>>,
    pub(super) sink: &'a mut ReplaySink,
    pub(super) root_blocks: Option<u64>,
    pub(super) epoch: u32,
}

impl NodeSnaps {
    /// 07 §7.5 "Loading": what a restart finds in the snapshot area, each file against the root
    /// its certificate certifies (the cert journal read-only: recovered before); then 07 §7.6:
    /// replay starts from the newest that verifies, not the tenure's start. Not the standby's
    /// replica: 07 §7.5 would hold its promotion REP_PROMOTE_HISTORY_S (its response ring starts
    /// empty), and it keeps no snapshots.
    pub(super) fn audit_and_load(
        &mut self,
        cfg: &NodeConfig,
        name: &str,
        at: ReplayStart<'_>,
    ) -> Option<(u64, u64)> {
        let h = &cfg.home;
        let dirs = cfg.journal.as_deref()?;
        self.found = match &h.membership {
            Some(m) => crate::vote::verify_cert_journal(
                &dirs[..2.min(dirs.len())],
                m,
                at.root_blocks.unwrap_or(0),
            )
            .map(|c| c.roots),
            None => Ok(Default::default()),
        }
        .and_then(|roots| {
            crate::disk::snapshots::audit(self.dir.path(), &h.engine, &roots)
                .map_err(|e| e.to_string())
        });
        if cfg.standby {
            return None;
        }
        self.load(name, at)
    }

    /// 07 §7.6: start replay from the newest snapshot the audit vouched for (its state root is
    /// the certified `R(h)`), with the replay digest kept beside it, instead of the tenure's
    /// start. The stream is still decoded from its start; replay drops what the snapshot holds.
    /// A file that does not load, has no tally or is of another epoch is passed over (said
    /// why) for the next; with none, replay starts at the tenure's start as before.
    fn load(&mut self, name: &str, mut at: ReplayStart<'_>) -> Option<(u64, u64)> {
        let ok = match &self.found {
            Ok(a) => a.ok.clone(),
            Err(_) => return None,
        };
        for h in ok {
            match self.load_one(h, &mut at) {
                Ok(last_step) => {
                    eprintln!(
                        "{name}: loaded the snapshot of height {h} (last step {last_step}; its state root is the certified R({h})): replay starts at block {} (07 §7.6)",
                        h + 1
                    );
                    self.loaded = Some((h, last_step));
                    return self.loaded;
                }
                Err(why) => {
                    self.skipped += 1;
                    eprintln!("{name}: snapshot of height {h} not loaded: {why}");
                }
            }
        }
        None
    }

    fn load_one(&self, h: u64, at: &mut ReplayStart<'_>) -> Result<u64, String> {
        let (file, tally) = self.dir.read(h).map_err(|e| format!("unreadable: {e}"))?;
        let tally = tally
            .as_deref()
            .and_then(crate::replay::tile::SinkReport::from_bytes)
            .ok_or("no replay digest kept beside it")?;
        let epoch = vyrn_engine::snapshot::read(&file)
            .map_err(|e| e.to_string())?
            .0
            .meta
            .epoch;
        if epoch != at.epoch {
            return Err(format!("epoch {epoch}, the home's is {}", at.epoch));
        }
        let hdr = match at.tile.as_deref_mut() {
            Some(t) => t.restore(&file, &tally),
            None => at
                .core
                .restore_replay(&file)
                .inspect(|_| crate::replay::tile::ReportingSink::resume(at.sink, &tally)),
        }
        .map_err(|e| e.to_string())?;
        if let Some(rb) = at.root_blocks {
            // Roots go on after the snapshot's height (the tile takes this after its restore).
            let anchor = Anchor {
                height: h,
                last_step: hdr.last_step,
                ..Anchor::default()
            };
            at.core.set_root_blocks(rb, &anchor);
        }
        Ok(hdr.last_step)
    }
}

/// Snapshots that wait for their header before the oldest is dropped (counted).
pub(super) const SNAPS_PENDING: usize = 4;

/// Most blocks whose ORDER bytes and header wait for their vote before the oldest is dropped
/// (a replica that stopped voting keeps no unbounded backlog).
pub(super) const JOURNAL_PENDING_MAX: usize = 4096;
/// The writer syncs at most this often while blocks are queued (07 §8.2: final blocks on
/// NVMe within ≤ 5 ms, one io_uring batch).
pub(super) const JOURNAL_SYNC_NS: u64 = 5_000_000;

/// The journal side of a replica process: the block journal runs on its own writer thread, so
/// a slow `fdatasync` never stalls order RX, RepAcks or votes (07 §8.2: "a replica acks
/// nothing to anyone based on NVMe"). Records go to it through a bounded queue. A full queue
/// never skips a block and never blocks the tile: the record waits in its backlog
/// (handed on, in order, as the queue drains), and while anything waits there the voter checks
/// no new block ([`NodeJournal::behind`]: backpressure on the verdict, so the backlog stays
/// bounded by the blocks voted before it filled).
#[derive(Debug)]
pub struct NodeJournal {
    /// What recovery found at start.
    pub recovered: RecoveryReport,
    /// Highest height recovery served.
    pub recovered_top: u64,
    /// The end of the gap-free run of heights recovery served from its lowest (0: none): blocks
    /// this replica checked before it restarted, not handed to the writer again.
    pub held_through: u64,
    /// Voted blocks not handed to the writer: a piece missing, or their header dropped from a
    /// pending map past JOURNAL_PENDING_MAX (never a full queue: that waits in `backlog`).
    pub skipped: u64,
    /// Records the writer's full queue could not take yet, oldest first: handed on before any
    /// newer one.
    pub(super) backlog: std::collections::VecDeque<(u64, RepBlockRecord)>,
    /// Times a record had to wait in `backlog` (the writer's queue was full).
    pub backlogged: u64,
    pub(super) tx: Option<std::sync::mpsc::SyncSender<ToWriter>>,
    /// Certificates not handed to the writer (its queue full).
    pub certs_skipped: u64,
    pub(super) writer: Option<std::thread::JoinHandle<()>>,
    pub(super) stats: Arc<JournalStats>,
    /// The blocks recovered at start, read back for their payloads after a restart
    /// ([`Node::feed_own_payloads`]); dropped once fed.
    pub(super) reader: Option<OwnBlocks>,
}

/// A read-only view of the block journal as recovery found it, and the next block whose
/// payloads go to the data side.
#[derive(Debug)]
pub(super) struct OwnBlocks {
    journal: BlockJournal,
    next: u64,
    through: u64,
}

/// Blocks of its own journal a restarted replica reads per poll.
const OWN_BLOCKS_PER_POLL: u64 = 8;
/// How far past the block being decoded their payloads are fed (the data store holds them
/// until their records come; bounded so a long journal never floods it).
const OWN_BLOCKS_AHEAD: u64 = 32;

/// What the journal writer takes (a block moves by value: the queue holds at most
/// `JOURNAL_QUEUE` of them, and boxing each would allocate per block).
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
pub(super) enum ToWriter {
    /// A voted block.
    Block(u64, RepBlockRecord),
    /// A certificate for the cert journal: a `REP_FinalityCert`'s bytes (type byte included)
    /// or a `REP_RootCert`'s (07 §7.4).
    Cert(crate::disk::journal::cert::CertKind, Vec<u8>),
    /// A REP_Snapshot of height h for the snapshot area (07 §7.5; 07 §7.2's storage core
    /// writes it, so its fsync never stalls order RX).
    Snapshot(crate::disk::snapshots::SnapshotDir, crate::replay::Taken),
}

/// The writer thread's figures.
#[derive(Debug, Default)]
pub(super) struct JournalStats {
    pub(super) certs: AtomicU64,
    pub(super) appended: AtomicU64,
    pub(super) synced: AtomicU64,
    pub(super) identical: AtomicU64,
    pub(super) errors: AtomicU64,
    /// Bytes made durable (`JournalCounters::bytes_written`, slot heads included).
    pub(super) bytes: AtomicU64,
    /// Snapshots written, the newest one's height, and writes that failed.
    pub(super) snapshots: AtomicU64,
    pub(super) snapshot_height: AtomicU64,
    pub(super) snapshot_errors: AtomicU64,
    /// The first failure of a block or certificate write ([`JournalFailure`] as a number; 0:
    /// none yet).
    pub(super) failed: AtomicU64,
    /// Blocks the retention ring deleted (07 §8.3), and the oldest height it still holds.
    pub(super) evicted: AtomicU64,
    pub(super) oldest: AtomicU64,
    /// REP_A_ARCHIVE as the journal raised it (07 §8.3).
    pub(super) archive_alarm: std::sync::atomic::AtomicBool,
}

/// What failed first on the journal writer (REP_A_JOURNAL): a block append, a block sync, a
/// certificate append or a cert-journal sync. A snapshot write is not one of them (a missed
/// snapshot only lengthens a restart: counted apart).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JournalFailure {
    /// `BlockJournal::append_record` refused or failed.
    Append,
    /// `BlockJournal::sync`: a drive's write or `fdatasync` failed.
    Sync,
    /// `CertJournal::append` failed.
    CertAppend,
    /// `CertJournal::sync` failed.
    CertSync,
}

impl JournalFailure {
    const ALL: [JournalFailure; 4] = [
        JournalFailure::Append,
        JournalFailure::Sync,
        JournalFailure::CertAppend,
        JournalFailure::CertSync,
    ];

    /// The name in the alarm line and the metric label.
    pub fn name(self) -> &'static str {
        match self {
            JournalFailure::Append => "append",
            JournalFailure::Sync => "sync",
            JournalFailure::CertAppend => "cert_append",
            JournalFailure::CertSync => "cert_sync",
        }
    }
}

impl JournalStats {
    /// Count an error, and remember it if it is the first.
    pub(super) fn fail(&self, f: JournalFailure) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        let code = 1 + JournalFailure::ALL
            .iter()
            .position(|&x| x == f)
            .unwrap_or(0) as u64;
        let _ = self
            .failed
            .compare_exchange(0, code, Ordering::Relaxed, Ordering::Relaxed);
    }
}

/// The journal writer tile (07 §8.2): takes the node's blocks, certificates and snapshots from
/// its queue, appends them, and syncs at most every `sync_ns` — on a thread of its own
/// ([`NodeJournal`]), or polled by the seeded scheduler. When the node closes the queue it syncs
/// once more and is `done`.
#[derive(Debug)]
pub struct JournalWriter {
    rx: std::sync::mpsc::Receiver<ToWriter>,
    journal: BlockJournal,
    certs: crate::disk::journal::cert::CertJournal,
    st: Arc<JournalStats>,
    sync_ns: u64,
    last_sync: u64,
    cert_dirty: bool,
    /// The queue closed and the last sync ran.
    pub done: bool,
}

/// Messages the writer takes per poll before it looks at its sync timer.
const WRITER_BATCH: usize = 64;

impl JournalWriter {
    /// One step at `now`: up to [`WRITER_BATCH`] messages, then the sync if it is due.
    pub fn poll(&mut self, now: u64) -> bool {
        if self.done {
            return false;
        }
        let mut work = false;
        for _ in 0..WRITER_BATCH {
            match self.rx.try_recv() {
                Ok(m) => {
                    self.take(m);
                    work = true;
                }
                Err(std::sync::mpsc::TryRecvError::Empty) => break,
                Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                    self.sync();
                    let _ = self.certs.sync();
                    self.done = true;
                    return true;
                }
            }
        }
        if now.saturating_sub(self.last_sync) >= self.sync_ns {
            if self.cert_dirty {
                if self.certs.sync().is_err() {
                    self.st.fail(JournalFailure::CertSync);
                }
                self.cert_dirty = false;
                work = true;
            }
            if self.journal.queued() > 0 {
                self.sync();
                self.last_sync = now;
                work = true;
            }
        }
        work
    }

    fn take(&mut self, m: ToWriter) {
        let st = &self.st;
        match m {
            ToWriter::Cert(kind, b) => match self.certs.append(kind, &b) {
                Ok(_) => {
                    st.certs.fetch_add(1, Ordering::Relaxed);
                    self.cert_dirty = true;
                }
                Err(_) => st.fail(JournalFailure::CertAppend),
            },
            ToWriter::Block(h, rec) => match self.journal.append_record(&rec) {
                Ok(Appended::Queued) => {
                    st.appended.fetch_max(h, Ordering::Relaxed);
                }
                Ok(Appended::Identical) => {
                    st.identical.fetch_add(1, Ordering::Relaxed);
                }
                Err(_) => st.fail(JournalFailure::Append),
            },
            ToWriter::Snapshot(d, t) => match d.write(t.height, &t.file, &t.tally) {
                Ok(_) => {
                    st.snapshots.fetch_add(1, Ordering::Relaxed);
                    st.snapshot_height.store(t.height, Ordering::Relaxed);
                }
                Err(e) => {
                    st.snapshot_errors.fetch_add(1, Ordering::Relaxed);
                    eprintln!("snapshot at height {} not written: {e}", t.height);
                }
            },
        }
    }

    fn sync(&mut self) {
        let r = self.journal.sync();
        // 07 §8.3: the ring's deletions and REP_A_ARCHIVE, for the node's alarm line.
        let c = self.journal.counters();
        let st = &self.st;
        st.evicted
            .store(c.evicted_archived + c.evicted_unarchived, Ordering::Relaxed);
        st.oldest.store(
            self.journal.heights().first().copied().unwrap_or(0),
            Ordering::Relaxed,
        );
        st.archive_alarm
            .store(self.journal.archive_alarm(), Ordering::Relaxed);
        match r {
            Ok(()) => {
                let st = &self.st;
                st.synced
                    .store(st.appended.load(Ordering::Relaxed), Ordering::Relaxed);
                st.bytes
                    .store(self.journal.counters().bytes_written, Ordering::Relaxed);
            }
            Err(_) => self.st.fail(JournalFailure::Sync),
        }
    }
}

impl vyrn_tile::Task for JournalWriter {
    fn name(&self) -> String {
        "journal".into()
    }
    fn class(&self) -> vyrn_tile::TileClass {
        vyrn_tile::TileClass::Cold
    }
    fn poll(&mut self, now: u64) -> bool {
        JournalWriter::poll(self, now)
    }
}

/// Blocks the writer's queue holds (about 4 s of dev blocks).
pub(super) const JOURNAL_QUEUE: usize = 2048;

impl NodeJournal {
    pub(super) fn start(
        journal: BlockJournal,
        certs: crate::disk::journal::cert::CertJournal,
        recovered: RecoveryReport,
        sync_ns: u64,
        cores: Option<Vec<usize>>,
    ) -> NodeJournal {
        let heights = journal.heights();
        let top = heights.last().copied().unwrap_or(0);
        let held_through = gap_free_through(&heights);
        let stats = Arc::new(JournalStats::default());
        stats.appended.store(top, Ordering::Relaxed);
        stats.synced.store(top, Ordering::Relaxed);
        let (tx, rx) = std::sync::mpsc::sync_channel::<ToWriter>(JOURNAL_QUEUE);
        stats.certs.store(certs.len() as u64, Ordering::Relaxed);
        let mut w = JournalWriter {
            rx,
            journal,
            certs,
            st: stats.clone(),
            sync_ns,
            last_sync: 0,
            cert_dirty: false,
            done: false,
        };
        let writer = std::thread::spawn(move || {
            if let Some(c) = cores {
                let _ = vyrn_tile::pin::pin_to(&c);
            }
            // No descriptor wakes it: it looks at its queue at least every millisecond (and
            // syncs every `sync_ns`), and sleeps in between.
            let wait = vyrn_tile::Wait::Block {
                timeout_ns: sync_ns.clamp(1, 1_000_000),
            };
            let clock = vyrn_tile::Clock::new();
            let stop = std::sync::atomic::AtomicBool::new(false);
            vyrn_tile::run_loop(&stop, None, wait, || {
                let busy = w.poll(clock.now());
                if w.done {
                    stop.store(true, Ordering::Release);
                }
                busy
            });
        });
        NodeJournal {
            recovered,
            recovered_top: top,
            held_through,
            skipped: 0,
            certs_skipped: 0,
            tx: Some(tx),
            writer: Some(writer),
            stats,
            reader: None,
            backlog: Default::default(),
            backlogged: 0,
        }
    }

    /// Highest height handed to the journal and appended.
    pub fn appended(&self) -> u64 {
        self.stats.appended.load(Ordering::Relaxed)
    }

    /// Highest height durable (appended before the last successful sync).
    pub fn synced(&self) -> u64 {
        self.stats.synced.load(Ordering::Relaxed)
    }

    /// Blocks the retention ring deleted (07 §8.3), and the oldest height the journal holds
    /// (as of the writer's last sync).
    pub fn retention(&self) -> (u64, u64) {
        (
            self.stats.evicted.load(Ordering::Relaxed),
            self.stats.oldest.load(Ordering::Relaxed),
        )
    }

    /// Whether REP_A_ARCHIVE is raised (07 §8.3): the ring deleted a block an archive node had
    /// not taken, or the archive lags. Never without an archive node.
    pub fn archive_alarm(&self) -> bool {
        self.stats.archive_alarm.load(Ordering::Relaxed)
    }

    /// Bytes the journal made durable since it opened (blocks and their slot heads).
    pub fn bytes_written(&self) -> u64 {
        self.stats.bytes.load(Ordering::Relaxed)
    }

    /// Heights the journal already held with the same bytes.
    pub fn identical(&self) -> u64 {
        self.stats.identical.load(Ordering::Relaxed)
    }

    /// The first write that failed (REP_A_JOURNAL), if one did.
    pub fn failure(&self) -> Option<JournalFailure> {
        match self.stats.failed.load(Ordering::Relaxed) {
            0 => None,
            c => JournalFailure::ALL.get(c as usize - 1).copied(),
        }
    }

    /// Append or sync errors.
    pub fn errors(&self) -> u64 {
        self.stats.errors.load(Ordering::Relaxed)
    }

    /// Hand block `h` to the writer, after every record waiting in the backlog; a full queue
    /// keeps it in the backlog, in order (never skipped).
    pub(super) fn submit(&mut self, h: u64, rec: RepBlockRecord) {
        self.drain_backlog();
        if !self.backlog.is_empty() {
            self.backlog.push_back((h, rec));
            self.backlogged += 1;
            return;
        }
        let Some(tx) = self.tx.as_ref() else {
            self.skipped += 1;
            return;
        };
        match tx.try_send(ToWriter::Block(h, rec)) {
            Ok(()) => {}
            Err(std::sync::mpsc::TrySendError::Full(ToWriter::Block(h, rec))) => {
                self.backlog.push_back((h, rec));
                self.backlogged += 1;
            }
            Err(_) => self.skipped += 1,
        }
    }

    /// Hand the backlog's records to the writer while its queue takes them.
    pub(super) fn drain_backlog(&mut self) {
        let Some(tx) = self.tx.as_ref() else {
            return;
        };
        while let Some((h, rec)) = self.backlog.pop_front() {
            match tx.try_send(ToWriter::Block(h, rec)) {
                Ok(()) => {}
                Err(std::sync::mpsc::TrySendError::Full(ToWriter::Block(h, rec))) => {
                    self.backlog.push_front((h, rec));
                    return;
                }
                Err(_) => {
                    self.skipped += 1 + self.backlog.len() as u64;
                    self.backlog.clear();
                    return;
                }
            }
        }
    }

    /// Voted blocks waiting for the writer's queue.
    pub fn backlog_len(&self) -> usize {
        self.backlog.len()
    }

    /// Whether voted blocks wait for the writer's queue: the voter checks no new block until
    /// they are handed on (07 §8.2: a final block on this replica's drive within a batch).
    pub fn behind(&self) -> bool {
        !self.backlog.is_empty()
    }

    /// A snapshot for the writer to put in `dir` (07 §7.5); false when its queue is full.
    pub(super) fn submit_snapshot(
        &mut self,
        dir: crate::disk::snapshots::SnapshotDir,
        t: crate::replay::Taken,
    ) -> bool {
        self.tx
            .as_ref()
            .is_some_and(|tx| tx.try_send(ToWriter::Snapshot(dir, t)).is_ok())
    }

    /// Snapshots the writer wrote, the newest one's height, and its failed writes.
    pub fn snapshots(&self) -> (u64, u64, u64) {
        (
            self.stats.snapshots.load(Ordering::Relaxed),
            self.stats.snapshot_height.load(Ordering::Relaxed),
            self.stats.snapshot_errors.load(Ordering::Relaxed),
        )
    }

    /// A certificate's bytes for the cert journal (07 §8.2).
    pub(super) fn submit_cert(
        &mut self,
        kind: crate::disk::journal::cert::CertKind,
        bytes: Vec<u8>,
    ) {
        let ok = self
            .tx
            .as_ref()
            .is_some_and(|tx| tx.try_send(ToWriter::Cert(kind, bytes)).is_ok());
        if !ok {
            self.certs_skipped += 1;
        }
    }

    /// Certificates in the cert journal (recovered and appended).
    pub fn certs(&self) -> u64 {
        self.stats.certs.load(Ordering::Relaxed)
    }

    /// Close the queue and wait for the writer's last sync (the backlog handed on first, the
    /// writer draining as it goes).
    pub(super) fn finish(&mut self) {
        let t0 = std::time::Instant::now();
        while !self.backlog.is_empty()
            && self.writer.as_ref().is_some_and(|w| !w.is_finished())
            && t0.elapsed() < std::time::Duration::from_secs(10)
        {
            self.drain_backlog();
            if !self.backlog.is_empty() {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        }
        self.tx = None;
        if let Some(w) = self.writer.take() {
            let _ = w.join();
        }
    }
}

impl Drop for NodeJournal {
    fn drop(&mut self) {
        self.finish();
    }
}

/// The last height of the gap-free run that starts at the lowest of `heights` (ascending);
/// 0 when there is none.
fn gap_free_through(heights: &[u64]) -> u64 {
    let Some(&first) = heights.first() else {
        return 0;
    };
    let mut last = first;
    for &h in &heights[1..] {
        if h != last + 1 {
            break;
        }
        last = h;
    }
    last
}

impl Node {
    /// A restarted replica takes the payloads of the blocks its own journal held at start
    /// (07 §8.2: checked here before the restart) instead of fetching them from its data box,
    /// peers and the sequencer, who may have dropped them long ago: a block's packets a few
    /// blocks ahead of the one being decoded ([`OWN_BLOCKS_AHEAD`]), [`OWN_BLOCKS_PER_POLL`]
    /// blocks a poll. The data side checks each against its record's hash as any copy. Returns
    /// the payloads taken.
    pub(super) fn feed_own_payloads(&mut self, now: u64) -> usize {
        let Some(r) = self.journal.as_mut().and_then(|j| j.reader.as_mut()) else {
            return 0;
        };
        let open = self.core.open_height(0).max(self.core.open_height(1));
        let mut n = 0;
        let mut blocks = 0;
        while r.next <= r.through
            && r.next < open + OWN_BLOCKS_AHEAD
            && blocks < OWN_BLOCKS_PER_POLL
        {
            let h = r.next;
            r.next += 1;
            blocks += 1;
            let buf = match r.journal.read(h) {
                Ok(b) => b,
                Err(_) => {
                    self.io.c.own_journal_unread += 1;
                    continue;
                }
            };
            let Ok(rec) = vyrn_wire::msg::journal::BlockRecordRef::parse(&buf) else {
                self.io.c.own_journal_unread += 1;
                continue;
            };
            for p in rec.packets() {
                self.core
                    .on_fetched(crate::front::data::Source::Journal, p, now, &mut self.io);
                n += 1;
            }
        }
        self.io.c.own_journal_payloads += n as u64;
        if r.next > r.through {
            eprintln!(
                "{}: took {} payloads of blocks ..={} from its own block journal ({} blocks unread)",
                self.io.name, self.io.c.own_journal_payloads, r.through, self.io.c.own_journal_unread
            );
            if let Some(j) = self.journal.as_mut() {
                j.reader = None;
            }
        }
        n
    }

    /// Hand the snapshots replay took whose block header is known (07 §7.5: `header_hash(h)`
    /// goes in the file's header) to the journal's writer thread; rare (one per snapshot
    /// interval), off the per-packet path.
    pub(super) fn write_snapshots(&mut self) {
        let Some(sn) = self.snaps.as_mut() else {
            return;
        };
        while let Some(t) = self.core.take_snapshot() {
            sn.pending.push_back(t);
            if sn.pending.len() > SNAPS_PENDING {
                // Its header never came: not written (counted), the newer ones go on.
                sn.pending.pop_front();
                self.io.c.snapshot_errors += 1;
            }
        }
        while let Some(hash) = sn
            .pending
            .front()
            .and_then(|t| sn.headers.get(&t.height).copied())
        {
            let Some(mut t) = sn.pending.pop_front() else {
                break;
            };
            // The journal's writer thread writes it (07 §7.2's storage core): its fsync never
            // stalls this thread.
            let handed = vyrn_engine::snapshot::set_header_hash(&mut t.file, &hash).is_ok()
                && self
                    .journal
                    .as_mut()
                    .is_some_and(|j| j.submit_snapshot(sn.dir.clone(), t));
            if !handed {
                self.io.c.snapshot_errors += 1;
            }
        }
    }

    /// With snapshots on: their schedule, and what the audit at start found in the area.
    pub fn snapshots(
        &self,
    ) -> Option<(
        &crate::replay::SnapPolicy,
        &Result<crate::disk::snapshots::SnapAudit, String>,
    )> {
        self.snaps.as_ref().map(|s| (&s.policy, &s.found))
    }

    /// Write every block voted since the last round to the journal (07 §8.2: "written once,
    /// when its verify passes"), and sync at most every [`JOURNAL_SYNC_NS`].
    pub(super) fn journal_voted(&mut self, _now: u64) {
        let voted = self.voted();
        let Some(j) = self.journal.as_mut() else {
            return;
        };
        let from = self
            .io
            .pending_hdr
            .first_key_value()
            .map_or(voted + 1, |(&h, _)| h);
        for h in from..=voted {
            let Some(hdr) = self.io.pending_hdr.remove(&h) else {
                continue;
            };
            if h <= j.held_through {
                // Recovered from this journal at start: decoded again, never written again.
                continue;
            }
            let [a, b] = self.io.pending_order.remove(&h).unwrap_or_default();
            let core = &self.core;
            // The tenure that produced it (07 §9.5: after a seal, the next one's from the
            // block after the seal block; the seal block is the deposed tenure's last).
            let tenure = self.next.tenure_of(h);
            let unavail = core.block_unavail(h);
            let rec = crate::disk::record::block_record(tenure, hdr, &a, &b, unavail, |f| {
                core.block_packets(h, f)
            });
            match rec {
                Some(r) => j.submit(h, r),
                None => j.skipped += 1,
            }
        }
        self.io.pending_order = self.io.pending_order.split_off(&(voted + 1));
    }

    /// The journal side, if this replica journals.
    pub fn journal(&self) -> Option<&NodeJournal> {
        self.journal.as_ref()
    }

    /// Hand the writer its last blocks and wait for its final sync (at the end of a run).
    pub fn sync_journal(&mut self) {
        if let Some(j) = self.journal.as_mut() {
            j.finish();
        }
    }
}

impl NodeSnaps {
    /// The snapshot policy and area of `cfg` (none when it takes no snapshots), set on replay.
    pub(super) fn open(
        cfg: &NodeConfig,
        root_blocks: Option<u64>,
        core: &mut ReplicaCore,
        tile: Option<&mut ReplayTile<ReplaySink>>,
    ) -> Result<Option<NodeSnaps>, String> {
        let h = &cfg.home;
        Ok(
            match (
                cfg.snapshot_blocks,
                cfg.journal.as_ref().and_then(|d| d.first()),
            ) {
                (0, _) => None,
                (_, None) => return Err("snapshots need a journal (--journal)".into()),
                (every, Some(d0)) => {
                    let n = h.voters.max(1) as u64;
                    let rb = root_blocks.ok_or("snapshots need state roots (the Simplex voter)")?;
                    if every % (n * rb) != 0 {
                        return Err(format!(
                        "snapshot interval {every} blocks: not a multiple of voters × REP_ROOT_BLOCKS = {} (07 §7.5: snapshots fall on root heights)",
                        n * rb
                    ));
                    }
                    let mut policy = crate::replay::SnapPolicy::for_participant(
                        every,
                        cfg.index as u64,
                        n,
                        h.epoch,
                    );
                    // Section 7: the REP_Membership in force (its body digest, 07 §13.1).
                    if let Some(m) = &h.membership {
                        policy.replication.membership_hash = m.body_digest();
                    }
                    let set = match tile {
                        Some(t) => {
                            t.set_snapshots(policy.clone());
                            true
                        }
                        None => core.set_snapshots(policy.clone()),
                    };
                    if !set {
                        return Err("snapshots: replay is on a tile the node does not hold".into());
                    }
                    let dir = crate::disk::snapshots::SnapshotDir::open(&d0.join("snapshots"))
                        .map_err(|e| format!("snapshot area: {e}"))?;
                    Some(NodeSnaps {
                        dir,
                        policy,
                        pending: Default::default(),
                        headers: Default::default(),
                        found: Ok(Default::default()),
                        loaded: None,
                        skipped: 0,
                    })
                }
            },
        )
    }
}

impl NodeJournal {
    /// The journal of `cfg` (none when it journals nothing): recovered, its writer started.
    pub(super) fn open(
        cfg: &NodeConfig,
        me: &vyrn_home::VoterMember,
    ) -> Result<Option<NodeJournal>, String> {
        let h = &cfg.home;
        Ok(match &cfg.journal {
            None => None,
            Some(dirs) => {
                let mut jc = JournalConfig::new(dirs.clone());
                jc.verifying_key = Some(h.seq_pub);
                jc.later_keys = h.later_tenure_keys();
                jc.backend = cfg.journal_backend;
                if cfg.journal_segment_bytes > 0 {
                    jc.segment_bytes = cfg.journal_segment_bytes;
                }
                // 07 §8.3: the retention ring from the home file (`[voter.N] retain_blocks`,
                // `retain_gib`, per drive). No archive node runs in a home yet (§8.4), so the
                // ring's budget is the horizon: past it the oldest block goes, with no alarm.
                if let Some(b) = me.retain_blocks {
                    jc.budget_blocks_per_drive = b;
                }
                if let Some(g) = me.retain_gib {
                    jc.budget_bytes_per_drive = g.saturating_mul(1 << 30);
                }
                jc.archive_node = false;
                let (journal, recovered) =
                    BlockJournal::open(jc).map_err(|e| format!("journal: {e:?}"))?;
                let every = if cfg.journal_sync_ns == 0 {
                    JOURNAL_SYNC_NS
                } else {
                    cfg.journal_sync_ns
                };
                // The cert journal, mirrored on the first two drives (07 §8.2).
                let certs = crate::disk::journal::cert::CertJournal::open(dirs)
                    .map_err(|e| format!("cert journal: {e}"))?;
                let mut nj =
                    NodeJournal::start(journal, certs, recovered, every, cfg.journal_cores.clone());
                // 07 §8.2, §7.6: a restart reads its own blocks back for their payloads. A
                // second, read-only view (the writer's journal moved to its thread); its scan
                // checks every record again.
                if nj.held_through > 0 {
                    let mut rc = JournalConfig::new(dirs.clone());
                    rc.read_only = true;
                    rc.backend = cfg.journal_backend;
                    match BlockJournal::open(rc) {
                        Ok((journal, _)) => {
                            let next = journal.heights().first().copied().unwrap_or(1);
                            nj.reader = Some(OwnBlocks {
                                journal,
                                next,
                                through: nj.held_through,
                            });
                        }
                        Err(e) => eprintln!(
                            "replica {}: the journal's blocks cannot be read back ({e:?}): their payloads are fetched",
                            cfg.index
                        ),
                    }
                }
                Some(nj)
            }
        })
    }
}

impl Node {
    /// REP_A_JOURNAL: the first block or certificate write that failed stops this replica's
    /// votes, here and in the interim voter, with an alarm line and a counter — a vote for a
    /// block this replica may not hold on disk counts toward a durability it does not give
    /// (07 §6.9: durable at the client means Q journals). Once; until the process restarts.
    pub(super) fn check_journal(&mut self) {
        // 07 §8.3: REP_A_ARCHIVE's transitions, one line each.
        let archive = self
            .journal
            .as_ref()
            .is_some_and(NodeJournal::archive_alarm);
        if archive != (self.io.c.archive_alarm != 0) {
            self.io.c.archive_alarm = archive as u64;
            eprintln!(
                "{}: alarm=REP_A_ARCHIVE state={} role=replica: the block journal's ring deleted a block the archive node had not taken, or the archive lags (07 §8.3); receiving, storing and voting go on",
                self.io.name,
                if archive { "raised" } else { "cleared" }
            );
        }
        if self.io.c.journal_failed != 0 {
            return;
        }
        let Some(f) = self.journal.as_ref().and_then(NodeJournal::failure) else {
            return;
        };
        self.io.c.journal_failed = 1;
        if let Some(v) = self.simplex.as_mut() {
            v.stop_votes();
        }
        self.interim_stop();
        eprintln!(
            "{}: alarm=REP_A_JOURNAL role=replica what={}: a journal write failed; voting stopped (07 §6.9: restart on a working drive, its peers serve what it lacks)",
            self.io.name,
            f.name()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The checked prefix a restart resumes from ends at the first gap after the lowest height.
    #[test]
    fn the_recovered_prefix_ends_at_the_first_gap() {
        assert_eq!(gap_free_through(&[]), 0);
        assert_eq!(gap_free_through(&[1, 2, 3]), 3);
        assert_eq!(gap_free_through(&[1, 2, 4, 5]), 2);
        // Retention removed the oldest: the run starts at the lowest held.
        assert_eq!(gap_free_through(&[40, 41, 42]), 42);
        assert_eq!(gap_free_through(&[7]), 7);
    }
    use crate::disk::journal::{AlignedBuf, Backend, BackendKind, FileId, StdBackend};
    use std::sync::atomic::AtomicBool;

    /// A backend whose flush fails every file written while `armed` (a drive's I/O error), and
    /// takes `flush_ms` (a slow drive).
    #[derive(Debug)]
    struct Failing {
        inner: StdBackend,
        armed: Arc<AtomicBool>,
        bad: Vec<FileId>,
        flush_ms: u64,
    }

    impl Backend for Failing {
        fn kind(&self) -> BackendKind {
            self.inner.kind()
        }
        fn open(&mut self, p: &std::path::Path, create_new: bool) -> std::io::Result<FileId> {
            self.inner.open(p, create_new)
        }
        fn close(&mut self, f: FileId) {
            self.inner.close(f)
        }
        fn file_len(&self, f: FileId) -> std::io::Result<u64> {
            self.inner.file_len(f)
        }
        fn truncate(&mut self, f: FileId, len: u64) -> std::io::Result<()> {
            self.inner.truncate(f, len)
        }
        fn queue_write(&mut self, f: FileId, off: u64, buf: AlignedBuf) -> std::io::Result<()> {
            if self.armed.load(Ordering::Relaxed) {
                self.bad.push(f);
                return Ok(());
            }
            self.inner.queue_write(f, off, buf)
        }
        fn flush(&mut self) -> Vec<(FileId, std::io::Error)> {
            std::thread::sleep(Duration::from_millis(self.flush_ms));
            let mut v = self.inner.flush();
            v.extend(
                self.bad
                    .drain(..)
                    .map(|f| (f, std::io::Error::from_raw_os_error(5))),
            );
            v
        }
        fn read(&mut self, f: FileId, off: u64, buf: &mut AlignedBuf) -> std::io::Result<usize> {
            self.inner.read(f, off, buf)
        }
        fn punch(&mut self, f: FileId, off: u64, len: u64) -> std::io::Result<()> {
            self.inner.punch(f, off, len)
        }
        fn preallocate(&mut self, f: FileId, len: u64) -> std::io::Result<()> {
            self.inner.preallocate(f, len)
        }
    }

    fn record(h: u64, key: &SigningKey) -> RepBlockRecord {
        let mut header = BlockHeader {
            height: h,
            epoch: 1,
            book: 0,
            first_step: h * 10,
            last_step: h * 10 + 9,
            prev: [h as u8; 32],
            order_root: [1; 32],
            data_root: [2; 32],
            seq_sig: [0; 64],
        };
        header.sign(key);
        RepBlockRecord {
            tenure: 0,
            header,
            order: vec![h as u8; 100],
            pkt_hashes: vec![],
            data: vec![],
            unavail: vec![],
        }
    }

    fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
        let t = Instant::now();
        while !f() {
            assert!(
                t.elapsed() < Duration::from_secs(5),
                "{what}: not within 5 s"
            );
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// The writer is a tile: the seeded scheduler drives it on simulated time — blocks are
    /// appended when polled, synced only once `sync_ns` passed, and a closed queue ends it after
    /// a last sync.
    #[test]
    fn the_seeded_scheduler_runs_the_journal_writer() {
        let dir = std::env::temp_dir().join(format!("vyrn-writertile-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let drives = vec![dir.join("nvme0")];
        let key = SigningKey::from_bytes(&[9; 32]);
        let mut jc = JournalConfig::new(drives.clone());
        jc.verifying_key = Some(key.verifying_key());
        let (journal, _) = BlockJournal::open_with(jc, Box::new(StdBackend::new())).unwrap();
        let certs = crate::disk::journal::cert::CertJournal::open(&drives).unwrap();
        let (tx, rx) = std::sync::mpsc::sync_channel(16);
        let st = Arc::new(JournalStats::default());
        let w = JournalWriter {
            rx,
            journal,
            certs,
            st: st.clone(),
            sync_ns: 1_000,
            last_sync: 0,
            cert_dirty: false,
            done: false,
        };
        let mut s = vyrn_tile::Seeded::new(vec![Box::new(w)], 3);
        for h in 1..=3 {
            tx.send(ToWriter::Block(h, record(h, &key))).unwrap();
        }
        s.settle(10, 8);
        assert_eq!(st.appended.load(Ordering::Relaxed), 3);
        assert_eq!(st.synced.load(Ordering::Relaxed), 0, "not before sync_ns");
        s.settle(2_000, 8);
        assert_eq!(st.synced.load(Ordering::Relaxed), 3);
        drop(tx);
        assert!(s.poll(0, 3_000), "the closed queue: a last sync");
        assert!(!s.poll(0, 4_000), "then done");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// 07 §8.2: a full writer queue never skips a block. A slow drive holds the
    /// writer while more blocks are voted than its queue takes: the rest wait in the backlog,
    /// in order, `behind()` says so (the voter holds its checks on it), and every block ends
    /// up in the journal, gap-free, none skipped.
    #[test]
    fn a_full_writer_queue_keeps_every_block_in_order() {
        let dir = std::env::temp_dir().join(format!("vyrn-backlog-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let drives = vec![dir.join("nvme0")];
        let key = SigningKey::from_bytes(&[9; 32]);
        let jc = JournalConfig::new(drives.clone());
        let be = Failing {
            inner: StdBackend::new(),
            armed: Arc::new(AtomicBool::new(false)),
            bad: Vec::new(),
            flush_ms: 50,
        };
        let (bj, rec) = BlockJournal::open_with(jc, Box::new(be)).expect("journal");
        let certs = crate::disk::journal::cert::CertJournal::open(&drives).expect("certs");
        let mut j = NodeJournal::start(bj, certs, rec, 1_000_000, None);
        let n = JOURNAL_QUEUE as u64 + 500;
        let mut was_behind = false;
        for h in 1..=n {
            j.submit(h, record(h, &key));
            was_behind |= j.behind();
        }
        assert!(was_behind && j.backlogged > 0, "the queue never filled");
        assert_eq!(j.skipped, 0);
        wait_for("the backlog handed on", || {
            j.drain_backlog();
            !j.behind()
        });
        j.finish();
        assert_eq!((j.appended(), j.synced(), j.skipped), (n, n, 0));
        drop(j);
        let mut ro = JournalConfig::new(drives);
        ro.read_only = true;
        let (bj, _) = BlockJournal::open(ro).expect("read back");
        assert_eq!(
            bj.heights(),
            (1..=n).collect::<Vec<_>>(),
            "gap-free, in order"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// REP_A_JOURNAL's source: the writer thread remembers the first write that failed — here a
    /// drive's sync after blocks that went through — and says which; the blocks before it stay
    /// synced. (`Node::check_journal` stops the votes on it; `Desk::stop_votes` is tested in
    /// `vyrn-consensus`.)
    #[test]
    fn the_writer_reports_the_first_failed_write() {
        let dir = std::env::temp_dir().join(format!("vyrn-nodejournal-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let drives = vec![dir.join("nvme0"), dir.join("nvme1")];
        let key = SigningKey::from_bytes(&[9; 32]);
        let mut jc = JournalConfig::new(drives.clone());
        jc.verifying_key = Some(key.verifying_key());
        let armed = Arc::new(AtomicBool::new(false));
        let be = Failing {
            inner: StdBackend::new(),
            armed: armed.clone(),
            bad: Vec::new(),
            flush_ms: 0,
        };
        let (bj, rec) = BlockJournal::open_with(jc, Box::new(be)).expect("journal");
        let certs = crate::disk::journal::cert::CertJournal::open(&drives).expect("certs");
        let mut j = NodeJournal::start(bj, certs, rec, 1_000_000, None);
        for h in 1..=3 {
            j.submit(h, record(h, &key));
        }
        wait_for("three blocks synced", || j.synced() >= 3);
        assert_eq!(j.failure(), None);
        assert_eq!(j.errors(), 0);
        armed.store(true, Ordering::Relaxed);
        j.submit(4, record(4, &key));
        wait_for("the sync failure", || j.failure().is_some());
        assert_eq!(j.failure(), Some(JournalFailure::Sync));
        assert!(j.errors() >= 1);
        assert_eq!(j.synced(), 3, "nothing after the failure counts as durable");
        j.finish();
        let _ = std::fs::remove_dir_all(&dir);
    }
}
