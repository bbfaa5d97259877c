//! Every input a fuzzer once crashed on, replayed through the same harness as
//! `wire/fuzz/fuzz_targets/order_decoder.rs`, so the fix stays fixed without cargo-fuzz.

use vyrn_wire::corpus::read_capture;
use vyrn_wire::{DecState, Layout, NullSink};

fn order_decoder(data: &[u8]) {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let layout = match sel % 3 {
        0 => Layout::reference(),
        1 => Layout::two_streams(4),
        _ => Layout {
            n_lanes: 11,
            n_streams: 1,
            pool_mask: 0,
        },
    };
    let frames: Vec<&[u8]> = match read_capture(rest) {
        Ok(f) => f,
        Err(_) => rest.chunks(64).collect(),
    };
    let mut d = DecState::new(layout).expect("valid layout");
    for (i, f) in frames.iter().enumerate() {
        let before = [d.failed(0), d.failed(1)];
        if let Err(e) = d.on_frame(f, i as u64 * 1000, &mut NullSink) {
            if e.stream < layout.n_streams {
                let first = before[e.stream as usize].unwrap_or(e);
                assert_eq!(e, first, "errors are sticky per substream");
                assert_eq!(d.failed(e.stream), Some(e));
            }
        }
    }
    let _ = d.tick(u64::MAX);
}

#[test]
fn order_decoder_regressions() {
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/regressions/order_decoder");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).expect("regressions dir") {
        let p = e.expect("entry").path();
        order_decoder(&std::fs::read(&p).expect("read"));
        n += 1;
    }
    assert!(n > 0, "no regression inputs in {}", dir.display());
}

#[test]
fn seed_corpora_decode_cleanly() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/order_decoder");
    for e in std::fs::read_dir(&dir).expect("corpus dir") {
        let p = e.expect("entry").path();
        if !p
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("seed-"))
        {
            continue;
        }
        let data = std::fs::read(&p).unwrap();
        let layout = match data[0] % 3 {
            0 => Layout::reference(),
            1 => Layout::two_streams(4),
            _ => Layout {
                n_lanes: 11,
                n_streams: 1,
                pool_mask: 0,
            },
        };
        let mut d = DecState::new(layout).unwrap();
        for f in read_capture(&data[1..]).unwrap() {
            d.on_frame(f, 0, &mut NullSink)
                .unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        }
    }
}
