//! The seal's `order_root` over a tail that spans BlockMarks (07 §9.4: each substream's ORDER
//! section bytes after `BlockMark(H*)` through `F*`, `H*` the newest signed header — a box that
//! died after closing a block whose header never came leaves such a tail). The replica's
//! `Decoder::seal_block` keeps the newest blocks' bytes (`front::failover::tail`); the
//! independent oracle decoder (`vyrn_sim::oracle::decode`, no `vyrn-wire` code) keeps every
//! byte by block. Over generated order streams cut at many points, for every `H*` up to four
//! blocks back, both give the same roots; with `H*` the last mark, the seal block is the
//! decoder's open block.

use vyrn_replica::front::decode::{DecodedOut, Decoder};
use vyrn_sim::oracle::decode::Oracle;
use vyrn_sim::oracle::twin::shape;
use vyrn_wire::corpus::{generate, CorpusConfig};
use vyrn_wire::Layout;

struct Quiet;
impl DecodedOut for Quiet {}

#[test]
fn the_seal_root_over_a_tail_spanning_marks_is_the_oracles() {
    let (mut spanning, mut checked) = (0, 0);
    for layout in [
        Layout::reference(),
        Layout::two_streams(4),
        Layout {
            n_lanes: 11,
            n_streams: 1,
            pool_mask: 0,
        },
    ] {
        for seed in 0..3 {
            let c = generate(&CorpusConfig {
                layout,
                ..CorpusConfig::reference(seed, 500)
            });
            let mut dec = Decoder::new(layout, 1).unwrap();
            let mut oracle = Oracle::new(shape(layout));
            for (k, f) in c.frames.iter().enumerate() {
                dec.on_frame(f, 0, &mut Quiet);
                oracle.frame(f).expect("a generated corpus decodes");
                assert!(dec.fault().is_none(), "{layout:?} seed {seed} frame {k}");
                if k % 5 != 0 {
                    continue;
                }
                let open = dec.open_height(0);
                for h in open.saturating_sub(4)..open {
                    // No anchor: every H* here is a mark the decoder took.
                    let Some(ob) = dec.seal_block(h, (u64::MAX, 0)) else {
                        continue;
                    };
                    checked += 1;
                    assert_eq!(ob.height, h + 1);
                    assert_eq!(
                        ob.order_root_a,
                        oracle.order_root_since(0, h),
                        "frame {k} H* {h}"
                    );
                    if layout.n_streams == 2 {
                        assert_eq!(ob.order_root_b, oracle.order_root_since(1, h), "frame {k}");
                    }
                    if h + 1 == open && dec.open_height(1).max(open) == open {
                        if let Some(o) = dec.open_block() {
                            assert_eq!(o, ob, "frame {k}: H* the last mark");
                        }
                    } else {
                        spanning += 1;
                    }
                }
            }
        }
    }
    println!("{checked} seal blocks checked, {spanning} spanning marks");
    assert!(
        spanning > 100 && checked > 300,
        "{checked} checked, {spanning} spanning"
    );
}
