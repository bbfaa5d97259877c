//! The order hasher's full-hash lists (07 §4.6, §5.6): each closed block's list per substream,
//! as the hasher serves it to a HashListReq (`HashList` parts), is exactly the leaves of its
//! header's `data_root`; it is kept REP_SEQ_HASHLIST_MS and then dropped. (Served over UDP to
//! registered voters only: `ports.rs`, `e2e_client.rs`.)

use vyrn_engine::workload::{Input, Mix, Workload};
use vyrn_engine::EngineConfig;
use vyrn_seq::testkit::{SimBox, WireEvent};
use vyrn_seq::SeqConfig;
use vyrn_wire::consts::REP_SEQ_HASHLIST_MS;
use vyrn_wire::frame::{FrameHeader, FrameKind};
use vyrn_wire::header::{data_root, BlockHeader, DataRootHasher};

fn home() -> (SimBox, EngineConfig) {
    let e = EngineConfig::test_home(4, 4);
    let h = SimBox::new(SeqConfig {
        engine: e.clone(),
        epoch: 1,
        block_ns: 50_000,
        seq_key: [5; 32],
        voters: 4,
        rtx_ring_bytes: 8 << 20,
        tenure: vyrn_seq::shm::TenureId::FIRST,
    });
    (h, e)
}

fn headers(home: &mut SimBox) -> Vec<BlockHeader> {
    home.drain_wire()
        .into_iter()
        .filter_map(|ev| match ev {
            WireEvent::Frame { bytes, path: 0, .. } => {
                let (h, body) = FrameHeader::parse(&bytes).ok()?;
                (h.kind == FrameKind::Header).then(|| BlockHeader::parse(body).unwrap())
            }
            _ => None,
        })
        .collect()
}

fn root_of(lists: &[Vec<[u8; 32]>; 2]) -> [u8; 32] {
    let r: Vec<[u8; 32]> = lists
        .iter()
        .map(|l| {
            let mut d = DataRootHasher::default();
            for h in l {
                d.push(h);
            }
            d.finish()
        })
        .collect();
    data_root(&r[0], &r[1])
}

#[test]
fn hash_lists_are_the_data_root_leaves_and_expire() {
    let (mut home, e) = home();
    let mut w = Workload::new(&e, 21, Mix::everything());
    let tiles = home.tiles();
    let mut now = 0;
    let mut hdrs = Vec::new();
    for _ in 0..3000 {
        if let Input::Packet { rx_ts, bytes } = w.next_input() {
            home.receive(rx_ts, bytes);
        }
        now = now.max(w.now());
        for &t in &tiles {
            home.poll(t, now);
        }
        hdrs.extend(headers(&mut home));
    }
    let mut checked = 0;
    let mut nonempty = 0;
    for h in &hdrs {
        let lists = home
            .hash_list(h.height, now)
            .expect("kept within REP_SEQ_HASHLIST_MS");
        assert_eq!(root_of(&lists), h.data_root, "height {}", h.height);
        checked += 1;
        nonempty += usize::from(!lists[0].is_empty() || !lists[1].is_empty());
    }
    assert!(
        checked > 5 && nonempty > 5,
        "{checked} headers, {nonempty} with packets"
    );
    // Past REP_SEQ_HASHLIST_MS the lists are gone (the hasher drops them as it runs).
    let later = now + (REP_SEQ_HASHLIST_MS + 1) * 1_000_000;
    home.settle(later, 100);
    assert!(home.hash_list(hdrs[0].height, later).is_none());
}

/// A fenced box answers no HashListReq (INV-REP-6; security review F8: answered after the fence).
#[test]
fn a_fenced_box_serves_no_hash_list() {
    let (mut home, e) = home();
    let mut w = Workload::new(&e, 22, Mix::clean());
    let tiles = home.tiles();
    let mut now = 0;
    let mut hdrs = Vec::new();
    for _ in 0..1500 {
        if let Input::Packet { rx_ts, bytes } = w.next_input() {
            home.receive(rx_ts, bytes);
        }
        now = now.max(w.now());
        for &t in &tiles {
            home.poll(t, now);
        }
        hdrs.extend(headers(&mut home));
    }
    let h = hdrs.last().expect("a header").height;
    assert!(home.hash_list(h, now).is_some());
    home.words().fence();
    assert!(home.hash_list(h, now).is_none());
}
