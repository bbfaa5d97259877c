//! Per data box (07 §5.3): data frames of this book and epoch only, `data_seq` gaps fetched by
//! `DataFetch::Range`, a silent box marked down, and each session's data home (07 §5.7).

use super::*;

#[derive(Debug, Default)]
pub(super) struct BoxRx {
    /// Newest DATA `data_seq` (or the one a heartbeat named).
    pub(super) hi: Option<u64>,
    /// Missing `data_seq` ranges, both ends included.
    pub(super) gaps: VecDeque<(u64, u64)>,
    pub(super) last_rx: Option<u64>,
    pub(super) down: bool,
    /// A frame of this box was seen since this replica started.
    pub(super) seen: bool,
}

impl BoxRx {
    /// Take `s` out of a gap; true if it was missing.
    pub(super) fn fill(&mut self, s: u64) -> bool {
        let Some(i) = self.gaps.iter().position(|&(a, b)| a <= s && s <= b) else {
            return false;
        };
        let (a, b) = self.gaps[i];
        match (a == s, b == s) {
            (true, true) => {
                self.gaps.remove(i);
            }
            (true, false) => self.gaps[i].0 = s + 1,
            (false, true) => self.gaps[i].1 = s - 1,
            (false, false) => {
                self.gaps[i].1 = s - 1;
                self.gaps.insert(i + 1, (s + 1, b));
            }
        }
        true
    }
}

impl DataSide {
    /// One data-frame datagram from data box `src_box` (the transport knows the sender). Returns
    /// the packets stored.
    pub fn on_data_frame(
        &mut self,
        src_box: u8,
        bytes: &[u8],
        now: u64,
        out: &mut impl DataOut,
    ) -> Result<usize, DataRefused> {
        let r = self.data_frame(src_box, bytes, now, out);
        if let Err(e) = r {
            self.c.refused[e.index()] += 1;
        }
        r
    }

    pub(super) fn data_frame(
        &mut self,
        src_box: u8,
        bytes: &[u8],
        now: u64,
        out: &mut impl DataOut,
    ) -> Result<usize, DataRefused> {
        let f = DataFrame::parse(bytes).map_err(DataRefused::Malformed)?;
        let h = f.header;
        if h.src != src_box || src_box as usize >= self.boxes.len() {
            return Err(DataRefused::BadSource);
        }
        if h.book != self.cfg.book {
            return Err(DataRefused::OtherBook);
        }
        if h.epoch16 != self.cfg.epoch16 {
            return Err(DataRefused::OtherEpoch);
        }
        let b = &mut self.boxes[src_box as usize];
        // 07 §5.3: a box seen again after down (a restart) starts a new data_seq baseline.
        let base = if b.down { None } else { b.hi };
        if let (Some(hi), DataKind::Data | DataKind::DataHb) = (base, h.kind) {
            if h.data_seq > hi && h.data_seq - hi > DATA_AHEAD_MAX {
                return Err(DataRefused::TooFarAhead);
            }
        }
        if b.down {
            b.down = false;
            b.hi = None;
            b.gaps.clear();
            self.c.box_up += 1;
            out.alarm(DataAlarm::BoxUp { d: src_box });
        }
        b.last_rx = Some(now);
        match h.kind {
            DataKind::Data | DataKind::DataHb => {
                let s = h.data_seq;
                let hb = h.kind == DataKind::DataHb;
                self.c.frames[if hb { 1 } else { 0 }] += 1;
                match b.hi {
                    None if !b.seen => {
                        // This replica started after the box (a restart, a late join): the
                        // frames before the first one it sees are a gap like any other, fetched
                        // by range (the newest GAP_FRAMES_MAX of them) — a bulk catch-up, not a
                        // fetch per record.
                        b.seen = true;
                        b.hi = Some(s);
                        let to = if hb { s } else { s.saturating_sub(1) };
                        if to >= 1 {
                            self.c.history_gaps += 1;
                            self.open_gap(src_box, 1, to, out);
                        }
                    }
                    None => b.hi = Some(s),
                    Some(hi) if s > hi => {
                        // A heartbeat names the last DATA frame: everything up to it is due.
                        let to = if hb { s } else { s - 1 };
                        if to > hi {
                            self.open_gap(src_box, hi + 1, to, out);
                        }
                        self.boxes[src_box as usize].hi = Some(s);
                    }
                    Some(_) if hb => {}
                    Some(_) => {
                        if b.fill(s) {
                            self.c.gap_filled += 1;
                        } else {
                            self.c.frames_stale += 1;
                        }
                    }
                }
            }
            DataKind::FetchResp => {
                self.c.frames[2] += 1;
                // data_seq 0: a key answer or evidence; else the frame of a range answer.
                if h.data_seq != 0 && b.fill(h.data_seq) {
                    self.c.gap_filled += 1;
                }
            }
        }
        let mut stored = 0;
        for pkt in f.packets() {
            if self.ingest(Source::Box(src_box), pkt, now, out).is_ok() {
                stored += 1;
            }
        }
        Ok(stored)
    }

    pub(super) fn open_gap(&mut self, d: u8, from: u64, to: u64, out: &mut impl DataOut) {
        if from > to {
            return;
        }
        self.c.gaps += 1;
        let mut from = from;
        if to - from >= GAP_FRAMES_MAX {
            from = to - GAP_FRAMES_MAX + 1;
            self.c.gap_clamped += 1;
        }
        let b = &mut self.boxes[d as usize];
        if b.gaps.len() >= GAPS_MAX {
            b.gaps.pop_front();
            self.c.gaps_dropped += 1;
        }
        b.gaps.push_back((from, to));
        // At most GAP_FRAMES_MAX / FETCH_RANGE_FRAMES requests, whatever the sender's numbers
        // (a `data_seq` near u64::MAX must not wrap the walk: issue F1 of the security review).
        let mut a = from;
        loop {
            let z = to.min(a.saturating_add(FETCH_RANGE_FRAMES - 1));
            self.c.gap_fetches += 1;
            out.data_fetch(d, &DataFetch::Range { from: a, to: z });
            if z >= to {
                break;
            }
            a = z + 1;
        }
    }

    /// The session's data home as this replica knows it (07 §5.1, §5.7).
    pub fn home(&self, session: u32) -> Option<u8> {
        self.homes.get(&session).copied()
    }

    /// 07 §5.7 `resend_from` for `session` as this replica sees it: the lowest `pkt_seq` of a
    /// live record it has not resolved, else one past the highest payload it stored (a packet
    /// sent to a failed box after that never reached it). Each replica sends its own; the data
    /// boxes relay a lower one again and the client resends the difference.
    pub fn resend_from(&self, session: u32) -> u32 {
        self.resend_points(&[session])[0].1
    }

    /// [`Self::resend_from`] of each of `sessions`, in their order, from one pass over the live
    /// records (a failover's round, not per packet).
    pub fn resend_points(&self, sessions: &[u32]) -> Vec<(u32, u32)> {
        let mut out: Vec<(u32, u32)> = sessions
            .iter()
            .map(|&s| (s, self.hi_seq.get(&s).map_or(1, |h| h.saturating_add(1))))
            .collect();
        let at: HashMap<u32, usize> = sessions.iter().enumerate().map(|(i, &s)| (s, i)).collect();
        for r in self.subs.iter().flat_map(|sub| sub.recs.iter()) {
            if !matches!(
                r.state,
                RecState::Missing | RecState::Mismatch | RecState::Unavailable
            ) {
                continue;
            }
            if let Some(&i) = at.get(&r.key.session) {
                out[i].1 = out[i].1.min(r.key.pkt_seq);
            }
        }
        out
    }
}
