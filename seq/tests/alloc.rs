//! Hot-path rule for the stream cores: no allocation per message. A counting allocator watches
//! only the stream cores' polls of a one-thread box in benchmark mode (frames counted, not
//! logged; no per-frame `FrameInfo`) over a steady load; what is left is per block (the
//! BlockMark's section and the block's record list for the order hasher), not per message.

use vyrn_engine::workload::{Input, Mix, Workload};
use vyrn_engine::EngineConfig;
use vyrn_seq::testkit::alloc::{self, set_counting, Counting};
use vyrn_seq::testkit::{SimBox, Tile};
use vyrn_seq::SeqConfig;

#[global_allocator]
static A: Counting = Counting;

#[test]
fn stream_cores_allocate_per_block_not_per_message() {
    let mut e = EngineConfig::test_home(4, 8);
    for a in e.accounts.iter_mut() {
        a.max_open_orders = 1 << 16;
        a.max_exposure = 1 << 40;
    }
    e.book_cfg.max_orders = 1 << 20;
    let block_ns = 200_000;
    let mut home = SimBox::new(SeqConfig {
        engine: e.clone(),
        epoch: 1,
        block_ns,
        seq_key: [1; 32],
        voters: 4,
        rtx_ring_bytes: 1 << 20,
        tenure: vyrn_seq::shm::TenureId::FIRST,
    });
    home.set_log_frames(false);
    let mut w = Workload::new(&e, 9, Mix::clean());
    let others: Vec<Tile> = home
        .tiles()
        .into_iter()
        .filter(|t| !matches!(t, Tile::Stream(_)))
        .collect();
    let mut run = |home: &mut SimBox, rounds: usize, count: bool| -> (u64, u64) {
        let mut now = 0;
        for _ in 0..rounds {
            if let Input::Packet { rx_ts, bytes } = w.next_input() {
                home.receive(rx_ts, bytes);
            }
            now = w.now();
            for &t in &others {
                home.poll(t, now);
            }
            set_counting(count);
            home.poll(Tile::Stream(0), now);
            home.poll(Tile::Stream(1), now);
            set_counting(false);
            home.drain_wire();
        }
        (now, alloc::count())
    };
    // Warm up: rings, queues and the frame ring reach their steady size (1 MiB ring: frames
    // start coming back for reuse).
    run(&mut home, 60_000, false);
    let steps0 = home.words().step_done();
    let blocks0 = home.closed_height();
    let frames0 = frames_written(&home);
    let (_, allocs) = run(&mut home, 20_000, true);
    let steps = home.words().step_done() - steps0;
    let blocks = home.closed_height() - blocks0;
    let frames = frames_written(&home) - frames0;
    assert!(
        steps > 5_000 && frames > 5_000,
        "steps {steps}, frames {frames}"
    );
    // Per block: the BlockMark section, the lane bounds, the record list handed to the hasher.
    assert!(
        blocks >= 10 && allocs <= 3 * (blocks + 1) + 8,
        "{allocs} allocations for {steps} steps, {frames} frames, {blocks} blocks"
    );
    eprintln!("{allocs} allocations for {steps} steps, {frames} frames, {blocks} blocks");
}

/// Frames the stream cores wrote (both substreams), as the gate counts them.
fn frames_written(home: &SimBox) -> u64 {
    let g = &home.words().gate;
    let r = std::sync::atomic::Ordering::Relaxed;
    g[0].frames.load(r) + g[1].frames.load(r)
}
