//! Storage backends behind one trait (missing-chapters §5; guides/nic-and-storage-backends §6,
//! §9): [`StdBackend`] (portable `pwrite` + `fdatasync`) and, on Linux,
//! [`UringBackend`](super::uring::UringBackend) (io_uring + O_DIRECT, batched).
//!
//! The journal hands a backend whole 4 KiB-aligned buffers at 4 KiB-aligned offsets
//! ([`AlignedBuf`]), so one call sequence is valid for both: `queue_write`… then `flush`, which
//! returns only once every queued write and one data sync of every touched file have completed.

use std::alloc::{self, Layout};
use std::fmt;
use std::fs::{File, OpenOptions};
use std::io;
use std::ops::{Deref, DerefMut};
use std::path::Path;
use std::ptr::NonNull;

/// O_DIRECT alignment used for every offset, length and buffer address (guides §6: keep 4 KiB
/// for 4Kn NVMe drives even where 512 B is accepted).
pub const PAGE: usize = 4096;

/// A zeroed heap buffer, 4 KiB aligned, its length a non-zero multiple of 4 KiB.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: AlignedBuf owns its allocation exclusively (like a Box<[u8]>); no aliasing pointer
// exists outside it, so moving it to or sharing it with another thread is sound.
unsafe impl Send for AlignedBuf {}
// SAFETY: shared access only hands out `&[u8]`, as `Box<[u8]>` does.
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// A zeroed buffer of at least `len` bytes, rounded up to a multiple of [`PAGE`] (at least
    /// one page). Aborts only if the allocator itself fails, like `Vec`.
    pub fn zeroed(len: usize) -> AlignedBuf {
        let len = len.max(1).div_ceil(PAGE).saturating_mul(PAGE);
        let layout = match Layout::from_size_align(len, PAGE) {
            Ok(l) => l,
            Err(_) => alloc::handle_alloc_error(Layout::new::<[u8; PAGE]>()),
        };
        // SAFETY: `layout` has a non-zero size (at least one page).
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        let Some(ptr) = NonNull::new(raw) else {
            alloc::handle_alloc_error(layout)
        };
        AlignedBuf { ptr, len }
    }

    /// Length in bytes (a multiple of [`PAGE`]).
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> usize {
        self.len
    }

    fn layout(&self) -> Layout {
        // The same size and alignment `zeroed` validated.
        Layout::from_size_align(self.len, PAGE).unwrap_or(Layout::new::<u8>())
    }

    pub(crate) fn as_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }

    pub(crate) fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from `alloc_zeroed` with exactly this layout and is freed once.
        unsafe { alloc::dealloc(self.ptr.as_ptr(), self.layout()) }
    }
}

impl Deref for AlignedBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: `ptr` is valid for `len` initialised (zeroed) bytes for the buffer's lifetime.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl DerefMut for AlignedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `deref`, and `&mut self` makes this the only live reference.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AlignedBuf")
            .field("len", &self.len)
            .finish()
    }
}

/// Which backend a journal runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendKind {
    /// io_uring + O_DIRECT.
    Uring,
    /// Portable `pwrite` + `fdatasync` through the page cache.
    Std,
}

/// What the journal asks for at open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BackendChoice {
    /// io_uring + O_DIRECT where the kernel and every drive directory allow it, else the
    /// portable backend (counted in `fallback_*`).
    #[default]
    Auto,
    /// io_uring + O_DIRECT or an open error.
    Uring,
    /// The portable backend.
    Std,
}

/// Why `Auto` fell back to the portable backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fallback {
    /// No io_uring (not Linux, `io_uring_disabled`, seccomp, or a missing opcode).
    UringUnavailable,
    /// A drive directory refused O_DIRECT (EINVAL at open or on an aligned write: tmpfs on
    /// older kernels, some FUSE and network file systems).
    ODirectRefused,
}

/// Pick the backend from what the probes found (pure, so the fallback rule is testable where
/// O_DIRECT happens to work). `uring_ok`: an io_uring with the needed opcodes was created;
/// `odirect`: the O_DIRECT probe of each drive directory.
pub fn decide(
    choice: BackendChoice,
    uring_ok: bool,
    odirect: &[io::Result<()>],
) -> Result<(BackendKind, Option<Fallback>), io::Error> {
    let why = if !uring_ok {
        Some(Fallback::UringUnavailable)
    } else if let Some(e) = odirect.iter().find_map(|r| r.as_ref().err()) {
        if e.raw_os_error() == Some(libc::EINVAL) {
            Some(Fallback::ODirectRefused)
        } else {
            // Any other probe error (EACCES, ENOSPC, EIO) is a drive problem, not a reason to
            // run on the page cache: report it.
            return Err(io::Error::new(e.kind(), e.to_string()));
        }
    } else {
        None
    };
    match (choice, why) {
        (BackendChoice::Std, _) => Ok((BackendKind::Std, None)),
        (_, None) => Ok((BackendKind::Uring, None)),
        (BackendChoice::Auto, Some(w)) => Ok((BackendKind::Std, Some(w))),
        (BackendChoice::Uring, Some(w)) => Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!("io_uring backend required but unavailable: {w:?}"),
        )),
    }
}

/// Name of the probe file written (then removed) in each drive directory at open.
pub const ODIRECT_PROBE: &str = ".vyrn-odirect-probe";

/// Open a file with O_DIRECT in `dir` and write one aligned page: `Err(EINVAL)` is the signal
/// to fall back (guides §6: a misaligned buffer or an unsupporting file system gives EINVAL).
#[cfg(target_os = "linux")]
pub fn probe_odirect(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::{FileExt, OpenOptionsExt};
    let path = dir.join(ODIRECT_PROBE);
    let r = (|| {
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .custom_flags(libc::O_DIRECT)
            .open(&path)?;
        let buf = AlignedBuf::zeroed(PAGE);
        f.write_all_at(&buf, 0)
    })();
    let _ = std::fs::remove_file(&path);
    r
}

/// Not Linux: no O_DIRECT.
#[cfg(not(target_os = "linux"))]
pub fn probe_odirect(_dir: &Path) -> io::Result<()> {
    Err(io::Error::from_raw_os_error(libc::EINVAL))
}

/// A file opened through a backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FileId(pub(crate) usize);

/// One storage backend (guides §9: `JournalWriter`, with reads and a batch `flush`).
pub trait Backend: fmt::Debug + Send {
    /// Which backend this is.
    fn kind(&self) -> BackendKind;
    /// Open `path` read-write; `create_new` fails if it exists (a segment is created once).
    fn open(&mut self, path: &Path, create_new: bool) -> io::Result<FileId>;
    /// Close a file; queued writes to it must have been flushed.
    fn close(&mut self, f: FileId);
    /// Current length.
    fn file_len(&self, f: FileId) -> io::Result<u64>;
    /// Cut the file to `len` and make that durable.
    fn truncate(&mut self, f: FileId, len: u64) -> io::Result<()>;
    /// Queue `buf` for `offset` (both 4 KiB aligned). Nothing is durable until `flush`.
    fn queue_write(&mut self, f: FileId, offset: u64, buf: AlignedBuf) -> io::Result<()>;
    /// Complete every queued write, then data-sync every file written. Returns the files whose
    /// write or sync failed (empty: all durable). The buffers are freed.
    fn flush(&mut self) -> Vec<(FileId, io::Error)>;
    /// Read into `buf` from `offset` (4 KiB aligned); returns the bytes read, short at EOF.
    fn read(&mut self, f: FileId, offset: u64, buf: &mut AlignedBuf) -> io::Result<usize>;
    /// Release the space of `[offset, offset + len)` (best effort; the journal's tombstone, not
    /// the hole, is what recovery reads).
    fn punch(&mut self, f: FileId, offset: u64, len: u64) -> io::Result<()>;
    /// Reserve `len` bytes of space without changing the file's length (best effort), so
    /// appends do not allocate blocks one write at a time.
    fn preallocate(&mut self, f: FileId, len: u64) -> io::Result<()>;
}

/// Slab of open files shared by both backends.
#[derive(Debug, Default)]
pub(crate) struct Files {
    files: Vec<Option<File>>,
}

impl Files {
    pub(crate) fn insert(&mut self, f: File) -> FileId {
        if let Some(i) = self.files.iter().position(Option::is_none) {
            self.files[i] = Some(f);
            FileId(i)
        } else {
            self.files.push(Some(f));
            FileId(self.files.len() - 1)
        }
    }
    pub(crate) fn get(&self, id: FileId) -> io::Result<&File> {
        self.files
            .get(id.0)
            .and_then(Option::as_ref)
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "file not open"))
    }
    pub(crate) fn remove(&mut self, id: FileId) {
        if let Some(s) = self.files.get_mut(id.0) {
            *s = None;
        }
    }
}

pub(crate) fn open_opts(create_new: bool) -> OpenOptions {
    let mut o = OpenOptions::new();
    o.read(true).write(true);
    if create_new {
        o.create_new(true);
    }
    o
}

#[cfg(target_os = "linux")]
pub(crate) fn punch_hole(f: &File, offset: u64, len: u64) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let (Ok(off), Ok(len)) = (libc::off_t::try_from(offset), libc::off_t::try_from(len)) else {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    };
    // SAFETY: plain syscall on an fd this process owns for the call's duration; no memory is
    // passed.
    let r = unsafe {
        libc::fallocate(
            f.as_raw_fd(),
            libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
            off,
            len,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(target_os = "linux")]
pub(crate) fn keep_size_alloc(f: &File, len: u64) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let Ok(len) = libc::off_t::try_from(len) else {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    };
    // SAFETY: plain syscall on an fd this process owns for the call's duration; no memory is
    // passed.
    let r = unsafe { libc::fallocate(f.as_raw_fd(), libc::FALLOC_FL_KEEP_SIZE, 0, len) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn keep_size_alloc(_f: &File, _len: u64) -> io::Result<()> {
    Err(io::Error::from(io::ErrorKind::Unsupported))
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn punch_hole(_f: &File, _offset: u64, _len: u64) -> io::Result<()> {
    Err(io::Error::from(io::ErrorKind::Unsupported))
}

/// The portable backend: buffered `pwrite` then `fdatasync` of each written file.
#[derive(Debug, Default)]
pub struct StdBackend {
    files: Files,
    queued: Vec<(FileId, u64, AlignedBuf)>,
    /// Files opened for reading only (`JournalConfig::read_only`); creating is refused.
    read_only: bool,
}

impl StdBackend {
    /// A backend with no open file.
    pub fn new() -> StdBackend {
        StdBackend::default()
    }

    /// A backend that opens files for reading only (a journal on a read-only mount, or
    /// inspected by an operator without write access, still reads).
    pub fn read_only() -> StdBackend {
        StdBackend {
            read_only: true,
            ..StdBackend::default()
        }
    }
}

#[cfg(unix)]
fn write_at(f: &File, buf: &[u8], off: u64) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    f.write_all_at(buf, off)
}

#[cfg(unix)]
fn read_at(f: &File, buf: &mut [u8], off: u64) -> io::Result<usize> {
    use std::os::unix::fs::FileExt;
    let mut n = 0;
    while n < buf.len() {
        match f.read_at(&mut buf[n..], off + n as u64) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

impl Backend for StdBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Std
    }
    fn open(&mut self, path: &Path, create_new: bool) -> io::Result<FileId> {
        if self.read_only {
            if create_new {
                return Err(io::Error::from(io::ErrorKind::PermissionDenied));
            }
            return Ok(self.files.insert(File::open(path)?));
        }
        Ok(self.files.insert(open_opts(create_new).open(path)?))
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
        self.files.get(f)?;
        self.queued.push((f, offset, buf));
        Ok(())
    }
    fn flush(&mut self) -> Vec<(FileId, io::Error)> {
        let mut failed: Vec<(FileId, io::Error)> = Vec::new();
        let mut touched: Vec<FileId> = Vec::new();
        for (f, off, buf) in self.queued.drain(..) {
            if failed.iter().any(|(x, _)| *x == f) {
                continue;
            }
            let r = self.files.get(f).and_then(|file| write_at(file, &buf, off));
            match r {
                Ok(()) => {
                    if !touched.contains(&f) {
                        touched.push(f);
                    }
                }
                Err(e) => {
                    touched.retain(|x| *x != f);
                    failed.push((f, e));
                }
            }
        }
        for f in touched {
            if let Err(e) = self.files.get(f).and_then(File::sync_data) {
                failed.push((f, e));
            }
        }
        failed
    }
    fn read(&mut self, f: FileId, offset: u64, buf: &mut AlignedBuf) -> io::Result<usize> {
        read_at(self.files.get(f)?, buf, offset)
    }
    fn punch(&mut self, f: FileId, offset: u64, len: u64) -> io::Result<()> {
        punch_hole(self.files.get(f)?, offset, len)
    }
    fn preallocate(&mut self, f: FileId, len: u64) -> io::Result<()> {
        keep_size_alloc(self.files.get(f)?, len)
    }
}

/// Build the backend `decide` chose.
pub(crate) fn make_backend(kind: BackendKind) -> io::Result<Box<dyn Backend>> {
    match kind {
        BackendKind::Std => Ok(Box::new(StdBackend::new())),
        #[cfg(target_os = "linux")]
        BackendKind::Uring => Ok(Box::new(super::uring::UringBackend::new()?)),
        #[cfg(not(target_os = "linux"))]
        BackendKind::Uring => Err(io::Error::from(io::ErrorKind::Unsupported)),
    }
}

/// Whether an io_uring with Write, Read and Fsync can be created here.
pub(crate) fn uring_available() -> bool {
    #[cfg(target_os = "linux")]
    {
        super::uring::UringBackend::new().is_ok()
    }
    #[cfg(not(target_os = "linux"))]
    {
        false
    }
}
