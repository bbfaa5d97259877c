//! The load generator's core: many sessions, an open-loop schedule, a seeded
//! order mix, and latency histograms of request → answer, request → fill, fill → durable and
//! fill → final. The binary that runs it against a sequencer box comes with that box; this
//! module is driven by the caller's loop and clock:
//!
//! ```text
//! loop {
//!     now = clock();
//!     gen.submit_due(now, &mut sessions);      // every packet whose intended time ≤ now
//!     driver.pump(&mut sessions, now);         // send, receive, timers
//!     gen.drain_events(now, &mut sessions);    // events → histograms and counts
//!     if let Some(line) = gen.progress(now, &sessions) { println!("{line}"); }
//! }
//! ```

pub mod metrics;
pub mod misbehave;
pub mod mix;
pub mod ping;
pub mod run;
pub mod schedule;
pub mod stats;

use std::collections::HashMap;

use crate::session::{Event, ExecKind, OrderId, OrderReq, Session, SubmitError};
use mix::{Mix, OpKind, OrderGen, Prices};
use schedule::OpenLoop;
use stats::{progress_line, LatencyStats, Progress};

/// Load generator configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadConfig {
    /// Target messages per second, all sessions together.
    pub msgs_per_s: u64,
    /// Messages per request packet, 1..=10.
    pub msgs_per_pkt: u8,
    /// Seed of the order mix.
    pub seed: u64,
    /// The mix.
    pub mix: Mix,
    /// Prices and sizes.
    pub prices: Prices,
    /// Time of the first packet, ns on the caller's clock.
    pub start_ns: u64,
}

impl Default for LoadConfig {
    fn default() -> Self {
        LoadConfig {
            msgs_per_s: 10_000,
            msgs_per_pkt: 1,
            seed: 1,
            mix: Mix::default(),
            prices: Prices::default(),
            start_ns: 0,
        }
    }
}

/// Counts per message kind and outcome.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LoadCounts {
    /// Messages sent, by kind: resting GTC, crossing GTC, cancel, IOC.
    pub sent: [u64; 4],
    /// News answered.
    pub answered: u64,
    /// Fills received.
    pub fills: u64,
    /// Durable facts.
    pub durable: u64,
    /// Final facts.
    pub fin: u64,
    /// Fills a tenure's seal reverted (07 §9.6: `Event::Reverted`).
    pub reverted: u64,
    /// Submits refused by a session (the packet stays due and is retried).
    pub refused: u64,
}

fn kind_index(k: OpKind) -> usize {
    match k {
        OpKind::RestingGtc => 0,
        OpKind::CrossingGtc => 1,
        OpKind::Cancel => 2,
        OpKind::Ioc => 3,
    }
}

/// One New the generator follows until it ends.
#[derive(Debug, Clone, Copy)]
struct Track {
    intended: u64,
    placed: u32,
    answered: bool,
    filled: bool,
}

/// The load generator over a set of sessions (packets go round-robin over them).
#[derive(Debug)]
pub struct LoadGen {
    cfg: LoadConfig,
    gen: OrderGen,
    sched: OpenLoop,
    /// Live resting orders per session (cancel candidates).
    live: Vec<Vec<OrderId>>,
    /// News not yet ended.
    orders: HashMap<(usize, OrderId), Track>,
    /// Fills waiting for facts: receive time and fills at that step.
    fill_rx: HashMap<(usize, OrderId, u64), (u64, u32, u32)>,
    /// Latency histograms.
    pub stats: LatencyStats,
    /// Counts.
    pub counts: LoadCounts,
    next_progress_s: u64,
    sent_at_last_line: u64,
    /// When the newest answer came, and the longest time between two answers with its start
    /// (the outage a client saw: a failover's, 07 §9.7).
    last_answer: Option<u64>,
    longest_gap: (u64, u64),
}

impl LoadGen {
    /// A generator for `n_sessions` sessions.
    pub fn new(cfg: LoadConfig, n_sessions: usize) -> Self {
        assert!(
            (1..=10).contains(&cfg.msgs_per_pkt),
            "1..=10 messages per packet"
        );
        assert!(n_sessions > 0);
        let pkts_per_s = (cfg.msgs_per_s / cfg.msgs_per_pkt as u64).max(1);
        LoadGen {
            gen: OrderGen::new(cfg.seed, cfg.mix, cfg.prices),
            sched: OpenLoop::new(cfg.start_ns, pkts_per_s),
            live: vec![Vec::new(); n_sessions],
            orders: HashMap::new(),
            fill_rx: HashMap::new(),
            stats: LatencyStats::default(),
            counts: LoadCounts::default(),
            next_progress_s: 1,
            sent_at_last_line: 0,
            last_answer: None,
            longest_gap: (0, 0),
            cfg,
        }
    }

    /// The schedule.
    pub fn schedule(&self) -> &OpenLoop {
        &self.sched
    }

    /// Cancels drawn with nothing to cancel (sent as resting GTCs).
    pub fn cancel_fallbacks(&self) -> u64 {
        self.gen.cancel_fallbacks
    }

    /// Submit every packet whose intended time is ≤ `now`. A session that refuses one
    /// (retention or order table full) stops this round; the packet stays due, so the lag
    /// shows in the schedule and the latencies.
    pub fn submit_due(&mut self, now: u64, sessions: &mut [Session]) -> Result<(), SubmitError> {
        while let Some((k, intended)) = self.sched.due(now) {
            let i = (k % sessions.len() as u64) as usize;
            let mut reqs = [OrderReq::Cancel { order: 0 }; 10];
            let mut kinds = [OpKind::Cancel; 10];
            let n = self.cfg.msgs_per_pkt as usize;
            let mut cancelled = Vec::new();
            for j in 0..n {
                let (kind, r) = self.gen.next(&mut self.live[i]);
                if let OrderReq::Cancel { order } = r {
                    cancelled.push(order);
                }
                reqs[j] = r;
                kinds[j] = kind;
            }
            match sessions[i].submit(now, &reqs[..n]) {
                Ok(sub) => {
                    for (j, &kind) in kinds[..n].iter().enumerate() {
                        self.counts.sent[kind_index(kind)] += 1;
                        let id = sub.orders[j];
                        match kind {
                            OpKind::Cancel => {}
                            kind => {
                                self.orders.insert(
                                    (i, id),
                                    Track {
                                        intended,
                                        placed: sub.pkt_seq,
                                        answered: false,
                                        filled: false,
                                    },
                                );
                                if kind != OpKind::Ioc {
                                    self.live[i].push(id);
                                }
                            }
                        }
                    }
                }
                Err(SubmitError::RetentionFull) | Err(SubmitError::OrdersFull) => {
                    self.counts.refused += 1;
                    self.live[i].extend(cancelled);
                    self.sched.undo();
                    return Ok(());
                }
                Err(e) => {
                    self.live[i].extend(cancelled);
                    self.sched.undo();
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// Take every session's events at `now` into the histograms and counts.
    pub fn drain_events(&mut self, now: u64, sessions: &mut [Session]) {
        for (i, s) in sessions.iter_mut().enumerate() {
            while let Some(e) = s.poll_event() {
                self.on_event(i, now, &e);
            }
        }
    }

    /// One event of session `i`, received at `now`.
    pub fn on_event(&mut self, i: usize, now: u64, e: &Event) {
        match *e {
            Event::Exec(x) => {
                let key = (i, x.order);
                // Only records about the message that placed the order count as its answer;
                // a Cancel's answer names the order too, from another packet.
                let Some(o) = self.orders.get_mut(&key) else {
                    if let ExecKind::Fill { .. } = x.kind {
                        self.counts.fills += 1;
                    }
                    return;
                };
                let placing = o.placed == x.msg.pkt_seq;
                if placing && !o.answered {
                    o.answered = true;
                    self.stats.req_ack.record(now.saturating_sub(o.intended));
                    self.counts.answered += 1;
                    if let Some(l) = self.last_answer {
                        let gap = now.saturating_sub(l);
                        if gap > self.longest_gap.0 {
                            self.longest_gap = (gap, l);
                        }
                    }
                    self.last_answer = Some(now);
                }
                let end = match x.kind {
                    ExecKind::Fill { step, leaves, .. } => {
                        self.counts.fills += 1;
                        if !o.filled {
                            o.filled = true;
                            self.stats.req_fill.record(now.saturating_sub(o.intended));
                        }
                        let f = self
                            .fill_rx
                            .entry((i, x.order, step))
                            .or_insert((now, 0, 0));
                        f.1 += 1;
                        f.2 += 1;
                        leaves == 0
                    }
                    ExecKind::Out { .. } | ExecKind::CancelAck => true,
                    ExecKind::Reject { .. } | ExecKind::Busy => placing,
                    ExecKind::Ack => false,
                };
                if end {
                    self.retire(i, x.order);
                }
            }
            Event::Durable { order, step } => {
                self.counts.durable += 1;
                if let Some(f) = self.fill_rx.get_mut(&(i, order, step)) {
                    self.stats.fill_durable.record(now.saturating_sub(f.0));
                    f.1 = f.1.saturating_sub(1);
                }
            }
            Event::Reverted { order, step } => {
                self.counts.reverted += 1;
                let key = (i, order, step);
                if let Some(f) = self.fill_rx.get_mut(&key) {
                    f.1 = f.1.saturating_sub(1);
                    f.2 = f.2.saturating_sub(1);
                    if f.2 == 0 {
                        self.fill_rx.remove(&key);
                    }
                }
            }
            Event::Final { order, step, .. } => {
                self.counts.fin += 1;
                let key = (i, order, step);
                if let Some(f) = self.fill_rx.get_mut(&key) {
                    self.stats.fill_final.record(now.saturating_sub(f.0));
                    f.2 = f.2.saturating_sub(1);
                    if f.2 == 0 {
                        self.fill_rx.remove(&key);
                    }
                }
            }
            _ => {}
        }
    }

    fn retire(&mut self, i: usize, order: OrderId) {
        self.orders.remove(&(i, order));
        if let Some(k) = self.live[i].iter().position(|&o| o == order) {
            self.live[i].swap_remove(k);
        }
    }

    /// Every fill so far has its Durable and its Final fact (what an open-loop run waits for
    /// after its last send before it reports).
    pub fn settled(&self) -> bool {
        self.fill_rx.is_empty()
    }

    /// Fills received whose Durable fact has not come yet (per fill, not a difference of
    /// counts).
    pub fn fills_not_durable(&self) -> u64 {
        self.fill_rx.values().map(|f| f.1 as u64).sum()
    }

    /// Fills received whose Final fact has not come yet (per fill).
    pub fn fills_not_final(&self) -> u64 {
        self.fill_rx.values().map(|f| f.2 as u64).sum()
    }

    /// The progress line, once per second of `now − start` (else `None`).
    pub fn progress(&mut self, now: u64, sessions: &[Session]) -> Option<String> {
        let elapsed = now.saturating_sub(self.cfg.start_ns);
        if elapsed < self.next_progress_s * 1_000_000_000 {
            return None;
        }
        let secs = elapsed / 1_000_000_000;
        self.next_progress_s = secs + 1;
        let sent: u64 = self.counts.sent.iter().sum();
        let mut resends = 0;
        let mut bad = 0;
        for s in sessions {
            let c = s.counters();
            resends += c.resend_seq;
            bad += c.rx_bad_tag
                + c.rx_truncated
                + c.rx_malformed
                + c.rx_unknown_type
                + c.rx_wrong_session
                + c.rx_bad_echo;
        }
        let p = Progress {
            elapsed_s: secs,
            sent,
            sent_last_s: sent - self.sent_at_last_line,
            target_per_s: self.cfg.msgs_per_s,
            lag_max_ns: self.sched.lag_max_ns,
            answered: self.counts.answered,
            fills: self.counts.fills,
            durable: self.counts.durable,
            fin: self.counts.fin,
            resends,
            bad,
            refused: self.counts.refused,
        };
        self.sent_at_last_line = sent;
        Some(progress_line(&p, &self.stats))
    }
}

impl LoadGen {
    /// The end-of-run report: the four distributions (p50/p99/p99.9/max) and the counts.
    pub fn summary(&self) -> Vec<String> {
        let st = &self.stats;
        let mut out: Vec<String> = [
            ("request -> ack ", &st.req_ack),
            ("request -> fill", &st.req_fill),
            ("fill -> durable", &st.fill_durable),
            ("fill -> final  ", &st.fill_final),
        ]
        .iter()
        .map(|(name, l)| stats::fmt_percentiles(name, &l.percentiles()))
        .collect();
        let k = self.counts;
        out.push(format!(
            "sent {} (resting {}, crossing {}, cancel {}, IOC {}), answered {}, fills {}, durable {}, final {}, reverted {}, refused by sessions {}, fills not yet durable {}, not yet final {}",
            k.sent.iter().sum::<u64>(),
            k.sent[0],
            k.sent[1],
            k.sent[2],
            k.sent[3],
            k.answered,
            k.fills,
            k.durable,
            k.fin,
            k.reverted,
            k.refused,
            self.fills_not_durable(),
            self.fills_not_final()
        ));
        let (gap, from) = self.longest_gap;
        out.push(format!(
            "longest time with no answer: {:.1} ms, from {:.3} s into the run",
            gap as f64 / 1e6,
            from as f64 / 1e9
        ));
        out
    }

    /// The longest time between two answers (ns) and when it began (this run's clock, ns).
    pub fn longest_gap(&self) -> (u64, u64) {
        self.longest_gap
    }
}

/// Sessions for a load run: one per `(session, k_seq, k_out)`, copy 1 to `seq`, copy 2 to
/// `data`, with every resend timer set to `resend_ns` (a load generator sharing cores with the
/// box it drives wants more than the library's 5 ms default, or a stall becomes a resend
/// storm — `docs/seq.md`).
pub fn sessions_for(
    book: u16,
    keys: impl IntoIterator<
        Item = (
            u32,
            vyrn_wire::msg::client::SipKey,
            vyrn_wire::msg::client::SipKey,
        ),
    >,
    seq: std::net::SocketAddr,
    data: std::net::SocketAddr,
    resend_ns: u64,
) -> Result<Vec<Session>, crate::ConfigError> {
    sessions_homed(
        book,
        keys.into_iter().map(|(s, a, b)| (s, a, b, 0)),
        seq,
        vec![data],
        resend_ns,
    )
}

/// A session's `(session, K_seq, K_out, data home)`.
pub type HomedKeys = (
    u32,
    vyrn_wire::msg::client::SipKey,
    vyrn_wire::msg::client::SipKey,
    u8,
);

/// As [`sessions_for`], with the home's data boxes (client addresses in facility order) and
/// each session's data home (an index into them, 07 §5.1): copy 2 goes to the home, and a
/// `DataRedirect` (07 §5.7) moves it to the backup box.
pub fn sessions_homed(
    book: u16,
    keys: impl IntoIterator<Item = HomedKeys>,
    seq: std::net::SocketAddr,
    data_boxes: Vec<std::net::SocketAddr>,
    resend_ns: u64,
) -> Result<Vec<Session>, crate::ConfigError> {
    sessions_routed(book, keys, |_| seq, data_boxes, resend_ns)
}

/// As [`sessions_homed`], each session sending copy 1 to `seq_of(session)`: a REF box listens
/// for lane `l`'s sessions on `client_port + l` (its flow filter, 07 §9.5).
pub fn sessions_routed(
    book: u16,
    keys: impl IntoIterator<Item = HomedKeys>,
    seq_of: impl Fn(u32) -> std::net::SocketAddr,
    data_boxes: Vec<std::net::SocketAddr>,
    resend_ns: u64,
) -> Result<Vec<Session>, crate::ConfigError> {
    sessions_with(book, keys, seq_of, data_boxes, resend_ns, |_| {})
}

/// A session config `tweak` for [`sessions_with`]: every sent packet retained `ms` (at least
/// REP_CLIENT_RETAIN_MS, 07 §5.7), so a failover's resend (07 §9.5) can repeat every packet
/// with no response.
pub fn retention(ms: u64) -> impl Fn(&mut crate::SessionConfig) {
    let retain_ns = ms.max(vyrn_wire::consts::REP_CLIENT_RETAIN_MS) * 1_000_000;
    move |c| {
        c.retain_ns = retain_ns;
        c.gap_giveup_ns = c.gap_giveup_ns.max(2 * retain_ns);
    }
}

/// As [`sessions_routed`], each session's config finished by `tweak` (a longer retention, say:
/// a dev home's failover outlasts 07's 100 ms).
pub fn sessions_with(
    book: u16,
    keys: impl IntoIterator<Item = HomedKeys>,
    seq_of: impl Fn(u32) -> std::net::SocketAddr,
    data_boxes: Vec<std::net::SocketAddr>,
    resend_ns: u64,
    tweak: impl Fn(&mut crate::SessionConfig),
) -> Result<Vec<Session>, crate::ConfigError> {
    keys.into_iter()
        .map(|(session, k_seq, k_out, home)| {
            let mut c = crate::SessionConfig::new(
                book,
                session,
                k_seq,
                k_out,
                seq_of(session),
                data_boxes.clone(),
                home,
            );
            c.resend_after_ns = resend_ns;
            c.resend_gap_ns = resend_ns / 2;
            c.gap_resend_ns = resend_ns;
            tweak(&mut c);
            Session::new(c, 1, 0)
        })
        .collect()
}
