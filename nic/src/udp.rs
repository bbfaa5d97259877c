//! The portable backend: one non-blocking UDP socket per port, batched with `sendmmsg` and
//! `recvmmsg` (Linux).
//!
//! A [`UdpPort`] is opened from a [`UdpConfig`]: bind address, default destination and peer
//! table, optional multicast ([`Multicast`]: join a group on an interface, `IP_MULTICAST_IF`,
//! `IP_MULTICAST_LOOP`, TTL), `SO_REUSEADDR`/`SO_REUSEPORT` for receivers that share a port,
//! socket buffer sizes, the largest payload and the batch size. Everything the hot path touches
//! (the `mmsghdr`/`iovec`/`sockaddr` arrays, per-slot control buffers for the kernel's
//! timestamps, the port's own receive pool) is allocated in [`UdpPort::open`].
//!
//! Receive timestamps come from `SO_TIMESTAMPNS` (`CLOCK_REALTIME`, stamped when the datagram
//! entered the stack); when the option is refused the port stamps [`crate::now_ns`] right after
//! `recvmmsg` returns. The kernel's count of datagrams it dropped because the socket buffer
//! was full arrives with `SO_RXQ_OVFL` and feeds [`crate::PortCounters::rx_dropped`]. A datagram
//! longer than its receive slot comes back with `MSG_TRUNC`; it is dropped and counted in
//! [`crate::PortCounters::rx_truncated`].
//!
//! Sockets are never `connect`ed: every datagram names its destination, so an ICMP port
//! unreachable from an absent listener never turns into an error on a later send.
//!
//! Loopback multicast, as verified on the project's VMs (guide §8): join the group on
//! 127.0.0.1, send with `IP_MULTICAST_IF` = 127.0.0.1, `IP_MULTICAST_LOOP` = 1 and TTL 0, so
//! nothing leaves the host. [`Multicast::loopback`] sets exactly that.

use crate::{
    now_ns, Dest, NicError, Port, PortCounters, RxBatch, RxMeta, RxPacket, TsSource, TxPacket,
    TxStamp, MAX_BATCH, REP_UDP_PAYLOAD_MAX,
};
use std::mem::size_of;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6, UdpSocket};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

/// Largest UDP payload the socket layer carries (IPv4).
const UDP_MAX: usize = 65_507;
/// Per-slot control buffer: `CMSG_SPACE(16)` for the timestamp + `CMSG_SPACE(4)` for the drop
/// count = 56 bytes on 64-bit Linux, rounded up.
const CTRL_LEN: usize = 64;

/// How a port maps batches onto syscalls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BatchMode {
    /// One `sendmmsg` / `recvmmsg` per batch of up to `batch` packets (the production mode).
    #[default]
    Mmsg,
    /// One `sendmsg` / `recvmsg` per packet: the baseline the benchmark compares against.
    PerPacket,
}

/// IPv4 multicast settings of a port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Multicast {
    /// The group (224.0.0.0/4).
    pub group: Ipv4Addr,
    /// Address of the interface to join on and send from (`IP_MULTICAST_IF`).
    pub interface: Ipv4Addr,
    /// Join the group (`IP_ADD_MEMBERSHIP`), i.e. receive it; a send-only port leaves this false.
    pub join: bool,
    /// Deliver this host's own sends to local members (`IP_MULTICAST_LOOP`).
    pub loopback: bool,
    /// `IP_MULTICAST_TTL`; 0 keeps datagrams on the host.
    pub ttl: u32,
}

impl Multicast {
    /// Group `group` on loopback: interface 127.0.0.1, join, `IP_MULTICAST_LOOP` on, TTL 0.
    pub fn loopback(group: Ipv4Addr) -> Self {
        Multicast {
            group,
            interface: Ipv4Addr::LOCALHOST,
            join: true,
            loopback: true,
            ttl: 0,
        }
    }

    /// Group `group` on the interface whose address is `interface`: on loopback as
    /// [`Multicast::loopback`]; on any other interface TTL 1 (a replication path is one L2
    /// network, 07 §3.1: a router never forwards it) with `IP_MULTICAST_LOOP` on, so a member on
    /// the sending host still receives it.
    pub fn on(group: Ipv4Addr, interface: Ipv4Addr) -> Self {
        Multicast {
            interface,
            ttl: if interface.is_loopback() { 0 } else { 1 },
            ..Multicast::loopback(group)
        }
    }
}

/// Everything [`UdpPort::open`] needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UdpConfig {
    /// Address to bind; port 0 picks an ephemeral port. A multicast receiver may bind the group
    /// address itself so it sees only that group.
    pub bind: SocketAddr,
    /// Target of [`Dest::Default`].
    pub default_dest: Option<SocketAddr>,
    /// Targets of [`Dest::Peer`], by index.
    pub peers: Vec<SocketAddr>,
    /// Multicast settings (IPv4 only).
    pub multicast: Option<Multicast>,
    /// `SO_REUSEADDR` before bind.
    pub reuse_addr: bool,
    /// `SO_REUSEPORT` before bind (multicast receivers sharing a port each get every datagram).
    pub reuse_port: bool,
    /// `SO_RCVBUF` in bytes (the kernel doubles it and caps it at `net.core.rmem_max`).
    pub recv_buffer: Option<usize>,
    /// `SO_SNDBUF` in bytes (doubled, capped at `net.core.wmem_max`).
    pub send_buffer: Option<usize>,
    /// Longest payload sent, and the slot size of the port's own receive pool; `1..=65507`.
    pub max_payload: usize,
    /// Packets per syscall, and the size of the port's own receive pool; `1..=MAX_BATCH`.
    pub batch: usize,
    /// Syscall per batch or per packet.
    pub mode: BatchMode,
    /// Ask the kernel for receive timestamps (`SO_TIMESTAMPNS`).
    pub rx_timestamps: bool,
}

impl UdpConfig {
    /// A unicast port bound to `bind`, no default destination, batch 32, payloads up to
    /// [`REP_UDP_PAYLOAD_MAX`], kernel timestamps on.
    pub fn new(bind: SocketAddr) -> Self {
        UdpConfig {
            bind,
            default_dest: None,
            peers: Vec::new(),
            multicast: None,
            reuse_addr: false,
            reuse_port: false,
            recv_buffer: None,
            send_buffer: None,
            max_payload: REP_UDP_PAYLOAD_MAX,
            batch: 32,
            mode: BatchMode::Mmsg,
            rx_timestamps: true,
        }
    }

    /// A unicast port on 127.0.0.1 with an ephemeral port.
    pub fn loopback() -> Self {
        Self::new(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
    }

    /// A receiver of loopback multicast group `group` on `port` (0: ephemeral): binds
    /// `group:port` with `SO_REUSEADDR` and `SO_REUSEPORT`, joins on 127.0.0.1.
    pub fn multicast_receiver(group: Ipv4Addr, port: u16) -> Self {
        Self::multicast_receiver_on(group, port, Ipv4Addr::LOCALHOST)
    }

    /// [`UdpConfig::multicast_receiver`] joined on the interface whose address is `interface`
    /// ([`Multicast::on`]).
    pub fn multicast_receiver_on(group: Ipv4Addr, port: u16, interface: Ipv4Addr) -> Self {
        let mut c = Self::new(SocketAddr::from((group, port)));
        c.multicast = Some(Multicast::on(group, interface));
        c.reuse_addr = true;
        c.reuse_port = true;
        c
    }

    /// A sender to loopback multicast group `group:port`: binds 127.0.0.1:0, default
    /// destination the group, `IP_MULTICAST_IF` 127.0.0.1, loop on, TTL 0, no join.
    pub fn multicast_sender(group: Ipv4Addr, port: u16) -> Self {
        Self::multicast_sender_on(group, port, Ipv4Addr::LOCALHOST)
    }

    /// [`UdpConfig::multicast_sender`] from the interface whose address is `interface`: binds
    /// `interface:0`, `IP_MULTICAST_IF` there ([`Multicast::on`]).
    pub fn multicast_sender_on(group: Ipv4Addr, port: u16, interface: Ipv4Addr) -> Self {
        let mut c = Self::new(SocketAddr::from((interface, 0)));
        c.default_dest = Some(SocketAddr::from((group, port)));
        c.multicast = Some(Multicast {
            join: false,
            ..Multicast::on(group, interface)
        });
        c
    }

    /// Set the default destination.
    pub fn with_dest(mut self, dest: SocketAddr) -> Self {
        self.default_dest = Some(dest);
        self
    }

    /// Set the batch mode.
    pub fn with_mode(mut self, mode: BatchMode) -> Self {
        self.mode = mode;
        self
    }

    /// Set the batch size.
    pub fn with_batch(mut self, batch: usize) -> Self {
        self.batch = batch;
        self
    }

    /// Set the largest payload.
    pub fn with_max_payload(mut self, max_payload: usize) -> Self {
        self.max_payload = max_payload;
        self
    }

    fn validate(&self) -> Result<(), NicError> {
        if self.batch == 0 || self.batch > MAX_BATCH {
            return Err(NicError::Config("batch must be in 1..=1024"));
        }
        if self.max_payload == 0 || self.max_payload > UDP_MAX {
            return Err(NicError::Config("max_payload must be in 1..=65507"));
        }
        if self.peers.len() > usize::from(u16::MAX) + 1 {
            return Err(NicError::Config("more than 65536 peers"));
        }
        if let Some(m) = self.multicast {
            if !m.group.is_multicast() {
                return Err(NicError::Config(
                    "multicast group is not a multicast address",
                ));
            }
            if self.bind.is_ipv6() {
                return Err(NicError::Config("multicast needs an IPv4 bind address"));
            }
        }
        Ok(())
    }
}

/// Any socket address, sized for the largest family, as the kernel reads and writes it.
#[derive(Clone, Copy)]
#[repr(C)]
union RawAddr {
    v4: libc::sockaddr_in,
    v6: libc::sockaddr_in6,
    ss: libc::sockaddr_storage,
}

impl RawAddr {
    fn zeroed() -> Self {
        // SAFETY: sockaddr_storage is integers and padding only; all-zero bytes are a valid value.
        let ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        RawAddr { ss }
    }

    /// `addr` in the form a socket of family v6 (`v6 = true`) or v4 sends to, and its length.
    fn from_socket(addr: SocketAddr, v6: bool) -> Result<(RawAddr, libc::socklen_t), NicError> {
        let mut raw = RawAddr::zeroed();
        let addr = match (addr, v6) {
            (SocketAddr::V4(a), true) => {
                SocketAddr::V6(SocketAddrV6::new(a.ip().to_ipv6_mapped(), a.port(), 0, 0))
            }
            (SocketAddr::V6(a), false) => match a.ip().to_ipv4_mapped() {
                Some(ip) => SocketAddr::V4(SocketAddrV4::new(ip, a.port())),
                None => return Err(NicError::AddressFamily),
            },
            (a, _) => a,
        };
        match addr {
            SocketAddr::V4(a) => {
                raw.v4 = libc::sockaddr_in {
                    sin_family: libc::AF_INET as libc::sa_family_t,
                    sin_port: a.port().to_be(),
                    sin_addr: libc::in_addr {
                        s_addr: u32::from_ne_bytes(a.ip().octets()),
                    },
                    sin_zero: [0; 8],
                };
                Ok((raw, size_of::<libc::sockaddr_in>() as libc::socklen_t))
            }
            SocketAddr::V6(a) => {
                raw.v6 = libc::sockaddr_in6 {
                    sin6_family: libc::AF_INET6 as libc::sa_family_t,
                    sin6_port: a.port().to_be(),
                    sin6_flowinfo: a.flowinfo(),
                    sin6_addr: libc::in6_addr {
                        s6_addr: a.ip().octets(),
                    },
                    sin6_scope_id: a.scope_id(),
                };
                Ok((raw, size_of::<libc::sockaddr_in6>() as libc::socklen_t))
            }
        }
    }

    /// The address the kernel wrote (`len` bytes), if it is IPv4 or IPv6.
    fn socket_addr(&self, len: libc::socklen_t) -> Option<SocketAddr> {
        // SAFETY: every member starts with the family field, and the union was fully
        // initialised (zeroed, then written by us or the kernel), so these bytes are defined.
        let family = i32::from(unsafe { self.ss.ss_family });
        let len = len as usize;
        if family == libc::AF_INET && len >= size_of::<libc::sockaddr_in>() {
            // SAFETY: the family says the kernel wrote a sockaddr_in, and len covers it.
            let a = unsafe { self.v4 };
            let ip = Ipv4Addr::from(a.sin_addr.s_addr.to_ne_bytes());
            Some(SocketAddr::V4(SocketAddrV4::new(
                ip,
                u16::from_be(a.sin_port),
            )))
        } else if family == libc::AF_INET6 && len >= size_of::<libc::sockaddr_in6>() {
            // SAFETY: the family says the kernel wrote a sockaddr_in6, and len covers it.
            let a = unsafe { self.v6 };
            let ip = Ipv6Addr::from(a.sin6_addr.s6_addr);
            Some(SocketAddr::V6(SocketAddrV6::new(
                ip,
                u16::from_be(a.sin6_port),
                a.sin6_flowinfo,
                a.sin6_scope_id,
            )))
        } else {
            None
        }
    }
}

/// Prebuilt destinations: the default and the peer table, converted once at open.
#[derive(Clone)]
struct Dests {
    v6: bool,
    default: Option<(RawAddr, libc::socklen_t)>,
    peers: Box<[(RawAddr, libc::socklen_t)]>,
}

#[derive(Clone, Copy)]
#[repr(C, align(8))]
struct Ctrl([u8; CTRL_LEN]);

/// Syscall argument arrays for one direction, allocated once.
///
/// The pointers inside `hdrs` and `iovs` are rewritten before every syscall and are only
/// dereferenced by the kernel during that syscall.
struct Scratch {
    hdrs: Box<[libc::mmsghdr]>,
    iovs: Box<[libc::iovec]>,
    names: Box<[RawAddr]>,
    ctrl: Box<[Ctrl]>,
}

// SAFETY: Scratch holds raw pointers only as syscall arguments. They are rewritten before each
// syscall made by the thread that owns the port and point into memory that the same call
// borrows (the caller's packets or batch, or the port itself); nothing is shared between
// threads, so moving the port to another thread is sound.
unsafe impl Send for Scratch {}

impl Scratch {
    fn new(n: usize, with_ctrl: bool) -> Self {
        // SAFETY: mmsghdr is pointers and integers; all-zero (null pointers, zero lengths) is valid.
        let hdr: libc::mmsghdr = unsafe { std::mem::zeroed() };
        let iov = libc::iovec {
            iov_base: std::ptr::null_mut(),
            iov_len: 0,
        };
        Scratch {
            hdrs: vec![hdr; n].into_boxed_slice(),
            iovs: vec![iov; n].into_boxed_slice(),
            names: vec![RawAddr::zeroed(); n].into_boxed_slice(),
            ctrl: vec![Ctrl([0; CTRL_LEN]); if with_ctrl { n } else { 0 }].into_boxed_slice(),
        }
    }

    /// Fill entry `j` to send `p`.
    fn prepare_tx(
        &mut self,
        j: usize,
        p: &TxPacket<'_>,
        max_payload: usize,
        dests: &Dests,
    ) -> Result<(), NicError> {
        if p.data.len() > max_payload {
            return Err(NicError::Oversize {
                len: p.data.len(),
                max: max_payload,
            });
        }
        let (name, namelen): (*const RawAddr, libc::socklen_t) = match p.dest {
            Dest::Default => match &dests.default {
                Some((raw, len)) => (raw, *len),
                None => return Err(NicError::NoDestination),
            },
            Dest::Peer(i) => match dests.peers.get(usize::from(i)) {
                Some((raw, len)) => (raw, *len),
                None => {
                    return Err(NicError::UnknownPeer {
                        index: i,
                        peers: dests.peers.len(),
                    })
                }
            },
            Dest::Addr(a) => {
                let (raw, len) = RawAddr::from_socket(a, dests.v6)?;
                self.names[j] = raw;
                (&self.names[j], len)
            }
        };
        self.iovs[j] = libc::iovec {
            iov_base: p.data.as_ptr().cast_mut().cast(),
            iov_len: p.data.len(),
        };
        let iov: *mut libc::iovec = &mut self.iovs[j];
        let h = &mut self.hdrs[j].msg_hdr;
        h.msg_name = name.cast_mut().cast();
        h.msg_namelen = namelen;
        h.msg_iov = iov;
        h.msg_iovlen = 1;
        h.msg_control = std::ptr::null_mut();
        h.msg_controllen = 0;
        h.msg_flags = 0;
        Ok(())
    }

    /// Send entries `0..k`; the number sent, or `errno`.
    fn send(&mut self, fd: RawFd, k: usize, mode: BatchMode) -> Result<usize, i32> {
        let rc: isize = match mode {
            BatchMode::Mmsg => {
                // SAFETY: entries 0..k (k ≤ hdrs.len()) were filled by prepare_tx in this call:
                // each names a live sockaddr of the given length (in `Dests` or `names`) and one
                // iovec pointing at the caller's packet bytes, borrowed for this call; the
                // kernel only reads them, and writes only each entry's msg_len.
                let rc = unsafe {
                    libc::sendmmsg(
                        fd,
                        self.hdrs.as_mut_ptr(),
                        k as libc::c_uint,
                        libc::MSG_DONTWAIT,
                    )
                };
                rc as isize
            }
            BatchMode::PerPacket => {
                debug_assert_eq!(k, 1);
                // SAFETY: entry 0 was filled by prepare_tx in this call (see above); sendmsg
                // only reads the header, the name and the bytes.
                let rc = unsafe { libc::sendmsg(fd, &self.hdrs[0].msg_hdr, libc::MSG_DONTWAIT) };
                if rc >= 0 {
                    1
                } else {
                    rc
                }
            }
        };
        if rc < 0 {
            Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
        } else {
            Ok(rc as usize)
        }
    }

    /// Fill entry `i` to receive into `len` bytes at `buf`.
    fn prepare_rx(&mut self, i: usize, buf: *mut u8, len: usize) {
        self.iovs[i] = libc::iovec {
            iov_base: buf.cast(),
            iov_len: len,
        };
        let iov: *mut libc::iovec = &mut self.iovs[i];
        let name: *mut RawAddr = &mut self.names[i];
        let ctrl: *mut Ctrl = &mut self.ctrl[i];
        let h = &mut self.hdrs[i];
        h.msg_len = 0;
        h.msg_hdr.msg_name = name.cast();
        h.msg_hdr.msg_namelen = size_of::<RawAddr>() as libc::socklen_t;
        h.msg_hdr.msg_iov = iov;
        h.msg_hdr.msg_iovlen = 1;
        h.msg_hdr.msg_control = ctrl.cast();
        h.msg_hdr.msg_controllen = CTRL_LEN;
        h.msg_hdr.msg_flags = 0;
    }

    /// Receive into entries `0..k`; the number of datagrams, or `errno`.
    fn recv(&mut self, fd: RawFd, k: usize, mode: BatchMode) -> Result<usize, i32> {
        let rc: isize = match mode {
            BatchMode::Mmsg => {
                // SAFETY: entries 0..k were filled by prepare_rx in this call: each points at a
                // distinct RxBatch slot of iov_len bytes, at this entry's sockaddr buffer and at
                // its CTRL_LEN control buffer, all live and unaliased for the whole call; the
                // kernel writes at most those lengths.
                let rc = unsafe {
                    libc::recvmmsg(
                        fd,
                        self.hdrs.as_mut_ptr(),
                        k as libc::c_uint,
                        libc::MSG_DONTWAIT,
                        std::ptr::null_mut(),
                    )
                };
                rc as isize
            }
            BatchMode::PerPacket => {
                debug_assert_eq!(k, 1);
                // SAFETY: entry 0 was filled by prepare_rx in this call (see above).
                let rc =
                    unsafe { libc::recvmsg(fd, &mut self.hdrs[0].msg_hdr, libc::MSG_DONTWAIT) };
                if rc >= 0 {
                    self.hdrs[0].msg_len = rc as libc::c_uint;
                    1
                } else {
                    rc
                }
            }
        };
        if rc < 0 {
            Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
        } else {
            Ok(rc as usize)
        }
    }
}

/// `CMSG_LEN(n)`: header (aligned) plus `n` bytes of data.
const fn cmsg_len(n: usize) -> usize {
    let a = size_of::<usize>();
    size_of::<libc::cmsghdr>().div_ceil(a) * a + n
}

/// The kernel timestamp (ns) and the socket's drop count in one received message's control data.
fn parse_cmsgs(h: &libc::msghdr) -> (Option<u64>, Option<u32>) {
    let mut ts = None;
    let mut ovfl = None;
    // SAFETY: msg_control/msg_controllen describe this entry's control buffer as the kernel
    // left it (msg_controllen ≤ CTRL_LEN); CMSG_FIRSTHDR only reads those two fields.
    let mut c = unsafe { libc::CMSG_FIRSTHDR(h) };
    // Bounded: a control buffer of CTRL_LEN bytes holds at most 4 headers.
    for _ in 0..4 {
        if c.is_null() {
            break;
        }
        // SAFETY: CMSG_FIRSTHDR/CMSG_NXTHDR return null or a pointer to a whole cmsghdr inside
        // the control buffer; read_unaligned makes no alignment assumption.
        let hdr = unsafe { c.read_unaligned() };
        // SAFETY: c points at a cmsghdr inside the buffer; CMSG_DATA only offsets the pointer.
        let data = unsafe { libc::CMSG_DATA(c) };
        let len = hdr.cmsg_len as usize;
        if hdr.cmsg_level == libc::SOL_SOCKET
            && hdr.cmsg_type == libc::SCM_TIMESTAMPNS
            && len >= cmsg_len(size_of::<libc::timespec>())
        {
            // SAFETY: cmsg_len says the kernel wrote a whole timespec at data, inside the buffer.
            let t = unsafe { data.cast::<libc::timespec>().read_unaligned() };
            let ns = u64::try_from(t.tv_sec)
                .unwrap_or(0)
                .saturating_mul(1_000_000_000)
                .saturating_add(u64::try_from(t.tv_nsec).unwrap_or(0));
            if ns != 0 {
                ts = Some(ns);
            }
        } else if hdr.cmsg_level == libc::SOL_SOCKET
            && hdr.cmsg_type == libc::SO_RXQ_OVFL
            && len >= cmsg_len(size_of::<u32>())
        {
            // SAFETY: cmsg_len says the kernel wrote a whole u32 at data, inside the buffer.
            ovfl = Some(unsafe { data.cast::<u32>().read_unaligned() });
        }
        // SAFETY: h describes the control buffer and c is a header inside it.
        c = unsafe { libc::CMSG_NXTHDR(h, c) };
    }
    (ts, ovfl)
}

fn set_opt<T>(
    fd: BorrowedFd<'_>,
    level: i32,
    name: i32,
    val: &T,
    op: &'static str,
) -> Result<(), NicError> {
    // SAFETY: val points at a live T of size_of::<T>() bytes for the whole call; the kernel
    // copies it and keeps no pointer.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (val as *const T).cast(),
            size_of::<T>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(NicError::last_os(op))
    }
}

fn get_opt_int(
    fd: BorrowedFd<'_>,
    level: i32,
    name: i32,
    op: &'static str,
) -> Result<i32, NicError> {
    let mut val: libc::c_int = 0;
    let mut len = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: val and len are live locals of the sizes passed; the kernel writes at most len bytes.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (&mut val as *mut i32).cast(),
            &mut len,
        )
    };
    if rc == 0 {
        Ok(val)
    } else {
        Err(NicError::last_os(op))
    }
}

/// A [`Port`] over one non-blocking UDP socket. See the module docs.
pub struct UdpPort {
    sock: UdpSocket,
    mode: BatchMode,
    batch: usize,
    max_payload: usize,
    kernel_ts: bool,
    dests: Dests,
    tx: Scratch,
    rx: Scratch,
    pool: RxBatch,
    counters: PortCounters,
    last_tx: TxStamp,
    /// Last `SO_RXQ_OVFL` value seen (the kernel's cumulative drop count for this socket).
    ovfl_seen: u32,
    /// On a thread with the simulator's network installed: the simulated socket this port
    /// really is (`sock` is then an unbound placeholder that never becomes readable).
    sim: Option<SimSide>,
}

/// A port's simulated socket and its destinations ([`crate::sim`]).
#[derive(Debug, Clone)]
struct SimSide {
    sock: crate::sim::SimSock,
    default: Option<SocketAddr>,
    peers: Box<[SocketAddr]>,
}

impl SimSide {
    fn dest(&self, d: Dest) -> Result<SocketAddr, NicError> {
        match d {
            Dest::Default => self.default.ok_or(NicError::NoDestination),
            Dest::Peer(i) => self
                .peers
                .get(usize::from(i))
                .copied()
                .ok_or(NicError::UnknownPeer {
                    index: i,
                    peers: self.peers.len(),
                }),
            Dest::Addr(a) => Ok(a),
        }
    }
}

impl std::fmt::Debug for UdpPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UdpPort")
            .field("local", &self.sock.local_addr().ok())
            .field("mode", &self.mode)
            .field("batch", &self.batch)
            .field("max_payload", &self.max_payload)
            .field("kernel_ts", &self.kernel_ts)
            .field("counters", &self.counters)
            .finish()
    }
}

impl UdpPort {
    /// Create, configure and bind the socket, and allocate every buffer the port will use.
    ///
    /// On a thread where the simulator installed its network ([`crate::sim::install`]), the
    /// socket is bound there instead, with the same addresses.
    pub fn open(cfg: &UdpConfig) -> Result<UdpPort, NicError> {
        cfg.validate()?;
        let v6 = cfg.bind.is_ipv6();
        if let Some(net) = crate::sim::installed() {
            return Self::open_sim(cfg, &net);
        }
        let domain = if v6 { libc::AF_INET6 } else { libc::AF_INET };
        // SAFETY: a plain syscall with constant arguments; it returns a new fd or -1.
        let raw = unsafe {
            libc::socket(
                domain,
                libc::SOCK_DGRAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                libc::IPPROTO_UDP,
            )
        };
        if raw < 0 {
            return Err(NicError::last_os("socket"));
        }
        // SAFETY: raw is a fresh, open fd that nothing else owns or will close.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let one: libc::c_int = 1;
        if cfg.reuse_addr {
            set_opt(
                fd.as_fd(),
                libc::SOL_SOCKET,
                libc::SO_REUSEADDR,
                &one,
                "SO_REUSEADDR",
            )?;
        }
        if cfg.reuse_port {
            set_opt(
                fd.as_fd(),
                libc::SOL_SOCKET,
                libc::SO_REUSEPORT,
                &one,
                "SO_REUSEPORT",
            )?;
        }
        if let Some(n) = cfg.recv_buffer {
            let n =
                libc::c_int::try_from(n).map_err(|_| NicError::Config("recv_buffer too large"))?;
            set_opt(
                fd.as_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVBUF,
                &n,
                "SO_RCVBUF",
            )?;
        }
        if let Some(n) = cfg.send_buffer {
            let n =
                libc::c_int::try_from(n).map_err(|_| NicError::Config("send_buffer too large"))?;
            set_opt(
                fd.as_fd(),
                libc::SOL_SOCKET,
                libc::SO_SNDBUF,
                &n,
                "SO_SNDBUF",
            )?;
        }
        let kernel_ts = cfg.rx_timestamps
            && set_opt(
                fd.as_fd(),
                libc::SOL_SOCKET,
                libc::SO_TIMESTAMPNS,
                &one,
                "SO_TIMESTAMPNS",
            )
            .is_ok();
        // The drop count is a nicety: a kernel that refuses it leaves rx_dropped at 0.
        let _ = set_opt(
            fd.as_fd(),
            libc::SOL_SOCKET,
            libc::SO_RXQ_OVFL,
            &one,
            "SO_RXQ_OVFL",
        );

        let (bind, bind_len) = RawAddr::from_socket(cfg.bind, v6)?;
        let bind_ptr: *const RawAddr = &bind;
        // SAFETY: bind_ptr points at a live sockaddr of bind_len bytes of the socket's family.
        let rc = unsafe { libc::bind(fd.as_raw_fd(), bind_ptr.cast(), bind_len) };
        if rc != 0 {
            return Err(NicError::last_os("bind"));
        }
        let sock = UdpSocket::from(fd);

        if let Some(m) = cfg.multicast {
            let iface = libc::in_addr {
                s_addr: u32::from_ne_bytes(m.interface.octets()),
            };
            set_opt(
                sock.as_fd(),
                libc::IPPROTO_IP,
                libc::IP_MULTICAST_IF,
                &iface,
                "IP_MULTICAST_IF",
            )?;
            sock.set_multicast_loop_v4(m.loopback)
                .map_err(|e| NicError::from_io("IP_MULTICAST_LOOP", &e))?;
            sock.set_multicast_ttl_v4(m.ttl)
                .map_err(|e| NicError::from_io("IP_MULTICAST_TTL", &e))?;
            if m.join {
                sock.join_multicast_v4(&m.group, &m.interface)
                    .map_err(|e| NicError::from_io("IP_ADD_MEMBERSHIP", &e))?;
            }
        }

        let default = match cfg.default_dest {
            Some(a) => Some(RawAddr::from_socket(a, v6)?),
            None => None,
        };
        let peers = cfg
            .peers
            .iter()
            .map(|&a| RawAddr::from_socket(a, v6))
            .collect::<Result<Vec<_>, _>>()?
            .into_boxed_slice();

        Ok(UdpPort {
            sock,
            mode: cfg.mode,
            batch: cfg.batch,
            max_payload: cfg.max_payload,
            kernel_ts,
            dests: Dests { v6, default, peers },
            tx: Scratch::new(cfg.batch, false),
            rx: Scratch::new(cfg.batch, true),
            pool: RxBatch::new(cfg.batch, cfg.max_payload),
            counters: PortCounters::default(),
            last_tx: TxStamp::default(),
            ovfl_seen: 0,
            sim: None,
        })
    }

    /// [`UdpPort::open`] on the simulated network `net`.
    fn open_sim(
        cfg: &UdpConfig,
        net: &std::sync::Arc<crate::sim::SimNet>,
    ) -> Result<UdpPort, NicError> {
        let join = cfg
            .multicast
            .filter(|m| m.join)
            .map(|m| (m.group, m.interface));
        let sock = net.bind(cfg.bind, join, cfg.reuse_addr || cfg.reuse_port)?;
        // The placeholder: an unbound socket, never readable, so `socket()` still answers.
        // SAFETY: a plain syscall with constant arguments; it returns a new fd or -1.
        let raw = unsafe {
            libc::socket(
                libc::AF_INET,
                libc::SOCK_DGRAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                libc::IPPROTO_UDP,
            )
        };
        if raw < 0 {
            return Err(NicError::last_os("socket"));
        }
        // SAFETY: raw is a fresh, open fd that nothing else owns or will close.
        let placeholder = UdpSocket::from(unsafe { OwnedFd::from_raw_fd(raw) });
        Ok(UdpPort {
            sock: placeholder,
            mode: cfg.mode,
            batch: cfg.batch,
            max_payload: cfg.max_payload,
            kernel_ts: false,
            dests: Dests {
                v6: false,
                default: None,
                peers: Box::new([]),
            },
            tx: Scratch::new(1, false),
            rx: Scratch::new(1, true),
            pool: RxBatch::new(cfg.batch, cfg.max_payload),
            counters: PortCounters::default(),
            last_tx: TxStamp::default(),
            ovfl_seen: 0,
            sim: Some(SimSide {
                sock,
                default: cfg.default_dest,
                peers: cfg.peers.clone().into_boxed_slice(),
            }),
        })
    }

    /// A second port over a duplicate of this socket (`dup`: the same bound address, the same
    /// kernel queues), with the same settings and its own buffers and counters — for a tile
    /// that sends from the socket another tile receives on.
    pub fn try_clone(&self) -> Result<UdpPort, NicError> {
        let sock = self
            .sock
            .try_clone()
            .map_err(|e| NicError::from_io("dup", &e))?;
        Ok(UdpPort {
            sock,
            mode: self.mode,
            batch: self.batch,
            max_payload: self.max_payload,
            kernel_ts: self.kernel_ts,
            dests: self.dests.clone(),
            tx: Scratch::new(self.batch, false),
            rx: Scratch::new(self.batch, true),
            pool: RxBatch::new(self.batch, self.max_payload),
            counters: PortCounters::default(),
            last_tx: TxStamp::default(),
            ovfl_seen: 0,
            sim: self.sim.clone(),
        })
    }

    /// The bound address (with the ephemeral port filled in).
    pub fn local_addr(&self) -> Result<SocketAddr, NicError> {
        if let Some(s) = &self.sim {
            return Ok(SocketAddr::V4(s.sock.local()));
        }
        self.sock
            .local_addr()
            .map_err(|e| NicError::from_io("getsockname", &e))
    }

    /// The socket, for options this type does not cover.
    pub fn socket(&self) -> &UdpSocket {
        &self.sock
    }

    /// The batch mode.
    pub fn mode(&self) -> BatchMode {
        self.mode
    }

    /// Switch between one syscall per batch and one per packet.
    pub fn set_mode(&mut self, mode: BatchMode) {
        self.mode = mode;
    }

    /// Packets per syscall in [`BatchMode::Mmsg`], and the size of the port's own pool.
    pub fn batch(&self) -> usize {
        self.batch
    }

    /// True when the kernel stamps received datagrams (`SO_TIMESTAMPNS` accepted).
    pub fn kernel_timestamps(&self) -> bool {
        self.kernel_ts
    }

    /// The socket's receive buffer in bytes, as the kernel reports it (`SO_RCVBUF`).
    pub fn recv_buffer_size(&self) -> Result<usize, NicError> {
        get_opt_int(
            self.sock.as_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            "SO_RCVBUF",
        )
        .map(|v| v.max(0) as usize)
    }

    /// The socket's send buffer in bytes, as the kernel reports it (`SO_SNDBUF`).
    pub fn send_buffer_size(&self) -> Result<usize, NicError> {
        get_opt_int(
            self.sock.as_fd(),
            libc::SOL_SOCKET,
            libc::SO_SNDBUF,
            "SO_SNDBUF",
        )
        .map(|v| v.max(0) as usize)
    }

    /// Block until a datagram is waiting or `timeout` (millisecond resolution) has passed;
    /// true when one is waiting. For threads that share a core and would rather sleep than
    /// spin (tests, benchmarks, a `dev` runner); a pinned hot loop polls `recv_batch` instead.
    pub fn wait_readable(&self, timeout: std::time::Duration) -> Result<bool, NicError> {
        if let Some(s) = &self.sim {
            // Simulated time does not pass while this thread waits.
            return Ok(s.sock.readable());
        }
        let mut pfd = libc::pollfd {
            fd: self.sock.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
        // SAFETY: pfd is a live array of one pollfd for the whole call; poll writes only revents.
        let rc = unsafe { libc::poll(&mut pfd, 1, ms) };
        if rc >= 0 {
            return Ok(rc > 0);
        }
        match std::io::Error::last_os_error().raw_os_error().unwrap_or(0) {
            libc::EINTR => Ok(false),
            errno => Err(NicError::Io { op: "poll", errno }),
        }
    }

    fn send_impl(&mut self, pkts: &[TxPacket<'_>]) -> Result<usize, NicError> {
        if let Some(s) = &self.sim {
            return self.send_sim(&s.clone(), pkts);
        }
        let fd = self.sock.as_raw_fd();
        let per_call = match self.mode {
            BatchMode::Mmsg => self.batch,
            BatchMode::PerPacket => 1,
        };
        let mut sent = 0usize;
        let mut bytes = 0u64;
        let mut calls = 0u64;
        let mut blocked = false;
        // A packet that cannot be sent, and its index; reported only when it is the first.
        let mut bad: Option<(usize, NicError)> = None;
        let before = now_ns();
        while sent < pkts.len() {
            let end = pkts.len().min(sent + per_call);
            let mut k = 0usize;
            for p in &pkts[sent..end] {
                if let Err(e) = self.tx.prepare_tx(k, p, self.max_payload, &self.dests) {
                    bad = Some((sent + k, e));
                    break;
                }
                k += 1;
            }
            if k == 0 {
                break;
            }
            match self.tx.send(fd, k, self.mode) {
                Ok(n) => {
                    let n = n.min(k);
                    if n > 0 {
                        calls += 1;
                    }
                    bytes += pkts[sent..sent + n]
                        .iter()
                        .map(|p| p.data.len() as u64)
                        .sum::<u64>();
                    sent += n;
                    if n < k {
                        blocked = true;
                        break;
                    }
                }
                Err(errno) if is_transient(errno) => {
                    blocked = true;
                    break;
                }
                Err(errno) => {
                    let e = NicError::Io {
                        op: send_op(self.mode),
                        errno,
                    };
                    bad = Some((sent, e));
                    break;
                }
            }
            if bad.is_some() {
                break;
            }
        }
        let after = now_ns();
        if blocked {
            self.counters.tx_backpressure += 1;
        }
        if sent > 0 {
            self.counters.tx_packets += sent as u64;
            self.counters.tx_bytes += bytes;
            self.counters.tx_calls += calls;
            self.last_tx = TxStamp {
                before_ns: before,
                after_ns: after,
                packets: u32::try_from(sent).unwrap_or(u32::MAX),
            };
            return Ok(sent);
        }
        match bad {
            Some((0, e)) => {
                match e {
                    NicError::Oversize { .. } => self.counters.tx_oversize += 1,
                    _ => self.counters.tx_errors += 1,
                }
                Err(e)
            }
            _ => Ok(0),
        }
    }

    /// Receive up to `limit` packets into `batch` (cleared first).
    fn send_sim(&mut self, s: &SimSide, pkts: &[TxPacket<'_>]) -> Result<usize, NicError> {
        // The packets up to the first one that cannot go (too long, no destination).
        let mut ok = Vec::with_capacity(pkts.len());
        for p in pkts {
            if p.data.len() > self.max_payload {
                if ok.is_empty() {
                    return Err(NicError::Oversize {
                        len: p.data.len(),
                        max: self.max_payload,
                    });
                }
                break;
            }
            match s.dest(p.dest) {
                Ok(a) => ok.push((a, p.data)),
                Err(e) if ok.is_empty() => return Err(e),
                Err(_) => break,
            }
        }
        let (n, stamp) = s.sock.send(&mut ok.into_iter(), &mut self.counters)?;
        if n > 0 {
            self.last_tx = stamp;
        }
        Ok(n)
    }

    fn recv_impl(&mut self, batch: &mut RxBatch, limit: usize) -> Result<usize, NicError> {
        if let Some(s) = &self.sim {
            return Ok(s.sock.recv(batch, limit, &mut self.counters));
        }
        batch.clear();
        let fd = self.sock.as_raw_fd();
        let limit = limit.min(batch.capacity());
        let per_call = match self.mode {
            BatchMode::Mmsg => self.batch,
            BatchMode::PerPacket => 1,
        };
        let slot_size = batch.slot_size();
        // Bounded: each pass uses at least one slot, or stops.
        while batch.len() < limit && batch.free_slots() > 0 {
            let want = (limit - batch.len()).min(batch.free_slots()).min(per_call);
            let base = batch.next_slot();
            for i in 0..want {
                let p = batch.slot_ptr(base + i);
                self.rx.prepare_rx(i, p, slot_size);
            }
            let n = match self.rx.recv(fd, want, self.mode) {
                Ok(n) => n.min(want),
                Err(errno) if is_transient(errno) => 0,
                Err(errno) => {
                    self.counters.rx_errors += 1;
                    if batch.is_empty() {
                        return Err(NicError::Io {
                            op: recv_op(self.mode),
                            errno,
                        });
                    }
                    break;
                }
            };
            if n == 0 {
                break;
            }
            let user_ts = now_ns();
            self.counters.rx_calls += 1;
            batch.consume_slots(n);
            for i in 0..n {
                self.deliver(batch, i, base + i, user_ts);
            }
            if n < want {
                break;
            }
        }
        Ok(batch.len())
    }

    /// Turn entry `i` of the last receive (written into slot `slot`) into a descriptor.
    fn deliver(&mut self, batch: &mut RxBatch, i: usize, slot: usize, user_ts: u64) {
        let h = &self.rx.hdrs[i];
        let (ts, ovfl) = parse_cmsgs(&h.msg_hdr);
        if let Some(v) = ovfl {
            self.counters.rx_dropped += u64::from(v.wrapping_sub(self.ovfl_seen));
            self.ovfl_seen = v;
        }
        if h.msg_hdr.msg_flags & libc::MSG_TRUNC != 0 {
            self.counters.rx_truncated += 1;
            return;
        }
        let len = (h.msg_len as usize).min(batch.slot_size());
        let src = self.rx.names[i].socket_addr(h.msg_hdr.msg_namelen);
        let meta = match ts {
            Some(ns) => RxMeta {
                src,
                ts_ns: ns,
                ts_source: TsSource::Kernel,
            },
            None => RxMeta {
                src,
                ts_ns: user_ts,
                ts_source: TsSource::User,
            },
        };
        self.counters.rx_packets += 1;
        self.counters.rx_bytes += len as u64;
        batch.push_desc(slot, len, meta);
    }
}

fn is_transient(errno: i32) -> bool {
    errno == libc::EAGAIN
        || errno == libc::EWOULDBLOCK
        || errno == libc::EINTR
        || errno == libc::ENOBUFS
}

fn send_op(mode: BatchMode) -> &'static str {
    match mode {
        BatchMode::Mmsg => "sendmmsg",
        BatchMode::PerPacket => "sendmsg",
    }
}

fn recv_op(mode: BatchMode) -> &'static str {
    match mode {
        BatchMode::Mmsg => "recvmmsg",
        BatchMode::PerPacket => "recvmsg",
    }
}

impl AsFd for UdpPort {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.sock.as_fd()
    }
}

impl AsRawFd for UdpPort {
    fn as_raw_fd(&self) -> RawFd {
        self.sock.as_raw_fd()
    }
}

impl Port for UdpPort {
    fn max_payload(&self) -> usize {
        self.max_payload
    }

    fn wait_fd(&self) -> Option<std::os::fd::RawFd> {
        if self.sim.is_some() {
            return None;
        }
        Some(std::os::fd::AsRawFd::as_raw_fd(self.socket()))
    }

    fn send_batch(&mut self, pkts: &[TxPacket<'_>]) -> Result<usize, NicError> {
        self.send_impl(pkts)
    }

    fn recv_batch(&mut self, batch: &mut RxBatch) -> Result<usize, NicError> {
        let cap = batch.capacity();
        self.recv_impl(batch, cap)
    }

    fn poll_recv(
        &mut self,
        max: usize,
        f: &mut dyn FnMut(RxPacket<'_>),
    ) -> Result<usize, NicError> {
        let mut pool = std::mem::replace(&mut self.pool, RxBatch::empty());
        let r = self.recv_impl(&mut pool, max);
        if r.is_ok() {
            for p in pool.iter() {
                f(p);
            }
        }
        self.pool = pool;
        r
    }

    /// A no-op: every datagram `send_batch` accepted is already in the kernel.
    fn flush(&mut self) -> Result<(), NicError> {
        Ok(())
    }

    fn last_tx(&self) -> TxStamp {
        self.last_tx
    }

    fn counters(&self) -> PortCounters {
        self.counters
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_addr_round_trips() {
        for a in ["127.0.0.1:7400", "[::1]:7401", "239.255.0.1:9"] {
            let a: SocketAddr = a.parse().unwrap();
            let (raw, len) = RawAddr::from_socket(a, a.is_ipv6()).unwrap();
            assert_eq!(raw.socket_addr(len), Some(a));
        }
        let v4: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let (raw, len) = RawAddr::from_socket(v4, true).unwrap();
        assert_eq!(
            raw.socket_addr(len),
            Some("[::ffff:127.0.0.1]:1".parse().unwrap())
        );
        let v6: SocketAddr = "[::1]:1".parse().unwrap();
        assert_eq!(
            RawAddr::from_socket(v6, false).err(),
            Some(NicError::AddressFamily)
        );
        assert_eq!(RawAddr::zeroed().socket_addr(0), None);
    }

    #[test]
    fn cmsg_len_matches_libc() {
        // SAFETY: CMSG_LEN is pure arithmetic on its argument.
        let want = unsafe { libc::CMSG_LEN(16) } as usize;
        assert_eq!(cmsg_len(16), want);
        // SAFETY: as above.
        let ts_space = unsafe { libc::CMSG_SPACE(16) } as usize;
        // SAFETY: as above.
        let ovfl_space = unsafe { libc::CMSG_SPACE(4) } as usize;
        assert!(ts_space + ovfl_space <= CTRL_LEN);
    }
}
