//! Golden captures pin the order-stream format: each `golden/<name>.cap` is a generated corpus
//! whose BLAKE3, and the BLAKE3 of its decoded records, are pinned in `golden/MANIFEST`. A
//! change to an encoder, the decoder's output or the generator fails here. Regenerating is an
//! explicit approval of the new format: `VYRN_BLESS=1 cargo test -p vyrn-wire --test golden_captures`.

use std::fmt::Write as _;
use std::path::PathBuf;
use vyrn_wire::corpus::{generate, read_capture, CorpusConfig};
use vyrn_wire::decoder::Awaiting;
use vyrn_wire::*;

struct Case {
    name: &'static str,
    seed: u64,
    frames: usize,
    layout: Layout,
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "ref-seed1",
            seed: 1,
            frames: 600,
            layout: Layout::reference(),
        },
        Case {
            name: "ref-seed2",
            seed: 2,
            frames: 600,
            layout: Layout::reference(),
        },
        Case {
            name: "dev4-seed3",
            seed: 3,
            frames: 400,
            layout: Layout::two_streams(4),
        },
        Case {
            name: "consumer11-seed4",
            seed: 4,
            frames: 400,
            layout: Layout {
                n_lanes: 11,
                n_streams: 1,
                pool_mask: 0,
            },
        },
    ]
}

/// Hashes a canonical text form of every decoded record.
struct Digest(blake3::Hasher, String);

impl Digest {
    fn put(&mut self, s: std::fmt::Arguments<'_>) {
        self.1.clear();
        let _ = self.1.write_fmt(s);
        self.0.update(self.1.as_bytes());
        self.0.update(b"\n");
    }
}

impl Sink for Digest {
    fn tenure(&mut self, at: Pos, t: &TenureStart) {
        self.put(format_args!("{at:?} {t:?}"));
    }
    fn pkt(&mut self, at: Pos, r: &PacketRecord) {
        self.put(format_args!("{at:?} {r:?}"));
    }
    fn take(&mut self, at: Pos, t: &AcctTake) {
        self.put(format_args!("{at:?} {t:?}"));
    }
    fn bind(&mut self, at: Pos, b: &SessionBind) {
        self.put(format_args!("{at:?} {b:?}"));
    }
    fn step(&mut self, s: &Step, cut: &[u64], payload: &[u8]) {
        self.put(format_args!("{s:?} {cut:?} {payload:?}"));
    }
    fn mark(&mut self, at: Pos, m: &BlockMark, b: &[u64]) {
        self.put(format_args!("{at:?} {m:?} {b:?}"));
    }
    fn block(&mut self, b: &BlockRoots) {
        self.put(format_args!("{b:?}"));
    }
    fn hash(&mut self, at: Pos, lane: u8, rec: &Awaiting, h: u64) {
        self.put(format_args!(
            "{at:?} {lane} {} {} {} {h:x}",
            rec.session, rec.pkt_seq, rec.first_lane_seq
        ));
    }
    fn header(&mut self, at: Pos, h: &BlockHeader) {
        self.put(format_args!("{at:?} {h:?}"));
    }
    fn heartbeat(&mut self, at: Pos, hb: &Heartbeat) {
        self.put(format_args!("{at:?} {hb:?}"));
    }
}

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

fn decoded_digest(cap: &[u8], layout: Layout) -> String {
    let mut d = DecState::new(layout).unwrap();
    let mut g = Digest(blake3::Hasher::new(), String::new());
    for f in read_capture(cap).unwrap() {
        d.on_frame(f, 0, &mut g).unwrap();
    }
    g.0.finalize().to_hex().to_string()
}

#[test]
fn golden_captures_are_pinned() {
    let bless = std::env::var_os("VYRN_BLESS").is_some();
    let manifest_path = dir().join("MANIFEST");
    let mut manifest = String::from(
        "# name seed frames capture_blake3 decoded_blake3 (VYRN_BLESS=1 regenerates)\n",
    );
    let pinned = std::fs::read_to_string(&manifest_path).unwrap_or_default();
    for c in cases() {
        let mut cfg = CorpusConfig::reference(c.seed, c.frames);
        cfg.layout = c.layout;
        let cap = generate(&cfg).capture();
        let path = dir().join(format!("{}.cap", c.name));
        let cap_hash = blake3::hash(&cap).to_hex().to_string();
        let dec_hash = decoded_digest(&cap, c.layout);
        let line = format!(
            "{} {} {} {} {}",
            c.name, c.seed, c.frames, cap_hash, dec_hash
        );
        if bless {
            std::fs::write(&path, &cap).unwrap();
        } else {
            let on_disk = std::fs::read(&path)
                .unwrap_or_else(|e| panic!("{}: {e} (bless with VYRN_BLESS=1)", path.display()));
            assert_eq!(
                blake3::hash(&on_disk).to_hex().to_string(),
                cap_hash,
                "{}: generator output changed",
                c.name
            );
            assert_eq!(decoded_digest(&on_disk, c.layout), dec_hash);
            assert!(
                pinned.lines().any(|l| l == line),
                "{}: not pinned in MANIFEST as\n{line}",
                c.name
            );
        }
        manifest.push_str(&line);
        manifest.push('\n');
    }
    if bless {
        std::fs::write(&manifest_path, manifest).unwrap();
    }
}
