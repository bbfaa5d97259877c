//! Loom models of every ring and word (`RUSTFLAGS="--cfg loom" cargo test -p vyrn-rings
//! --release --lib -- loom`).
//!
//! Each model is small (capacity 2, two or three items, two or three threads) so that loom can
//! explore every interleaving and every value a relaxed or acquire load may return. Payloads go
//! through loom's `UnsafeCell` (the rings' own slots, or a cell next to a word), so a missing
//! happens-before edge is reported by loom as a data race, not just as a wrong value.

use loom::thread;

use crate::multi;
use crate::spsc;
use crate::sync::{Arc, AtomicUsize, Ordering, UnsafeCell};
use crate::words::{CloseReq, FinalHeight, LaneCut, PublishedCut, Released, SeqFenced, StepDone};

/// Run `f` under loom, exploring every interleaving with at most `PREEMPTIONS` preemptions
/// (loom's recommended bound: the bugs these protocols can have need one or two; the bound keeps
/// the spin-wait models from exploding; `LOOM_MAX_PREEMPTIONS` overrides it), and check that
/// loom really explored at least `min_iterations` executions.
///
/// The floor guards against a known gap in loom 0.7's partial-order reduction: it remembers
/// only the *last* load of each atomic, so when a thread loads a word and then stores it (or two
/// threads load it) the earlier load is forgotten and interleavings are silently skipped
/// (tokio-rs/loom#166, #392); a model hit by it explores a single execution and proves nothing.
/// The writers here never load the words they write (in release builds) for that reason, and
/// each model asserts a floor at about half of its observed count.
fn model(min_iterations: usize, f: impl Fn() + Sync + Send + 'static) {
    const PREEMPTIONS: usize = 3;
    let iterations = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = iterations.clone();
    let mut b = loom::model::Builder::new();
    let default_bound = b.preemption_bound.is_none();
    if default_bound {
        b.preemption_bound = Some(PREEMPTIONS);
    }
    b.check(move || {
        count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        f();
    });
    let n = iterations.load(std::sync::atomic::Ordering::Relaxed);
    if std::env::var_os("VYRN_LOOM_VERBOSE").is_some() {
        eprintln!("loom explored {n} executions");
    }
    // The floors are calibrated for the default bound; a smaller override explores less.
    assert!(
        !default_bound || n >= min_iterations,
        "loom explored only {n} executions (floor {min_iterations})"
    );
}

fn push_spin<T>(p: &mut spsc::Producer<T>, mut item: T) {
    while let Err(back) = p.push(item) {
        item = back;
        thread::yield_now();
    }
}

fn write_spin<T: Copy, const N: usize>(w: &mut multi::Writer<T, N>, mut item: T) {
    while let Err(back) = w.push(item) {
        item = back;
        thread::yield_now();
    }
}

/// A payload of several words written with plain stores through the slot's `UnsafeCell`.
fn payload(i: u64) -> [u64; 3] {
    [i, !i, i.wrapping_mul(0x9E37_79B9_7F4A_7C15)]
}

#[test]
fn loom_spsc_push_pop_in_order() {
    model(2000, || {
        let (mut p, mut c) = spsc::channel::<[u64; 3]>(2);
        let producer = thread::spawn(move || {
            for i in 0..3 {
                push_spin(&mut p, payload(i));
            }
        });
        let mut next = 0;
        while next < 3 {
            match c.pop() {
                Some(v) => {
                    assert_eq!(v, payload(next), "item {next} torn, lost or out of order");
                    next += 1;
                }
                None => thread::yield_now(),
            }
        }
        producer.join().unwrap();
        assert_eq!(c.pop(), None, "an item popped twice or invented");
    });
}

#[test]
fn loom_spsc_peek_sees_published_bytes() {
    model(2000, || {
        let (mut p, mut c) = spsc::channel::<[u64; 3]>(2);
        let producer = thread::spawn(move || {
            for i in 0..3 {
                push_spin(&mut p, payload(i));
            }
        });
        let mut next = 0;
        while next < 3 {
            let seen = c.peek().copied();
            match seen {
                Some(v) => {
                    assert_eq!(v, payload(next));
                    assert_eq!(c.pop(), Some(v));
                    next += 1;
                }
                None => thread::yield_now(),
            }
        }
        producer.join().unwrap();
    });
}

#[test]
fn loom_spsc_batches_publish_once_in_order() {
    model(200, || {
        let (mut p, mut c) = spsc::channel::<[u64; 3]>(2);
        let producer = thread::spawn(move || {
            let items = [payload(0), payload(1), payload(2)];
            let mut sent = 0;
            while sent < items.len() {
                let n = p.push_batch(&items[sent..]);
                if n == 0 {
                    thread::yield_now();
                }
                sent += n;
            }
        });
        let mut got = Vec::with_capacity(3);
        while got.len() < 3 {
            if c.pop_batch(&mut got, 3) == 0 {
                thread::yield_now();
            }
        }
        producer.join().unwrap();
        assert_eq!(got, [payload(0), payload(1), payload(2)]);
    });
}

#[test]
fn loom_spsc_push_from_iter_and_drain() {
    model(200, || {
        let (mut p, mut c) = spsc::channel::<u64>(2);
        let producer = thread::spawn(move || {
            let mut src = 0..3u64;
            let mut sent = 0;
            while sent < 3 {
                let n = p.push_from_iter(src.by_ref());
                if n == 0 {
                    thread::yield_now();
                }
                sent += n;
            }
        });
        let mut got = Vec::with_capacity(3);
        while got.len() < 3 {
            let before = got.len();
            c.pop_batch_with(2, |v| got.push(v));
            if got.len() == before {
                thread::yield_now();
            }
        }
        producer.join().unwrap();
        assert_eq!(got, [0, 1, 2]);
    });
}

/// Counts drops, to check that every item is dropped exactly once wherever it ends.
struct Counted(Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

#[test]
fn loom_spsc_drop_drops_each_item_once() {
    model(16, || {
        let drops = Arc::new(AtomicUsize::new(0));
        let (mut p, mut c) = spsc::channel::<Counted>(2);
        let d = drops.clone();
        let producer = thread::spawn(move || {
            push_spin(&mut p, Counted(d.clone()));
            push_spin(&mut p, Counted(d));
            // Dropping the producer here, possibly while the consumer still reads.
        });
        // Pop at most one, then drop the consumer (possibly before the producer is done).
        drop(c.pop());
        drop(c);
        producer.join().unwrap();
        assert_eq!(drops.load(Ordering::Relaxed), 2);
    });
}

/// Three threads (the writer and two cursors). Loom cannot bound a model in which two threads
/// spin-wait at once, so every thread makes a bounded number of attempts; after the joins the
/// main thread finishes the pushes and drains both cursors, and the concatenation must be every
/// entry exactly once, in order, for each cursor.
#[test]
fn loom_multi_every_cursor_reads_every_entry_in_order() {
    model(50000, || {
        let (mut w, [mut a, mut b]) = multi::channel::<[u64; 3], 2>(2);
        let writer = thread::spawn(move || {
            let mut pushed = 0;
            for _ in 0..4 {
                if pushed < 3 && w.push(payload(pushed)).is_ok() {
                    pushed += 1;
                } else {
                    thread::yield_now();
                }
            }
            (w, pushed)
        });
        let reader_b = thread::spawn(move || {
            let mut got = Vec::new();
            for _ in 0..3 {
                match b.pop() {
                    Some(v) => got.push(v),
                    None => thread::yield_now(),
                }
            }
            (b, got)
        });
        let mut got_a = Vec::new();
        for _ in 0..3 {
            match a.peek() {
                Some(v) => {
                    got_a.push(v);
                    assert!(a.advance());
                }
                None => thread::yield_now(),
            }
        }
        let (mut w, mut pushed) = writer.join().unwrap();
        let (mut b, mut got_b) = reader_b.join().unwrap();
        while pushed < 3 {
            while let Err(back) = w.push(payload(pushed)) {
                // Single-threaded now: make room by draining both cursors.
                assert_eq!(back, payload(pushed));
                got_a.extend(a.pop());
                got_b.extend(b.pop());
            }
            pushed += 1;
        }
        while let Some(v) = a.pop() {
            got_a.push(v);
        }
        while let Some(v) = b.pop() {
            got_b.push(v);
        }
        let all = [payload(0), payload(1), payload(2)];
        assert_eq!(got_a, all, "cursor A lost, doubled or reordered an entry");
        assert_eq!(got_b, all, "cursor B lost, doubled or reordered an entry");
    });
}

#[test]
fn loom_multi_writer_never_overwrites_unread_entry() {
    model(15, || {
        let (mut w, [mut fast, slow]) = multi::channel::<[u64; 3], 2>(2);
        w.push(payload(0)).unwrap();
        w.push(payload(1)).unwrap();
        let fast_reader = thread::spawn(move || {
            assert_eq!(fast.pop(), Some(payload(0)));
            assert_eq!(fast.pop(), Some(payload(1)));
            assert_eq!(fast.pop(), None);
        });
        // The slow cursor reads entry 0 in place while the writer tries to reuse its slot.
        let slow_reader = thread::spawn(move || {
            assert_eq!(slow.peek(), Some(payload(0)));
            slow
        });
        // Whatever the fast cursor has done, the slow one has not passed entry 0.
        assert_eq!(w.push(payload(2)), Err(payload(2)));
        let mut slow = slow_reader.join().unwrap();
        fast_reader.join().unwrap();
        assert_eq!(w.push(payload(2)), Err(payload(2)));
        assert!(slow.advance());
        w.push(payload(2)).unwrap();
        assert_eq!(slow.pop(), Some(payload(1)));
        assert_eq!(slow.pop(), Some(payload(2)));
    });
}

#[test]
fn loom_multi_slow_cursor_frees_slot_concurrently() {
    model(8, || {
        let (mut w, [mut fast, mut slow]) = multi::channel::<[u64; 3], 2>(2);
        w.push(payload(0)).unwrap();
        w.push(payload(1)).unwrap();
        assert_eq!(fast.pop(), Some(payload(0)));
        // The slow cursor reads entry 0 and passes it while the writer retries slot 0.
        let slow_reader = thread::spawn(move || {
            assert_eq!(slow.pop(), Some(payload(0)));
            slow
        });
        write_spin(&mut w, payload(2));
        let mut slow = slow_reader.join().unwrap();
        assert_eq!(slow.pop(), Some(payload(1)));
        assert_eq!(slow.pop(), Some(payload(2)));
        assert_eq!(fast.pop(), Some(payload(1)));
        assert_eq!(fast.pop(), Some(payload(2)));
    });
}

#[test]
fn loom_released_publishes_frame_written_before() {
    model(20, || {
        let released = Arc::new(Released::new(0));
        let frame = Arc::new(UnsafeCell::new([0u64; 2]));
        let (r, f) = (released.clone(), frame.clone());
        let stream = thread::spawn(move || {
            // SAFETY: only this thread writes the frame, and only before the release store.
            f.with_mut(|p| unsafe { p.write([1, 2]) });
            r.store(1);
            // SAFETY: as above, step 2's frame; readers of step 1 only read before `need` 2.
            f.with_mut(|p| unsafe { p.write([3, 4]) });
            r.store(2);
        });
        released.wait_for(2);
        // SAFETY: `released >= 2` was acquired, so both frame writes happen before this read.
        let seen = frame.with(|p| unsafe { p.read() });
        assert_eq!(seen, [3, 4]);
        stream.join().unwrap();
    });
}

#[test]
fn loom_released_both_halves_gate_the_fill() {
    model(60, || {
        let a = Arc::new(Released::new(0));
        let b = Arc::new(Released::new(0));
        let frame_a = Arc::new(UnsafeCell::new(0u64));
        let frame_b = Arc::new(UnsafeCell::new(0u64));
        let streams: Vec<_> = [
            (a.clone(), frame_a.clone(), 11),
            (b.clone(), frame_b.clone(), 22),
        ]
        .into_iter()
        .map(|(r, f, v)| {
            thread::spawn(move || {
                // SAFETY: this stream core is the frame's only writer, before its release.
                f.with_mut(|p| unsafe { p.write(v) });
                r.store(1);
            })
        })
        .collect();
        Released::wait_both(&a, 1, &b, 1);
        // SAFETY: both release words were acquired at >= 1 after their frame writes.
        let va = frame_a.with(|p| unsafe { p.read() });
        // SAFETY: as above.
        let vb = frame_b.with(|p| unsafe { p.read() });
        assert_eq!((va, vb), (11, 22));
        for s in streams {
            s.join().unwrap();
        }
    });
}

#[test]
fn loom_lane_cut_gate_monotone_and_consistent() {
    model(10000, || {
        let cut = Arc::new(LaneCut::new(0, 0));
        let frames = Arc::new([UnsafeCell::new(0u64), UnsafeCell::new(0u64)]);
        let (w, f) = (cut.clone(), frames.clone());
        let stream = thread::spawn(move || {
            for s in 1..=2u64 {
                // SAFETY: the stream core is the only writer of its frames, before the store.
                f[s as usize - 1].with_mut(|p| unsafe { p.write(s * 100) });
                w.store(s, s * 10);
            }
        });
        let (mut last_step, mut last_cut) = (0, 0);
        for _ in 0..2 {
            let (s, c) = cut.load();
            assert_eq!(c, s * 10, "torn pair ({s}, {c})");
            assert!(s >= last_step && c >= last_cut, "LaneCut moved back");
            (last_step, last_cut) = (s, c);
            let gate = cut.cut();
            assert!(gate >= last_cut, "cut moved back");
            last_cut = gate;
            for q in [10u64, 20] {
                if cut.covers(q) {
                    // SAFETY: `cut >= q` was acquired; the frame of step q/10 was written before.
                    let v = frames[q as usize / 10 - 1].with(|p| unsafe { p.read() });
                    assert_eq!(v, q * 10, "gate open before the frame was visible");
                }
            }
        }
        stream.join().unwrap();
        assert_eq!(cut.load(), (2, 20));
    });
}

#[test]
fn loom_lane_cut_try_load_never_torn_with_repeated_step() {
    model(1500, || {
        // The same step published twice with a growing cut: equal step reads must still give a
        // pair that was written.
        let cut = Arc::new(LaneCut::new(1, 5));
        let w = cut.clone();
        let stream = thread::spawn(move || {
            w.store(1, 6);
            w.store(2, 7);
        });
        for _ in 0..2 {
            if let Some(pair) = cut.try_load() {
                assert!(
                    [(1, 5), (1, 6), (2, 7)].contains(&pair),
                    "torn pair {pair:?}"
                );
            }
        }
        stream.join().unwrap();
    });
}

#[test]
fn loom_step_done_pair_never_torn() {
    model(1500, || {
        let done = Arc::new(StepDone::new(0, 0));
        let fills = Arc::new(UnsafeCell::new(0u64));
        let (w, f) = (done.clone(), fills.clone());
        let bbo = thread::spawn(move || {
            // SAFETY: the BBO core is the only writer, before its step-end store.
            f.with_mut(|p| unsafe { p.write(7) });
            w.store(1, 0b01);
            w.store(2, 0b10);
        });
        let mut last = 0;
        for _ in 0..2 {
            let Some((s, lanes)) = done.try_load() else {
                continue;
            };
            let expect = [0, 0b01, 0b10][s as usize];
            assert_eq!(lanes, expect, "torn pair ({s}, {lanes:#b})");
            assert!(s >= last);
            last = s;
            if s >= 1 {
                // SAFETY: step 1's end was acquired; the write before it is visible.
                assert_eq!(fills.with(|p| unsafe { p.read() }), 7);
            }
        }
        bbo.join().unwrap();
        assert_eq!(done.load(), (2, 0b10));
    });
}

#[test]
fn loom_close_req_each_height_taken_once_in_order() {
    model(100, || {
        let req = Arc::new(CloseReq::new());
        let poster = req.clone();
        let core4 = thread::spawn(move || {
            for h in [1u64, 2] {
                while poster.post(h).is_err() {
                    thread::yield_now();
                }
            }
        });
        let mut taken = Vec::new();
        while taken.len() < 2 {
            match req.take() {
                Some(h) => taken.push(h),
                None => thread::yield_now(),
            }
        }
        core4.join().unwrap();
        assert_eq!(taken, [1, 2]);
        assert_eq!(req.take(), None);
    });
}

#[test]
fn loom_seq_fenced_set_once_never_cleared() {
    model(250, || {
        let fenced = Arc::new(SeqFenced::new());
        let setters: Vec<_> = (0..2)
            .map(|_| {
                let f = fenced.clone();
                thread::spawn(move || f.set())
            })
            .collect();
        let first = fenced.is_set();
        let second = fenced.is_set();
        assert!(!first || second, "seq_fenced was cleared");
        let wins = setters
            .into_iter()
            .map(|t| t.join().unwrap())
            .filter(|&w| w)
            .count();
        assert_eq!(wins, 1, "exactly one set() call sets the fence");
        assert!(fenced.is_set());
    });
}

#[test]
fn loom_final_height_monotone() {
    model(20, || {
        let fin = Arc::new(FinalHeight::new(0));
        let cert = Arc::new(UnsafeCell::new(0u64));
        let (f, c) = (fin.clone(), cert.clone());
        let listener = thread::spawn(move || {
            // SAFETY: the listener is the only writer of the certificate, before publishing.
            c.with_mut(|p| unsafe { p.write(5) });
            f.publish(5);
            f.publish(3); // late, lower: ignored
        });
        let a = fin.load();
        let b = fin.load();
        assert!(
            b >= a && [0, 5].contains(&a) && [0, 5].contains(&b),
            "({a}, {b})"
        );
        if b == 5 {
            // SAFETY: height 5 was acquired; the certificate write before it is visible.
            assert_eq!(cert.with(|p| unsafe { p.read() }), 5);
        }
        listener.join().unwrap();
        assert_eq!(fin.load(), 5);
    });
}

#[test]
fn loom_published_cut_never_torn() {
    model(200, || {
        let cut = Arc::new(PublishedCut::new(2));
        let w = cut.clone();
        let core = thread::spawn(move || {
            w.store(1, &[1, 1]);
            w.store(2, &[2, 2]);
        });
        let mut out = [0u64; 2];
        let mut last = 0;
        for _ in 0..2 {
            if cut.try_load(&mut out) {
                assert_eq!(out[0], out[1], "torn cut {out:?}");
                assert!(out[0] >= last, "cut went back");
                last = out[0];
            }
        }
        core.join().unwrap();
        cut.load(&mut out);
        assert_eq!(out, [2, 2]);
    });
}
