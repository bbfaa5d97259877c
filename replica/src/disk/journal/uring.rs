//! io_uring + O_DIRECT backend (guides/nic-and-storage-backends §6, verified on this machine
//! with io-uring 0.7.16; 07 §8.2: "one io_uring batch").
//!
//! A `flush` is two submissions: every queued write at once (the queue depth is the batch),
//! then one `Fsync(DATASYNC)` per file written, all in flight together so the drives sync in
//! parallel. (An `IO_DRAIN` on each fsync, as in the guide's sketch, would serialise the
//! fsyncs of different drives behind each other.)

use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use io_uring::{opcode, squeue, types, IoUring, Probe};

use super::backend::{
    keep_size_alloc, open_opts, punch_hole, AlignedBuf, Backend, BackendKind, FileId, Files,
};

/// Submission queue entries; a batch larger than this is fed in as completions free slots.
const RING_ENTRIES: u32 = 256;

/// io_uring + O_DIRECT. Owns the ring and every buffer in flight.
pub struct UringBackend {
    ring: IoUring,
    files: Files,
    queued: Vec<(FileId, u64, AlignedBuf)>,
    /// Set after a submission error with operations possibly in flight: their buffers were
    /// leaked (never freed under the kernel) and the ring is not used again.
    poisoned: bool,
}

impl std::fmt::Debug for UringBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UringBackend")
            .field("queued", &self.queued.len())
            .field("poisoned", &self.poisoned)
            .finish()
    }
}

fn poisoned() -> io::Error {
    io::Error::other("io_uring backend poisoned by an earlier submission error")
}

/// Push `entries` (user_data = index), submit, and reap until every one has completed.
/// Returns each entry's result (`cqe.result()`: ≥ 0 bytes, < 0 −errno). On a submission
/// error the caller must treat every entry as possibly still in flight.
fn run(ring: &mut IoUring, entries: &[squeue::Entry]) -> io::Result<Vec<i32>> {
    let mut results = vec![i32::MIN; entries.len()];
    let (mut next, mut done) = (0usize, 0usize);
    while done < entries.len() {
        {
            let mut sq = ring.submission();
            while next < entries.len() {
                // SAFETY: every entry points into a buffer owned by the backend's `queued`
                // list (writes) or the caller's `&mut AlignedBuf` (reads), which outlive this
                // call: `run` returns only after every pushed entry has completed, and on an
                // error the caller leaks the buffers and poisons the ring.
                if unsafe { sq.push(&entries[next]) }.is_err() {
                    break;
                }
                next += 1;
            }
        }
        loop {
            match ring.submit_and_wait(1) {
                Ok(_) => break,
                Err(e) if matches!(e.raw_os_error(), Some(libc::EINTR) | Some(libc::EBUSY)) => {}
                Err(e) => return Err(e),
            }
        }
        for cqe in ring.completion() {
            let i = cqe.user_data() as usize;
            if let Some(r) = results.get_mut(i) {
                if *r == i32::MIN {
                    *r = cqe.result();
                    done += 1;
                }
            }
        }
    }
    Ok(results)
}

fn errno(r: i32) -> io::Error {
    io::Error::from_raw_os_error(-r)
}

impl UringBackend {
    /// Create the ring and check that Write, Read and Fsync are supported.
    pub fn new() -> io::Result<UringBackend> {
        let ring = IoUring::new(RING_ENTRIES)?;
        let mut probe = Probe::new();
        ring.submitter().register_probe(&mut probe)?;
        for code in [opcode::Write::CODE, opcode::Read::CODE, opcode::Fsync::CODE] {
            if !probe.is_supported(code) {
                return Err(io::Error::from(io::ErrorKind::Unsupported));
            }
        }
        Ok(UringBackend {
            ring,
            files: Files::default(),
            queued: Vec::new(),
            poisoned: false,
        })
    }

    fn poison(&mut self) {
        self.poisoned = true;
        for (_, _, b) in self.queued.drain(..) {
            // Possibly still referenced by the kernel: never free it.
            std::mem::forget(b);
        }
    }
}

impl Backend for UringBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Uring
    }

    fn open(&mut self, path: &Path, create_new: bool) -> io::Result<FileId> {
        let f = open_opts(create_new)
            .custom_flags(libc::O_DIRECT)
            .open(path)?;
        Ok(self.files.insert(f))
    }

    fn close(&mut self, f: FileId) {
        self.files.remove(f);
    }

    fn file_len(&self, f: FileId) -> io::Result<u64> {
        Ok(self.files.get(f)?.metadata()?.len())
    }

    fn truncate(&mut self, f: FileId, len: u64) -> io::Result<()> {
        let file = self.files.get(f)?;
        file.set_len(len)?;
        file.sync_all()
    }

    fn queue_write(&mut self, f: FileId, offset: u64, buf: AlignedBuf) -> io::Result<()> {
        if self.poisoned {
            return Err(poisoned());
        }
        self.files.get(f)?;
        if u32::try_from(buf.len()).is_err() {
            return Err(io::Error::from(io::ErrorKind::InvalidInput));
        }
        self.queued.push((f, offset, buf));
        Ok(())
    }

    fn flush(&mut self) -> Vec<(FileId, io::Error)> {
        let mut failed: Vec<(FileId, io::Error)> = Vec::new();
        if self.poisoned {
            let mut fs: Vec<FileId> = self.queued.iter().map(|q| q.0).collect();
            fs.dedup();
            return fs.into_iter().map(|f| (f, poisoned())).collect();
        }
        if self.queued.is_empty() {
            return failed;
        }
        // Phase 1: every write of the batch.
        let mut entries = Vec::with_capacity(self.queued.len());
        for (i, (f, off, buf)) in self.queued.iter().enumerate() {
            let fd = match self.files.get(*f) {
                Ok(file) => file.as_raw_fd(),
                Err(_) => -1,
            };
            entries.push(
                opcode::Write::new(types::Fd(fd), buf.as_ptr(), buf.len() as u32)
                    .offset(*off)
                    .build()
                    .user_data(i as u64),
            );
        }
        let results = match run(&mut self.ring, &entries) {
            Ok(r) => r,
            Err(e) => {
                let mut fs: Vec<FileId> = self.queued.iter().map(|q| q.0).collect();
                fs.sort_by_key(|f| f.0);
                fs.dedup();
                self.poison();
                return fs
                    .into_iter()
                    .map(|f| (f, io::Error::new(e.kind(), e.to_string())))
                    .collect();
            }
        };
        let mut touched: Vec<FileId> = Vec::new();
        for ((f, _, buf), r) in self.queued.iter().zip(&results) {
            let err = if *r < 0 {
                Some(errno(*r))
            } else if *r as usize != buf.len() {
                Some(io::Error::new(
                    io::ErrorKind::WriteZero,
                    "short O_DIRECT write",
                ))
            } else {
                None
            };
            match err {
                Some(e) => {
                    if !failed.iter().any(|(x, _)| x == f) {
                        failed.push((*f, e));
                    }
                }
                None => {
                    if !touched.contains(f) {
                        touched.push(*f);
                    }
                }
            }
        }
        self.queued.clear();
        touched.retain(|f| !failed.iter().any(|(x, _)| x == f));
        // Phase 2: one data sync per file, all in flight together.
        let mut syncs = Vec::with_capacity(touched.len());
        for (i, f) in touched.iter().enumerate() {
            let fd = self.files.get(*f).map(|x| x.as_raw_fd()).unwrap_or(-1);
            syncs.push(
                opcode::Fsync::new(types::Fd(fd))
                    .flags(types::FsyncFlags::DATASYNC)
                    .build()
                    .user_data(i as u64),
            );
        }
        match run(&mut self.ring, &syncs) {
            Ok(rs) => {
                for (f, r) in touched.iter().zip(rs) {
                    if r < 0 {
                        failed.push((*f, errno(r)));
                    }
                }
            }
            Err(e) => {
                // No buffer is referenced by an fsync, but entries may be left in the ring.
                self.poisoned = true;
                for f in touched {
                    failed.push((f, io::Error::new(e.kind(), e.to_string())));
                }
            }
        }
        failed
    }

    fn read(&mut self, f: FileId, offset: u64, buf: &mut AlignedBuf) -> io::Result<usize> {
        if self.poisoned {
            return Err(poisoned());
        }
        let fd = self.files.get(f)?.as_raw_fd();
        let mut n = 0usize;
        // O_DIRECT reads in ≤ 1 GiB pieces (the u32 length of one SQE), stopping at EOF.
        while n < buf.len() {
            let want = (buf.len() - n).min(1 << 30);
            // SAFETY: `n < buf.len()`, so the pointer stays inside the buffer; `want` bytes
            // from there are in bounds.
            let ptr = unsafe { buf.as_mut_ptr().add(n) };
            let e = opcode::Read::new(types::Fd(fd), ptr, want as u32)
                .offset(offset + n as u64)
                .build()
                .user_data(0);
            let r = match run(&mut self.ring, std::slice::from_ref(&e)) {
                Ok(r) => r[0],
                Err(err) => {
                    // The read may still be in flight into `buf`, which the caller owns:
                    // the ring is not used again, and the buffer must outlive a completion
                    // that will never be reaped; leaking it is the only sound choice.
                    self.poison();
                    let leak = std::mem::replace(buf, AlignedBuf::zeroed(buf.len()));
                    std::mem::forget(leak);
                    return Err(err);
                }
            };
            if r < 0 {
                return Err(errno(r));
            }
            if r == 0 {
                break;
            }
            n += r as usize;
            if (r as usize) < want {
                // Short: at EOF (O_DIRECT reads stop at the file's end).
                break;
            }
        }
        Ok(n)
    }

    fn punch(&mut self, f: FileId, offset: u64, len: u64) -> io::Result<()> {
        punch_hole(self.files.get(f)?, offset, len)
    }

    fn preallocate(&mut self, f: FileId, len: u64) -> io::Result<()> {
        keep_size_alloc(self.files.get(f)?, len)
    }
}

impl Drop for UringBackend {
    fn drop(&mut self) {
        if !self.queued.is_empty() && !self.poisoned {
            // Queued but never submitted: nothing references the buffers yet.
            self.queued.clear();
        }
    }
}
