//! T-REP-2 (07 §11, §15): two independent decoders of the order stream — `vyrn-wire`'s
//! `DecState` and `vyrn_sim::oracle::decode`, written from 07 §3 and the wire decisions alone —
//! fed the same frames give identical records, or identical error codes at the same frame.
//! Corpora: `wire::corpus` streams (every section kind, SHED, Advance, AcctTake, all cut modes,
//! spanning steps, marks, headers, heartbeats) on three layouts, whole and with bytes flipped,
//! cut short or dropped.

use proptest::prelude::*;
use vyrn_sim::oracle::twin::agree;
use vyrn_wire::corpus::{generate, CorpusConfig};
use vyrn_wire::{DecState, Layout, RepE};

fn layouts() -> [Layout; 3] {
    [
        Layout::reference(),
        Layout::two_streams(4),
        Layout {
            n_lanes: 11,
            n_streams: 1,
            pool_mask: 0,
        },
    ]
}

fn corpus(layout: Layout, seed: u64, frames: usize) -> Vec<Vec<u8>> {
    generate(&CorpusConfig {
        layout,
        ..CorpusConfig::reference(seed, frames)
    })
    .frames
}

/// Whole corpora: every record, step, mark, block root, hash and header identical.
#[test]
fn the_two_decoders_agree_on_whole_corpora() {
    for layout in layouts() {
        for seed in 0..4 {
            let frames = corpus(layout, seed, 600);
            agree(layout, &frames).unwrap_or_else(|e| panic!("{layout:?} seed {seed}: {e}"));
        }
    }
    // And the peak mix.
    let frames = generate(&CorpusConfig::peak(7, 400)).frames;
    agree(Layout::reference(), &frames).unwrap_or_else(|e| panic!("peak: {e}"));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// One byte changed anywhere: the same error at the same frame, or the same records.
    #[test]
    fn the_two_decoders_agree_on_a_flipped_byte(
        sel in 0usize..3, seed in 0u64..1000, at in any::<prop::sample::Index>(),
        pos in any::<prop::sample::Index>(), x in 1u8..=255,
    ) {
        let layout = layouts()[sel];
        let mut frames = corpus(layout, seed, 120);
        let i = at.index(frames.len());
        let p = pos.index(frames[i].len());
        frames[i][p] ^= x;
        prop_assert_eq!(agree(layout, &frames), Ok(()));
    }

    /// A frame cut short or dropped: the same error at the same frame.
    #[test]
    fn the_two_decoders_agree_on_a_short_or_missing_frame(
        sel in 0usize..3, seed in 0u64..1000, at in any::<prop::sample::Index>(),
        keep in any::<prop::sample::Index>(), drop in any::<bool>(),
    ) {
        let layout = layouts()[sel];
        let mut frames = corpus(layout, seed, 120);
        let i = at.index(frames.len());
        if drop {
            frames.remove(i);
        } else {
            let n = keep.index(frames[i].len());
            frames[i].truncate(n);
        }
        prop_assert_eq!(agree(layout, &frames), Ok(()));
    }
}

/// Every byte of one two-substream corpus changed in turn (XOR 0xFF, and the low bit): the
/// two decoders agree on every one of them.
#[test]
fn every_single_byte_change_of_one_corpus_is_decoded_alike() {
    let layout = layouts()[1];
    let base = corpus(layout, 415, 120);
    let mut bad = Vec::new();
    for i in 0..base.len() {
        for p in 0..base[i].len() {
            for x in [0xFFu8, 0x01] {
                let mut frames = base.clone();
                frames[i][p] ^= x;
                if let Err(e) = agree(layout, &frames) {
                    bad.push(format!("frame {i} byte {p} ^{x:#x}: {e}"));
                }
            }
        }
    }
    assert!(
        bad.is_empty(),
        "{} disagreements, first: {:?}",
        bad.len(),
        &bad[..bad.len().min(3)]
    );
}

/// Two defects of `wire`'s merge that the oracle found (07 §3.8), kept as regressions: a
/// substream carrying a record for a step the other substream's home record completed alone
/// (it was queued and blocked that substream's later steps for good: no error, no progress), and
/// a home record without OTHER whose step has a cut-only record queued on the other substream
/// (it was delivered on the fast path without the pair check). Both are REP_E_KIND now.
#[test]
fn a_step_carried_twice_or_a_cut_only_record_without_its_pair_is_rep_e_kind() {
    let layout = layouts()[1];
    for (fi, p, x) in [(3usize, 96usize, 0x01u8), (64, 94, 0x80)] {
        let mut frames = corpus(layout, 415, 120);
        frames[fi][p] ^= x;
        let mut d = DecState::new(layout).expect("layout");
        let first = frames
            .iter()
            .find_map(|f| d.on_frame(f, 0, &mut vyrn_wire::NullSink).err());
        assert_eq!(
            first.map(|e| e.code),
            Some(RepE::Kind),
            "frame {fi} byte {p}"
        );
        agree(layout, &frames).unwrap_or_else(|e| panic!("frame {fi} byte {p}: {e}"));
    }
}
