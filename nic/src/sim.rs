//! [`SimNet`]: the simulator's network — every UDP socket of a home, on one thread, in simulated
//! time, with the faults a seed draws.
//!
//! The roles open their sockets as they always do ([`crate::udp::UdpPort::open`]). On a thread
//! where the simulator has [`install`]ed a network, that call binds a *simulated* socket on it
//! instead of a kernel one — the FoundationDB pattern: the same role code, its network swapped
//! underneath (`vyrn-sim`). On every other thread, which is every thread of every production
//! process, nothing here is reached.
//!
//! What the network models:
//! - **Addresses**: a port binds an IPv4 address and port (0: the next ephemeral port, counted
//!   from [`EPHEMERAL_FIRST`], so runs are reproducible); a second bind of the same address is
//!   refused unless both set `SO_REUSEADDR`/`SO_REUSEPORT` (the multicast receivers of a path).
//! - **Unicast** to the port bound to that address (or to `0.0.0.0` on that port); **multicast**
//!   to every port that joined the group and bound its port. A datagram nobody is bound to is
//!   counted as `unrouted` and dropped, as the kernel would.
//! - **Time**: the driver sets [`SimNet::set_now`] before each poll; a datagram sent at `t`
//!   is received by the first `recv` at or after `t + delay`, in (arrival, send order) order.
//! - **Faults**: one [`Policy`] decides every hop (each receiver of a multicast separately):
//!   deliver after a delay, deliver twice, or drop (loss, partition). The policy is the
//!   simulator's; this module only applies it.
//! - **Trace**: every send, delivery and drop is folded into [`SimNet::trace`] (FNV-1a over the
//!   event: time, addresses, bytes), so two runs of one seed can be compared in one number.
//! - **Tap**: with [`SimNet::tap`] on, every datagram sent is also kept ([`Sent`]) for the
//!   simulator's invariant checkers, which drain it after each step.
//!
//! One lock per call (the sockets of a home are polled by one thread; the lock is uncontended
//! and exists because tiles are `Send`). Allocation per datagram: this is a test device.

use crate::{NicError, PortCounters, RxBatch, RxMeta, TsSource, TxStamp};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// The first ephemeral port a simulated bind of port 0 gets (then +1 per bind).
pub const EPHEMERAL_FIRST: u16 = 40_000;

/// One hop the policy decides: a datagram from `src` to one receiver `dst`.
#[derive(Debug, Clone, Copy)]
pub struct Hop<'a> {
    /// Simulated time of the send, ns.
    pub now: u64,
    /// The sender's address.
    pub src: SocketAddrV4,
    /// Where it was sent (a group for multicast).
    pub to: SocketAddrV4,
    /// The receiver: its host (a multicast receiver's join interface, else its bound
    /// address) and bound port.
    pub dst: SocketAddrV4,
    /// The datagram's number (send order, from 0; every receiver of a multicast sees the same
    /// number, so a policy can drop it on the whole path at once).
    pub id: u64,
    /// The bytes.
    pub data: &'a [u8],
}

/// What becomes of one hop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// Delivered after `delay` ns, `copies` times (2: duplicated; the second copy `dup_gap`
    /// ns after the first).
    Deliver {
        /// Latency, ns.
        delay: u64,
        /// 1, or 2 for a duplicate.
        copies: u8,
        /// Between the copies, ns.
        dup_gap: u64,
    },
    /// Lost (random loss, a path down).
    Lost,
    /// Cut off (a partition).
    Partitioned,
}

impl Fate {
    /// Delivered once after `delay` ns.
    pub const fn after(delay: u64) -> Fate {
        Fate::Deliver {
            delay,
            copies: 1,
            dup_gap: 0,
        }
    }
}

/// The simulator's fault policy: decides every hop.
pub type Policy = Box<dyn FnMut(&Hop<'_>) -> Fate + Send>;

/// A datagram as sent, for the simulator's checkers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sent {
    /// Simulated time of the send, ns.
    pub at: u64,
    /// The sender's address.
    pub src: SocketAddrV4,
    /// Its destination (a group for multicast).
    pub to: SocketAddrV4,
    /// The datagram's number (send order).
    pub id: u64,
    /// The bytes.
    pub data: Vec<u8>,
}

/// What the network did, in totals.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NetStats {
    /// Datagrams sent.
    pub sent: u64,
    /// Copies put in a receiver's queue.
    pub delivered: u64,
    /// Copies received by a port.
    pub received: u64,
    /// Extra copies (duplicates).
    pub duplicated: u64,
    /// Hops lost.
    pub lost: u64,
    /// Hops cut by a partition.
    pub partitioned: u64,
    /// Datagrams no port was bound to receive.
    pub unrouted: u64,
}

struct Ep {
    bind: SocketAddrV4,
    /// The host this port is on: the interface a multicast receiver joined on, else the bound
    /// address (what a policy sees as the hop's receiver).
    host: Ipv4Addr,
    groups: Vec<Ipv4Addr>,
    shared: bool,
    /// Its last port was dropped: it receives nothing and its address is free again.
    closed: bool,
    /// Arrival (ns, then delivery order) → source and bytes.
    queue: BTreeMap<(u64, u64), (SocketAddrV4, Vec<u8>)>,
}

struct Net {
    now: u64,
    next_port: u16,
    next_id: u64,
    order: u64,
    eps: Vec<Ep>,
    policy: Policy,
    trace: u64,
    events: u64,
    stats: NetStats,
    tap: Option<Vec<Sent>>,
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

impl Net {
    fn fold(&mut self, kind: u8, a: u64, b: SocketAddrV4, c: SocketAddrV4, data: &[u8]) {
        let mut h = self.trace;
        let mut eat = |bytes: &[u8]| {
            for &x in bytes {
                h ^= u64::from(x);
                h = h.wrapping_mul(FNV_PRIME);
            }
        };
        eat(&[kind]);
        eat(&a.to_le_bytes());
        eat(&b.ip().octets());
        eat(&b.port().to_le_bytes());
        eat(&c.ip().octets());
        eat(&c.port().to_le_bytes());
        eat(&(data.len() as u64).to_le_bytes());
        eat(data);
        self.trace = h;
        self.events += 1;
    }

    fn receivers(&self, to: SocketAddrV4) -> Vec<usize> {
        if to.ip().is_multicast() {
            return (0..self.eps.len())
                .filter(|&i| {
                    let e = &self.eps[i];
                    !e.closed && e.groups.contains(to.ip()) && e.bind.port() == to.port()
                })
                .collect();
        }
        let exact = (0..self.eps.len()).find(|&i| !self.eps[i].closed && self.eps[i].bind == to);
        let any = || {
            (0..self.eps.len()).find(|&i| {
                let b = self.eps[i].bind;
                !self.eps[i].closed && b.ip().is_unspecified() && b.port() == to.port()
            })
        };
        exact.or_else(any).into_iter().collect()
    }

    fn send(&mut self, from: usize, to: SocketAddrV4, data: &[u8]) {
        let src = self.eps[from].bind;
        let id = self.next_id;
        self.next_id += 1;
        self.stats.sent += 1;
        let now = self.now;
        self.fold(b's', now, src, to, data);
        if let Some(t) = self.tap.as_mut() {
            t.push(Sent {
                at: now,
                src,
                to,
                id,
                data: data.to_vec(),
            });
        }
        let rx = self.receivers(to);
        if rx.is_empty() {
            self.stats.unrouted += 1;
            self.fold(b'u', now, src, to, &[]);
            return;
        }
        for r in rx {
            let e = &self.eps[r];
            let dst = SocketAddrV4::new(e.host, e.bind.port());
            let hop = Hop {
                now,
                src,
                to,
                dst,
                id,
                data,
            };
            match (self.policy)(&hop) {
                Fate::Deliver {
                    delay,
                    copies,
                    dup_gap,
                } => {
                    for c in 0..copies.max(1) {
                        let at = now + delay + u64::from(c) * dup_gap;
                        self.order += 1;
                        let key = (at, self.order);
                        self.eps[r].queue.insert(key, (src, data.to_vec()));
                        self.stats.delivered += 1;
                        if c > 0 {
                            self.stats.duplicated += 1;
                        }
                        self.fold(b'd', at, src, dst, &[]);
                    }
                }
                Fate::Lost => {
                    self.stats.lost += 1;
                    self.fold(b'l', now, src, dst, &[]);
                }
                Fate::Partitioned => {
                    self.stats.partitioned += 1;
                    self.fold(b'p', now, src, dst, &[]);
                }
            }
        }
    }
}

/// The simulated network of one home. Share it as `Arc<SimNet>`.
pub struct SimNet {
    inner: Mutex<Net>,
}

impl std::fmt::Debug for SimNet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.lock();
        f.debug_struct("SimNet")
            .field("now", &n.now)
            .field("ports", &n.eps.len())
            .field("stats", &n.stats)
            .finish()
    }
}

impl SimNet {
    /// A network with no ports, at time 0, deciding every hop with `policy`.
    pub fn new(policy: Policy) -> Arc<SimNet> {
        Arc::new(SimNet {
            inner: Mutex::new(Net {
                now: 0,
                next_port: EPHEMERAL_FIRST,
                next_id: 0,
                order: 0,
                eps: Vec::new(),
                policy,
                trace: FNV_OFFSET,
                events: 0,
                stats: NetStats::default(),
                tap: None,
            }),
        })
    }

    /// A network that delivers every datagram after `delay` ns.
    pub fn perfect(delay: u64) -> Arc<SimNet> {
        Self::new(Box::new(move |_| Fate::after(delay)))
    }

    fn lock(&self) -> MutexGuard<'_, Net> {
        // Every mutation is complete before the lock is released; a poisoned lock is usable.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Set simulated time (ns); time never goes back (an earlier value is ignored).
    pub fn set_now(&self, now: u64) {
        let mut n = self.lock();
        n.now = n.now.max(now);
    }

    /// Simulated time, ns.
    pub fn now(&self) -> u64 {
        self.lock().now
    }

    /// Replace the fault policy.
    pub fn set_policy(&self, policy: Policy) {
        self.lock().policy = policy;
    }

    /// Keep (or stop keeping) every datagram sent, for [`SimNet::drain_tap`].
    pub fn tap(&self, on: bool) {
        self.lock().tap = on.then(Vec::new);
    }

    /// The datagrams sent since the last drain (with the tap on).
    pub fn drain_tap(&self, out: &mut Vec<Sent>) {
        if let Some(t) = self.lock().tap.as_mut() {
            out.append(t);
        }
    }

    /// The run's trace: a hash of every event so far, and how many.
    pub fn trace(&self) -> (u64, u64) {
        let n = self.lock();
        (n.trace, n.events)
    }

    /// The network's totals.
    pub fn stats(&self) -> NetStats {
        self.lock().stats
    }

    /// Every open port with datagrams still queued: its host and port, how many, the earliest
    /// arrival (ns). What nobody read by the end of a run.
    pub fn queued(&self) -> Vec<(SocketAddrV4, usize, u64)> {
        let n = self.lock();
        n.eps
            .iter()
            .filter(|e| !e.closed && !e.queue.is_empty())
            .map(|e| {
                let first = e.queue.keys().next().map_or(0, |k| k.0);
                (
                    SocketAddrV4::new(e.host, e.bind.port()),
                    e.queue.len(),
                    first,
                )
            })
            .collect()
    }

    /// The earliest arrival still queued at any port (ns), if any: when the driver next has
    /// network work.
    pub fn next_arrival(&self) -> Option<u64> {
        let n = self.lock();
        n.eps
            .iter()
            .filter_map(|e| e.queue.keys().next().map(|k| k.0))
            .min()
    }

    /// Bind a port (see the module docs). `join`: the group it receives and the interface it
    /// joined on; `shared`: `SO_REUSEADDR`/`SO_REUSEPORT`.
    pub(crate) fn bind(
        self: &Arc<Self>,
        bind: SocketAddr,
        join: Option<(Ipv4Addr, Ipv4Addr)>,
        shared: bool,
    ) -> Result<SimSock, NicError> {
        let SocketAddr::V4(mut bind) = bind else {
            return Err(NicError::AddressFamily);
        };
        let mut n = self.lock();
        if bind.port() == 0 {
            bind.set_port(n.next_port);
            n.next_port = n.next_port.checked_add(1).ok_or(NicError::Io {
                op: "bind",
                errno: libc::EADDRINUSE,
            })?;
        } else if n
            .eps
            .iter()
            .any(|e| !e.closed && e.bind == bind && !(e.shared && shared))
        {
            return Err(NicError::Io {
                op: "bind",
                errno: libc::EADDRINUSE,
            });
        }
        n.eps.push(Ep {
            bind,
            host: join.map_or(*bind.ip(), |j| j.1),
            groups: join.map(|j| j.0).into_iter().collect(),
            shared,
            closed: false,
            queue: BTreeMap::new(),
        });
        Ok(SimSock(Arc::new(Bound {
            net: self.clone(),
            ep: n.eps.len() - 1,
        })))
    }
}

/// One bound simulated socket (shared by a port and its clones, as a `dup`ed fd is; closed
/// when the last goes).
#[derive(Clone)]
pub(crate) struct SimSock(Arc<Bound>);

pub(crate) struct Bound {
    net: Arc<SimNet>,
    ep: usize,
}

impl Drop for Bound {
    fn drop(&mut self) {
        let mut n = self.net.lock();
        let e = &mut n.eps[self.ep];
        e.closed = true;
        e.queue.clear();
    }
}

impl std::ops::Deref for SimSock {
    type Target = Bound;
    fn deref(&self) -> &Bound {
        &self.0
    }
}

impl std::fmt::Debug for SimSock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SimSock({})", self.local())
    }
}

impl SimSock {
    pub(crate) fn local(&self) -> SocketAddrV4 {
        self.net.lock().eps[self.ep].bind
    }

    /// Send each datagram to its address; returns how many, and the send time.
    pub(crate) fn send(
        &self,
        pkts: &mut dyn Iterator<Item = (SocketAddr, &[u8])>,
        counters: &mut PortCounters,
    ) -> Result<(usize, TxStamp), NicError> {
        let mut n = self.net.lock();
        let now = n.now;
        let mut sent = 0usize;
        for (to, data) in pkts {
            let SocketAddr::V4(to) = to else {
                if sent == 0 {
                    return Err(NicError::AddressFamily);
                }
                break;
            };
            n.send(self.ep, to, data);
            sent += 1;
            counters.tx_packets += 1;
            counters.tx_bytes += data.len() as u64;
        }
        if sent > 0 {
            counters.tx_calls += 1;
        }
        let stamp = TxStamp {
            before_ns: now,
            after_ns: now,
            packets: u32::try_from(sent).unwrap_or(u32::MAX),
        };
        Ok((sent, stamp))
    }

    /// Move up to `limit` datagrams that have arrived by now into `batch` (cleared first).
    pub(crate) fn recv(
        &self,
        batch: &mut RxBatch,
        limit: usize,
        counters: &mut PortCounters,
    ) -> usize {
        batch.clear();
        let limit = limit.min(batch.capacity());
        let mut guard = self.net.lock();
        let n = &mut *guard;
        let now = n.now;
        while batch.len() < limit {
            let Some((&key, _)) = n.eps[self.ep].queue.first_key_value() else {
                break;
            };
            if key.0 > now {
                break;
            }
            let Some((_, (src, data))) = n.eps[self.ep].queue.pop_first() else {
                break;
            };
            let meta = RxMeta {
                src: Some(SocketAddr::V4(src)),
                ts_ns: now,
                ts_source: TsSource::User,
            };
            match batch.push_copy(&data, meta) {
                Ok(()) => {
                    counters.rx_packets += 1;
                    counters.rx_bytes += data.len() as u64;
                }
                Err(_) => counters.rx_truncated += 1,
            }
            n.stats.received += 1;
        }
        if !batch.is_empty() {
            counters.rx_calls += 1;
        }
        batch.len()
    }

    /// A datagram has arrived and waits.
    pub(crate) fn readable(&self) -> bool {
        let n = self.net.lock();
        let now = n.now;
        n.eps[self.ep]
            .queue
            .keys()
            .next()
            .is_some_and(|k| k.0 <= now)
    }
}

thread_local! {
    static INSTALLED: RefCell<Option<Arc<SimNet>>> = const { RefCell::new(None) };
}

/// While this guard lives, ports opened on this thread bind on the simulated network.
#[derive(Debug)]
#[must_use = "the network is uninstalled when the guard drops"]
pub struct Installed {
    prev: Option<Arc<SimNet>>,
}

impl Drop for Installed {
    fn drop(&mut self) {
        let prev = self.prev.take();
        INSTALLED.with(|c| *c.borrow_mut() = prev);
    }
}

/// Make `net` the network of ports opened on this thread until the guard drops.
pub fn install(net: &Arc<SimNet>) -> Installed {
    let prev = INSTALLED.with(|c| c.borrow_mut().replace(net.clone()));
    Installed { prev }
}

/// The network installed on this thread, if any.
pub fn installed() -> Option<Arc<SimNet>> {
    INSTALLED.with(|c| c.borrow().clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::udp::{UdpConfig, UdpPort};
    use crate::{Dest, Port, TxPacket};

    fn v4(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    /// Unicast and multicast reach exactly their receivers, after the delay, with the sender's
    /// address; nothing arrives early.
    #[test]
    fn datagrams_reach_their_receivers_after_the_delay() {
        let net = SimNet::perfect(1_000);
        let _g = install(&net);
        let mut a = UdpPort::open(&UdpConfig::new(v4("10.0.0.1:5000"))).unwrap();
        let mut b = UdpPort::open(&UdpConfig::new(v4("10.0.0.2:0"))).unwrap();
        let g = Ipv4Addr::new(239, 1, 1, 1);
        let mut m1 = UdpPort::open(&UdpConfig::multicast_receiver_on(
            g,
            7000,
            Ipv4Addr::new(10, 0, 0, 3),
        ))
        .unwrap();
        let mut m2 = UdpPort::open(&UdpConfig::multicast_receiver_on(
            g,
            7000,
            Ipv4Addr::new(10, 0, 0, 4),
        ))
        .unwrap();
        assert_eq!(b.local_addr().unwrap(), v4("10.0.0.2:40000"));
        let to_a = TxPacket {
            data: b"hi",
            dest: Dest::Addr(v4("10.0.0.1:5000")),
        };
        let to_g = TxPacket {
            data: b"all",
            dest: Dest::Addr(v4("239.1.1.1:7000")),
        };
        assert_eq!(b.send_batch(&[to_a, to_g]).unwrap(), 2);
        let mut rx = RxBatch::new(8, 64);
        assert_eq!(a.recv_batch(&mut rx).unwrap(), 0, "not before its delay");
        net.set_now(1_000);
        assert_eq!(a.recv_batch(&mut rx).unwrap(), 1);
        let p = rx.iter().next().unwrap();
        assert_eq!(
            (p.data, p.meta.src),
            (&b"hi"[..], Some(v4("10.0.0.2:40000")))
        );
        assert_eq!(m1.recv_batch(&mut rx).unwrap(), 1);
        assert_eq!(m2.recv_batch(&mut rx).unwrap(), 1);
        assert_eq!(rx.iter().next().unwrap().data, b"all");
        assert_eq!(b.recv_batch(&mut rx).unwrap(), 0);
        let s = net.stats();
        assert_eq!((s.sent, s.delivered, s.received, s.unrouted), (2, 3, 3, 0));
        // A second bind of a fixed address is refused (not shared); dropping the port (and its
        // clones) frees it, and nothing more reaches it.
        assert!(UdpPort::open(&UdpConfig::new(v4("10.0.0.1:5000"))).is_err());
        let clone = a.try_clone().unwrap();
        drop(a);
        assert!(UdpPort::open(&UdpConfig::new(v4("10.0.0.1:5000"))).is_err());
        drop(clone);
        drop(m2);
        b.send_batch(&[to_g]).unwrap();
        net.set_now(2_000);
        assert_eq!(m1.recv_batch(&mut rx).unwrap(), 1);
        assert_eq!(net.stats().delivered, 4, "a closed receiver gets nothing");
        assert!(UdpPort::open(&UdpConfig::new(v4("10.0.0.1:5000"))).is_ok());
    }

    /// The policy's fates: loss, duplication, partition; and the trace is a function of the
    /// events alone.
    #[test]
    fn the_policy_decides_every_hop_and_the_trace_repeats() {
        let run = || {
            let net = SimNet::new(Box::new(|h: &Hop<'_>| match h.id % 3 {
                0 => Fate::Lost,
                1 => Fate::Deliver {
                    delay: 10,
                    copies: 2,
                    dup_gap: 5,
                },
                _ => Fate::Partitioned,
            }));
            let _g = install(&net);
            let mut a = UdpPort::open(&UdpConfig::new(v4("10.0.0.1:1"))).unwrap();
            let mut b =
                UdpPort::open(&UdpConfig::new(v4("10.0.0.2:1")).with_dest(v4("10.0.0.1:1")))
                    .unwrap();
            for i in 0..6u8 {
                b.send_batch(&[TxPacket {
                    data: &[i],
                    dest: Dest::Default,
                }])
                .unwrap();
            }
            net.set_now(100);
            let mut rx = RxBatch::new(16, 8);
            a.recv_batch(&mut rx).unwrap();
            let got: Vec<u8> = rx.iter().map(|p| p.data[0]).collect();
            (got, net.stats(), net.trace())
        };
        let (got, s, t) = run();
        assert_eq!(
            got,
            vec![1, 4, 1, 4],
            "by arrival: each first copy, then each duplicate"
        );
        assert_eq!((s.lost, s.partitioned, s.duplicated), (2, 2, 2));
        assert_eq!(run().2, t, "one schedule, one trace");
    }

    /// Without an installed network, ports are the kernel's.
    #[test]
    fn without_a_network_ports_are_kernel_sockets() {
        assert!(installed().is_none());
        let p = UdpPort::open(&UdpConfig::loopback()).unwrap();
        assert!(p.wait_fd().is_some());
        let net = SimNet::perfect(0);
        {
            let _g = install(&net);
            let q = UdpPort::open(&UdpConfig::loopback()).unwrap();
            assert!(q.wait_fd().is_none());
        }
        assert!(installed().is_none());
    }
}
