//! Shared helpers of the data box's integration tests: a config, keys, packets, a replica model.
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet, HashMap};

use vyrn_data::{DataConfig, DestConfig, RingConfig, SessionConfig};
use vyrn_nic::{Port, RxBatch, TxPacket};
use vyrn_wire::msg::client::{Msg, MsgType, Request, RequestPacket, Side, SipKey};
use vyrn_wire::msg::ctrl::DataFetch;
use vyrn_wire::msg::data::{DataFrame, DataKind};

/// The book every test session trades.
pub const BOOK: u16 = 7;
/// This box's index; boxes in facility order are [`BOXES`].
pub const INDEX: u8 = 1;
/// Data boxes of the home, in facility order.
pub const BOXES: [u8; 4] = [3, 1, 4, 2];

pub fn k_seq(session: u32) -> SipKey {
    let mut k = [0u8; 16];
    k[..4].copy_from_slice(&session.to_le_bytes());
    k[4] = 0x51;
    k
}

pub fn k_out(session: u32) -> SipKey {
    let mut k = [0u8; 16];
    k[..4].copy_from_slice(&session.to_le_bytes());
    k[4] = 0x0E;
    k
}

/// Session ids 100, 101, …; session `100 + i` is homed on `BOXES[i % 4]`.
pub fn sessions(n: u32) -> Vec<u32> {
    (0..n).map(|i| 100 + i).collect()
}

/// A config: `n_sessions` sessions, 4 voting destinations and a standby, a ring of `ring_pkts`.
pub fn config(n_sessions: u32, ring_pkts: u64) -> DataConfig {
    let mut c = DataConfig::new(INDEX, BOXES.to_vec(), vec![BOOK]);
    c.epoch = 0x0001_0002;
    c.sessions = sessions(n_sessions)
        .into_iter()
        .enumerate()
        .map(|(i, s)| SessionConfig {
            session: s,
            k_seq: k_seq(s),
            k_out: k_out(s),
            home: BOXES[i % 4],
            addr: None,
        })
        .collect();
    c.dests = ["R1", "R2", "R3", "R4", "standby"]
        .iter()
        .map(|n| DestConfig {
            name: n.to_string(),
            voter: *n != "standby",
        })
        .collect();
    c.ring = RingConfig {
        pkts_per_s: ring_pkts,
        seconds: 1,
        max_bytes: 1 << 30,
    };
    c
}

/// A valid request packet: `count` messages, `tag` varies the content.
pub fn packet(session: u32, pkt_seq: u32, count: usize, tag: u32, resend: bool) -> Vec<u8> {
    let msgs = (0..count)
        .map(|i| Msg {
            kind: MsgType::NewGtc,
            side: if i % 2 == 0 { Side::Buy } else { Side::Sell },
            tick: 1000 + i as i32,
            qty: 1 + pkt_seq % 50,
            client_tag: tag.wrapping_mul(16).wrapping_add(i as u32),
        })
        .collect();
    RequestPacket {
        book: BOOK,
        resend,
        session,
        pkt_seq,
        msgs,
    }
    .to_bytes(&k_seq(session))
    .expect("valid packet")
}

/// `(session, pkt_seq)` of a request packet.
pub fn key_of(pkt: &[u8]) -> (u32, u32) {
    let r = Request::parse(pkt).expect("stored packets parse");
    (r.session(), r.pkt_seq())
}

/// Send every packet through `port`, retrying on backpressure.
pub fn send_all(port: &mut dyn Port, pkts: &[Vec<u8>]) {
    for p in pkts {
        let mut tries = 0;
        while port.send_batch(&[TxPacket::new(p)]).expect("send") == 0 {
            tries += 1;
            assert!(tries < 1000, "port stuck");
        }
    }
}

/// A replica as far as the data tier goes (07 §5.3, §5.4): receives DATA, DATA_HB and
/// FETCH_RESP frames on its port, detects `data_seq` gaps and fetches them by range.
pub struct Replica {
    pub port: Box<dyn Port>,
    rx: RxBatch,
    /// data_seq → packets of that frame (from DATA or a range FETCH_RESP).
    pub frames: BTreeMap<u64, Vec<Vec<u8>>>,
    /// Highest data_seq named by any frame (DATA or DATA_HB).
    pub max_seq: u64,
    /// Empty FETCH_RESP frames (frames the box no longer has).
    pub gone: BTreeSet<u64>,
    /// Key fetch answers (data_seq 0).
    pub key_answers: Vec<Vec<u8>>,
    pub hb: u64,
    pub fetches_sent: u64,
    last_fetch_ns: u64,
}

impl Replica {
    pub fn new(port: Box<dyn Port>) -> Self {
        Replica {
            port,
            rx: RxBatch::new(64, 9216),
            frames: BTreeMap::new(),
            max_seq: 0,
            gone: BTreeSet::new(),
            key_answers: Vec::new(),
            hb: 0,
            fetches_sent: 0,
            last_fetch_ns: 0,
        }
    }

    /// Receive everything waiting; every frame must parse.
    pub fn recv(&mut self) {
        loop {
            let n = self.port.recv_batch(&mut self.rx).expect("recv");
            if n == 0 {
                return;
            }
            for p in self.rx.iter() {
                let f = DataFrame::parse(p.data).expect("box frames parse");
                assert_eq!(f.header.book, BOOK);
                assert_eq!(f.header.src, INDEX);
                assert_eq!(f.header.epoch16, 0x0002);
                let pkts: Vec<Vec<u8>> = f.packets().map(|b| b.to_vec()).collect();
                let seq = f.header.data_seq;
                match f.header.kind {
                    DataKind::DataHb => {
                        self.hb += 1;
                        self.max_seq = self.max_seq.max(seq);
                    }
                    DataKind::Data => {
                        assert!(!pkts.is_empty(), "DATA frames are never empty");
                        if let Some(old) = self.frames.get(&seq) {
                            assert_eq!(old, &pkts, "frame {seq} came twice with other bytes");
                        }
                        self.frames.insert(seq, pkts);
                        self.max_seq = self.max_seq.max(seq);
                    }
                    DataKind::FetchResp if seq == 0 => self.key_answers.extend(pkts),
                    DataKind::FetchResp => {
                        if pkts.is_empty() {
                            self.gone.insert(seq);
                        } else {
                            if let Some(old) = self.frames.get(&seq) {
                                assert_eq!(old, &pkts, "fetched frame {seq} differs");
                            }
                            self.frames.insert(seq, pkts);
                        }
                    }
                }
            }
        }
    }

    /// data_seqs in 1..=max_seq neither held nor known gone.
    pub fn missing(&self) -> Vec<u64> {
        (1..=self.max_seq)
            .filter(|s| !self.frames.contains_key(s) && !self.gone.contains(s))
            .collect()
    }

    /// Every `retry_ns`, ask for each missing run by `DataFetch::Range`.
    pub fn fetch_gaps(&mut self, now_ns: u64, retry_ns: u64) {
        if now_ns < self.last_fetch_ns + retry_ns {
            return;
        }
        self.last_fetch_ns = now_ns;
        let miss = self.missing();
        let mut i = 0;
        while i < miss.len() {
            let mut j = i;
            while j + 1 < miss.len() && miss[j + 1] == miss[j] + 1 && j - i < 63 {
                j += 1;
            }
            let m = DataFetch::Range {
                from: miss[i],
                to: miss[j],
            }
            .to_bytes()
            .unwrap();
            if self.port.send_batch(&[TxPacket::new(&m)]).unwrap_or(0) == 1 {
                self.fetches_sent += 1;
            }
            i = j + 1;
        }
    }

    /// Send one control message.
    pub fn send(&mut self, msg: &[u8]) {
        assert_eq!(self.port.send_batch(&[TxPacket::new(msg)]).unwrap(), 1);
    }

    /// Every packet received in DATA/range frames, by key, with the data_seq it came in.
    pub fn packets(&self) -> HashMap<(u32, u32), (u64, Vec<u8>)> {
        let mut m = HashMap::new();
        for (&seq, pkts) in &self.frames {
            for p in pkts {
                let k = key_of(p);
                if let Some((s, _)) = m.insert(k, (seq, p.clone())) {
                    panic!("{k:?} forwarded twice: frames {s} and {seq}");
                }
            }
        }
        m
    }
}
