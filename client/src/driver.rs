//! The thin I/O layer: move a set of sessions' transmits to a [`Port`] and the port's
//! received packets to the session they name. All protocol logic stays in
//! [`crate::Session`]; this only copies bytes and routes by the `session` field.

use std::collections::HashMap;

use vyrn_nic::{Dest, NicError, Port, TxPacket};

use crate::session::Session;

/// Transmits offered to the port per `send_batch` call.
const TX_CHUNK: usize = 32;
/// Packets taken from the port per `poll_recv` call.
const RX_CHUNK: usize = 64;

/// What the driver itself saw (each session has its own [`crate::Counters`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DriverCounters {
    /// Packets the port accepted.
    pub tx: u64,
    /// Packets the port refused with an error (dropped; the session's timers resend them).
    pub tx_errors: u64,
    /// Times the port took fewer packets than offered.
    pub tx_backpressure: u64,
    /// Packets received.
    pub rx: u64,
    /// Packets received for no session of this driver, or shorter than a session field.
    pub rx_unrouted: u64,
}

/// Drives sessions over one [`Port`] (copy 1 and copy 2 both leave by it, with explicit
/// destinations: [`Dest::Addr`]).
#[derive(Debug)]
pub struct Driver<P> {
    port: P,
    index: HashMap<u32, usize>,
    counters: DriverCounters,
}

impl<P: Port> Driver<P> {
    /// A driver for `sessions` (the slice later passed to every call, in the same order).
    pub fn new(port: P, sessions: &[Session]) -> Self {
        let index = sessions
            .iter()
            .enumerate()
            .map(|(i, s)| (s.id(), i))
            .collect();
        Driver {
            port,
            index,
            counters: DriverCounters::default(),
        }
    }

    /// The port.
    pub fn port(&self) -> &P {
        &self.port
    }

    /// The port, mutably.
    pub fn port_mut(&mut self) -> &mut P {
        &mut self.port
    }

    /// Counters.
    pub fn counters(&self) -> DriverCounters {
        self.counters
    }

    /// Send every queued transmit of every session, until the port pushes back.
    pub fn send(&mut self, sessions: &mut [Session]) -> usize {
        let mut total = 0;
        for s in sessions.iter_mut() {
            loop {
                let mut batch = [TxPacket::new(&[]); TX_CHUNK];
                let mut n = 0;
                for t in s.transmits().take(TX_CHUNK) {
                    batch[n] = TxPacket::to(t.bytes, Dest::Addr(t.dest));
                    n += 1;
                }
                if n == 0 {
                    break;
                }
                match self.port.send_batch(&batch[..n]) {
                    Ok(k) => {
                        s.consume_transmits(k);
                        self.counters.tx += k as u64;
                        total += k;
                        if k < n {
                            self.counters.tx_backpressure += 1;
                            break;
                        }
                    }
                    Err(_) => {
                        // The first packet cannot be sent at all: drop it, the timers recover.
                        s.consume_transmits(1);
                        self.counters.tx_errors += 1;
                    }
                }
            }
        }
        total
    }

    /// Receive what the port holds (up to `max` packets) into the sessions, at `now`.
    pub fn recv(
        &mut self,
        sessions: &mut [Session],
        now: u64,
        max: usize,
    ) -> Result<usize, NicError> {
        let mut got = 0;
        while got < max {
            let index = &self.index;
            let counters = &mut self.counters;
            let n = self.port.poll_recv(RX_CHUNK.min(max - got), &mut |pkt| {
                counters.rx += 1;
                let Some(id) = pkt.data.get(0..4) else {
                    counters.rx_unrouted += 1;
                    return;
                };
                let id = u32::from_le_bytes([id[0], id[1], id[2], id[3]]);
                match index.get(&id) {
                    Some(&i) => sessions[i].handle_packet(now, pkt.data),
                    None => counters.rx_unrouted += 1,
                }
            })?;
            if n == 0 {
                break;
            }
            got += n;
        }
        Ok(got)
    }

    /// One turn: receive, run every session's timers, send.
    pub fn pump(&mut self, sessions: &mut [Session], now: u64) -> Result<(), NicError> {
        self.recv(sessions, now, usize::MAX)?;
        for s in sessions.iter_mut() {
            s.poll(now);
        }
        self.send(sessions);
        Ok(())
    }
}
