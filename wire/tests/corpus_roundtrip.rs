//! Generated corpora decode with no error, every record is accounted for, and every HEADER's
//! roots and signature check against what the decoder computed on its own.

use std::collections::HashMap;
use vyrn_wire::corpus::{generate, read_capture, CorpusConfig};
use vyrn_wire::*;

#[derive(Default)]
struct Tally {
    n_lanes: usize,
    pkts: u64,
    advances: u64,
    shed: u64,
    takes: u64,
    binds: u64,
    steps: u64,
    spanning: u64,
    by_kind: [u64; 9],
    blocks: HashMap<u64, BlockRoots>,
    headers: Vec<BlockHeader>,
    last_step: u64,
    hashes: u64,
    heartbeats: u64,
}

impl Sink for Tally {
    fn pkt(&mut self, _: Pos, r: &PacketRecord) {
        if r.is_advance() {
            self.advances += 1;
        } else {
            self.pkts += 1;
        }
        if r.is_shed() {
            self.shed += 1;
        }
    }
    fn take(&mut self, _: Pos, _: &AcctTake) {
        self.takes += 1;
    }
    fn bind(&mut self, _: Pos, _: &SessionBind) {
        self.binds += 1;
    }
    fn step(&mut self, s: &Step, cut: &[u64], _: &[u8]) {
        assert!(s.step > self.last_step, "steps in StepId order");
        assert_eq!(cut.len(), self.n_lanes);
        self.last_step = s.step;
        self.steps += 1;
        self.by_kind[s.kind as usize] += 1;
        if s.spans {
            self.spanning += 1;
        }
    }
    fn block(&mut self, b: &BlockRoots) {
        self.blocks.insert(b.height, *b);
    }
    fn header(&mut self, _: Pos, h: &BlockHeader) {
        self.headers.push(*h);
    }
    fn hash(&mut self, _: Pos, _: u8, _: &vyrn_wire::decoder::Awaiting, _: u64) {
        self.hashes += 1;
    }
    fn heartbeat(&mut self, _: Pos, _: &Heartbeat) {
        self.heartbeats += 1;
    }
}

fn check_seed(seed: u64, frames: usize, layout: Layout) {
    let mut cfg = CorpusConfig::reference(seed, frames);
    cfg.layout = layout;
    let c = generate(&cfg);
    let cap = c.capture();
    let frames = read_capture(&cap).expect("capture parses");
    assert_eq!(frames.len() as u64, c.stats.frames);
    let mut dec = DecState::new(layout).unwrap();
    let mut t = Tally {
        n_lanes: layout.n_lanes as usize,
        ..Default::default()
    };
    for f in frames {
        dec.on_frame(f, 0, &mut t)
            .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    }
    let s = c.stats;
    assert_eq!(t.pkts, s.pkts, "seed {seed}");
    assert_eq!(t.advances, s.advances);
    assert_eq!(t.shed, s.shed);
    assert_eq!(t.takes, s.takes);
    assert_eq!(t.binds, s.binds);
    assert_eq!(t.steps, s.steps, "seed {seed}");
    assert_eq!(t.spanning, s.spanning);
    assert_eq!(t.by_kind, s.by_kind);
    assert_eq!(t.hashes, s.pkts, "every packet got its hash");
    assert_eq!(t.heartbeats, s.heartbeats);
    assert_eq!(t.blocks.len() as u64, s.blocks);
    assert_eq!(t.headers, c.headers);
    let key = ed25519_dalek::VerifyingKey::from_bytes(&c.seq_pubkey).unwrap();
    let mut prev: Option<BlockHeader> = None;
    for h in &t.headers {
        let b = t
            .blocks
            .get(&h.height)
            .expect("block decoded for every header");
        assert_eq!(
            h.order_root, b.order_root,
            "seed {seed} height {}",
            h.height
        );
        assert_eq!(h.last_step, b.last_step);
        assert!(h.verify(&key));
        if let Some(p) = prev {
            assert_eq!(h.prev, p.header_hash());
            assert_eq!(h.first_step, p.last_step + 1);
            assert_eq!(h.height, p.height + 1);
        }
        prev = Some(*h);
    }
    for l in 0..layout.n_lanes as usize {
        assert_eq!(dec.awaiting_hash(l), 0);
    }
}

#[test]
fn reference_layout_many_seeds() {
    for seed in 0..40 {
        check_seed(seed, 400, Layout::reference());
    }
}

#[test]
fn long_corpus_covers_every_form() {
    let c = generate(&CorpusConfig::reference(7, 5000));
    let s = c.stats;
    assert!(
        s.by_kind.iter().all(|&k| k > 0),
        "every kind: {:?}",
        s.by_kind
    );
    assert!(
        s.by_mode.iter().all(|&k| k > 0),
        "every cut mode: {:?}",
        s.by_mode
    );
    assert!(
        s.exc.iter().all(|&k| k > 0),
        "SEQ_EXC, LSEQ_EXC, FA_NZ: {:?}",
        s.exc
    );
    assert!(s.spanning > 0 && s.shed > 0 && s.advances > 0 && s.takes > 0 && s.binds > 0);
    assert!(s.pads > 0 && s.heartbeats > 0 && s.blocks > 2);
    check_seed(7, 5000, Layout::reference());
}

#[test]
fn small_and_single_stream_layouts() {
    for seed in 100..110 {
        check_seed(seed, 300, Layout::two_streams(4));
        check_seed(
            seed,
            300,
            Layout {
                n_lanes: 11,
                n_streams: 1,
                pool_mask: 0,
            },
        );
        check_seed(
            seed,
            300,
            Layout {
                n_lanes: 64,
                n_streams: 2,
                pool_mask: 0xFF << 56,
            },
        );
    }
}
