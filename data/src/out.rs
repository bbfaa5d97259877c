//! The out queue: every byte the box sends waits here until the driver hands it to a port.
//!
//! A fixed pool of buffers of `REP_DATA_FRAME_MAX` bytes, allocated when the box is built.
//! A tile takes a free buffer ([`OutQueue::alloc`]), writes a message into it, and commits it
//! with its destination ([`OutQueue::commit`]); the driver reads committed messages in order
//! ([`OutQueue::get`]), records per port what it has sent ([`OutQueue::mark_sent`]) and frees
//! the front ones once every port has them ([`OutQueue::release_done`]). Nothing allocates after
//! construction, and a full queue is an answer (`None`), never a wait.
//!
//! Buffers are of two classes. `Data` (DATA and DATA_HB frames) may use every buffer; `Ctrl`
//! (fetch answers, `DataBadMac`, `CopyConflict` and its evidence, client relays) may hold at
//! most a quarter of them, so a flood of bad packets or fetches can never starve the fan-out.

use std::collections::VecDeque;
use std::net::SocketAddr;

use vyrn_wire::consts::REP_DATA_FRAME_MAX;

/// Where an out message goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum To {
    /// Every destination: DATA and DATA_HB frames (07 §5.2 fan-out, §5.3).
    Dests,
    /// One destination (by index): fetch answers (07 §5.3, §5.5).
    Dest(u16),
    /// The sequencer's control core: `DataBadMac`, `CopyConflict` and its evidence (07 §5.2).
    SeqCtrl,
    /// A client, at its bound address where the box knows one (07 §5.7 relays).
    Client(Option<SocketAddr>),
}

/// Buffer class (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// Data frames: any buffer.
    Data,
    /// Everything else: at most a quarter of the buffers.
    Ctrl,
}

/// Id of one buffer of the pool.
pub type BufId = u32;

/// The pool and the FIFO of committed messages.
#[derive(Debug)]
pub struct OutQueue {
    bufs: Box<[Vec<u8>]>,
    to: Box<[To]>,
    class: Box<[Class]>,
    /// Per buffer: bit `p` = port `p` has it (set by the driver).
    sent: Box<[u64]>,
    free: Vec<BufId>,
    ready: VecDeque<BufId>,
    ctrl_in_use: usize,
    ctrl_max: usize,
}

impl OutQueue {
    /// `n` buffers of `REP_DATA_FRAME_MAX` bytes.
    pub fn new(n: usize) -> Self {
        let n = n.max(4);
        OutQueue {
            bufs: (0..n)
                .map(|_| Vec::with_capacity(REP_DATA_FRAME_MAX))
                .collect(),
            to: vec![To::Dests; n].into_boxed_slice(),
            class: vec![Class::Data; n].into_boxed_slice(),
            sent: vec![0; n].into_boxed_slice(),
            free: (0..n as BufId).rev().collect(),
            ready: VecDeque::with_capacity(n),
            ctrl_in_use: 0,
            ctrl_max: n / 4,
        }
    }

    /// A free, empty buffer of `class`, or `None` when the pool (or the class's share) is used up.
    pub fn alloc(&mut self, class: Class) -> Option<BufId> {
        if class == Class::Ctrl && self.ctrl_in_use >= self.ctrl_max {
            return None;
        }
        let id = self.free.pop()?;
        if class == Class::Ctrl {
            self.ctrl_in_use += 1;
        }
        self.class[id as usize] = class;
        self.sent[id as usize] = 0;
        self.bufs[id as usize].clear();
        Some(id)
    }

    /// The buffer's bytes, to write into (capacity `REP_DATA_FRAME_MAX`; writing more would
    /// allocate, which no writer in this crate does).
    #[inline]
    pub fn buf_mut(&mut self, id: BufId) -> &mut Vec<u8> {
        &mut self.bufs[id as usize]
    }

    /// Queue the buffer for sending to `to`.
    pub fn commit(&mut self, id: BufId, to: To) {
        self.to[id as usize] = to;
        self.ready.push_back(id);
    }

    /// Give an allocated buffer back unsent.
    pub fn cancel(&mut self, id: BufId) {
        self.give_back(id);
    }

    fn give_back(&mut self, id: BufId) {
        if self.class[id as usize] == Class::Ctrl {
            self.ctrl_in_use -= 1;
        }
        self.free.push(id);
    }

    /// Committed messages waiting.
    pub fn len(&self) -> usize {
        self.ready.len()
    }

    /// True when nothing waits.
    pub fn is_empty(&self) -> bool {
        self.ready.is_empty()
    }

    /// Free buffers.
    pub fn free(&self) -> usize {
        self.free.len()
    }

    /// The `i`-th waiting message: its destination, bytes, and the ports that already have it.
    pub fn get(&self, i: usize) -> Option<(To, &[u8], u64)> {
        let id = *self.ready.get(i)? as usize;
        Some((self.to[id], &self.bufs[id], self.sent[id]))
    }

    /// Record that port `port` (< 64) has the `i`-th waiting message.
    pub fn mark_sent(&mut self, i: usize, port: usize) {
        if let Some(&id) = self.ready.get(i) {
            self.sent[id as usize] |= 1 << (port % 64);
        }
    }

    /// Free the front messages whose `sent` covers `need(to)`; returns how many.
    pub fn release_done(&mut self, mut need: impl FnMut(To) -> u64) -> usize {
        let mut n = 0;
        while let Some(&id) = self.ready.front() {
            let want = need(self.to[id as usize]);
            if self.sent[id as usize] & want != want {
                break;
            }
            self.ready.pop_front();
            self.give_back(id);
            n += 1;
        }
        n
    }

    /// Drop every waiting message (tests, shutdown).
    pub fn clear(&mut self) {
        while let Some(id) = self.ready.pop_front() {
            self.give_back(id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_queue_classes_and_order() {
        let mut q = OutQueue::new(8);
        // Ctrl may take 2 of 8.
        let a = q.alloc(Class::Ctrl).unwrap();
        let b = q.alloc(Class::Ctrl).unwrap();
        assert!(q.alloc(Class::Ctrl).is_none());
        q.buf_mut(a).extend_from_slice(b"a");
        q.commit(a, To::SeqCtrl);
        q.cancel(b);
        let mut ids = vec![];
        while let Some(id) = q.alloc(Class::Data) {
            ids.push(id);
        }
        assert_eq!(ids.len(), 7);
        for id in ids {
            q.buf_mut(id).push(id as u8);
            q.commit(id, To::Dests);
        }
        assert_eq!(q.len(), 8);
        assert_eq!(q.get(0).unwrap().1, b"a");
        // Port 1 = seq ctrl; ports 2,3 = dests.
        let need = |t: To| match t {
            To::SeqCtrl => 0b10,
            _ => 0b1100,
        };
        assert_eq!(q.release_done(need), 0);
        q.mark_sent(0, 1);
        q.mark_sent(1, 2);
        assert_eq!(q.release_done(need), 1);
        q.mark_sent(0, 3);
        assert_eq!(q.release_done(need), 1);
        assert_eq!(q.free(), 2);
        assert!(q.alloc(Class::Ctrl).is_some());
    }
}
