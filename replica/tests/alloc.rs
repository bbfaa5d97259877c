//! Hot-path rule for the data side (07 §5.3–§5.4): no allocation per message. A counting
//! allocator watches only the data side's calls — DATA frames stored (the data cores' work)
//! and the decoder's records and HashRuns joined (core 3's) — over the replica bench's peak
//! capture, after each session's first packet (a session's first payload may size its tables).

use vyrn_engine::workload::Mix;
use vyrn_engine::EngineConfig;
use vyrn_replica::front::data::{DataConfig, DataSide, NullDataOut as NullData};
use vyrn_replica::front::decode::{DecodedOut, Decoder};
use vyrn_seq::testkit::alloc::{counted, Counting};
use vyrn_seq::testkit::capture::capture_batched;
use vyrn_wire::decoder::{Awaiting, Pos};
use vyrn_wire::msg::PktKey;
use vyrn_wire::records::PacketRecord;

#[global_allocator]
static A: Counting = Counting;

/// Core 3's join: each record and HashRun entry into the data side, counted; the decoder's own
/// work is not.
struct Join<'a> {
    data: &'a mut DataSide,
    allocs: u64,
    records: u64,
    hashes: u64,
}
impl DecodedOut for Join<'_> {
    fn record(&mut self, _h: u64, at: Pos, r: &PacketRecord) {
        let (res, n) = counted(|| self.data.on_record(at.stream, r, 0, &mut NullData));
        res.expect("record");
        self.allocs += n;
        self.records += 1;
    }
    fn hash(&mut self, at: Pos, _lane: u8, rec: &Awaiting, pkt_hash: u64) {
        let key = PktKey {
            session: rec.session,
            pkt_seq: rec.pkt_seq,
        };
        let (res, n) = counted(|| {
            self.data
                .on_hash(at.stream, key, pkt_hash, 0, &mut NullData)
        });
        res.expect("hash");
        self.allocs += n;
        self.hashes += 1;
    }
    fn mark(&mut self, stream: u8, height: u64, _last_step: u64) {
        self.data.on_mark(stream, height).expect("mark");
    }
}

#[test]
fn the_data_side_stores_and_joins_without_allocating() {
    let cfg = EngineConfig::test_home(4, 8);
    let c = capture_batched(&cfg, 3, 1_000_000, 5, Mix::peak(), 1_200, 16);
    let n_streams = cfg.layout.n_streams;
    let mut d = DataSide::new(DataConfig::new(cfg.book, 3, 1, 0, n_streams));
    d.prefault();
    // Every session's first packet first (its tables sized), then the rest, counted.
    let warm = 64;
    for (i, f) in c.data[..warm].iter().enumerate() {
        d.on_data_frame(0, f, i as u64, &mut NullData)
            .expect("data frame");
    }
    let mut allocs = 0;
    for (i, f) in c.data[warm..].iter().enumerate() {
        let (res, n) = counted(|| d.on_data_frame(0, f, (warm + i) as u64, &mut NullData));
        res.expect("data frame");
        allocs += n;
    }
    assert_eq!(
        allocs,
        0,
        "storing {} payloads allocated",
        c.data.len() - warm
    );
    let (held, _) = d.store_len();
    assert_eq!(held, c.data.len(), "every payload stored");

    let mut dec = Decoder::new(cfg.layout, 1).expect("decoder");
    let mut j = Join {
        data: &mut d,
        allocs: 0,
        records: 0,
        hashes: 0,
    };
    for (i, f) in c.frames.iter().enumerate() {
        dec.on_frame(f, i as u64, &mut j);
    }
    assert!(j.records >= c.packets.len() as u64 && j.hashes > 0);
    assert_eq!(
        j.allocs, 0,
        "joining {} records and {} hashes allocated",
        j.records, j.hashes
    );
}
