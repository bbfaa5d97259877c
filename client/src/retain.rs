//! Retention of sent request packets (07 §5.7: ≥ `REP_CLIENT_RETAIN_MS`), as one fixed ring of
//! slots indexed by `pkt_seq`.
//!
//! `pkt_seq` is gapless per session, so the retained packets are always one contiguous window
//! `[head, head + len)`, and the slot of `pkt_seq` is `pkt_seq % capacity`. Every slot is
//! allocated at construction; nothing is allocated afterwards. A packet leaves the window only
//! from the front, once it is older than the retention time and no transmit of it is queued.

use vyrn_wire::msg::client::MsgType;

use crate::packet::{MAX_MSGS, REQ_BUF};

/// One retained request packet and what the session knows about its answers.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Slot {
    pub pkt_seq: u32,
    pub len: u8,
    pub count: u8,
    /// The bytes as sent: the original until the first resend, the resend form after it.
    pub bytes: [u8; REQ_BUF],
    /// True once `bytes` carry `flags.resend` and the matching tag.
    pub resend_form: bool,
    /// When copy 1 and copy 2 were first queued.
    pub first_tx_ns: u64,
    /// When copy 1 was last queued.
    pub last_tx_ns: u64,
    /// Copy-1 resends (a packet resent once no longer times the round trip: Karn's rule).
    pub resends: u8,
    /// A copy-1 resend of it is out, neither answered nor timed out (counts in the window).
    pub in_flight: bool,
    /// A copy-1 resend is due but held back by the resend window.
    pub pending: bool,
    /// With `pending`: copy 1 was never sent (built while older resends were held back).
    pub held_first: bool,
    /// Bit `i`: message `i` has an answer.
    pub answered: u16,
    /// The `(epoch, tenure)` the session followed when an answer was last taken.
    pub answered_in: (u32, u8),
    /// A transmit of copy 1 / copy 2 of this packet waits in the outbox.
    pub queued: [bool; 2],
    /// Message kinds and `client_tag`s (a Cancel's tag names its target).
    pub kinds: [MsgType; MAX_MSGS],
    pub tags: [u32; MAX_MSGS],
}

impl Slot {
    const EMPTY: Slot = Slot {
        pkt_seq: 0,
        len: 0,
        count: 0,
        bytes: [0; REQ_BUF],
        resend_form: false,
        first_tx_ns: 0,
        last_tx_ns: 0,
        resends: 0,
        in_flight: false,
        pending: false,
        held_first: false,
        answered: 0,
        answered_in: (0, 0),
        queued: [false; 2],
        kinds: [MsgType::NewGtc; MAX_MSGS],
        tags: [0; MAX_MSGS],
    };

    /// Every message answered.
    pub fn fully_answered(&self) -> bool {
        let all = (1u16 << self.count) - 1;
        self.answered & all == all
    }

    /// The packet bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }
}

/// The ring of retained packets.
#[derive(Debug)]
pub(crate) struct Retention {
    slots: Box<[Slot]>,
    /// Oldest retained pkt_seq (the next to be sent when `len` is 0).
    head: u32,
    len: usize,
}

impl Retention {
    pub fn new(capacity: usize) -> Self {
        assert!(capacity >= 1);
        Retention {
            slots: vec![Slot::EMPTY; capacity].into_boxed_slice(),
            head: 1,
            len: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_full(&self) -> bool {
        self.len == self.slots.len()
    }

    /// Oldest retained pkt_seq; equals the next pkt_seq when empty.
    pub fn head(&self) -> u32 {
        self.head
    }

    /// One past the newest retained pkt_seq.
    pub fn end(&self) -> u32 {
        self.head + self.len as u32
    }

    fn idx(&self, pkt_seq: u32) -> usize {
        pkt_seq as usize % self.slots.len()
    }

    pub fn get(&self, pkt_seq: u32) -> Option<&Slot> {
        if pkt_seq < self.head || pkt_seq >= self.end() {
            return None;
        }
        let s = &self.slots[self.idx(pkt_seq)];
        debug_assert_eq!(s.pkt_seq, pkt_seq);
        Some(s)
    }

    pub fn get_mut(&mut self, pkt_seq: u32) -> Option<&mut Slot> {
        if pkt_seq < self.head || pkt_seq >= self.end() {
            return None;
        }
        let i = self.idx(pkt_seq);
        let s = &mut self.slots[i];
        debug_assert_eq!(s.pkt_seq, pkt_seq);
        Some(s)
    }

    /// The slot for the next pkt_seq (`end()`), cleared; the caller fills it. Panics when full
    /// (the session checks [`is_full`](Self::is_full) first).
    pub fn push(&mut self) -> &mut Slot {
        assert!(!self.is_full(), "retention full");
        let seq = self.end();
        self.len += 1;
        let i = self.idx(seq);
        let s = &mut self.slots[i];
        *s = Slot::EMPTY;
        s.pkt_seq = seq;
        s
    }

    /// The oldest slot, if any.
    pub fn front(&self) -> Option<&Slot> {
        self.get(self.head)
    }

    /// Drop the oldest slot.
    pub fn pop_front(&mut self) {
        assert!(self.len > 0);
        self.head += 1;
        self.len -= 1;
    }

    /// Start the window at `pkt_seq` (only while empty; a new session starts at 1).
    #[cfg(test)]
    pub fn restart_at(&mut self, pkt_seq: u32) {
        assert_eq!(self.len, 0);
        self.head = pkt_seq;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_wraps_and_stays_contiguous() {
        let mut r = Retention::new(4);
        for _ in 0..4 {
            r.push();
        }
        assert!(r.is_full());
        assert_eq!((r.head(), r.end()), (1, 5));
        r.pop_front();
        let s = r.push();
        assert_eq!(s.pkt_seq, 5);
        assert!(r.get(1).is_none());
        assert_eq!(r.get(5).unwrap().pkt_seq, 5);
        assert_eq!(r.get(2).unwrap().pkt_seq, 2);
        assert!(r.get(6).is_none());
        let mut e = Retention::new(2);
        e.restart_at(10);
        assert_eq!(e.push().pkt_seq, 10);
    }
}
