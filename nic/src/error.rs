//! The crate's one error type.

use std::fmt;

/// Why a port operation failed. `Copy` and allocation-free, so it can be returned from the hot
/// path and stored in counters or per-path results.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum NicError {
    /// A payload longer than the port (or receive slot) accepts; nothing was sent or stored.
    Oversize {
        /// The payload's length.
        len: usize,
        /// The largest length accepted.
        max: usize,
    },
    /// A frame too short to hold the path bit at the configured offset.
    FrameTooShort {
        /// The frame's length.
        len: usize,
        /// The least length that holds the path bit.
        need: usize,
    },
    /// [`crate::Dest::Default`] on a port configured without a default destination.
    NoDestination,
    /// [`crate::Dest::Peer`] beyond the port's peer table.
    UnknownPeer {
        /// The index asked for.
        index: u16,
        /// Entries in the peer table.
        peers: usize,
    },
    /// A destination of an IP family the port's socket cannot send to.
    AddressFamily,
    /// An [`crate::RxBatch`] has no free slot left.
    BatchFull,
    /// The port still holds packets it could not push out yet (backpressure); call again.
    WouldBlock,
    /// A configuration value out of range; the text names it.
    Config(&'static str),
    /// The backend does not offer this operation.
    Unsupported(&'static str),
    /// An OS call failed.
    Io {
        /// The call, e.g. `"sendmmsg"`.
        op: &'static str,
        /// `errno`.
        errno: i32,
    },
}

impl NicError {
    /// An [`NicError::Io`] from the calling thread's current `errno`.
    pub fn last_os(op: &'static str) -> Self {
        NicError::Io {
            op,
            errno: std::io::Error::last_os_error().raw_os_error().unwrap_or(0),
        }
    }

    /// An [`NicError::Io`] from a std I/O error.
    pub fn from_io(op: &'static str, e: &std::io::Error) -> Self {
        NicError::Io {
            op,
            errno: e.raw_os_error().unwrap_or(0),
        }
    }
}

impl fmt::Display for NicError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            NicError::Oversize { len, max } => {
                write!(f, "payload of {len} B exceeds the maximum of {max} B")
            }
            NicError::FrameTooShort { len, need } => {
                write!(
                    f,
                    "frame of {len} B is too short for the path bit (needs {need} B)"
                )
            }
            NicError::NoDestination => write!(f, "port has no default destination"),
            NicError::UnknownPeer { index, peers } => {
                write!(f, "peer index {index} outside a table of {peers}")
            }
            NicError::AddressFamily => {
                write!(f, "destination address family does not match the socket")
            }
            NicError::BatchFull => write!(f, "receive batch is full"),
            NicError::WouldBlock => write!(f, "port still holds queued packets; try again"),
            NicError::Config(what) => write!(f, "invalid configuration: {what}"),
            NicError::Unsupported(what) => write!(f, "unsupported by this backend: {what}"),
            NicError::Io { op, errno } => {
                write!(
                    f,
                    "{op} failed: {}",
                    std::io::Error::from_raw_os_error(errno)
                )
            }
        }
    }
}

impl std::error::Error for NicError {}

impl From<NicError> for std::io::Error {
    fn from(e: NicError) -> Self {
        match e {
            NicError::Io { errno, .. } => std::io::Error::from_raw_os_error(errno),
            NicError::WouldBlock => std::io::Error::new(std::io::ErrorKind::WouldBlock, e),
            other => std::io::Error::other(other),
        }
    }
}
