//! The seal at a replica (07 §9.4): the seal header from the decoder's open block, the leader's
//! kind-1 proposal, and a voter's check of it against its own — over generated order streams
//! cut at many points (a sequencer that died there).

use vyrn_replica::front::failover::seal::{
    check_seal, frames_held, seal_header, seal_proposal, SealRefused, SignedTip,
};
use vyrn_wire::corpus::{generate, Corpus, CorpusConfig};
use vyrn_wire::decoder::{NullSink, OpenBlock};
use vyrn_wire::header::BlockHeader;
use vyrn_wire::msg::consensus::{ProposalKind, RepSealExt};
use vyrn_wire::{DecState, Layout};

const DATA_ROOT: [u8; 32] = [0xda; 32];

/// A decoder fed the first `k` frames of `c`.
fn decoded(c: &Corpus, k: usize) -> DecState {
    let mut d = DecState::new(Layout::reference()).unwrap();
    for f in &c.frames[..k] {
        d.on_frame(f, 0, &mut NullSink)
            .expect("a generated corpus decodes");
    }
    d
}

fn tip(c: &Corpus, open: &OpenBlock) -> Option<SignedTip> {
    let h: &BlockHeader = c.headers.iter().find(|h| h.height + 1 == open.height)?;
    Some(SignedTip {
        height: h.height,
        hash: h.header_hash(),
        last_step: h.last_step,
    })
}

fn ext(open: &OpenBlock) -> RepSealExt {
    RepSealExt {
        end_frame_seq: frames_held(open),
        next_seq: 0xFF,
        next_tenure: 1,
        unavail: Vec::new(),
    }
}

#[test]
fn every_voter_holding_the_prefix_computes_the_leaders_seal() {
    let c = generate(&CorpusConfig::reference(5, 900));
    let mut sealed = 0;
    for k in (40..c.frames.len()).step_by(7) {
        let leader = decoded(&c, k);
        let Some(open) = leader.open_block() else {
            continue;
        };
        let Some(t) = tip(&c, &open) else {
            continue;
        };
        let hdr = seal_header(1, 1, &t, &open, DATA_ROOT).unwrap();
        assert!(
            hdr.is_seal(),
            "seq_sig zero: the certificate stands in for it"
        );
        assert_eq!(hdr.prev, t.hash);
        assert_eq!(hdr.first_step, t.last_step + 1);
        let e = ext(&open);
        let parent_last = t.height.saturating_sub(3);
        let p = seal_proposal(parent_last, &hdr, &open, &e).unwrap();
        assert_eq!(p.kind, ProposalKind::Seal);
        assert_eq!(
            (p.first_height, p.last_height),
            (parent_last + 1, t.height + 1)
        );
        // A voter that decoded the same frames agrees.
        let voter = decoded(&c, k);
        let vo = voter.open_block().unwrap();
        let vh = seal_header(1, 1, &t, &vo, DATA_ROOT).unwrap();
        assert_eq!(check_seal(&p, &e, 1, &vh, &vo, (0xFF, 1)), Ok(()));
        // Another next sequencer: refused (07 §9.5).
        assert_eq!(
            check_seal(&p, &e, 1, &vh, &vo, (2, 1)),
            Err(SealRefused::NextSeq { want: 2, got: 0xFF })
        );
        // Another data_root (a payload resolved differently): another header.
        let other = seal_header(1, 1, &t, &vo, [0; 32]).unwrap();
        assert_eq!(
            check_seal(&p, &e, 1, &other, &vo, (0xFF, 1)),
            Err(SealRefused::LastHash)
        );
        sealed += 1;
    }
    assert!(sealed > 50, "seals checked: {sealed}");
}

#[test]
fn a_voter_short_of_the_prefix_or_past_it_cannot_agree() {
    let c = generate(&CorpusConfig::reference(9, 600));
    let mut checked = 0;
    for k in (60..c.frames.len() - 1).step_by(11) {
        let leader = decoded(&c, k);
        let Some(open) = leader.open_block() else {
            continue;
        };
        let Some(t) = tip(&c, &open) else {
            continue;
        };
        let hdr = seal_header(1, 1, &t, &open, DATA_ROOT).unwrap();
        let e = ext(&open);
        let p = seal_proposal(t.height, &hdr, &open, &e).unwrap();
        for j in [k - 1, k + 1] {
            let v = decoded(&c, j);
            let Some(vo) = v.open_block() else { continue };
            if frames_held(&vo) == frames_held(&open) {
                continue; // that frame was a HEADER or HASH frame of no substream change
            }
            let r = match seal_header(1, 1, &t, &vo, DATA_ROOT) {
                Ok(vh) => check_seal(&p, &e, 1, &vh, &vo, (0xFF, 1)),
                Err(e) => Err(e),
            };
            assert!(
                matches!(
                    r,
                    Err(SealRefused::Frames { .. } | SealRefused::OpenHeight { .. })
                ),
                "frames {j} against the leader's {k}: {r:?}"
            );
            checked += 1;
        }
    }
    assert!(checked > 20, "{checked}");
}

#[test]
fn the_seal_header_needs_the_open_block_after_its_tip() {
    let c = generate(&CorpusConfig::reference(2, 400));
    let d = decoded(&c, 300);
    let open = d.open_block().unwrap();
    let t = tip(&c, &open).unwrap();
    let early = SignedTip {
        height: t.height - 1,
        ..t
    };
    assert!(matches!(
        seal_header(1, 1, &early, &open, DATA_ROOT),
        Err(SealRefused::OpenHeight { .. })
    ));
    let gap = SignedTip {
        last_step: t.last_step + 1,
        ..t
    };
    assert_eq!(
        seal_header(1, 1, &gap, &open, DATA_ROOT),
        Err(SealRefused::StepGap)
    );
    let hdr = seal_header(1, 1, &t, &open, DATA_ROOT).unwrap();
    // A range past REP_MAX_SEAL_RANGE, or a parent past the seal.
    let e = ext(&open);
    assert_eq!(
        seal_proposal(0, &hdr, &open, &RepSealExt { ..e.clone() }).err(),
        (t.height + 1 > 64).then_some(SealRefused::Range)
    );
    assert_eq!(
        seal_proposal(t.height + 1, &hdr, &open, &e),
        Err(SealRefused::Range)
    );
    // The unavailable list is the data side's to check against what this replica holds
    // (`DataSide::check_unavail`, 07 §9.3 item 4; `replica/tests/next_tenure.rs`): the pure
    // check takes a seal that lists packets; a seal of another epoch is malformed.
    let p = seal_proposal(t.height, &hdr, &open, &e).unwrap();
    let mut u = e.clone();
    u.unavail = vec![vyrn_wire::msg::PktKey {
        session: 1,
        pkt_seq: 1,
    }];
    assert_eq!(check_seal(&p, &u, 1, &hdr, &open, (0xFF, 1)), Ok(()));
    assert_eq!(
        check_seal(&p, &u, 2, &hdr, &open, (0xFF, 1)),
        Err(SealRefused::Form)
    );
}
