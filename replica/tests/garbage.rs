//! Recovery against garbage: a property test (random files in a drive directory) and a
//! seeded fuzz loop (random damage to real segments). Recovery never panics, never fails to
//! open, and never serves a block whose bytes differ from what was written.

mod common;

use std::path::{Path, PathBuf};

use common::*;
use proptest::prelude::*;
use vyrn_replica::disk::journal::cert::CertJournal;
use vyrn_replica::disk::journal::slot::{record_hash, SlotHead, SlotState};
use vyrn_replica::disk::journal::{BackendChoice, BlockJournal, JournalConfig, PAGE};

const REAL: u64 = 12;

fn build(dirs: &[PathBuf], be: BackendChoice) {
    let (mut j, _) = open(cfg(dirs.to_vec(), be));
    for h in 0..REAL {
        j.append(&bytes(h)).unwrap();
    }
    j.sync().unwrap();
}

/// Every served block is byte-identical to what was written; returns how many are served.
fn check_served(c: JournalConfig) -> usize {
    let (mut j, _rep) = match BlockJournal::open(c) {
        Ok(x) => x,
        Err(e) => panic!("recovery must open: {e}"),
    };
    let hs = j.heights();
    for &h in &hs {
        assert!(h < REAL || h == 1000, "invented height {h}");
        match j.read(h) {
            Ok(b) => assert_eq!(&b[..], &bytes(h)[..], "block {h} served with other bytes"),
            Err(e) => panic!("indexed block {h} unreadable: {e}"),
        }
    }
    // The journal still takes new blocks (1000 is on drive 1000 mod N).
    j.append(&bytes(1000)).unwrap();
    j.sync().unwrap();
    assert_eq!(&j.read(1000).unwrap()[..], &bytes(1000)[..]);
    hs.len()
}

#[derive(Debug, Clone)]
enum Content {
    Raw(Vec<u8>),
    /// A valid slot head claiming `pages` of record, then `tail` bytes.
    Slot {
        height: u64,
        pages: u8,
        tail: Vec<u8>,
    },
    /// A real block's slot, valid (a copy) or with one byte flipped.
    RealSlot {
        height: u64,
        flip: Option<u16>,
    },
    Dir,
}

fn content() -> impl Strategy<Value = Content> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..9000).prop_map(Content::Raw),
        (
            0u64..20,
            1u8..4,
            proptest::collection::vec(any::<u8>(), 0..9000)
        )
            .prop_map(|(height, pages, tail)| Content::Slot {
                height,
                pages,
                tail
            }),
        (0u64..REAL, proptest::option::of(any::<u16>()))
            .prop_map(|(height, flip)| Content::RealSlot { height, flip }),
        Just(Content::Dir),
    ]
}

fn name() -> impl Strategy<Value = String> {
    prop_oneof![
        (0u64..4).prop_map(|n| format!("seg-{n:016x}.blk")),
        any::<u64>().prop_map(|n| format!("seg-{n:016x}.blk")),
        any::<u32>().prop_map(|n| format!("seg-{n}.blk")),
        any::<u16>().prop_map(|n| format!("junk{n}")),
        Just(".vyrn-odirect-probe".to_string()),
        Just("certs.vcj".to_string()),
    ]
}

fn slot_bytes(height: u64, rec: &[u8]) -> Vec<u8> {
    let mut v = vec![0u8; PAGE];
    SlotHead {
        state: SlotState::Live,
        height,
        rec_len: rec.len() as u64,
        rec_hash: record_hash(rec),
    }
    .write_to(&mut v);
    v.extend_from_slice(rec);
    v
}

fn materialise(path: &Path, c: &Content) {
    let _ = std::fs::remove_dir_all(path);
    let _ = std::fs::remove_file(path);
    let b = match c {
        Content::Dir => {
            std::fs::create_dir_all(path.join("inner")).unwrap();
            return;
        }
        Content::Raw(b) => b.clone(),
        Content::Slot {
            height,
            pages,
            tail,
        } => {
            let mut v = vec![0u8; PAGE];
            SlotHead {
                state: SlotState::Live,
                height: *height,
                rec_len: *pages as u64 * PAGE as u64,
                rec_hash: record_hash(tail),
            }
            .write_to(&mut v);
            v.extend_from_slice(tail);
            v
        }
        Content::RealSlot { height, flip } => {
            let mut v = slot_bytes(*height, &bytes(*height));
            if let Some(f) = flip {
                let i = *f as usize % v.len();
                v[i] ^= 0x5A;
            }
            v
        }
    };
    std::fs::write(path, b).unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn random_files_in_a_drive_dir_never_panic_recovery(
        files in proptest::collection::vec((0usize..2, name(), content()), 1..6)
    ) {
        let t = TestDir::new("prop");
        let dirs = t.drives(2);
        build(&dirs, BackendChoice::Std);
        let mut clobbered = false;
        for (d, n, c) in &files {
            let p = dirs[*d].join(n);
            clobbered |= p.exists() && n.starts_with("seg-0");
            materialise(&p, c);
        }
        let served = check_served(cfg(dirs.clone(), BackendChoice::Std));
        if !clobbered {
            prop_assert_eq!(served as u64, REAL, "garbage beside good segments costs nothing");
        }
        // The cert journal's file name was among the garbage: it opens while one copy is a
        // file (a directory in its place is an I/O error on that copy).
        let c = CertJournal::open(&dirs);
        let usable = dirs.iter().any(|d| !d.join("certs.vcj").is_dir());
        prop_assert_eq!(c.is_ok(), usable);
    }
}

/// xorshift64*, so the fuzz loop is reproducible from its seed.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

fn segments(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "blk"))
        .collect();
    v.sort();
    v
}

fn mutate(rng: &mut Rng, path: &Path) {
    let mut b = std::fs::read(path).unwrap();
    match rng.below(7) {
        0 => {
            for _ in 0..1 + rng.below(8) {
                if !b.is_empty() {
                    let i = rng.below(b.len() as u64) as usize;
                    b[i] ^= 1 << rng.below(8);
                }
            }
        }
        1 => b.truncate(rng.below(b.len() as u64 + 1) as usize),
        2 => b.extend((0..rng.below(3 * PAGE as u64)).map(|_| rng.next() as u8)),
        3 => {
            let pages = b.len() / PAGE;
            if pages > 0 {
                let p = rng.below(pages as u64) as usize * PAGE;
                b[p..p + PAGE].fill(0);
            }
        }
        4 => {
            let pages = b.len() / PAGE;
            if pages > 1 {
                let (x, y) = (
                    rng.below(pages as u64) as usize,
                    rng.below(pages as u64) as usize,
                );
                for k in 0..PAGE {
                    b.swap(x * PAGE + k, y * PAGE + k);
                }
            }
        }
        5 => b = (0..rng.below(20_000)).map(|_| rng.next() as u8).collect(),
        _ => {
            // A random page overwritten with random bytes.
            let pages = b.len() / PAGE;
            if pages > 0 {
                let p = rng.below(pages as u64) as usize * PAGE;
                for x in &mut b[p..p + PAGE] {
                    *x = rng.next() as u8;
                }
            }
        }
    }
    std::fs::write(path, b).unwrap();
}

#[test]
fn fuzz_random_damage_to_real_segments_never_serves_a_bad_block() {
    // VYRN_FUZZ_SEED / VYRN_FUZZ_ROUNDS widen the search by hand; CI runs the default.
    let env = |k: &str, d: u64| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(d)
    };
    let mut rng = Rng(env("VYRN_FUZZ_SEED", 0x9E37_79B9_7F4A_7C15) | 1);
    let bes = backends();
    for round in 0..env("VYRN_FUZZ_ROUNDS", 120) as usize {
        let be = bes[round % bes.len()];
        let t = TestDir::new("fuzz");
        let dirs = t.drives(3);
        build(&dirs, be);
        let mut damaged = 0;
        for _ in 0..1 + rng.below(4) {
            let d = rng.below(3) as usize;
            let segs = segments(&dirs[d]);
            if segs.is_empty() {
                continue;
            }
            let s = &segs[rng.below(segs.len() as u64) as usize];
            mutate(&mut rng, s);
            damaged += 1;
        }
        let mut c = cfg(dirs.clone(), be);
        if round % 4 == 0 {
            c.verifying_key = None; // the hash alone must still keep bad bytes out
        }
        let served = check_served(c.clone());
        assert!(damaged > 0 || served as u64 == REAL);
        // A second recovery over what the first left finds nothing new to cut.
        let (_, rep) = BlockJournal::open(c).unwrap();
        assert!(rep.truncated.is_empty(), "round {round}: {rep:?}");
    }
}

#[test]
fn fuzz_random_bytes_as_cert_journal_copies() {
    let mut rng = Rng(42);
    for _ in 0..100 {
        let t = TestDir::new("certfuzz");
        let dirs = t.drives(2);
        for d in &dirs {
            std::fs::create_dir_all(d).unwrap();
            let b: Vec<u8> = (0..rng.below(5000)).map(|_| rng.next() as u8).collect();
            std::fs::write(d.join("certs.vcj"), b).unwrap();
        }
        let mut c = CertJournal::open(&dirs).unwrap();
        for i in 0..c.len() {
            c.get(i).unwrap();
        }
        c.append(vyrn_replica::disk::journal::cert::CertKind::Root, b"ok")
            .unwrap();
        c.sync().unwrap();
    }
}
