//! `DecState::open_block` (07 §9.4, the seal header's order-stream fields): after every frame of
//! generated corpora, the open block's roots are BLAKE3 over exactly the ORDER bytes the decoder
//! handed out for that height since the last BlockMark, its steps are the ones delivered, and its
//! lane bounds the last lane_seq of each lane seen.

use std::collections::BTreeMap;
use vyrn_wire::corpus::{generate, CorpusConfig};
use vyrn_wire::records::{BlockMark, TenureStart};
use vyrn_wire::*;

#[derive(Default)]
struct Watch {
    /// Per substream: (height, its ORDER bytes so far).
    bytes: [(u64, Vec<u8>); 2],
    last_step: u64,
    mark_step: [u64; 2],
    lanes: BTreeMap<u8, u64>,
}

impl Sink for Watch {
    fn order_bytes(&mut self, stream: u8, height: u64, b: &[u8]) {
        let s = &mut self.bytes[stream as usize];
        if s.0 != height {
            *s = (height, Vec::new());
        }
        s.1.extend_from_slice(b);
    }
    fn step(&mut self, s: &Step, _: &[u64], _: &[u8]) {
        self.last_step = s.step;
    }
    fn tenure(&mut self, at: Pos, t: &TenureStart) {
        self.mark_step[at.stream as usize] = t.first_step - 1;
    }
    fn mark(&mut self, at: Pos, m: &BlockMark, _: &[u64]) {
        self.mark_step[at.stream as usize] = m.last_step;
    }
    fn pkt(&mut self, _: Pos, r: &PacketRecord) {
        if r.count == 0 {
            return;
        }
        let last = r.first_lane_seq + r.count as u64 - 1;
        let e = self.lanes.entry(r.lane).or_insert(0);
        *e = (*e).max(last);
    }
}

fn root_of(w: &Watch, stream: usize, height: u64) -> [u8; 32] {
    let (h, b) = &w.bytes[stream];
    if *h == height {
        *blake3::hash(b).as_bytes()
    } else {
        // Nothing handed out for the open height yet on this substream.
        *blake3::hash(&[]).as_bytes()
    }
}

fn check(seed: u64) -> u64 {
    let c = generate(&CorpusConfig::reference(seed, 600));
    let mut dec = DecState::new(Layout::reference()).unwrap();
    let mut w = Watch::default();
    let mut seen = 0;
    for f in &c.frames {
        dec.on_frame(f, 0, &mut w)
            .expect("a generated corpus decodes");
        let Some(ob) = dec.open_block() else {
            continue;
        };
        seen += 1;
        assert_eq!(
            ob.order_root_a,
            root_of(&w, 0, ob.height),
            "seed {seed}: root A"
        );
        assert_eq!(
            ob.order_root_b,
            root_of(&w, 1, ob.height),
            "seed {seed}: root B"
        );
        assert_eq!(
            ob.order_root,
            vyrn_wire::header::order_root(&ob.order_root_a, &ob.order_root_b)
        );
        assert_eq!(ob.first_step, w.mark_step[0] + 1, "seed {seed}");
        assert_eq!(
            ob.last_step,
            w.last_step.max(ob.first_step - 1),
            "seed {seed}"
        );
        for (&lane, &last) in &w.lanes {
            // At least every numbered message seen (an Advance moves the lane on too; the
            // decoder checks this same state against every BlockMark's lane_bounds).
            assert!(
                ob.lane_bounds[lane as usize] >= last,
                "seed {seed}: lane {lane} bound {} below a record's {last}",
                ob.lane_bounds[lane as usize]
            );
        }
        assert_eq!(
            ob.next_frame_seq,
            [dec.next_frame_seq(0), dec.next_frame_seq(1)]
        );
    }
    seen
}

#[test]
fn the_open_block_is_what_the_decoder_handed_out_since_the_last_mark() {
    let mut seen = 0;
    for seed in 1..=12 {
        seen += check(seed);
    }
    assert!(seen > 1000, "open blocks checked: {seen}");
}

#[test]
fn a_decoder_with_no_tenure_has_no_open_block() {
    let dec = DecState::new(Layout::reference()).unwrap();
    assert_eq!(dec.open_block(), None);
}
