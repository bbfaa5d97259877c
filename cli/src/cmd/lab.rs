//! `vyrn lab-delay`: the netns lab's metro link where the kernel has no
//! `netem` qdisc. Two interfaces, every Ethernet frame that arrives on one sent out of the other
//! `delay` later, both ways — an L2 delay line between two halves of a lab network
//! (`deploy/lab/netns.sh` with `DELAY=`: the box's half of each replication path on one side, the
//! voters' half on the other).
//!
//! Why our own: `tc qdisc … netem delay` is the tool for this and the script uses it where the
//! kernel has `sch_netem`; these machines' kernel has only `pfifo`, `tbf` and `htb` (no
//! delaying qdisc, no `fq` for an eBPF departure-time delay). So a userspace relay on
//! `AF_PACKET` sockets: each frame is read with its arrival time, held in a FIFO (the delay is
//! the same for all, so the FIFO is in departure order) and sent by the other socket when due;
//! the loop sleeps in `ppoll` until the next departure or arrival. It is a lab tool, not a hot
//! path: one copy per frame into a preallocated slot, the FIFO bounded (`--max-held`; past it a
//! frame is dropped and counted, like a full queue on a link). Frames the relay sends itself are
//! not read back (`PACKET_IGNORE_OUTGOING`).
//!
//! Accuracy: the departure is taken as late as the scheduler wakes the loop (tens of µs on an
//! idle core; more on a loaded 2-core machine); the summary prints the measured hold time
//! (p50/p99/max) so a run states the delay it really had.

use std::collections::VecDeque;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::Instant;

/// `vyrn lab-delay`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// One side's interface (e.g. the box's half of path A).
    #[arg(long)]
    pub a: String,
    /// The other side's interface.
    #[arg(long)]
    pub b: String,
    /// One-way delay, µs, both directions.
    #[arg(long, default_value_t = 250)]
    pub delay_us: u64,
    /// Most frames held per direction; past it a frame is dropped and counted.
    #[arg(long, default_value_t = 65_536)]
    pub max_held: usize,
}

/// Largest frame taken (jumbo frames of 9216 bytes and their header fit).
const FRAME_MAX: usize = 9_300;

/// One `AF_PACKET` socket bound to an interface, promiscuous, not reading its own sends.
struct Raw {
    fd: libc::c_int,
    ifindex: libc::c_int,
}

impl Raw {
    fn open(ifname: &str) -> Result<Raw, String> {
        let name = std::ffi::CString::new(ifname).map_err(|_| format!("{ifname:?}: a NUL"))?;
        // SAFETY: if_nametoindex reads the NUL-terminated name only.
        let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) } as libc::c_int;
        if ifindex == 0 {
            return Err(format!("{ifname}: no such interface"));
        }
        let proto = (libc::ETH_P_ALL as u16).to_be() as libc::c_int;
        // SAFETY: socket(2) with constant arguments; the fd is owned by `Raw` and closed in Drop.
        let fd = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                proto,
            )
        };
        if fd < 0 {
            return Err(format!(
                "AF_PACKET socket: {} (needs root or CAP_NET_RAW)",
                std::io::Error::last_os_error()
            ));
        }
        let raw = Raw { fd, ifindex };
        // SAFETY: sockaddr_ll is plain data; zeroed is a valid value.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = (libc::ETH_P_ALL as u16).to_be();
        sll.sll_ifindex = ifindex;
        // SAFETY: bind with a sockaddr_ll of the size given.
        let r = unsafe {
            libc::bind(
                fd,
                &sll as *const libc::sockaddr_ll as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if r != 0 {
            return Err(format!(
                "bind to {ifname}: {}",
                std::io::Error::last_os_error()
            ));
        }
        // Every frame on the link, whatever its destination MAC.
        // SAFETY: packet_mreq is plain data; zeroed is valid.
        let mut mr: libc::packet_mreq = unsafe { std::mem::zeroed() };
        mr.mr_ifindex = ifindex;
        mr.mr_type = libc::PACKET_MR_PROMISC as u16;
        raw.setsockopt(libc::PACKET_ADD_MEMBERSHIP, &mr, "PACKET_MR_PROMISC")?;
        // Never read back what this socket (or the other) sends out of this interface.
        let one: libc::c_int = 1;
        raw.setsockopt(libc::PACKET_IGNORE_OUTGOING, &one, "PACKET_IGNORE_OUTGOING")?;
        Ok(raw)
    }

    fn setsockopt<T>(&self, opt: libc::c_int, v: &T, what: &str) -> Result<(), String> {
        // SAFETY: `v` is a live T of the size given.
        let r = unsafe {
            libc::setsockopt(
                self.fd,
                libc::SOL_PACKET,
                opt,
                v as *const T as *const libc::c_void,
                std::mem::size_of::<T>() as libc::socklen_t,
            )
        };
        if r == 0 {
            Ok(())
        } else {
            Err(format!("{what}: {}", std::io::Error::last_os_error()))
        }
    }

    /// One frame into `buf`, or None when none is waiting: `Some(n)` with its real length,
    /// which is more than `buf.len()` for a frame that did not fit (the caller drops it).
    fn recv(&self, buf: &mut [u8]) -> Option<usize> {
        // SAFETY: recv into `buf` of its length; with MSG_TRUNC the kernel copies at most that
        // much and returns the frame's real length.
        let n = unsafe {
            libc::recv(
                self.fd,
                buf.as_mut_ptr() as *mut libc::c_void,
                buf.len(),
                libc::MSG_DONTWAIT | libc::MSG_TRUNC,
            )
        };
        (n > 0).then_some(n as usize)
    }

    /// Send one frame out of this interface; false if the kernel refused it.
    fn send(&self, frame: &[u8]) -> bool {
        // SAFETY: sockaddr_ll is plain data; zeroed is valid.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_ifindex = self.ifindex;
        sll.sll_halen = 6;
        let k = frame.len().min(6);
        sll.sll_addr[..k].copy_from_slice(&frame[..k]);
        // SAFETY: sendto of `frame` with a sockaddr_ll of the size given.
        let n = unsafe {
            libc::sendto(
                self.fd,
                frame.as_ptr() as *const libc::c_void,
                frame.len(),
                libc::MSG_DONTWAIT,
                &sll as *const libc::sockaddr_ll as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        n == frame.len() as isize
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        // SAFETY: our own fd, closed once.
        unsafe { libc::close(self.fd) };
    }
}

/// Fill in the UDP checksum of an IPv4 UDP frame. A veth sender leaves it to "hardware"
/// (checksum offload: the kernel hands the frame on with the checksum unfinished), so a frame
/// captured on one interface and sent raw out of another would be dropped by the receiver's
/// stack as corrupt. Frames that are not IPv4 UDP, and fragments, are left as they are.
pub fn udp_checksum(f: &mut [u8]) {
    const ETH: usize = 14;
    if f.len() < ETH + 20 + 8 || f[12..14] != [0x08, 0x00] {
        return;
    }
    let ihl = ((f[ETH] & 0x0f) as usize) * 4;
    let frag = u16::from_be_bytes([f[ETH + 6], f[ETH + 7]]);
    if f[ETH] >> 4 != 4 || ihl < 20 || f[ETH + 9] != 17 || frag & 0x3fff != 0 {
        return;
    }
    let u = ETH + ihl;
    if f.len() < u + 8 {
        return;
    }
    let len = u16::from_be_bytes([f[u + 4], f[u + 5]]) as usize;
    if len < 8 || u + len > f.len() {
        return;
    }
    f[u + 6] = 0;
    f[u + 7] = 0;
    let mut sum: u64 = 0;
    let mut add = |b: &[u8]| {
        for c in b.chunks(2) {
            sum += u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]) as u64;
        }
    };
    add(&f[ETH + 12..ETH + 20]); // source and destination addresses
    add(&[0, 17]);
    add(&(len as u16).to_be_bytes());
    add(&f[u..u + len]);
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    let c = !(sum as u16);
    // 0 means "no checksum" in IPv4 UDP: a computed 0 is sent as all ones (RFC 768).
    let c = if c == 0 { 0xffff } else { c };
    f[u + 6..u + 8].copy_from_slice(&c.to_be_bytes());
}

/// One direction: frames held until due, in arrival (= departure) order, in reused buffers.
struct Line {
    held: VecDeque<(Instant, Vec<u8>)>,
    spare: Vec<Vec<u8>>,
    max: usize,
    passed: u64,
    dropped: u64,
    /// Frames longer than [`FRAME_MAX`]: dropped, never forwarded cut short.
    oversize: u64,
    send_failed: u64,
    /// Held time of every frame sent, µs.
    hist: hdrhistogram::Histogram<u64>,
}

impl Line {
    fn new(max: usize) -> Line {
        Line {
            held: VecDeque::with_capacity(max.min(1 << 16)),
            spare: Vec::new(),
            max,
            passed: 0,
            dropped: 0,
            oversize: 0,
            send_failed: 0,
            hist: hdrhistogram::Histogram::new_with_bounds(1, 60_000_000, 3)
                .unwrap_or_else(|_| unreachable!("constant bounds")),
        }
    }

    /// Read every frame waiting on `from`.
    fn take(&mut self, from: &Raw, buf: &mut [u8]) {
        while let Some(n) = from.recv(buf) {
            if n > buf.len() {
                self.oversize += 1;
                continue;
            }
            if self.held.len() >= self.max {
                self.dropped += 1;
                continue;
            }
            let mut v = self.spare.pop().unwrap_or_default();
            v.clear();
            v.extend_from_slice(&buf[..n]);
            udp_checksum(&mut v);
            self.held.push_back((Instant::now(), v));
        }
    }

    /// Send what is due by `now` out of `to`; the time the next one is due, if any.
    fn release(&mut self, to: &Raw, delay: std::time::Duration, now: Instant) -> Option<Instant> {
        while let Some((t, _)) = self.held.front() {
            let due = *t + delay;
            if due > now {
                return Some(due);
            }
            let Some((t, f)) = self.held.pop_front() else {
                break;
            };
            if to.send(&f) {
                self.passed += 1;
                let _ = self
                    .hist
                    .record((now.duration_since(t).as_micros() as u64).max(1));
            } else {
                self.send_failed += 1;
            }
            self.spare.push(f);
        }
        None
    }

    fn summary(&self, dir: &str) -> String {
        format!(
            "{dir}: {} frames passed, {} dropped (queue full), {} too long, {} refused by the kernel; held p50 {} µs, p99 {} µs, max {} µs",
            self.passed,
            self.dropped,
            self.oversize,
            self.send_failed,
            self.hist.value_at_quantile(0.5),
            self.hist.value_at_quantile(0.99),
            self.hist.max()
        )
    }
}

/// A wire does not wait for the hosts' CPUs: the relay asks for a real-time priority
/// (`SCHED_FIFO`), so a loaded 2-core machine whose roles spin on every core does not hold a
/// whole path's frames back for 100 ms and more behind them (seen before: every voter raising
/// REP_A_PATH for the path at once, the delay line's own stall). It sleeps in `ppoll` between
/// frames, so it takes a core only while it moves frames, and the kernel's real-time
/// throttling bounds it still. Where the priority is refused (not root), it runs as before and
/// says so.
fn realtime() -> String {
    let p = libc::sched_param { sched_priority: 10 };
    // SAFETY: sched_setscheduler on this process (pid 0) with a param struct on the stack.
    match unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) } {
        0 => "SCHED_FIFO 10".into(),
        _ => format!(
            "default scheduling: SCHED_FIFO refused: {}",
            std::io::Error::last_os_error()
        ),
    }
}

/// Run the relay until SIGTERM / SIGINT, then print what it did.
pub fn run(o: Args) -> ExitCode {
    let (a, b) = match (Raw::open(&o.a), Raw::open(&o.b)) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("vyrn lab-delay: {e}");
            return ExitCode::from(2);
        }
    };
    let stop = vyrn_nic::wait::stop_on_signals();
    let sched = realtime();
    let delay = std::time::Duration::from_micros(o.delay_us);
    let (mut ab, mut ba) = (Line::new(o.max_held), Line::new(o.max_held));
    let mut buf = vec![0u8; FRAME_MAX];
    println!(
        "vyrn lab-delay: {} <-> {}, {} µs each way ({sched})",
        o.a, o.b, o.delay_us
    );
    while !stop.load(Ordering::Relaxed) {
        ab.take(&a, &mut buf);
        ba.take(&b, &mut buf);
        let now = Instant::now();
        let next = [ab.release(&b, delay, now), ba.release(&a, delay, now)]
            .into_iter()
            .flatten()
            .min();
        // Sleep until the next departure, or a frame, or 100 ms (to see a stop signal).
        let wait = next.map_or(std::time::Duration::from_millis(100), |t| {
            t.saturating_duration_since(Instant::now())
        });
        let ts = libc::timespec {
            tv_sec: wait.as_secs() as libc::time_t,
            tv_nsec: wait.subsec_nanos() as libc::c_long,
        };
        let mut fds = [
            libc::pollfd {
                fd: a.fd,
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: b.fd,
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: ppoll over our two live fds with a timespec on the stack; no signal mask.
        unsafe { libc::ppoll(fds.as_mut_ptr(), 2, &ts, std::ptr::null()) };
    }
    println!(
        "vyrn lab-delay: {}",
        ab.summary(&format!("{} -> {}", o.a, o.b))
    );
    println!(
        "vyrn lab-delay: {}",
        ba.summary(&format!("{} -> {}", o.b, o.a))
    );
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::udp_checksum;

    /// An IPv4 UDP frame whose checksum the relay fills in must carry the checksum RFC 768
    /// gives: the one's-complement sum over the pseudo-header and the datagram, checked here by
    /// the receiver's rule (the sum with the checksum in place folds to 0xffff). Worked example:
    /// 10.77.1.1:40000 -> 239.255.75.1:27440, payload "vyrn".
    #[test]
    fn the_relay_fills_in_a_checksum_a_receiver_accepts() {
        let mut f = vec![0u8; 14 + 20 + 8 + 4];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        let ip = &mut f[14..34];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&32u16.to_be_bytes());
        ip[8] = 1;
        ip[9] = 17;
        ip[12..16].copy_from_slice(&[10, 77, 1, 1]);
        ip[16..20].copy_from_slice(&[239, 255, 75, 1]);
        let u = &mut f[34..];
        u[0..2].copy_from_slice(&40000u16.to_be_bytes());
        u[2..4].copy_from_slice(&47440u16.to_be_bytes());
        u[4..6].copy_from_slice(&12u16.to_be_bytes());
        u[6..8].copy_from_slice(&[0xde, 0xad]); // unfinished (offload)
        u[8..12].copy_from_slice(b"vyrn");
        udp_checksum(&mut f);
        let mut sum: u32 = 0;
        for c in f[26..34].chunks(2).chain(f[34..46].chunks(2)) {
            sum += u16::from_be_bytes([c[0], c[1]]) as u32;
        }
        sum += 17 + 12;
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        assert_eq!(sum, 0xffff, "checksum {:02x}{:02x}", f[40], f[41]);
        assert_ne!(&f[40..42], &[0xde, 0xad]);
        // Not UDP (ICMP): untouched.
        let mut g = f.clone();
        g[23] = 1;
        let before = g.clone();
        udp_checksum(&mut g);
        assert_eq!(g, before);
        // A fragment (offset set): untouched. Too short: untouched.
        let mut h = f.clone();
        h[20] = 0x00;
        h[21] = 0x10;
        let before = h.clone();
        udp_checksum(&mut h);
        assert_eq!(h, before);
        let mut short = f[..40].to_vec();
        let before = short.clone();
        udp_checksum(&mut short);
        assert_eq!(short, before);
    }
}
