//! Planted bugs for the simulator to find (`vyrn-sim`, docs/testing.md; feature `planted`,
//! never in the product build).

use std::cell::Cell;

std::thread_local! {
    static MISMERGE_AT: Cell<u64> = const { Cell::new(0) };
    static SEEN: Cell<u64> = const { Cell::new(0) };
}

/// From now on, on this thread, the `n`-th PacketRecord any decoder emits carries the next
/// packet's `pkt_seq` — one record mis-merged; 0: off.
pub fn set_mismerge(n: u64) {
    MISMERGE_AT.with(|c| c.set(n));
    SEEN.with(|c| c.set(0));
}

pub(super) fn pkt_seq(p: u32) -> u32 {
    let at = MISMERGE_AT.with(Cell::get);
    if at == 0 {
        return p;
    }
    let n = SEEN.with(|c| {
        c.set(c.get() + 1);
        c.get()
    });
    if n == at {
        p.wrapping_add(1)
    } else {
        p
    }
}
