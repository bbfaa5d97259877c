//! `vyrn up --isolate-seq`'s switch in a replica's process (feature `lab`): SIGUSR1 cuts the box
//! off from this replica, SIGUSR2 heals it (`vyrn_replica::node::Node::isolate_seq_on`). A
//! signal, not a time given at start, so that `vyrn up` cuts the box from every replica and the
//! standby at one instant of the load's clock, as it stops and resumes the box for
//! `--stall-seq`.

use std::sync::atomic::{AtomicBool, Ordering};

/// Set while the box is cut off.
static ISOLATED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_cut(_: libc::c_int) {
    ISOLATED.store(true, Ordering::Relaxed);
}

extern "C" fn on_heal(_: libc::c_int) {
    ISOLATED.store(false, Ordering::Relaxed);
}

/// Install the two handlers; the flag they set.
pub fn isolation_flag() -> &'static AtomicBool {
    let cut: extern "C" fn(libc::c_int) = on_cut;
    let heal: extern "C" fn(libc::c_int) = on_heal;
    // SAFETY: signal(2) with a handler that only stores to a static atomic (async-signal-safe);
    // no other code of the process handles SIGUSR1.
    unsafe {
        libc::signal(libc::SIGUSR1, cut as libc::sighandler_t);
    }
    // SAFETY: as above, for SIGUSR2.
    unsafe {
        libc::signal(libc::SIGUSR2, heal as libc::sighandler_t);
    }
    &ISOLATED
}
