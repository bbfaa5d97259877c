//! Send and receive vyrn's UDP frames in batches through one port trait that every NIC backend implements.
//!
//! The crate has one trait, [`Port`], and the pieces every sequencer and replica role needs
//! around it: the portable UDP backend ([`udp::UdpPort`], std sockets + libc, `sendmmsg` /
//! `recvmmsg`, unicast and loopback multicast), the two redundant replication paths of spec 07
//! §3.1 as two independent ports ([`pair::PathPair`]), an in-memory port pair for
//! deterministic tests ([`mem::MemPort`]), a seeded lossy wrapper over any port
//! ([`lossy::Lossy`]) and the simulator's network ([`sim::SimNet`]: on a thread that installed
//! one, [`udp::UdpPort::open`] binds a simulated socket with the same addresses). Kernel-bypass backends (DPDK, AF_XDP, ef_vi/CTPIO) plug in behind cargo
//! features later and implement the same trait unchanged.
//!
//! # Terminology
//!
//! - **Port**: one transmit/receive queue pair on one NIC port (or one UDP socket). A port is
//!   owned by exactly one thread; every method takes `&mut self`, so nothing inside is shared.
//! - **Payload**: the UDP payload, i.e. one vyrn frame (24-byte header + body, spec 07 §3.2).
//!   The trait never sees Ethernet/IP/UDP headers: bypass backends add them on TX from a
//!   prebuilt template per destination and strip them on RX.
//! - **Descriptor**: a packet's metadata beside its bytes: length, destination or source,
//!   timestamp ([`TxPacket`], [`RxMeta`]).
//!
//! # Shape of the trait
//!
//! ```text
//!              send_batch(&[TxPacket])  ──►  n queued (0..=len, never blocks)
//!   caller ──► flush()                  ──►  fence: everything queued is out of the CPU
//!              recv_batch(&mut RxBatch) ──►  n received into the caller's pool (0 = none)
//!              poll_recv(max, |pkt| ..) ──►  n received, lent from the port's own buffers
//! ```
//!
//! **Transmit** takes caller-owned byte slices ([`TxPacket`]: `data` + [`Dest`]). A backend
//! either points the hardware (or the kernel) at them for the duration of the call or copies
//! them into its own buffers; either way the caller may reuse its bytes as soon as
//! `send_batch` returns. `send_batch` returns how many packets *from the front* of the slice
//! were queued. Fewer than offered means backpressure (a full socket buffer, a full TX ring):
//! the rest were not touched and the caller retries them. It never blocks. `Err` means the
//! *first* packet could not be sent at all (too long, bad destination, an OS error); packets
//! before a bad one are always sent first, so the next call reports the bad one.
//!
//! **Receive** comes in two forms, one per buffer owner:
//! - [`Port::recv_batch`] fills a caller-provided [`RxBatch`]: a fixed pool of equal-size
//!   slots plus one descriptor per slot, allocated once. The UDP backend hands the slots to
//!   `recvmmsg` directly, so the kernel copies each datagram exactly once, into them.
//! - [`Port::poll_recv`] lends the port's *own* buffers to a callback, one packet at a time,
//!   for the duration of the call. This is the zero-copy form for backends whose buffers are
//!   hardware-owned (DPDK mbufs, AF_XDP UMEM frames, ef_vi packet buffers): the bytes are read
//!   in place and the buffer is recycled after the callback returns.
//!
//! Both return 0 when nothing is waiting; neither blocks.
//!
//! **Fence.** [`Port::flush`] is the "fence" of the gate protocol (spec 07 §4.2: write the frame
//! on path A, write it on path B, `sfence`, then release). After `flush` returns `Ok`, every
//! packet an earlier `send_batch` accepted is as far out as this backend can push it. On the
//! UDP backend it is a no-op: each `sendmmsg` has already handed the bytes to the kernel,
//! and on loopback the kernel has already delivered them inside that syscall.
//!
//! **Timestamps** are `u64` nanoseconds of `CLOCK_REALTIME` since the Unix epoch, the `Nanos`
//! of the design (PTP/realtime ns) and the clock hardware NICs stamp with (their PHC is
//! disciplined to it). They are not monotonic: measure durations with `Instant`. RX stamps come
//! from the kernel (`SO_TIMESTAMPNS`, taken when the packet entered the stack) where available,
//! else from [`now_ns`] right after the receive syscall returns; [`RxMeta::ts_source`] says
//! which. TX stamps are software stamps of the doorbell: [`Port::last_tx`] gives [`now_ns`]
//! taken right before the first and right after the last send syscall of the last
//! `send_batch` that queued anything. That is what B-REP-2W uses where hardware TX stamps are
//! absent (missing-chapters §5).
//!
//! **Counters** ([`PortCounters`]) are plain per-port `u64`s updated by the owning thread:
//! packets and bytes each way, send errors, oversize refusals, backpressure events,
//! truncated and dropped datagrams. Read them with [`Port::counters`].
//!
//! # How the bypass backends map onto it
//!
//! | | UDP (here) | DPDK | AF_XDP | ef_vi / CTPIO |
//! |---|---|---|---|---|
//! | TX buffers | caller's slices, gathered by `sendmmsg` | copy into an mbuf from the port's mempool (≤ 250 B: one cache-line copy), or attach as an external buffer | copy into a UMEM frame taken from the completion ring | CTPIO: the write-combined store *is* the copy, from the caller's slice; DMA frames: copy into a registered packet buffer |
//! | TX doorbell | the `sendmmsg` syscall | `rte_eth_tx_burst` | TX ring producer + `sendto` wakeup | CTPIO write / `ef_vi_transmit_push` |
//! | `flush` (fence) | no-op | flush a `rte_eth_tx_buffer`, if used | kick the TX ring if `need_wakeup` | `sfence` (drain the WC buffers to the NIC) |
//! | RX buffers | caller's `RxBatch` slots (`recvmmsg`) | mbufs from `rte_eth_rx_burst`: lent in place by `poll_recv`, copied by `recv_batch`, then freed | UMEM frames from the RX ring: lent or copied, then returned to the fill ring | the VI's packet buffers: lent or copied, then re-posted |
//! | RX timestamp | `SO_TIMESTAMPNS`, else after `recvmmsg` | `rte_mbuf` dynfield (hw) or after `rx_burst` | XDP metadata (hw) or after the ring read | `ef_vi_receive_get_timestamp` (hw) |
//! | TX timestamp | around `sendmmsg` | around `tx_burst`; PTP hw stamps via a later completion | around the kick | around the CTPIO write; hw stamps from TX events |
//! | [`Dest`] | prebuilt `sockaddr` per peer | prebuilt Eth/IPv4/UDP header per peer | same | same |
//!
//! Hardware TX timestamps arrive asynchronously (as completions), after `send_batch` has
//! returned; a backend that has them will report them through an added provided method with a
//! default of "none", which leaves every existing implementation unchanged.
//!
//! # Hot path
//!
//! `send_batch`, `recv_batch`, `poll_recv`, `flush`, `last_tx` and `counters` never allocate,
//! never take a lock and never block. Every buffer, descriptor array and syscall header array
//! is allocated when the port is opened. The UDP backend makes **one syscall per batch** in
//! [`udp::BatchMode::Mmsg`] (one `sendmmsg` for up to `batch` packets, one `recvmmsg` for up to
//! `batch` datagrams), and one per packet only in [`udp::BatchMode::PerPacket`], which exists as
//! the benchmark baseline. The test-only [`mem::MemPort`] takes one lock per batch (not per
//! packet) and [`lossy::Lossy`] copies each packet once; neither belongs on a production path.
//!
//! Bad input never panics: an oversize payload, an unknown destination or a full batch is a
//! [`NicError`] and, where the port sees it, a counter.
//!
//! # Two paths
//!
//! Spec 07 §3.1 sends every frame on two independent paths, A and B, which differ in one bit
//! (frame header byte 16, bit 0). [`pair::PathPair`] holds one port per path, writes a frame to
//! both (setting the bit for B without allocating), fences both, and receives from both.

#![warn(missing_docs)]

pub mod batch;
pub mod error;
#[cfg(feature = "lab")]
pub mod lab;
pub mod lossy;
pub mod mem;
pub mod pair;
mod queue;
pub mod sim;
#[cfg(target_os = "linux")]
pub mod udp;
pub mod wait;

pub use batch::RxBatch;
pub use error::NicError;

use std::net::SocketAddr;

/// UDP port of ORDER, HASH, HEADER and HEARTBEAT frames (spec 07 §3.1).
pub const REP_UDP_ORDER: u16 = 7400;
/// UDP port of NACKs, acks and retransmits, unicast (spec 07 §3.1).
pub const REP_UDP_CTRL: u16 = 7401;
/// UDP port of data frames (spec 07 §3.1).
pub const REP_UDP_DATA: u16 = 7402;
/// UDP port of peer repair (spec 07 §3.1).
pub const REP_UDP_REPAIR: u16 = 7403;
/// MTU of both replication VLANs (spec 07 §3.1).
pub const REP_MTU: usize = 9216;
/// Largest UDP payload over IPv4 at [`REP_MTU`]: the MTU less 20 B of IPv4 and 8 B of UDP header.
pub const REP_UDP_PAYLOAD_MAX: usize = REP_MTU - 20 - 8;
/// Largest ORDER frame on the wire (spec 07 §3.1: ≤ 250 B, because CTPIO write time bounds the gate).
pub const ORDER_FRAME_WIRE_MAX: usize = 250;
/// Largest HASH frame (spec 07 §3.1: ≤ 9000 B, sent by DMA).
pub const HASH_FRAME_MAX: usize = 9000;
/// Offset of the frame header's `flags` byte, whose bit 0 is the path bit (spec 07 §3.2).
pub const FRAME_FLAGS_OFFSET: usize = 16;
/// The path bit in the `flags` byte: 0 on path A, 1 on path B (spec 07 §3.2).
pub const FLAG_PATH_B: u8 = 0x01;
/// Largest number of packets one batch syscall takes (Linux `UIO_MAXIOV`).
pub const MAX_BATCH: usize = 1024;

const _: () = assert!(HASH_FRAME_MAX <= REP_UDP_PAYLOAD_MAX);
const _: () = assert!(ORDER_FRAME_WIRE_MAX < HASH_FRAME_MAX);

/// Where a transmitted packet goes.
///
/// Backends resolve [`Dest::Default`] and [`Dest::Peer`] to state prepared when the port was
/// opened (a `sockaddr` on UDP, a prebuilt Eth/IPv4/UDP header on bypass backends), so the hot
/// path does no address work. [`Dest::Addr`] is resolved per packet; a bypass backend without
/// a neighbour table may answer it with [`NicError::Unsupported`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Dest {
    /// The port's configured default destination (a multicast group or a unicast peer).
    #[default]
    Default,
    /// Entry `i` of the port's configured peer table.
    Peer(u16),
    /// An explicit address.
    Addr(SocketAddr),
}

/// One packet to transmit: caller-owned bytes and a destination.
///
/// The bytes only need to live for the `send_batch` call.
#[derive(Debug, Clone, Copy)]
pub struct TxPacket<'a> {
    /// The UDP payload.
    pub data: &'a [u8],
    /// Where it goes.
    pub dest: Dest,
}

impl<'a> TxPacket<'a> {
    /// A packet to the port's default destination.
    pub const fn new(data: &'a [u8]) -> Self {
        TxPacket {
            data,
            dest: Dest::Default,
        }
    }

    /// A packet to `dest`.
    pub const fn to(data: &'a [u8], dest: Dest) -> Self {
        TxPacket { data, dest }
    }
}

/// Where a receive timestamp came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TsSource {
    /// No timestamp.
    #[default]
    None,
    /// Taken in user space right after the receive call returned (one stamp per syscall).
    User,
    /// Taken by the kernel when the packet entered the stack (`SO_TIMESTAMPNS`).
    Kernel,
    /// Taken by the NIC (PHC time).
    Hardware,
}

/// Metadata of one received packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RxMeta {
    /// The sender's address, where the backend knows it.
    pub src: Option<SocketAddr>,
    /// Receive time, ns of `CLOCK_REALTIME` since the Unix epoch (0 with [`TsSource::None`]).
    pub ts_ns: u64,
    /// Where `ts_ns` came from.
    pub ts_source: TsSource,
}

/// A received packet: its bytes, borrowed from an [`RxBatch`] or from the port, and its metadata.
#[derive(Debug, Clone, Copy)]
pub struct RxPacket<'a> {
    /// The UDP payload.
    pub data: &'a [u8],
    /// Source and timestamp.
    pub meta: RxMeta,
}

/// Software timestamps of the last `send_batch` that queued at least one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TxStamp {
    /// [`now_ns`] right before the first send syscall (or doorbell) of that call.
    pub before_ns: u64,
    /// [`now_ns`] right after the last one.
    pub after_ns: u64,
    /// Packets that call queued.
    pub packets: u32,
}

/// Per-port counters, updated only by the thread that owns the port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PortCounters {
    /// Packets queued for transmit.
    pub tx_packets: u64,
    /// Payload bytes queued for transmit.
    pub tx_bytes: u64,
    /// Send syscalls (or doorbells) that queued at least one packet.
    pub tx_calls: u64,
    /// Sends refused by the OS or device with a hard error (not backpressure).
    pub tx_errors: u64,
    /// Packets refused because they exceed the port's `max_payload`.
    pub tx_oversize: u64,
    /// `send_batch` calls that queued fewer packets than offered because the queue was full.
    pub tx_backpressure: u64,
    /// Packets delivered to the caller.
    pub rx_packets: u64,
    /// Payload bytes delivered to the caller.
    pub rx_bytes: u64,
    /// Receive syscalls (or ring polls) that returned at least one packet.
    pub rx_calls: u64,
    /// Datagrams longer than the receive slot: truncated by the OS, so dropped and counted here.
    pub rx_truncated: u64,
    /// Packets lost below the port, as far as the port can tell (the kernel's socket-queue
    /// overflow count via `SO_RXQ_OVFL`, a full in-memory queue, a NIC's missed count).
    pub rx_dropped: u64,
    /// Receive calls that failed with a hard error.
    pub rx_errors: u64,
}

/// One transmit/receive queue pair of a NIC backend. See the crate docs for the contract.
///
/// The trait is object safe, so a runner can hold a `Box<dyn Port>` chosen from config.
pub trait Port {
    /// Longest payload `send_batch` accepts, in bytes.
    fn max_payload(&self) -> usize;

    /// Queue packets for transmit, in order, without blocking.
    ///
    /// Returns how many packets from the front of `pkts` were queued; fewer than `pkts.len()`
    /// means backpressure or a bad packet further on (the caller retries the rest). Returns
    /// `Err` only when the first packet cannot be sent: too long ([`NicError::Oversize`]), a
    /// destination the port cannot resolve, or an OS error. Nothing is queued in that case.
    fn send_batch(&mut self, pkts: &[TxPacket<'_>]) -> Result<usize, NicError>;

    /// Receive up to `batch.capacity()` packets into the caller's pool, without blocking.
    ///
    /// Clears `batch` first. Returns the number of packets now in it (0 when nothing was
    /// waiting). Packets that did not fit a slot are dropped and counted as truncated.
    fn recv_batch(&mut self, batch: &mut RxBatch) -> Result<usize, NicError>;

    /// Receive up to `max` packets into the port's own buffers and lend each to `f`, without
    /// blocking. Returns how many packets `f` saw (0 when nothing was waiting).
    ///
    /// The bytes are valid only during the call to `f`. `max` is capped at the port's own
    /// batch size.
    fn poll_recv(&mut self, max: usize, f: &mut dyn FnMut(RxPacket<'_>))
        -> Result<usize, NicError>;

    /// Fence: push every packet already queued as far out as this backend can.
    ///
    /// [`NicError::WouldBlock`] means the port still holds some (call again).
    fn flush(&mut self) -> Result<(), NicError>;

    /// Software TX timestamps of the last `send_batch` that queued anything.
    fn last_tx(&self) -> TxStamp;

    /// A snapshot of the port's counters.
    fn counters(&self) -> PortCounters;

    /// The descriptor that becomes readable when a packet waits (a kernel socket), for a tile
    /// that blocks when idle; `None` for a port with none (memory, a poll-mode NIC).
    fn wait_fd(&self) -> Option<std::os::fd::RawFd> {
        None
    }
}

impl<P: Port + ?Sized> Port for Box<P> {
    fn max_payload(&self) -> usize {
        (**self).max_payload()
    }
    fn wait_fd(&self) -> Option<std::os::fd::RawFd> {
        (**self).wait_fd()
    }
    fn send_batch(&mut self, pkts: &[TxPacket<'_>]) -> Result<usize, NicError> {
        (**self).send_batch(pkts)
    }
    fn recv_batch(&mut self, batch: &mut RxBatch) -> Result<usize, NicError> {
        (**self).recv_batch(batch)
    }
    fn poll_recv(
        &mut self,
        max: usize,
        f: &mut dyn FnMut(RxPacket<'_>),
    ) -> Result<usize, NicError> {
        (**self).poll_recv(max, f)
    }
    fn flush(&mut self) -> Result<(), NicError> {
        (**self).flush()
    }
    fn last_tx(&self) -> TxStamp {
        (**self).last_tx()
    }
    fn counters(&self) -> PortCounters {
        (**self).counters()
    }
}

/// Nanoseconds of `CLOCK_REALTIME` since the Unix epoch (vDSO `clock_gettime`, ~20 ns).
///
/// This is the clock of every timestamp in this crate. It can step under NTP/PTP
/// adjustment; use `std::time::Instant` for durations.
pub fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}
