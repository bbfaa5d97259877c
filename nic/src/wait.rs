//! Waiting without adding latency: a thread that must not spin — a cold tile's
//! thread, a voter double, a load generator sharing its core — blocks in `ppoll` on the
//! sockets it reads with a nanosecond timeout, after taking 1 ns of timer slack so the kernel
//! wakes it when asked, not up to 50 µs later (the default slack).

use std::os::fd::RawFd;

/// Set this thread's timer slack to 1 ns (`PR_SET_TIMERSLACK`); false if the kernel refused.
pub fn fine_timer_slack() -> bool {
    // SAFETY: PR_SET_TIMERSLACK takes one integer argument and changes only this thread.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) == 0 }
}

/// Set this thread's nice value (Linux: `setpriority` on the thread id); false if refused
/// (lowering it below 0 needs CAP_SYS_NICE). A measuring client on a core it shares raises
/// its priority so its wake-ups are not queued behind other threads: what it measures is then
/// the box, not its own scheduling.
pub fn set_nice(nice: i32) -> bool {
    // SAFETY: gettid takes no arguments and returns this thread's id.
    let tid = unsafe { libc::gettid() };
    // SAFETY: plain syscall on this thread's id; changes only its scheduling weight.
    unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, nice) == 0 }
}

/// Block until one of `fds` is readable or `timeout_ns` passed; true if one is readable.
/// An interrupted wait (EINTR) returns false, like a timeout. At most 16 descriptors.
pub fn wait_readable(fds: &[RawFd], timeout_ns: u64) -> bool {
    let mut p = [libc::pollfd {
        fd: -1,
        events: libc::POLLIN,
        revents: 0,
    }; 16];
    let n = fds.len().min(16);
    for (d, &fd) in p.iter_mut().zip(&fds[..n]) {
        d.fd = fd;
    }
    let ts = libc::timespec {
        tv_sec: (timeout_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (timeout_ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: p is a live array of at least n pollfds (ppoll writes only their revents), ts a
    // live timespec, and a null sigmask leaves the thread's signal mask as it is.
    let rc = unsafe { libc::ppoll(p.as_mut_ptr(), n as libc::nfds_t, &ts, std::ptr::null()) };
    rc > 0
}

/// A flag set by SIGTERM or SIGINT, for a process's main loop to end cleanly (print its summary,
/// close its files). The handlers are installed on the first call; later calls return the same
/// flag.
pub fn stop_on_signals() -> &'static std::sync::atomic::AtomicBool {
    use std::sync::atomic::{AtomicBool, Ordering};
    static STOP: AtomicBool = AtomicBool::new(false);
    static ONCE: std::sync::Once = std::sync::Once::new();
    extern "C" fn on_signal(_: libc::c_int) {
        STOP.store(true, Ordering::Relaxed);
    }
    ONCE.call_once(|| {
        let h = on_signal as extern "C" fn(libc::c_int) as *const () as libc::sighandler_t;
        for sig in [libc::SIGTERM, libc::SIGINT] {
            // SAFETY: the handler does one atomic store to a static (async-signal-safe); `h` is
            // a valid `extern "C" fn(c_int)`.
            unsafe { libc::signal(sig, h) };
        }
    });
    &STOP
}

/// A comma-separated core list (`0,2,3`).
pub fn parse_cores(s: &str) -> Result<Vec<usize>, String> {
    s.split(',')
        .map(|c| {
            c.trim()
                .parse::<usize>()
                .map_err(|e| format!("core {c:?}: {e}"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;
    use std::os::fd::AsRawFd;
    use std::time::Instant;

    /// A readable socket wakes the wait at once; an idle one times out near the timeout, not
    /// the default slack's 50 µs later (generous bounds: a shared CI box).
    #[test]
    fn wakes_on_data_and_times_out() {
        assert!(fine_timer_slack());
        let a = UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").unwrap();
        let fd = a.as_raw_fd();
        let t = Instant::now();
        assert!(!wait_readable(&[fd], 2_000_000));
        let waited = t.elapsed().as_nanos() as u64;
        assert!(waited >= 2_000_000, "woke early: {waited} ns");
        b.send_to(b"x", a.local_addr().unwrap()).unwrap();
        let t = Instant::now();
        assert!(wait_readable(&[fd], 5_000_000_000));
        assert!(t.elapsed().as_millis() < 1000);
        // No descriptor at all: a plain sleep.
        assert!(!wait_readable(&[], 1_000));
    }
}
